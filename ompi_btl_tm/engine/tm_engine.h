/*
 * tm_engine.h - the matching engine: MPI point-to-point matching on a
 * TM-SRQ (hardware tag matching), with a software shadow of every posted
 * receive and the unexpected-message queue.  No Open MPI headers here.
 *
 * Contract
 * --------
 * One engine per tm_dev (tm_dev.h).  Peers are RC QPs created and connected
 * with tm_dev; tm_engine_add_peer() gives each a peer id.  The engine is
 * single-threaded: the caller serialises calls.
 *
 * Matching semantics: the pairs produced are exactly those of a plain
 * software MPI matcher fed the same receives (in post order) and arrivals
 * (in the order the card decided them, which keeps each sender's order).
 * Every request and arrival gets a stamp from one engine clock at the moment
 * it takes effect (its linearisation point); tests replay a reference
 * matcher in stamp order:
 *   - a receive is posted at tm_engine_irecv() (r->post_stamp);
 *   - an arrival takes effect when its first completion is processed
 *     (arrival_hook; r->match_stamp of the receive it matched);
 *   - a cancel takes effect when the card confirmed the removal
 *     (r->cancel_stamp), immediately for a software-held receive;
 *   - probes and claims at the call (tm_probe_info.stamp).
 * Every entry point first processes all completions already in the CQ, so
 * no arrival the card decided before the call is seen after it.
 *
 * Tag layout: see tm_match.h (ctx 14 bits | src 18 bits | tag 32 bits;
 * ANY_TAG excludes negative tags).
 *
 * Wire (TMH/RVH of <infiniband/tm_types.h>):
 *   EAGER  TMH | payload                 (payload <= eager_limit)
 *   RNDV   TMH | RVH | struct tm_rndv_md  (40 bytes, <= max_rndv_hdr_size)
 *   FIN    TMH copy (opcode FIN) | RVH    (card or software, to the sender)
 *   ACK    TMH(NO_TAG)                    (synchronous send matched)
 *   KEEPALIVE TMH(NO_TAG), tag 0, seq 0   (signalled; the receiver ignores
 *          it: it exists so that the RC transport acknowledges something,
 *          and fails it if the peer is gone)
 * app_ctx (32 bits, TMH):
 *   bit 31  TM_APP_SYNC   eager synchronous send: ACK on match
 *   bit 30  TM_APP_RNDV   the message is a rendezvous request
 *   29..24  control type in NO_TAG messages (TM_CTRL_*), 0 in tagged ones
 *   23..0   the sender's per-peer send sequence: the send's identity, which
 *           ACK/FIN (and a later send-cancel request/reply) name.
 * Control types: 1 ACK, 2/3 reserved (send cancel), 4 KEEPALIVE.
 *
 * Dead peers: a send waiting for its FIN (rendezvous) or ACK (synchronous
 * eager) has no WR left on the QP, so a receiver that dies after the
 * request arrived would never make anything fail.  When a send has waited
 * keepalive_ms for its reply, the engine posts a KEEPALIVE on that peer's
 * QP (again every keepalive_ms while sends wait; checked in
 * tm_engine_progress).  A dead peer fails it (a real RC QP after its retry
 * count; the soft HCA checks the peer before starting a WR:
 * IBV_WC_RETRY_EXC_ERR).  Any error completion of a WR on a peer's QP, or
 * a transport error on a receive from it (not LOC_LEN_ERR, RNDV_INCOMPLETE
 * or a refused rendezvous read, which concern one message), marks the peer
 * dead: every send to it waiting for a reply or still queued, every queued
 * software rendezvous read from it, completes with TM_REQ_ERROR (posted
 * WRs complete flushed and fail their requests the same way); later sends
 * to it complete with TM_REQ_ERROR at once; no ACK/FIN/read goes to it
 * again.  Other peers are not affected.  Messages it sent that already
 * arrived whole stay receivable; an unexpected rendezvous from it fails
 * when a receive takes it.
 *
 * Hardware-prefix policy: a receive goes to the card only if (a) no
 * software-held posted receive could accept a message it accepts (the
 * prefix rule, O(1) through tm_mq counters), (b) the card list has room,
 * (c) an op slot is free and no list op is queued, (d) its buffer holds at
 * least TMH+RVH (so a truncated rendezvous can be finished in software),
 * (e) it is registered (caller MR or engine registration).  Each refusal is
 * counted in tm_engine_stats.  Wildcards (ANY_SOURCE, ANY_TAG) go to the
 * card as masks.
 *
 * Promotion: a software-held receive goes to the card later, when what
 * kept it off goes away (a card slot frees, ops drain, an earlier
 * software-held receive of its context matches, is cancelled or is
 * promoted itself).  Each context keeps its software-held receives in a
 * FIFO in post order, and only the head of a FIFO is promoted: it is the
 * earliest software-held receive of its context, and receives of other
 * contexts accept none of its messages, so the prefix rule holds for it
 * with no check at all.  Promotion runs while (b) and (c) hold, from every
 * engine call (amortised O(1): each receive is promoted at most once), and
 * before a new receive is placed, so older receives come first.  A
 * receive that can never go to the card ((d), (e), offload off, or its
 * ADD failed) stays at the head of its FIFO and holds back the later ones
 * of its context until it matches or is cancelled (conservative: a later
 * receive that it could not conflict with might have gone).  A promoted
 * receive's ADD carries the unexpected count like any other (below), so
 * the claim race is handled the same way; its post stamp stays its post.
 * Counted in tm_engine_stats.promoted (not in recv_to_card, which counts
 * receives placed on the card when posted).
 *
 * Send completion: an eager standard send completes as soon as its data
 * is copied into a registered send slot and posted (a buffered copy); a
 * synchronous one when its ACK arrives, a rendezvous one when its FIN
 * arrives (and its request's WR completed).  Send WRs are signalled only
 * when something must happen at their completion, or every few WRs of a
 * QP (and when slots or the send queue run low), to recycle the slots of
 * the unsignalled ones (see sq_post in tm_engine.c).  So an eager send
 * posted before its peer's death was known completes TM_REQ_OK.
 *
 * Sync protocol: the engine counts unexpected tagged completions it has
 * processed (uq_count); every list op (ADD/DEL/SYNC, all with
 * IBV_OPS_TM_SYNC) carries that count as of the moment the op was decided,
 * and list ops are posted in the order decided (a FIFO when max_ops is
 * reached; an ADD is only posted when that FIFO is empty).  So an op with
 * count c reaches the card only after the DELs for every receive that one
 * of the first c unexpected messages claimed.
 *
 * When an explicit SYNC is posted, and why that is enough.  Facts (card
 * model, DESIGN.md 3): an entry is inactive only if its ADD was processed
 * while the card's counter H differed from the count the ADD carried; an
 * active entry stays active; any op processed with count == H activates
 * every entry then on the list.  (1) Matching never depends on a SYNC:
 * once an entry E is inactive, every later ADD is too until some op is in
 * sync, which activates E as well, so the inactive entries are always a
 * suffix of the list in post order and the card can never let a later
 * receive overtake an inactive earlier one; a message that an inactive
 * entry would have taken goes unexpected, software finds the receive in
 * its shadow and claims it (DEL) - the claim race.  So SYNCs are for
 * speed only (an inactive entry costs a claim per message for it), and
 * the rule below needs only to keep an inactive entry from staying so
 * for long.  (2) The engine knows which ops were in sync: the card's CQ
 * gives completions in the order the card decided (ops and arrivals
 * alike), so when a signalled op's completion is polled, uq_count equals
 * H at the moment the card processed it; the op was in sync iff uq_count
 * equals the count it carried (eng->op_unsig remembers it), and then every
 * entry added before it is active for good (eng->sync_seq).  No SYNC_REQ
 * flag is used (a real mlx5 card does not set it on unexpected receive
 * completions).  (3) A live entry added after sync_seq (eng->unconf, in
 * post order) may be inactive; one added before may not.  (4) If the
 * count has not moved since the last op was decided (reported ==
 * uq_count), that op carried the current count: either the card processes
 * it in sync and activates everything, or the card had decided an
 * unexpected message software has not polled yet, and polling it moves
 * the count and re-runs the rule.  Rule (maybe_sync, after promotions,
 * whose ADDs carry the current count): post a SYNC iff the count moved
 * since the last op decided AND eng->unconf is not empty AND no SYNC is
 * outstanding (its completion confirms or re-runs the rule: one SYNC in
 * flight at a time).  Also post one when the card's view lags
 * TM_SYNC_LAG_MAX (8192) unexpected messages behind, card entries or not,
 * so a real card never gets 0x3fff behind.  So a run of unexpected
 * messages past a list whose entries are all confirmed (e.g. a full list
 * of receives that never match, with the matching receive held in
 * software) posts no SYNC at all, instead of one per message.  Faults:
 * SYNC_AHEAD never confirms anything (the count is off by one), so every
 * moved count still syncs; SYNC_ORDER confirms with the count actually
 * posted.
 *
 * Completion: a request's callback runs from inside an engine call (never
 * from inside CQ polling), once, after the engine is done with it; the
 * request may then be reused or freed.
 */
#ifndef TM_ENGINE_H
#define TM_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <ucs/datastruct/list.h>
#include "dev/tm_dev.h"
#include "dev/tm_status.h"
#include "engine/tm_match.h"

#define TM_APP_SYNC (1u << 31)
#define TM_APP_RNDV (1u << 30)
#define TM_APP_CTRL_SHIFT 24
#define TM_APP_CTRL_MASK (0x3fu << TM_APP_CTRL_SHIFT)
#define TM_APP_SEQ_MASK 0xffffffu

enum tm_ctrl {
	TM_CTRL_ACK = 1,        /* synchronous send matched */
	/* reserved: TM_CTRL_CANCEL_REQ = 2, TM_CTRL_CANCEL_REP = 3 */
	TM_CTRL_KEEPALIVE = 4,  /* probes the peer; ignored on arrival */
};

/* Rendezvous metadata after the RVH. */
struct tm_rndv_md {
	uint64_t len;     /* full message length (big endian) */
};

enum tm_req_status {
	TM_REQ_OK = 0,
	TM_REQ_TRUNCATED,  /* msg_len > buffer: exactly the buffer delivered */
	TM_REQ_CANCELLED,
	TM_REQ_ERROR,
};

/* Faults for tests that prove the tests catch them (never set otherwise). */
enum tm_fault {
	TM_FAULT_PREFIX = 1 << 0,     /* ignore the prefix rule (at post;
				       * promotion takes the latest first) */
	TM_FAULT_SYNC_AHEAD = 1 << 1, /* report one more unexpected than seen */
	TM_FAULT_SYNC_ORDER = 1 << 2, /* queued ops carry the count at post */
};

struct tm_engine;

struct tm_env {
	uint32_t ctx;
	int32_t src;
	int32_t tag;
};

/* What arrival_hook reports: one message taking effect at the receiver. */
struct tm_arrival {
	struct tm_env env;
	uint32_t peer;
	uint32_t send_seq;
	uint64_t len;
	uint64_t stamp;
	int on_card;   /* matched by the card */
};

struct tm_engine_config {
	size_t eager_limit;      /* payload bytes sent eagerly */
	uint32_t n_plain;        /* plain SRQ buffers (< 32768) */
	uint32_t n_send_slots;   /* registered send buffers */
	uint32_t max_card_entries; /* 0: the device's list size */
	int offload;             /* 0: keep every receive in software */
	unsigned faults;         /* enum tm_fault, tests only */
	/* a send waiting this long for FIN/ACK probes its peer (0: 1000) */
	uint32_t keepalive_ms;
	void (*arrival_hook)(void *arg, const struct tm_arrival *a);
	void *hook_arg;
};

struct tm_engine_stats {
	uint64_t recv_posted;
	uint64_t recv_to_card;
	uint64_t sw_matched_uq;    /* receive matched the unexpected queue */
	uint64_t sw_conflict;      /* prefix rule kept it in software */
	uint64_t sw_list_full;
	uint64_t sw_ops_full;      /* max_ops reached or ops queued */
	uint64_t sw_small_buf;
	uint64_t sw_no_offload;
	uint64_t sw_reg_fail;
	uint64_t promoted;         /* software-held receives moved to the card */
	uint64_t card_matched;     /* arrivals matched by the card */
	uint64_t unexpected;       /* unexpected tagged arrivals */
	uint64_t unexp_to_sw_recv; /* ... matched a software-held receive */
	uint64_t unexp_claimed;    /* ... took a receive back from the card */
	uint64_t claim_del_failed; /* ... whose DEL failed (must stay 0) */
	uint64_t cancel_ok;
	uint64_t cancel_late;      /* DEL failed: receive completes normally */
	uint64_t ops_posted;
	uint64_t ops_queued;
	uint64_t syncs;
	uint64_t sync_req_seen;
	uint64_t truncated;
	uint64_t rndv_card;
	uint64_t rndv_sw;
	uint64_t acks_sent;
	uint64_t fins_sent;
	uint64_t fins_recv;
	uint64_t fin_unknown;      /* FIN/ACK naming no outstanding send */
	uint64_t malformed;
	uint64_t errors;
	uint64_t keepalives_sent;
	uint64_t keepalives_recv;  /* ... from peers, ignored */
	uint64_t peer_failures;    /* peers marked dead */
	uint64_t sends_failed;     /* sends completed TM_REQ_ERROR */
	/* current state */
	uint32_t card_entries;
	uint32_t ops_outstanding;
	uint32_t ops_in_queue;
	uint64_t posted;           /* receives in the shadow */
	uint64_t sw_held;          /* ... of which software-held */
	uint64_t uq_len;           /* unexpected messages */
	uint64_t sends_waiting;    /* sends not yet completed */
	uint64_t tx_queued;
	uint64_t reads_active;
	uint32_t unexpected_cnt;   /* the count reported to the card */
};

struct tm_msg;
struct tm_engine_priv_tx;

/* ---- Receive request (caller storage) ------------------------------- */
struct tm_recv {
	/* in */
	void (*cb)(struct tm_recv *r);
	void *arg;
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
	/* private */
	struct tm_mq_recv mq;
	ucs_list_link_t done_link;
	ucs_list_link_t sw_link; /* its context's software-held FIFO */
	ucs_list_link_t card_link; /* the engine's unconfirmed entries */
	uint64_t add_seq;        /* its ADD's place in list-op post order */
	void *buf;
	size_t len;
	struct ibv_mr *mr;
	int own_mr;
	int state;
	uint32_t handle;
	uint32_t ops_pending;
	uint32_t flags;
	struct tm_msg *claim;
	uint64_t rd_va;
	uint32_t rd_rkey;
	uint32_t rd_len;
	uint8_t hdr[32] __attribute__((aligned(8))); /* TMH+RVH, sw rndv */
};

/* ---- Send request (caller storage) ---------------------------------- */
struct tm_send {
	void (*cb)(struct tm_send *s);
	void *arg;
	int status;
	uint32_t seq;            /* out: the send's identity on its peer */
	/* private */
	ucs_list_link_t wait_link; /* peer's sends waiting for FIN/ACK */
	ucs_list_link_t done_link;
	uint64_t wait_ns;        /* when it started waiting */
	int kind;
	uint32_t peer;
	uint64_t tag;
	uint32_t app_ctx;
	const void *buf;
	size_t len;
	struct ibv_mr *mr;
	int own_mr;
	uint32_t waiting;
};

struct tm_probe_info {
	struct tm_env env;
	uint64_t len;
	uint32_t peer;
	uint32_t send_seq;
	uint64_t stamp;
};

void tm_engine_config_default(struct tm_engine_config *cfg);
int tm_engine_create(struct tm_dev *dev, const struct tm_engine_config *cfg,
		     struct tm_engine **out);
/* Frees everything; requests still pending never complete. */
void tm_engine_destroy(struct tm_engine *eng);

int tm_engine_add_peer(struct tm_engine *eng, struct ibv_qp *qp,
		       uint32_t *peer);

/*
 * Sends: flags TM_SEND_SYNC (complete when matched). mr may be NULL.
 * A send to a dead peer completes TM_REQ_ERROR at once (callback inside
 * this call); a peer that dies later fails it within about keepalive_ms
 * plus the transport's retry time (see "Dead peers").
 */
#define TM_SEND_SYNC 1u
int tm_engine_isend(struct tm_engine *eng, struct tm_send *s, uint32_t peer,
		    uint32_t ctx, int32_t src, int32_t tag, const void *buf,
		    size_t len, struct ibv_mr *mr, unsigned flags);

/* Receives: src/tag may be TM_ANY_SRC / TM_ANY_TAG.  mr may be NULL. */
int tm_engine_irecv(struct tm_engine *eng, struct tm_recv *r, uint32_t ctx,
		    int32_t src, int32_t tag, void *buf, size_t len,
		    struct ibv_mr *mr);
/* Cancels if not matched; the callback says which (TM_REQ_CANCELLED). */
int tm_engine_cancel_recv(struct tm_engine *eng, struct tm_recv *r);

/* Peek: TM_OK and info, or TM_ERR_NOT_FOUND. */
int tm_engine_iprobe(struct tm_engine *eng, uint32_t ctx, int32_t src,
		     int32_t tag, struct tm_probe_info *info);
/* Matched probe: removes the message; receive it with tm_engine_imrecv. */
int tm_engine_improbe(struct tm_engine *eng, uint32_t ctx, int32_t src,
		      int32_t tag, struct tm_msg **msg,
		      struct tm_probe_info *info);
int tm_engine_imrecv(struct tm_engine *eng, struct tm_recv *r,
		     struct tm_msg *msg, void *buf, size_t len,
		     struct ibv_mr *mr);

/* Processes completions and queued work, and runs the keepalive timer
 * (so a caller waiting on a send must keep calling it); returns events
 * done or < 0. */
int tm_engine_progress(struct tm_engine *eng);

void tm_engine_get_stats(struct tm_engine *eng, struct tm_engine_stats *st);

/*
 * Nothing in flight: no list op, read or queued work outstanding, and no
 * send incomplete (a send waiting for its FIN/ACK counts: its peer may
 * still read the buffer, and the keepalive needs progress to fail it), and
 * no send WR outstanding.  When only unsignalled send WRs are left, it
 * posts a signalled keepalive behind them (nothing else would ever retire
 * them) and says 0: call tm_engine_progress() and ask again.
 */
int tm_engine_idle(struct tm_engine *eng);

#endif /* TM_ENGINE_H */
