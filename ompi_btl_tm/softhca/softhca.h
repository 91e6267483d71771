/*
 * softhca.h - the soft HCA: an in-process verbs provider with hardware tag
 * matching, for machines without a TM-capable card.
 *
 * Contract
 * --------
 * The soft HCA fills the same rdma-core structures a kernel provider fills
 * (struct verbs_context, ibv_cq_ex, ibv_qp, ibv_srq, ibv_mr) so that the
 * inline verbs of <infiniband/verbs.h> dispatch to it unchanged; the library
 * verbs are reached through softhca_verbs() (see verbs/tm_verbs.h).
 *
 * One device, "softtm0", one port, RC QPs only.  What it implements:
 *  - ibv_query_device_ex with tm_caps (IBV_TM_CAP_RC), ibv_query_port,
 *    query_gid: the GID names the context (pid + instance), so peers connect
 *    with the usual RTR attributes (ah_attr.is_global, grh.dgid, dest_qp_num).
 *  - PDs; MRs with lkey == rkey; an rkey grants exactly [addr, addr+length)
 *    with the access flags given at registration.
 *  - CQs: ibv_create_cq_ex with the extended poll API (all read_* callbacks,
 *    including read_tm_info) and the legacy ibv_poll_cq.  CQs grow as needed:
 *    a completion is never lost to overrun.
 *  - Basic SRQs, QP receive queues, and the TM-SRQ (IBV_SRQT_TM) of
 *    doc/DESIGN.md section 3; ibv_post_srq_ops ADD / DEL / SYNC.
 *  - ibv_post_send: IBV_WR_SEND (with IBV_SEND_INLINE / SIGNALED) and
 *    IBV_WR_RDMA_READ.  Other opcodes, and a WR longer than the port's
 *    max_msg_sz (cfg.max_msg_sz), fail with EINVAL; as on mlx5, a
 *    full send queue (or none: max_send_wr 0), more SGEs than the QP's
 *    max_send_sge, or inline data past its max_inline_data (what
 *    create_qp returns: 60 bytes with one SGE) fail with ENOMEM.  QP and
 *    TM-SRQ creation refuse what mlx5 refuses (doc/mlx5-rules.md).
 *
 * The TM-SRQ, as the card does it (rdma-core/mlx5 semantics):
 *  - ADD returns its handle in wr->tm.handle at post time; a full list fails
 *    the post with ENOMEM (bad_wr set); more than max_sge SGEs: EINVAL.
 *  - The card takes unexpected_cnt from an op only when the op carries
 *    IBV_OPS_TM_SYNC (as mlx5 does); an op without it carries the last count
 *    reported.  An ADD processed while that count differs (16 bits) from the
 *    card's unexpected counter is inactive; any op processed while they are
 *    equal activates every entry on the list.
 *  - An arriving EAGER/RNDV that matches no active entry is unexpected: the
 *    whole message goes to the next plain SRQ buffer, completion opcode
 *    IBV_WC_TM_RECV with neither TM_MATCH nor TM_DATA_VALID (what a ConnectX
 *    card reports), and the card's counter goes up by one.  NO_TAG and FIN
 *    complete as IBV_WC_TM_NO_TAG.  A message too short for its TMH (or RVH),
 *    with an unknown opcode, or an RNDV longer than max_rndv_hdr_size is
 *    malformed: delivered whole to a plain buffer as IBV_WC_RECV, uncounted.
 *    With no plain buffer the message waits on its QP (receiver not ready).
 *  - Matches: TM_MATCH|TM_DATA_VALID in one completion for an eager message
 *    of at most one MTU; otherwise a TM_MATCH completion at once and a
 *    TM_DATA_VALID completion (same recv_wr_id) when the data is in place.
 *    Match and unexpected completions appear in the order the card decided
 *    them.  An eager payload longer than the tagged buffer: exactly the
 *    buffer's length is written and the data completion has status
 *    IBV_WC_LOC_LEN_ERR with byte_len the full payload length.  An RNDV
 *    whose data does not fit: status IBV_WC_TM_RNDV_INCOMPLETE, flags
 *    TM_MATCH|TM_DATA_VALID (mlx5's one-completion form; strict: see
 *    softhca_config) and the TMH+RVH (as much as fits) in the buffer.  Matched RNDV: the card reads
 *    the data (RDMA read checked against the sender's rkey table), completes
 *    TM_DATA_VALID, then sends FIN (TMH copy with opcode FIN, then the RVH)
 *    to the sender.  A read the sender's rkey does not allow completes with
 *    IBV_WC_REM_ACCESS_ERR and no FIN; one longer than max_msg_sz (only
 *    into a tagged buffer that long) with IBV_WC_REM_INV_REQ_ERR and no
 *    FIN, as a card that cannot do it.
 *  - DEL of an entry a message consumed completes with IBV_WC_TM_ERR.
 *    A handle is reused only after its final completion was polled and no
 *    op naming it is outstanding.
 *  - List ops are unsignalled unless IBV_OPS_SIGNALED.  An op stays
 *    outstanding until a signalled op at or after it has been polled (as on
 *    mlx5); more than max_ops outstanding fails the post with ENOMEM.
 *  - IBV_WC_TM_SYNC_REQ exactly where mlx5's provider sets it: on a
 *    signalled ADD/DEL completion when the card's counter at the op
 *    differs from the count the last ADD with IBV_OPS_TM_SYNC had reported
 *    when this entry's ADD was posted (a DEL reports its entry's ADD); on an unexpected arrival when the card is more
 *    than 0x3fff ahead of the last reported count; never on SYNC,
 *    matched, NO_TAG or data completions.
 *
 * Transport: each context owns two anonymous shared-memory segments
 * (memfds; nothing in /dev/shm, nothing left after any exit) that the
 * owner hands over a UNIX socket its GID names to a peer of the same user
 * presenting the GID's key, and a peer gives its key only to the process
 * the GID names (softhca(7), SECURITY; no ptrace permission needed; a connect that
 * cannot be made fails the RTR transition with EHOSTUNREACH or EACCES and
 * says why on stderr): one holds
 * the rkey table and is sealed so that peers map it read-only, the other
 * one inbound packet ring per QP; a sender copies MTU-sized packets into its
 * peer's ring.  Nothing a peer writes is trusted: its segment header is
 * checked once at connect (a bad one fails the RTR transition with EPROTO),
 * and an arriving packet that breaks the protocol (length, kind, offsets,
 * ring counters) is dropped, counted in softhca_stats.bad_packets, and
 * moves the QP to the error state.  RDMA
 * reads use process_vm_readv after checking the owner's rkey table; if the
 * kernel refuses cross-memory attach (or force_copy_read is set) they fall
 * back to read request/response packets served by the owner's card.  A peer
 * that died (exited, killed, or a zombie) moves the QP to the error state:
 * the WR at the head completes IBV_WC_RETRY_EXC_ERR and the rest flush.
 * WRs posted to a QP in the error state complete IBV_WC_WR_FLUSH_ERR.
 * The card notices within about 100 ms, and before starting any WR it
 * reads the peer's liveness word (a robust mutex its owner holds, which
 * the kernel marks when the owner dies: no syscall, no clock read), or,
 * where that word tells nothing, looks at the process if it has not for
 * a clock tick (a few ms); a send that was already in the ring of a peer
 * that then died counts as delivered, as an acked RC send does.
 *
 * Where the card's work happens: each soft context has a "card" that runs
 * inside verbs calls on that context (post_*, poll), under one lock per
 * context, so the provider is thread safe.  The lock is left out where
 * the application promised one thread at a time, as mlx5 leaves its locks
 * out: a context opened with single_threaded (env SOFTHCA_SINGLE_THREADED),
 * or one whose QPs, SRQs and CQs all live on a single thread domain
 * (ibv_alloc_td + ibv_alloc_parent_domain; CQs created on that parent
 * domain with IBV_CREATE_CQ_ATTR_SINGLE_THREADED).  MR registration stays
 * thread safe in every mode.  The scheduling mode decides how
 * much it does per call: AUTO runs it to quiescence, except that rendezvous
 * reads (card reads and IBV_WR_RDMA_READ) move at most 1 MiB per call and
 * only in polls, once the application has stopped posting for a few
 * microseconds (so a process posting a batch of sends is not held up by
 * reads its peer could overlap with its own), RANDOM does a random
 * amount of randomly chosen work (at least one item when any is ready),
 * MANUAL does nothing until softhca_step() is called (tests).
 */
#ifndef SOFTHCA_H
#define SOFTHCA_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include "verbs/tm_verbs.h"
#include "softhca_param.h"

enum softhca_sched {
	SOFTHCA_SCHED_AUTO,
	SOFTHCA_SCHED_RANDOM,
	SOFTHCA_SCHED_MANUAL,
};

struct softhca_config {
	uint32_t max_num_tags;      /* tagged entries per TM-SRQ list */
	uint32_t max_ops;           /* outstanding list operations */
	uint32_t max_rndv_hdr_size; /* TMH + RVH + metadata */
	uint32_t max_sge;           /* SGEs per tagged buffer */
	uint32_t mtu;               /* path MTU: packet payload size */
	uint32_t ring_depth;        /* packets per QP inbound ring */
	uint32_t max_qp;            /* QPs per context */
	uint32_t max_mr;            /* MRs per context */
	uint32_t max_wr;            /* WRs per send queue / receive queue */
	enum softhca_sched sched;   /* default mode for new contexts */
	uint64_t seed;              /* RANDOM mode seed (0: from pid and time) */
	int force_copy_read;        /* never use process_vm_readv */
	int strict;                 /* mlx5-strict shapes (see below) */
	uint32_t max_msg_sz;        /* port max_msg_sz: longest SEND, RDMA
				     * read or card rendezvous read */
	int single_threaded;        /* contexts take no lock on the data
				     * path: one thread at a time uses each
				     * (as mlx5's MLX5_SINGLE_THREADED) */
	int no_tm;                  /* a device without tag matching: tm_caps
				     * all zero, IBV_SRQT_TM refused (EINVAL,
				     * as mlx5's kernel driver answers a list
				     * size above the device's, here zero) */
	int rxe_cq;                 /* rdma-core's rxe before 55: vendor_id
				     * 0xFFFFFF, and an ibv_next_poll() that
				     * finds the CQ empty, then end_poll,
				     * put its consumer index one past the
				     * producer's: the next poll returns the
				     * slot there, never written (all zero,
				     * wr_id 0).  The model hands out that
				     * first zeroed slot only.  2: the same
				     * on a kernel that leaves vendor_id 0:
				     * the device is named "rxe0" instead */
	int port_down;              /* its one port DOWN (no cable): a TM
				     * card that carries nothing */
};

/*
 * Defaults (the table in softhca_param.h) mirror a ConnectX-5/6: max_wr (max_qp_wr, and the card's
 * max_send_wqebb) 32768, max_ops 32768 (what mlx5 advertises: the same
 * 1 << log_max_qp_sz), 64 B rndv header, 1 SGE, max_msg_sz 1 GiB; 1023
 * tags (firmware dependent).  As on mlx5, a TM-SRQ asking for the
 * advertised max_ops is refused: its command queue needs 4 send blocks per
 * op, rounded up to a power of two, within max_wr blocks, so max_ops <=
 * max_wr / 4 (see doc/mlx5-rules.md, rule 2).
 *
 * strict (the default; TM_SOFTHCA_STRICT=0/1 where no config is set) is how
 * mlx5 behaves (doc/mlx5-rules.md rules 5, 10, 15, 16,
 * 17); strict = 0 is a more lenient model kept for the soft HCA's own
 * unit tests of one-QP-per-side set-ups:
 *  - a TM-SRQ with fewer than 33 plain WQEs (max_wr) is refused;
 *  - a matched RNDV arriving on a QP that has a send queue is not read by
 *    the card (only a QP created with max_send_wr = 0 is the card's
 *    rendezvous QP): it is handed to software as RNDV_INCOMPLETE;
 *  - the first completion of an offloaded RNDV has byte_len 0 (the length
 *    is in the DATA_VALID one);
 *  - RNDV handed to software: a MATCH completion with status
 *    IBV_WC_TM_RNDV_INCOMPLETE that keeps the tag, then a DATA_VALID
 *    completion (SUCCESS, byte_len = header bytes written) that frees it;
 *  - an eager message longer than the tagged buffer it matched consumes
 *    the entry without a tagged completion, completes the next plain
 *    buffer with IBV_WC_LOC_LEN_ERR (opcode IBV_WC_RECV) and moves the QP
 *    to the error state.
 */
void softhca_config_default(struct softhca_config *cfg);

/*
 * Config for contexts opened afterwards; EINVAL if a setting is out of
 * range (softhca_config_check() says which, and why).  Until one is set a
 * context's open takes the defaults with the SOFTHCA_* variables applied
 * (softhca_config_from_env, read once); a set config is never overridden
 * by the environment.
 */
int softhca_set_config(const struct softhca_config *cfg);

/* Why this thread's last context open failed on its config (a variable
 * that does not parse or is out of range), in words; NULL otherwise.
 * The soft HCA prints nothing: its caller reports this. */
const char *softhca_open_why(void);

/* The library-verbs table bound to the soft HCA. */
const struct tm_verbs *softhca_verbs(void);

/* ---- Card scheduling, for tests ---------------------------------------- */

enum softhca_work {
	SOFTHCA_WORK_OP,   /* process the oldest posted list op */
	SOFTHCA_WORK_RX,   /* process one arrived packet */
	SOFTHCA_WORK_TX,   /* move one packet of a send queue to its peer */
	SOFTHCA_WORK_READ, /* advance one card-side rendezvous read */
};
#define SOFTHCA_ANY_QP UINT32_MAX

/* Change a context's scheduling mode (seed used by RANDOM; 0 keeps it). */
void softhca_set_sched(struct ibv_context *ctx, enum softhca_sched sched,
		       uint64_t seed);

/*
 * Does one unit of the given kind of work on qp_num (or any QP), whatever
 * the mode.  Returns 1 if work was done, 0 if none of that kind was ready.
 */
int softhca_step(struct ibv_context *ctx, enum softhca_work kind,
		 uint32_t qp_num);

/* Runs every kind of work until nothing is ready; returns units done. */
int softhca_drain(struct ibv_context *ctx);

struct softhca_stats {
	uint16_t hw_unexpected_cnt; /* the card's unexpected counter */
	uint16_t sw_unexpected_cnt; /* the last count software reported */
	uint32_t list_entries;      /* entries on the TM list */
	uint32_t list_inactive;     /* of which inactive */
	uint32_t ops_outstanding;
	uint64_t ops_doorbells;     /* ibv_post_srq_ops calls that took an op */
	uint64_t adds_posted;       /* ADDs taken by those calls */
	uint64_t matched;           /* messages matched by the card */
	uint64_t unexpected;        /* tagged messages delivered unexpected */
	uint64_t rnr_waits;         /* times an arrival waited for a buffer */
	uint64_t card_reads;        /* rendezvous reads done by the card */
	uint64_t cma_reads;         /* reads done with process_vm_readv */
	uint64_t copy_reads;        /* reads done by request/response */
	uint64_t bad_packets;       /* malformed arrivals dropped (QP failed) */
	int lock_free;              /* the data path takes no lock now */
};

/* Snapshot of the card state of ctx's TM-SRQ (first one if several). */
int softhca_query_stats(struct ibv_context *ctx, struct softhca_stats *st);

#endif /* SOFTHCA_H */
