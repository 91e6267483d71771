/*
 * tm_dev.h - the one device code path: a TM-capable verbs device, its
 * TM-SRQ, and RC QPs attached to it.
 *
 * Contract
 * --------
 * Provider and mode.  tm_dev_open() picks a provider through struct
 * tm_verbs (verbs/tm_verbs.h):
 *   "auto"  (default): a libibverbs device whose tm_caps.flags has
 *           IBV_TM_CAP_RC (with several, the one nearest to the process:
 *           tm_near.h), else the soft HCA;
 *   "soft"  / "verbs": forced.  The environment variable TM_DEV_PROVIDER
 *           overrides cfg->provider when set, unless the caller settled
 *           the settings with tm_dev_config_set_params() (tm_dev_param.h).
 * and a mode (cfg->tm):
 *   TM_DEV_TM_ON  (default) tag matching: only a device that offers it;
 *   TM_DEV_TM_ANY tag matching where the provider's device offers it, else
 *                 the plain mode on it ("verbs": any RC-capable libibverbs
 *                 device, i.e. InfiniBand or RoCE with an SRQ and an active
 *                 port; "auto" still prefers the soft HCA to a libibverbs
 *                 device without tag matching);
 *   TM_DEV_TM_OFF the plain mode, on any RC-capable device of the provider
 *                 ("auto": the soft HCA).
 * dev->tm says which mode the device runs in.  Tag matching: one extended
 * CQ for the TM-SRQ (created with IBV_WC_EX_WITH_TM_INFO | BYTE_LEN |
 * QP_NUM), one plain CQ for sends and RDMA reads, and the TM-SRQ
 * (IBV_SRQT_TM) with the requested list size and op limit clamped to the
 * device's tm_caps (which are copied to dev->caps, with the clamped
 * values).  Plain: the same two CQs (the first without TM_INFO) and a
 * plain SRQ (ibv_create_srq); dev->caps.max_num_tags and max_ops are 0,
 * every message arrives in a plain buffer as IBV_WC_RECV with the TMH at
 * the start of its payload, and the caller matches all of them itself.
 * tm_dev_survey() says what this node offers, without keeping anything
 * open.
 *
 * Threads: the engine drives a device from one thread at a time, so by
 * default the QPs, the SRQ and both CQs are created on a thread domain
 * (ibv_alloc_td, and a parent domain over the PD that every object and MR
 * uses; CQs with IBV_CREATE_CQ_ATTR_SINGLE_THREADED), and the provider
 * takes no locks on the data path (mlx5: doc/mlx5-rules.md rule 22).
 * cfg->concurrent (for callers that use the device from several threads
 * at once) keeps a plain PD and locked objects; so does a provider
 * that cannot give a thread domain or parent domain (any failure: locks
 * only cost speed).  MR registration is thread safe either way.
 *
 * Everything after that is plain verbs: the engine posts to dev->srq,
 * polls dev->tm_cq / dev->send_cq and posts sends on the QPs with the inline
 * data-path verbs of <infiniband/verbs.h>; only the library verbs (QP
 * create/modify/destroy, MR reg/dereg, close) go through dev->verbs.
 *
 * Sizes (doc/mlx5-rules.md): max_ops 0 means "as the hardware allows":
 * 2 * max_num_tags + 2 (an ADD and a DEL per tag, and SYNCs, as UCX), at
 * most the device's tm_caps.max_ops and at most the largest value whose
 * command queue fits (mlx5 builds one with a 256-byte WQE per op within
 * max_qp_wr 64-byte blocks: the largest power of two <= max_qp_wr / 4);
 * an explicit max_ops is clamped the same way.  The TM-SRQ holds at least
 * TM_DEV_MIN_PLAIN plain WQEs.  The TM CQ holds plain WQEs + 3 per tag +
 * one per op + one per 2^14 plain WQEs (UCX's sizing); the send CQ
 * max(cq_size, max_peers * qp_max_send_wr); both at most max_cqe.
 *
 * Port and address: the first active port of the device (dev->port); on
 * Ethernet (RoCE) the GID index is chosen by type and address, in this
 * order: RoCE v2 IPv4, RoCE v2 IPv6 global, RoCE v2 IPv6 link-local, then
 * the same for RoCE v1 (UCX's order); on InfiniBand, index 0.  Path MTU is
 * min(local active MTU, the peer's, carried in the address);
 * max_rd_atomic / max_dest_rd_atomic are min(16, the device's caps).
 *
 * QPs, the hardware's layout (tm_dev_pair_*): in the plain mode one QP per
 * peer (pair->tx, on the SRQ; pair->rx NULL, and the address carries the
 * tx QP number in both fields).  With tag matching, per peer, an rx QP attached
 * to the TM-SRQ with no send queue (max_send_wr 0: on mlx5 this is the QP
 * the card uses for rendezvous offload, its reads and FINs) and a tx QP
 * (send queue qp_max_send_wr, also attached to the TM-SRQ: the peer card's
 * FINs arrive there).  Software posts sends and RDMA reads on tx only.
 * tx takes two SGEs and asks for the inline data its smallest WQE holds
 * (60 bytes on mlx5); pair->tx_max_inline is what the device granted (0
 * if it refused inline data, which costs nothing but the copy).
 * The address (struct tm_dev_pair_addr) carries both QP numbers; our tx
 * connects to the peer's rx and our rx to the peer's tx.
 *
 * The single-QP layout (tm_dev_qp_create/connect: one QP per peer with a
 * send queue, on the TM-SRQ) is kept until the engine moves to pairs; on
 * a real card it gets no rendezvous offload.  Its address (struct
 * tm_dev_addr: gid, lid, qp_num, mtu) is exchanged out of band;
 * tm_dev_qp_connect() moves it to RTR and RTS towards the peer.
 *
 * MRs: tm_dev_reg()/tm_dev_dereg() are plain ibv_reg_mr()/ibv_dereg_mr(),
 * for long-lived buffers.  Per-message buffers go through
 * tm_dev_mem_get()/tm_dev_mem_put() instead, which by default use a
 * registration cache (libucs's rcache; see "Registration cache" below).
 *
 * All functions return enum tm_status (tm_status.h) and nothing here
 * prints: tm_dev_open() returns TM_ERR_INVALID for an unknown provider,
 * TM_ERR_NO_DEVICE when no TM-capable device answers, TM_ERR_IO (errno
 * kept from the failing verbs call) when setting one up fails; a
 * registration cache it could not create is noted in dev->rcache_off.
 */
#ifndef TM_DEV_H
#define TM_DEV_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include "tm_status.h"

/* verbs/tm_verbs.h: only the device layer calls through the table. */
struct tm_verbs;

struct tm_dev_config {
	const char *provider;  /* "auto", "soft", "verbs"; NULL = "auto" */
	const struct tm_verbs *verbs; /* tests: use this table, not provider's */
	uint32_t max_num_tags; /* 0: the device maximum */
	uint32_t max_ops;      /* 0: as the hardware allows ("Sizes") */
	uint32_t srq_max_wr;   /* plain WQEs the TM-SRQ can hold (raised to 33) */
	uint32_t qp_max_send_wr;
	uint32_t cq_size;      /* send CQ, at least (and a floor for the TM CQ) */
	uint32_t max_peers;    /* peers expected (sizes the send CQ); 0: unknown */
	int rcache;                  /* cache tm_dev_mem_get() MRs (default 1);
				      * TM_DEV_RCACHE=0/1 overrides */
	uint32_t rcache_max_regions; /* unused regions kept: 0 = default
				      * (1024), at most half the device's
				      * max_mr */
	int concurrent;              /* several threads may use the device
				      * at once: no thread domain */
	int tm;                      /* TM_DEV_TM_ON / _ANY / _OFF ("Provider
				      * and mode") */
	int settled;                 /* set by tm_dev_config_set_params():
				      * provider and rcache are final, the
				      * environment is not read */
};

enum { TM_DEV_TM_ON = 0, TM_DEV_TM_ANY, TM_DEV_TM_OFF };

struct tm_dev_caps {
	uint32_t max_num_tags;
	uint32_t max_ops;
	uint32_t max_rndv_hdr_size;
	uint32_t max_sge;
};

/* Counters of tm_dev_mem_get()/put(); regs - deregs = MRs it holds. */
struct tm_dev_mem_stats {
	uint64_t gets;   /* successful tm_dev_mem_get() calls (approximate
			  * when several threads call it at once) */
	uint64_t regs;   /* registrations they needed (misses) */
	uint64_t deregs; /* registrations released */
	uint64_t fails;  /* tm_dev_mem_get() calls that failed */
	uint64_t merges; /* cached regions a larger one absorbed (counted
			  * by libucs's merge op: UCX >= 1.18; else 0) */
};

struct ucs_rcache;

struct tm_dev {
	const struct tm_verbs *verbs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;        /* every object's and MR's: the parent
				   * domain when there is a thread domain */
	struct ibv_pd *base_pd;   /* the protection domain under it */
	struct ibv_td *td;        /* NULL: objects lock (see "Threads") */
	struct ibv_cq_ex *tm_cq;  /* TM-SRQ: list ops and receives */
	struct ibv_cq *send_cq;   /* sends and software RDMA reads */
	struct ibv_srq *srq;      /* the TM-SRQ, or the plain SRQ */
	int tm;                   /* 1: tag matching; 0: the plain mode */
	struct tm_dev_caps caps;
	uint8_t port;
	uint8_t link_layer;       /* IBV_LINK_LAYER_* of the port */
	uint16_t lid;
	enum ibv_mtu mtu;
	union ibv_gid gid;
	int gid_index;            /* sgid_index used in address vectors */
	uint32_t qp_max_send_wr;
	uint32_t srq_max_wr;      /* plain WQEs the TM-SRQ holds (>= 33) */
	uint32_t tm_cq_size, send_cq_size;
	uint32_t cq_poll_max;     /* completions one ibv_start_poll may go
				   * on to with ibv_next_poll (see
				   * tm_dev_start_poll) */
	int rxe;                  /* the kernel's soft-RoCE (tm_dev_is_rxe) */
	uint8_t max_rd_atomic, max_dest_rd_atomic;
	uint32_t max_msg_sz;      /* port's: larger RDMA reads must be split */
	char name[64];            /* provider:device, for messages */
	/*
	 * The registration cache, made by the first tm_dev_mem_get() while
	 * rcache_want says so (libucs's thread and descriptors come with it);
	 * NULL: tm_dev_mem_get() registers, or nothing was got yet.
	 */
	struct ucs_rcache *rcache;
	int rcache_want;          /* wanted, not made yet */
	unsigned long rcache_regions; /* its size, from the config */
	pthread_mutex_t rcache_lock;  /* makes it once */
	int rcache_setup;         /* rcache_lock initialised */
	const char *rcache_off;   /* why there is no cache although one was
				   * asked for (libucs's words), else NULL;
				   * known after the first tm_dev_mem_get() */
	struct tm_dev_mem_stats mem_st; /* relaxed atomics: read them so */
};

/* The hardware needs at least this many plain WQEs on a TM-SRQ. */
#define TM_DEV_MIN_PLAIN 33u

struct tm_dev_addr {
	uint8_t gid[16];
	uint32_t qp_num;
	uint16_t lid;
	uint8_t mtu;      /* enum ibv_mtu; 0 (old peers): use ours */
	uint8_t pad;
};

/* A peer's QPs in the hardware layout (see above). */
struct tm_dev_pair {
	struct ibv_qp *rx; /* on the TM-SRQ, no send queue */
	struct ibv_qp *tx; /* sends and RDMA reads */
	/* the inline limit tx was created with (what the device reported
	 * back): a send of at most this many bytes may be IBV_SEND_INLINE */
	uint32_t tx_max_inline;
};

/* What the modex must carry for a pair. */
struct tm_dev_pair_addr {
	uint8_t gid[16];
	uint32_t rx_qpn;
	uint32_t tx_qpn;
	uint16_t lid;
	uint8_t mtu;       /* enum ibv_mtu */
	uint8_t pad;
};

void tm_dev_config_default(struct tm_dev_config *cfg);
int tm_dev_open(const struct tm_dev_config *cfg, struct tm_dev **out);
/* Why this thread's last tm_dev_open() failed, in words (or NULL): the
 * device layer prints nothing, the caller reports it. */
const char *tm_dev_open_why(void);
void tm_dev_close(struct tm_dev *dev);

/* What a device offers (struct tm_dev_survey). */
enum { TM_DEV_HAS_TM = 1, TM_DEV_HAS_RC = 2 };

/* A node's devices: for each table the best device's TM_DEV_HAS_* (a TM
 * one before a plain one) and its name; 0 and "" when there is none. */
struct tm_dev_survey {
	int verbs;            /* libibverbs */
	char verbs_name[64];
	int soft;             /* the soft HCA (its tag matching can be off:
			       * softhca(7)) */
	char soft_name[64];
};

/* Opens each device briefly, as tm_dev_open() would; prints nothing.  A
 * device counts only with an active port (an uncabled card is none). */
void tm_dev_survey(struct tm_dev_survey *s);
/* The same with table card in libibverbs' place (tests: the soft HCA
 * playing a card, softhca(7) SOFTHCA_PORT_DOWN). */
void tm_dev_survey_with(struct tm_dev_survey *s, const struct tm_verbs *card);

/*
 * Does libibverbs list a device with RC tag matching?  The soft HCA is not
 * a libibverbs device and does not count.  1 or 0; with 1, the device's
 * name in name[len].  Opens the device briefly, as tm_dev_open() would.
 */
int tm_dev_card_present(char *name, size_t len);

int tm_dev_qp_create(struct tm_dev *dev, struct ibv_qp **out);
void tm_dev_qp_addr(struct tm_dev *dev, struct ibv_qp *qp,
		    struct tm_dev_addr *addr);
int tm_dev_qp_connect(struct tm_dev *dev, struct ibv_qp *qp,
		      const struct tm_dev_addr *remote);
int tm_dev_qp_destroy(struct tm_dev *dev, struct ibv_qp *qp);

/* Both QPs in INIT; on failure nothing is left behind. */
int tm_dev_pair_create(struct tm_dev *dev, struct tm_dev_pair *pair);
void tm_dev_pair_addr(struct tm_dev *dev, const struct tm_dev_pair *pair,
		      struct tm_dev_pair_addr *addr);
/* tx -> remote rx, rx -> remote tx; both to RTS. */
int tm_dev_pair_connect(struct tm_dev *dev, struct tm_dev_pair *pair,
			const struct tm_dev_pair_addr *remote);
/* Destroys what is set (either may be NULL). */
int tm_dev_pair_destroy(struct tm_dev *dev, struct tm_dev_pair *pair);

/*
 * The Linux soft-RoCE provider (rxe) of rdma-core before 55 advances its
 * CQ's consumer index twice when ibv_next_poll() finds the CQ empty and
 * ibv_end_poll() follows, as the verbs require: the index passes the
 * producer's, and from then on the CQ hands out stale or zeroed slots as
 * completions (garbage wr_ids) and loses real ones.  The kernel driver
 * names the device by vendor_id 0xFFFFFF; where a kernel leaves it 0, its
 * name tells (tm_dev_is_rxe).  On it dev->cq_poll_max is 1: a caller never
 * calls ibv_next_poll() but ends each poll after its first completion
 * (start_poll then end_poll is right on every version); elsewhere it is
 * UINT32_MAX.
 */
#define TM_DEV_RXE_VENDOR_ID 0xFFFFFFu

/* 1 when a device of this name and vendor_id is the kernel's rxe: its
 * vendor_id, or (vendor_id 0) a name starting "rxe", the convention
 * rdma-core's own rxe provider falls back on to know its devices. */
int tm_dev_is_rxe(const char *name, uint32_t vendor_id);

/*
 * ibv_start_poll with its return value sorted: TM_OK (a completion is
 * current: read it, then ibv_end_poll), TM_ERR_NOT_FOUND (empty: ENOENT,
 * no end_poll), TM_ERR_IO (any other value: the CQ failed).
 */
static inline int tm_dev_start_poll(struct ibv_cq_ex *cq)
{
	struct ibv_poll_cq_attr attr = { .comp_mask = 0 };
	int ret = ibv_start_poll(cq, &attr);

	if (!ret)
		return TM_OK;
	return ret == ENOENT ? TM_ERR_NOT_FOUND : TM_ERR_IO;
}

/* access: IBV_ACCESS_* flags; LOCAL_WRITE is always added. */
int tm_dev_reg(struct tm_dev *dev, void *addr, size_t len, int access,
	       struct ibv_mr **out);
int tm_dev_dereg(struct tm_dev *dev, struct ibv_mr *mr);

/*
 * Registration cache
 * ------------------
 * tm_dev_mem_get() returns in *mr an MR whose lkey/rkey cover
 * [addr, addr + len) (len > 0), holding it until tm_dev_mem_put(dev, mr).
 * With the cache (dev->rcache) the MR is a view of a cached region: its
 * addr/length are the region's (page-aligned, possibly larger than asked),
 * it must not be passed to tm_dev_dereg() or to the verbs, and it stays
 * registered after the put until the memory is unmapped (munmap, a free()
 * that returns memory to the system, ...: libucm's VM_UNMAPPED event), the
 * cache evicts it, or the device closes.  Memory freed and mapped again at
 * the same address is therefore registered again, never served from a
 * stale entry.  Without the cache the calls are tm_dev_reg()/dereg().
 *
 * access: IBV_ACCESS_* flags.  Unlike tm_dev_reg(), LOCAL_WRITE is not
 * implied: a request without any write access (e.g. REMOTE_READ only, a
 * rendezvous send buffer) is registered read-only, so that read-only memory
 * can be sent; one with LOCAL_WRITE, REMOTE_WRITE or REMOTE_ATOMIC is
 * registered LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ.  The cache can hand
 * out an MR with more access than asked (a writable region also serves a
 * read-only request).
 *
 * The cache is made by the first tm_dev_mem_get() (dev->rcache_want until
 * then), not at open: libucs starts an async thread with five descriptors
 * for it, which a process that registers nothing per message never needs.
 *
 * Both calls are thread-safe.  Deregistrations may also happen in whichever
 * thread next calls into the cache, in libucs's async thread (after 64 MB
 * of unmapped-but-registered memory), and in fork()'s prepare handler.
 */
int tm_dev_mem_get(struct tm_dev *dev, void *addr, size_t len, int access,
		   struct ibv_mr **mr);
void tm_dev_mem_put(struct tm_dev *dev, struct ibv_mr *mr);

#endif /* TM_DEV_H */
