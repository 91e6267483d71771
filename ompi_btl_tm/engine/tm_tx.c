/*
 * tm_tx.c - the send queues: send slots, posting, selective signalling,
 * retiring WRs from completions.  Contract: tm_tx.h.
 * Owns: the tx part of struct tm_xport, tmx_peer's send queue, ka_*, dead.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "engine/tm_tx.h"

/*
 * Keepalive pacing is in milliseconds, so the coarse clock will do; the
 * precise one is called on every progress while a send waits and cost a
 * third of the CPU in a bidirectional rendezvous benchmark.
 */
uint64_t tmx_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int tmx_tx_init(struct tm_xport *x, size_t slot_size)
{
	uint32_t i;

	ucs_list_head_init(&x->tx.all_tx);
	x->tx.sq_limit = x->dev->qp_max_send_wr > 4 ?
			 x->dev->qp_max_send_wr / 2 : 1;
	x->tx.slot_low = x->tx.n_slots / 4;
	tmx_poll_budget(x); /* nothing out */
	tmx_sq_init(x);
	x->tx.slot_size = (uint32_t)slot_size;
	x->tx.slots = calloc(x->tx.n_slots, slot_size);
	x->tx.free_slots = calloc(x->tx.n_slots, sizeof(uint32_t));
	if (!x->tx.slots || !x->tx.free_slots)
		return TM_ERR_NO_MEMORY;
	if (tm_dev_reg(x->dev, x->tx.slots, (size_t)x->tx.n_slots * slot_size,
		       0, &x->tx.slots_mr))
		return TM_ERR_IO;
	for (i = 0; i < x->tx.n_slots; i++)
		x->tx.free_slots[x->tx.n_free_slots++] = x->tx.n_slots - 1 - i;
	return TM_OK;
}

void tmx_tx_cleanup(struct tm_xport *x)
{
	struct tm_tx *tx, *tt;

	if (x->tx.all_tx.next)
		ucs_list_for_each_safe(tx, tt, &x->tx.all_tx, all)
			free(tx);
	if (x->tx.slots_mr)
		tm_dev_dereg(x->dev, x->tx.slots_mr);
	free(x->tx.slots);
	free(x->tx.free_slots);
}

int tmx_tx_add_peer(struct tm_xport *x, struct tmx_peer *p)
{
	uint32_t n;

	ucs_list_head_init(&p->txq);
	/* at most sq_limit WRs outstanding: a power of two above it */
	for (n = 1; n <= x->tx.sq_limit; n <<= 1)
		;
	p->wrs = calloc(n, sizeof(*p->wrs));
	if (!p->wrs)
		return TM_ERR_NO_MEMORY;
	p->wr_mask = n - 1;
	/* see "Selective signalling" (tm_sq.c) for the bounds; the caller
	 * counted p in npeers */
	n = x->tx.n_slots / (2 * x->npeers);
	x->tx.sig_every = n < 1 ? 1 : n > TM_SIG_EVERY ? TM_SIG_EVERY : n;
	if (x->tx.sig_every > x->tx.sq_limit)
		x->tx.sig_every = x->tx.sq_limit;
	x->tx.sig_max = x->tx.sq_limit / 2 > x->tx.sig_every ?
			x->tx.sq_limit / 2 : x->tx.sig_every;
	return TM_OK;
}

struct tm_tx *tmx_tx_new(struct tm_xport *x, int type, uint32_t peer)
{
	struct tm_tx *tx;

	if (tmx_fault(x, (enum tm_site)(TM_SITE_ALLOC_TX + type)))
		return NULL;
	tx = calloc(1, sizeof(*tx));
	if (!tx)
		return NULL;
	tx->x = x;
	tx->type = type;
	tx->peer = peer;
	tx->slot = -1;
	ucs_list_add_tail(&x->tx.all_tx, &tx->all);
	return tx;
}

void tmx_tx_free(struct tm_tx *tx)
{
	ucs_list_del(&tx->all);
	free(tx);
}

/* Tells the item's owner (once) and frees it. */
static void tx_done(struct tm_tx *tx, int status)
{
	if (tx->done)
		tx->done(tx, status);
	tmx_tx_free(tx);
}

/* A tx that will never be posted (its peer is dead, or its QP refused
 * it): its owner hears TMX_ABORTED. */
static void tx_abort(struct tm_xport *x, struct tm_tx *tx)
{
	tx->queued = 0; /* the caller took it off the queue */
	if (tx->type == TX_READ && tx->rd_out) {
		/* pieces in flight still write into the buffer: the receive
		 * fails when the last one is retired (tx_complete) */
		tx->rd_stop = 1;
		if (tx->rd_status == IBV_WC_SUCCESS)
			tx->rd_status = IBV_WC_WR_FLUSH_ERR;
		return;
	}
	if (tx->type == TX_KEEPALIVE)
		x->peers[tx->peer]->ka_out = 0;
	tx_done(tx, TMX_ABORTED);
}

void tmx_tx_queue(struct tm_xport *x, struct tm_tx *tx)
{
	if (x->peers[tx->peer]->dead) {
		tx_abort(x, tx);
		return;
	}
	ucs_list_add_tail(&x->peers[tx->peer]->txq, &tx->link);
	tx->queued = 1;
	x->tx.tx_queued++;
	tmx_pend(x, TM_PEND_WORK);
}

struct tm_tx *tmx_tx_find_send(struct tm_xport *x, uint32_t peer,
				uint64_t key)
{
	struct tm_tx *tx;

	if (peer >= x->npeers)
		return NULL;
	ucs_list_for_each(tx, &x->peers[peer]->txq, link)
		if ((tx->type == TX_EAGER || tx->type == TX_RNDV) &&
		    tx->key == key)
			return tx;
	return NULL;
}

void tmx_tx_withdraw(struct tm_xport *x, struct tm_tx *tx)
{
	ucs_list_del(&tx->link);
	tx->queued = 0;
	x->tx.tx_queued--;
	tmx_tx_free(tx);
}

/*
 * One piece of a software rendezvous read: at most max_read bytes, the
 * longest read the device does in one go (a whole 2 GiB read is refused by
 * the port).  Each piece is signalled and names the tx, which is done when
 * the last one is retired.  TX_MORE: pieces remain.
 */
#define TX_MORE (-1)
static int read_post(struct tm_xport *x, struct tmx_peer *p,
		     struct tm_tx *tx)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	uint64_t n = tx->rd_end - tx->rd_next;
	int ret;

	if (tx->rd_stop)
		return EAGAIN;
	if (n > x->max_read)
		n = x->max_read;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = tx->rd_va + tx->rd_next;
	wr.wr.rdma.rkey = tx->rd_rkey;
	sge.addr = (uintptr_t)tx->rd_buf + tx->rd_next;
	sge.length = (uint32_t)n;
	sge.lkey = tx->rd_lkey;
	ret = tmx_sq_post(x, p, &wr, -1, tx);
	if (ret)
		return ret;
	tx->rd_next += n;
	tx->rd_out++;
	return tx->rd_next < tx->rd_end ? TX_MORE : 0;
}

/* Counts what went out, by the header it carried. */
static void tx_count(struct tm_xport *x, const struct tm_tx *tx)
{
	if (tx->type == TX_FIN)
		x->st.fins_sent++;
	if (tx->type == TX_ACK && /* not a CANCEL_REQ/REP riding as one */
	    (be32toh(((const struct ibv_tmh *)tx->hdr)->app_ctx) &
	     TM_APP_CTRL_MASK) == (uint32_t)TM_CTRL_ACK << TM_APP_CTRL_SHIFT)
		x->st.acks_sent++;
	if (tx->type == TX_KEEPALIVE)
		x->st.keepalives_sent++;
}

/* Posts one queued item; returns 0, TX_MORE (a read with pieces left),
 * EAGAIN when no slot is free, or the post's errno.  A tx with nothing to
 * do at its completion is done once posted (tx_posted). */
static int tx_post(struct tm_xport *x, struct tmx_peer *p, struct tm_tx *tx)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge[2];
	int32_t slot;
	int ret;

	if (tx->type == TX_READ)
		return read_post(x, p, tx);
	memset(&wr, 0, sizeof(wr));
	if (tx->hdr_len + tx->len <= p->max_inline) {
		tmx_inline_fill(tx->hdr, tx->hdr_len, tx->data, tx->len, &wr, sge);
		slot = -1;
		x->st.sends_inline++;
	} else if (!x->tx.n_free_slots) {
		return EAGAIN;
	} else {
		slot = tmx_slot_fill(x, tx->hdr, tx->hdr_len, tx->data, tx->len,
				 &wr, sge);
	}
	ret = tmx_sq_post(x, p, &wr, slot, tx->type == TX_RNDV ||
		      tx->type == TX_KEEPALIVE ? tx : NULL);
	if (ret) {
		if (slot >= 0)
			x->tx.free_slots[x->tx.n_free_slots++] = (uint32_t)slot;
		else
			x->st.sends_inline--;
		return ret;
	}
	tx_count(x, tx);
	return 0;
}

/* tx was posted: an eager send is done, ACK/FIN need nothing more. */
static void tx_posted(struct tm_tx *tx)
{
	if (tx->type == TX_RNDV || tx->type == TX_KEEPALIVE ||
	    tx->type == TX_READ)
		return; /* kept until its completion */
	tx_done(tx, IBV_WC_SUCCESS);
}

/* A post that may succeed later: no free slot, or a full send queue. */
static int post_again(int ret)
{
	return ret == EAGAIN || ret == ENOMEM;
}

static int flush_peer(struct tm_xport *x, struct tmx_peer *p)
{
	struct tm_tx *tx;
	int n = 0, ret;

	while (!ucs_list_is_empty(&p->txq) && p->sq_out < x->tx.sq_limit) {
		tx = ucs_list_head(&p->txq, struct tm_tx, link);
		if (tx == &p->plug)
			break; /* held: not connected yet */
		ret = tx_post(x, p, tx);
		if (ret == TX_MORE) {
			n++;
			continue;
		}
		if (post_again(ret))
			break;
		ucs_list_del(&tx->link);
		tx->queued = 0;
		x->tx.tx_queued--;
		if (ret) {
			/* the QP refuses work for good: fail this item, and
			 * the peer with everything queued for it */
			x->st.post_failures++;
			tx_abort(x, tx);
			tmx_peer_fail(x, p->id);
			break;
		}
		tx_posted(tx);
		n++;
	}
	return n;
}

int tmx_flush_tx(struct tm_xport *x)
{
	uint32_t i;
	int n = 0;

	if (!x->tx.tx_queued)
		return 0;
	for (i = 0; i < x->npeers; i++)
		n += flush_peer(x, x->peers[i]);
	return n;
}

/* What a kept tx does when its WR completed with status. */
static void tx_complete(struct tm_xport *x, struct tmx_peer *p,
			struct tm_tx *tx, int status)
{
	switch (tx->type) {
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
			x->tx.tx_queued--;
		}
		status = tx->rd_status;
		break;
	case TX_KEEPALIVE:
		p->ka_out = 0;
		break;
	default:
		break;
	}
	tx_done(tx, status);
}

/* Retires p's oldest WR (it completed with status). */
static void wr_retire(struct tm_xport *x, struct tmx_peer *p, int status)
{
	struct tm_wr *w = &p->wrs[p->wr_tail++ & p->wr_mask];

	p->sq_out--;
	x->tx.sq_out--;
	if (w->slot >= 0) {
		x->tx.free_slots[x->tx.n_free_slots++] = (uint32_t)w->slot;
		p->slots_out--;
	}
	if (w->sig) {
		p->sig_out--;
		x->tx.sig_out--;
	}
	if (w->tx)
		tx_complete(x, p, w->tx, status);
}

/*
 * A completion names its WR by (peer, post count); every earlier WR of
 * that QP completed before it (in order; the unsignalled ones silently).
 */
static void on_send_cqe(struct tm_xport *x, const struct ibv_wc *wc)
{
	uint32_t peer = (uint32_t)(wc->wr_id >> 32);
	uint32_t n = (uint32_t)wc->wr_id;
	const struct tm_wr *w;
	struct tmx_peer *p;

	if (peer >= x->npeers)
		return;
	p = x->peers[peer];
	/* not outstanding: an unsignalled WR of a dead peer that
	 * tm_engine_idle() already gave up on */
	if (n - p->wr_tail >= p->sq_out)
		return;
	/* the WRs before it completed silently: most are inline eager sends
	 * that hold nothing, which leave only the counts (in one step; all
	 * at once when it is the only signalled WR out and no other holds a
	 * slot: then none before it holds anything) */
	w = &p->wrs[n & p->wr_mask];
	if (w->sig && p->sig_out == 1 && p->slots_out == (w->slot >= 0)) {
		p->sq_out -= n - p->wr_tail;
		x->tx.sq_out -= n - p->wr_tail;
		p->wr_tail = n;
	}
	while (p->wr_tail != n) {
		uint32_t k = 0;

		for (;;) {
			w = &p->wrs[(p->wr_tail + k) & p->wr_mask];
			if (p->wr_tail + k == n || w->slot >= 0 || w->sig ||
			    w->tx)
				break;
			k++;
		}
		p->wr_tail += k;
		p->sq_out -= k;
		x->tx.sq_out -= k;
		if (p->wr_tail != n)
			wr_retire(x, p, IBV_WC_SUCCESS);
	}
	if (wc->status != IBV_WC_SUCCESS)
		x->st.errors++;
	wr_retire(x, p, wc->status);
	/* any error on an RC QP leaves it in the error state */
	if (wc->status != IBV_WC_SUCCESS)
		tmx_peer_fail(x, p->id);
}

int tmx_poll_send(struct tm_xport *x)
{
	struct ibv_wc wc[CQE_BATCH];
	int i, n;

	n = ibv_poll_cq(x->dev->send_cq, CQE_BATCH, wc);
	x->st.send_cqes += n > 0 ? (uint64_t)n : 0;
	for (i = 0; i < n; i++)
		on_send_cqe(x, &wc[i]);
	tmx_poll_budget(x);
	return n > 0 ? n : 0;
}

int tmx_keepalive(struct tm_xport *x, struct tmx_peer *p, uint64_t now)
{
	struct tm_tx *tx;

	if (p->ka_out)
		return 0;
	tx = tmx_tx_new(x, TX_KEEPALIVE, p->id);
	if (!tx)
		return 0; /* the next look tries again */
	tmh_fill(tx->hdr, IBV_TMH_NO_TAG,
		 (uint32_t)TM_CTRL_KEEPALIVE << TM_APP_CTRL_SHIFT, 0);
	tx->hdr_len = TMH_LEN;
	p->ka_out = 1;
	p->ka_last_ns = now;
	tmx_tx_queue(x, tx);
	return 1;
}

/*
 * An error completion on the peer's QP: an RC QP in error never delivers
 * again, so nothing queued can go.  Abort what is queued; WRs already
 * posted complete flushed and fail their own items (on_send_cqe).
 */
void tmx_peer_fail(struct tm_xport *x, uint32_t peer)
{
	struct tmx_peer *p;
	struct tm_tx *tx;

	if (peer >= x->npeers || x->peers[peer]->dead)
		return;
	p = x->peers[peer];
	p->dead = 1;
	x->ndead++;
	x->st.peer_failures++;
	if (p->held) {
		ucs_list_del(&p->plug.link);
		p->held = 0;
	}
	while (!ucs_list_is_empty(&p->txq)) {
		tx = ucs_list_extract_head(&p->txq, struct tm_tx, link);
		x->tx.tx_queued--;
		tx_abort(x, tx);
	}
	x->cb->peer_failed(x->cb_arg, peer);
}

void tmx_peer_hold(struct tm_xport *x, struct tmx_peer *p)
{
	p->plug.x = x;
	p->plug.type = TX_PLUG;
	p->plug.peer = p->id;
	p->plug.slot = -1;
	ucs_list_add_head(&p->txq, &p->plug.link);
	p->held = 1;
}

void tmx_peer_release(struct tm_xport *x, uint32_t peer)
{
	struct tmx_peer *p;

	if (peer >= x->npeers || !x->peers[peer]->held)
		return;
	p = x->peers[peer];
	ucs_list_del(&p->plug.link);
	p->held = 0;
	if (!ucs_list_is_empty(&p->txq))
		tmx_pend(x, TM_PEND_WORK);
}

/*
 * The send-queue half of tm_engine_idle(): only unsignalled WRs may be
 * left, and nothing would ever retire them (an ACK or FIN among them may
 * not even have left yet).  A live peer gets a signalled keepalive behind
 * them; a dead peer's are given up (its QP completes nothing more).  1
 * when no send WR is outstanding.
 */
int tmx_tx_idle(struct tm_xport *x)
{
	struct tmx_peer *p;
	uint32_t i;

	if (!x->tx.sq_out)
		return 1;
	if (tmx_poll_send(x) && !x->tx.sq_out)
		return 1;
	if (x->tx.sig_out)
		return 0;
	for (i = 0; i < x->npeers; i++) {
		p = x->peers[i];
		if (!p->sq_out)
			continue;
		if (p->dead) {
			while (p->sq_out)
				wr_retire(x, p, IBV_WC_WR_FLUSH_ERR);
		} else {
			tmx_keepalive(x, p, tmx_now_ns());
		}
	}
	tmx_flush_tx(x);
	return !x->tx.sq_out;
}
