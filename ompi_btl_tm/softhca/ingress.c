/*
 * ingress.c - the card's receive side of a QP: taking packets out of its
 * inbound ring.
 *
 * The ring is in shared memory that the peer writes, so nothing in it is
 * trusted: the card keeps its own tail, copies each packet header (and
 * the first payload bytes, which hold the TMH and RVH) out of its slot,
 * checks it against the protocol and this QP's state, and only then acts
 * on it; the payload is read from the ring only within the checked length.
 * A packet that fails is dropped, counted, and fails the QP.
 */
#include <errno.h>
#include <string.h>

#include "softhca_priv.h"

/*
 * A packet that breaks the protocol: dropped, counted, and the QP goes to
 * the error state, as a card's does on a malformed request.
 */
void sh_qp_bad_packet(struct sh_qp *qp)
{
	qp->ctx->bad_packets++;
	if (qp->qp.state != IBV_QPS_ERR)
		sh_qp_error(qp, IBV_WC_REM_INV_REQ_ERR);
}

static bool rx_read_req(struct sh_qp *qp, const struct sh_pkt *pkt)
{
	struct sh_read_resp *r = &qp->resp;

	if (r->active)
		return false;
	r->active = true;
	r->req_id = pkt->req_id;
	r->va = pkt->va;
	r->rkey = pkt->rkey;
	r->len = pkt->msg_len;
	r->done = 0;
	r->status = sh_mr_check(&qp->ctx->lay, qp->ctx->seg, pkt->rkey,
				pkt->va, pkt->msg_len, IBV_ACCESS_REMOTE_READ)
			    ? IBV_WC_REM_ACCESS_ERR
			    : IBV_WC_SUCCESS;
	return true;
}

/* A responder only ever reports success or an access error. */
static enum ibv_wc_status resp_status(const struct sh_pkt *pkt)
{
	return pkt->status == IBV_WC_SUCCESS ? IBV_WC_SUCCESS
					     : IBV_WC_REM_ACCESS_ERR;
}

static void rx_read_resp(struct sh_qp *qp, const struct sh_pkt *pkt,
			 const uint8_t *data)
{
	struct sh_swr *w = qp->sq_count ? &qp->sq[qp->sq_first] : NULL;

	if (!w || w->kind != SH_SWR_READ || !w->started ||
	    w->remote_addr != pkt->req_id) {
		sh_card_read_done(qp->ctx, pkt->req_id, qp, pkt, data);
		return;
	}
	if (resp_status(pkt) != IBV_WC_SUCCESS) {
		sh_qp_error(qp, resp_status(pkt));
		return;
	}
	/* In order, inside what was asked, and last exactly at the end. */
	if (pkt->va != w->done || pkt->len > w->len - w->done ||
	    !(pkt->flags & SH_PKT_LAST) != (w->done + pkt->len < w->len)) {
		sh_qp_bad_packet(qp);
		return;
	}
	sh_scatter(w->sge, w->num_sge, w->done, data, pkt->len);
	w->done += pkt->len;
	if (pkt->flags & SH_PKT_LAST)
		sh_qp_sq_complete(qp, IBV_WC_SUCCESS);
}

/* ---- the watched rings ---------------------------------------------- */

static _Atomic uint32_t *in_seq(struct sh_qp *qp)
{
	return &((struct sh_pkt *)((uint8_t *)(qp->in + 1) +
				   qp->ctx->lay.slot_size * qp->in_idx))->seq;
}

/* What the next slot's seq reads while nothing arrived (sh_ring_clear). */
static uint32_t in_empty(const struct sh_qp *qp)
{
	return qp->in_tail + 1 - qp->ctx->lay.ring_depth;
}

static void watch_set(struct sh_qp *qp)
{
	struct sh_rx_watch *w = &qp->ctx->rxw[qp->rxw];

	atomic_store_explicit(&w->seq, in_seq(qp), memory_order_relaxed);
	atomic_store_explicit(&w->empty, in_empty(qp), memory_order_relaxed);
}

/* A connected QP's ring joins the ones an idle poll looks at. */
void sh_rx_watch(struct sh_qp *qp)
{
	struct sh_context *ctx = qp->ctx;
	uint32_t n = atomic_load_explicit(&ctx->rxw_n, memory_order_relaxed);

	if (qp->rxw < 0) {
		qp->rxw = (int32_t)n;
		ctx->rxw_qp[n] = qp;
		watch_set(qp);
		atomic_store_explicit(&ctx->rxw_n, n + 1, memory_order_release);
	} else {
		watch_set(qp);
	}
}

/* The last entry takes the place of qp's (a racing idle poll may misread
 * one entry: that only delays it). */
void sh_rx_unwatch(struct sh_qp *qp)
{
	struct sh_context *ctx = qp->ctx;
	uint32_t n = atomic_load_explicit(&ctx->rxw_n, memory_order_relaxed);
	struct sh_qp *last;

	if (qp->rxw < 0)
		return;
	last = ctx->rxw_qp[n - 1];
	ctx->rxw_qp[qp->rxw] = last;
	last->rxw = qp->rxw;
	watch_set(last);
	atomic_store_explicit(&ctx->rxw_n, n - 1, memory_order_release);
	qp->rxw = -1;
}

/*
 * Lock-free: does no watched ring have its next packet?  A stale answer
 * only delays the poll that follows: the card, under the lock, looks again.
 */
bool sh_rx_quiet(struct sh_context *ctx)
{
	uint32_t n = atomic_load_explicit(&ctx->rxw_n, memory_order_acquire);

	for (uint32_t i = 0; i < n; i++) {
		struct sh_rx_watch *w = &ctx->rxw[i];
		_Atomic uint32_t *seq = atomic_load_explicit(
			&w->seq, memory_order_relaxed);

		if (atomic_load_explicit(seq, memory_order_relaxed) !=
		    atomic_load_explicit(&w->empty, memory_order_relaxed))
			return false;
	}
	return true;
}

/* Has the next slot changed: a packet, or a forged seq to reject? */
bool sh_qp_rx_ready(struct sh_qp *qp)
{
	return qp->rxw >= 0 && qp->qp.state >= IBV_QPS_RTR &&
	       atomic_load_explicit(in_seq(qp), memory_order_relaxed) !=
		       in_empty(qp);
}

/* Is this header one the protocol allows here?  (pkt is our copy.) */
static bool pkt_valid(const struct sh_qp *qp, const struct sh_pkt *pkt)
{
	const struct sh_rx *rx = &qp->rx;
	bool first = pkt->flags & SH_PKT_FIRST, last = pkt->flags & SH_PKT_LAST;

	if (pkt->len > qp->ctx->lay.mtu ||
	    (pkt->flags & ~(uint32_t)(SH_PKT_FIRST | SH_PKT_LAST)))
		return false;
	switch (pkt->kind) {
	case SH_PKT_SEND:
		if (pkt->msg_len >= SH_MAX_MSG)
			return false;
		if (first)
			return rx->dest == SH_RX_IDLE &&
			       pkt->len <= pkt->msg_len &&
			       last == (pkt->len == pkt->msg_len);
		return rx->dest != SH_RX_IDLE &&
		       pkt->msg_len == rx->msg_len &&
		       pkt->len <= rx->msg_len - rx->off &&
		       last == (rx->off + pkt->len == rx->msg_len);
	case SH_PKT_READ_REQ:
		return first && last && !pkt->len &&
		       pkt->msg_len < SH_MAX_MSG;
	case SH_PKT_READ_RESP:
		return !first && pkt->msg_len < SH_MAX_MSG &&
		       pkt->len <= pkt->msg_len;
	}
	return false;
}

/*
 * Takes one packet from this QP's inbound ring, if the card can.  The peer
 * can rewrite the slot at any time, so the card works on a copy of the
 * header (and of the first bytes of payload, which hold the TMH and RVH),
 * checks it once, and reads only the payload from the ring afterwards.
 * Bytes of the peek area past the packet's length are never read (the TMH
 * and RVH checks need the length first), so they are not cleared.
 */
bool sh_qp_rx_step(struct sh_qp *qp)
{
	union {
		struct sh_pkt pkt;
		uint8_t raw[sizeof(struct sh_pkt) + SH_PKT_PEEK];
	} copy;
	const struct sh_pkt *slot;
	struct sh_pkt *pkt = &copy.pkt;

	if (!sh_qp_rx_ready(qp))
		return false;
	if (atomic_load_explicit(in_seq(qp), memory_order_acquire) !=
	    qp->in_tail + 1) {
		/*
		 * Neither empty nor the packet due: a producer that lies.  The
		 * slot gets the seq a real packet would have left, or it would
		 * read forged again a lap on and the card would never stop.
		 */
		atomic_store_explicit(in_seq(qp), qp->in_tail + 1,
				      memory_order_relaxed);
		if (qp->qp.state != IBV_QPS_ERR)
			sh_qp_bad_packet(qp);
		goto consumed;
	}
	if (qp->qp.state == IBV_QPS_ERR)
		goto consumed; /* an errored QP drops what arrives */
	slot = (const struct sh_pkt *)((const uint8_t *)(qp->in + 1) +
				       qp->ctx->lay.slot_size * qp->in_idx);
	/* (the copied seq is never read: the one checked is what counts) */
	memcpy(pkt, slot, sizeof(*pkt));
	if (!pkt_valid(qp, pkt)) {
		sh_qp_bad_packet(qp);
		goto consumed;
	}
	memcpy(copy.raw + sizeof(*pkt), slot->data,
	       pkt->len < SH_PKT_PEEK ? pkt->len : SH_PKT_PEEK);
	switch (pkt->kind) {
	case SH_PKT_SEND:
		if (!(pkt->flags & SH_PKT_FIRST))
			sh_rx_more(qp, pkt, slot->data);
		else if (sh_rx_first(qp, pkt, slot->data) == EAGAIN)
			return false;
		break;
	case SH_PKT_READ_REQ:
		if (!rx_read_req(qp, pkt))
			return false;
		break;
	case SH_PKT_READ_RESP:
		rx_read_resp(qp, pkt, slot->data);
		break;
	}
consumed:
	qp->in_tail++;
	if (++qp->in_idx == qp->ctx->lay.ring_depth)
		qp->in_idx = 0;
	atomic_store_explicit(&qp->in->tail, qp->in_tail,
			      memory_order_release);
	watch_set(qp);
	return true;
}
