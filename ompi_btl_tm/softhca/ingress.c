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
 *
 * The packet step itself is in softhca_ingress.h (inline in the poll's
 * ring pass, sched.c); here are the read requests and responses it hands
 * on, which rings are watched, and the step for the scheduler's other
 * callers.
 */
#include <errno.h>
#include <string.h>

#include "softhca_priv.h"
#include "softhca_sched.h"
#include "softhca_fast.h"
#include "softhca_match.h"
#include "softhca_ingress.h"

bool sh_rx_read_req(struct sh_qp *qp, const struct sh_pkt *pkt)
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

void sh_rx_read_resp(struct sh_qp *qp, const struct sh_pkt *pkt,
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

	qp->in_slot = sh_rx_slot_at(qp, qp->in_idx);
	qp->in_empty = qp->in_step ? qp->in_tail + 1 - ctx->lay.ring_depth : 0;
	if (qp->rxw < 0) {
		qp->rxw = (int32_t)n;
		ctx->rxw_qp[n] = qp;
		sh_rx_watch_set(qp);
		/* (armed before an idle poll can see n + 1) */
		rx_arm(ctx, n + 1);
		atomic_store_explicit(&ctx->rxw_n, n + 1, memory_order_release);
	} else {
		sh_rx_watch_set(qp);
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
	sh_rx_watch_set(last);
	atomic_store_explicit(&ctx->rxw_n, n - 1, memory_order_release);
	qp->rxw = -1;
	rx_arm(ctx, n - 1);
}

/* The packet step for the scheduler's other callers (card_step, the full
 * drain, the armed pass). */
bool sh_qp_rx_step(struct sh_qp *qp)
{
	return sh_rx_step(qp);
}
