/*
 * tm_transport.h - the engine's transport: its state and the callbacks it
 * reports through.  For the engine's modules only.
 *
 * Layers (doc/DESIGN.md, "The matching engine"):
 *   protocol   tm_recv, tm_send, tm_cancel, tm_reply, tm_offload, tm_probe
 *              (state: tm_proto.h), entered from tm_api.c
 *   transport  tm_rx.c    the TM-CQ batch and the plain SRQ buffers
 *              tm_ops.c   the card's list ops, the sync rule, staging
 *              tm_tx.c    send slots, selective signalling, the send CQ
 * A lower module never calls a higher one: the transport reports upward
 * only through the callbacks below, registered once (struct tmx_cb, like
 * UCX's tag-matching interface handlers) or carried by the item (struct
 * tm_tx.done, like a uct_completion_t).
 *
 * No card: a device without tag matching (dev->tm 0: a plain SRQ) is a
 * transport with no list (no_card): no list op, staging buffer or count
 * to report; tm_rx.c reads each arrival's TMH as the card would and hands
 * it up as unexpected or control.  The protocol matches everything in
 * software and reads every rendezvous itself; it asks only
 * tmx_has_card() (tm_ops.h), and does not change.
 */
#ifndef TM_TRANSPORT_H
#define TM_TRANSPORT_H

#include <infiniband/tm_types.h>
#include <ucs/datastruct/khash.h>
#include <ucs/datastruct/list.h>
#include "engine/tm_engine.h"
#include "engine/tm_engine_param.h"
#include "engine/tm_engine_test.h"
#include "engine/tm_wire.h"

/* wr_id low bits: what a TM-CQ completion is about. */
enum { WR_RECV = 0, WR_PLAIN = 1, WR_ADD = 2, WR_DEL = 3, WR_SYNC = 4 };
#define WR_TYPE_MASK 7ULL
/* signal at least every TM_ADD_SIG_EVERY-th ADD (see chain_add) */
#define TM_ADD_SIG_EVERY 64
/*
 * Report the count at least every TM_SYNC_LAG_MAX unexpected arrivals,
 * entries or not: a ConnectX drops tagged messages (RNR) once the count
 * the ops carried lags its own by 32K (UCX syncs every 16K for that,
 * IBV_DEVICE_MAX_UNEXP_COUNT).  Not for IBV_WC_TM_SYNC_REQ: the provider
 * sets that flag against the count of the last ADD only, which a SYNC
 * does not move (doc/mlx5-rules.md rule 9), and the engine ignores it.
 */
#define TM_SYNC_LAG_MAX 0x2000u

#define CQE_BATCH 32
#define TM_QPN_CACHE 64 /* a power of two */
#define PLAIN_BATCH_MAX 16 /* plain buffers reposted in one chain, at most */
/* signal at least every TM_SIG_EVERY-th send WR of a QP */
#define TM_SIG_EVERY 16

/* in the order of TM_SITE_ALLOC_TX_* (tm_engine_test.h) */
enum { TX_EAGER, TX_RNDV, TX_ACK, TX_FIN, TX_READ, TX_KEEPALIVE,
       TX_PLUG /* a held peer's (tmx_peer.plug): never allocated */ };

/*
 * The summary of deferred work, so that an entry point with nothing
 * deferred pays one load instead of a dozen list and counter tests.  A bit
 * may be set with nothing behind it (its handler looks, finds nothing and
 * clears it); it must never be clear while its work exists, so every site
 * that queues such work calls tmx_pend.  Cleared only by the code that
 * looks at the real state: flush_work (WORK, tm_api.c), tme_keepalive_scan
 * (WAIT), tme_fire_done (DONE), tme_umem_spill (HELD).
 */
enum {
	TM_PEND_WORK = 1 << 0, /* opq, promotion, an unreported count, owed
				* replies, owed CANCEL_REPs, queued tx */
	TM_PEND_WAIT = 1 << 1, /* sends or receives waiting on a peer */
	TM_PEND_DONE = 1 << 2, /* done_recv or done_send */
	TM_PEND_HELD = 1 << 3, /* unexpected messages hold plain buffers */
};

/* tm_cqe.status of an op the card refused at post (tmx_cb.op_done): no
 * ibv_wc_status has this value */
#define TM_WC_REFUSED (-1)

struct tm_cqe {
	uint64_t wr_id;
	int status;          /* enum ibv_wc_status, or TM_WC_REFUSED */
	int opcode;
	uint32_t flags;
	uint32_t byte_len;
	uint32_t qp_num;
	struct ibv_wc_tm_info tm;
};

/* ---- a receive on the card (the transport's part of it) -------------- */

struct tm_tctx;

/* A list op waiting for an op slot.  Embedded in the tag context (its
 * DEL) and in the transport (the SYNC), so queuing one never allocates. */
struct tm_op {
	ucs_list_link_t link;
	int type;
	struct tm_tctx *t;
	uint32_t count;
};

enum {
	TC_ENTRY_LIVE = 1 << 0, /* counts against the card's list */
	TC_ADD_UNSIG = 1 << 1,  /* its ADD went unsignalled */
	TC_UNCONF = 1 << 2,     /* on ops.unconf (may be inactive) */
	TC_ADD_FAILED = 1 << 3, /* its chained ADD was refused: on
				 * ops.add_failed until reported */
	TC_DEL_WANTED = 1 << 4, /* ... and its DEL was decided meanwhile */
};

/*
 * The tag context: what the transport keeps of a receive it added to the
 * card, embedded in the protocol's request (like uct_tag_context_t).  Its
 * completions and op results come back through tmx_cb with this pointer.
 */
struct tm_tctx {
	ucs_list_link_t card_link; /* ops.unconf while TC_UNCONF */
	uint64_t add_seq;          /* its ADD's place in list-op post order */
	uint32_t handle;
	uint32_t flags;            /* TC_* */
	int32_t stage;             /* staging buffer on the card, or -1 */
	struct tm_tctx *fail_next; /* ops.add_failed while TC_ADD_FAILED */
	struct tm_op del;          /* its DEL while queued */
};

/* ---- the send side --------------------------------------------------- */

#define TMX_ABORTED (-1) /* tm_tx.done status: never posted, or cut off */

/*
 * One item for a peer's send queue.  The protocol fills the header (and
 * names the data, or the read's target) and the callback; the transport
 * posts it in order, calls done once (when posted for EAGER, when its WR
 * completed for RNDV and READ, TMX_ABORTED if it never will) and frees it.
 */
struct tm_tx {
	struct tm_xport *x;    /* its transport */
	ucs_list_link_t link;  /* peer txq while queued */
	ucs_list_link_t all;
	int type;
	int slot;
	uint32_t peer;
	int queued;            /* on its peer's txq */
	void (*done)(struct tm_tx *tx, int status); /* NULL: nothing to tell */
	void *arg;             /* the protocol's request */
	uint64_t key;          /* the protocol's name for it (a send's seq) */
	const void *data;      /* EAGER: payload after the header */
	size_t len;
	/* TX_READ: posted in pieces of at most max_read bytes */
	uint64_t rd_va;        /* remote address */
	uint32_t rd_rkey;
	uint32_t rd_lkey;
	uint8_t *rd_buf;       /* local target */
	uint64_t rd_next;      /* offset of the next piece to post */
	uint64_t rd_end;       /* bytes to read */
	uint32_t rd_out;       /* pieces posted and not yet retired */
	int rd_status;         /* first failed piece's status, or SUCCESS */
	int rd_stop;           /* post no more pieces (error, dead peer) */
	uint32_t hdr_len;
	uint8_t hdr[RNDV_HDR_LEN] __attribute__((aligned(8)));
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

/* A peer as the transport sees it: its QP and send queue. */
struct tmx_peer {
	struct ibv_qp *qp;
	uint32_t id;
	uint32_t max_inline; /* longest IBV_SEND_INLINE send (TMH included) */
	uint32_t sq_out;     /* posted and not yet retired: wr_head - wr_tail */
	struct tm_wr *wrs;   /* [wr_mask + 1], indexed by post count */
	uint32_t wr_mask;
	uint32_t wr_head;    /* WRs posted */
	uint32_t wr_tail;    /* WRs retired */
	uint32_t unsig;      /* unsignalled WRs since the last signalled one */
	uint32_t unsig_slots; /* ... of which hold a send slot */
	uint32_t sig_out;    /* signalled WRs not yet completed */
	uint32_t slots_out;  /* WRs holding a send slot, not yet retired */
	ucs_list_link_t txq;
	uint64_t ka_last_ns; /* when the last keepalive was queued */
	int ka_out;          /* a keepalive is queued or posted */
	int dead;            /* its QP failed: nothing goes to it again */
	/*
	 * Held (tmx_peer_hold): its QPs are not connected yet.  The plug
	 * heads txq, so everything for the peer queues behind it in order
	 * (an eager send sees a queue and does not post) and flush_peer
	 * stops there, until tmx_peer_release takes it out.
	 */
	int held;
	struct tm_tx plug;
};

/* One outstanding signalled list op, in post order (see tmx_on_op_cqe). */
struct tm_sig_op {
	uint64_t seq;        /* its place in post order (ops.op_seq) */
	uint32_t unsig;      /* unsignalled ops posted just before it */
	uint32_t count;      /* the unexpected count it carried */
};

/* ---- the callbacks, registered once ---------------------------------- */

struct tmx_cb {
	/* a card-held receive's completion: the match, its data, or both */
	void (*recv)(void *arg, struct tm_tctx *t, const struct tm_cqe *c);
	/* a list op naming t completed (or, queued, was dropped: TM_ERR);
	 * of unsignalled ADDs only the failures come */
	void (*op_done)(void *arg, int type, struct tm_tctx *t,
			const struct tm_cqe *c);
	/* an unexpected tagged message in plain buffer idx; nonzero: the
	 * protocol holds the buffer (reposted by tmx_post_plain) */
	int (*unexpected)(void *arg, uint8_t *buf, uint32_t idx,
			  const struct tm_cqe *c);
	/* a NO_TAG or FIN message in a plain buffer (reposted after) */
	void (*control)(void *arg, const uint8_t *buf, const struct tm_cqe *c);
	/* peer's QP failed: nothing comes from it or goes to it again */
	void (*peer_failed)(void *arg, uint32_t peer);
};

KHASH_MAP_INIT_INT(tm_qpn, uint32_t)

/* tm_rx.c: the plain SRQ buffers */
struct tmx_plain_state {
	uint8_t *buf;
	struct ibv_mr *mr;
	uint32_t size;
	uint32_t n;
	/* each buffer's receive, built once: a repost links them */
	struct ibv_recv_wr *wr;
	struct ibv_sge *sge;
	uint32_t posted;  /* at the SRQ (posted, not completed) */
	uint32_t batch;   /* freed ones go back this many at a time */
	uint32_t low;     /* ... or at once while fewer are posted */
	uint32_t npend;   /* freed, waiting in pend[] */
	uint32_t pend[PLAIN_BATCH_MAX];
};

/* tm_ops.c: the tag list, its ops and the sync count */
struct tmx_ops_state {
	uint32_t uq_count;   /* unexpected tagged completions */
	uint32_t reported;   /* count carried by the last op decided */
	/* arrivals left before the count may want work (tmx_count_rearm):
	 * 0 while an entry may be inactive; never too many, may be too few */
	int32_t count_wake;
	int sync_out;        /* an explicit SYNC is queued or posted */
	uint64_t op_seq;     /* list ops posted */
	uint64_t sync_seq;   /* latest op known in sync (0: none) */
	ucs_list_link_t unconf; /* live entries added after sync_seq,
				 * in post order: only these may be
				 * inactive */
	uint32_t max_entries;
	uint32_t max_ops;
	uint32_t card_entries;
	uint32_t card_entries_max; /* its high-water mark */
	uint32_t ops_out;    /* list ops the card counts outstanding */
	uint32_t ops_sig_out; /* ... of which signalled */
	uint32_t ops_unsig;  /* unsignalled ADDs since the last
			      * signalled op */
	struct tm_sig_op *op_unsig; /* [max_ops]: each outstanding
				     * signalled op, in post order */
	uint32_t op_unsig_head, op_unsig_tail;
	ucs_list_link_t opq; /* struct tm_op: a DEL or sync_op */
	uint32_t opq_len;
	struct tm_op sync_op; /* the one explicit SYNC (sync_out) */
	/* someone waits for an entry, op slot or staging buffer:
	 * the next one freed sets TM_PEND_WORK */
	uint8_t want_room;
	/* ADDs decided since the last flush, accounted as posted,
	 * in decided order (tmx_add_flush posts them as one list):
	 * the WRs, their SGEs, and ops_unsig before each */
	uint32_t chain_n;
	struct ibv_ops_wr chain_wr[TM_ADD_CHAIN_MAX];
	struct ibv_sge chain_sge[TM_ADD_CHAIN_MAX];
	uint32_t chain_unsig[TM_ADD_CHAIN_MAX];
	/* tag contexts whose chained ADD the card refused: the
	 * protocol hears it from the next work flush */
	struct tm_tctx *add_failed;
	/* staging buffers, so that a receive smaller than the
	 * largest eager message can go to the card (mlx5 rule 17) */
	uint8_t *stage;
	struct ibv_mr *stage_mr;
	uint32_t stage_size;
	uint32_t n_stage;
	uint32_t *free_stage;
	uint32_t n_free_stage;
};

/* tm_tx.c: send slots, signalling and the send CQ */
struct tmx_tx_state {
	uint8_t *slots;
	struct ibv_mr *slots_mr;
	uint32_t slot_size;
	uint32_t n_slots;
	uint32_t *free_slots;
	uint32_t n_free_slots;
	uint32_t sq_limit;
	uint32_t sig_every; /* signal every sig_every-th slot WR */
	uint32_t sig_max;   /* ... and every sig_max-th WR of a QP */
	uint32_t slot_low;  /* fewer free slots: signal every WR */
	uint32_t sig_out;   /* signalled send WRs out (all peers) */
	uint32_t sq_out;    /* send WRs not retired (all peers) */
	int32_t poll_budget; /* drains until the send CQ is due
			      * (tmx_want_poll_send) */
	ucs_list_link_t all_tx;
	uint64_t tx_queued;
	/* the eager inline send's WR, its two SGEs and its TMH, the fields
	 * that never change filled once (tm_sq.c, inline_fill_fixed): the
	 * device copies all of it at post, so each send reuses it */
	struct {
		struct ibv_send_wr wr;
		struct ibv_sge sge[2];
		uint8_t hdr[TMH_LEN] __attribute__((aligned(8)));
	} inl;
};

struct tm_xport {
	/* shared by every layer */
	struct tm_dev *dev;
	struct tm_engine_config cfg;
	struct tm_engine_test test; /* cfg.test copied, or all zero */
	uint32_t pending;    /* TM_PEND_* */
	/* a batch of TM-CQ completions is being handled: a callback fired
	 * from it may call in, but must not poll (tmx_drain) past the rest
	 * of the batch */
	int in_batch;
	int fatal;           /* 0, or the TM_ERR_* that stopped the engine */
	uint64_t max_read;   /* longest read the device does at once */
	int has_card;        /* tmx_has_card(): fixed at create */
	int no_card;         /* the device has no tag matching (dev->tm 0):
			      * no list, no list op, no count to report */
	int cq_batch;        /* completions one TM-CQ poll takes: CQE_BATCH,
			      * or fewer when the device says so
			      * (dev->cq_poll_max) */
	struct tm_engine_stats st;
	const struct tmx_cb *cb;
	void *cb_arg;

	/* peers (tm_rx.c adds them) */
	struct tmx_peer **peers;
	uint32_t npeers;
	uint32_t ndead;      /* peers failed: while 0, none to look up */
	khash_t(tm_qpn) *qpn;
	/* direct-mapped in front of qpn: a completion's peer without hashing
	 * (peer UINT32_MAX: the slot is empty) */
	struct { uint32_t qpn, peer; } qpn_cache[TM_QPN_CACHE];

	/* tm_rx.c: plain SRQ buffers */
	struct tmx_plain_state plain;

	/* tm_ops.c */
	struct tmx_ops_state ops;

	/* tm_tx.c */
	struct tmx_tx_state tx;
};

/* ---- small helpers for every layer (calls none) ---------------------- */

static inline void tmx_pend(struct tm_xport *x, uint32_t what)
{
	x->pending |= what;
}

/*
 * The engine cannot go on (a list op or plain buffer the card refused for
 * good): every entry point returns rc from now on.  Loud, not silent: the
 * caller sees the error at its next call.
 */
static inline void tmx_fatal(struct tm_xport *x, int rc)
{
	if (!x->fatal)
		x->fatal = rc;
}

/* The test fault hook: 0, or the errno the call at site fails with. */
static inline int tmx_fault(struct tm_xport *x, enum tm_site site)
{
	return x->test.fault ? x->test.fault(x->test.hook_arg, site) : 0;
}

/* The peer of qpn if the direct-mapped cache has it, else UINT32_MAX. */
static inline uint32_t tmx_peer_cached(const struct tm_xport *x, uint32_t qpn)
{
	uint32_t i = qpn & (TM_QPN_CACHE - 1);

	return x->qpn_cache[i].qpn == qpn ? x->qpn_cache[i].peer : UINT32_MAX;
}

static inline uint32_t tmx_peer_of_qpn(struct tm_xport *x, uint32_t qpn)
{
	uint32_t i = qpn & (TM_QPN_CACHE - 1), peer = tmx_peer_cached(x, qpn);
	khiter_t it;

	if (peer != UINT32_MAX)
		return peer;
	it = kh_get(tm_qpn, x->qpn, qpn);
	if (it == kh_end(x->qpn))
		return UINT32_MAX;
	x->qpn_cache[i].qpn = qpn;
	x->qpn_cache[i].peer = kh_value(x->qpn, it);
	return x->qpn_cache[i].peer;
}

/*
 * Does a completion say that the QP it came on failed?  Not for one
 * message's trouble: truncation, a rendezvous too big for the buffer, a
 * read the sender's rkey refused (the soft HCA keeps the QP usable then; a
 * real card moves it to error, and the flushes that follow say so).
 */
static inline int tmx_qp_failed(int status)
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

#endif /* TM_TRANSPORT_H */
