/*
 * softhca_sched.h - the scheduler's contract with the verbs: how posts,
 * polls and state changes reach the card (sched.c).
 *
 * The soft card runs inside the verbs calls made on its context.  A verb
 * reaches it through one hook, the doorbell: a post rings it after its
 * work requests are written into their queue (send queue, receive queue,
 * list-op queue), a poll rings it before it reads the CQ, a QP moved to
 * error rings it for the flush.  The scheduler then runs the card's steps
 * (sched.c); no verb calls a step itself.  The hook is installed in the
 * context when it is opened (ctx->doorbell = sh_sched_doorbell), so the
 * verbs depend on this contract, not on the scheduler's code.
 *
 * The quiet state lets an idle poll skip the doorbell: the card left
 * nothing to do but wait for packets, and no watched ring has one.
 */
#ifndef SOFTHCA_SCHED_H
#define SOFTHCA_SCHED_H

#include "softhca_priv.h"

/* sched.c: the doorbell's target; called with ctx->lock held (or on a
 * lock-free context) */
void sh_sched_doorbell(struct sh_context *ctx, enum sh_bell why,
		       struct sh_qp *qp);

/* The card has work the quiet state does not show (under ctx->lock). */
static inline void sh_sched_kick(struct sh_context *ctx)
{
	atomic_store_explicit(&ctx->quiet, false, memory_order_relaxed);
}

/*
 * The hook through which posts, polls and state changes reach the card
 * (called with ctx->lock held, or on a lock-free context).  A post rings
 * it after its work requests are queued, a poll before it reads the CQ;
 * a post that left nothing is only counted, without a call.  So is a
 * buffer posted to an SRQ of an AUTO card: it gives the card work only if
 * an arrival waits for one, and such an arrival is still in its ring,
 * which keeps the next poll from taking the quiet path: that poll takes
 * it.  (why is a constant at every call: the tests fold.)
 */
static inline void sh_doorbell(struct sh_context *ctx, enum sh_bell why,
			       struct sh_qp *qp)
{
	if (why == SH_BELL_POSTED ||
	    (why == SH_BELL_SRQ_RECV && ctx->sched == SOFTHCA_SCHED_AUTO))
		ctx->post_seq++; /* read pacing: the application is posting */
	else
		ctx->doorbell(ctx, why, qp);
}

/*
 * Lock-free: does no watched ring have its next packet?  A stale answer
 * only delays the poll that follows: the card, under the lock, looks again.
 * (Inline: an idle poll is this loop and little else.)  With more than
 * SH_RX_ARM_FROM rings the producers' arrival hint answers instead (the
 * card clears it when it looks at every ring, sched.c), and the rings
 * themselves each SH_RX_SCAN_EVERY-th time, so that a peer that clears
 * the hint (the ring segment is the peers' to write) only delays.
 */
static inline bool sh_rx_quiet(struct sh_context *ctx)
{
	uint32_t n = atomic_load_explicit(&ctx->rxw_n, memory_order_acquire), k;
	const struct sh_rx_watch *w, *end;

	/* many rings: the arrival hint, and every ring now and then (the
	 * producers were asked for it before n grew past SH_RX_ARM_FROM) */
	if (n > SH_RX_ARM_FROM) {
		if (atomic_load_explicit(&ctx->rings->rx_hint,
					 memory_order_acquire))
			return false;
		/* (threads racing here may lose a count: only a delay) */
		k = atomic_load_explicit(&ctx->idle_polls,
					 memory_order_relaxed) + 1;
		atomic_store_explicit(&ctx->idle_polls, k,
				      memory_order_relaxed);
		if (k & (SH_RX_SCAN_EVERY - 1))
			return true;
	}
	w = ctx->rxw;
	end = w + n;
	for (; w < end; w++)
		if (atomic_load_explicit(atomic_load_explicit(
				&w->seq, memory_order_relaxed),
				memory_order_relaxed) !=
		    atomic_load_explicit(&w->empty, memory_order_relaxed)) {
			/* (a packet no bit named: the card looks at all) */
			if (n > SH_RX_ARM_FROM)
				atomic_store_explicit(&ctx->rx_full, 1,
						      memory_order_relaxed);
			return false;
		}
	return true;
}

/*
 * The card has nothing to do but wait for packets, and none arrived
 * (lock-free; a stale answer only delays the poll that follows).
 */
static inline bool sh_sched_quiet(struct sh_context *ctx)
{
	return atomic_load_explicit(&ctx->quiet, memory_order_acquire) &&
	       sh_rx_quiet(ctx);
}

#endif /* SOFTHCA_SCHED_H */
