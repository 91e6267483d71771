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
#include "softhca_sched.h"
#include "softhca_fast.h"
#include "softhca_match.h"

static bool rx_read_req(struct sh_qp *qp, const struct sh_pkt *pkt)
{
	struct sh_read_resp *r = &qp->resp;

	if (r->active)
		return false;
	sh_qp_resp_active(qp, true);
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
		/* one of the card's rendezvous reads, or nobody's */
		if (!sh_rndv_data(qp, pkt, data))
			sh_qp_bad_packet(qp);
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

static struct sh_pkt *slot_at(struct sh_qp *qp, uint32_t idx)
{
	return (struct sh_pkt *)((uint8_t *)(qp->in + 1) +
				 qp->ctx->lay.slot_size * idx);
}

/* Publishes the next slot and its "empty" seq (see sh_ring_clear). */
static void watch_set(struct sh_qp *qp)
{
	struct sh_rx_watch *w = &qp->ctx->rxw[qp->rxw];

	atomic_store_explicit(&w->seq, &qp->in_slot->seq, memory_order_relaxed);
	atomic_store_explicit(&w->empty, qp->in_empty, memory_order_relaxed);
}

/*
 * n rings watched: ask the producers for the arrival hint or stop (see
 * SH_RX_ARM_FROM).  A producer may still publish a packet without the hint
 * after this (it had not seen the change): the next poll runs the card,
 * which looks at every ring (rx_full), and a packet later than that waits
 * for the periodic look (SH_RX_SCAN_EVERY idle polls) at most.
 */
static void rx_arm(struct sh_context *ctx, uint32_t n)
{
	bool arm = n > SH_RX_ARM_FROM;

	if (arm == ctx->rx_armed)
		return;
	ctx->rx_armed = arm;
	atomic_store_explicit(&ctx->rx_full, 1, memory_order_relaxed);
	atomic_store_explicit(&ctx->seg->rx_armed, arm, memory_order_release);
	sh_sched_kick(ctx);
}

/* A connected QP's ring joins the ones an idle poll looks at. */
void sh_rx_watch(struct sh_qp *qp)
{
	struct sh_context *ctx = qp->ctx;
	uint32_t n = atomic_load_explicit(&ctx->rxw_n, memory_order_relaxed);

	qp->in_slot = slot_at(qp, qp->in_idx);
	qp->in_empty = qp->in_step ? qp->in_tail + 1 - ctx->lay.ring_depth : 0;
	if (qp->rxw < 0) {
		qp->rxw = (int32_t)n;
		ctx->rxw_qp[n] = qp;
		watch_set(qp);
		/* (armed before an idle poll can see n + 1) */
		rx_arm(ctx, n + 1);
		atomic_store_explicit(&ctx->rxw_n, n + 1, memory_order_release);
	} else {
		watch_set(qp);
	}
	/* (its ring may hold packets sent before it was watched, whose bits
	 * named no ring: the next run looks at every ring) */
	atomic_store_explicit(&ctx->rx_full, 1, memory_order_relaxed);
	sh_sched_kick(ctx);
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
	rx_arm(ctx, n - 1);
}

/* Is this header one the protocol allows here?  (pkt is our copy.) */
static bool pkt_valid(const struct sh_qp *qp, const struct sh_pkt *pkt)
{
	const struct sh_rx *rx = &qp->rx;
	bool first, last;

	/* a message in one packet, the common shape: the SEND rules below
	 * for it (its length within the MTU keeps it below SH_MAX_MSG) */
	if (pkt->kind == SH_PKT_SEND &&
	    pkt->flags == (SH_PKT_FIRST | SH_PKT_LAST))
		return pkt->len == pkt->msg_len &&
		       pkt->len <= qp->ctx->lay.mtu && rx->dest == SH_RX_IDLE;
	first = pkt->flags & SH_PKT_FIRST;
	last = pkt->flags & SH_PKT_LAST;
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
 */
/* the fixed-size copy below stays inside the smallest slot (mtu >= 64) */
_Static_assert(SH_PKT_PEEK <= 64, "peek within a slot's payload");
/* a packet within the MTU is a message below SH_MAX_MSG (pkt_valid) */
_Static_assert(SH_MAX_MTU < SH_MAX_MSG, "one packet, one valid message");

bool sh_qp_rx_step(struct sh_qp *qp)
{
	union {
		struct sh_pkt pkt;
		uint8_t raw[sizeof(struct sh_pkt) + SH_PKT_PEEK];
	} copy;
	const struct sh_pkt *slot = qp->in_slot;
	struct sh_pkt *pkt = &copy.pkt;
	uint32_t seq;

	if (qp->rxw < 0)
		return false;
	seq = atomic_load_explicit(&qp->in_slot->seq, memory_order_acquire);
	if (seq == qp->in_empty)
		return false;
	if (seq != qp->in_tail + 1) {
		/*
		 * Neither empty nor the packet due: a producer that lies.  The
		 * slot gets the seq a real packet would have left, or it would
		 * read forged again a lap on and the card would never stop.
		 */
		atomic_store_explicit(&qp->in_slot->seq, qp->in_tail + 1,
				      memory_order_relaxed);
		if (qp->qp.state != IBV_QPS_ERR)
			sh_qp_bad_packet(qp);
		goto consumed;
	}
	if (qp->qp.state == IBV_QPS_ERR)
		goto consumed; /* an errored QP drops what arrives */
	/*
	 * One fixed-size copy of the header and the peek bytes (a slot holds
	 * at least 64 payload bytes); those past the packet's length are
	 * never read.  The copied seq is not read either: the one checked is
	 * what counts.
	 */
	memcpy(&copy, slot, sizeof(copy));
	if (!pkt_valid(qp, pkt)) {
		sh_qp_bad_packet(qp);
		goto consumed;
	}
	/* (a message's first packet first: every arrival's) */
	if (pkt->kind == SH_PKT_SEND && (pkt->flags & SH_PKT_FIRST)) {
		if (sh_rx_first(qp, pkt, slot->data) == EAGAIN)
			return false;
	} else if (pkt->kind == SH_PKT_SEND) {
		sh_rx_more(qp, pkt, slot->data);
	} else if (pkt->kind == SH_PKT_READ_REQ) {
		if (!rx_read_req(qp, pkt))
			return false;
	} else {
		rx_read_resp(qp, pkt, slot->data);
	}
consumed:
	qp->in_tail++;
	qp->in_empty += qp->in_step;
	if (++qp->in_idx == qp->ctx->lay.ring_depth) {
		/* a lap done: from here each slot holds a lap-old seq */
		qp->in_step = 1;
		qp->in_empty = qp->in_tail + 1 - qp->ctx->lay.ring_depth;
		qp->in_idx = 0;
		qp->in_slot = slot_at(qp, 0);
	} else {
		qp->in_slot = (struct sh_pkt *)((uint8_t *)qp->in_slot +
						qp->ctx->lay.slot_size);
	}
	atomic_store_explicit(&qp->in->tail, qp->in_tail,
			      memory_order_release);
	watch_set(qp);
	return true;
}
