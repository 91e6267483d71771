/*
 * mtl_tm.c - the control path of mtl tm: device, QPs and modex at init,
 * add/del procs, add/del comm, progress and completion (finalize:
 * mtl_tm_fini.c).  See mtl_tm.h for the addressing scheme.
 *
 * The matching engine (engine/tm_engine.h) is created at init, learns
 * each peer's QP at add_procs, is driven by the progress hook and drained
 * at MPI_Finalize (mtl_tm_fini.c).
 */
#include "mtl_tm.h"
#include "mtl_tm_pvar.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "ompi/communicator/communicator.h"
#include "ompi/proc/proc.h"

#include <infiniband/tm_types.h>

#ifdef MTL_TM_TSAN
__thread char mtl_tm_tsan_me; /* mtl_tm_tsan.h */
#endif

struct mtl_tm_module mtl_tm = {
	.super = {
		/* The engine's tag layout: 14-bit context id, 32-bit tag.
		 * Open MPI refuses an id >= mtl_max_contextid by itself, as
		 * a bare MPI_ERR_INTERN; letting it hand out one id past
		 * ours (TM_MAX_CTX + 1) sends the first communicator over
		 * the limit to mtl_tm_add_comm, which names the limit. */
		.mtl_max_contextid = TM_MAX_CTX + 2,
		.mtl_max_tag = INT32_MAX,
		.mtl_request_size = sizeof(struct mtl_tm_request) -
				    sizeof(struct mca_mtl_request_t),
		/* QPs are made at a peer's first use (mtl_tm.h);
		 * a send carries the receiver's context id (mtl_tm_send.c),
		 * so communicators from groups (sessions) work. */
		.mtl_flags = MCA_MTL_BASE_FLAG_REQUIRE_WORLD |
			     MTL_TM_FLAG_EXT_CID,
		.mtl_add_procs = mtl_tm_add_procs,
		.mtl_del_procs = mtl_tm_del_procs,
		.mtl_finalize = mtl_tm_finalize,
		.mtl_send = mtl_tm_send,
		.mtl_isend = mtl_tm_isend,
		.mtl_irecv = mtl_tm_irecv,
		.mtl_iprobe = mtl_tm_iprobe,
		.mtl_imrecv = mtl_tm_imrecv,
		.mtl_improbe = mtl_tm_improbe,
		/* pml cm calls these three without checking for NULL. */
		.mtl_cancel = mtl_tm_cancel,
		.mtl_add_comm = mtl_tm_add_comm,
		.mtl_del_comm = mtl_tm_del_comm,
	},
};

/* Setting i (mtl_tm_setting) that its layer refused, by its MCA name. */
static void show_setting_error(unsigned i, uint64_t value, const char *why)
{
	const struct tm_param *d = mtl_tm_setting(i);
	char val[96];

	if (d->type == TM_PARAM_ENUM)
		snprintf(val, sizeof(val), "%d", mtl_tm_params.store[i].e);
	else
		snprintf(val, sizeof(val), "%llu", (unsigned long long)value);
	if (d->env)
		snprintf(val + strlen(val), sizeof(val) - strlen(val),
			 ", or the environment variable %s", d->env);
	mtl_tm_show_error("bad-parameter", "mtl_tm_%s (%s) %s.\n%s.",
			  d->name, val, why, d->help);
}

/* An engine setting out of its bounds (tm_engine_config_check's bad). */
static void show_engine_setting_error(const struct tm_engine_config *e,
				      enum tm_engine_setting bad)
{
	const struct tm_param *d = tm_engine_param(bad);
	char why[96];

	if (!d) {
		mtl_tm_show_error("bad-parameter",
				  "the matching engine refuses its configuration (see mtl_tm(7)).");
		return;
	}
	snprintf(why, sizeof(why), "is out of range: %llu to %llu",
		 (unsigned long long)d->min, (unsigned long long)d->max);
	show_setting_error(bad, tm_engine_param_get(e, bad), why);
}

/*
 * The boundary between eager and rendezvous, from mtl_tm_eager_limit or
 * the deprecated mtl_tm_rndv_threshold (which meant eager_limit + 1); the
 * two set differently is refused rather than guessed at.
 */
static int eager_limit(size_t *eager)
{
	const struct mtl_tm_params *p = &mtl_tm_params;
	int eager_var = p->var[TM_SETTING_EAGER_LIMIT];

	*eager = mtl_tm_setting_value(TM_SETTING_EAGER_LIMIT);
	if (!mtl_tm_var_set(p->rndv_var))
		return OMPI_SUCCESS;
	if (p->rndv_threshold == 0) {
		mtl_tm_show_error("bad-parameter",
				  "mtl_tm_rndv_threshold must be at least 1 (is 0).  It is deprecated:\n"
				  "set mtl_tm_eager_limit (the largest eager payload) instead.");
		return OMPI_ERR_BAD_PARAM;
	}
	if (mtl_tm_var_set(eager_var) && *eager != p->rndv_threshold - 1) {
		mtl_tm_show_error("bad-parameter",
				  "mtl_tm_eager_limit (%zu) and the deprecated mtl_tm_rndv_threshold\n"
				  "(%zu) disagree: set only mtl_tm_eager_limit.",
				  *eager, p->rndv_threshold);
		return OMPI_ERR_BAD_PARAM;
	}
	*eager = p->rndv_threshold - 1;
	return OMPI_SUCCESS;
}

/*
 * The engine's settings as the MCA system resolved them, judged by the
 * engine's own bounds (tm_engine_config_check names the first one out of
 * them) before anything is set up.
 */
static int engine_config(struct tm_engine_config *ecfg)
{
	enum tm_engine_setting bad;
	size_t eager;
	unsigned i;
	int rc;

	rc = eager_limit(&eager);
	if (rc != OMPI_SUCCESS)
		return rc;
	tm_engine_config_default(ecfg);
	for (i = 0; i < TM_ENGINE_NPARAMS; i++)
		tm_engine_param_set(ecfg, i, mtl_tm_setting_value(i));
	tm_engine_param_set(ecfg, TM_SETTING_EAGER_LIMIT, eager);
	if (tm_engine_config_check(ecfg, &bad) == TM_OK)
		return OMPI_SUCCESS;
	show_engine_setting_error(ecfg, bad);
	return OMPI_ERR_BAD_PARAM;
}

/*
 * The device layer takes its settings (after the MCA system resolved
 * them) and the soft HCA its limits, before the device opens.
 */
static int dev_config(struct tm_dev_config *cfg)
{
	const struct mtl_tm_params *p = &mtl_tm_params;
	uint64_t v[TM_DEV_NPARAMS];
	unsigned bad = 0, env_bad = MTL_TM_DEV0 + p->dev_env_bad;
	uint32_t min_qp;

	mtl_tm_dev_values(v);
	if (p->dev_env_rc != TM_OK && !mtl_tm_var_set(p->var[env_bad])) {
		show_setting_error(env_bad, v[p->dev_env_bad],
				   "cannot be used: the environment variable does not parse");
		return OMPI_ERR_BAD_PARAM;
	}
	tm_dev_config_default(cfg);
	cfg->srq_max_wr = (uint32_t)mtl_tm_setting_value(TM_SETTING_N_PLAIN);
	/* room for a QP pair (two QPs) per rank of the job, our own
	 * included, and the connection manager's UD QP, unless the user set
	 * the limit (then a peer past it fails naming it: mtl_tm_addr.c);
	 * pairs are made only for the peers used, and an unused QP slot
	 * costs the soft HCA no memory */
	min_qp = mtl_tm_var_set(p->var[MTL_TM_DEV0 + TM_DEV_P_SOFT_MAX_QP]) ?
		 0 : 2 * mtl_tm.nprocs + 1;
	if (tm_dev_config_set_params(cfg, v, min_qp, &bad) != TM_OK) {
		show_setting_error(MTL_TM_DEV0 + bad, v[bad],
				   "is out of range (see mtl_tm(7) and softhca(7))");
		return OMPI_ERR_BAD_PARAM;
	}
	return OMPI_SUCCESS;
}

/* Why the engine could not be created, naming what the user can change. */
static void show_engine_error(int rc, const struct tm_engine_config *e)
{
	enum tm_engine_setting bad = TM_SETTING_NONE;

	if (rc == TM_ERR_INVALID) {
		tm_engine_config_check(e, &bad);
		show_engine_setting_error(e, bad);
	} else if (rc == TM_ERR_NO_MEMORY) {
		mtl_tm_show_error("no-memory",
				  "cannot allocate the matching engine's buffers on %s:\n"
				  "mtl_tm_plain_buffers (%u) plus mtl_tm_send_slots (%u) buffers of\n"
				  "mtl_tm_eager_limit (%zu) bytes plus the tag header each.",
				  mtl_tm.dev->name, e->n_plain, e->n_send_slots,
				  e->eager_limit);
	} else {
		mtl_tm_show_error("no-engine",
				  "cannot create the matching engine on %s: %s (%s).",
				  mtl_tm.dev->name, tm_status_str(rc),
				  strerror(errno));
	}
}

/* What tm_dev_open() returned, in words a user can act on. */
static void show_dev_error(int rc, const struct tm_dev_config *cfg)
{
	if (rc == TM_ERR_NO_DEVICE)
		mtl_tm_show_error("no-device",
				  "no tag-matching device answers (mtl_tm_provider %s).",
				  cfg->provider);
	else if (rc == TM_ERR_IO)
		mtl_tm_show_error("no-device",
				  "cannot set up the tag-matching device (mtl_tm_provider %s):\n"
				  "%s (%s).  Smaller mtl_tm_plain_buffers or mtl_tm_max_tags /\n"
				  "mtl_tm_max_ops may fit the device.",
				  cfg->provider, tm_status_str(rc), strerror(errno));
	else
		mtl_tm_show_error("no-device",
				  "cannot open a tag-matching device (mtl_tm_provider %s): %s%s%s.",
				  cfg->provider, tm_status_str(rc),
				  tm_dev_open_why() ? ": " : "",
				  tm_dev_open_why() ? tm_dev_open_why() : "");
}

static int bring_up(const struct tm_dev_config *cfg,
		    const struct tm_engine_config *ecfg);
static void tear_down(void);

int mtl_tm_module_init(void)
{
	struct tm_engine_config ecfg;
	struct tm_dev_config cfg;
	char vname[64];
	char offer[MTL_TM_CAN_STR_LEN];
	int rc;

	/* a new initialisation (MPI sessions: another after a finalize):
	 * its own modex key, and the job's choice made anew */
	mtl_tm.inits++;
	mtl_tm.agreed = false;
	mtl_tm.again = false;
	mtl_tm.nprocs = ompi_process_info.num_procs;
	mtl_tm.my_vpid = OMPI_PROC_MY_NAME->vpid;
	if (mtl_tm.nprocs == 0 || mtl_tm.my_vpid >= mtl_tm.nprocs) {
		opal_output(0, "mtl tm: odd job size %u / rank %u",
			    mtl_tm.nprocs, mtl_tm.my_vpid);
		return OMPI_ERROR;
	}
	rc = engine_config(&ecfg);
	if (rc == OMPI_SUCCESS)
		rc = dev_config(&cfg);
	if (rc != OMPI_SUCCESS)
		return rc;
	mtl_tm.can = mtl_tm_can_local(vname, sizeof(vname));
	/* the guess: the rule as if every rank were like this one */
	mtl_tm.use = mtl_tm_choose(mtl_tm.can, mtl_tm_one_node());
	opal_output_verbose(10, mtl_tm_output,
			    "mtl tm: rank %u offers %s (libibverbs device %s), %s: opening the %s",
			    mtl_tm.my_vpid,
			    mtl_tm_can_str(mtl_tm.can, offer, sizeof(offer)),
			    *vname ? vname : "none",
			    mtl_tm_one_node() ? "one node" : "several nodes",
			    mtl_tm_use_name(mtl_tm.use));
	if (mtl_tm.use == MTL_TM_USE_NONE) {
		mtl_tm_show_no_local(mtl_tm.can);
		return OMPI_ERR_NOT_AVAILABLE;
	}
	mtl_tm_use_config(mtl_tm.use, &cfg);
	rc = bring_up(&cfg, &ecfg);
	if (rc != OMPI_SUCCESS)
		return rc;
	ucs_list_head_init(&mtl_tm.done);
	mtl_tm.progress_fast = true;
	/* this initialisation's entry points (mtl_tm.h): a session after
	 * one with MPI threads starts with them too */
	mtl_tm.threads = false;
	mtl_tm.super.mtl_send = mtl_tm_send;
	mtl_tm.super.mtl_isend = mtl_tm_isend;
	mtl_tm.super.mtl_irecv = mtl_tm_irecv;
	mtl_tm_threads_check();

	OBJ_CONSTRUCT(&mtl_tm.lock, opal_mutex_t);
	/* pml cm has no progress hook of its own: without this nothing
	 * would drive the engine while MPI waits. */
	rc = opal_progress_register(mtl_tm_progress);
	if (rc != OPAL_SUCCESS) {
		OBJ_DESTRUCT(&mtl_tm.lock);
		tear_down();
		return rc;
	}
	mtl_tm.progress_registered = true;
	return OMPI_SUCCESS;
}

/* Engine, QPs and device, whichever exist. */
static void tear_down(void)
{
	mtl_tm.progress_fast = false;
	tm_engine_destroy(mtl_tm.eng);
	mtl_tm.eng = NULL;
	mtl_tm_qps_destroy();
	tm_dev_close(mtl_tm.dev);
	mtl_tm.dev = NULL;
}

/* Opens the device cfg names, its QPs (published) and the engine. */
static int bring_up(const struct tm_dev_config *cfg,
		    const struct tm_engine_config *ecfg)
{
	size_t eager = ecfg->eager_limit;
	int rc;

	rc = tm_dev_open(cfg, &mtl_tm.dev);
	if (rc != TM_OK) {
		show_dev_error(rc, cfg);
		return OMPI_ERR_NOT_AVAILABLE;
	}
	opal_output_verbose(10, mtl_tm_output,
			    "mtl tm: rank %u of %u on %s: %u tags, %u ops, rndv header %u",
			    mtl_tm.my_vpid, mtl_tm.nprocs, mtl_tm.dev->name,
			    mtl_tm.dev->caps.max_num_tags,
			    mtl_tm.dev->caps.max_ops,
			    mtl_tm.dev->caps.max_rndv_hdr_size);
	/* An eager message is one send: header and payload must fit it. */
	if (mtl_tm.dev->max_msg_sz < sizeof(struct ibv_tmh) ||
	    eager > mtl_tm.dev->max_msg_sz - sizeof(struct ibv_tmh)) {
		mtl_tm_show_error("bad-parameter",
				  "mtl_tm_eager_limit (%zu) is larger than one message on %s can\n"
				  "carry (%u bytes, less the %zu-byte tag header).",
				  eager, mtl_tm.dev->name, mtl_tm.dev->max_msg_sz,
				  sizeof(struct ibv_tmh));
		rc = OMPI_ERR_BAD_PARAM;
		goto fail;
	}

	rc = mtl_tm_qps_publish();
	if (rc != OMPI_SUCCESS)
		goto fail;

	rc = tm_engine_create(mtl_tm.dev, ecfg, &mtl_tm.eng);
	if (rc != TM_OK) {
		show_engine_error(rc, ecfg);
		rc = rc == TM_ERR_INVALID ? OMPI_ERR_BAD_PARAM :
					    OMPI_ERR_OUT_OF_RESOURCE;
		goto fail;
	}
	return OMPI_SUCCESS;

fail:
	tear_down();
	return rc;
}

/*
 * The job's choice, at the first add_procs (mtl_tm.h, "One provider for
 * the job"): what this rank opened, or the chosen device opened again and
 * its addresses exchanged once more.  Every rank takes the same branch:
 * the offers it decides from are the same everywhere.
 */
static int agree(void)
{
	struct tm_engine_config ecfg;
	struct tm_dev_config cfg;
	int rc, use, fence;

	rc = mtl_tm_agree(mtl_tm.use, &use);
	if (rc != OMPI_ERR_WOULD_BLOCK)
		return rc;
	tear_down(); /* no peer yet: nothing in flight */
	mtl_tm.use = use;
	mtl_tm.again = true;
	/* both were accepted at init: the same values again */
	engine_config(&ecfg);
	dev_config(&cfg);
	mtl_tm_use_config(use, &cfg);
	rc = bring_up(&cfg, &ecfg);
	mtl_tm.progress_fast = mtl_tm.eng && ucs_list_is_empty(&mtl_tm.done);
	/* into the fence even after a failure: the others wait there */
	fence = mtl_tm_fence();
	return rc != OMPI_SUCCESS ? rc : fence;
}

int mtl_tm_add_procs(struct mca_mtl_base_module_t *mtl, size_t nprocs,
		     struct ompi_proc_t **procs)
{
	struct mtl_tm_endpoint *ep;
	opal_process_name_t *name;
	int rc = OMPI_SUCCESS;
	size_t i;

	OPAL_THREAD_LOCK(&mtl_tm.lock);
	if (!mtl_tm.agreed) {
		rc = agree();
		if (rc != OMPI_SUCCESS) {
			OPAL_THREAD_UNLOCK(&mtl_tm.lock);
			return rc;
		}
		mtl_tm.agreed = true;
	}
	for (i = 0; i < nprocs; i++) {
		/* no connection yet: the first use starts it (peer_ep); a
		 * process of another job (spawn, connect/accept, join) gets
		 * its endpoint then, or when it first asks */
		name = &procs[i]->super.proc_name;
		ep = mtl_tm_ep_get(name, false);
		if (!ep && name->jobid == OMPI_PROC_MY_NAME->jobid) {
			opal_output(0, "mtl tm: %s: no such rank in this job of %u",
				    OMPI_NAME_PRINT(name), mtl_tm.nprocs);
			rc = OMPI_ERR_BAD_PARAM;
			break;
		}
		/* atomic: mtl_tm_peer_ep reads it without the lock */
		__atomic_store_n(&procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL],
				 ep, __ATOMIC_RELEASE);
	}
	OPAL_THREAD_UNLOCK(&mtl_tm.lock);
	return rc;
}

/* QPs stay until finalize: a proc leaving a communicator is not gone. */
int mtl_tm_del_procs(struct mca_mtl_base_module_t *mtl, size_t nprocs,
		     struct ompi_proc_t **procs)
{
	size_t i;

	for (i = 0; i < nprocs; i++)
		__atomic_store_n(&procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL],
				 NULL, __ATOMIC_RELAXED);
	return OMPI_SUCCESS;
}

const uint64_t mtl_tm_no_routes[1] = { 0 };

/*
 * The communicator's routes (mtl_tm.h, "Routes"), all unknown; without
 * the memory for them (or, for tests, with MTL_TM_TEST_NO_ROUTES set in
 * the environment) MTL_TM_NO_ROUTES: every message looks its peer up
 * instead.
 */
static void add_routes(struct ompi_communicator_t *comm, int size)
{
	int n = OMPI_COMM_IS_INTER(comm) ? ompi_comm_remote_size(comm) : size;
	uint64_t *t = NULL;

	if (!getenv("MTL_TM_TEST_NO_ROUTES"))
		t = calloc(1 + (size_t)n, sizeof(*t));
	if (t)
		t[0] = (uint64_t)n;
	else
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: rank %u: no routes for %s: each message looks its peer up",
				    mtl_tm.my_vpid, comm->c_name);
	comm->c_pml_comm = t ? (void *)(t + 1) : MTL_TM_NO_ROUTES;
}

/*
 * The tag carries the context id and the sender's rank in its local group
 * (the receiver's remote group for an intercommunicator): both must fit.
 */
int mtl_tm_add_comm(struct mca_mtl_base_module_t *mtl,
		    struct ompi_communicator_t *comm)
{
	uint32_t cid = mtl_tm_comm_cid(comm);
	int size = ompi_comm_size(comm);
	int rc;

	if (OMPI_COMM_IS_INTER(comm) && ompi_comm_remote_size(comm) > size)
		size = ompi_comm_remote_size(comm);
	/* The limits of mtl_tm(7), "Limits": the tag gives the context id
	 * 14 bits and the source rank 18. */
	if (cid > TM_MAX_CTX) {
		mtl_tm_show_error("communicator-limit",
				  "communicator %s needs context id %u, but mtl tm carries ids 0..%u only\n"
				  "(14 bits of the 64-bit tag).  Open MPI gives a new communicator the lowest\n"
				  "id free in all its members, and MPI_COMM_WORLD, MPI_COMM_SELF and\n"
				  "MPI_COMM_NULL hold three, so at most %u communicators can be created and\n"
				  "live at once.  Free communicators no longer needed, or use pml ob1.",
				  comm->c_name, cid, TM_MAX_CTX, TM_MAX_CTX + 1 - 3);
		return OMPI_ERR_NOT_SUPPORTED;
	}
	if ((uint32_t)size > TM_MAX_SRC + 1u) {
		mtl_tm_show_error("communicator-limit",
				  "communicator %s has %d ranks, but mtl tm carries at most %u\n"
				  "(18 bits of the 64-bit tag name the source rank).",
				  comm->c_name, size, TM_MAX_SRC + 1);
		return OMPI_ERR_NOT_SUPPORTED;
	}
	/* made from a group: the peers learn our id of it (compat.h) */
	rc = mtl_tm_publish_cid(comm);
	if (rc != OMPI_SUCCESS) {
		opal_output(0, "mtl tm: cannot publish the context id of %s: %d",
			    comm->c_name, rc);
		return rc;
	}
	add_routes(comm, size);
	mtl_tm_watch_finalize(comm);
	/* a session that asked for MPI_THREAD_MULTIPLE after this
	 * initialisation: its communicators come through here first */
	mtl_tm_threads_check();
	return OMPI_SUCCESS;
}

int mtl_tm_del_comm(struct mca_mtl_base_module_t *mtl,
		    struct ompi_communicator_t *comm)
{
	uint64_t *route_of = (void *)comm->c_pml_comm;

	if (route_of && route_of != MTL_TM_NO_ROUTES)
		free(route_of - 1);
	comm->c_pml_comm = NULL;
	return OMPI_SUCCESS;
}

/*
 * mtl_tm.h, the two sets of entry points.  Open MPI sets
 * opal_using_threads() before it initialises the MTL (MPI_Init_thread
 * above MPI_THREAD_SINGLE on 4.1, MPI_THREAD_MULTIPLE on 5.0, btl tcp's
 * progress thread), except on 5.0 when a session asks for
 * MPI_THREAD_MULTIPLE after the first one started: the general entries
 * from that session's first communicator (add_comm), or the first
 * progress call that sees it (mtl_tm_progress), whichever comes first.
 * The flag cannot turn on between an entry's OPAL_THREAD_LOCK and its
 * unlock: Open MPI turns it on only inside the call that initialises MPI
 * or a session (5.0: instance.c, btl tcp's and ULFM's threads), made by
 * a thread that holds no lock of ours, and below MPI_THREAD_MULTIPLE no
 * other thread is inside MPI meanwhile.
 */
void mtl_tm_threads_check(void)
{
	if (OPAL_LIKELY(mtl_tm.threads || !opal_using_threads()))
		return;
	mtl_tm.super.mtl_send = mtl_tm_send_general;
	mtl_tm.super.mtl_isend = mtl_tm_isend_general;
	mtl_tm.super.mtl_irecv = mtl_tm_irecv_general;
	if (!__atomic_exchange_n(&mtl_tm.threads, true, __ATOMIC_SEQ_CST))
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: rank %u: MPI threads: the general send and receive entry points",
				    mtl_tm.my_vpid);
}

/* mtl_tm_progress but for its common case: no engine, the done list,
 * MPI threads. */
static __attribute__((noinline)) int progress_general(void)
{
	int n;

	if (!mtl_tm.eng)
		return 0;
	if (!opal_using_threads()) {
		/* a buffered send's own copy, finished in an earlier call */
		n = mtl_tm_complete_done() + tm_engine_progress(mtl_tm.eng);
		return n > 0 ? n : 0;
	}
	mtl_tm_threads_check();
	if (OPAL_THREAD_TRYLOCK(&mtl_tm.lock))
		return 0;
	n = tm_engine_progress(mtl_tm.eng);
	if (OPAL_UNLIKELY(n < 0))
		n = 0;
	return n + mtl_tm_unlock_and_complete();
}

/*
 * Called from opal_progress() by every thread that waits.  The engine is
 * single threaded: a thread that finds it busy leaves the work to the
 * thread inside.  The connection manager has a progress callback of its
 * own (mtl_tm_addr.c).
 */
int mtl_tm_progress(void)
{
	mtl_tm_tsan_enter();
	/* no lock: completions run inside (mtl_tm.h); opal_progress takes
	 * the engine's fatal error (< 0) as no event.  progress_fast is
	 * written under the lock: with MPI threads it is not read here. */
	if (OPAL_LIKELY(!opal_using_threads() && mtl_tm.progress_fast))
		return tm_engine_progress(mtl_tm.eng);
	return progress_general();
}
