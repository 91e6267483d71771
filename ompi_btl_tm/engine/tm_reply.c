/*
 * tm_reply.c - what a receive sends back: its ACK (synchronous sends) and
 * FIN (rendezvous), owed when there is no memory for them, and the
 * software rendezvous read that ends in the FIN.
 *
 * Contract: a reply that cannot be sent now is owed (the receive does not
 * complete) and retried from every engine call, so a sender never waits
 * for a reply that was dropped; a FIN goes whatever the read's outcome,
 * flagged TM_APP_FIN_ERR when the receive failed (doc/DESIGN.md, "Long
 * messages").  Owns: eng->owed, the tm_recv rd_* fields.
 */
#include <stdlib.h>
#include <string.h>
#include "engine/tm_engine_priv.h"

/* ---- replies (ACK, FIN) --------------------------------------------- */

/*
 * Sends r's ACK or FIN (r->send_seq names the send; a FIN copies r->hdr).
 * With no memory for it, r owes it: r does not complete (ops_pending) and
 * tme_recv_pay_owed() tries again from every engine call, so the sender
 * never waits forever for a reply that was dropped.
 */
void tme_recv_reply(struct tm_engine *eng, struct tm_recv *r, int type)
{
	int rc = type == TX_ACK ? tme_send_ack(eng, r->peer, r->send_seq) :
				  tme_send_fin(eng, r->peer, r->hdr);

	if (rc == TM_OK)
		return;
	r->flags |= type == TX_ACK ? RF_OWE_ACK : RF_OWE_FIN;
	r->ops_pending++;
	ucs_list_add_tail(&eng->owed, &r->owed_link);
	tme_pend(eng, TM_PEND_WORK);
	eng->st.replies_owed++;
}

/* Sends the owed replies, oldest first, until memory runs short again. */
int tme_recv_pay_owed(struct tm_engine *eng)
{
	struct tm_recv *r;
	int n = 0, rc;

	while (!ucs_list_is_empty(&eng->owed)) {
		r = ucs_list_head(&eng->owed, struct tm_recv, owed_link);
		rc = (r->flags & RF_OWE_ACK) ?
		     tme_send_ack(eng, r->peer, r->send_seq) :
		     tme_send_fin(eng, r->peer, r->hdr);
		if (rc != TM_OK)
			break;
		ucs_list_del(&r->owed_link);
		r->flags &= ~(RF_OWE_ACK | RF_OWE_FIN);
		r->ops_pending--;
		tme_recv_try_done(eng, r);
		n++;
	}
	return n;
}

/* ---- software rendezvous -------------------------------------------- */

/* The FIN of a transfer this receive failed says so (TM_APP_FIN_ERR), and
 * the send fails too (doc/DESIGN.md, "Long messages"). */
void tme_fin_failed(struct tm_recv *r)
{
	struct ibv_tmh *tmh = (struct ibv_tmh *)r->hdr;

	tmh->app_ctx = htobe32(be32toh(tmh->app_ctx) | TM_APP_FIN_ERR);
}

/*
 * r->hdr holds the request's TMH+RVH, msg_len is the sender's length: reads
 * min(msg_len, buffer), in pieces the device accepts (tm_tx.c), then FINs.
 */
void tme_sw_rndv_start(struct tm_engine *eng, struct tm_recv *r,
		       uint64_t msg_len)
{
	const struct ibv_rvh *rvh = (const void *)(r->hdr + TMH_LEN);
	struct tm_tx *tx;

	r->rd_va = be64toh(rvh->va);
	r->rd_rkey = be32toh(rvh->rkey);
	r->rd_len = msg_len;
	r->msg_len = msg_len;
	eng->st.rndv_sw++;
	if (r->rd_len && r->len && !r->mr) {
		if (tm_dev_mem_get(eng->dev, r->buf, r->len,
				   IBV_ACCESS_LOCAL_WRITE, &r->mr) == TM_OK)
			r->own_mr = 1;
	}
	if (!r->rd_len || !r->len || !r->mr) {
		int failed = !r->mr && r->rd_len && r->len;

		r->recv_len = 0;
		if (failed)
			tme_fin_failed(r);
		tme_recv_reply(eng, r, TX_FIN);
		tme_recv_finish(eng, r, failed ? TM_REQ_ERROR :
				r->rd_len > r->len ? TM_REQ_TRUNCATED :
				TM_REQ_OK);
		return;
	}
	tx = tme_tx_new(eng, TX_READ, r->peer);
	if (!tx || r->peer >= eng->npeers) {
		if (tx)
			tme_tx_free(tx);
		tme_fin_failed(r);
		tme_recv_reply(eng, r, TX_FIN);
		tme_recv_finish(eng, r, TM_REQ_ERROR);
		return;
	}
	tx->recv = r;
	tx->rd_end = r->rd_len < r->len ? r->rd_len : r->len;
	r->state = R_SW_READ;
	eng->reads_active++;
	tme_tx_queue(eng, tx);
}

void tme_sw_rndv_done(struct tm_engine *eng, struct tm_recv *r, int status)
{
	eng->reads_active--;
	if (status != IBV_WC_SUCCESS)
		tme_fin_failed(r);
	tme_recv_reply(eng, r, TX_FIN);
	r->recv_len = r->rd_len < r->len ? r->rd_len : r->len;
	if (status != IBV_WC_SUCCESS)
		tme_recv_finish(eng, r, TM_REQ_ERROR);
	else
		tme_recv_finish(eng, r, r->rd_len > r->len ? TM_REQ_TRUNCATED :
				    TM_REQ_OK);
}
