/*
 * mtl_tm.h - the Open MPI MTL component "tm": glue between pml cm and the
 * matching engine.  This directory is the only place that includes Open
 * MPI headers.
 *
 * Files
 * -----
 *   mtl_tm_component.c  MCA parameters, open/close, selection, init
 *   mtl_tm.c            control path: device, QPs, modex, add/del procs,
 *                       add/del comm, progress
 *   mtl_tm_send.c       sends (blocking, nonblocking, buffered)
 *   mtl_tm_recv.c       receives (irecv, imrecv)
 *   mtl_tm_data.h       where a message's bytes are: in place, or Open
 *                       MPI's datatype helpers
 *   mtl_tm_probe.c      probes (iprobe, improbe)
 *   mtl_tm_cancel.c     MPI_Cancel of its requests
 *   mtl_tm_select.c     one provider for the job: each rank's offer, the
 *                       rule, the refusal
 *   mtl_tm_addr.c       the address in the modex, connecting on first use,
 *                       the connection manager's progress, routes
 *   mtl_tm_modex.c      the modex key of each initialisation
 *   mtl_tm_pvar.c       MPI_T performance variables (mtl_tm_pvar.h)
 *   mtl_tm_compat.h     the differences between Open MPI 4.1 and 5.0
 *
 * One provider for the job
 * ------------------------
 * Every rank publishes what it could use (struct mtl_tm_modex: can, node)
 * with its addresses, for the provider and mode it guessed from what it
 * knows at init (itself, and whether all ranks share its node).  At the
 * first add_procs every rank reads every offer and applies the same rule
 * (mtl_tm_select.c); if some rank guessed otherwise, every rank opens the
 * chosen device, and the addresses go round once more (a PMIx fence,
 * under the ".again" key of "Modex keys"), so no job mixes providers or
 * modes.
 *
 * Modex keys
 * ----------
 * A process initialises the MTL once per MPI_Init, and with MPI-4
 * sessions once more each time it starts a session after finalising its
 * last one.  Each initialisation publishes under a key of its own,
 * "mtl.tm.addr.<n>" (n: mtl_tm.inits, the same on every rank), because
 * PMIx's client answers a key it has read before from what it kept:
 * a reused key gave a peer's previous address (mtl_tm_modex.c).
 *
 * Addressing (connect on first use): a fixed-size address per rank in the
 * modex, a peer's QP pair made at its first use, processes of other jobs
 * the same way: mtl_tm_addr.c.
 *
 * Tag layout: the engine's (engine/tm_match.h): 14 bits of context id, 18
 * of source rank, 32 of user tag; hence mtl_max_contextid and the
 * communicator size limit checked at add_comm.
 *
 * Envelope
 * --------
 * The engine's tag carries (ctx, src, tag) = (the communicator's context
 * id, the sender's rank in that communicator (its local group for an
 * intercommunicator), the MPI tag); the destination is the engine peer of
 * the QP this process keeps for the destination's rank in the job.
 * MPI_ANY_SOURCE / MPI_ANY_TAG become TM_ANY_SRC / TM_ANY_TAG
 * (mtl_tm_recv_env); the tag layout keeps ANY_TAG off Open MPI's negative
 * internal tags.
 *
 * Routes: a communicator's (comm->c_pml_comm, which pml cm leaves to the
 * MTL: its route table) keeps, for each rank of its (remote) group, one
 * word once first used: the engine peer and, once a send went there, the
 * upper half of a send's tag (the rank's context id of the communicator
 * and our rank in it), so that a send finds both with one load rather
 * than through the group, the proc, its endpoint and the context ids
 * (mtl_tm_route).
 *
 * Locking and completion
 * ----------------------
 * With MPI threads (opal_using_threads()) every engine call holds
 * mtl_tm.lock.  Without, a send or receive (its entry installed for
 * that, below) calls the engine with no lock and no look at the done
 * list below, and
 * the engine's callbacks complete the request towards pml cm at once
 * (fill in the status, call pml cm's completion callback), from inside
 * the engine call: the engine lets a callback call back into it
 * (engine/tm_engine.h, "Completion"), so pml cm code that starts new
 * operations from there is fine.  With MPI threads pml cm code must not
 * run under the lock (it may start operations, which take it): the
 * callbacks only queue the request on mtl_tm.done, setting its
 * completion function (mtl_tm_request.complete, of the file that started
 * it), and after the engine call mtl_tm_unlock_and_complete() drops the
 * lock and then completes them.  A buffered send's own copy takes that
 * way in either mode (mtl_tm_send.c: its pml cm request keeps the copy's
 * identity after the engine call that may already have finished it);
 * without threads the next progress call completes it.  A send the
 * engine finished in the call (TM_DONE: an eager standard send) has no
 * callback: the sender completes it after the call, with no pass over
 * the list.  Calls run from the send and receive files to this header
 * and mtl_tm_addr.c, never to mtl_tm.c.
 *
 * Two sets of send and receive entry points (mtl_tm.super's mtl_send,
 * mtl_isend, mtl_irecv), installed by mtl_tm_threads_check: without MPI
 * threads each is two tests (the bytes in place (mtl_tm_data.h), the
 * route known) and then the engine call, and anything else takes the
 * general entry, made of the same steps, out of line; with MPI threads
 * the general entries are installed themselves.  Open MPI decides
 * opal_using_threads() before it initialises the MTL, except when an MPI
 * 5.0 session asks for MPI_THREAD_MULTIPLE after the first one started:
 * the general entries then come at that session's first communicator
 * (add_comm) or at the first progress call that sees the flag, whichever
 * is first (mtl_tm_progress tests it at every call, so threads that only
 * wait never run the engine unlocked).  The general entries, the
 * callbacks and the lock follow opal_using_threads() itself, so the two
 * agree while the entries change.
 *
 * Threads (MPI_THREAD_MULTIPLE): the thread that completes a request is
 * whichever drove the engine, often not the one waiting for it (Open MPI
 * keeps all but one waiting thread asleep on a condition variable, and
 * the completion wakes it).  bench/README.md ("Threads") has what was
 * measured and tried about the cost of that hand-over.
 */
#ifndef MTL_TM_H
#define MTL_TM_H

#include "ompi_config.h"
#include "ompi/mca/mtl/mtl.h"
#include "mtl_tm_compat.h"
#include "mtl_tm_tsan.h"
#include "opal/util/proc.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "dev/tm_dev.h"
#include "dev/tm_dev_param.h"
#include "dev/tm_dev_cm.h"
#include "engine/tm_engine.h"
#include "engine/tm_engine_param.h"

BEGIN_C_DECLS

/*
 * MCA parameters (storage registered with mca_base_component_var_register).
 * Besides the component's own (priority, verbose, the deprecated
 * rndv_threshold), one per setting that a layer describes: the engine's
 * table (engine/tm_engine_param.h) then the device layer's
 * (dev/tm_dev_param.h), registered by one loop (mtl_tm_component.c).  Each
 * default is its layer's; none is written here.
 */
#define MTL_TM_NSETTINGS (TM_ENGINE_NPARAMS + TM_DEV_NPARAMS)
#define MTL_TM_DEV0 TM_ENGINE_NPARAMS /* setting index of the device's first */

struct mtl_tm_params {
	int priority;
	int verbose;
	size_t rndv_threshold;   /* deprecated: eager_limit + 1 */
	int rndv_var;            /* its MCA variable index */
	/* MCA storage of each setting, in the type of its descriptor */
	union {
		unsigned int u;
		unsigned long long u64;
		size_t sz;
		bool b;
		int e;
	} store[MTL_TM_NSETTINGS];
	int var[MTL_TM_NSETTINGS]; /* MCA variable indices */
	int dev_env_rc;          /* tm_dev_param_defaults(): a bad variable */
	unsigned int dev_env_bad;
};

/*
 * One provider for the job (mtl_tm_select.c).  What a rank could use ...
 */
enum {
	MTL_TM_CAN_CARD = 1,     /* a libibverbs device with tag matching */
	MTL_TM_CAN_RDMA = 2,     /* a libibverbs RC device (InfiniBand, RoCE) */
	MTL_TM_CAN_SOFT = 4,     /* the soft HCA */
	MTL_TM_CAN_SOFT_TM = 8,  /* ... with tag matching (softhca_no_tm off) */
};
/* ... and what the job uses. */
enum {
	MTL_TM_USE_NONE = 0,
	MTL_TM_USE_CARD,         /* "verbs", tag matching */
	MTL_TM_USE_SOFT,         /* "soft", tag matching */
	MTL_TM_USE_SOFT_PLAIN,   /* "soft", every message matched in software */
	MTL_TM_USE_RDMA,         /* "verbs" without tag matching, likewise */
};

/* The modex blob; all integers in host order (one architecture). */
#define MTL_TM_MODEX_MAGIC 0x746d3034u /* "tm04" */
struct mtl_tm_modex {
	uint32_t magic;
	uint32_t pad;
	char provider[8];        /* tm_dev_provider_name(): "soft", "verbs" */
	uint32_t can;            /* MTL_TM_CAN_*: what this rank could use */
	uint32_t use;            /* MTL_TM_USE_*: what it opened (its guess) */
	char node[64];           /* its host's name, for messages only
				  * (one node: Open MPI's locality) */
	struct tm_cm_addr cm;    /* its connection manager (tm_dev_cm.h) */
};

enum mtl_tm_ep_state {
	MTL_TM_EP_NONE = 0,      /* never used */
	MTL_TM_EP_CONNECTING,    /* engine peer held (tm_engine.h) */
	MTL_TM_EP_UP,
	MTL_TM_EP_FAILED,        /* its requests failed */
};

struct mtl_tm_endpoint {
	struct tm_dev_pair qps;  /* rx (no send queue) and tx, tm_dev.h */
	opal_process_name_t name; /* its process: of this job, or of another
				  * (spawn, connect/accept, join) */
	uint32_t peer;           /* engine peer id, once connected */
	bool connected;          /* peer is set (any state but NONE, or
				  * FAILED before the engine knew it) */
	int state;               /* enum mtl_tm_ep_state */
};

struct mtl_tm_module {
	mca_mtl_base_module_t super;
	struct tm_dev *dev;
	struct tm_engine *eng;
	uint32_t nprocs;         /* the job's size */
	uint32_t can;            /* MTL_TM_CAN_* of this rank */
	int use;                 /* MTL_TM_USE_* it opened */
	bool agreed;             /* the job's choice is known (add_procs) */
	bool again;              /* ... and needed a second exchange */
	uint32_t inits;          /* initialisations in this process so far,
				  * this one included: the modex key's n */
	uint32_t my_vpid;
	struct mtl_tm_endpoint *eps; /* [nprocs], indexed by rank in the job */
	/* processes of other jobs, by mtl_tm_proc_id: made at their first
	 * use or their first request (mtl_tm_addr.c) */
	struct mtl_tm_others *others;
	struct tm_cm *cm;        /* the connection manager (mtl_tm_addr.c) */
	uint32_t cm_skip;        /* idle turns since it was polled */
	bool cm_busy;            /* a connection is under way: polled on
				  * every opal_progress (mtl_tm_addr.c) */
	uint32_t nconnected;     /* connections made through it (pvar) */
	unsigned int connect_timeout_ms; /* MCA mtl_tm_connect_timeout */
	/* The engine is single threaded: every engine call holds this. */
	opal_mutex_t lock;
	/*
	 * Requests the engine finished, with MPI threads (or a buffered
	 * send's own copy): its callbacks only queue them here, under the
	 * lock; they are completed towards pml cm after the lock is dropped,
	 * because a completion may start new operations (a request's
	 * complete_cb, a blocking caller) that take the lock.
	 */
	ucs_list_link_t done;
	bool progress_registered;
	/* mtl_tm_progress's one test besides MPI threads: an engine, and
	 * nothing on done (mtl_tm_done_add clears it, the pass over done
	 * sets it again) */
	bool progress_fast;
	/* super's send and receive entry points are the general ones: MPI
	 * threads were seen (mtl_tm_threads_check) */
	bool threads;
};

/*
 * What pml cm allocates after mca_mtl_request_t for each request
 * (mtl_request_size): the engine's request, so that no allocation is
 * needed on the data path.  Blocking receives live on the caller's stack
 * and persistent requests reuse this memory: nothing here may outlive the
 * request's completion callback.
 */
enum mtl_tm_req_kind {
	MTL_TM_REQ_SEND = 1,
	MTL_TM_REQ_RECV = 2,
	MTL_TM_REQ_BSEND = 3,    /* pml cm's request of a buffered send: u.send
				  * keeps the identity of our own copy's send */
	MTL_TM_REQ_SEND_WAIT = 4, /* a blocking send's, on its stack: super
				  * unset, its caller waits for done */
};

struct mtl_tm_request {
	struct mca_mtl_request_t super;
	/* its completion towards pml cm, without the lock (mtl_tm_send.c,
	 * mtl_tm_recv.c): what mtl_tm_complete_done runs; set by the
	 * engine callback that puts it on mtl_tm.done */
	void (*complete)(struct mtl_tm_request *req);
	union {
		struct tm_send send;
		struct tm_recv recv;
	} u;
	int error;               /* blocking send: result, set at completion */
#ifdef MTL_TM_TSAN
	void *tsan_waiter;       /* mtl_tm_tsan.h */
#endif
	/* The flags a send or receive resets when it starts, and its kind:
	 * all at once, through `flags` (mtl_tm_req_start). */
	union {
		uint64_t flags;
		struct {
			/* first: a constant of kind alone is a small one */
			uint8_t kind;    /* enum mtl_tm_req_kind */
			bool pack_free;  /* pack_buf is ours: freed at
					  * completion */
			bool detached;   /* a buffered send's own request:
					  * freed at completion
					  * (mtl_tm_send.c) */
			/* done, cancel_wait: stored (release) after the
			 * results they guard, as their waiter reads them
			 * (acquire) without the lock, in another thread */
			bool done;       /* blocking send (no ompi
					  * request) */
			/* send cancel (mtl_tm_cancel.c, "Send cancel") */
			bool engine_done; /* the engine's callback ran */
			bool completed;  /* ... and pml cm was told */
			bool cancel_wait; /* mtl_tm_cancel waits
					  * for the outcome */
			bool cancel_result; /* ... cancelled or not */
		};
	};
	ucs_list_link_t done_link; /* on mtl_tm.done */
	struct opal_convertor_t *convertor; /* receive: where to unpack */
	void *pack_buf;          /* pack_free's buffer: a send's packed copy,
				  * a receive's staging copy of a
				  * non-contiguous type (u.recv.buf) */
	struct mtl_tm_request *bsend_waiter; /* our own copy: its pml cm
				  * request, while mtl_tm_cancel waits */
};

/*
 * A communicator's routes (comm->c_pml_comm, from add_comm to del_comm):
 * route[r], of rank r of its (remote) group, 0 until first used, then
 * MTL_TM_ROUTE_RECV and its engine peer (MTL_TM_ROUTE_PEER, the low bits
 * as they are: a mask gives the peer); with MTL_TM_ROUTE_SEND also the
 * upper 32 bits of a send's tag to it (tm_tag_make of its context id of
 * the communicator and our rank), in the upper 32 bits of the word.  One
 * aligned 64-bit word each, filled by OR: threads that fill the same rank
 * at once write the same bits.
 *
 * c_pml_comm points at route[0], the number of ranks in the word before
 * (add_routes: GCC folds no offset into an __atomic load's address).  It
 * is never NULL from add_comm to del_comm (Open MPI adds a communicator
 * to its pml before its first message); without the memory for the
 * routes it is MTL_TM_NO_ROUTES, of 0 ranks: the fast paths test only
 * the bound.
 */
#define MTL_TM_ROUTE_PEER 0x3fffffffu
#define MTL_TM_ROUTE_RECV 0x40000000u
#define MTL_TM_ROUTE_SEND 0x80000000u
extern const uint64_t mtl_tm_no_routes[1] __attribute__((visibility("hidden")));
#define MTL_TM_NO_ROUTES ((void *)(mtl_tm_no_routes + 1))

/* hidden, as -fvisibility=hidden defines it: the other files then reach
 * it directly, not through the GOT */
extern struct mtl_tm_module mtl_tm __attribute__((visibility("hidden")));
extern struct mtl_tm_params mtl_tm_params;
extern int mtl_tm_output;    /* opal_output stream, verbosity = verbose */
MTL_TM_DECLSPEC extern mca_mtl_base_component_2_0_0_t
	mca_mtl_tm_component;

/* mtl_tm_component.c */
void mtl_tm_show_error(const char *topic, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Setting i (< MTL_TM_NSETTINGS) of the engine or device table. */
const struct tm_param *mtl_tm_setting(unsigned i);
/* Its value as the MCA system resolved it (an enum below 0: UINT64_MAX). */
uint64_t mtl_tm_setting_value(unsigned i);
/* The device settings as the MCA system resolved them. */
void mtl_tm_dev_values(uint64_t values[TM_DEV_NPARAMS]);
/* Was MCA variable var set by the user (not left at its default)? */
bool mtl_tm_var_set(int var);

/* mtl_tm_select.c */
const char *mtl_tm_use_name(int use);
/* What MTL_TM_CAN_* bits offer, in words ("the soft HCA with tag
 * matching", "nothing"), in buf; returns buf. */
#define MTL_TM_CAN_STR_LEN 112
const char *mtl_tm_can_str(uint32_t can, char *buf, size_t len);
/* What this rank could use (its mtl_tm_provider and devices); the
 * libibverbs device's name in vname. */
uint32_t mtl_tm_can_local(char *vname, size_t vlen);
/* The rule, from the offers every rank shares and whether the job is on
 * one node. */
int mtl_tm_choose(uint32_t all_can, bool one_node);
/* The provider and mode of tm_dev_open() for a choice. */
void mtl_tm_use_config(int use, struct tm_dev_config *cfg);
bool mtl_tm_one_node(void);
/* The refusal at init, when this rank has nothing for the job. */
void mtl_tm_show_no_local(uint32_t can);
/* At add_procs: the job's choice in *use from every rank's blob.
 * OMPI_SUCCESS: what every rank opened; OMPI_ERR_WOULD_BLOCK: not what
 * every rank opened, open it and exchange addresses again;
 * OMPI_ERR_UNREACH: nothing fits (the message is out). */
int mtl_tm_agree(int mine, int *use);
void mtl_tm_modex_fill(struct mtl_tm_modex *m, uint32_t can, int use);

/* mtl_tm_modex.c: this process's blob under this initialisation's key,
 * and rank name's blob (again: of the second exchange; free *m).  OPAL
 * statuses. */
#define MTL_TM_MODEX_KEY_LEN 32
int mtl_tm_modex_send(const void *m, size_t size);
int mtl_tm_modex_recv(const opal_process_name_t *name, bool again,
		      void **m, int32_t *size);

/* mtl_tm_modex.c: a process of another job's blob (free *m): the key of
 * its job's first initialisation, its second exchange's if there was
 * one.  An OPAL status. */
int mtl_tm_modex_recv_other(const opal_process_name_t *name, void **m,
			    int32_t *size);

/* mtl_tm_addr.c */
/* A process's id in the connection manager, unique across jobs: its
 * job id in the upper 32 bits, its rank in that job in the lower. */
static inline uint64_t mtl_tm_proc_id(const opal_process_name_t *name)
{
	return (uint64_t)name->jobid << 32 | name->vpid;
}
/* The endpoint of process name; one of another job is made if make and
 * new.  NULL for a rank past this job's size, one of another job not
 * made, or no memory (said why). */
struct mtl_tm_endpoint *mtl_tm_ep_get(const opal_process_name_t *name,
				      bool make);
/* The endpoints (none connected), the connection manager, and this
 * rank's address in the modex. */
int mtl_tm_qps_publish(void);
void mtl_tm_qps_destroy(void);
/* Starts ep's connection (its engine peer exists from then on, held until
 * the connection is up); with the lock held. */
int mtl_tm_connect(struct mtl_tm_endpoint *ep);
/* Polls the connection manager now (with the lock held); opal_progress
 * does by itself otherwise (mtl_tm_addr.c, cm_poll). */
int mtl_tm_cm_progress(void);

/* mtl_tm.c */
int mtl_tm_module_init(void);
int mtl_tm_add_procs(struct mca_mtl_base_module_t *mtl, size_t nprocs,
		     struct ompi_proc_t **procs);
int mtl_tm_del_procs(struct mca_mtl_base_module_t *mtl, size_t nprocs,
		     struct ompi_proc_t **procs);
int mtl_tm_add_comm(struct mca_mtl_base_module_t *mtl,
		    struct ompi_communicator_t *comm);
int mtl_tm_del_comm(struct mca_mtl_base_module_t *mtl,
		    struct ompi_communicator_t *comm);
int mtl_tm_progress(void);
/* Installs the general entry points once opal_using_threads() is true
 * (at init; a later session's MPI_THREAD_MULTIPLE at its first
 * communicator or progress call). */
void mtl_tm_threads_check(void);

/* mtl_tm_fini.c */
int mtl_tm_finalize(struct mca_mtl_base_module_t *mtl);
/* At add_comm: for MPI_COMM_SELF, the attribute whose deletion drains
 * this rank before MPI_Finalize's fence. */
void mtl_tm_watch_finalize(struct ompi_communicator_t *comm);

/* mtl_tm_addr.c, "routes": the endpoint of rank `rank` of comm (remote
 * group for intercomms), connected now if pml cm has not handed it over
 * yet; NULL if none. */
struct mtl_tm_endpoint *mtl_tm_peer_ep(struct ompi_communicator_t *comm,
				       int rank);
/* mtl_tm_route() when the route is not known yet: looks it up, keeps it
 * (send: names what is missing). */
int mtl_tm_route_slow(struct ompi_communicator_t *comm, int rank,
		      bool send, uint64_t *route);

/*
 * The route word (c_pml_comm, above) of rank `rank` of comm, with
 * MTL_TM_ROUTE_SEND if send, if it is known (false: not yet used, or no
 * routes for comm: MTL_TM_NO_ROUTES).
 */
static inline __attribute__((always_inline)) bool
mtl_tm_route_known(struct ompi_communicator_t *comm, int rank, bool send,
		   uint64_t *route)
{
	const uint64_t *route_of = (const void *)comm->c_pml_comm;
	uint64_t w;

	if (OPAL_UNLIKELY((uint32_t)rank >= (uint32_t)route_of[-1]))
		return false;
	/* < 2^31 ranks: not MPI_ANY_SOURCE (callers' tests for it fold) */
	if (rank < 0)
		__builtin_unreachable();
	w = __atomic_load_n(&route_of[(uint32_t)rank], __ATOMIC_RELAXED);
	*route = w;
	return OPAL_LIKELY(w & (send ? MTL_TM_ROUTE_SEND : MTL_TM_ROUTE_RECV));
}

/*
 * mtl_tm_route_known(), or else looked up: OMPI_SUCCESS, or
 * OMPI_ERR_UNREACH when there is no connection to it or (send) no context
 * id.  Call it without the lock: the first use may connect the peer or
 * ask PMIx.
 */
static inline __attribute__((always_inline)) int
mtl_tm_route(struct ompi_communicator_t *comm, int rank, bool send,
	     uint64_t *route)
{
	if (OPAL_LIKELY(mtl_tm_route_known(comm, rank, send, route)))
		return OMPI_SUCCESS;
	return mtl_tm_route_slow(comm, rank, send, route);
}

/* The engine peer in a route word. */
static inline uint32_t mtl_tm_route_peer(uint64_t route)
{
	return (uint32_t)route & MTL_TM_ROUTE_PEER;
}

/*
 * The engine peer of rank `rank` of comm; TM_PEER_ANY if there is none
 * (no connection to it).  Call it without the lock (mtl_tm_route).
 */
static inline uint32_t mtl_tm_peer(struct ompi_communicator_t *comm,
				   int rank)
{
	uint64_t w;

	if (mtl_tm_route(comm, rank, false, &w) != OMPI_SUCCESS)
		return TM_PEER_ANY;
	return mtl_tm_route_peer(w);
}

/*
 * The engine peer that source rank src of comm names, for requests that
 * should fail when it dies (the engine cannot tell which process a
 * (context, rank) pair is); TM_PEER_ANY for MPI_ANY_SOURCE.  Call it
 * without the lock: it may connect the peer.
 */
static inline uint32_t mtl_tm_src_peer(struct ompi_communicator_t *comm,
				       int src)
{
	return src == MPI_ANY_SOURCE ? TM_PEER_ANY : mtl_tm_peer(comm, src);
}

/* An engine status as an Open MPI error code. */
static inline int mtl_tm_to_ompi(int rc)
{
	switch (rc) {
	case TM_OK: return OMPI_SUCCESS;
	case TM_ERR_NO_MEMORY: return OMPI_ERR_OUT_OF_RESOURCE;
	case TM_ERR_RANGE:
	case TM_ERR_INVALID: return OMPI_ERR_BAD_PARAM;
	case TM_ERR_UNSUPPORTED: return OMPI_ERR_NOT_SUPPORTED;
	/* as a failed request's status: MPI_ERR_OTHER */
	case TM_ERR_PEER_DEAD: return OMPI_ERROR;
	}
	return OMPI_ERROR;
}

/* A receive's or probe's (tag, mask) for (comm, src, tag): MPI's source
 * and tag wildcards as the engine's (add_comm checked the context id and
 * the ranks against the tag layout).  One call of tm_tag_recv per case
 * of the tag, so that each folds its mask to a constant. */
static inline __attribute__((always_inline)) void
mtl_tm_recv_env(struct ompi_communicator_t *comm, int src, int tag,
		uint64_t *rtag, uint64_t *mask)
{
	uint32_t cid = mtl_tm_comm_cid(comm);
	int32_t s = src == MPI_ANY_SOURCE ? TM_ANY_SRC : src;

	if (OPAL_LIKELY(tag != MPI_ANY_TAG))
		tm_tag_recv(cid, s, tag, rtag, mask);
	else
		tm_tag_recv(cid, s, TM_ANY_TAG, rtag, mask);
}

/* A request's flags cleared and its kind set, in one store. */
static inline void mtl_tm_req_start(struct mtl_tm_request *req,
				    uint8_t kind)
{
	uint64_t f = 0;

	memcpy((char *)&f + offsetof(struct mtl_tm_request, kind) -
	       offsetof(struct mtl_tm_request, flags), &kind, 1);
	req->flags = f;
}

/*
 * pml cm's completion callback of req, whose message's bytes in the
 * user's memory start at buf: mtl_tm_req_done first (mtl_tm_tsan.h),
 * after our last touch of req, the callback's pointer included.
 */
static inline void mtl_tm_req_complete(struct mtl_tm_request *req,
				       const void *buf)
{
	void (*cb)(struct mca_mtl_request_t *) = req->super.completion_callback;

	mtl_tm_req_done(req, buf, req->tsan_waiter);
	cb(&req->super);
}

/* Frees a request's packed copy or receive staging buffer, if its own. */
static inline void mtl_tm_free_pack(struct mtl_tm_request *req)
{
	if (req->pack_free)
		free(req->pack_buf);
	req->pack_buf = NULL;
	req->pack_free = false;
}

/*
 * Drops mtl_tm.lock (taken for an engine call, if MPI threads) and
 * completes the requests on mtl_tm.done, each through its complete
 * function; returns how many.  Inline, with mtl_tm_unlock_and_complete:
 * the send and receive files call it, and never call into mtl_tm.c.
 */
static inline int mtl_tm_complete_done(void)
{
	struct mtl_tm_request *req;
	UCS_LIST_HEAD(list);
	int n = 0;

	ucs_list_splice_tail(&list, &mtl_tm.done);
	ucs_list_head_init(&mtl_tm.done);
	mtl_tm.progress_fast = mtl_tm.eng != NULL;
	OPAL_THREAD_UNLOCK(&mtl_tm.lock);
	while (!ucs_list_is_empty(&list)) {
		/* off the list first: completion may free or reuse req */
		req = ucs_list_extract_head(&list, struct mtl_tm_request,
					    done_link);
		req->complete(req);
		n++;
	}
	return n;
}

/* req on mtl_tm.done, for mtl_tm_complete_done (with the lock held). */
static inline void mtl_tm_done_add(struct mtl_tm_request *req,
				   void (*complete)(struct mtl_tm_request *))
{
	req->complete = complete;
	ucs_list_add_tail(&mtl_tm.done, &req->done_link);
	mtl_tm.progress_fast = false;
}

/*
 * Drops mtl_tm.lock, taken for an engine call, then completes what the
 * engine finished meanwhile (possibly requests of other threads);
 * returns how many.  Inline: most calls (every idle progress call) find
 * nothing to complete.
 */
static inline int mtl_tm_unlock_and_complete(void)
{
	if (ucs_list_is_empty(&mtl_tm.done)) {
		OPAL_THREAD_UNLOCK(&mtl_tm.lock);
		return 0;
	}
	return mtl_tm_complete_done();
}

/*
 * The send and receive entry points come in two sets
 * (mtl_tm_threads_check installs one in mtl_tm.super): without MPI
 * threads, a few tests and the engine call, or else the general entry,
 * made of the same steps; and the general entries alone, which take the
 * lock and look at the done list when opal_using_threads() says so.
 */
/* mtl_tm_send.c */
int mtl_tm_send(struct mca_mtl_base_module_t *mtl,
		struct ompi_communicator_t *comm, int dest, int tag,
		struct opal_convertor_t *convertor,
		mca_pml_base_send_mode_t mode);
int mtl_tm_send_general(struct mca_mtl_base_module_t *mtl,
			struct ompi_communicator_t *comm, int dest, int tag,
			struct opal_convertor_t *convertor,
			mca_pml_base_send_mode_t mode);
int mtl_tm_isend(struct mca_mtl_base_module_t *mtl,
		 struct ompi_communicator_t *comm, int dest, int tag,
		 struct opal_convertor_t *convertor,
		 mca_pml_base_send_mode_t mode, bool blocking,
		 mca_mtl_request_t *mtl_request);
int mtl_tm_isend_general(struct mca_mtl_base_module_t *mtl,
			 struct ompi_communicator_t *comm, int dest, int tag,
			 struct opal_convertor_t *convertor,
			 mca_pml_base_send_mode_t mode, bool blocking,
			 mca_mtl_request_t *mtl_request);
/* mtl_tm_recv.c */
int mtl_tm_irecv(struct mca_mtl_base_module_t *mtl,
		 struct ompi_communicator_t *comm, int src, int tag,
		 struct opal_convertor_t *convertor,
		 mca_mtl_request_t *mtl_request);
int mtl_tm_irecv_general(struct mca_mtl_base_module_t *mtl,
			 struct ompi_communicator_t *comm, int src, int tag,
			 struct opal_convertor_t *convertor,
			 mca_mtl_request_t *mtl_request);
/* mtl_tm_probe.c */
int mtl_tm_iprobe(struct mca_mtl_base_module_t *mtl,
		  struct ompi_communicator_t *comm, int src, int tag,
		  int *flag, struct ompi_status_public_t *status);
int mtl_tm_improbe(struct mca_mtl_base_module_t *mtl,
		   struct ompi_communicator_t *comm, int src, int tag,
		   int *matched, struct ompi_message_t **message,
		   struct ompi_status_public_t *status);
int mtl_tm_imrecv(struct mca_mtl_base_module_t *mtl,
		  struct opal_convertor_t *convertor,
		  struct ompi_message_t **message,
		  mca_mtl_request_t *mtl_request);
/* mtl_tm_cancel.c */
int mtl_tm_cancel(struct mca_mtl_base_module_t *mtl,
		  mca_mtl_request_t *mtl_request, int flag);

END_C_DECLS

#endif /* MTL_TM_H */
