/*
 * tm_offload.h - which receives go to the card, and when.  Protocol
 * (tm_proto.h).
 *
 * Contract (argument: doc/DESIGN.md, "Offload policy" and "Promotion"):
 *  - a new receive goes to the card only if offload_refusal() finds no
 *    reason against it (the numbered checklist in tm_offload.c);
 *    otherwise it is software-held, counted once under its reason;
 *  - each context keeps its software-held receives in a FIFO in post
 *    order; only the head of a FIFO is ever promoted, while the card has
 *    room (tmx_card_has_room), from every engine call and before a new
 *    receive is placed: the head is the earliest software-held receive of
 *    its context and receives of other contexts accept none of its
 *    messages, so the prefix rule holds for it with no check;
 *  - a receive that can never go (offload off, no tag list, small buffer
 *    with no staging, no registration, or its ADD failed) is pinned: it
 *    stays at the head and holds back the rest of its context until it
 *    matches or is cancelled;
 *  - a receive below offload_thresh joins no FIFO: it waits on one list
 *    of such receives in post order (offload.small), and no FIFO head
 *    posted after that list's first is promoted (conservative: it may
 *    hold back heads that accept none of its messages); its prefix-rule
 *    count is taken only when a receive bound for the card asks
 *    (TM_MQ_HELD_LAZY), so a program of small messages never hashes;
 *  - without a card (tmx_has_card 0, fixed for the transport's life) no
 *    receive is ever promoted or passed: software receives keep no FIFO
 *    and no prefix-rule counts, only their place in the shadow queues.
 * Owns: struct tme_offload_state (eng->offload), RF_SWQ, RF_SMALL and
 * RF_PINNED.
 */
#ifndef TM_OFFLOAD_H
#define TM_OFFLOAD_H

#include "engine/tm_ops.h"
#include "engine/tm_proto.h"

int tme_offload_init(struct tm_engine *eng);
void tme_offload_cleanup(struct tm_engine *eng);

/* Places a new receive check 1 admits (tme_recv_stays_sw; no unexpected
 * message took it): card or FIFO. */
int tme_recv_place(struct tm_engine *eng, struct tm_recv *r, uint32_t ctx,
		   uint64_t rtag, uint64_t mask);

/* Check 1 of the checklist: a receive of len bytes never goes to the
 * card. */
static inline int tme_len_stays_sw(struct tm_xport *x, size_t len)
{
	return len < x->cfg.offload_thresh || !tmx_has_card(x);
}

/* Check 1 for a receive (its buffer set by recv_init). */
static inline int tme_recv_stays_sw(struct tm_engine *eng, struct tm_recv *r)
{
	return tme_len_stays_sw(&eng->x, r->b.len);
}

/*
 * A receive check 1 refuses (no card, or below offload_thresh) is placed
 * by the same steps as in tme_recv_place, less those that cannot apply:
 * no promotion first (it cannot be passed by one), no FIFO, and its
 * prefix-rule count (with a card) only when first asked for.  Inline:
 * every small receive's post.
 */
static inline int tme_place_sw(struct tm_engine *eng, struct tm_recv *r, uint64_t rtag,
		    uint64_t mask)
{
	struct tme_recv *q = rp(r);
	int card = tmx_has_card(&eng->x);

	tm_mq_post(&eng->mq, &q->mq, rtag, mask, r->post_stamp,
		   card ? TM_MQ_HELD_LAZY : TM_MQ_CARD); /* cannot fail */
	tme_rstate(q, R_SW);
	q->flags |= RF_PINNED;
	if (!card) { /* check 1's reasons, counted here only */
		if (eng->x.ops.max_entries)
			eng->x.st.sw_no_offload++;
		else
			eng->x.st.sw_no_tm++;
		return TM_OK;
	}
	eng->x.st.sw_below_thresh++;
	q->flags |= RF_SMALL; /* on mq's held_lazy list: the small list */
	return TM_OK;
}

/* Hands FIFO heads to the card while it has room; how many went. */
int tme_promote(struct tm_engine *eng);
/* Is promotion work waiting (and not stuck for want of room)? */
static inline int tme_promo_due(struct tm_engine *eng)
{
	return !ucs_list_is_empty(&eng->offload.promo_ready) &&
	       !eng->x.ops.want_room && !eng->offload.small_blocks;
}
/* r leaves its FIFO (matched, cancelled, failed). */
void tme_swq_del(struct tm_engine *eng, struct tm_recv *r);
/* r is about to leave the small list (inline: every small receive's
 * match; tm_mq_recv_remove unlinks it): the heads it held back may go. */
static inline void tme_small_del(struct tm_engine *eng, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	if (eng->mq.held_lazy.next == &q->mq.ulink &&
	    !ucs_list_is_empty(&eng->offload.promo_ready)) {
		eng->offload.small_blocks = 0;
		tme_pend(eng, TM_PEND_WORK);
	}
	q->flags &= ~RF_SMALL;
}
/* The card refused r's ADD: software-held again, pinned. */
void tme_recv_back_to_sw(struct tm_engine *eng, struct tm_recv *r);

#endif /* TM_OFFLOAD_H */
