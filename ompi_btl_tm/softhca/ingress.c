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

bool sh_qp_rx_ready(struct sh_qp *qp)
{
	return qp->in && qp->qp.state >= IBV_QPS_RTR &&
	       qp->in_tail != atomic_load_explicit(&qp->in->head,
						   memory_order_acquire);
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
 * can rewrite the ring at any time, so the card works on a copy of the
 * header (and of the first bytes of payload, which hold the TMH and RVH),
 * checks it once, and reads only the payload from the ring afterwards.
 */
bool sh_qp_rx_step(struct sh_qp *qp)
{
	union {
		struct sh_pkt pkt;
		uint8_t raw[sizeof(struct sh_pkt) + SH_PKT_PEEK];
	} copy;
	uint32_t tail, head, peek;
	const struct sh_pkt *slot;
	struct sh_pkt *pkt = &copy.pkt;

	if (!sh_qp_rx_ready(qp))
		return false;
	tail = qp->in_tail;
	head = atomic_load_explicit(&qp->in->head, memory_order_acquire);
	if (head - tail > qp->ctx->lay.ring_depth) {
		/* A producer that claims more than the ring holds. */
		sh_qp_bad_packet(qp);
		tail = head - 1;
		goto consumed;
	}
	if (qp->qp.state == IBV_QPS_ERR)
		goto consumed; /* an errored QP drops what arrives */
	slot = (const struct sh_pkt *)sh_ring_slot(&qp->ctx->lay, qp->in,
						   tail);
	memcpy(pkt, slot, sizeof(*pkt));
	if (!pkt_valid(qp, pkt)) {
		sh_qp_bad_packet(qp);
		goto consumed;
	}
	peek = pkt->len < SH_PKT_PEEK ? pkt->len : SH_PKT_PEEK;
	memcpy(copy.raw + sizeof(*pkt), slot->data, peek);
	memset(copy.raw + sizeof(*pkt) + peek, 0, SH_PKT_PEEK - peek);
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
	qp->in_tail = tail + 1;
	atomic_store_explicit(&qp->in->tail, qp->in_tail,
			      memory_order_release);
	return true;
}

