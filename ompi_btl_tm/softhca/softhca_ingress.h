/*
 * softhca_ingress.h - the card's packet step on a QP's inbound ring,
 * inline: a poll's ring pass (sched.c, card_poll) runs it in its own frame,
 * since every arrival takes it; ingress.c keeps the rest of the receive
 * side (read requests and responses, which rings are watched) and the
 * step as a function for the scheduler's other callers.  Included (after
 * softhca_priv.h, softhca_fast.h and softhca_match.h) by sched.c and
 * ingress.c.
 *
 * Contract: sh_rx_step(qp) takes one packet from qp's ring if the card can
 * (checked on a copy of its header, as ingress.c says) and returns whether
 * it did; false leaves the packet where it is (no plain buffer, a read
 * response under way), or there was none.  sh_rx_take(qp, seq) is its
 * second half, for a watched QP whose next slot's seq the caller read (with
 * acquire) and found not "empty"; sh_rx_consume(qp, seq) is that without
 * publishing the ring's tail and watch entry, for a caller that takes
 * several packets in a row and then calls sh_rx_publish(qp) once.
 */
#ifndef SOFTHCA_INGRESS_H
#define SOFTHCA_INGRESS_H

#include <errno.h>
#include <string.h>

/* ingress.c: what a READ_REQ and a READ_RESP packet do */
bool sh_rx_read_req(struct sh_qp *qp, const struct sh_pkt *pkt);
void sh_rx_read_resp(struct sh_qp *qp, const struct sh_pkt *pkt,
		     const uint8_t *data);

static inline struct sh_pkt *sh_rx_slot_at(struct sh_qp *qp,
					    uint32_t idx)
{
	return (struct sh_pkt *)((uint8_t *)(qp->in + 1) +
				 qp->ctx->lay.slot_size * idx);
}

/* Publishes the next slot and its "empty" seq (see sh_ring_clear). */
static inline void sh_rx_watch_set(struct sh_qp *qp)
{
	struct sh_rx_watch *w = &qp->ctx->rxw[qp->rxw];

	atomic_store_explicit(&w->seq, &qp->in_slot->seq, memory_order_relaxed);
	atomic_store_explicit(&w->empty, qp->in_empty, memory_order_relaxed);
}

/* A SEND that is a whole message, the common shape (pkt is our copy). */
static inline bool pkt_one_send(const struct sh_pkt *pkt)
{
	return pkt->kind == SH_PKT_SEND &&
	       pkt->flags == (SH_PKT_FIRST | SH_PKT_LAST);
}

/* pkt_valid for that shape: the SEND rules below for it (its length
 * within the MTU keeps it below SH_MAX_MSG) */
static inline bool pkt_one_valid(const struct sh_qp *qp,
				 const struct sh_pkt *pkt)
{
	return pkt->len == pkt->msg_len && pkt->len <= qp->ctx->lay.mtu &&
	       qp->rx.dest == SH_RX_IDLE;
}

/* Is this header one the protocol allows here?  (pkt is our copy.) */
static inline bool pkt_valid(const struct sh_qp *qp, const struct sh_pkt *pkt)
{
	const struct sh_rx *rx = &qp->rx;
	bool first, last;

	if (pkt_one_send(pkt))
		return pkt_one_valid(qp, pkt);
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
 * Takes the packet under seq (the next slot's, not "empty") from this QP's
 * inbound ring, if the card can.  The peer
 * can rewrite the slot at any time, so the card works on a copy of the
 * header (and of the first bytes of payload, which hold the TMH and RVH),
 * checks it once, and reads only the payload from the ring afterwards.
 */
/* the fixed-size copy below stays inside the smallest slot (mtu >= 64) */
_Static_assert(SH_PKT_PEEK <= 64, "peek within a slot's payload");
/* a packet within the MTU is a message below SH_MAX_MSG (pkt_valid) */
_Static_assert(SH_MAX_MTU < SH_MAX_MSG, "one packet, one valid message");

static inline __attribute__((always_inline)) bool
sh_rx_consume(struct sh_qp *qp, uint32_t seq)
{
	union {
		struct sh_pkt pkt;
		uint8_t raw[sizeof(struct sh_pkt) + SH_PKT_PEEK];
	} copy;
	const struct sh_pkt *slot = qp->in_slot;
	struct sh_pkt *pkt = &copy.pkt;

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
	/* (the common shape asked once: pkt_valid's rules for it, then the
	 * card's decision on a message's first packet) */
	if (pkt_one_send(pkt)) {
		if (!pkt_one_valid(qp, pkt))
			goto bad;
		if (sh_rx_first(qp, pkt, slot->data) == EAGAIN)
			return false;
		goto consumed;
	}
	if (!pkt_valid(qp, pkt)) {
bad:
		sh_qp_bad_packet(qp);
		goto consumed;
	}
	if (pkt->kind == SH_PKT_SEND && (pkt->flags & SH_PKT_FIRST)) {
		if (sh_rx_first(qp, pkt, slot->data) == EAGAIN)
			return false;
	} else if (pkt->kind == SH_PKT_SEND) {
		sh_rx_more(qp, pkt, slot->data);
	} else if (pkt->kind == SH_PKT_READ_REQ) {
		if (!sh_rx_read_req(qp, pkt))
			return false;
	} else {
		sh_rx_read_resp(qp, pkt, slot->data);
	}
consumed:
	qp->in_tail++;
	qp->in_empty += qp->in_step;
	if (++qp->in_idx == qp->ctx->lay.ring_depth) {
		/* a lap done: from here each slot holds a lap-old seq */
		qp->in_step = 1;
		qp->in_empty = qp->in_tail + 1 - qp->ctx->lay.ring_depth;
		qp->in_idx = 0;
		qp->in_slot = sh_rx_slot_at(qp, 0);
	} else {
		qp->in_slot = (struct sh_pkt *)((uint8_t *)qp->in_slot +
						qp->ctx->lay.slot_size);
	}
	return true;
}

/*
 * What the card took from qp's ring, made visible: the shared tail (the
 * producer's room: its slots are free to rewrite) and the watch entry (an
 * idle poll's look at the next slot).  Neither need be current between
 * two packets of one card run: a tail behind only makes a producer that
 * finds the ring full wait for this store, and a watch entry behind names
 * a slot that no longer reads "empty", so an idle poll runs the card,
 * which takes the lock and finds nothing new.
 */
static inline void sh_rx_publish(struct sh_qp *qp)
{
	atomic_store_explicit(&qp->in->tail, qp->in_tail,
			      memory_order_release);
	sh_rx_watch_set(qp);
}

/* One packet, published (sh_rx_consume, then sh_rx_publish). */
static inline __attribute__((always_inline)) bool
sh_rx_take(struct sh_qp *qp, uint32_t seq)
{
	if (!sh_rx_consume(qp, seq))
		return false;
	sh_rx_publish(qp);
	return true;
}

/*
 * The step: a watched QP's next slot, taken if its seq (read with acquire,
 * so the packet under it is seen) is not "empty".  A caller that has just
 * read that seq itself (sched.c, a poll's ring pass) goes to sh_rx_take
 * with it.
 */
static inline __attribute__((always_inline)) bool
sh_rx_step(struct sh_qp *qp)
{
	uint32_t seq;

	if (qp->rxw < 0)
		return false;
	seq = atomic_load_explicit(&qp->in_slot->seq, memory_order_acquire);
	if (seq == qp->in_empty)
		return false;
	return sh_rx_take(qp, seq);
}

#endif /* SOFTHCA_INGRESS_H */
