/*
 * tm_ops.h - the card's tag list: list ops (ADD, DEL, SYNC), the sync
 * rule, op slots and staging buffers.  Transport (tm_transport.h).
 *
 * Contract (argument: doc/DESIGN.md, "Sync protocol"):
 *  - every list op carries IBV_OPS_TM_SYNC and the unexpected count as of
 *    the moment it was decided (ops.reported), and ops reach the card in
 *    the order decided: a FIFO (ops.opq) once max_ops are outstanding, and
 *    an ADD only when that FIFO is empty (tmx_card_has_room);
 *  - ADDs decided before the next progress call are posted as one chain
 *    (one ibv_post_srq_ops, one doorbell, at most TM_ADD_CHAIN_MAX): by
 *    tmx_add_flush at the top of tm_engine_progress and of every drain
 *    (tm_engine_post_recv skips its drain while a chain waits), after a
 *    work flush's promotions, before any DEL or SYNC is posted, and when
 *    the chain is full.  They count as posted
 *    from the moment they are decided (op slots, signalling, order).  An
 *    ADD the card refuses (ENOMEM, EAGAIN; the ops before it stay posted)
 *    reaches the protocol from the next work flush as a failed ADD
 *    (tmx_report_add_failures), or, if the receive's DEL was decided
 *    meanwhile, as a DEL that succeeded;
 *  - ADDs go unsignalled except every TM_ADD_SIG_EVERY-th and the one that
 *    takes the last op slot; DELs and SYNCs are always signalled; a
 *    signalled completion retires the unsignalled ops before it;
 *  - an explicit SYNC only when a live entry may be inactive (ops.unconf)
 *    and the count moved since the last op, one at a time, or when the
 *    card lags TM_SYNC_LAG_MAX unexpected messages behind;
 *  - what a completed op means for its receive is the protocol's: it is
 *    told through tmx_cb.op_done, with the tag context the op named.
 * A device with no tag list (max_entries 0) gets no ADD and no staging
 * buffer: every receive stays with the protocol's software matching.
 */
#ifndef TM_OPS_H
#define TM_OPS_H

#include "engine/tm_transport.h"

int tmx_ops_init(struct tm_xport *x);
void tmx_ops_cleanup(struct tm_xport *x);

/*
 * May receives go to a tag list at all?  Not without tag matching
 * (no_card: offload and max_entries are 0 then), with offload off, or
 * with no list entries: then nothing is ever added, and every tagged
 * message reaches the protocol as unexpected (tmx_cb.unexpected).
 */
static inline int tmx_has_card(const struct tm_xport *x)
{
	return x->has_card;
}

static inline void tmx_tctx_init(struct tm_tctx *t)
{
	t->flags = 0;
	t->stage = -1;
}

/* The count to report: unexpected arrivals processed (plus the fault). */
static inline uint32_t tmx_count_now(const struct tm_xport *x)
{
	return x->ops.uq_count + !!(x->test.faults & TM_FAULT_SYNC_AHEAD);
}

/*
 * How many more unexpected arrivals may pass before the count can be work
 * (tmx_sync_wanted, less the outstanding SYNC, whose completion runs the
 * rule again): none while an unconfirmed entry exists, else what is left
 * of TM_SYNC_LAG_MAX.  Without a card the count goes nowhere.  Set again
 * wherever it could have grown too large: an entry joining ops.unconf.
 */
static inline void tmx_count_rearm(struct tm_xport *x)
{
	uint32_t lag = tmx_count_now(x) - x->ops.reported;

	x->ops.count_wake = x->no_card ? INT32_MAX :
			    !ucs_list_is_empty(&x->ops.unconf) ||
			    lag >= TM_SYNC_LAG_MAX ? 0 :
			    (int32_t)(TM_SYNC_LAG_MAX - lag);
}

/* The count reached its wake-up: work if the rule may want a SYNC. */
static inline void tmx_count_woke(struct tm_xport *x)
{
	if (!x->no_card && (!ucs_list_is_empty(&x->ops.unconf) ||
			    tmx_count_now(x) - x->ops.reported >=
			    TM_SYNC_LAG_MAX))
		tmx_pend(x, TM_PEND_WORK);
	tmx_count_rearm(x);
}

/* One more unexpected tagged arrival processed (the card counted it).
 * With no unconfirmed entry and no long lag the next op carries it: one
 * decrement, no test of the rule. */
static inline void tmx_count_unexpected(struct tm_xport *x)
{
	x->ops.uq_count++;
	x->st.unexpected++;
	if (--x->ops.count_wake <= 0)
		tmx_count_woke(x);
}

/* Resources for one more ADD: an entry, an op slot, no op queued ahead. */
static inline int tmx_card_has_room(struct tm_xport *x)
{
	return x->ops.card_entries < x->ops.max_entries &&
	       ucs_list_is_empty(&x->ops.opq) && x->ops.ops_out < x->ops.max_ops;
}

/* Something an ADD waits for (an entry, an op slot, a stage) freed. */
static inline void tmx_room_freed(struct tm_xport *x)
{
	if (x->ops.want_room) {
		x->ops.want_room = 0;
		tmx_pend(x, TM_PEND_WORK);
	}
}

/* Where the card puts t's data: its staging buffer, or b's. */
static inline void *tmx_card_buf(const struct tm_xport *x,
				 const struct tm_tctx *t,
				 const struct tm_rbuf *b)
{
	return t->stage < 0 ? b->buf :
	       x->ops.stage + (size_t)t->stage * x->ops.stage_size;
}

/* A receive of len bytes goes to the card with a staging buffer. */
static inline int tmx_needs_stage(const struct tm_xport *x, size_t len)
{
	return len < x->ops.stage_size;
}

/* Takes a staging buffer for t; -1 if none is free. */
static inline int tmx_stage_get(struct tm_xport *x, struct tm_tctx *t)
{
	if (!x->ops.n_free_stage)
		return -1;
	t->stage = (int32_t)x->ops.free_stage[--x->ops.n_free_stage];
	return 0;
}

/* Gives t's staging buffer back, if it has one. */
static inline void tmx_stage_put(struct tm_xport *x, struct tm_tctx *t)
{
	if (t->stage < 0)
		return;
	x->ops.free_stage[x->ops.n_free_stage++] = (uint32_t)t->stage;
	t->stage = -1;
	tmx_room_freed(x);
}

/*
 * Would tmx_maybe_sync post a SYNC now?  An unreported count is work only
 * then: while no live entry may be inactive (ops.unconf) it can wait for
 * the next ADD, which carries it, so idle progress does not keep looking.
 */
static inline int tmx_sync_wanted(struct tm_xport *x)
{
	uint32_t lag = tmx_count_now(x) - x->ops.reported;

	return lag && !x->ops.sync_out && !x->no_card &&
	       (!ucs_list_is_empty(&x->ops.unconf) || lag >= TM_SYNC_LAG_MAX);
}

/* Decides t's ADD (tag, mask; its staging buffer or b) with the current
 * count, into the chain; 0 if it went in (TC_ADD_UNSIG: no completion
 * comes), -1 if a full chain could not be posted to make room. */
int tmx_card_add(struct tm_xport *x, struct tm_tctx *t, uint64_t tag,
		 uint64_t mask, const struct tm_rbuf *b);
/* Decides t's DEL (or, t NULL, a SYNC) now: posted, or queued in order. */
void tmx_op_decide(struct tm_xport *x, int type, struct tm_tctx *t);
/* t is known active (or gone): off ops.unconf. */
static inline void tmx_unconf_del(struct tm_tctx *t)
{
	if (t->flags & TC_UNCONF) {
		t->flags &= ~TC_UNCONF;
		ucs_list_del(&t->card_link);
	}
}

/* t's entry is consumed or deleted: no longer counts against the list.
 * Inline: a step of every card-held receive's completion. */
static inline void tmx_entry_gone(struct tm_xport *x, struct tm_tctx *t)
{
	if (t->flags & TC_ENTRY_LIVE) {
		t->flags &= ~TC_ENTRY_LIVE;
		x->ops.card_entries--;
		tmx_room_freed(x);
	}
	tmx_unconf_del(t);
}
void tmx_add_flush_slow(struct tm_xport *x);
/* Posts the chained ADDs, if any (inline: progress asks every call). */
static inline void tmx_add_flush(struct tm_xport *x)
{
	if (x->ops.chain_n)
		tmx_add_flush_slow(x);
}
int tmx_report_add_failures(struct tm_xport *x);
int tmx_flush_ops(struct tm_xport *x);
void tmx_maybe_sync(struct tm_xport *x);
void tmx_on_op_cqe(struct tm_xport *x, int type, struct tm_tctx *t,
		   const struct tm_cqe *c);

#endif /* TM_OPS_H */
