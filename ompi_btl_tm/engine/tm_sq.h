/*
 * tm_sq.h - a peer's send queue: posting one WR.  Transport, below tm_tx.c
 * (which queues items and retires WRs) and called by nothing it calls.
 *
 * Contract (the bounds: "Selective signalling" in tm_sq.c):
 *  - a WR is signalled when something waits for its completion (keep),
 *    or the signalling bounds or low slots say so; every posted WR is on
 *    its peer's WR ring until tm_tx.c retires it;
 *  - a refused post leaves the ring and the counts as they were;
 *  - an eager send with nothing queued ahead on a live peer goes out at
 *    once, with no tx: inline, or copied into a free slot, so the
 *    caller's buffer is free when tmx_eager_post returns.
 */
#ifndef TM_SQ_H
#define TM_SQ_H

#include "engine/tm_transport.h"

/* The inline send's fixed fields, once (tmx_tx_init). */
void tmx_sq_init(struct tm_xport *x);
/* Posts wr (filled by a fill below) on p, keep the item to hear of its
 * completion (NULL: none); 0, or the post's errno. */
int tmx_sq_post(struct tm_xport *x, struct tmx_peer *p,
		struct ibv_send_wr *wr, int32_t slot, struct tm_tx *keep);
/* Takes a send slot; fills it with hdr (hdr_len) and data (len). */
int32_t tmx_slot_fill(struct tm_xport *x, const void *hdr,
		      uint32_t hdr_len, const void *data, size_t len,
		      struct ibv_send_wr *wr, struct ibv_sge *sge);
/* hdr and data inline (the caller checked them against max_inline). */
void tmx_inline_fill(const void *hdr, uint32_t hdr_len, const void *data,
		     size_t len, struct ibv_send_wr *wr, struct ibv_sge *sge);

/*
 * Eager data with nothing queued ahead on a live peer and a send-queue
 * entry free (tmx_eager_ready): posted inline, or copied into a free
 * slot, so the caller's buffer is free when this returns.  1 if posted;
 * 0: queue it instead (not ready, or the post failed).
 */
static inline int tmx_eager_ready(struct tm_xport *x, uint32_t peer,
				  size_t len)
{
	struct tmx_peer *p = x->peers[peer];

	return !p->dead && ucs_list_is_empty(&p->txq) &&
	       p->sq_out < x->tx.sq_limit &&
	       (TMH_LEN + len <= p->max_inline || x->tx.n_free_slots);
}
int tmx_eager_post(struct tm_xport *x, uint32_t peer, uint64_t tag,
		   uint32_t app, const void *buf, size_t len);

/*
 * The send CQ is worth a look while a signalled WR is outstanding; with
 * only unsignalled ones out, nothing comes but an error, which can wait
 * TM_POLL_SKIP calls (a waiting send is covered by the keepalive anyway,
 * and an eager one completed at post).  (At every 16th drain it was a
 * send-CQ poll per 5 small messages, 33 instructions a message.)  One
 * counter says it (tx.poll_budget, set by tmx_poll_budget): 0 while a
 * signalled WR is out, at most TM_POLL_SKIP while any WR is, INT32_MAX
 * when none is; each drain spends one.
 */
#define TM_POLL_SKIP 256
static inline int tmx_want_poll_send(struct tm_xport *x)
{
	return --x->tx.poll_budget < 0;
}

/* The budget after the send CQ was looked at (or the WRs out changed). */
static inline void tmx_poll_budget(struct tm_xport *x)
{
	x->tx.poll_budget = x->tx.sig_out ? 0 :
			    x->tx.sq_out ? TM_POLL_SKIP : INT32_MAX;
}

#endif /* TM_SQ_H */
