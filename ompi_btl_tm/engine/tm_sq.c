/*
 * tm_sq.c - a peer's send queue: a WR posted with selective signalling
 * and counted on its WR ring, WRs filled inline or from a send slot, and
 * the eager post (no tx).  Contract: tm_sq.h.  Owns: tmx_peer's WR ring
 * and signalling counts (retired by tm_tx.c).
 */
#include <string.h>
#include "engine/tm_sq.h"
#include "engine/tm_wire.h"

/* Step: p's WR ring and counts take one more posted WR. */
static inline void sq_record(struct tm_xport *x, struct tmx_peer *p,
			     int32_t slot, int sig, struct tm_tx *keep)
{
	struct tm_wr *w = &p->wrs[p->wr_head++ & p->wr_mask];

	w->slot = slot;
	w->sig = sig;
	w->tx = keep;
	p->slots_out += slot >= 0;
	p->sq_out++;
	x->tx.sq_out++;
}

/* The post of an unsignalled WR the QP refused: sq_record and its count
 * taken back (the poll budget stays lowered, which is harmless). */
static __attribute__((noinline, cold)) void
sq_unrecord_unsig(struct tm_xport *x, struct tmx_peer *p)
{
	struct tm_wr *w = &p->wrs[--p->wr_head & p->wr_mask];

	p->sq_out--;
	x->tx.sq_out--;
	p->unsig--;
	p->unsig_slots -= w->slot >= 0;
	p->slots_out -= w->slot >= 0;
}

/* A signalled WR: posted, then counted (out of line: one in sig_max). */
static __attribute__((noinline)) int
sq_post_sig(struct tm_xport *x, struct tmx_peer *p, struct ibv_send_wr *wr,
	    int32_t slot, struct tm_tx *keep)
{
	struct ibv_send_wr *bad;
	int ret = tmx_fault(x, TM_SITE_POST_SEND);

	if (!ret)
		ret = ibv_post_send(p->qp, wr, &bad);
	if (ret)
		return ret;
	sq_record(x, p, slot, 1, keep);
	p->unsig = 0;
	p->unsig_slots = 0;
	p->sig_out++;
	x->tx.sig_out++;
	x->tx.poll_budget = 0;
	return 0;
}

/*
 * Selective signalling.  A WR is posted signalled when something must
 * happen at its completion (a rendezvous request, a read, a keepalive), or
 * when it is the sig_every-th WR holding a slot since the last signalled
 * one, or the sig_max-th WR at all (inline WRs hold no slot), or when the
 * send queue or the slots run low; the others are unsignalled, and are
 * retired (their slots freed) by the next signalled completion of their
 * QP, as RC completes in order.  An eager send completes at post (inline,
 * or its slot is a buffered copy).  Bounds: sig_every <= n_slots / (2 *
 * npeers), so unsignalled tails hold at most half the slots and an empty
 * free list always has a signalled completion coming; sig_max <= sq_limit
 * / 2 (or sig_every), so a signalled completion is due while the queue has
 * room for as many again; the last WR below sq_limit is signalled, so a
 * full send queue always drains.  An error completes even an unsignalled
 * WR, and retires everything up to it.  Inline in the eager fast path
 * (tmx_eager_post), out of line (tmx_sq_post) for the rest.  An unsignalled
 * WR is counted before its post, so that nothing but x and p lives across
 * the call, and taken back if the QP refuses it.
 */
static inline __attribute__((always_inline)) int
sq_post_inl(struct tm_xport *x, struct tmx_peer *p, struct ibv_send_wr *wr,
	    int32_t slot, struct tm_tx *keep)
{
	struct ibv_send_wr *bad;
	int ret, sig = keep || p->unsig + 1 >= x->tx.sig_max ||
		       (slot >= 0 && p->unsig_slots + 1 >= x->tx.sig_every) ||
		       p->sq_out + 1 >= x->tx.sq_limit ||
		       x->tx.n_free_slots < x->tx.slot_low;

	wr->wr_id = ((uint64_t)p->id << 32) | p->wr_head;
	wr->send_flags = (wr->send_flags & IBV_SEND_INLINE) |
			 (sig ? IBV_SEND_SIGNALED : 0);
	if (sig)
		return sq_post_sig(x, p, wr, slot, keep);
	sq_record(x, p, slot, 0, NULL);
	p->unsig++;
	p->unsig_slots += slot >= 0;
	if (x->tx.poll_budget > TM_POLL_SKIP)
		x->tx.poll_budget = TM_POLL_SKIP;
	ret = tmx_fault(x, TM_SITE_POST_SEND);
	if (!ret)
		ret = ibv_post_send(p->qp, wr, &bad);
	if (ret)
		sq_unrecord_unsig(x, p);
	return ret;
}

int tmx_sq_post(struct tm_xport *x, struct tmx_peer *p,
		struct ibv_send_wr *wr, int32_t slot, struct tm_tx *keep)
{
	return sq_post_inl(x, p, wr, slot, keep);
}

/* Takes a send slot; fills it with hdr (hdr_len) and data (len). */
static inline int32_t slot_fill(struct tm_xport *x, const void *hdr,
				uint32_t hdr_len, const void *data,
				size_t len, struct ibv_send_wr *wr,
				struct ibv_sge *sge)
{
	int32_t slot = (int32_t)x->tx.free_slots[--x->tx.n_free_slots];
	uint8_t *buf = x->tx.slots + (size_t)slot * x->tx.slot_size;

	memcpy(buf, hdr, hdr_len);
	if (len)
		memcpy(buf + hdr_len, data, len);
	sge->addr = (uintptr_t)buf;
	sge->length = hdr_len + (uint32_t)len;
	sge->lkey = x->tx.slots_mr->lkey;
	wr->next = NULL;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_SEND;
	wr->send_flags = 0;
	return slot;
}

/*
 * An inline send: the device copies hdr and data into the WQE at post, so
 * both may change as soon as the post returns, and no slot (nor copy of
 * ours) is needed.  The caller checked hdr_len + len against the QP's
 * max_inline.  lkeys are not looked at for inline data.
 */
static inline void inline_fill_fixed(const void *hdr, uint32_t hdr_len,
				     struct ibv_send_wr *wr,
				     struct ibv_sge *sge)
{
	sge[0].addr = (uintptr_t)hdr;
	sge[0].length = hdr_len;
	sge[0].lkey = 0;
	sge[1].lkey = 0;
	wr->next = NULL;
	wr->sg_list = sge;
	wr->opcode = IBV_WR_SEND;
}

/* The fields of an inline send that change from one send to the next. */
static inline void inline_fill_data(const void *data, size_t len,
				    struct ibv_send_wr *wr,
				    struct ibv_sge *sge)
{
	sge[1].addr = (uintptr_t)data;
	sge[1].length = (uint32_t)len;
	wr->num_sge = len ? 2 : 1;
	wr->send_flags = IBV_SEND_INLINE;
}

static inline void inline_fill(const void *hdr, uint32_t hdr_len,
			       const void *data, size_t len,
			       struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	inline_fill_fixed(hdr, hdr_len, wr, sge);
	inline_fill_data(data, len, wr, sge);
}

void tmx_sq_init(struct tm_xport *x)
{
	inline_fill_fixed(x->tx.inl.hdr, TMH_LEN, &x->tx.inl.wr,
			  x->tx.inl.sge);
}

/* tm_tx.c's forms of the two fills (inline here: the eager post's). */
int32_t tmx_slot_fill(struct tm_xport *x, const void *hdr,
		      uint32_t hdr_len, const void *data, size_t len,
		      struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	return slot_fill(x, hdr, hdr_len, data, len, wr, sge);
}

void tmx_inline_fill(const void *hdr, uint32_t hdr_len, const void *data,
		     size_t len, struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	inline_fill(hdr, hdr_len, data, len, wr, sge);
}

/* tmx_eager_post of a send that does not fit inline: copied into a slot. */
static __attribute__((noinline)) int
eager_post_slot(struct tm_xport *x, struct tmx_peer *p, uint64_t tag,
		uint32_t app, const void *buf, size_t len)
{
	uint8_t hdr[TMH_LEN] __attribute__((aligned(8)));
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	int32_t slot;

	if (!x->tx.n_free_slots)
		return 0;
	tmh_fill(hdr, IBV_TMH_EAGER, app, tag);
	slot = slot_fill(x, hdr, TMH_LEN, buf, len, &wr, &sge);
	if (sq_post_inl(x, p, &wr, slot, NULL)) {
		x->tx.free_slots[x->tx.n_free_slots++] = (uint32_t)slot;
		return 0;
	}
	return 1;
}

int tmx_eager_post(struct tm_xport *x, uint32_t peer, uint64_t tag,
		   uint32_t app, const void *buf, size_t len)
{
	struct tmx_peer *p = x->peers[peer];

	if (p->dead || !ucs_list_is_empty(&p->txq) ||
	    p->sq_out >= x->tx.sq_limit)
		return 0; /* tmx_eager_ready's tests */
	if (TMH_LEN + len > p->max_inline)
		return eager_post_slot(x, p, tag, app, buf, len);
	tmh_fill(x->tx.inl.hdr, IBV_TMH_EAGER, app, tag);
	inline_fill_data(buf, len, &x->tx.inl.wr, x->tx.inl.sge);
	if (sq_post_inl(x, p, &x->tx.inl.wr, -1, NULL))
		return 0;
	x->st.sends_inline++;
	return 1;
}
