/*
 * card.c - when the card works: the scheduler, and card-side rendezvous
 * reads.
 *
 * The card's work comes in four kinds (softhca.h, enum softhca_work): list
 * ops in post order, inbound packets per QP in wire order, outbound packets
 * per QP in send-queue order, and rendezvous reads.  Within a kind the
 * order is the hardware's; across kinds any interleaving is a legal card,
 * and RANDOM/MANUAL scheduling exist to explore them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "softhca_priv.h"

/* ---- card-side rendezvous reads -------------------------------------- */

void sh_card_queue_read(struct sh_context *ctx, struct sh_read_job *job)
{
	job->next = NULL;
	if (ctx->jobs_tail)
		ctx->jobs_tail->next = job;
	else
		ctx->jobs = job;
	ctx->jobs_tail = job;
}

static void job_unlink(struct sh_context *ctx, struct sh_read_job *job)
{
	struct sh_read_job **pp, *prev = NULL;

	for (pp = &ctx->jobs; *pp; prev = *pp, pp = &(*pp)->next)
		if (*pp == job) {
			*pp = job->next;
			if (ctx->jobs_tail == job)
				ctx->jobs_tail = prev;
			return;
		}
}

/* The data completion, then (if the data is in place) the FIN. */
static void job_finish(struct sh_context *ctx, struct sh_read_job *job,
		       enum ibv_wc_status status)
{
	struct sh_qp *qp = job->qp;
	struct sh_srq *srq = qp->srq;
	struct sh_cqe cqe = {
		.wr_id = job->recv_wr_id,
		.status = status,
		.opcode = IBV_WC_TM_RECV,
		.byte_len = job->len,
		.tag = job->tag,
		.priv = job->priv,
		.qp_num = qp->qp.qp_num,
		.src_qp = qp->dest_qpn,
		.srq = srq,
		.release_handle = job->handle,
	};

	/* no SYNC_REQ: mlx5 sets it only on list ops and unexpected ones */
	cqe.wc_flags = IBV_WC_TM_DATA_VALID;
	sh_cq_push(srq->cq, &cqe);
	if (status == IBV_WC_SUCCESS) {
		srq->card_reads++;
		sh_qp_queue_fin(qp, job->hdr);
	}
	job_unlink(ctx, job);
	free(job);
}

static bool job_step(struct sh_context *ctx, struct sh_read_job *job)
{
	struct sh_qp *qp = job->qp;
	enum ibv_wc_status st;
	uint32_t chunk;

	if (qp->qp.state == IBV_QPS_ERR) {
		job_finish(ctx, job, IBV_WC_WR_FLUSH_ERR);
		return true;
	}
	if (sh_peer_cma(ctx, qp->peer)) {
		if (!sh_card_read_allow(ctx))
			return false;
		chunk = job->len - job->done < SH_READ_CHUNK
				? job->len - job->done : SH_READ_CHUNK;
		sh_card_read_used(ctx, chunk);
		st = sh_remote_read(ctx, qp->peer, job->va + job->done,
				    job->rkey, job->sge, job->num_sge,
				    job->done, chunk);
		job->done += chunk;
		if (st != IBV_WC_SUCCESS || job->done == job->len)
			job_finish(ctx, job, st);
		return true;
	}
	/* Copy read: ask the owner's card to send the bytes. */
	if (!sh_qp_out_read_req(qp, job->len, job->va, job->rkey,
				&job->req_id))
		return qp->qp.state == IBV_QPS_ERR; /* the job was flushed */
	job->started = true;
	return true;
}

static bool job_ready(const struct sh_read_job *job)
{
	return !job->started;
}

bool sh_card_read_step(struct sh_context *ctx)
{
	for (struct sh_read_job *job = ctx->jobs; job; job = job->next)
		if (job_ready(job))
			return job_step(ctx, job);
	return false;
}

/* A READ_RESP for a card read (pkt: our checked copy; data: in the ring). */
void sh_card_read_done(struct sh_context *ctx, uint64_t req_id,
		       struct sh_qp *qp, const struct sh_pkt *pkt,
		       const uint8_t *data)
{
	struct sh_read_job *job;

	for (job = ctx->jobs; job; job = job->next)
		if (job->qp == qp && job->started && job->req_id == req_id)
			break;
	if (!job) {
		/* Jobs are dropped only with the QP's packets: nobody asked. */
		sh_qp_bad_packet(qp);
		return;
	}
	if (pkt->status != IBV_WC_SUCCESS) {
		job_finish(ctx, job, IBV_WC_REM_ACCESS_ERR);
		return;
	}
	/* In order, inside what was asked, and last exactly at the end. */
	if (pkt->va != job->done || pkt->len > job->len - job->done ||
	    !(pkt->flags & SH_PKT_LAST) != (job->done + pkt->len < job->len)) {
		sh_qp_bad_packet(qp); /* flushes the job */
		return;
	}
	sh_scatter(job->sge, job->num_sge, job->done, data, pkt->len);
	job->done += pkt->len;
	if (pkt->flags & SH_PKT_LAST)
		job_finish(ctx, job, IBV_WC_SUCCESS);
}

void sh_card_drop_jobs(struct sh_context *ctx, struct sh_qp *qp)
{
	struct sh_read_job *job = ctx->jobs, *next;

	for (; job; job = next) {
		next = job->next;
		if (job->qp == qp)
			job_finish(ctx, job, IBV_WC_WR_FLUSH_ERR);
	}
}

/* ---- read pacing ----------------------------------------------------- */

/*
 * A real card reads while the CPU goes on; the soft card reads inside the
 * application's verbs calls, so a long read in the poll an application
 * makes while it posts a batch of sends delays those sends, and the peer
 * (which would read them) waits: in bi-directional streams the two
 * processes then take turns instead of reading at the same time.  So in
 * AUTO a verbs call reads at most SH_READ_CHUNK, a post never reads, and
 * a poll reads only once the posts have stopped for SH_READ_POST_GAP_NS
 * (or reads have waited SH_READ_DEFER_NS).  The clock is read only when
 * there is something to read.
 */
static bool read_now(struct sh_context *ctx)
{
	struct timespec ts;
	uint64_t now;

	if (ctx->read_post)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (ctx->post_seen != ctx->post_seq) {
		ctx->post_seen = ctx->post_seq;
		ctx->post_ns = now;
	}
	if (now - ctx->post_ns < SH_READ_POST_GAP_NS) {
		if (!ctx->defer_ns)
			ctx->defer_ns = now;
		if (now - ctx->defer_ns < SH_READ_DEFER_NS)
			return false;
	}
	ctx->defer_ns = 0;
	return true;
}

/* Bytes this card run may still read (unlimited outside AUTO runs). */
uint32_t sh_card_read_allow(struct sh_context *ctx)
{
	if (!ctx->read_limited)
		return UINT32_MAX;
	if (!ctx->read_decided) {
		ctx->read_decided = true;
		ctx->read_left = read_now(ctx) ? SH_READ_CHUNK : 0;
	}
	return ctx->read_left;
}

void sh_card_read_used(struct sh_context *ctx, uint32_t n)
{
	if (ctx->read_limited)
		ctx->read_left = n < ctx->read_left ? ctx->read_left - n : 0;
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
		if (sh_srq_op_step(srq))
			return true;
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
		qp = qp_by_num(ctx, qpn);
		return qp && step(qp);
	}
	for (uint32_t n = 0; n < ctx->qp_hwm; n++) {
		uint32_t i = (*cursor + n) % ctx->qp_hwm;

		qp = ctx->qps[i];
		if (qp && step(qp)) {
			*cursor = i + 1;
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

static bool read_ready(struct sh_context *ctx)
{
	for (struct sh_read_job *job = ctx->jobs; job; job = job->next)
		if (job_ready(job))
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
	case SOFTHCA_WORK_READ:
		return sh_card_read_step(ctx);
	}
	return false;
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
				while (sh_qp_tx_step(qp))
					n++;
		}
		/* (rx steps never unwatch a QP: the array is stable here) */
		for (uint32_t i = 0; i < ctx->rxw_n; i++)
			if (sh_qp_rx_ready(ctx->rxw_qp[i]))
				while (sh_qp_rx_step(ctx->rxw_qp[i]))
					n++;
		while (ctx->jobs && sh_card_read_step(ctx))
			n++;
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
		if (read_ready(ctx))
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

static void check_liveness(struct sh_context *ctx)
{
	uint64_t now;

	/* Reading even the coarse clock on every poll shows in profiles. */
	if (++ctx->liveness_tick & 63)
		return;
	now = sh_now_ns();

	if (now - ctx->last_liveness < SH_LIVENESS_NS)
		return;
	ctx->last_liveness = now;
	for (uint32_t i = 0; i < ctx->qp_hwm; i++)
		if (ctx->qps[i])
			sh_qp_check_peer(ctx->qps[i]);
}

/*
 * Is there anything but waiting for packets left? (under ctx->lock)  Send
 * queues and read responses are all in tx_work; only watched QPs can have
 * a message under way or a packet due (rx_abort and qp_reset idle a QP
 * before it is unwatched).
 */
static bool card_has_work(struct sh_context *ctx)
{
	if (ctx->tx_work || ctx->jobs || op_ready(ctx))
		return true;
	for (uint32_t i = 0; i < ctx->rxw_n; i++) {
		struct sh_qp *qp = ctx->rxw_qp[i];

		if (qp->rx.dest != SH_RX_IDLE || sh_qp_rx_ready(qp))
			return true;
	}
	return false;
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
	bool busy = false;

	if (ctx->tx_work || ctx->jobs || op_ready(ctx)) {
		card_drain(ctx);
		return -1;
	}
	/*
	 * (rx steps never unwatch a QP: the array is stable here; a step
	 * finds nothing exactly when the ring is not ready.)  What
	 * card_has_work would ask of each QP is asked as it is left: a step
	 * on one QP changes no other's receive side.
	 */
	for (uint32_t i = 0; i < ctx->rxw_n; i++) {
		struct sh_qp *qp = ctx->rxw_qp[i];

		while (sh_qp_rx_ready(qp) && sh_qp_rx_step(qp))
			;
		busy |= qp->rx.dest != SH_RX_IDLE || sh_qp_rx_ready(qp);
	}
	if (ctx->tx_work || ctx->jobs) {
		card_drain(ctx);
		return -1;
	}
	return busy;
}

/* The card's work after a post or poll; called with ctx->lock held. */
static void card_run(struct sh_context *ctx, struct sh_qp *only_tx,
		     bool only_ops, bool post)
{
	int busy;

	if (post)
		ctx->post_seq++;
	if (ctx->in_progress)
		return;
	busy = -1;
	ctx->in_progress = true;
	ctx->read_limited = ctx->sched == SOFTHCA_SCHED_AUTO;
	ctx->read_decided = false;
	ctx->read_post = post;
	check_liveness(ctx);
	switch (ctx->sched) {
	case SOFTHCA_SCHED_AUTO:
		/*
		 * A post only needs its own work done now (the card would
		 * start on it at once); arrivals wait for the next poll.
		 */
		if (only_tx)
			while (sh_qp_tx_step(only_tx))
				;
		else if (only_ops)
			while (op_step(ctx))
				;
		else if (!post)
			busy = card_poll(ctx);
		else
			card_drain(ctx);
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
		atomic_store_explicit(&ctx->quiet,
				      busy >= 0 ? !busy : !card_has_work(ctx),
				      memory_order_release);
	ctx->read_limited = false;
	ctx->in_progress = false;
}

void sh_card_progress(struct sh_context *ctx)
{
	card_run(ctx, NULL, false, false);
}

void sh_card_progress_post(struct sh_context *ctx)
{
	card_run(ctx, NULL, false, true);
}

void sh_card_progress_tx(struct sh_qp *qp)
{
	card_run(qp->ctx, qp, false, true);
}

void sh_card_progress_ops(struct sh_context *ctx)
{
	card_run(ctx, NULL, true, true);
}

/* ---- test hooks (softhca.h) ------------------------------------------ */

void softhca_set_sched(struct ibv_context *c, enum softhca_sched sched,
		       uint64_t seed)
{
	struct sh_context *ctx = to_sh_ctx(c);

	sh_lock(ctx);
	sh_card_kick(ctx);
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
	sh_card_kick(ctx);
	done = card_step(ctx, kind, qp_num);
	sh_unlock(ctx);
	return done;
}

int softhca_drain(struct ibv_context *c)
{
	struct sh_context *ctx = to_sh_ctx(c);
	int n;

	sh_lock(ctx);
	sh_card_kick(ctx);
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
		st->matched = srq->matched;
		st->unexpected = srq->unexpected;
		st->rnr_waits = srq->rnr_waits;
		st->card_reads = srq->card_reads;
	}
	sh_unlock(ctx);
	return srq ? 0 : ENOENT;
}
