/*
 * egress.c - the send side of a QP: its send queue, the packets it puts in
 * the peer's inbound ring, and the post fast path.
 *
 * A send is cut into MTU-sized packets that the sender's card copies into
 * the peer QP's inbound ring; the send completes when its last packet is in
 * the ring (the soft equivalent of the RC ack).  RDMA reads are done by the
 * reader's card with process_vm_readv, or, where the kernel refuses that,
 * by READ_REQ/READ_RESP packets that the owner's card answers.  The ring is
 * the peer's memory: its tail is read (and checked) only when the private
 * copy says the ring is full, and a packet is published by its seq word,
 * stored last (softhca_priv.h).
 *
 * ibv_post_send writes the WR into the send queue and rings the doorbell
 * (softhca_sched.h); the scheduler runs sh_qp_tx_step.  The send side
 * calls only down: the CQ write, the error state (qperr.c), mr.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>

#include "softhca_priv.h"
#include "softhca_sched.h"
#include "softhca_fast.h"

/* ---- send queue ------------------------------------------------------ */

static struct sh_swr *sq_push(struct sh_qp *qp)
{
	if (qp->sq_count == qp->sq_cap) {
		uint32_t cap = qp->sq_cap ? qp->sq_cap * 2 : 16;
		struct sh_swr *sq = calloc(cap, sizeof(*sq));

		if (!sq)
			return NULL;
		for (uint32_t i = 0; i < qp->sq_count; i++)
			sq[i] = qp->sq[(qp->sq_first + i) & (qp->sq_cap - 1)];
		free(qp->sq);
		qp->sq = sq;
		qp->sq_cap = cap;
		qp->sq_first = 0;
	}
	/* sq_cap is a power of two; the caller sets every field it reads
	 * (clearing the whole entry, inline area included, costs more) */
	qp->ctx->tx_work++;
	return &qp->sq[(qp->sq_first + qp->sq_count++) & (qp->sq_cap - 1)];
}

void sh_qp_sq_pop(struct sh_qp *qp)
{
	struct sh_swr *w = &qp->sq[qp->sq_first];

	if (w->kind != SH_SWR_FIN)
		qp->sq_user--;
	qp->sq_first = (qp->sq_first + 1) & (qp->sq_cap - 1);
	qp->sq_count--;
	qp->ctx->tx_work--;
}

/* A user WR's completion: only when signalled (or sq_sig_all) or failed. */
static void send_cqe(struct sh_qp *qp, uint64_t wr_id, unsigned int flags,
		     enum ibv_wc_status status, enum ibv_wc_opcode opcode,
		     uint32_t byte_len)
{
	struct sh_cqe cqe = { .release_handle = -1 };

	if (status == IBV_WC_SUCCESS && !qp->sq_sig_all &&
	    !(flags & IBV_SEND_SIGNALED))
		return;
	cqe.wr_id = wr_id;
	cqe.status = status;
	cqe.opcode = opcode;
	cqe.byte_len = byte_len;
	cqe.qp_num = qp->qp.qp_num;
	cqe.src_qp = qp->dest_qpn;
	sh_cq_push(qp->scq, &cqe);
}

static void sq_complete(struct sh_qp *qp, enum ibv_wc_status status)
{
	struct sh_swr *w = &qp->sq[qp->sq_first];

	if (w->kind != SH_SWR_FIN)
		send_cqe(qp, w->wr_id, w->send_flags, status,
			 w->kind == SH_SWR_READ ? IBV_WC_RDMA_READ
						: IBV_WC_SEND,
			 w->kind == SH_SWR_READ ? w->len : 0);
	sh_qp_sq_pop(qp);
}

/*
 * A real RC send to a dead peer is never acked, so it fails; here the ring
 * would take it.  So the card looks at the peer before a WR starts, and
 * without a syscall or a clock read: the owner's liveness word
 * (softhca_shm.h, sh_seg.alive) reads as at connect while it lives, and
 * the kernel marks it FUTEX_OWNER_DIED when it dies.  A word that changed
 * otherwise (or none) is not believed: then the peer's process is looked
 * at, at most once a millisecond.
 */
static inline uint32_t peer_word(const struct sh_peer *p)
{
	return atomic_load_explicit(p->alive, memory_order_relaxed);
}

/* The peer's liveness word says it is the process that published it. */
static inline bool peer_word_ok(const struct sh_peer *p)
{
	return p->alive_word && peer_word(p) == p->alive_word;
}

/* The fast path's question: alive, as far as can be told for free? */
static inline bool peer_fresh(const struct sh_peer *p)
{
	if (p->alive_word)
		return peer_word_ok(p);
	return sh_now_ns() - p->checked_ns <= SH_WR_LIVENESS_NS;
}

static bool peer_alive(struct sh_qp *qp)
{
	struct sh_peer *p = qp->peer;

	if (p->alive_word) {
		uint32_t w = peer_word(p);

		if (w == p->alive_word)
			return true;
		if (w & FUTEX_OWNER_DIED) {
			sh_qp_error(qp, IBV_WC_RETRY_EXC_ERR);
			return false;
		}
		p->alive_word = 0;
	}
	if (sh_now_ns() - p->checked_ns > SH_WR_LIVENESS_NS)
		sh_qp_check_peer(qp);
	return qp->qp.state != IBV_QPS_ERR;
}

/* ---- the outbound ring ----------------------------------------------- */

static inline __attribute__((always_inline)) bool
out_usable(struct sh_qp *qp)
{
	return !atomic_load_explicit(&qp->out->closed, memory_order_acquire) &&
	       atomic_load_explicit(&qp->out->epoch, memory_order_relaxed) ==
		       qp->out_epoch;
}

static struct sh_pkt *out_at(struct sh_qp *qp)
{
	return (struct sh_pkt *)((uint8_t *)(qp->out + 1) +
				 qp->peer->lay.slot_size * qp->out_idx);
}

/*
 * Is there a free slot?  The private copy of the peer's tail answers
 * while the ring has room; the shared tail is read only when it looks
 * full.  No side effects: a full or lying ring is left to sh_qp_out_slot.
 */
static inline __attribute__((always_inline)) bool out_room(struct sh_qp *qp)
{
	uint32_t depth = qp->peer->lay.ring_depth, tail;

	if (qp->out_head - qp->out_tail < depth)
		return true;
	tail = atomic_load_explicit(&qp->out->tail, memory_order_acquire);
	if (qp->out_head - tail >= depth)
		return false;
	qp->out_tail = tail;
	return true;
}

/*
 * A free slot in the peer's ring, or NULL (and the stall is noted).  The
 * tail is the peer's to write: one that claims more than the ring holds
 * would wedge the send, so it fails the QP instead.
 */
struct sh_pkt *sh_qp_out_slot(struct sh_qp *qp)
{
	uint32_t tail;
	uint64_t now;

	if (qp->peer->gone) {
		/* (gone_ring has no slots: nothing may be written there) */
		sh_qp_error(qp, IBV_WC_RETRY_EXC_ERR);
		return NULL;
	}
	if (out_room(qp)) {
		qp->stall_since = 0;
		return out_at(qp);
	}
	tail = atomic_load_explicit(&qp->out->tail, memory_order_acquire);
	if (qp->out_head - tail > qp->peer->lay.ring_depth) {
		qp->ctx->bad_packets++;
		sh_qp_error(qp, IBV_WC_RETRY_EXC_ERR);
		return NULL;
	}
	now = sh_now_ns();
	if (!qp->stall_since)
		qp->stall_since = now;
	else if (now - qp->stall_since > SH_LIVENESS_NS)
		sh_qp_check_peer(qp);
	return NULL;
}

/* A READ_REQ for len bytes at va/rkey; false when the ring has no room. */
bool sh_qp_out_read_req(struct sh_qp *qp, uint32_t len, uint64_t va,
			uint32_t rkey, uint64_t *req_id)
{
	struct sh_pkt *pkt = sh_qp_out_slot(qp);

	if (!pkt)
		return false;
	pkt->kind = SH_PKT_READ_REQ;
	pkt->flags = SH_PKT_FIRST | SH_PKT_LAST;
	pkt->len = 0;
	pkt->msg_len = len;
	pkt->src_qpn = qp->qp.qp_num;
	pkt->rkey = rkey;
	pkt->req_id = *req_id = ++qp->next_read_id;
	pkt->va = va;
	sh_qp_out_commit(qp, pkt);
	qp->ctx->copy_reads++;
	return true;
}

/* ---- transmit -------------------------------------------------------- */

/*
 * One SEND packet into slot pkt, published: chunk bytes at offset off of
 * a len-byte message, from inline data (inl) or the SGEs.  The step of
 * both send paths (tx_send, and post_send_now for a one-packet send).
 */
static inline __attribute__((always_inline)) void
out_send(struct sh_qp *qp, struct sh_pkt *pkt, const struct ibv_sge *sge,
	 uint32_t nsge, const uint8_t *inl, uint32_t off, uint32_t chunk,
	 uint32_t len)
{
	pkt->kind = SH_PKT_SEND;
	pkt->flags = (off ? 0 : SH_PKT_FIRST) |
		     (off + chunk == len ? SH_PKT_LAST : 0);
	pkt->len = chunk;
	pkt->msg_len = len;
	pkt->src_qpn = qp->qp.qp_num;
	if (inl) {
		memcpy(pkt->data, inl + off, chunk);
	} else if (!off && nsge == 1) {  /* what MPI sends: no SGE walk */
		memcpy(pkt->data, (const void *)(uintptr_t)sge[0].addr, chunk);
	} else if (!off && nsge == 2 && len <= 64) {
		/* an inline TMH + small payload (the TMH: one 16-byte move) */
		if (sge[0].length == SH_TMH_LEN)
			__builtin_memcpy(pkt->data,
					 (const void *)(uintptr_t)sge[0].addr,
					 SH_TMH_LEN);
		else
			sh_copy_small(pkt->data,
				      (const uint8_t *)(uintptr_t)sge[0].addr,
				      sge[0].length);
		sh_copy_small(pkt->data + sge[0].length,
			      (const uint8_t *)(uintptr_t)sge[1].addr,
			      sge[1].length);
	} else {
		sh_gather(sge, nsge, off, pkt->data, chunk);
	}
	sh_qp_out_commit(qp, pkt);
}

static bool tx_send(struct sh_qp *qp, struct sh_swr *w)
{
	uint32_t mtu = qp->peer->lay.mtu, chunk;
	struct sh_pkt *pkt;

	if (!w->started) {
		if (!peer_alive(qp))
			return true;
		w->started = true;
		if (!w->inlined &&
		    sh_local_check(qp->ctx, w->sge, w->num_sge, 0)) {
			sq_complete(qp, IBV_WC_LOC_PROT_ERR);
			return true;
		}
	}
	pkt = sh_qp_out_slot(qp);
	if (!pkt)
		return false;
	chunk = w->len - w->done < mtu ? w->len - w->done : mtu;
	out_send(qp, pkt, w->sge, w->num_sge, w->inlined ? w->inl : NULL,
		 w->done, chunk, w->len);
	w->done += chunk;
	if (w->done == w->len)
		sq_complete(qp, IBV_WC_SUCCESS);
	return true;
}

static bool tx_read(struct sh_qp *qp, struct sh_swr *w)
{
	enum ibv_wc_status st;
	uint64_t req_id;

	if (w->started)
		return false; /* waiting for READ_RESP packets */
	if (!w->done) {
		if (!peer_alive(qp))
			return true;
		if (sh_local_check(qp->ctx, w->sge, w->num_sge,
				   IBV_ACCESS_LOCAL_WRITE)) {
			sq_complete(qp, IBV_WC_LOC_PROT_ERR);
			return true;
		}
	}
	if (sh_peer_cma(qp->ctx, qp->peer)) {
		/* SH_READ_CHUNK at a time, paced as card reads are */
		uint32_t chunk = w->len - w->done < SH_READ_CHUNK
					 ? w->len - w->done : SH_READ_CHUNK;

		if (w->len && !sh_read_allow(qp->ctx))
			return false;
		sh_read_used(qp->ctx, chunk);
		st = sh_remote_read(qp->ctx, qp->peer, w->remote_addr + w->done,
				    w->rkey, w->sge, w->num_sge, w->done, chunk);
		if (st != IBV_WC_SUCCESS) {
			sh_qp_error(qp, st);
			return true;
		}
		w->done += chunk;
		if (w->done == w->len)
			sq_complete(qp, IBV_WC_SUCCESS);
		return true;
	}
	if (!sh_qp_out_read_req(qp, w->len, w->remote_addr, w->rkey, &req_id))
		return false;
	w->started = true;
	w->remote_addr = req_id; /* remembered for the responses */
	return true;
}

/*
 * The owner side of a copy read: one response packet.  Each chunk is
 * checked against the rkey table again: the region may have been
 * deregistered since the request arrived, and then it must not be read.
 */
static bool tx_read_resp(struct sh_qp *qp)
{
	struct sh_read_resp *r = &qp->resp;
	uint32_t mtu = qp->peer->lay.mtu, chunk = 0;
	struct sh_pkt *pkt = sh_qp_out_slot(qp);

	if (!pkt)
		return false;
	if (r->status == IBV_WC_SUCCESS) {
		chunk = r->len - r->done < mtu ? r->len - r->done : mtu;
		if (sh_mr_check(&qp->ctx->lay, qp->ctx->seg, r->rkey,
				r->va + r->done, chunk,
				IBV_ACCESS_REMOTE_READ)) {
			r->status = IBV_WC_REM_ACCESS_ERR;
			chunk = 0;
		}
	}
	pkt->kind = SH_PKT_READ_RESP;
	pkt->flags = 0;
	pkt->req_id = r->req_id;
	pkt->va = r->done; /* offset of this chunk */
	pkt->len = chunk;
	pkt->msg_len = r->len;
	pkt->status = r->status;
	pkt->src_qpn = qp->qp.qp_num;
	if (chunk)
		memcpy(pkt->data, (uint8_t *)(uintptr_t)r->va + r->done, chunk);
	r->done += chunk;
	if (r->done == r->len || r->status != IBV_WC_SUCCESS) {
		pkt->flags = SH_PKT_LAST;
		sh_qp_resp_active(qp, false);
	}
	sh_qp_out_commit(qp, pkt);
	return true;
}

bool sh_qp_tx_ready(struct sh_qp *qp)
{
	struct sh_swr *w;

	if (qp->qp.state != IBV_QPS_RTS && qp->qp.state != IBV_QPS_RTR)
		return false;
	if (qp->resp.active)
		return true;
	if (qp->qp.state != IBV_QPS_RTS || !qp->sq_count)
		return false;
	w = &qp->sq[qp->sq_first];
	return !(w->kind == SH_SWR_READ && w->started);
}

/* Moves one packet (or one read) of this QP's send side. */
bool sh_qp_tx_step(struct sh_qp *qp)
{
	struct sh_swr *w;

	if (!sh_qp_tx_ready(qp))
		return false;
	if (!out_usable(qp)) {
		sh_qp_error(qp, IBV_WC_RETRY_EXC_ERR);
		return true;
	}
	if (qp->resp.active)
		return tx_read_resp(qp);
	w = &qp->sq[qp->sq_first];
	return w->kind == SH_SWR_READ ? tx_read(qp, w) : tx_send(qp, w);
}

int sh_qp_queue_fin(struct sh_qp *qp, const uint8_t *hdr)
{
	struct sh_swr *w;
	struct ibv_tmh *tmh;

	if (qp->qp.state == IBV_QPS_ERR)
		return EPIPE;
	w = sq_push(qp);
	if (!w)
		return ENOMEM;
	w->kind = SH_SWR_FIN;
	w->wr_id = 0;
	w->send_flags = 0;
	w->num_sge = 0;
	w->inlined = true;
	w->len = SH_TMH_LEN + SH_RVH_LEN;
	w->done = 0;
	w->started = false;
	memcpy(w->inl, hdr, w->len);
	tmh = (struct ibv_tmh *)w->inl;
	tmh->opcode = IBV_TMH_FIN;
	return 0;
}

/* The head WR completes (the receive side, ingress.c, ends reads). */
void sh_qp_sq_complete(struct sh_qp *qp, enum ibv_wc_status status)
{
	sq_complete(qp, status);
}

/* A failed QP's flush (sched.c): the head WR with why, the rest flushed. */
void sh_qp_sq_flush(struct sh_qp *qp, enum ibv_wc_status why)
{
	while (qp->sq_count) {
		sq_complete(qp, why);
		why = IBV_WC_WR_FLUSH_ERR;
	}
}

/* ---- verbs ----------------------------------------------------------- */

/*
 * mlx5's refusals of one send WR (what its post_send checks before it
 * writes a WQE): 0, EINVAL (not a WR this QP takes now) or ENOMEM (queue
 * full, too many SGEs, inline data past the WQE); *lenp its bytes.  A QP
 * in error is not refused here: the caller flushes the WR instead.
 */
static inline __attribute__((always_inline)) int
wr_check(const struct sh_qp *qp, const struct ibv_send_wr *wr, uint32_t *lenp)
{
	uint32_t len = 0;

	if (wr->num_sge >= 0 && (uint32_t)wr->num_sge <= SH_MAX_SGE)
		len = sge_total(wr->sg_list, (uint32_t)wr->num_sge);
	*lenp = len;
	if (qp->qp.state != IBV_QPS_RTS || wr->num_sge < 0 ||
	    (uint32_t)wr->num_sge > SH_MAX_SGE ||
	    (wr->opcode != IBV_WR_SEND && wr->opcode != IBV_WR_RDMA_READ) ||
	    len > qp->ctx->cfg.max_msg_sz)
		return EINVAL;
	if (qp->sq_user >= qp->max_send_wr ||
	    (uint32_t)wr->num_sge > qp->max_send_sge ||
	    (wr->opcode == IBV_WR_SEND && (wr->send_flags & IBV_SEND_INLINE) &&
	     len > qp->max_inline))
		return ENOMEM;
	return 0;
}

/*
 * The post fast path's question.  With nothing ahead of it on this QP (no
 * WR, FIN or read response), an AUTO card starts a one-packet SEND at
 * once: it checks the peer and the lkeys, writes the packet into the
 * peer's ring and completes the WR.  Doing that at the post (send_now),
 * with the card's own steps (the lkey check, out_send, send_cqe), saves
 * queueing the WR and a card run; it differs from tx_send only in the
 * checks it leaves to the queued path.  False: the WR takes the queue,
 * where the card does the same work (that path also handles a full or
 * lying ring and a stale liveness check, which may fail the QP).
 * (Inline, and it calls nothing when the peer's liveness word answers:
 * the one-WR post, sh_post_send, asks it without a frame.)
 */
static inline __attribute__((always_inline)) bool
send_now_ok(struct sh_qp *qp, const struct ibv_send_wr *wr, uint32_t len,
	    bool clock)
{
	const struct sh_context *ctx = qp->ctx;

	return ctx->sched == SOFTHCA_SCHED_AUTO && !qp->sq_count &&
	       !qp->resp.active && wr->opcode == IBV_WR_SEND &&
	       len <= ctx->lay.mtu && !qp->peer->gone && out_usable(qp) &&
	       (clock ? peer_fresh(qp->peer) : peer_word_ok(qp->peer)) &&
	       out_room(qp);
}

/* The work of a WR send_now_ok accepted: the packet, then the completion
 * when the WR asks for one or failed. */
static inline __attribute__((always_inline)) void
send_now(struct sh_qp *qp, const struct ibv_send_wr *wr, uint32_t len)
{
	enum ibv_wc_status st = IBV_WC_SUCCESS;

	if (!(wr->send_flags & IBV_SEND_INLINE) &&
	    !sh_lkeys_cached(qp->ctx, wr->sg_list, (uint32_t)wr->num_sge, 0) &&
	    sh_local_check(qp->ctx, wr->sg_list, (uint32_t)wr->num_sge, 0)) {
		st = IBV_WC_LOC_PROT_ERR;
	} else {
		/* (IBV_SEND_INLINE: the data is read now either way) */
		out_send(qp, out_at(qp), wr->sg_list, (uint32_t)wr->num_sge,
			 NULL, 0, len, len);
		qp->stall_since = 0;
	}
	/* (the test send_cqe makes, without the call for a silent WR) */
	if (st != IBV_WC_SUCCESS || qp->sq_sig_all ||
	    (wr->send_flags & IBV_SEND_SIGNALED))
		send_cqe(qp, wr->wr_id, wr->send_flags, st, IBV_WC_SEND, 0);
}

/* One WR sent at its post, and the post's doorbell (it left the card
 * nothing: only counted).  Out of line: its frame is the copy's. */
static __attribute__((noinline)) int post_one_now(struct sh_qp *qp,
						  const struct ibv_send_wr *wr,
						  uint32_t len)
{
	send_now(qp, wr, len);
	sh_doorbell(qp->ctx, SH_BELL_POSTED, qp);
	return 0;
}

/* Queues wr (checked) for the card; false: no memory. */
static bool post_queue(struct sh_qp *qp, const struct ibv_send_wr *wr,
		       uint32_t len)
{
	struct sh_swr *w = sq_push(qp);

	if (!w)
		return false;
	qp->sq_user++;
	w->kind = wr->opcode == IBV_WR_SEND ? SH_SWR_SEND : SH_SWR_READ;
	w->wr_id = wr->wr_id;
	w->send_flags = wr->send_flags;
	w->len = len;
	w->done = 0;
	w->started = false;
	w->remote_addr = wr->wr.rdma.remote_addr;
	w->rkey = wr->wr.rdma.rkey;
	/* max_inline <= SH_MAX_INLINE: the data fits the entry */
	w->inlined = wr->opcode == IBV_WR_SEND &&
		     (wr->send_flags & IBV_SEND_INLINE);
	if (w->inlined) {
		w->num_sge = 0;
		sh_gather(wr->sg_list, (uint32_t)wr->num_sge, 0, w->inl, len);
	} else {
		w->num_sge = (uint32_t)wr->num_sge;
		memcpy(w->sge, wr->sg_list, sizeof(*w->sge) * w->num_sge);
	}
	return true;
}

/* Any list of WRs, on any context: each checked, then sent at once
 * (send_now_ok) or queued, under the lock. */
static __attribute__((noinline)) int post_send_list(struct sh_qp *qp,
						    struct ibv_send_wr *wr,
						    struct ibv_send_wr **bad)
{
	struct sh_context *ctx = qp->ctx;
	bool queued = false;
	int err = 0;

	sh_lock(ctx);
	for (; wr; wr = wr->next) {
		uint32_t len;

		if (qp->qp.state == IBV_QPS_ERR) {
			sh_qp_flush_wr(qp, qp->scq, wr->wr_id,
				       wr->opcode == IBV_WR_RDMA_READ
				       ? IBV_WC_RDMA_READ : IBV_WC_SEND);
			continue;
		}
		err = wr_check(qp, wr, &len);
		if (err) {
			*bad = wr;
			break;
		}
		if (send_now_ok(qp, wr, len, true)) {
			send_now(qp, wr, len);
			continue;
		}
		if (!post_queue(qp, wr, len)) {
			err = ENOMEM;
			*bad = wr;
			break;
		}
		queued = true;
	}
	/* (a post the fast path took leaves the card nothing: only counted) */
	sh_doorbell(ctx, queued ? SH_BELL_SEND : SH_BELL_POSTED, qp);
	sh_unlock(ctx);
	return err;
}

/*
 * One WR on a lock-free context that the card starts at once (what MPI's
 * eager send posts) is checked here, with the same steps as the list's,
 * and handed to post_one_now: no loop, and no frame for the checks.
 * Anything else takes the list.
 */
int sh_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		 struct ibv_send_wr **bad)
{
	struct sh_qp *qp = to_sh_qp(ibqp);
	uint32_t len;

	if (qp->ud)
		return sh_ud_post_send(qp, wr, bad);
	if (!wr->next && !qp->ctx->locking && !wr_check(qp, wr, &len) &&
	    send_now_ok(qp, wr, len, false))
		return post_one_now(qp, wr, len);
	return post_send_list(qp, wr, bad);
}
