/*
 * sched.c - when the card works: the scheduler, the one place that runs
 * the card's steps.
 *
 * The soft card has no thread of its own: it runs inside the verbs calls
 * made on its context.  Those reach it through one hook, the doorbell
 * (sh_sched_doorbell, installed in the context and rung with
 * sh_doorbell): a post rings it after writing its work request into a
 * queue, a poll before reading the CQ.  Neither calls a step itself, as
 * on rdma-core's providers a post writes a WQE and a poll reads a CQE.
 *
 * The card's work comes in four kinds (softhca.h, enum softhca_work), each
 * a step of its own module: list ops in post order (srq.c,
 * sh_srq_op_step), inbound packets per QP in wire order (ingress.c, which
 * hands messages to match.c), outbound packets per QP in send-queue order
 * (egress.c), and rendezvous reads (rndv.c).  Within a kind the order is
 * the hardware's; across kinds any interleaving is a legal card, and
 * RANDOM/MANUAL scheduling exist to explore them.  A step that fails a QP
 * only marks it (qperr.c); the scheduler flushes it right after that step
 * (qp_flush), so no verbs call returns with a flush owed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softhca_priv.h"
#include "softhca_sched.h"
#include "softhca_fast.h"
#include "softhca_match.h"
#include "softhca_ingress.h"

/* ---- flushing a QP in error ------------------------------------------ */

/*
 * The head WR completes with the reason the QP failed, the rest of its
 * work flushed: the send queue, the message under way, the rendezvous
 * reads, the read it serves, its own receive queue.
 */
static void qp_flush(struct sh_qp *qp)
{
	qp->flush_pending = false;
	qp->ctx->flush_n--;
	sh_qp_sq_flush(qp, qp->flush_why);
	sh_rx_abort(qp);
	sh_rndv_drop(qp->ctx, qp);
	sh_qp_resp_active(qp, false);
	while (qp->rq.count) {
		sh_qp_flush_wr(qp, qp->rcq, qp->rq.buf[qp->rq.first].wr_id,
			       IBV_WC_RECV);
		qp->rq.first = (qp->rq.first + 1) % qp->rq.cap;
		qp->rq.count--;
	}
}

static void flush_all(struct sh_context *ctx)
{
	for (uint32_t i = 0; ctx->flush_n && i < ctx->qp_hwm; i++)
		if (ctx->qps[i] && ctx->qps[i]->flush_pending)
			qp_flush(ctx->qps[i]);
}

/* After every step: a QP it failed is flushed before the next step. */
static inline void flush_due(struct sh_context *ctx)
{
	if (ctx->flush_n)
		flush_all(ctx);
}

/* ---- scheduling ------------------------------------------------------ */

static uint64_t rng_next(struct sh_context *ctx)
{
	uint64_t x = ctx->rng;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	ctx->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

static bool op_step(struct sh_context *ctx)
{
	for (struct sh_srq *srq = ctx->srqs; srq; srq = srq->next)
		if (sh_srq_op_step(srq)) {
			flush_due(ctx);
			return true;
		}
	return false;
}

static bool op_ready(struct sh_context *ctx)
{
	return ctx->ops_queued;
}

static struct sh_qp *qp_by_num(struct sh_context *ctx, uint32_t qpn)
{
	uint32_t i = qpn - SH_QPN_BASE;

	return qpn >= SH_QPN_BASE && i < ctx->qp_hwm ? ctx->qps[i] : NULL;
}

/* One packet on qpn, or on the next QP (round robin from *cursor). */
static bool qp_step(struct sh_context *ctx, uint32_t qpn, uint32_t *cursor,
		    bool (*step)(struct sh_qp *))
{
	struct sh_qp *qp;

	if (qpn != SOFTHCA_ANY_QP) {
		bool done;

		qp = qp_by_num(ctx, qpn);
		done = qp && step(qp);
		flush_due(ctx);
		return done;
	}
	for (uint32_t n = 0; n < ctx->qp_hwm; n++) {
		uint32_t i = (*cursor + n) % ctx->qp_hwm;

		qp = ctx->qps[i];
		if (qp && step(qp)) {
			*cursor = i + 1;
			flush_due(ctx);
			return true;
		}
	}
	return false;
}

static bool any_ready(struct sh_context *ctx, bool (*ready)(struct sh_qp *))
{
	for (uint32_t i = 0; i < ctx->qp_hwm; i++)
		if (ctx->qps[i] && ready(ctx->qps[i]))
			return true;
	return false;
}

static bool card_step(struct sh_context *ctx, enum softhca_work kind,
		      uint32_t qpn)
{
	switch (kind) {
	case SOFTHCA_WORK_OP:
		return op_step(ctx);
	case SOFTHCA_WORK_RX:
		return qp_step(ctx, qpn, &ctx->rr_rx, sh_qp_rx_step);
	case SOFTHCA_WORK_TX:
		return qp_step(ctx, qpn, &ctx->rr_tx, sh_qp_tx_step);
	case SOFTHCA_WORK_READ: {
		bool done = sh_rndv_step(ctx);

		flush_due(ctx);
		return done;
	}
	}
	return false;
}

/* sh_qp_rx_ready for a QP known to be watched (ctx->rxw_qp): the next
 * slot's seq in *seq, read with acquire for sh_rx_consume */
static inline bool watched_ready(const struct sh_qp *qp, uint32_t *seq)
{
	*seq = atomic_load_explicit(&qp->in_slot->seq, memory_order_acquire);
	return *seq != qp->in_empty;
}

/*
 * Steps a watched QP's ring while it has a packet.  Whether the QP still
 * has receive work: a packet a step could not take there (it waits for a
 * buffer or for ring room), or a message under way.  A packet that lands
 * after the look is the next run's (its ring, or its bit, keeps the quiet
 * path from being taken).  inl: the packet step inline (a poll's pass,
 * every arrival's: one frame fewer), its ring's tail and watch entry
 * published once after the packets it took, else the call (the other
 * passes, one copy of the step).
 */
static inline __attribute__((always_inline)) bool
rx_visit(struct sh_context *ctx, struct sh_qp *qp, int *n, bool inl)
{
	bool stuck = false;
	uint32_t seq;

	if (watched_ready(qp, &seq)) {
		/* (inline: the step's second half, with the seq just read) */
		while (!(stuck = !(inl ? sh_rx_consume(qp, seq)
				       : sh_qp_rx_step(qp))) &&
		       (++*n, watched_ready(qp, &seq)))
			;
		if (inl)
			sh_rx_publish(qp);
		/* (a QP failed by these steps: flushed before another's) */
		flush_due(ctx);
	}
	return stuck || qp->rx.dest != SH_RX_IDLE;
}

static inline void rx_pend_set(struct sh_context *ctx, uint32_t i)
{
	i = sh_rx_bit(i);
	ctx->rx_pend[i / 64] |= 1ull << (i % 64);
}

/*
 * Every watched ring (rx steps never unwatch a QP: the array is stable);
 * armed, the QPs left with work are noted in rx_pend.  (Inlined: with a
 * constant armed, the few-rings loop is the plain one.)
 */
static inline __attribute__((always_inline)) bool
rx_scan_all(struct sh_context *ctx, int *n, bool armed, bool inl)
{
	bool busy = false;

	for (uint32_t i = 0, m = ctx->rxw_n; i < m; i++) {
		struct sh_qp *qp = ctx->rxw_qp[i];

		if (rx_visit(ctx, qp, n, inl)) {
			busy = true;
			if (armed)
				rx_pend_set(ctx, qp->index);
		}
	}
	return busy;
}

/* The rings arrival bit i names (the last names every ring from it on). */
static bool rx_visit_bit(struct sh_context *ctx, uint32_t i, int *n)
{
	uint32_t end = i == SH_RX_BITS - 1 ? ctx->qp_hwm : i + 1;
	bool busy = false;

	for (; i < end && i < ctx->qp_hwm; i++) {
		struct sh_qp *qp = ctx->qps[i];

		/* (a bit is a peer's word: an unwatched QP's ring is not
		 * looked at) */
		if (qp && qp->rxw >= 0 && rx_visit(ctx, qp, n, false)) {
			busy = true;
			rx_pend_set(ctx, i);
		}
	}
	return busy;
}

/* The words of arrival bits a QP of ours can have. */
static inline uint32_t rx_words(const struct sh_context *ctx)
{
	uint32_t w = (ctx->qp_hwm + 63) / 64;

	return w < SH_RX_BIT_WORDS ? w : SH_RX_BIT_WORDS;
}

/* Only the rings the bits and rx_pend name. */
static bool rx_scan_bits(struct sh_context *ctx, int *n)
{
	_Atomic uint64_t *bits = ctx->rings->rx_bits;
	bool busy = false;

	for (uint32_t w = 0, m = rx_words(ctx); w < m; w++) {
		uint64_t b = ctx->rx_pend[w];

		if (atomic_load_explicit(&bits[w], memory_order_relaxed))
			b |= atomic_exchange_explicit(&bits[w], 0,
						      memory_order_seq_cst);
		ctx->rx_pend[w] = 0;
		for (; b; b &= b - 1)
			busy |= rx_visit_bit(ctx, w * 64 +
					     (uint32_t)__builtin_ctzll(b), n);
	}
	return busy;
}

/*
 * Armed (rx_pass): the rings the bits name, or every one when rx_full says
 * so or each SH_RX_SCAN_EVERY-th run (the bits are peer-written).  The
 * hint is cleared, then the bits taken, then the rings read, so a packet
 * the look misses has its bit and hint stored after, for the next run.
 */
static bool rx_pass_armed(struct sh_context *ctx, int *n)
{
	_Atomic uint64_t *bits = ctx->rings->rx_bits;

	if (atomic_load_explicit(&ctx->rings->rx_hint, memory_order_relaxed))
		atomic_store_explicit(&ctx->rings->rx_hint, 0,
				      memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	if (!(++ctx->rx_runs & (SH_RX_SCAN_EVERY - 1)) ||
	    atomic_load_explicit(&ctx->rx_full, memory_order_relaxed)) {
		atomic_store_explicit(&ctx->rx_full, 0, memory_order_relaxed);
		for (uint32_t w = 0, m = rx_words(ctx); w < m; w++) {
			ctx->rx_pend[w] = 0;
			if (atomic_load_explicit(&bits[w],
						 memory_order_relaxed))
				atomic_exchange_explicit(&bits[w], 0,
							 memory_order_seq_cst);
		}
		atomic_thread_fence(memory_order_seq_cst);
		return rx_scan_all(ctx, n, true, false);
	}
	return rx_scan_bits(ctx, n);
}

/*
 * One look at the rings that may have news: every watched ring while the
 * producers are not asked for bits (SH_RX_ARM_FROM rings or fewer), else
 * rx_pass_armed.  Returns whether a watched QP still has receive work
 * (rx_visit).
 */
static inline __attribute__((always_inline)) bool
rx_pass(struct sh_context *ctx, int *n, bool inl)
{
	return ctx->rx_armed ? rx_pass_armed(ctx, n)
			     : rx_scan_all(ctx, n, false, inl);
}

/* Armed: does a QP have receive work, or a ring news?  (under the lock) */
static bool rx_pending(struct sh_context *ctx)
{
	for (uint32_t w = 0, m = rx_words(ctx); w < m; w++)
		if (ctx->rx_pend[w])
			return true;
	return atomic_load_explicit(&ctx->rings->rx_hint,
				    memory_order_acquire) ||
	       atomic_load_explicit(&ctx->rx_full, memory_order_relaxed);
}

/*
 * Everything the card can do now.  A pass moves what the send queues hold
 * (only QPs with a WR or a read response are stepped) and what the
 * watched rings hold (connected QPs only: ctx->rxw); another pass is
 * needed only when this one did something, since that may have made work
 * elsewhere (a FIN to send, a packet on a loopback ring, ring space for a
 * blocked send).  Taking every send before every arrival is one of the
 * interleavings a card may choose.
 */
static int card_drain(struct sh_context *ctx)
{
	int total = 0, n;

	do {
		n = 0;
		for (struct sh_srq *srq = ctx->srqs; srq; srq = srq->next)
			while (srq->ops_count && sh_srq_op_step(srq))
				n++;
		for (uint32_t i = 0; ctx->tx_work && i < ctx->qp_hwm; i++) {
			struct sh_qp *qp = ctx->qps[i];

			if (qp && (qp->sq_count || qp->resp.active))
				while (sh_qp_tx_step(qp)) {
					n++;
					flush_due(ctx);
				}
		}
		rx_pass(ctx, &n, false);
		while (ctx->jobs && sh_rndv_step(ctx)) {
			n++;
			flush_due(ctx);
		}
		total += n;
	} while (n);
	return total;
}

/* A few random units of ready work: at least one if any is ready. */
static void card_random(struct sh_context *ctx)
{
	int budget = 1 + (int)(rng_next(ctx) % 16);

	while (budget--) {
		enum softhca_work ready[4];
		int n = 0;

		if (op_ready(ctx))
			ready[n++] = SOFTHCA_WORK_OP;
		if (any_ready(ctx, sh_qp_rx_ready))
			ready[n++] = SOFTHCA_WORK_RX;
		if (any_ready(ctx, sh_qp_tx_ready))
			ready[n++] = SOFTHCA_WORK_TX;
		if (sh_rndv_ready(ctx))
			ready[n++] = SOFTHCA_WORK_READ;
		if (!n)
			return;
		if (ctx->qp_hwm)
			ctx->rr_rx = ctx->rr_tx =
				(uint32_t)(rng_next(ctx) % ctx->qp_hwm);
		card_step(ctx, ready[rng_next(ctx) % (uint64_t)n],
			  SOFTHCA_ANY_QP);
	}
}

static __attribute__((noinline, cold)) void liveness_due(
	struct sh_context *ctx)
{
	uint64_t now = sh_now_ns();

	if (now - ctx->last_liveness < SH_LIVENESS_NS)
		return;
	ctx->last_liveness = now;
	for (uint32_t i = 0; i < ctx->qp_hwm; i++)
		if (ctx->qps[i])
			sh_qp_check_peer(ctx->qps[i]);
	flush_due(ctx);
}

static inline void check_liveness(struct sh_context *ctx)
{
	/* Reading even the coarse clock on every poll shows in profiles. */
	if (!(++ctx->liveness_tick & 63))
		liveness_due(ctx);
}

/*
 * Is there anything but waiting for packets left? (under ctx->lock)  Send
 * queues and read responses are all in tx_work; only watched QPs can have
 * a message under way or a packet due (rx_abort and qp_reset idle a QP
 * before it is unwatched).
 */
static bool card_has_work(struct sh_context *ctx)
{
	if (ctx->tx_or_ops || ctx->jobs)
		return true;
	if (ctx->rx_armed)
		return rx_pending(ctx);
	for (uint32_t i = 0; i < ctx->rxw_n; i++) {
		struct sh_qp *qp = ctx->rxw_qp[i];

		if (qp->rx.dest != SH_RX_IDLE || sh_qp_rx_ready(qp))
			return true;
	}
	return false;
}

/*
 * Read pacing for a card run about to take steps that may read (see
 * SH_READ_CHUNK): only send and rendezvous steps read, so a poll that
 * only takes packets sets nothing.
 */
static inline void read_begin(struct sh_context *ctx, bool post)
{
	ctx->read_limited = ctx->sched == SOFTHCA_SCHED_AUTO;
	ctx->read_decided = false;
	ctx->read_post = post;
}

/*
 * An AUTO poll.  When the only news can be packets on watched rings (no
 * list op queued, no send work, no read job), one pass over those rings
 * is all card_drain would do that matters: taking a packet makes no list
 * op, and makes send work or a read job only through tx_work or jobs,
 * which are looked at again (then the full drain runs).  A packet that
 * lands after its ring was stepped is the next poll's, as it would be had
 * it landed after the drain.  Returns whether the card has work left
 * (as card_has_work), or -1 when it ran the full drain and did not look.
 */
static int card_poll(struct sh_context *ctx)
{
	bool busy;
	int n = 0;

	if (ctx->tx_or_ops || ctx->jobs) {
		read_begin(ctx, false);
		card_drain(ctx);
		ctx->read_limited = false;
		return -1;
	}
	/* (what card_has_work would ask of each QP is asked as it is left:
	 * a step on one QP changes no other's receive side) */
	busy = rx_pass(ctx, &n, true);
	if (ctx->tx_work || ctx->jobs) {
		read_begin(ctx, false);
		card_drain(ctx);
		ctx->read_limited = false;
		return -1;
	}
	return busy;
}

/*
 * An AUTO poll's card run: the steps the doorbell takes for it below,
 * asked first (every arrival rings for it) so that it answers none of the
 * questions about posts and other modes.
 */
static inline void auto_poll(struct sh_context *ctx)
{
	int busy;

	ctx->in_progress = true;
	check_liveness(ctx);
	busy = card_poll(ctx);
	atomic_store_explicit(&ctx->quiet,
			      busy >= 0 ? !busy : !card_has_work(ctx),
			      memory_order_release);
	ctx->in_progress = false;
}

/*
 * The doorbell (softhca_sched.h): the card's work after a post, a poll or
 * a QP's move to error; called with ctx->lock held.
 */
void sh_sched_doorbell(struct sh_context *ctx, enum sh_bell why,
		       struct sh_qp *qp)
{
	bool post = why != SH_BELL_POLL;

	if (why == SH_BELL_POLL && ctx->sched == SOFTHCA_SCHED_AUTO) {
		if (!ctx->in_progress)
			auto_poll(ctx);
		return;
	}
	if (why == SH_BELL_FLUSH) {
		/* in any mode: modify_qp flushes before it returns */
		flush_due(ctx);
		return;
	}
	if (post) {
		ctx->post_seq++; /* read pacing: the application is posting */
		/* (an SRQ's buffers on an AUTO card: counted by sh_doorbell,
		 * softhca_sched.h, without a card run) */
		sh_sched_kick(ctx);
	}
	if (ctx->in_progress)
		return;
	ctx->in_progress = true;
	check_liveness(ctx);
	/* (an AUTO poll took auto_poll: card_poll begins read pacing
	 * itself, only if it runs steps that may read) */
	read_begin(ctx, post);
	switch (ctx->sched) {
	case SOFTHCA_SCHED_AUTO:
		/*
		 * A post only needs its own work done now (the card would
		 * start on it at once); arrivals wait for the next poll.
		 */
		if (why == SH_BELL_SEND) {
			while (sh_qp_tx_step(qp))
				;
			flush_due(ctx);
		} else if (why == SH_BELL_OPS) {
			while (op_step(ctx))
				;
		} else {
			card_drain(ctx);
		}
		break;
	case SOFTHCA_SCHED_RANDOM:
		card_random(ctx);
		break;
	case SOFTHCA_SCHED_MANUAL:
		break;
	}
	/* (cleared too: a packet taken in this run may have left work, a
	 * read job say, that no ring shows any more) */
	if (ctx->sched != SOFTHCA_SCHED_MANUAL)
		atomic_store_explicit(&ctx->quiet, !card_has_work(ctx),
				      memory_order_release);
	ctx->read_limited = false;
	ctx->in_progress = false;
}

/* ---- test hooks (softhca.h) ------------------------------------------ */

void softhca_set_sched(struct ibv_context *c, enum softhca_sched sched,
		       uint64_t seed)
{
	struct sh_context *ctx = to_sh_ctx(c);

	sh_lock(ctx);
	sh_sched_kick(ctx);
	ctx->sched = sched;
	if (seed)
		ctx->rng = seed;
	sh_unlock(ctx);
}

int softhca_step(struct ibv_context *c, enum softhca_work kind,
		 uint32_t qp_num)
{
	struct sh_context *ctx = to_sh_ctx(c);
	bool done;

	sh_lock(ctx);
	sh_sched_kick(ctx);
	done = card_step(ctx, kind, qp_num);
	sh_unlock(ctx);
	return done;
}

int softhca_drain(struct ibv_context *c)
{
	struct sh_context *ctx = to_sh_ctx(c);
	int n;

	sh_lock(ctx);
	sh_sched_kick(ctx);
	n = card_drain(ctx);
	sh_unlock(ctx);
	return n;
}

int softhca_query_stats(struct ibv_context *c, struct softhca_stats *st)
{
	struct sh_context *ctx = to_sh_ctx(c);
	struct sh_srq *srq;

	memset(st, 0, sizeof(*st));
	sh_lock(ctx);
	st->cma_reads = ctx->cma_reads;
	st->copy_reads = ctx->copy_reads;
	st->bad_packets = ctx->bad_packets;
	st->ud_bad = ctx->ud.bad;
	st->ud_dropped = ctx->ud.dropped;
	st->lock_free = !ctx->locking;
	for (srq = ctx->srqs; srq && !srq->tm; srq = srq->next)
		;
	if (srq) {
		st->hw_unexpected_cnt = srq->hw_cnt;
		st->sw_unexpected_cnt = srq->sw_cnt;
		st->list_entries = srq->list_len;
		st->list_inactive = srq->list_inactive;
		st->ops_outstanding = (uint32_t)(srq->ops_posted -
						 srq->ops_retired);
		st->ops_doorbells = srq->ops_doorbells;
		st->adds_posted = srq->adds_posted;
		st->matched = srq->matched;
		st->unexpected = srq->unexpected;
		st->rnr_waits = srq->rnr_waits;
		st->card_reads = srq->card_reads;
	}
	sh_unlock(ctx);
	return srq ? 0 : ENOENT;
}
