/*
 * tm_reply.c - a receive's ACK and FIN, owed replies, software rendezvous
 * reads.  Contract: tm_reply.h.
 */
#include <stdlib.h>
#include <string.h>
#include "engine/tm_reply.h"
#include "engine/tm_tx.h"

void tme_reply_init(struct tm_engine *eng)
{
	ucs_list_head_init(&eng->reply.owed);
}

/* ---- replies (ACK, FIN) --------------------------------------------- */

/* ACK: a synchronous send matched.  TM_ERR_NO_MEMORY: not sent. */
static int send_ack(struct tm_xport *x, uint32_t peer, uint32_t app)
{
	struct tm_tx *tx;

	if (peer >= x->npeers)
		return TM_OK; /* an unknown peer: nobody to tell */
	tx = tmx_tx_new(x, TX_ACK, peer);
	if (!tx)
		return TM_ERR_NO_MEMORY;
	tmh_fill(tx->hdr, IBV_TMH_NO_TAG,
		 ((uint32_t)TM_CTRL_ACK << TM_APP_CTRL_SHIFT) |
		 (app & TM_APP_SEQ_MASK), 0);
	tx->hdr_len = TMH_LEN;
	tmx_tx_queue(x, tx);
	return TM_OK;
}

/*
 * FIN: a copy of the request's TMH (opcode FIN) and RVH; as for ACK.  A
 * receive that failed the transfer (the read was refused, the buffer could
 * not be registered) has set TM_APP_FIN_ERR in that TMH (tme_fin_failed),
 * so that the send fails too rather than report a transfer that did not
 * happen.
 */
static int send_fin(struct tm_xport *x, uint32_t peer, const uint8_t *hdr)
{
	struct ibv_tmh *tmh;
	struct tm_tx *tx;

	if (peer >= x->npeers)
		return TM_OK; /* an unknown peer: nobody to tell */
	tx = tmx_tx_new(x, TX_FIN, peer);
	if (!tx)
		return TM_ERR_NO_MEMORY;
	memcpy(tx->hdr, hdr, TMH_LEN + RVH_LEN);
	tmh = (struct ibv_tmh *)tx->hdr;
	tmh->opcode = IBV_TMH_FIN;
	tx->hdr_len = TMH_LEN + RVH_LEN;
	tmx_tx_queue(x, tx);
	return TM_OK;
}

static int reply_now(struct tm_engine *eng, struct tm_recv *r, int type)
{
	return type == TX_ACK ? send_ack(&eng->x, r->peer, r->send_seq) :
				send_fin(&eng->x, r->peer, rp(r)->hdr);
}

/*
 * Sends r's ACK or FIN (r->send_seq names the send; a FIN copies its hdr).
 * With no memory for it, r owes it: r does not complete (ops_pending) and
 * tme_reply_pay_owed() tries again from every engine call, so the sender
 * never waits forever for a reply that was dropped.
 */
void tme_recv_reply(struct tm_engine *eng, struct tm_recv *r, int type)
{
	struct tme_recv *q = rp(r);

	if (reply_now(eng, r, type) == TM_OK)
		return;
	q->flags |= type == TX_ACK ? RF_OWE_ACK : RF_OWE_FIN;
	q->ops_pending++;
	ucs_list_add_tail(&eng->reply.owed, &q->owed_link);
	tme_pend(eng, TM_PEND_WORK);
	eng->x.st.replies_owed++;
}

int tme_reply_pay_owed(struct tm_engine *eng)
{
	struct tme_recv *q;
	struct tm_recv *r;
	int n = 0;

	while (!ucs_list_is_empty(&eng->reply.owed)) {
		r = recv_head(&eng->reply.owed, owed_link);
		q = rp(r);
		if (reply_now(eng, r, (q->flags & RF_OWE_ACK) ? TX_ACK :
			      TX_FIN) != TM_OK)
			break;
		ucs_list_del(&q->owed_link);
		q->flags &= ~(RF_OWE_ACK | RF_OWE_FIN);
		q->ops_pending--;
		tme_recv_try_done(eng, r);
		n++;
	}
	return n;
}

/* ---- CANCEL_REPs ---------------------------------------------------- */

/* Both CANCEL messages are a bare header with nothing to do at their
 * completion, so they travel as TX_ACK items (and share its fault site). */
int tme_queue_ctrl(struct tm_engine *eng, uint32_t peer, uint32_t ctrl,
		   uint32_t seq, uint64_t tag)
{
	struct tm_tx *tx = tmx_tx_new(&eng->x, TX_ACK, peer);

	if (!tx)
		return TM_ERR_NO_MEMORY;
	tmh_fill(tx->hdr, IBV_TMH_NO_TAG,
		 (ctrl << TM_APP_CTRL_SHIFT) | (seq & TM_APP_SEQ_MASK), tag);
	tx->hdr_len = TMH_LEN;
	tmx_tx_queue(&eng->x, tx);
	return TM_OK;
}

static void owe_rep(struct tm_engine *eng, uint32_t peer, uint32_t seq,
		    uint64_t outcome)
{
	if (eng->reply.rep_tail - eng->reply.rep_head >= TM_CANCEL_OWED_MAX) {
		tmx_fatal(&eng->x, TM_ERR_NO_MEMORY);
		return;
	}
	eng->reply.rep_owed[eng->reply.rep_tail++ % TM_CANCEL_OWED_MAX] =
		((uint64_t)peer << 32) | (outcome << 24) | seq;
	tme_pend(eng, TM_PEND_WORK);
}

void tme_reply_cancel_rep(struct tm_engine *eng, uint32_t peer, uint32_t seq,
			  uint64_t outcome)
{
	if (tme_reply_owes_rep(&eng->reply) ||
	    tme_queue_ctrl(eng, peer, TM_CTRL_CANCEL_REP, seq, outcome) != TM_OK)
		owe_rep(eng, peer, seq, outcome);
}

int tme_reply_pay_reps(struct tm_engine *eng)
{
	uint64_t e;
	int n = 0;

	while (tme_reply_owes_rep(&eng->reply)) {
		e = eng->reply.rep_owed[eng->reply.rep_head % TM_CANCEL_OWED_MAX];
		if (tme_queue_ctrl(eng, (uint32_t)(e >> 32), TM_CTRL_CANCEL_REP,
				   (uint32_t)e & TM_APP_SEQ_MASK,
				   (e >> 24) & 0xff) != TM_OK)
			break;
		eng->reply.rep_head++;
		n++;
	}
	return n;
}

/* ---- software rendezvous -------------------------------------------- */

void tme_fin_failed(struct tm_recv *r)
{
	struct ibv_tmh *tmh = (struct ibv_tmh *)rp(r)->hdr;

	tmh->app_ctx = htobe32(be32toh(tmh->app_ctx) | TM_APP_FIN_ERR);
}

/* The read's tx is done: FIN whatever the outcome, then finish.  Cut off
 * before any piece went (its peer died): no FIN, nobody to tell. */
static void read_done(struct tm_tx *tx, int status)
{
	struct tm_recv *r = tx->arg;
	struct tm_engine *eng = ucs_container_of(tx->x, struct tm_engine, x);
	struct tme_recv *q = rp(r);

	eng->reply.reads_active--;
	if (status == TMX_ABORTED) {
		r->recv_len = 0;
		tme_recv_finish(eng, r, TM_REQ_ERROR);
		return;
	}
	if (status != IBV_WC_SUCCESS)
		tme_fin_failed(r);
	tme_recv_reply(eng, r, TX_FIN);
	r->recv_len = q->rd_len < r->b.len ? q->rd_len : r->b.len;
	if (status != IBV_WC_SUCCESS)
		tme_recv_finish(eng, r, TM_REQ_ERROR);
	else
		tme_recv_finish(eng, r, q->rd_len > r->b.len ? TM_REQ_TRUNCATED :
				TM_REQ_OK);
}

/*
 * r's hdr holds the request's TMH+RVH, msg_len is the sender's length:
 * reads min(msg_len, buffer), in pieces the device accepts (tm_tx.c), then
 * FINs.
 */
void tme_sw_rndv_start(struct tm_engine *eng, struct tm_recv *r,
		       uint64_t msg_len)
{
	struct tme_recv *q = rp(r);
	const struct ibv_rvh *rvh = (const void *)(q->hdr + TMH_LEN);
	struct tm_tx *tx;

	q->rd_va = be64toh(rvh->va);
	q->rd_rkey = be32toh(rvh->rkey);
	q->rd_len = msg_len;
	r->msg_len = msg_len;
	eng->x.st.rndv_sw++;
	if (q->rd_len && r->b.len && !r->b.mr) {
		if (tm_dev_mem_get(eng->x.dev, r->b.buf, r->b.len,
				   IBV_ACCESS_LOCAL_WRITE, &r->b.mr) == TM_OK)
			q->own_mr = 1;
	}
	if (!q->rd_len || !r->b.len || !r->b.mr) {
		int failed = !r->b.mr && q->rd_len && r->b.len;

		r->recv_len = 0;
		if (failed)
			tme_fin_failed(r);
		tme_recv_reply(eng, r, TX_FIN);
		tme_recv_finish(eng, r, failed ? TM_REQ_ERROR :
				q->rd_len > r->b.len ? TM_REQ_TRUNCATED :
				TM_REQ_OK);
		return;
	}
	tx = tmx_tx_new(&eng->x, TX_READ, r->peer);
	if (!tx || r->peer >= eng->x.npeers) {
		if (tx)
			tmx_tx_free(tx);
		tme_fin_failed(r);
		tme_recv_reply(eng, r, TX_FIN);
		tme_recv_finish(eng, r, TM_REQ_ERROR);
		return;
	}
	tx->done = read_done;
	tx->arg = r;
	tx->rd_va = q->rd_va;
	tx->rd_rkey = q->rd_rkey;
	tx->rd_buf = r->b.buf;
	tx->rd_lkey = r->b.mr->lkey;
	tx->rd_end = q->rd_len < r->b.len ? q->rd_len : r->b.len;
	tme_rstate(q, R_SW_READ);
	eng->reply.reads_active++;
	tmx_tx_queue(&eng->x, tx);
}
