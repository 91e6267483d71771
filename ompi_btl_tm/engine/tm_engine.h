/*
 * tm_engine.h - the matching engine: MPI point-to-point matching on a
 * TM-SRQ (hardware tag matching), with a software shadow of every posted
 * receive and the unexpected-message queue.  No Open MPI headers here.
 * The design and its arguments: doc/DESIGN.md, "The matching engine".
 *
 * Contract
 * --------
 * One engine per tm_dev (tm_dev.h); peers are RC QPs connected with
 * tm_dev, each given an id by tm_engine_add_peer().  Single-threaded: the
 * caller serialises calls.
 *
 * Matching: the pairs are exactly those of a plain software MPI matcher fed
 * the same receives (in post order) and arrivals (in the order the card
 * decided them, which keeps each sender's order).  Every request and
 * arrival takes a stamp from one engine clock at its linearisation point:
 * a receive at tm_engine_post_recv() (post_stamp), an arrival at its first
 * completion (match_stamp of the receive it matched), a cancel when the
 * card confirmed it or at once for a software-held receive (cancel_stamp),
 * a probe or claim at the call (tm_probe_info.stamp).  Every entry point
 * that takes a stamp first processes the completions already in the CQs,
 * so no arrival the card decided before the call is seen after it (an
 * eager send takes none, and leaves them for the next call unless its
 * send queue is full).
 *
 * Tags: tm_match.h (ctx 14 bits | src 18 bits | tag 32 bits; ANY_TAG
 * excludes negative tags).  Wire format: tm_wire.h.
 *
 * Sends: an eager standard send completes once it is posted, inline when
 * header and payload fit the QP's inline limit, else copied into a
 * registered send slot; a synchronous one when its ACK arrives;
 * a rendezvous one when its FIN arrives and its request's WR completed.
 * A send to a dead peer, or waiting on one, completes TM_REQ_ERROR
 * (doc/DESIGN.md, "Dead peers": within about keepalive_ms plus the
 * transport's retry time).  Other peers are not affected.
 *
 * Completion: a request's callback runs from inside an engine call (never
 * from inside a CQ poll), once, after the engine is done with it; the
 * request may then be reused or freed.  A callback may call the engine.
 * A receive's may run while the engine handles the completions one poll
 * took (the arrival fast paths, when no other callback waits): a call
 * from it then polls nothing, and the rest of those completions are
 * handled first (tests/engine/test_reenter.c).
 */
#ifndef TM_ENGINE_H
#define TM_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <ucs/datastruct/list.h>
#include "dev/tm_dev.h"
#include "tm_status.h"
#include "engine/tm_match.h"
#include "engine/tm_engine_param.h"

/* The longest keepalive_ms: a dead peer must fail its waiting requests
 * within about a minute, whatever the configuration. */
#define TM_KEEPALIVE_MAX_MS 60000u

enum tm_req_status {
	TM_REQ_OK = 0,
	TM_REQ_TRUNCATED,  /* msg_len > buffer: exactly the buffer delivered */
	TM_REQ_CANCELLED,
	TM_REQ_ERROR,
};

struct tm_engine;
struct tm_engine_test;

struct tm_env {
	uint32_t ctx;
	int32_t src;
	int32_t tag;
};

/*
 * Settings.  Each one's name, default and bounds are declared once, in the
 * table of tm_engine_param.h (tm_engine_config_default() writes the
 * defaults); tm_engine_create() refuses a value outside the bounds with
 * TM_ERR_INVALID, and tm_engine_config_check() says which setting it was.
 */
struct tm_engine_config {
	size_t eager_limit;      /* payload bytes sent eagerly; longer
				  * messages use rendezvous */
	uint32_t n_plain;        /* plain SRQ buffers */
	uint32_t n_send_slots;   /* registered send buffers */
	uint32_t max_card_entries; /* 0: the device's list size */
	int offload;             /* 0: keep every receive in software */
	/* a receive whose buffer is shorter is matched in software, never
	 * posted to the card (doc/DESIGN.md, "Offload policy") */
	size_t offload_thresh;
	/* ADDs decided before the next drain go to the card as one chain of
	 * at most this many (1: each with its receive, at once) */
	uint32_t add_chain;
	/* a send waiting this long for FIN/ACK, or a receive or probe naming
	 * a peer, probes its peer (0: the default; at most
	 * TM_KEEPALIVE_MAX_MS) */
	uint32_t keepalive_ms;
	/* bytes the copies of unexpected messages may take; past that they
	 * keep their plain buffers and senders wait (tm_umem.h) */
	size_t unexpected_mem;
	const struct tm_engine_test *test; /* tests only (tm_engine_test.h) */
};

/* An eager message (16-byte TMH and payload) is one verbs message: at
 * most 1 GiB, an mlx5 port's max_msg_sz (the soft HCA takes < 2 GiB). */
#define TM_ENGINE_EAGER_LIMIT_MAX ((size_t)(1u << 30) - 16)
/* At least TM_DEV_MIN_PLAIN (33) plain WQEs on a TM-SRQ: a hardware
 * limitation of mlx5 cards (doc/mlx5-rules.md rule 5). */
#define TM_ENGINE_N_PLAIN_MIN TM_DEV_MIN_PLAIN
/* The largest SRQ a ConnectX card offers (max_srq_wr 32767). */
#define TM_ENGINE_N_PLAIN_MAX 32767u
/* Slot numbers are signed 32-bit in the send-queue ring. */
#define TM_ENGINE_N_SEND_SLOTS_MIN 1u
#define TM_ENGINE_N_SEND_SLOTS_MAX ((uint32_t)INT32_MAX)

struct tm_engine_stats {
	uint64_t recv_posted;
	uint64_t recv_to_card;
	uint64_t sw_matched_uq;    /* receive matched the unexpected queue */
	uint64_t sw_conflict;      /* prefix rule kept it in software */
	uint64_t sw_list_full;
	uint64_t sw_ops_full;      /* max_ops reached or ops queued */
	uint64_t sw_small_buf;
	uint64_t sw_long_buf;      /* longer than the card reads at once */
	uint64_t sw_no_stage;     /* small buffer, no staging buffer free */
	uint64_t sw_no_offload;    /* offload off (cfg.offload 0) */
	uint64_t sw_no_tm;         /* the device offers no tag matching */
	uint64_t sw_below_thresh;  /* buffer shorter than offload_thresh */
	uint64_t sw_reg_fail;
	uint64_t promoted;         /* software-held receives moved to the card */
	uint64_t card_matched;     /* arrivals matched by the card */
	uint64_t unexpected;       /* unexpected tagged arrivals */
	uint64_t unexp_to_sw_recv; /* ... matched a software-held receive */
	uint64_t unexp_claimed;    /* ... took a receive back from the card */
	uint64_t claim_del_failed; /* ... whose DEL failed (must stay 0) */
	uint64_t cancel_ok;
	uint64_t cancel_late;      /* DEL failed: receive completes normally */
	uint64_t scancel_req;      /* send cancels asked for */
	uint64_t scancel_ok;       /* ... that withdrew the send */
	uint64_t scancel_late;     /* ... the receiver had matched it */
	uint64_t scancel_served;   /* CANCEL_REQs from peers answered DONE */
	uint64_t ops_posted;
	uint64_t ops_queued;
	uint64_t syncs;
	uint64_t sync_req_seen;
	uint64_t truncated;
	uint64_t rndv_card;
	uint64_t rndv_sw;
	uint64_t acks_sent;
	uint64_t fins_sent;
	uint64_t sends_inline;     /* send WRs posted inline (no slot) */
	uint64_t send_cqes;        /* send-CQ completions (signalled WRs) */
	uint64_t fins_recv;
	uint64_t fin_unknown;      /* FIN/ACK naming no outstanding send */
	uint64_t malformed;
	uint64_t errors;
	uint64_t keepalives_sent;
	uint64_t keepalives_recv;  /* ... from peers, ignored */
	uint64_t peer_failures;    /* peers marked dead */
	uint64_t sends_failed;     /* sends completed TM_REQ_ERROR */
	uint64_t post_failures;    /* posts refused for good: the peer or
				    * (list ops, plain buffers) the engine
				    * failed */
	uint64_t msg_held;         /* unexpected messages that kept their
				    * plain buffer (no memory for a copy) */
	uint64_t replies_owed;     /* ACK/FIN delayed for memory */
	uint64_t unexp_throttled;  /* unexpected arrivals not copied:
				    * unexpected_mem was spent */
	uint64_t unexp_spilled;    /* held messages copied out over
				    * unexpected_mem, for liveness */
	/* current state */
	uint32_t card_entries;
	uint32_t card_entries_max; /* card_entries' high-water mark */
	uint32_t ops_outstanding;
	uint32_t ops_in_queue;
	uint64_t posted;           /* receives in the shadow */
	uint64_t sw_held;          /* ... of which software-held */
	uint64_t uq_len;           /* unexpected messages */
	uint64_t sends_waiting;    /* sends not yet completed */
	uint64_t tx_queued;
	uint32_t send_slots_busy;  /* send slots not yet retired (none once
				    * idle) */
	uint64_t reads_active;
	uint64_t unexp_mem;        /* bytes the unexpected copies take */
	uint64_t unexp_held;       /* messages holding a plain buffer */
	uint32_t unexpected_cnt;   /* the count reported to the card */
	int32_t fatal;             /* 0, or the TM_ERR_* every call returns
				    * since the engine stopped */
};

struct tm_msg;

/*
 * The engine's part of a request: storage the caller provides (inside its
 * own request objects) and never touches.  Its layout is the engine's
 * (tm_proto.h, which checks that it fits at compile time).
 */
#define TM_RECV_PRIV_SIZE 384
#define TM_SEND_PRIV_SIZE 128

/*
 * The entry points take one request each: it carries the call's inputs
 * (the envelope packed once by the caller with tm_match.h: tm_tag_make
 * for a send, tm_tag_recv for a receive or probe), so no call passes more
 * than a few arguments.  The engine reads the inputs and never writes
 * them, except tm_send.peer by tm_engine_send_detach and tm_recv.mr while
 * the receive is posted (restored before its callback); a request restarted
 * with the same inputs (persistent MPI requests) need not fill them again.
 */

/* A receive's buffer, as the card and a software read write into it. */
struct tm_rbuf {
	void *buf;
	size_t len;
	struct ibv_mr *mr;         /* NULL: not registered (yet) */
};

/* ---- Receive request (caller storage) ------------------------------- */
struct tm_recv {
	/* in */
	void (*cb)(struct tm_recv *r);
	void *arg;
	/* the buffer: buf, len, and mr (NULL: the engine registers if
	 * needed, keeping its registration in mr while the receive is
	 * posted and putting NULL back before cb); b names the three at
	 * once for the engine, which keeps no copy */
	union {
		struct tm_rbuf b;
		struct {
			void *buf;
			size_t len;
			struct ibv_mr *mr;
		};
	};
	uint64_t tag, mask;      /* tm_tag_recv() */
	uint32_t from;           /* the engine peer its source names, or
				  * TM_PEER_ANY (tm_engine_irecv) */
	/* out, valid in cb */
	int status;              /* enum tm_req_status */
	struct tm_env env;       /* matched envelope */
	uint64_t msg_len;        /* full incoming length */
	uint64_t recv_len;       /* bytes delivered */
	uint32_t peer;
	uint32_t send_seq;
	uint64_t post_stamp;
	uint64_t match_stamp;
	uint64_t cancel_stamp;
	int on_card;             /* the card matched it */
	union {                  /* engine-private */
		uint64_t u64[TM_RECV_PRIV_SIZE / 8];
		void *align;
	} priv;
};

/* ---- Send request (caller storage) ---------------------------------- */
struct tm_send {
	/* in */
	void (*cb)(struct tm_send *s);
	void *arg;
	const void *buf;
	size_t len;
	struct ibv_mr *mr;       /* NULL: the engine registers if needed */
	uint64_t tag;            /* tm_tag_make() */
	uint32_t peer;           /* the engine peer it goes to */
	unsigned flags;          /* TM_SEND_SYNC */
	/* out, valid in cb */
	int status;
	uint32_t seq;            /* the send's identity on its peer */
	union {                  /* engine-private */
		uint64_t u64[TM_SEND_PRIV_SIZE / 8];
		void *align;
	} priv;
};

struct tm_probe_info {
	/* in */
	uint64_t tag, mask;      /* tm_tag_recv() */
	uint32_t from;           /* as tm_recv.from */
	/* out */
	struct tm_env env;
	uint64_t len;
	uint32_t peer;
	uint32_t send_seq;
	uint64_t stamp;
};

/* Refuses a bad config with TM_ERR_INVALID (tm_engine_config_check). */
int tm_engine_create(struct tm_dev *dev, const struct tm_engine_config *cfg,
		     struct tm_engine **out);
/* Frees everything; requests still pending never complete. */
void tm_engine_destroy(struct tm_engine *eng);

/* The peer's QPs (tm_dev.h): sends and reads go on qps->tx; messages
 * arrive on either (rx may be tx: the one-QP layout of tests). */
int tm_engine_add_peer(struct tm_engine *eng, const struct tm_dev_pair *qps,
		       uint32_t *peer);
/*
 * Connect on first use (dev/tm_dev_cm.h): a peer whose QPs are not
 * connected yet.  It receives as any other (arrivals can only follow the
 * connection), but everything sent to it (sends, replies, keepalives)
 * waits in its queue, in the order posted, and no later send overtakes
 * it; tm_engine_peer_release() starts them once the QPs are connected,
 * tm_engine_peer_fail() fails them and every request naming the peer
 * (TM_REQ_ERROR; callbacks inside the call), as a dead peer's.
 */
int tm_engine_add_peer_held(struct tm_engine *eng,
			    const struct tm_dev_pair *qps, uint32_t *peer);
void tm_engine_peer_release(struct tm_engine *eng, uint32_t peer);
void tm_engine_peer_fail(struct tm_engine *eng, uint32_t peer);

/*
 * Sends s (its inputs: buf, len, mr, tag, peer, flags).  Flags
 * TM_SEND_SYNC: complete when matched.
 * TM_DONE: s completed in this call (an eager standard send, posted with
 * nothing else for the call to do), and completed well: its status is
 * TM_REQ_OK (a send that fails is never TM_DONE), so the caller need not
 * read it; its callback does not run: the caller completes it itself,
 * with no later pass.
 * TM_OK: the callback runs once s is done; a send to a dead peer
 * completes TM_REQ_ERROR at once (callback inside this call), and a peer
 * that dies later fails it within about keepalive_ms plus the
 * transport's retry time (doc/DESIGN.md, "Dead peers").
 */
#define TM_SEND_SYNC 1u
#define TM_DONE 1
int tm_engine_post_send(struct tm_engine *eng, struct tm_send *s);

/*
 * Send cancel (doc/DESIGN.md, "Send cancel"): withdraws s if its receiver
 * has not matched it; then the receiver never delivers it.  s may still be
 * pending, or may have completed OK without a reply (an eager standard
 * send completes once posted, long before anyone matched it); its storage
 * must then be untouched since, and stays the engine's until the callback.
 * TM_OK: the outcome comes through s's callback (once more, for a
 * completed send): status TM_REQ_CANCELLED, or what it would have been
 * (TM_REQ_OK: delivered; TM_REQ_ERROR: the peer died meanwhile).
 * TM_ERR_NOT_FOUND: nothing to ask, no callback: s completed after a reply
 * (matched), failed, was cancelled, or (pending) already has a cancel out.
 */
int tm_engine_cancel_send(struct tm_engine *eng, struct tm_send *s);
/* The pending send to peer with that seq (tm_send.seq), or NULL. */
struct tm_send *tm_engine_find_send(struct tm_engine *eng, uint32_t peer,
				    uint32_t seq);
/*
 * A buffered send's handle: s (caller storage; its cb and arg are the
 * caller's and left alone) takes the identity (peer, seq) of the send
 * `from`, just started, as if it were an eager standard send that
 * completed OK at post: it owes nothing and holds no registration, and
 * tm_engine_cancel_send(s) asks the receiver to withdraw that message.
 * `from` itself stays the engine's until its own callback; while it is
 * pending, tm_engine_find_send names it, not s.
 */
void tm_engine_send_detach(struct tm_engine *eng, const struct tm_send *from,
			   struct tm_send *s);

/*
 * Posts receive r (its inputs: buf, len, mr, tag and mask from
 * tm_tag_recv, from).  r->from: the engine peer that alone can send as
 * its source (the caller knows which: the engine does not), or
 * TM_PEER_ANY.  While it waits, that peer is probed like one that owes a
 * send its reply (keepalive_ms); once the peer is dead r completes
 * TM_REQ_ERROR (at once when software-held or posted after the death,
 * after the card confirmed the DEL when card-held), unless a message the
 * peer sent before dying takes it first.  Receives naming other peers or
 * none are not affected.  TM_ERR_RANGE: a (tag, mask) tm_tag_recv does
 * not make, or a peer for an any-source receive.
 */
#define TM_PEER_ANY UINT32_MAX
int tm_engine_post_recv(struct tm_engine *eng, struct tm_recv *r);
/* Receives a message a matched probe took (r's buf, len, mr). */
int tm_engine_post_mrecv(struct tm_engine *eng, struct tm_recv *r,
			 struct tm_msg *msg);
/* Cancels if not matched; the callback says which (TM_REQ_CANCELLED). */
int tm_engine_cancel_recv(struct tm_engine *eng, struct tm_recv *r);

/*
 * Probe for info's (tag, mask): TM_OK and info's outputs, or
 * TM_ERR_NOT_FOUND.  msg NULL: a peek; else a matched probe, which
 * removes the message (receive it with tm_engine_post_mrecv).  With
 * info->from a peer (as tm_recv.from): when nothing matches and that
 * peer is dead, TM_ERR_PEER_DEAD instead of TM_ERR_NOT_FOUND; a caller
 * that keeps probing it for keepalive_ms makes the engine probe the peer.
 */
int tm_engine_probe(struct tm_engine *eng, struct tm_probe_info *info,
		    struct tm_msg **msg);

/* Processes completions and queued work, and runs the keepalive timer
 * (so a caller waiting on a send must keep calling it); returns events
 * done or < 0. */
int tm_engine_progress(struct tm_engine *eng);

void tm_engine_get_stats(struct tm_engine *eng, struct tm_engine_stats *st);

/* The receives posted and not matched, and the unexpected messages not
 * received, of context ctx (a walk of the queues: for tools). */
void tm_engine_ctx_queues(struct tm_engine *eng, uint32_t ctx,
			  uint64_t *posted, uint64_t *unexpected);

/*
 * Nothing in flight: no list op, read or queued work outstanding, and no
 * send incomplete (a send waiting for its FIN/ACK counts: its peer may
 * still read the buffer, and the keepalive needs progress to fail it), and
 * no send WR outstanding.  When only unsignalled send WRs are left, it
 * posts a signalled keepalive behind them (nothing else would ever retire
 * them) and says 0: call tm_engine_progress() and ask again.
 */
int tm_engine_idle(struct tm_engine *eng);

/*
 * The same calls with their inputs as arguments (ctx, src, tag unpacked;
 * src / tag may be TM_ANY_SRC / TM_ANY_TAG for receives and probes): each
 * fills the request and calls the entry above.  For tests and tools; a
 * hot caller packs once and fills its request itself.
 */
static inline int tm_engine_isend(struct tm_engine *eng, struct tm_send *s,
				  uint32_t peer, uint32_t ctx, int32_t src,
				  int32_t tag, const void *buf, size_t len,
				  struct ibv_mr *mr, unsigned flags)
{
	int rc;

	if (ctx > TM_MAX_CTX || src < 0 || (uint32_t)src > TM_MAX_SRC)
		return TM_ERR_RANGE;
	s->buf = buf;
	s->len = len;
	s->mr = mr;
	s->tag = tm_tag_make(ctx, (uint32_t)src, tag);
	s->peer = peer;
	s->flags = flags;
	rc = tm_engine_post_send(eng, s);
	if (rc != TM_DONE)
		return rc;
	if (s->cb)
		s->cb(s);
	return TM_OK;
}

/* Fills (tag, mask) of a receive or probe; TM_ERR_RANGE if outside the
 * tag layout. */
static inline int tm_engine_env_in(uint32_t ctx, int32_t src, int32_t tag,
				   uint64_t *rtag, uint64_t *mask)
{
	if (ctx > TM_MAX_CTX ||
	    (src != TM_ANY_SRC && (src < 0 || (uint32_t)src > TM_MAX_SRC)))
		return TM_ERR_RANGE;
	tm_tag_recv(ctx, src, tag, rtag, mask);
	return TM_OK;
}

static inline int tm_engine_irecv_from(struct tm_engine *eng,
				       struct tm_recv *r, uint32_t ctx,
				       int32_t src, int32_t tag, uint32_t peer,
				       void *buf, size_t len,
				       struct ibv_mr *mr)
{
	if (tm_engine_env_in(ctx, src, tag, &r->tag, &r->mask) != TM_OK)
		return TM_ERR_RANGE;
	r->buf = buf;
	r->len = len;
	r->mr = mr;
	r->from = peer;
	return tm_engine_post_recv(eng, r);
}

static inline int tm_engine_irecv(struct tm_engine *eng, struct tm_recv *r,
				  uint32_t ctx, int32_t src, int32_t tag,
				  void *buf, size_t len, struct ibv_mr *mr)
{
	return tm_engine_irecv_from(eng, r, ctx, src, tag, TM_PEER_ANY, buf,
				    len, mr);
}

static inline int tm_engine_imrecv(struct tm_engine *eng, struct tm_recv *r,
				   struct tm_msg *msg, void *buf, size_t len,
				   struct ibv_mr *mr)
{
	r->buf = buf;
	r->len = len;
	r->mr = mr;
	return tm_engine_post_mrecv(eng, r, msg);
}

static inline int tm_engine_improbe_from(struct tm_engine *eng, uint32_t ctx,
					 int32_t src, int32_t tag,
					 uint32_t peer, struct tm_msg **msg,
					 struct tm_probe_info *info)
{
	if (msg)
		*msg = NULL;
	if (tm_engine_env_in(ctx, src, tag, &info->tag, &info->mask) != TM_OK)
		return TM_ERR_RANGE;
	info->from = peer;
	return tm_engine_probe(eng, info, msg);
}

static inline int tm_engine_iprobe_from(struct tm_engine *eng, uint32_t ctx,
					int32_t src, int32_t tag,
					uint32_t peer,
					struct tm_probe_info *info)
{
	return tm_engine_improbe_from(eng, ctx, src, tag, peer, NULL, info);
}

static inline int tm_engine_iprobe(struct tm_engine *eng, uint32_t ctx,
				   int32_t src, int32_t tag,
				   struct tm_probe_info *info)
{
	return tm_engine_improbe_from(eng, ctx, src, tag, TM_PEER_ANY, NULL,
				      info);
}

static inline int tm_engine_improbe(struct tm_engine *eng, uint32_t ctx,
				    int32_t src, int32_t tag,
				    struct tm_msg **msg,
				    struct tm_probe_info *info)
{
	return tm_engine_improbe_from(eng, ctx, src, tag, TM_PEER_ANY, msg,
				      info);
}

#endif /* TM_ENGINE_H */
