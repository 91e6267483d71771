/*
 * tm_proto.h - the engine's protocol state: the private part of every
 * request, unexpected messages, and struct tm_engine, which puts the
 * transport (tm_transport.h) under the protocol modules' parts.  For the
 * engine's modules only.
 *
 * Protocol modules (each file's header gives its contract), lowest first:
 *   tm_reply    what a receiver sends back: ACK, FIN, CANCEL_REP (owed
 *               when short of memory); software rendezvous reads
 *   tm_offload  which receives go to the card: refusals, promotion
 *   tm_work     the deferred work every entry point moves on
 *   tm_send     sends, the replies they wait for, keepalive
 *   tm_recv     the receive state machine, unexpected messages
 *   tm_cancel   send cancel (CANCEL_REQ / CANCEL_REP)
 *   tm_probe    probes and matched probes
 *   tm_api.c    create, destroy, peers, progress, and the transport's
 *               callbacks
 * The public entry points live in the module they concern (isend in
 * tm_send.c, irecv in tm_recv.c, ...); each drains, works, then ends with
 * tme_call_end (tm_work.h).
 * Each owns its part of struct tm_engine, a type of its own (struct
 * tme_recv_state, tme_send_state, tme_reply_state, tme_offload_state;
 * init and cleanup in its file), and a function that needs only that part
 * (or only the transport, x) is handed it; a module only reads the parts
 * of the modules below it.  Shared by all:
 * x (the transport, with cfg, test, st and pending), mq, clock and the
 * done lists (tme_fire_done, below).
 *
 * Receive states (rp(r)->state):
 *   R_IDLE      not posted, or between queues and its finish
 *   R_SW        posted, held in software only (counted for the prefix
 *               rule where the transport has a card)
 *   R_CARD      posted, ADD posted (maybe not yet processed by the card)
 *   R_CLAIM     an unexpected message took it; waiting for our DEL to
 *               confirm the card no longer holds it
 *   R_WAIT_DATA the card matched it; waiting for its data completion
 *   R_SW_READ   software rendezvous read in flight
 *   R_DONE      finished; completes once nothing names it (ops_pending)
 * Only R_SW and R_CARD receives are in the shadow queues (tm_mq); with a
 * card, every R_SW receive is also in its context's FIFO (struct tm_swq)
 * until it matches, is cancelled or is promoted to R_CARD.
 */
#ifndef TM_PROTO_H
#define TM_PROTO_H

#include <stdalign.h>
#include <stdlib.h>
#include <ucs/datastruct/khash.h>
#include "engine/tm_match.h"
#include "engine/tm_ops.h"
#include "engine/tm_transport.h"

enum { R_IDLE, R_SW, R_CARD, R_CLAIM, R_WAIT_DATA, R_SW_READ, R_DONE };

enum {
	RF_CANCEL_REQ = 1 << 0,
	RF_DEL_POSTED = 1 << 1,
	RF_MATCH_SEEN = 1 << 2,
	RF_FINISHED = 1 << 3,
	RF_RNDV = 1 << 4,
	RF_SWQ = 1 << 5,    /* in its context's software-held FIFO */
	RF_PINNED = 1 << 6, /* can never go to the card */
	RF_OWE_ACK = 1 << 7, /* on reply.owed: its ACK waits for memory */
	RF_OWE_FIN = 1 << 8, /* on reply.owed: its FIN waits for memory */
	RF_SW_RNDV = 1 << 9, /* the card handed its rendezvous to software:
			      * TMH+RVH are in the buffer */
	RF_WATCHED = 1 << 10, /* names a peer, counted in send.nwatched */
	RF_PEER_DEAD = 1 << 11, /* its DEL is because its peer died */
	RF_SMALL = 1 << 12, /* software-held below offload_thresh: on
			     * the small list (mq.held_lazy), in no FIFO */
};

/* tm_send waiting */
enum { S_WAIT_CQE = 1, S_WAIT_REPLY = 2 };
/* tm_send cflags */
enum {
	S_REPLIED = 1,       /* its FIN/ACK came: the receiver matched it */
	S_CANCEL_ASKED = 2,  /* a CANCEL_REQ is queued or out */
	S_CANCEL_REARMED = 4, /* completed, then waiting again for a REP */
};
/* CANCEL_REPs a receiver could not allocate yet (tm_reply.c) */
#define TM_CANCEL_OWED_MAX 64

/* ---- the private part of the requests -------------------------------- */

struct tme_recv {
	struct tm_mq_recv mq;
	struct tm_tctx t;          /* its entry on the card (tm_ops.h) */
	ucs_list_link_t done_link;
	ucs_list_link_t sw_link;   /* its context's software-held FIFO */
	ucs_list_link_t peer_link; /* while its peer dies (tm_recv.c) */
	ucs_list_link_t owed_link; /* its ACK/FIN waits for memory */
	uint32_t want_peer;        /* the peer its source names, or
				    * TM_PEER_ANY */
	uint64_t wait_ns;          /* when the keepalive scan first saw it
				    * posted (0: not yet; posting reads no
				    * clock) */
	int own_mr;                /* b.mr is ours (tm_dev_mem_get) */
	int state;                 /* R_* */
	uint32_t ops_pending;      /* list ops and owed replies naming it */
	uint32_t flags;            /* RF_* */
	struct tm_msg *claim;
	uint64_t rd_va;
	uint32_t rd_rkey;
	uint64_t rd_len;           /* the sender's full length */
	uint8_t hdr[32] __attribute__((aligned(8))); /* TMH+RVH, sw rndv */
};

struct tme_send {
	ucs_list_link_t wait_link; /* peer's sends waiting for FIN/ACK */
	ucs_list_link_t done_link;
	uint64_t wait_ns;          /* when it started waiting */
	int kind;                  /* TX_EAGER or TX_RNDV */
	uint64_t tag;
	uint32_t app_ctx;
	const void *buf;
	size_t len;
	struct ibv_mr *mr;
	int own_mr;
	uint32_t waiting;          /* S_WAIT_* */
	uint32_t cflags;           /* S_REPLIED, S_CANCEL_* (tm_cancel.c) */
};

_Static_assert(sizeof(struct tme_recv) <= sizeof(((struct tm_recv *)0)->priv),
	       "TM_RECV_PRIV_SIZE (tm_engine.h) too small");
_Static_assert(alignof(struct tme_recv) <= alignof(struct tm_recv),
	       "tm_recv.priv under-aligned");
_Static_assert(sizeof(struct tme_send) <= sizeof(((struct tm_send *)0)->priv),
	       "TM_SEND_PRIV_SIZE (tm_engine.h) too small");
_Static_assert(alignof(struct tme_send) <= alignof(struct tm_send),
	       "tm_send.priv under-aligned");

/* The engine's part of a request (r and s are the caller's storage). */
static inline struct tme_recv *rp(struct tm_recv *r)
{
	return (struct tme_recv *)(void *)r->priv.u64;
}

static inline struct tme_send *sp(struct tm_send *s)
{
	return (struct tme_send *)(void *)s->priv.u64;
}

/* The request whose private part q is (the inverse of rp). */
static inline struct tm_recv *rpub(struct tme_recv *q)
{
	return ucs_container_of((void *)q, struct tm_recv, priv);
}

static inline struct tm_send *spub(struct tme_send *q)
{
	return ucs_container_of((void *)q, struct tm_send, priv);
}

/* The request a tag context (or a list link in its private part) is of. */
static inline struct tm_recv *recv_of_tctx(struct tm_tctx *t)
{
	return rpub(ucs_container_of(t, struct tme_recv, t));
}

#define recv_of_link(l, member) \
	rpub(ucs_container_of(l, struct tme_recv, member))
#define recv_head(head, member) \
	recv_of_link((head)->next, member)
#define send_head(head, member) \
	spub(ucs_container_of((head)->next, struct tme_send, member))

/* ---- unexpected messages -------------------------------------------- */

struct tm_msg {
	struct tm_mq_msg mq;
	ucs_list_link_t all;
	uint64_t tag;
	uint64_t len;
	uint64_t stamp;
	uint32_t app;
	uint32_t peer;
	int rndv;
	int in_uq;         /* in mq's unexpected queue (not claimed/probed) */
	int32_t plain;     /* TM_MSG_MALLOC, TM_MSG_RECYCLED (a copy of
			    * TM_MSG_SMALL payload bytes, kept for reuse);
			    * else the plain buffer it holds (and its entry
			    * in recv.msg_pool) */
	uint8_t *data;     /* eager payload: after the struct, or in the
			    * plain buffer */
	uint8_t hdr[32] __attribute__((aligned(8))); /* TMH+RVH of a RNDV */
};

enum { TM_MSG_MALLOC = -1, TM_MSG_RECYCLED = -2 };
/* unexpected copies of at most this payload come from recv.msg_free */
#define TM_MSG_SMALL 256
/* ... which keeps at most this many */
#define TM_MSG_KEEP 256

/* A peer as the protocol sees it (the transport's: x.peers). */
struct tme_peer {
	uint32_t id;
	uint32_t next_seq;
	ucs_list_link_t waitq;      /* sends waiting for FIN/ACK, oldest
				     * first */
	ucs_list_link_t wait_link;  /* in send.wait_peers while waitq is not
				     * empty */
	uint64_t probe_since_ns;    /* probes naming it have found nothing */
	uint64_t probe_last_ns;     /* ... since then, the last one */
};

/* The software-held receives of one context, in post order. */
struct tm_swq {
	ucs_list_link_t fifo;       /* tme_recv.sw_link */
	ucs_list_link_t ready_link; /* in offload.promo_ready */
	int ready;                  /* the head can go once the card has room */
};

KHASH_MAP_INIT_INT(tm_swq, struct tm_swq *)
KHASH_MAP_INIT_INT64(tm_sends, struct tm_send *)

/*
 * Each protocol module's state, a type of its own: a function that works
 * on one module's part is handed that part, not the whole engine.
 */

/* tm_reply.c: what a receiver owes its senders. */
struct tme_reply_state {
	ucs_list_link_t owed;       /* receives whose ACK/FIN could not be
				     * allocated yet */
	uint64_t reads_active;
	/* CANCEL_REPs owed, oldest first: peer << 32 | TM_CANCEL_* << 24 |
	 * seq */
	uint64_t rep_owed[TM_CANCEL_OWED_MAX];
	uint32_t rep_head, rep_tail;
};

/* tm_offload.c: the software-held receives and when they may go. */
struct tme_offload_state {
	khash_t(tm_swq) *swq;       /* context id -> software-held FIFO */
	ucs_list_link_t promo_ready; /* FIFOs whose head may go */
	/* the small list (receives held below offload_thresh, in post
	 * order: no FIFO head posted after its first is promoted) is the
	 * shadow queue's mq.held_lazy (tm_mq_oldest_held_lazy) */
	int small_blocks;           /* every ready head waits for small's */
};

/* tm_send.c: sends waiting for their peer, and the keepalive. */
struct tme_send_state {
	khash_t(tm_sends) *sends;   /* (peer, seq) -> waiting send */
	uint64_t sends_waiting;
	ucs_list_link_t wait_peers; /* peers with sends waiting */
	uint64_t nwatched;          /* posted receives naming a peer
				     * (RF_WATCHED; tm_recv.c counts) */
	uint64_t ka_ns;             /* cfg.keepalive_ms */
	uint64_t ka_next_ns;        /* next look at wait_peers */
	uint32_t ka_calls;          /* progress calls until the scan next
				     * reads the clock */
};

/* tm_recv.c and tm_umem.c: unexpected messages and their memory. */
struct tme_recv_state {
	ucs_list_link_t all_msgs;
	ucs_list_link_t msg_free;   /* TM_MSG_RECYCLED copies */
	uint32_t n_msg_free;
	struct tm_msg *msg_pool;    /* [plain.n]: unexpected messages that
				     * could not be copied keep their
				     * buffer */
	/* tm_umem.c: the copies' bytes and their budget, the messages
	 * holding buffers, how many were let go, and when the spill rule
	 * last looked */
	size_t copy_bytes, copy_max;
	uint32_t n_held;
	uint64_t held_freed, held_seen, held_ns;
};

struct tm_engine {
	struct tm_xport x;          /* the transport, and what all share */
	struct tm_mq mq;            /* the matcher */
	uint64_t clock;
	struct tme_peer **peers;    /* [x.npeers] (tm_send.c adds) */
	ucs_list_link_t done_recv;  /* tme_fire_done */
	ucs_list_link_t done_send;
	struct tme_reply_state reply;
	struct tme_offload_state offload;
	struct tme_send_state send;
	struct tme_recv_state recv;
};

/* ---- the state machine's rules, checked in a debug build ------------- */

/*
 * Configured with --enable-debug (TM_DEBUG), the rules the comments above
 * state are checked where a receive changes state, as rdma-core's mlx5
 * provider checks its invariants under MLX5_DEBUG: a broken rule stops
 * the process at once (assert: libc names the rule) instead of losing a
 * message later.  Free otherwise.
 */
#ifdef TM_DEBUG
#undef NDEBUG
#include <assert.h>
#define TME_ASSERT(c) assert(c)
#else
#define TME_ASSERT(c) ((void)0)
#endif

/* The states a receive may enter `to` from (R_IDLE: at post or
 * delivery; R_DONE: from any but itself). */
static inline uint32_t tme_rstate_from(int to)
{
	static const uint32_t from[] = {
		[R_IDLE] = 1u << R_IDLE | 1u << R_SW | 1u << R_CLAIM,
		[R_SW] = 1u << R_IDLE | 1u << R_CARD,
		[R_CARD] = 1u << R_IDLE | 1u << R_SW,
		[R_CLAIM] = 1u << R_CARD,
		[R_WAIT_DATA] = 1u << R_CARD | 1u << R_CLAIM,
		[R_SW_READ] = 1u << R_IDLE | 1u << R_WAIT_DATA,
		[R_DONE] = ~(1u << R_DONE),
	};

	return from[to];
}

/*
 * q moves to state `to`.  The rules: only the transitions above; a
 * receive is in its context's FIFO (RF_SWQ) or on the small list
 * (RF_SMALL) only while R_SW, and waits on
 * a peer (RF_WATCHED) only while posted (R_SW, R_CARD); a card-held one
 * has a live entry; a claim holds its message and has its DEL out; R_DONE
 * comes once, finished, with nothing naming it (no op, no owed reply).
 */
static inline void tme_rstate(struct tme_recv *q, int to)
{
	TME_ASSERT(tme_rstate_from(to) & (1u << q->state));
	TME_ASSERT(to == R_SW || !(q->flags & (RF_SWQ | RF_SMALL)));
	TME_ASSERT(to == R_SW || to == R_CARD || !(q->flags & RF_WATCHED));
	TME_ASSERT(to != R_CARD || (q->t.flags & TC_ENTRY_LIVE));
	TME_ASSERT(to != R_CLAIM || (q->claim && (q->flags & RF_DEL_POSTED)));
	TME_ASSERT(to != R_DONE || ((q->flags & RF_FINISHED) &&
				    !q->ops_pending &&
				    !(q->flags & (RF_OWE_ACK | RF_OWE_FIN))));
	q->state = to;
}

/* ---- small helpers shared by the protocol modules (hot: inline) ------ */

static inline void tme_pend(struct tm_engine *eng, uint32_t what)
{
	tmx_pend(&eng->x, what);
}

static inline void tme_env_from_tag(struct tm_env *env, uint64_t tag)
{
	env->ctx = tm_tag_ctx(tag);
	env->src = (int32_t)tm_tag_src(tag);
	env->tag = tm_tag_user(tag);
}

/* Step of tme_recv_done: r's callback is queued (r holds no registration
 * of its own any more). */
static inline void tme_recv_queue_done(struct tm_engine *eng,
				       struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	tme_rstate(q, R_DONE);
	tmx_stage_put(&eng->x, &q->t);
	ucs_list_add_tail(&eng->done_recv, &q->done_link);
	tme_pend(eng, TM_PEND_DONE);
}

/* r is done: its buffers go back, its callback is queued. */
static inline void tme_recv_done(struct tm_engine *eng, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	if (q->own_mr) {
		tm_dev_mem_put(eng->x.dev, r->b.mr);
		q->own_mr = 0;
		r->b.mr = NULL;
	}
	tme_recv_queue_done(eng, r);
}

/* Completes r once finished and nothing names it any more. */
static inline void tme_recv_try_done(struct tm_engine *eng, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	if (!(q->flags & RF_FINISHED) || q->ops_pending || q->state == R_DONE)
		return;
	tme_recv_done(eng, r);
}

/* r's outcome is known (once): its status, counted. */
static inline void tme_recv_outcome(struct tm_engine *eng, struct tm_recv *r,
				    int status)
{
	TME_ASSERT(!(rp(r)->flags & RF_FINISHED));
	r->status = status;
	if (status == TM_REQ_TRUNCATED)
		eng->x.st.truncated++;
	if (status == TM_REQ_ERROR)
		eng->x.st.errors++;
	rp(r)->flags |= RF_FINISHED;
}

/* r finished with status: completes once nothing names it any more. */
static inline void tme_recv_finish(struct tm_engine *eng, struct tm_recv *r,
				   int status)
{
	tme_recv_outcome(eng, r, status);
	tme_recv_try_done(eng, r);
}

/* Step: s is done (nothing left to wait for): its buffer goes back,
 * counted.  Its callback is then queued (tme_send_try_done) or, at the
 * end of tm_engine_post_send with nothing else to do, left to the caller
 * (TM_DONE). */
static inline void tme_send_release(struct tm_engine *eng, struct tm_send *s)
{
	struct tme_send *q = sp(s);

	TME_ASSERT(eng->send.sends_waiting > 0);
	if (q->own_mr) {
		tm_dev_mem_put(eng->x.dev, q->mr);
		q->own_mr = 0;
		q->mr = NULL;
	}
	if (s->status == TM_REQ_ERROR)
		eng->x.st.sends_failed++;
	eng->send.sends_waiting--;
}

/* s has nothing left to wait for: done (callback queued for fire_done). */
static inline void tme_send_try_done(struct tm_engine *eng, struct tm_send *s)
{
	if (sp(s)->waiting)
		return;
	tme_send_release(eng, s);
	ucs_list_add_tail(&eng->done_send, &sp(s)->done_link);
	tme_pend(eng, TM_PEND_DONE);
}

/* Step: a done send's callback (the engine is done with s). */
static inline void tme_send_fire(struct tm_send *s)
{
	if (s->cb)
		s->cb(s);
}

/*
 * Would the end of this entry point (tme_call_end) do nothing but fire
 * one more callback?  Then a request done now may fire it directly
 * instead of queueing it: no work is queued and no callback waits, so the
 * order of callbacks is the same.
 */
static inline int tme_fire_now_ok(const struct tm_engine *eng)
{
	return !(eng->x.pending & (TM_PEND_WORK | TM_PEND_DONE));
}

/*
 * Step of the arrival fast paths: r is done, and its callback runs now
 * when no work and no callback wait (tme_fire_now_ok: the order of
 * callbacks is the queue's), else it is queued.  Inside a batch of
 * completions: the callback may call in, which then does not poll
 * (tmx_drain).  r is the caller's again after this.
 */
static inline void tme_recv_fire(struct tm_engine *eng, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	if (!tme_fire_now_ok(eng)) {
		tme_recv_queue_done(eng, r);
		return;
	}
	tme_rstate(q, R_DONE);
	tmx_stage_put(&eng->x, &q->t);
	if (r->cb)
		r->cb(r);
}

/* Runs callbacks; a callback may call back into the engine. */
static inline void tme_fire_done(struct tm_engine *eng)
{
	struct tm_recv *r;
	struct tm_send *s;

	if (!(eng->x.pending & TM_PEND_DONE))
		return;
	for (;;) {
		if (!ucs_list_is_empty(&eng->done_recv)) {
			r = recv_head(&eng->done_recv, done_link);
			ucs_list_del(&rp(r)->done_link);
			if (r->cb)
				r->cb(r);
		} else if (!ucs_list_is_empty(&eng->done_send)) {
			s = send_head(&eng->done_send, done_link);
			ucs_list_del(&sp(s)->done_link);
			tme_send_fire(s);
		} else {
			/* both empty now, also after nested calls */
			eng->x.pending &= ~TM_PEND_DONE;
			break;
		}
	}
}

#endif /* TM_PROTO_H */
