/*
 * tm_tx.c - the send queues: send slots, posting, selective signalling,
 * retiring WRs from completions.
 *
 * Contract (argument: doc/DESIGN.md, "Selective signalling"):
 *  - every outgoing item (eager data, rendezvous request, ACK, FIN, read,
 *    keepalive) is a tm_tx queued on its peer in order, or, for an eager
 *    send with nothing queued ahead, posted at once with no tx at all;
 *  - a send whose header and data fit the QP's max_inline goes inline and
 *    takes no slot; others are copied into a slot;
 *  - a tx for a dead peer is never queued: it fails its request at once;
 *  - WRs are signalled only when something must happen at their
 *    completion, every sig_every-th WR of a QP, and when slots or the send
 *    queue run low; an RC QP completes in order, so a signalled completion
 *    retires every earlier WR of its QP and frees their slots;
 *  - at most sq_limit WRs per QP are outstanding.
 * Owns: slots, free_slots, sq_*, sig_*, tm_peer.wrs/txq, all_tx, tx_queued.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "engine/tm_engine_priv.h"

/* A queued item of work for peer's send queue (type TX_*). */
struct tm_tx *tme_tx_new(struct tm_engine *eng, int type, uint32_t peer)
{
	struct tm_tx *tx;

	if (tme_fault(eng, (enum tm_site)(TM_SITE_ALLOC_TX + type)))
		return NULL;
	tx = calloc(1, sizeof(*tx));
	if (!tx)
		return NULL;
	tx->type = type;
	tx->peer = peer;
	tx->slot = -1;
	ucs_list_add_tail(&eng->all_tx, &tx->all);
	return tx;
}

void tme_tx_free(struct tm_tx *tx)
{
	ucs_list_del(&tx->all);
	free(tx);
}

/* A tx that will never be posted (its peer is dead, or its QP refused
 * it): fail its request. */
void tme_tx_abort(struct tm_engine *eng, struct tm_tx *tx)
{
	struct tm_send *s = tx->send;

	tx->queued = 0; /* the caller took it off the queue */
	if (tx->type == TX_READ && tx->rd_out) {
		/* pieces in flight still write into the buffer: the receive
		 * fails when the last one is retired (tx_complete) */
		tx->rd_stop = 1;
		if (tx->rd_status == IBV_WC_SUCCESS)
			tx->rd_status = IBV_WC_WR_FLUSH_ERR;
		return;
	}
	switch (tx->type) {
	case TX_EAGER:
	case TX_RNDV:
		s->status = TM_REQ_ERROR;
		s->waiting &= ~S_WAIT_CQE;
		tme_wait_reply_end(eng, s);
		tme_send_try_done(eng, s);
		break;
	case TX_READ:
		eng->reads_active--;
		tx->recv->recv_len = 0;
		tme_recv_finish(eng, tx->recv, TM_REQ_ERROR);
		break;
	case TX_KEEPALIVE:
		eng->peers[tx->peer]->ka_out = 0;
		break;
	default: /* ACK, FIN: nobody left to tell */
		break;
	}
	tme_tx_free(tx);
}

/* Every tx goes through here, so nothing is queued for a dead peer. */
void tme_tx_queue(struct tm_engine *eng, struct tm_tx *tx)
{
	if (eng->peers[tx->peer]->dead) {
		tme_tx_abort(eng, tx);
		return;
	}
	ucs_list_add_tail(&eng->peers[tx->peer]->txq, &tx->link);
	tx->queued = 1;
	eng->tx_queued++;
	tme_pend(eng, TM_PEND_WORK);
}

/*
 * Selective signalling.  A WR is posted signalled when something must
 * happen at its completion (a rendezvous request, a read, a keepalive), or
 * when it is the sig_every-th WR holding a slot since the last signalled
 * one, or the sig_max-th WR at all (inline WRs hold no slot), or when the
 * send queue or the slots run low; the others are unsignalled, and are
 * retired (their slots freed) by the next signalled completion of their
 * QP, as RC completes in order.  An eager send completes at post (inline,
 * or its slot is a buffered copy).  Bounds: sig_every <= n_slots / (2 *
 * npeers), so unsignalled tails hold at most half the slots and an empty
 * free list always has a signalled completion coming; sig_max <= sq_limit
 * / 2 (or sig_every), so a signalled completion is due while the queue has
 * room for as many again; the last WR below sq_limit is signalled, so a
 * full send queue always drains.  An error completes even an unsignalled
 * WR, and retires everything up to it.
 */
static int sq_post(struct tm_engine *eng, struct tm_peer *p,
		   struct ibv_send_wr *wr, int32_t slot, struct tm_tx *keep)
{
	struct ibv_send_wr *bad;
	struct tm_wr *w;
	int ret, sig = keep || p->unsig + 1 >= eng->sig_max ||
		       (slot >= 0 && p->unsig_slots + 1 >= eng->sig_every) ||
		       p->sq_out + 1 >= eng->sq_limit ||
		       eng->n_free_slots < eng->slot_low;

	wr->wr_id = ((uint64_t)p->id << 32) | p->wr_head;
	wr->send_flags = (wr->send_flags & IBV_SEND_INLINE) |
			 (sig ? IBV_SEND_SIGNALED : 0);
	ret = tme_fault(eng, TM_SITE_POST_SEND);
	if (!ret)
		ret = ibv_post_send(p->qp, wr, &bad);
	if (ret)
		return ret;
	w = &p->wrs[p->wr_head++ & p->wr_mask];
	w->slot = slot;
	w->sig = sig;
	w->tx = keep;
	p->sq_out++;
	eng->sq_out++;
	if (sig) {
		p->unsig = 0;
		p->unsig_slots = 0;
		p->sig_out++;
		eng->sig_out++;
	} else {
		p->unsig++;
		p->unsig_slots += slot >= 0;
	}
	return 0;
}

/* Takes a send slot; fills it with hdr (hdr_len) and data (len). */
static int32_t slot_fill(struct tm_engine *eng, const void *hdr,
			 uint32_t hdr_len, const void *data, size_t len,
			 struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	int32_t slot = (int32_t)eng->free_slots[--eng->n_free_slots];
	uint8_t *buf = eng->slots + (size_t)slot * eng->slot_size;

	memcpy(buf, hdr, hdr_len);
	if (len)
		memcpy(buf + hdr_len, data, len);
	sge->addr = (uintptr_t)buf;
	sge->length = hdr_len + (uint32_t)len;
	sge->lkey = eng->slots_mr->lkey;
	wr->next = NULL;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_SEND;
	wr->send_flags = 0;
	return slot;
}

/*
 * An inline send: the device copies hdr and data into the WQE at post, so
 * both may change as soon as the post returns, and no slot (nor copy of
 * ours) is needed.  The caller checked hdr_len + len against the QP's
 * max_inline.  lkeys are not looked at for inline data.
 */
static void inline_fill(const void *hdr, uint32_t hdr_len, const void *data,
			size_t len, struct ibv_send_wr *wr,
			struct ibv_sge *sge)
{
	sge[0].addr = (uintptr_t)hdr;
	sge[0].length = hdr_len;
	sge[0].lkey = 0;
	sge[1].addr = (uintptr_t)data;
	sge[1].length = (uint32_t)len;
	sge[1].lkey = 0;
	wr->next = NULL;
	wr->sg_list = sge;
	wr->num_sge = len ? 2 : 1;
	wr->opcode = IBV_WR_SEND;
	wr->send_flags = IBV_SEND_INLINE;
}

/*
 * One piece of a software rendezvous read: at most max_read bytes, the
 * longest read the device does in one go (a whole 2 GiB read is refused by
 * the port).  Each piece is signalled and names the tx, which completes
 * the receive when the last one is retired.  TX_MORE: pieces remain.
 */
#define TX_MORE (-1)
static int read_post(struct tm_engine *eng, struct tm_peer *p,
		     struct tm_tx *tx)
{
	struct tm_recv *r = tx->recv;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	uint64_t n = tx->rd_end - tx->rd_next;
	int ret;

	if (tx->rd_stop)
		return EAGAIN;
	if (n > eng->max_read)
		n = eng->max_read;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = r->rd_va + tx->rd_next;
	wr.wr.rdma.rkey = r->rd_rkey;
	sge.addr = (uintptr_t)r->buf + tx->rd_next;
	sge.length = (uint32_t)n;
	sge.lkey = r->mr->lkey;
	ret = sq_post(eng, p, &wr, -1, tx);
	if (ret)
		return ret;
	tx->rd_next += n;
	tx->rd_out++;
	return tx->rd_next < tx->rd_end ? TX_MORE : 0;
}

/* Posts one queued item; returns 0, TX_MORE (a read with pieces left),
 * EAGAIN when no slot is free, or the post's errno.  A tx with nothing to
 * do at its completion is done once posted (tx_posted). */
static int tx_post(struct tm_engine *eng, struct tm_peer *p, struct tm_tx *tx)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge[2];
	struct tm_send *s = tx->send;
	uint8_t hdr[RNDV_HDR_LEN] __attribute__((aligned(8)));
	struct ibv_rvh *rvh;
	struct tm_rndv_md *md;
	const void *data = NULL;
	uint32_t hdr_len;
	size_t len = 0;
	int32_t slot;
	int ret;

	if (tx->type == TX_READ)
		return read_post(eng, p, tx);
	memset(&wr, 0, sizeof(wr));
	switch (tx->type) {
	case TX_EAGER:
		tmh_fill(hdr, IBV_TMH_EAGER, s->app_ctx, s->tag);
		hdr_len = TMH_LEN;
		data = s->buf;
		len = s->len;
		break;
	case TX_RNDV:
		tmh_fill(hdr, IBV_TMH_RNDV, s->app_ctx, s->tag);
		rvh = (struct ibv_rvh *)(hdr + TMH_LEN);
		rvh->va = htobe64((uintptr_t)s->buf);
		rvh->rkey = htobe32(s->mr->rkey);
		/* saturated: longer than any card buffer (tm_offload.c,
		 * refusal 3), so the card hands it to software, which reads
		 * the full length from the metadata */
		rvh->len = htobe32(s->len > UINT32_MAX ? UINT32_MAX :
				   (uint32_t)s->len);
		md = (struct tm_rndv_md *)(hdr + TMH_LEN + RVH_LEN);
		md->len = htobe64(s->len);
		hdr_len = RNDV_HDR_LEN;
		break;
	default: /* ACK, FIN, KEEPALIVE: prepared header */
		memcpy(hdr, tx->hdr, tx->hdr_len);
		hdr_len = tx->hdr_len;
		break;
	}
	if (hdr_len + len <= p->max_inline) {
		inline_fill(hdr, hdr_len, data, len, &wr, sge);
		slot = -1;
		eng->st.sends_inline++;
	} else if (!eng->n_free_slots) {
		return EAGAIN;
	} else {
		slot = slot_fill(eng, hdr, hdr_len, data, len, &wr, sge);
	}
	ret = sq_post(eng, p, &wr, slot, tx->type == TX_RNDV ||
		      tx->type == TX_KEEPALIVE ? tx : NULL);
	if (ret) {
		if (slot >= 0)
			eng->free_slots[eng->n_free_slots++] = (uint32_t)slot;
		else
			eng->st.sends_inline--;
		return ret;
	}
	if (tx->type == TX_FIN)
		eng->st.fins_sent++;
	if (tx->type == TX_ACK && /* not a CANCEL_REQ/REP riding as one */
	    (be32toh(((struct ibv_tmh *)tx->hdr)->app_ctx) &
	     TM_APP_CTRL_MASK) == (uint32_t)TM_CTRL_ACK << TM_APP_CTRL_SHIFT)
		eng->st.acks_sent++;
	if (tx->type == TX_KEEPALIVE)
		eng->st.keepalives_sent++;
	return 0;
}

/* tx was posted: an eager send is complete, ACK/FIN need nothing more. */
static void tx_posted(struct tm_engine *eng, struct tm_tx *tx)
{
	if (tx->type == TX_RNDV || tx->type == TX_KEEPALIVE ||
	    tx->type == TX_READ)
		return; /* kept until its completion */
	if (tx->type == TX_EAGER) {
		tx->send->waiting &= ~S_WAIT_CQE;
		tme_send_try_done(eng, tx->send);
	}
	tme_tx_free(tx);
}

/* A post that may succeed later: no free slot, or a full send queue. */
static int post_again(int ret)
{
	return ret == EAGAIN || ret == ENOMEM;
}

static int flush_peer(struct tm_engine *eng, struct tm_peer *p)
{
	struct tm_tx *tx;
	int n = 0, ret;

	while (!ucs_list_is_empty(&p->txq) && p->sq_out < eng->sq_limit) {
		tx = ucs_list_head(&p->txq, struct tm_tx, link);
		ret = tx_post(eng, p, tx);
		if (ret == TX_MORE) {
			n++;
			continue;
		}
		if (post_again(ret))
			break;
		ucs_list_del(&tx->link);
		tx->queued = 0;
		eng->tx_queued--;
		if (ret) {
			/* the QP refuses work for good: fail this item, and
			 * the peer with everything queued for it */
			eng->st.post_failures++;
			tme_tx_abort(eng, tx);
			tme_peer_fail(eng, p->id);
			break;
		}
		tx_posted(eng, tx);
		n++;
	}
	return n;
}

int tme_flush_tx(struct tm_engine *eng)
{
	uint32_t i;
	int n = 0;

	if (!eng->tx_queued)
		return 0;
	for (i = 0; i < eng->npeers; i++)
		n += flush_peer(eng, eng->peers[i]);
	return n;
}

/* What a kept tx does when its WR completed with status. */
static void tx_complete(struct tm_engine *eng, struct tm_peer *p,
			struct tm_tx *tx, int status)
{
	struct tm_send *s = tx->send;

	switch (tx->type) {
	case TX_RNDV:
		s->waiting &= ~S_WAIT_CQE;
		if (status != IBV_WC_SUCCESS) {
			s->status = TM_REQ_ERROR;
			tme_wait_reply_end(eng, s);
		}
		tme_send_try_done(eng, s);
		break;
	case TX_READ:
		tx->rd_out--;
		if (status != IBV_WC_SUCCESS && tx->rd_status == IBV_WC_SUCCESS) {
			tx->rd_status = status;
			tx->rd_stop = 1;
		}
		if (tx->rd_out || (!tx->rd_stop && tx->rd_next < tx->rd_end))
			return; /* more pieces to come */
		if (tx->queued) { /* failed with pieces not yet posted */
			ucs_list_del(&tx->link);
			tx->queued = 0;
			eng->tx_queued--;
		}
		tme_sw_rndv_done(eng, tx->recv, tx->rd_status);
		break;
	case TX_KEEPALIVE:
		p->ka_out = 0;
		break;
	default:
		break;
	}
	tme_tx_free(tx);
}

/* Retires p's oldest WR (it completed with status). */
static void wr_retire(struct tm_engine *eng, struct tm_peer *p, int status)
{
	struct tm_wr *w = &p->wrs[p->wr_tail++ & p->wr_mask];

	p->sq_out--;
	eng->sq_out--;
	if (w->slot >= 0)
		eng->free_slots[eng->n_free_slots++] = (uint32_t)w->slot;
	if (w->sig) {
		p->sig_out--;
		eng->sig_out--;
	}
	if (w->tx)
		tx_complete(eng, p, w->tx, status);
}

/*
 * A completion names its WR by (peer, post count); every earlier WR of
 * that QP completed before it (in order; the unsignalled ones silently).
 */
static void on_send_cqe(struct tm_engine *eng, const struct ibv_wc *wc)
{
	uint32_t peer = (uint32_t)(wc->wr_id >> 32);
	uint32_t n = (uint32_t)wc->wr_id;
	struct tm_peer *p;

	if (peer >= eng->npeers)
		return;
	p = eng->peers[peer];
	/* not outstanding: an unsignalled WR of a dead peer that
	 * tm_engine_idle() already gave up on */
	if (n - p->wr_tail >= p->sq_out)
		return;
	/* the WRs before it completed silently: most are inline eager sends
	 * that hold nothing, which leave only the counts (in one step) */
	while (p->wr_tail != n) {
		uint32_t k = 0;
		const struct tm_wr *w;

		for (;;) {
			w = &p->wrs[(p->wr_tail + k) & p->wr_mask];
			if (p->wr_tail + k == n || w->slot >= 0 || w->sig ||
			    w->tx)
				break;
			k++;
		}
		p->wr_tail += k;
		p->sq_out -= k;
		eng->sq_out -= k;
		if (p->wr_tail != n)
			wr_retire(eng, p, IBV_WC_SUCCESS);
	}
	if (wc->status != IBV_WC_SUCCESS)
		eng->st.errors++;
	wr_retire(eng, p, wc->status);
	/* any error on an RC QP leaves it in the error state */
	if (wc->status != IBV_WC_SUCCESS)
		tme_peer_fail(eng, p->id);
}

/* Polls the send CQ once (up to CQE_BATCH completions). */
int tme_poll_send(struct tm_engine *eng)
{
	struct ibv_wc wc[CQE_BATCH];
	int i, n;

	eng->poll_skip = 0;
	n = ibv_poll_cq(eng->dev->send_cq, CQE_BATCH, wc);
	eng->st.send_cqes += n > 0 ? (uint64_t)n : 0;
	for (i = 0; i < n; i++)
		on_send_cqe(eng, &wc[i]);
	return n > 0 ? n : 0;
}

/*
 * The eager fast path: nothing queued ahead on a live peer and a
 * send-queue entry free: post the message inline if it fits the QP's
 * inline limit, else copy it into a free slot and post that; either way
 * the data is out of the caller's buffer when the post returns, so the
 * send is done (or waits for its ACK only), with no tx allocated.
 * 0: take the queue.
 */
int tme_eager_now(struct tm_engine *eng, struct tm_send *s)
{
	struct tm_peer *p = eng->peers[s->peer];
	uint8_t hdr[TMH_LEN] __attribute__((aligned(8)));
	struct ibv_send_wr wr;
	struct ibv_sge sge[2];
	int inl = TMH_LEN + s->len <= p->max_inline;
	int32_t slot = -1;

	if (p->dead || !ucs_list_is_empty(&p->txq) ||
	    p->sq_out >= eng->sq_limit || (!inl && !eng->n_free_slots))
		return 0;
	if ((s->app_ctx & TM_APP_SYNC) && tme_wait_reply_start(eng, s) != TM_OK)
		return 0;
	tmh_fill(hdr, IBV_TMH_EAGER, s->app_ctx, s->tag);
	if (inl)
		inline_fill(hdr, TMH_LEN, s->buf, s->len, &wr, sge);
	else
		slot = slot_fill(eng, hdr, TMH_LEN, s->buf, s->len, &wr, sge);
	if (sq_post(eng, p, &wr, slot, NULL)) {
		if (slot >= 0)
			eng->free_slots[eng->n_free_slots++] = (uint32_t)slot;
		if (s->app_ctx & TM_APP_SYNC)
			tme_wait_reply_end(eng, s);
		return 0;
	}
	eng->st.sends_inline += inl;
	eng->sends_waiting++;
	s->waiting &= ~S_WAIT_CQE;
	tme_send_try_done(eng, s);
	return 1;
}

/*
 * The send-queue half of tm_engine_idle(): only unsignalled WRs may be
 * left, and nothing would ever retire them (an ACK or FIN among them may
 * not even have left yet).  A live peer gets a signalled keepalive behind
 * them; a dead peer's are given up (its QP completes nothing more).  1
 * when no send WR is outstanding.
 */
int tme_tx_idle(struct tm_engine *eng)
{
	struct tm_peer *p;
	uint32_t i;

	if (!eng->sq_out)
		return 1;
	if (tme_poll_send(eng) && !eng->sq_out)
		return 1;
	if (eng->sig_out)
		return 0;
	for (i = 0; i < eng->npeers; i++) {
		p = eng->peers[i];
		if (!p->sq_out)
			continue;
		if (p->dead) {
			while (p->sq_out)
				wr_retire(eng, p, IBV_WC_WR_FLUSH_ERR);
		} else if (!p->ka_out) {
			tme_send_keepalive(eng, p, tme_now_ns());
		}
	}
	tme_flush_tx(eng);
	return !eng->sq_out;
}
