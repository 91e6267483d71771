/*
 * tm_recv_steps.h - the steps of the receive state machine that both of
 * its files take: tm_recv.c (posting, unexpected messages, cancels) and
 * tm_recv_card.c (a card-held receive's completions).  Protocol, private
 * to those two; the contract is tm_recv.h's.  Inline: the fast paths are
 * built from them.
 */
#ifndef TM_RECV_STEPS_H
#define TM_RECV_STEPS_H

#include <string.h>
#include "engine/tm_offload.h"
#include "engine/tm_ops.h"
#include "engine/tm_reply.h"

/* The arrival hook (tests only: tm_engine_test.h). */
static inline void report_arrival(struct tm_xport *x, uint64_t tag,
				  uint32_t app, uint32_t peer, uint64_t len,
				  uint64_t stamp, int on_card)
{
	struct tm_arrival a;

	if (!x->test.arrival_hook)
		return;
	tme_env_from_tag(&a.env, tag);
	a.peer = peer;
	a.send_seq = app & TM_APP_SEQ_MASK;
	a.len = len;
	a.stamp = stamp;
	a.on_card = on_card;
	x->test.arrival_hook(x->test.hook_arg, &a);
}

/* r's DEL, once: its list op names r until the op's result comes. */
static inline void recv_del(struct tm_xport *x, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	if (q->flags & RF_DEL_POSTED)
		return;
	q->flags |= RF_DEL_POSTED;
	q->ops_pending++;
	tmx_op_decide(x, WR_DEL, &q->t);
}

/*
 * The steps of a delivery by software (tme_deliver, deliver_plain and
 * tme_on_unexpected's fast form of it).  Step: r (out of the queues) takes a message's envelope.
 */
static inline void take_env(struct tm_recv *r, uint64_t tag, uint32_t app,
			    uint32_t peer, uint64_t stamp, uint64_t len)
{
	tme_env_from_tag(&r->env, tag);
	r->peer = peer;
	r->send_seq = app & TM_APP_SEQ_MASK;
	r->match_stamp = stamp;
	r->msg_len = len;
	r->on_card = 0;
	tme_rstate(rp(r), R_IDLE); /* out of the queues; finished below */
}

/* Step: an eager message's outcome for r, and how much of it r takes. */
static inline int eager_fit(struct tm_recv *r)
{
	r->recv_len = r->msg_len < r->b.len ? r->msg_len : r->b.len;
	return r->msg_len > r->b.len ? TM_REQ_TRUNCATED : TM_REQ_OK;
}

/* Step: a payload of n bytes into dst.  8 to 16 bytes (one or two MPI
 * elements: the commonest small message) in two overlapping loads and
 * stores, with no call; the rest by memcpy. */
static inline void copy_payload(void *dst, const void *src, size_t n)
{
	const uint8_t *s = src;
	uint8_t *d = dst;
	uint64_t a, b;

	if (n - 8 <= 8) {
		__builtin_memcpy(&a, s, 8);
		__builtin_memcpy(&b, s + n - 8, 8);
		__builtin_memcpy(d, &a, 8);
		__builtin_memcpy(d + n - 8, &b, 8);
		return;
	}
	memcpy(d, s, n);
}

/* Step: an eager message's payload into r (its ACK first if it asks for
 * one); r's outcome.  The payload is r->msg_len bytes at data. */
static inline int take_eager(struct tm_engine *eng, struct tm_recv *r,
			     uint32_t app, const uint8_t *data)
{
	int status = eager_fit(r);

	if (app & TM_APP_SYNC)
		tme_recv_reply(eng, r, TX_ACK);
	copy_payload(r->b.buf, data, r->recv_len);
	return status;
}

/* r names a peer: the keepalive watches it (tme_keepalive_scan finds it
 * among the posted receives and stamps it: no clock read, no list here). */
static inline void recv_watch(struct tm_engine *eng, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	q->wait_ns = 0;
	q->flags |= RF_WATCHED;
	eng->send.nwatched++;
	tme_pend(eng, TM_PEND_WAIT);
}

/* Inline: a step of the fast path (recv_leave_queues) for a receive
 * naming its peer, every MPI receive with a source. */
static inline __attribute__((always_inline)) void
recv_unwatch(struct tm_engine *eng, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	if (!(q->flags & RF_WATCHED))
		return;
	q->flags &= ~RF_WATCHED;
	eng->send.nwatched--;
}

/* Step: r leaves the watch and the small list (a receive in no FIFO). */
static inline __attribute__((always_inline)) void
recv_leave_small(struct tm_engine *eng, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	/* the flags first: a card-held receive naming no peer (the common
	 * case) is in neither list, and costs no call */
	if (q->flags & RF_WATCHED)
		recv_unwatch(eng, r);
	if (q->flags & RF_SMALL)
		tme_small_del(eng, r);
}

/* Step: r leaves the watch, and the small list or its FIFO. */
static inline __attribute__((always_inline)) void
recv_leave_lists(struct tm_engine *eng, struct tm_recv *r)
{
	recv_leave_small(eng, r);
	if (rp(r)->flags & RF_SWQ)
		tme_swq_del(eng, r);
}

/* Step: r leaves every queue (the slow paths' form of the steps above). */
static inline __attribute__((always_inline)) void
recv_leave_queues(struct tm_engine *eng, struct tm_recv *r)
{
	recv_leave_lists(eng, r);
	tm_mq_recv_remove(&eng->mq, &rp(r)->mq);
}

/* Delivers unexpected message m into receive r (which left the queues). */
void tme_deliver(struct tm_engine *eng, struct tm_recv *r, struct tm_msg *m);
/* An unexpected message takes mq's receive (or, none, the queue). */
void tme_handle_unexpected(struct tm_engine *eng, struct tm_msg *m,
			   struct tm_mq_recv *mq);

#endif /* TM_RECV_STEPS_H */
