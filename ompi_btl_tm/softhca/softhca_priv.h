/*
 * softhca_priv.h - the soft HCA's objects, shared by its source files.
 *
 * Objects are named after the hardware objects they stand for.  Every
 * object embeds the rdma-core structure applications see as its first
 * member (or, for the context, struct verbs_context), so a pointer handed
 * out by verbs converts back with container_of.
 *
 * Locking: one mutex per context (sh_context.lock) guards every object of
 * that context and the card's work.  A CQ's poll_lock serialises
 * start_poll..end_poll and is always taken before the context lock.
 * Since the card is shared by every object of a context, the data path
 * (posts, polls, list ops) takes neither when the application promised
 * that one thread at a time uses the whole context: it was opened
 * single-threaded (softhca_config.single_threaded, as MLX5_SINGLE_THREADED)
 * or every QP, SRQ and CQ on it lives on one thread domain (created on a
 * parent domain with a TD; a CQ also IBV_CREATE_CQ_ATTR_SINGLE_THREADED),
 * which is when mlx5 drops its own per-object locks
 * (doc/mlx5-rules.md rule 22).  Creating and destroying objects always
 * locks and must not race the data path of a lock-free context.  The MR
 * table has its own lock (mr_lock), taken in any mode: a registration
 * cache deregisters from whichever thread it likes.
 *
 * The shared-memory formats (segments, rings, packets) and their trust
 * rules are in softhca_shm.h; the completion queue's objects in
 * softhca_cq.h; the receive side's (plain buffers, the TM-SRQ) in
 * softhca_srq.h.
 */
#ifndef SOFTHCA_PRIV_H
#define SOFTHCA_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <infiniband/verbs.h>
#include <infiniband/tm_types.h>

#include "softhca.h"
#include "softhca_shm.h"
#include "softhca_cq.h"
#include "softhca_ud.h"

#define SH_QPN_BASE      0x100u
#define SH_MAX_SGE       16u     /* SGEs accepted in any WR */
/* mlx5 flags SYNC_REQ on an unexpected arrival past this lag */
#define SH_MAX_SYNC_DIFF 0x3fffu
/* ConnectX-5/6 as ibv_devinfo -v shows them (doc/mlx5-rules.md rule 1) */
#define SH_MAX_CQE       ((1u << 22) - 1)
#define SH_MAX_RD_ATOM   16u
/* mlx5: a TM-SRQ's plain WQEs (rule 5) */
#define SH_TM_MIN_PLAIN  33u
/*
 * mlx5 send WQE arithmetic (rule 2): a 64-byte basic block; an RC QP
 * created with the default send-op set reserves 192 bytes of control
 * segments per WQE, plus 16 per SGE, and a WQE is at most 512 bytes.
 */
#define SH_WQEBB         64u
#define SH_WQE_OVERHEAD  192u
#define SH_MAX_WQE       512u
/* the most inline data an RC WQE holds: what max_inline can reach */
#define SH_MAX_INLINE    (SH_MAX_WQE - SH_WQE_OVERHEAD - 4u)
#define SH_TMH_LEN       ((uint32_t)sizeof(struct ibv_tmh))
#define SH_RVH_LEN       ((uint32_t)sizeof(struct ibv_rvh))
/*
 * Bytes one READ step moves.  1 MiB measured better than 256 KiB for both
 * one-way (0.93 -> ~1.0x ucx) and two-way streams: fewer returns to the
 * engine and fewer process_vm_readv calls, each pinning pages afresh.
 */
#define SH_READ_CHUNK    (1024u * 1024u)
#define SH_LIVENESS_NS   (100ull * 1000 * 1000)
/*
 * AUTO: rendezvous reads run in polls, at most SH_READ_CHUNK per verbs
 * call, and not while the application is posting (a poll within
 * SH_READ_POST_GAP_NS of a post) unless they have waited SH_READ_DEFER_NS.
 */
#define SH_READ_POST_GAP_NS (2ull * 1000)
#define SH_READ_DEFER_NS    (100ull * 1000)
#define SH_WR_LIVENESS_NS (1000ull * 1000) /* before starting a WR */
/*
 * The arrival hint (softhca_shm.h, sh_rings.rx_hint): asked for above
 * this many watched rings (a ring costs an idle poll a few loads; the hint
 * costs every packet a store on a line the owner writes too), and every
 * ring looked at each this many idle polls anyway (a power of two).
 */
#define SH_RX_ARM_FROM    8u
#define SH_RX_SCAN_EVERY  64u
/* (measured on CLOCK_MONOTONIC_COARSE: a tick is 1-10 ms) */

#define sh_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

/* What an MR key grants, as copied from its slot. */
struct sh_mr_grant {
	uint32_t key, access;
	uint64_t base, size;
};

/* A peer context's segments, mapped here. */
struct sh_peer {
	union ibv_gid gid;
	const struct sh_seg *pub;   /* read-only */
	uint8_t *rings;
	struct sh_layout lay;       /* checked copy of pub's geometry */
	pid_t pid;
	int refs;
	int cma;                /* 1 usable, 0 refused, -1 not probed */
	uint64_t checked_ns;    /* last liveness check */
	/*
	 * What *alive (pub->alive.word, softhca_shm.h) reads while the owner
	 * lives, 0 when it tells nothing (then the clock paces the checks).
	 * A context of this process is alive while we run: alive points at
	 * self_word then.
	 */
	const _Atomic uint32_t *alive;
	uint32_t alive_word;
	_Atomic uint32_t self_word;
	/* the owner's sh_seg.rx_armed and sh_rings.rx_hint (a gone peer's:
	 * a word of our own, never armed) */
	const _Atomic uint32_t *rx_armed;
	_Atomic uint32_t *rx_hint;
	/* the process's start time (/proc/<pid>/stat, field 22) at connect,
	 * 0 if unread: a pid reused by another process is told apart by it */
	uint64_t start_time;
	/*
	 * The process had exited by the time we connected: like a card, the
	 * connect succeeds and the first WR fails (the ring reads closed).
	 */
	bool gone;
	struct sh_ring gone_ring;
	struct sh_peer *next;
};

/* ---- receive side: plain buffers, the TM-SRQ (softhca_srq.h) -------- */

#include "softhca_srq.h"

/* ---- send side and QPs ----------------------------------------------- */

enum sh_swr_kind {
	SH_SWR_SEND,
	SH_SWR_READ,
	SH_SWR_FIN,     /* card-generated FIN: no completion */
};

struct sh_swr {
	enum sh_swr_kind kind;
	uint64_t wr_id;
	unsigned int send_flags;
	uint32_t num_sge;
	/*
	 * Inline data (IBV_SEND_INLINE, FIN) is copied here at post time, as
	 * mlx5 copies it into the WQE: no allocation, and the caller may reuse
	 * its buffer at once.
	 */
	union {
		struct ibv_sge sge[SH_MAX_SGE];
		uint8_t inl[SH_MAX_INLINE];
	};
	bool inlined;
	uint32_t len;
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t done;          /* bytes sent (SEND) or received (READ) */
	bool started;           /* READ: request issued */
};

/* A card-side rendezvous read: the RDMA read a matched RNDV starts. */
struct sh_read_job {
	struct sh_qp *qp;
	uint64_t recv_wr_id;
	struct ibv_sge sge[SH_MAX_SGE];
	uint32_t num_sge;
	uint8_t hdr[SH_TMH_LEN + SH_RVH_LEN]; /* for the FIN */
	uint64_t tag;
	uint32_t priv;
	uint64_t va;
	uint32_t rkey;
	uint32_t len, done;
	uint64_t req_id;        /* copy-read fallback: request in flight */
	int32_t handle;         /* tag slot released by the data completion */
	bool started;
	struct sh_read_job *next;
};

/* Where the packets of the message arriving on a QP are going. */
enum sh_rx_dest {
	SH_RX_IDLE,
	SH_RX_TAGGED,   /* matched eager: into the tagged buffer */
	SH_RX_PLAIN,    /* into a plain buffer */
};

struct sh_rx {
	enum sh_rx_dest dest;
	struct ibv_sge sge[SH_MAX_SGE];
	uint32_t num_sge;
	uint32_t msg_len;
	uint32_t off;           /* message bytes seen */
	uint32_t skip;          /* leading message bytes not written (TMH) */
	uint32_t written;
	uint64_t cqe_seq;       /* reserved completion (PLAIN) */
	struct sh_cqe cqe;      /* completion to issue at the last packet */
	struct sh_cq *cq;
};

/* The responder side of the copy-read fallback. */
struct sh_read_resp {
	bool active;
	uint64_t req_id;
	uint64_t va;
	uint32_t rkey, len, done;
	enum ibv_wc_status status;
};

struct sh_qp {
	struct ibv_qp qp;
	struct sh_context *ctx;
	uint32_t index;
	bool lockfree;               /* counted as such (sh_obj_attach) */
	struct sh_cq *scq, *rcq;
	struct sh_srq *srq;
	struct sh_rq rq;             /* used when srq == NULL */
	/* fixed at creation, read per arrival (softhca_match.h): where a
	 * message with no tagged buffer lands and completes, and whether the
	 * card matches tags here (a TM-SRQ) */
	struct sh_rq *rx_rq;
	struct sh_cq *rx_cq;
	bool rx_tm;
	uint32_t max_send_wr, max_recv_wr, sq_sig_all;
	uint32_t max_send_sge;       /* more SGEs in a WR: ENOMEM, as mlx5 */
	uint32_t max_inline;         /* larger IBV_SEND_INLINE: ENOMEM */
	uint8_t timeout, retry_cnt, rnr_retry; /* as set at RTS; kept for
				      * ibv_query_qp only (the soft HCA
				      * learns of a dead peer from its pid) */
	bool no_sq;                  /* created with max_send_wr 0: user sends
				      * refused; on a TM-SRQ, the card's
				      * rendezvous QP (mlx5 offload_type RNDV) */
	struct sh_ring *in;          /* in our segment */
	struct sh_ring *out;         /* in the peer's segment */
	uint32_t out_epoch;
	/*
	 * Ring positions, kept privately (the shared tail is only published,
	 * or read and checked): in_tail the next packet to take, in slot
	 * in_idx; out_head the next to produce, in slot out_idx; out_tail the
	 * peer's tail as last read, reloaded only when the ring looks full.
	 */
	uint32_t in_tail, in_idx;
	struct sh_pkt *in_slot;      /* slot in_idx, while watched */
	uint32_t in_empty;           /* its seq until a packet is there */
	uint32_t in_step;            /* in_empty's step per packet: 0 in the
				      * ring's first lap (unfilled slots read
				      * 0, sh_ring_clear), then 1 */
	uint32_t out_head, out_idx, out_tail;
	int32_t rxw;                 /* our entry in ctx->rxw, -1: none */
	struct sh_peer *peer;
	_Atomic uint64_t *out_bits;  /* our ring's arrival bit in the peer's */
	uint64_t out_mask;           /* sh_rings (none for a gone peer) */
	uint32_t dest_qpn;
	struct sh_swr *sq;           /* circular, grows for FINs */
	uint32_t sq_cap, sq_first, sq_count, sq_user;
	uint64_t stall_since;        /* ns: first failed push, 0 if none */
	bool rnr;                    /* the head arrival waits for a buffer */
	struct sh_rx rx;
	struct sh_read_resp resp;
	uint64_t next_read_id;
	/* failed (qperr.c), its work not flushed yet (sched.c qp_flush) */
	bool flush_pending;
	bool ud;                     /* IBV_QPT_UD (ud.c): no ring, no peer */
	uint32_t qkey;               /* UD: what an arrival must carry */
	enum ibv_wc_status flush_why;   /* for the head WR */
};

/* ---- the context: the "card" ----------------------------------------- */

/*
 * Why a verb rings the doorbell (sh_doorbell): the one way posts, polls
 * and state changes reach the card.
 */
enum sh_bell {
	SH_BELL_POLL,       /* a poll, about to read a CQ */
	SH_BELL_SEND,       /* WRs queued on qp's send queue */
	SH_BELL_RECV,       /* buffers posted to a QP's own receive queue */
	SH_BELL_SRQ_RECV,   /* buffers posted to an SRQ */
	SH_BELL_OPS,        /* list ops queued */
	SH_BELL_POSTED,     /* a post that left the card nothing (counted) */
	SH_BELL_FLUSH,      /* a QP was moved to error: flush it now */
};

/* A PD, or a parent domain (parent != NULL) with or without a TD. */
struct sh_pd {
	struct ibv_pd pd;
	struct sh_pd *parent;        /* the protection domain it extends */
	struct sh_td *td;
	int refs;                    /* parent domains on this PD */
};

struct sh_td {
	struct ibv_td td;
	int refs;                    /* parent domains on this TD */
};

/*
 * What a lock-free idle check reads for one connected QP: the seq word of
 * its next inbound slot and the value it holds while nothing arrived
 * there.  Kept in a compact array (ctx->rxw) so an idle poll costs a few
 * loads per QP.
 */
struct sh_rx_watch {
	_Atomic(_Atomic uint32_t *) seq;
	_Atomic uint32_t empty;
};

struct sh_context {
	struct verbs_context vctx;   /* the ibv_context lives inside */
	pthread_mutex_t lock;
	/*
	 * Whether the data path takes lock (see "Locking" above): objects
	 * that need it, objects on the one TD that has any (td), and the
	 * answer, kept under lock by sh_obj_attach/sh_obj_detach.
	 */
	bool locking;
	uint32_t locked_objs, td_objs;
	struct sh_td *td;
	pthread_mutex_t mr_lock;     /* the MR table and mr_gen */
	_Atomic uint32_t mr_dereg;   /* MRs deregistered: lkey caches */
	struct sh_mr_grant lkey_seen[2]; /* sh_local_check's last valid */
	uint32_t lkey_gen, lkey_next;    /* keys as of mr_dereg == lkey_gen */
	struct softhca_config cfg;
	uint32_t instance;
	struct sh_seg *seg;          /* published segment, mapped writable */
	struct sh_rings *rings;
	struct sh_layout lay;
	int pub_fd, rings_fd;
	uint32_t nonce;              /* 26 random bits: the GID, both
				      * segments and the socket's name */
	uint64_t key;                /* 48 random bits in the GID: what a
				      * peer shows to get the segments */
	int srv_fd;                  /* the socket that hands them over */
	pthread_t srv_thread;        /* ... and its thread (shm.c) */
	pid_t srv_pid;               /* the process that runs it */
	uint64_t bad_packets;        /* malformed arrivals dropped */
	struct sh_ud ud;             /* the UD QP and its mailbox (ud.c) */
	struct sh_qp **qps;          /* by index */
	struct sh_rx_watch *rxw;     /* max_qp entries, rxw_n in use */
	struct sh_qp **rxw_qp;       /* the QP of each entry */
	_Atomic uint32_t rxw_n;
	/*
	 * More than SH_RX_ARM_FROM rings watched: producers are asked for the
	 * arrival hint (seg->rx_armed, mirrored here), so an idle poll reads
	 * rings->rx_hint instead of every ring, and every ring only each
	 * SH_RX_SCAN_EVERY-th time (idle_polls; softhca_sched.h).
	 */
	bool rx_armed;
	_Atomic uint32_t idle_polls;
	/*
	 * Armed, a card run looks at the rings rings->rx_bits and rx_pend
	 * name (sched.c), and at every ring when rx_full was set (a change
	 * of watch, or an idle poll's periodic look found a packet) or each
	 * SH_RX_SCAN_EVERY-th run (rx_runs).  rx_pend: the QPs a look left
	 * with work (a packet waiting for a buffer, a message under way).
	 */
	_Atomic uint32_t rx_full;
	uint32_t rx_runs;
	uint64_t rx_pend[SH_RX_BIT_WORDS];
	union {
		struct {
			/* send-queue entries plus active read responses over
			 * all QPs: while 0 the card has no send work to look
			 * for */
			uint32_t tx_work;
			/* list ops queued over all SRQs (their ops_count):
			 * while 0 the card has no list op to run */
			uint32_t ops_queued;
		};
		uint64_t tx_or_ops; /* both at once: 0 while both are */
	};
	uint32_t qp_hwm;             /* indexes in use are below this */
	uint32_t rr_rx, rr_tx;       /* round-robin cursors */
	struct sh_peer *peers;
	struct sh_srq *srqs;
	struct sh_cq *cqs;
	struct sh_read_job *jobs, *jobs_tail;
	enum softhca_sched sched;
	uint64_t rng;
	uint64_t last_liveness;
	uint32_t liveness_tick;
	uint64_t cma_reads, copy_reads;
	uint32_t mr_gen;
	bool in_progress;
	uint32_t flush_n;            /* QPs with flush_pending */
	/* the scheduler's entry (sched.c): see sh_doorbell */
	void (*doorbell)(struct sh_context *ctx, enum sh_bell why,
			 struct sh_qp *qp);
	/*
	 * The idle fast path: quiet is set when the card left nothing to do
	 * but wait for packets.  While it holds and no watched ring has its
	 * next packet (sh_rx_quiet), a poll does not run the card: it returns
	 * at once, without locks, if its CQ is empty, else only pops.  A post
	 * that leaves the card work clears quiet (sh_sched_kick).
	 */
	_Atomic bool quiet;
	/*
	 * Read pacing (AUTO card runs only; see SH_READ_CHUNK): read_limited
	 * while a run is under way, read_left the bytes it may still read,
	 * decided (with the clock) at its first read.  post_seq counts posts;
	 * post_ns is when a poll first saw the latest, defer_ns when reads
	 * began to wait for the posts to stop (0: not waiting).
	 */
	bool read_limited, read_decided, read_post;
	uint32_t read_left;
	uint64_t post_seq, post_seen, post_ns, defer_ns;
};

static inline struct sh_context *to_sh_ctx(struct ibv_context *c)
{
	return sh_container_of(c, struct sh_context, vctx.context);
}

static inline struct sh_srq *to_sh_srq(struct ibv_srq *srq)
{
	return sh_container_of(srq, struct sh_srq, srq);
}

static inline struct sh_qp *to_sh_qp(struct ibv_qp *qp)
{
	return sh_container_of(qp, struct sh_qp, qp);
}

static inline uint32_t sge_total(const struct ibv_sge *sge, uint32_t n)
{
	uint64_t t = 0;

	/* (one or two SGEs, what MPI posts, without the loop) */
	if (n == 1)
		return sge[0].length;
	if (n == 2)
		t = (uint64_t)sge[0].length + sge[1].length;
	else
		for (uint32_t i = 0; i < n; i++)
			t += sge[i].length;
	return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

/* The data path's lock: a no-op on a context used by one thread (see
 * "Locking").  ctx->locking changes only when objects are created or
 * destroyed, which the contract keeps apart from the data path; the _as
 * forms take the answer a caller read once for a whole call. */
static inline void sh_lock_as(struct sh_context *ctx, bool locking)
{
	if (locking)
		pthread_mutex_lock(&ctx->lock);
}

static inline void sh_unlock_as(struct sh_context *ctx, bool locking)
{
	if (locking)
		pthread_mutex_unlock(&ctx->lock);
}

static inline void sh_lock(struct sh_context *ctx)
{
	sh_lock_as(ctx, ctx->locking);
}

static inline void sh_unlock(struct sh_context *ctx)
{
	sh_unlock_as(ctx, ctx->locking);
}

/* device.c: counts a new QP/SRQ (cq_flags < 0) or CQ created on pd (a
 * CQ: its parent domain, or NULL); returns whether it is lock-free.
 * Called with ctx->lock held; sh_obj_detach undoes it. */
bool sh_obj_attach(struct sh_context *ctx, struct ibv_pd *pd, int cq_flags);
void sh_obj_detach(struct sh_context *ctx, bool lockfree);

/* device.c: send blocks an RC send queue of max_wr WRs takes on mlx5, or
 * 0 when its WQE would be too large (rule 2) */
uint64_t sh_sq_wqebbs(uint32_t max_wr, uint32_t max_sge, uint32_t max_inline);
/* bytes of one such WQE (a multiple of 64), or 0 when too large; what is
 * left after the control segments is the QP's max_inline_data */
uint32_t sh_sq_wqe_size(uint32_t max_sge, uint32_t max_inline);

/* shm.c */
int sh_seg_create(struct sh_context *ctx);
void sh_seg_destroy(struct sh_context *ctx);
int sh_layout_compute(struct sh_layout *l, uint32_t mtu, uint32_t ring_depth,
		      uint32_t max_qp, uint32_t max_mr);
struct sh_ring *sh_ring_at(const struct sh_layout *l, void *rings,
			   uint32_t index);
uint8_t *sh_ring_slot(const struct sh_layout *l, struct sh_ring *ring,
		      uint32_t pos);
struct sh_mr_slot *sh_seg_mr(struct sh_context *ctx, uint32_t index);
struct sh_peer *sh_peer_get(struct sh_context *ctx, const union ibv_gid *gid);
void sh_peer_put(struct sh_context *ctx, struct sh_peer *peer);
bool sh_peer_dead(struct sh_peer *peer);
void sh_gid_encode(union ibv_gid *gid, pid_t pid, int fd, uint32_t nonce,
		   uint64_t key);
uint64_t sh_now_ns(void);

/* mr.c (sh_read_allow/used: read pacing, bytes this card run may read) */
struct ibv_mr *sh_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int acc);
int sh_dereg_mr(struct ibv_mr *mr);
bool sh_peer_cma(struct sh_context *ctx, struct sh_peer *peer);
int sh_mr_check(const struct sh_layout *lay, const struct sh_seg *pub,
		uint32_t key, uint64_t addr, uint64_t len, uint32_t access);
enum ibv_wc_status sh_local_check(struct sh_context *ctx,
				  const struct ibv_sge *sge, uint32_t n,
				  uint32_t access);
enum ibv_wc_status sh_remote_read(struct sh_context *ctx,
				  struct sh_peer *peer, uint64_t va,
				  uint32_t rkey, const struct ibv_sge *dst,
				  uint32_t ndst, uint32_t dst_off, uint32_t len);
uint32_t sh_scatter(const struct ibv_sge *sge, uint32_t n, uint32_t off,
		    const void *src, uint32_t len);
uint32_t sh_read_allow(struct sh_context *ctx);
void sh_read_used(struct sh_context *ctx, uint32_t n);
uint32_t sh_gather(const struct ibv_sge *sge, uint32_t n, uint32_t off,
		   void *dst, uint32_t len);

/* match.c (the SRQ's calls: softhca_srq.h) */
/*
 * pkt: the header and the first SH_PKT_PEEK payload bytes, copied out of
 * the ring and checked; data: the payload, still in the ring.
 */
#define SH_PKT_PEEK (SH_TMH_LEN + SH_RVH_LEN)
/* (sh_rx_first, the first packet's decision: softhca_match.h) */
void sh_rx_more(struct sh_qp *qp, const struct sh_pkt *pkt,
		const uint8_t *data);
void sh_rx_abort(struct sh_qp *qp);

/* qp.c, egress.c (the send side), ingress.c (the receive side) */
struct ibv_qp *sh_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
int sh_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
int sh_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init);
int sh_destroy_qp(struct ibv_qp *qp);
int sh_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		 struct ibv_send_wr **bad);
int sh_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		 struct ibv_recv_wr **bad);
bool sh_qp_tx_step(struct sh_qp *qp);
bool sh_qp_rx_step(struct sh_qp *qp);
bool sh_qp_tx_ready(struct sh_qp *qp);
/*
 * Has the next inbound slot changed: a packet, or a forged seq to reject?
 * (Only connected QPs are watched: RTR, RTS or, dropping arrivals, ERR.)
 */
static inline bool sh_qp_rx_ready(struct sh_qp *qp)
{
	return qp->rxw >= 0 &&
	       atomic_load_explicit(&qp->in_slot->seq, memory_order_relaxed) !=
		       qp->in_empty;
}
void sh_rx_watch(struct sh_qp *qp);
void sh_rx_unwatch(struct sh_qp *qp);
void sh_ring_clear(struct sh_context *ctx, uint32_t index);
int sh_qp_queue_fin(struct sh_qp *qp, const uint8_t *hdr);
struct sh_pkt *sh_qp_out_slot(struct sh_qp *qp);
bool sh_qp_out_read_req(struct sh_qp *qp, uint32_t len, uint64_t va,
			uint32_t rkey, uint64_t *req_id);
void sh_qp_sq_complete(struct sh_qp *qp, enum ibv_wc_status status);
void sh_qp_sq_flush(struct sh_qp *qp, enum ibv_wc_status why);
void sh_qp_sq_pop(struct sh_qp *qp);

/* qperr.c: a step fails a QP (the scheduler flushes it after the step) */
void sh_qp_error(struct sh_qp *qp, enum ibv_wc_status why);
void sh_qp_bad_packet(struct sh_qp *qp);
void sh_qp_check_peer(struct sh_qp *qp);
void sh_qp_flush_wr(struct sh_qp *qp, struct sh_cq *cq, uint64_t wr_id,
		    enum ibv_wc_opcode opcode);

/* rndv.c: the card's rendezvous reads */
void sh_rndv_queue(struct sh_context *ctx, struct sh_read_job *job);
bool sh_rndv_ready(const struct sh_context *ctx);
bool sh_rndv_step(struct sh_context *ctx);
/* a READ_RESP for one of them (false: nobody asked, a bad packet) */
bool sh_rndv_data(struct sh_qp *qp, const struct sh_pkt *pkt,
		  const uint8_t *data);
void sh_rndv_drop(struct sh_context *ctx, struct sh_qp *qp);


/* A read response starts or ends (the only way resp.active changes). */
static inline void sh_qp_resp_active(struct sh_qp *qp, bool on)
{
	if (qp->resp.active == on)
		return;
	qp->resp.active = on;
	if (on)
		qp->ctx->tx_work++;
	else
		qp->ctx->tx_work--;
}



#endif /* SOFTHCA_PRIV_H */
