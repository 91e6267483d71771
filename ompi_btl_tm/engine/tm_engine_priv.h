/*
 * tm_engine_priv.h - the engine's shared state, for its modules only.
 *
 * Modules (each file's top comment gives its contract):
 *   tm_engine.c   lifecycle, completion polling and dispatch, progress
 *   tm_ops.c      card list ops (ADD/DEL/SYNC), their order and count,
 *                 the sync rule, op-slot accounting
 *   tm_offload.c  which receives go to the card: refusals, promotion
 *   tm_recv.c     the receive state machine, matched-probe receives
 *                 (imrecv)
 *   tm_reply.c    a receive's ACK and FIN (owed when short of memory),
 *                 software rendezvous reads
 *   tm_probe.c    probes and matched probes
 *   tm_cancel.c   send cancel (CANCEL_REQ / CANCEL_REP)
 *   tm_send.c     sends, replies (FIN/ACK), keepalive, peer failure
 *   tm_tx.c       the send queues: slots, selective signalling, retiring
 * Fields of struct tm_engine are grouped by the module that changes them;
 * other modules call that module's tme_* functions, and only read its
 * fields in the small inline helpers below and in cheap guards.  Shared
 * by all: cfg, test, mq (the matcher), clock, st (statistics), the done
 * lists (tme_fire_done), and reads_active (tm_recv.c starts a read, the
 * tx that carries it ends it).
 *
 * Receive states:
 *   R_SW        posted, held in software only (counted for the prefix rule)
 *   R_CARD      posted, ADD posted (maybe not yet processed by the card)
 *   R_CLAIM     an unexpected message took it; waiting for our DEL to
 *               confirm the card no longer holds it
 *   R_WAIT_DATA the card matched it; waiting for its data completion
 *   R_SW_READ   software rendezvous read in flight
 *   R_DONE      finished; completes once no list op naming it is pending
 * Only R_SW and R_CARD receives are in the shadow queues (tm_mq); every
 * R_SW receive is also in its context's FIFO (struct tm_swq) until it
 * matches, is cancelled or is promoted to R_CARD.
 */
#ifndef TM_ENGINE_PRIV_H
#define TM_ENGINE_PRIV_H

#include <infiniband/tm_types.h>
#include <ucs/datastruct/khash.h>
#include "engine/tm_engine.h"
#include "engine/tm_engine_test.h"
#include "engine/tm_wire.h"

enum { R_IDLE, R_SW, R_CARD, R_CLAIM, R_WAIT_DATA, R_SW_READ, R_DONE };

enum {
	RF_CANCEL_REQ = 1 << 0,
	RF_DEL_POSTED = 1 << 1,
	RF_MATCH_SEEN = 1 << 2,
	RF_ENTRY_LIVE = 1 << 3, /* counts against the card's list */
	RF_FINISHED = 1 << 4,
	RF_RNDV = 1 << 5,
	RF_SWQ = 1 << 6,    /* in its context's software-held FIFO */
	RF_PINNED = 1 << 7, /* can never go to the card */
	RF_ADD_UNSIG = 1 << 8, /* its ADD went unsignalled */
	RF_UNCONF = 1 << 9, /* live entry on eng->unconf (may be inactive) */
	RF_OWE_ACK = 1 << 10, /* on eng->owed: its ACK waits for memory */
	RF_OWE_FIN = 1 << 11, /* on eng->owed: its FIN waits for memory */
	RF_SW_RNDV = 1 << 12, /* the card handed its rendezvous to software:
			       * TMH+RVH are in the buffer */
	RF_WATCHED = 1 << 13, /* on its named peer's recvq */
	RF_PEER_DEAD = 1 << 14, /* its DEL is because its peer died */
};

/* wr_id low bits: what a TM-CQ completion is about. */
enum { WR_RECV = 0, WR_PLAIN = 1, WR_ADD = 2, WR_DEL = 3, WR_SYNC = 4 };
#define WR_TYPE_MASK 7ULL
/* signal at least every TM_ADD_SIG_EVERY-th ADD (see op_post) */
#define TM_ADD_SIG_EVERY 16
/* report the count at least every TM_SYNC_LAG_MAX unexpected arrivals (a
 * real card flags SYNC_REQ when software is more than 0x3fff behind) */
#define TM_SYNC_LAG_MAX 0x2000u

#define CQE_BATCH 32
#define TM_QPN_CACHE 64 /* a power of two */
/* signal at least every TM_SIG_EVERY-th send WR of a QP */
#define TM_SIG_EVERY 16

/* in the order of TM_SITE_ALLOC_TX_* (tm_engine_test.h) */
enum { TX_EAGER, TX_RNDV, TX_ACK, TX_FIN, TX_READ, TX_KEEPALIVE };
enum { S_WAIT_CQE = 1, S_WAIT_REPLY = 2 };
/* tm_send.cflags */
enum {
	S_REPLIED = 1,       /* its FIN/ACK came: the receiver matched it */
	S_CANCEL_ASKED = 2,  /* a CANCEL_REQ is queued or out */
	S_CANCEL_REARMED = 4, /* completed, then waiting again for a REP */
};
/* CANCEL_REPs a receiver could not allocate yet (tm_cancel.c) */
#define TM_CANCEL_OWED_MAX 64

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
			    * in eng->msg_pool) */
	uint8_t *data;     /* eager payload: after the struct, or in the
			    * plain buffer */
	uint8_t hdr[32] __attribute__((aligned(8))); /* TMH+RVH of a RNDV */
};

enum { TM_MSG_MALLOC = -1, TM_MSG_RECYCLED = -2 };
/* unexpected copies of at most this payload come from eng->msg_free */
#define TM_MSG_SMALL 256
/* ... which keeps at most this many */
#define TM_MSG_KEEP 256

struct tm_tx {
	ucs_list_link_t link;  /* peer txq while queued */
	ucs_list_link_t all;
	int type;
	int slot;
	uint32_t peer;
	int queued;            /* on its peer's txq */
	struct tm_send *send;
	struct tm_recv *recv;
	/* TX_READ: posted in pieces of at most max_read bytes */
	uint64_t rd_next;      /* offset of the next piece to post */
	uint64_t rd_end;       /* bytes to read */
	uint32_t rd_out;       /* pieces posted and not yet retired */
	int rd_status;         /* first failed piece's status, or SUCCESS */
	int rd_stop;           /* post no more pieces (error, dead peer) */
	uint32_t hdr_len;
	uint8_t hdr[32] __attribute__((aligned(8))); /* read as ibv_tmh */
};

/* One outstanding signalled list op, in post order (see on_op_cqe). */
struct tm_sig_op {
	uint64_t seq;        /* its place in post order (eng->op_seq) */
	uint32_t unsig;      /* unsignalled ops posted just before it */
	uint32_t count;      /* the unexpected count it carried */
};

/*
 * One posted send-queue WR, in post order.  Eager sends, ACKs and FINs are
 * posted unsignalled (see "Selective signalling"): their slots come back
 * when a later signalled WR of the same QP completes, since an RC QP
 * completes its WRs in order.
 */
struct tm_wr {
	int32_t slot;        /* send slot to free, or -1 */
	int sig;             /* signalled: a completion will name it */
	struct tm_tx *tx;    /* what to do at its completion, or NULL */
};

struct tm_peer {
	struct ibv_qp *qp;
	uint32_t id;
	uint32_t max_inline; /* longest IBV_SEND_INLINE send (TMH included) */
	uint32_t next_seq;
	uint32_t sq_out;     /* posted and not yet retired: wr_head - wr_tail */
	struct tm_wr *wrs;   /* [wr_mask + 1], indexed by post count */
	uint32_t wr_mask;
	uint32_t wr_head;    /* WRs posted */
	uint32_t wr_tail;    /* WRs retired */
	uint32_t unsig;      /* unsignalled WRs since the last signalled one */
	uint32_t unsig_slots; /* ... of which hold a send slot */
	uint32_t sig_out;    /* signalled WRs not yet completed */
	ucs_list_link_t txq;
	ucs_list_link_t waitq;     /* sends waiting for FIN/ACK, oldest first */
	ucs_list_link_t wait_link; /* in eng->wait_peers while waitq is not empty */
	uint64_t ka_last_ns;       /* when the last keepalive was queued */
	int ka_out;                /* a keepalive is queued or posted */
	int dead;                  /* its QP failed: nothing goes to it again */
	ucs_list_link_t recvq;     /* posted receives naming it, oldest first */
	ucs_list_link_t rwait_link; /* in eng->rwait_peers while recvq is not
				     * empty */
	uint64_t probe_since_ns;   /* probes naming it have found nothing */
	uint64_t probe_last_ns;    /* ... since then, the last one */
};

/* The software-held receives of one context, in post order. */
struct tm_swq {
	ucs_list_link_t fifo;       /* tm_recv.sw_link */
	ucs_list_link_t ready_link; /* in eng->promo_ready */
	int ready;                  /* the head can go once the card has room */
};

KHASH_MAP_INIT_INT(tm_qpn, uint32_t)
KHASH_MAP_INIT_INT(tm_swq, struct tm_swq *)
KHASH_MAP_INIT_INT64(tm_sends, struct tm_send *)

struct tm_cqe {
	uint64_t wr_id;
	int status;
	int opcode;
	uint32_t flags;
	uint32_t byte_len;
	uint32_t qp_num;
	struct ibv_wc_tm_info tm;
};

struct tm_engine {
	struct tm_dev *dev;
	struct tm_engine_config cfg;
	struct tm_engine_test test; /* cfg.test copied, or all zero */
	struct tm_mq mq;
	uint64_t clock;

	/* tm_ops.c (uq_count: tm_recv.c, at each unexpected arrival) */
	uint32_t uq_count;   /* unexpected tagged completions processed */
	uint32_t reported;   /* count carried by the last op decided */
	int sync_req;
	int sync_out;        /* an explicit SYNC is queued or posted */
	uint64_t op_seq;     /* list ops posted */
	uint64_t sync_seq;   /* latest op known processed in sync (0: none) */
	ucs_list_link_t unconf; /* live entries added after sync_seq, in
				 * post order: only these may be inactive */
	uint32_t max_entries;
	uint32_t max_ops;
	int no_card;         /* the device has no tag matching (dev->tm 0):
			      * no list, no list op, no count to report */
	uint64_t max_read;   /* longest read the device does at once */
	uint32_t card_entries;
	uint32_t ops_out;    /* list ops the card still counts as outstanding */
	uint32_t ops_sig_out; /* ... of which signalled (a completion comes) */
	uint32_t ops_unsig;  /* unsignalled ADDs since the last signalled op */
	struct tm_sig_op *op_unsig; /* [max_ops]: each outstanding signalled
				     * op, in post order */
	uint32_t op_unsig_head, op_unsig_tail;
	ucs_list_link_t opq;  /* struct tm_op: a receive's DEL or sync_op */
	uint32_t opq_len;
	struct tm_op sync_op; /* the one explicit SYNC (sync_out) */

	/* tm_engine.c: plain SRQ buffers */
	uint8_t *plain;
	struct ibv_mr *plain_mr;
	uint32_t plain_size;
	uint32_t n_plain;
	struct tm_msg *msg_pool; /* [n_plain]: unexpected messages that
				  * could not be copied keep their buffer */
	int fatal;           /* 0, or the TM_ERR_* that stopped the engine */
	/* TM_PEND_*: which kinds of deferred work may exist (see tme_pend) */
	uint32_t pending;

	/* tm_offload.c: staging buffers, so that a receive smaller than the
	 * largest eager message can go to the card (doc/mlx5-rules.md 17) */
	uint8_t *stage;
	struct ibv_mr *stage_mr;
	uint32_t stage_size;
	uint32_t n_stage;
	uint32_t *free_stage;
	uint32_t n_free_stage;

	/* tm_tx.c */
	uint8_t *slots;
	struct ibv_mr *slots_mr;
	uint32_t slot_size;
	uint32_t n_slots;
	uint32_t *free_slots;
	uint32_t n_free_slots;
	uint32_t sq_limit;
	uint32_t sig_every;  /* signal at least every sig_every-th slot WR */
	uint32_t sig_max;    /* ... and every sig_max-th WR of a QP */
	uint32_t slot_low;   /* fewer free slots than this: signal every WR */
	uint32_t sig_out;    /* signalled send WRs outstanding (all peers) */
	uint32_t sq_out;     /* send WRs not retired (all peers) */
	uint32_t poll_skip;  /* drains since the send CQ was last polled */

	/* peers: tm_engine.c adds them; their queues are tm_tx.c's, their
	 * waits and liveness tm_send.c's */
	struct tm_peer **peers;
	uint32_t npeers;
	khash_t(tm_qpn) *qpn;
	/* direct-mapped in front of qpn: a completion's peer without hashing
	 * (peer UINT32_MAX: the slot is empty) */
	struct { uint32_t qpn, peer; } qpn_cache[TM_QPN_CACHE];
	khash_t(tm_sends) *sends;   /* tm_send.c */
	/* tm_offload.c */
	khash_t(tm_swq) *swq;       /* context id -> its software-held FIFO */
	ucs_list_link_t promo_ready; /* FIFOs whose head may be promoted */
	/* promotion stopped for want of a card entry, op slot or staging
	 * buffer: not retried (nor TM_PEND_WORK kept) until one frees */
	uint8_t promo_stuck;

	ucs_list_link_t done_recv;
	ucs_list_link_t done_send;
	ucs_list_link_t all_msgs;   /* tm_recv.c */
	ucs_list_link_t msg_free;   /* tm_recv.c: TM_MSG_RECYCLED copies */
	uint32_t n_msg_free;
	ucs_list_link_t owed;       /* tm_recv.c: receives whose ACK/FIN
				     * could not be allocated yet */
	ucs_list_link_t all_tx;     /* tm_tx.c */
	uint64_t tx_queued;         /* tm_tx.c */
	uint64_t reads_active;
	/* tm_send.c (and the eager fast path of tm_tx.c, which counts the
	 * send it completes) */
	uint64_t sends_waiting;
	ucs_list_link_t wait_peers; /* peers with sends waiting for FIN/ACK */
	ucs_list_link_t rwait_peers; /* peers with receives naming them
				      * (tm_recv.c adds, tm_send.c probes) */
	uint64_t ka_ns;             /* cfg.keepalive_ms */
	uint64_t ka_next_ns;        /* next look at wait_peers */
	/* tm_cancel.c: CANCEL_REPs owed, peer << 32 | TM_CANCEL_* << 24 |
	 * seq, oldest first */
	uint64_t cancel_owed[TM_CANCEL_OWED_MAX];
	uint32_t cancel_owed_head, cancel_owed_tail;
	struct tm_engine_stats st;
};


/* ---- small helpers shared by the modules (hot: kept inline) ---------- */

/*
 * The summary of deferred work, so that an entry point with nothing
 * deferred pays one load instead of a dozen list and counter tests.  A bit
 * may be set with nothing behind it (its handler looks, finds nothing and
 * clears it); it must never be clear while its work exists, so every site
 * that queues such work calls tme_pend.  Cleared only by the code that
 * looks at the real state: tme_flush_work_slow (WORK), tme_keepalive_scan
 * (WAIT), tme_fire_done (DONE).
 */
enum {
	TM_PEND_WORK = 1 << 0, /* opq, promo_ready, an unreported count, owed
				* replies, owed CANCEL_REPs, queued tx */
	TM_PEND_WAIT = 1 << 1, /* wait_peers or rwait_peers (keepalive) */
	TM_PEND_DONE = 1 << 2, /* done_recv or done_send */
};

static inline void tme_pend(struct tm_engine *eng, uint32_t what)
{
	eng->pending |= what;
}

static inline uint32_t tme_count_now(const struct tm_engine *eng)
{
	return eng->uq_count + !!(eng->test.faults & TM_FAULT_SYNC_AHEAD);
}

static inline uint32_t tme_peer_of_qpn(struct tm_engine *eng, uint32_t qpn)
{
	uint32_t i = qpn & (TM_QPN_CACHE - 1);
	khiter_t it;

	if (eng->qpn_cache[i].qpn == qpn && eng->qpn_cache[i].peer != UINT32_MAX)
		return eng->qpn_cache[i].peer;
	it = kh_get(tm_qpn, eng->qpn, qpn);
	if (it == kh_end(eng->qpn))
		return UINT32_MAX;
	eng->qpn_cache[i].qpn = qpn;
	eng->qpn_cache[i].peer = kh_value(eng->qpn, it);
	return eng->qpn_cache[i].peer;
}

static inline void tme_env_from_tag(struct tm_env *env, uint64_t tag)
{
	env->ctx = tm_tag_ctx(tag);
	env->src = (int32_t)tm_tag_src(tag);
	env->tag = tm_tag_user(tag);
}

/* Resources for one more ADD: refusals (3) and (4) of tm_offload.c. */
static inline int tme_card_has_room(struct tm_engine *eng)
{
	return eng->card_entries < eng->max_entries &&
	       ucs_list_is_empty(&eng->opq) && eng->ops_out < eng->max_ops;
}

/*
 * Does a completion say that the QP it came on failed?  Not for one
 * message's trouble: truncation, a rendezvous too big for the buffer, a
 * read the sender's rkey refused (the soft HCA keeps the QP usable then; a
 * real card moves it to error, and the flushes that follow say so).
 */
static inline int tme_qp_failed(int status)
{
	switch (status) {
	case IBV_WC_SUCCESS:
	case IBV_WC_LOC_LEN_ERR:
	case IBV_WC_TM_RNDV_INCOMPLETE:
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_TM_ERR:
		return 0;
	default:
		return 1;
	}
}

/* s has nothing left to wait for: done (callback queued for fire_done). */
static inline void tme_send_try_done(struct tm_engine *eng, struct tm_send *s)
{
	if (s->waiting)
		return;
	if (s->own_mr) {
		tm_dev_mem_put(eng->dev, s->mr);
		s->own_mr = 0;
		s->mr = NULL;
	}
	if (s->status == TM_REQ_ERROR)
		eng->st.sends_failed++;
	eng->sends_waiting--;
	ucs_list_add_tail(&eng->done_send, &s->done_link);
	tme_pend(eng, TM_PEND_DONE);
}

/*
 * The send CQ is worth a look while a signalled WR is outstanding; with
 * only unsignalled ones out, nothing comes but an error, which can wait
 * TM_POLL_SKIP calls (a waiting send is covered by the keepalive anyway,
 * and an eager one completed at post).  (At every 16th drain it was a
 * send-CQ poll per 5 small messages, 33 instructions a message.)
 */
#define TM_POLL_SKIP 256
static inline int tme_want_poll_send(struct tm_engine *eng)
{
	return eng->sig_out ||
	       (eng->sq_out && ++eng->poll_skip >= TM_POLL_SKIP);
}

/*
 * The engine cannot go on (a list op or plain buffer the card refused for
 * good): every entry point returns rc from now on.  Loud, not silent: the
 * caller sees the error at its next call.
 */
static inline void tme_engine_fatal(struct tm_engine *eng, int rc)
{
	if (!eng->fatal)
		eng->fatal = rc;
}

/* The test fault hook: 0, or the errno the call at site fails with. */
static inline int tme_fault(struct tm_engine *eng, enum tm_site site)
{
	return eng->test.fault ? eng->test.fault(eng->test.hook_arg, site) : 0;
}

/* Runs callbacks; a callback may call back into the engine. */
static inline void tme_fire_done(struct tm_engine *eng)
{
	struct tm_recv *r;
	struct tm_send *s;

	if (!(eng->pending & TM_PEND_DONE))
		return;
	for (;;) {
		if (!ucs_list_is_empty(&eng->done_recv)) {
			r = ucs_list_extract_head(&eng->done_recv,
						  struct tm_recv, done_link);
			if (r->cb)
				r->cb(r);
		} else if (!ucs_list_is_empty(&eng->done_send)) {
			s = ucs_list_extract_head(&eng->done_send,
						  struct tm_send, done_link);
			if (s->cb)
				s->cb(s);
		} else {
			/* both empty now, also after nested calls */
			eng->pending &= ~TM_PEND_DONE;
			break;
		}
	}
}

/* ---- tm_engine.c ----------------------------------------------------- */
int tme_drain_from(struct tm_engine *eng, int rc, int want_send);

/*
 * Processes every completion already in both CQs (tm_engine.c); returns
 * how many.  Inline up to the first poll: an empty TM CQ with no reason
 * to look at the send CQ (the common idle case) costs no call frame.
 */
static inline int tme_drain(struct tm_engine *eng)
{
	int rc = tm_dev_start_poll(eng->dev->tm_cq);
	int want_send = tme_want_poll_send(eng);

	if (rc == TM_ERR_NOT_FOUND && !want_send)
		return 0;
	return tme_drain_from(eng, rc, want_send);
}
void tme_post_plain(struct tm_engine *eng, uint32_t idx);
int tme_flush_work_slow(struct tm_engine *eng);

/*
 * Would tme_maybe_sync post a SYNC now?  An unreported count is work only
 * then: while no live entry may be inactive (eng->unconf) it can wait for
 * the next ADD, which carries it, so idle progress does not keep looking.
 */
static inline int tme_sync_wanted(struct tm_engine *eng)
{
	uint32_t lag = tme_count_now(eng) - eng->reported;

	return lag && !eng->sync_out && !eng->no_card &&
	       (!ucs_list_is_empty(&eng->unconf) || lag >= TM_SYNC_LAG_MAX);
}

/*
 * Moves queued work on (list ops, promotions, the sync count, owed
 * replies, queued sends).  Inline: every entry point calls it, and
 * usually there is nothing to do, which one load tells.
 */
static inline int tme_flush_work(struct tm_engine *eng)
{
	if (!(eng->pending & TM_PEND_WORK))
		return 0;
	return tme_flush_work_slow(eng);
}

/* ---- tm_ops.c -------------------------------------------------------- */
void tme_op_decide(struct tm_engine *eng, int type, struct tm_recv *r);
int tme_card_add(struct tm_engine *eng, struct tm_recv *r);
/* Where the card puts r's data: its staging buffer or its own. */
static inline void *tme_card_buf(struct tm_engine *eng,
				 const struct tm_recv *r)
{
	return r->stage < 0 ? r->buf :
	       eng->stage + (size_t)r->stage * eng->stage_size;
}

/* Gives r's staging buffer back, if it has one (tm_offload.c's). */
/* Something promotion waits for (an entry, an op slot, a stage) freed. */
static inline void tme_promo_unstick(struct tm_engine *eng)
{
	if (eng->promo_stuck) {
		eng->promo_stuck = 0;
		tme_pend(eng, TM_PEND_WORK);
	}
}

static inline void tme_stage_put(struct tm_engine *eng, struct tm_recv *r)
{
	if (r->stage < 0)
		return;
	eng->free_stage[eng->n_free_stage++] = (uint32_t)r->stage;
	r->stage = -1;
	tme_promo_unstick(eng);
}
int tme_stage_setup(struct tm_engine *eng);
void tme_stage_cleanup(struct tm_engine *eng);
int tme_flush_ops(struct tm_engine *eng);
void tme_maybe_sync(struct tm_engine *eng);
void tme_entry_gone(struct tm_engine *eng, struct tm_recv *r);
void tme_on_op_cqe(struct tm_engine *eng, int type, struct tm_recv *r,
		   const struct tm_cqe *c);

/* ---- tm_offload.c ---------------------------------------------------- */
int tme_recv_place(struct tm_engine *eng, struct tm_recv *r, uint32_t ctx,
		   uint64_t rtag, uint64_t mask);
int tme_promote(struct tm_engine *eng);
void tme_swq_del(struct tm_engine *eng, struct tm_recv *r);
void tme_recv_back_to_sw(struct tm_engine *eng, struct tm_recv *r);

/* ---- tm_recv.c ------------------------------------------------------- */
void tme_recv_finish(struct tm_engine *eng, struct tm_recv *r, int status);
void tme_on_recv_cqe(struct tm_engine *eng, struct tm_recv *r,
		     const struct tm_cqe *c);
int tme_on_unexpected(struct tm_engine *eng, uint8_t *buf, uint32_t idx,
		      const struct tm_cqe *c);
void tme_recv_try_done(struct tm_engine *eng, struct tm_recv *r);
void tme_on_op_result(struct tm_engine *eng, int type, struct tm_recv *r,
		      const struct tm_cqe *c);
void tme_recv_peer_dead(struct tm_engine *eng, struct tm_peer *p);
void tme_msg_free(struct tm_engine *eng, struct tm_msg *m);

/* ---- tm_reply.c ------------------------------------------------------ */
void tme_recv_reply(struct tm_engine *eng, struct tm_recv *r, int type);
int tme_recv_pay_owed(struct tm_engine *eng);
void tme_fin_failed(struct tm_recv *r);
void tme_sw_rndv_start(struct tm_engine *eng, struct tm_recv *r,
		       uint64_t msg_len);
void tme_sw_rndv_done(struct tm_engine *eng, struct tm_recv *r, int status);

/* ---- tm_cancel.c ----------------------------------------------------- */
void tme_on_cancel_req(struct tm_engine *eng, uint32_t peer, uint32_t app);
void tme_on_cancel_rep(struct tm_engine *eng, uint32_t peer, uint32_t app,
		       uint64_t tag);
int tme_cancel_pay_owed(struct tm_engine *eng);

/* ---- tm_send.c ------------------------------------------------------- */
uint64_t tme_now_ns(void);
int tme_wait_reply_start(struct tm_engine *eng, struct tm_send *s);
void tme_wait_reply_end(struct tm_engine *eng, struct tm_send *s);
void tme_peer_fail(struct tm_engine *eng, uint32_t peer);
int tme_send_ack(struct tm_engine *eng, uint32_t peer, uint32_t app);
int tme_send_fin(struct tm_engine *eng, uint32_t peer, const uint8_t *hdr);
void tme_send_keepalive(struct tm_engine *eng, struct tm_peer *p,
			uint64_t now);
void tme_keepalive_scan(struct tm_engine *eng);
int tme_probe_missed(struct tm_engine *eng, uint32_t peer);
void tme_on_control(struct tm_engine *eng, const uint8_t *buf,
		    const struct tm_cqe *c);

/* ---- tm_tx.c --------------------------------------------------------- */
struct tm_tx *tme_tx_new(struct tm_engine *eng, int type, uint32_t peer);
void tme_tx_free(struct tm_tx *tx);
void tme_tx_queue(struct tm_engine *eng, struct tm_tx *tx);
void tme_tx_abort(struct tm_engine *eng, struct tm_tx *tx);
int tme_eager_now(struct tm_engine *eng, struct tm_send *s);
int tme_flush_tx(struct tm_engine *eng);
int tme_poll_send(struct tm_engine *eng);
int tme_tx_idle(struct tm_engine *eng);

#endif /* TM_ENGINE_PRIV_H */
