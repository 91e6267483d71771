/*
 * softhca_fast.h - the soft HCA's data-path helpers, inline: what a post
 * or an arrival does per message, kept out of calls.  Included (after
 * softhca_priv.h) by the steps that use them: egress.c, match.c, srq.c,
 * and with softhca_match.h and softhca_ingress.h by ingress.c and sched.c.
 * Some call out of line (sh_cq_grow in cq.c, the tag index in
 * taglist.c), so those two files do not include it; the helpers that call
 * nothing are in softhca_priv.h.
 */
#ifndef SOFTHCA_FAST_H
#define SOFTHCA_FAST_H

#include <string.h>

/*
 * Copies n bytes, n small (a TMH, a short payload), with at most two
 * fixed-size moves that may overlap and never reach outside [0, n): a
 * libc call per SGE costs more than the bytes.
 */
static inline __attribute__((always_inline)) void
sh_copy_small(uint8_t *dst, const uint8_t *src, uint32_t n)
{
	uint64_t a, b;

	if (n >= 16 && n <= 32) {
		uint8_t x[16], y[16];

		__builtin_memcpy(x, src, 16);
		__builtin_memcpy(y, src + n - 16, 16);
		__builtin_memcpy(dst, x, 16);
		__builtin_memcpy(dst + n - 16, y, 16);
	} else if (n >= 8 && n < 16) {
		__builtin_memcpy(&a, src, 8);
		__builtin_memcpy(&b, src + n - 8, 8);
		__builtin_memcpy(dst, &a, 8);
		__builtin_memcpy(dst + n - 8, &b, 8);
	} else if (n >= 4 && n < 8) {
		uint32_t c, d;

		__builtin_memcpy(&c, src, 4);
		__builtin_memcpy(&d, src + n - 4, 4);
		__builtin_memcpy(dst, &c, 4);
		__builtin_memcpy(dst + n - 4, &d, 4);
	} else if (n < 4) {
		for (uint32_t i = 0; i < n; i++)
			dst[i] = src[i];
	} else {
		memcpy(dst, src, n);
	}
}

/*
 * One SGE the lkey cache already vouches for (a key seen valid, no MR
 * deregistered since, the range and access inside its grant): the common
 * case of sh_local_check without the call.  False: ask sh_local_check.
 */
static inline __attribute__((always_inline)) bool
sh_lkey_cached(struct sh_context *ctx, const struct ibv_sge *sge,
	       uint32_t access)
{
	const struct sh_mr_grant *g = ctx->lkey_seen;

	/* (slot 0's key, else slot 1's: two compares, no select) */
	if (sge->lkey != g->key && sge->lkey != (++g)->key)
		return false;
	return (g->access & access) == access &&
	       sge->addr >= g->base && sge->length <= g->size &&
	       sge->addr - g->base <= g->size - sge->length &&
	       ctx->lkey_gen == atomic_load_explicit(&ctx->mr_dereg,
						     memory_order_acquire);
}

/* Every SGE of a one- or two-SGE list vouched for by the lkey cache (what
 * MPI posts); false: ask sh_local_check, which also caches. */
static inline __attribute__((always_inline)) bool
sh_lkeys_cached(struct sh_context *ctx, const struct ibv_sge *sge, uint32_t n,
		uint32_t access)
{
	return (n == 1 || (n == 2 && sh_lkey_cached(ctx, &sge[1], access))) &&
	       sh_lkey_cached(ctx, sge, access);
}

/*
 * Takes the oldest plain buffer of a non-empty rq.  The entry is read in
 * place: nothing posts to rq before the caller's step returns (the lock,
 * or one thread on a lock-free context), and copying a 16-SGE entry costs
 * more than the message.
 */
static inline const struct sh_rbuf *sh_rq_take(struct sh_rq *rq)
{
	const struct sh_rbuf *b = &rq->buf[rq->first];

	/* (first < cap: a compare, not a division) */
	if (++rq->first == rq->cap)
		rq->first = 0;
	rq->count--;
	return b;
}

/* the next entry, for the caller to fill and mark ready; NULL: ENOMEM */
static inline struct sh_cqe *sh_cq_next(struct sh_cq *cq)
{
	struct sh_cqe *e;

	if (cq->count + cq->held == cq->cap && sh_cq_grow(cq))
		return NULL;
	e = &cq->q[(cq->first + cq->count) & (cq->cap - 1)];
	sh_cq_count_add(cq, 1);
	return e;
}

/* Entry h leaves the tag list (matched, deleted). */
static inline void sh_list_remove(struct sh_srq *srq, int32_t h)
{
	struct sh_tag *t = &srq->tags[h];

	if (t->prev >= 0)
		srq->tags[t->prev].next = t->next;
	else
		srq->list_head = t->next;
	if (t->next >= 0)
		srq->tags[t->next].prev = t->prev;
	else
		srq->list_tail = t->prev;
	t->on_list = false;
	srq->list_len--;
	if (srq->indexed)
		sh_tl_remove(srq, h);
	if (!t->active)
		srq->list_inactive--;
}

/* The first active entry, in list order, whose tag & mask accept tag, or
 * -1; a short list (not indexed) is scanned here, without a call. */
static inline int32_t sh_tl_match(struct sh_srq *srq, uint64_t tag)
{
	if (srq->indexed)
		return sh_tl_match_indexed(srq, tag);
	for (int32_t h = srq->list_head; h >= 0; h = srq->tags[h].next) {
		const struct sh_tag *t = &srq->tags[h];

		if (t->active && !((t->tag ^ tag) & t->mask))
			return h;
	}
	return -1;
}

/*
 * Publishes pkt (the slot sh_qp_out_slot gave): its seq goes last, then
 * the ring's arrival bit and the hint when the owner asks for them
 * (softhca_shm.h, sh_rings; stored after the seq, so an owner that clears
 * the hint, then takes the bits, then looks at those rings cannot miss
 * the packet and the bit both).
 */
static inline void sh_qp_out_commit(struct sh_qp *qp, struct sh_pkt *pkt)
{
	/* (the peer's fields read before the release store: not again) */
	const struct sh_peer *peer = qp->peer;
	uint32_t idx = qp->out_idx + 1;

	atomic_store_explicit(&pkt->seq, ++qp->out_head, memory_order_release);
	if (atomic_load_explicit(peer->rx_armed, memory_order_relaxed)) {
		atomic_fetch_or_explicit(qp->out_bits, qp->out_mask,
					 memory_order_seq_cst);
		atomic_store_explicit(peer->rx_hint, 1,
				      memory_order_release);
	}
	qp->out_idx = idx == peer->lay.ring_depth ? 0 : idx;
}

#endif /* SOFTHCA_FAST_H */
