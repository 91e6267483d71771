/*
 * mtl_tm_addr.c - addresses and connections: the constant-size address
 * this rank publishes in the modex (under the key of mtl_tm_modex.c), and
 * a peer's QP pair, made and connected by the connection manager
 * (dev/tm_dev_cm.h) when the peer is first used, as the active side
 * (mtl_tm_connect) or the passive one (cm_request).  A peer of this job
 * has its endpoint in mtl_tm.eps, a process of another job one in
 * mtl_tm.others, made at its first use or request.
 *
 * Addressing (connect on first use)
 * ----------------------------------
 * Each rank publishes one fixed-size blob, whatever the job's size:
 *
 *     struct mtl_tm_modex { header, can, use, node, the connection
 *                           manager's address (GID, LID, UD QP) }
 *
 * under this initialisation's key (mtl_tm.h, "Modex keys"), and makes no
 * QP for a peer until the peer is first used (doc/DESIGN.md, "Connecting
 * on first use").  The first
 * send to rank r, or a receive or probe naming it, starts r's connection
 * (mtl_tm_peer_ep): a QP pair in the hardware's layout (tm_dev.h), an
 * engine peer held until the pair is connected (what is sent meanwhile
 * waits in order, engine/tm_engine.h), and a request to r's connection
 * manager (dev/tm_dev_cm.h: REQ, REP, RTU over one UD QP per process).
 * The passive side accepts a connection it did not start, once the
 * requester's CM address is the one its rank published, so an
 * ANY_SOURCE receive sees whoever connected.  A connection that cannot
 * be made within mtl_tm_connect_timeout fails that peer's requests, with
 * a message naming it.  The loopback pair (pml cm sends to self through
 * the MTL) is connected at first use too.
 *
 * Processes of other jobs (MPI_Comm_spawn, connect/accept across mpiruns,
 * MPI_Comm_join) connect the same way: the connection manager names every
 * process by mtl_tm_proc_id (job id and rank), unique across jobs, and
 * datagrams carry a key of the user's rather than of one job.  Their
 * endpoints live in a table (mtl_tm.others), made when Open MPI hands the
 * process over or it first asks to connect, never before; a request
 * from another job is accepted only from a process Open MPI knows (it
 * connected to that job) whose published address (mtl_tm_modex_recv_other)
 * is the one the request comes from.
 */
#include "mtl_tm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ucs/datastruct/khash.h>

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "ompi/communicator/communicator.h"
#include "ompi/proc/proc.h"

KHASH_MAP_INIT_INT64(mtl_tm_others, struct mtl_tm_endpoint *)
struct mtl_tm_others {
	khash_t(mtl_tm_others) h;
};

static bool of_this_job(const opal_process_name_t *name)
{
	return name->jobid == OMPI_PROC_MY_NAME->jobid;
}

/* "rank 3", or "process NAME of another job" (Open MPI's name). */
static const char *ep_str(const struct mtl_tm_endpoint *ep)
{
	static __thread char buf[96];

	if (of_this_job(&ep->name))
		snprintf(buf, sizeof(buf), "rank %u", ep->name.vpid);
	else
		snprintf(buf, sizeof(buf), "process %s of another job",
			 OMPI_NAME_PRINT(&ep->name));
	return buf;
}

/*
 * The connection manager's share of progress (cm_poll): opal_progress
 * calls it among its low-priority callbacks (every 8th call) while no
 * connection is under way, and polls the CM every MTL_TM_CM_EVERY-th of
 * those (a peer's request waits that long); among its callbacks proper,
 * each call, while one is (tm_cm_pending).  So the message path pays
 * nothing for it: mtl_tm_progress does not know it.
 */
#define MTL_TM_CM_EVERY 8

static int cm_poll(void);

/* cm_poll where the CM's state says (with the lock held). */
static void cm_schedule(void)
{
	bool busy = mtl_tm.cm && tm_cm_pending(mtl_tm.cm);

	if (busy == mtl_tm.cm_busy)
		return;
	__atomic_store_n(&mtl_tm.cm_busy, busy, __ATOMIC_RELAXED);
	/* each moves it from the other list (opal_progress.c) */
	if (busy)
		opal_progress_register(cm_poll);
	else
		opal_progress_register_lp(cm_poll);
}

int mtl_tm_cm_progress(void)
{
	int n;

	if (!mtl_tm.cm)
		return 0;
	n = tm_cm_progress(mtl_tm.cm) > 0;
	cm_schedule();
	return n;
}

/* cm_poll's turn: the CM polled under the lock. */
static __attribute__((noinline)) int cm_poll_now(void)
{
	int n;

	mtl_tm_tsan_enter();
	__atomic_store_n(&mtl_tm.cm_skip, 0, __ATOMIC_RELAXED);
	if (OPAL_THREAD_TRYLOCK(&mtl_tm.lock))
		return 0;
	n = mtl_tm_cm_progress();
	return n + mtl_tm_unlock_and_complete();
}

/* The skipped turns in a frameless function: cm_poll_now keeps
 * registers and a frame that only its turn needs. */
static int cm_poll(void)
{
	uint32_t k;

	/* Every thread in opal_progress reads and counts these without the
	 * lock: relaxed atomics, as a count lost to another thread only
	 * delays the next poll by a turn. */
	if (!__atomic_load_n(&mtl_tm.cm_busy, __ATOMIC_RELAXED)) {
		k = __atomic_load_n(&mtl_tm.cm_skip, __ATOMIC_RELAXED) + 1;
		__atomic_store_n(&mtl_tm.cm_skip, k, __ATOMIC_RELAXED);
		if (k < MTL_TM_CM_EVERY)
			return 0;
	}
	return cm_poll_now();
}

void mtl_tm_qps_destroy(void)
{
	struct mtl_tm_endpoint *ep;
	uint32_t r;

	if (mtl_tm.cm)
		opal_progress_unregister(cm_poll);
	mtl_tm.cm_busy = false;
	tm_cm_destroy(mtl_tm.cm);
	mtl_tm.cm = NULL;
	if (mtl_tm.others) {
		kh_foreach_value(&mtl_tm.others->h, ep, {
			tm_dev_pair_destroy(mtl_tm.dev, &ep->qps);
			free(ep);
		});
		kh_destroy_inplace(mtl_tm_others, &mtl_tm.others->h);
		free(mtl_tm.others);
		mtl_tm.others = NULL;
	}
	if (!mtl_tm.eps)
		return;
	for (r = 0; r < mtl_tm.nprocs; r++)
		tm_dev_pair_destroy(mtl_tm.dev, &mtl_tm.eps[r].qps);
	free(mtl_tm.eps);
	mtl_tm.eps = NULL;
	mtl_tm.nconnected = 0;
}

/* The endpoint of id (mtl_tm_proc_id), if there is one. */
static struct mtl_tm_endpoint *ep_find(uint64_t id)
{
	opal_process_name_t name = { .jobid = (uint32_t)(id >> 32),
				     .vpid = (uint32_t)id };
	khiter_t k;

	if (of_this_job(&name))
		return name.vpid < mtl_tm.nprocs ? &mtl_tm.eps[name.vpid]
						 : NULL;
	if (!mtl_tm.others)
		return NULL;
	k = kh_get(mtl_tm_others, &mtl_tm.others->h, id);
	return k == kh_end(&mtl_tm.others->h) ? NULL
					      : kh_value(&mtl_tm.others->h, k);
}

/* A new endpoint for a process of another job, in mtl_tm.others. */
static struct mtl_tm_endpoint *other_new(const opal_process_name_t *name)
{
	struct mtl_tm_endpoint *ep = calloc(1, sizeof(*ep));
	khiter_t k;
	int ret = -1;

	if (!mtl_tm.others) {
		mtl_tm.others = calloc(1, sizeof(*mtl_tm.others));
		if (mtl_tm.others)
			kh_init_inplace(mtl_tm_others, &mtl_tm.others->h);
	}
	if (ep && mtl_tm.others)
		k = kh_put(mtl_tm_others, &mtl_tm.others->h,
			   mtl_tm_proc_id(name), &ret);
	if (ret < 0) {
		opal_output(0, "mtl tm: no memory for an endpoint of process %s",
			    OMPI_NAME_PRINT(name));
		free(ep);
		return NULL;
	}
	ep->name = *name;
	kh_value(&mtl_tm.others->h, k) = ep;
	return ep;
}

struct mtl_tm_endpoint *mtl_tm_ep_get(const opal_process_name_t *name,
				      bool make)
{
	struct mtl_tm_endpoint *ep = ep_find(mtl_tm_proc_id(name));

	if (ep || !make || of_this_job(name))
		return ep;
	return other_new(name);
}

/* ep's published address (free it), or NULL (said why). */
static struct mtl_tm_modex *modex_of(const struct mtl_tm_endpoint *ep)
{
	struct mtl_tm_modex *m = NULL;
	int32_t size = 0;
	int rc;

	rc = of_this_job(&ep->name) ?
	     mtl_tm_modex_recv(&ep->name, mtl_tm.again, (void **)&m, &size) :
	     mtl_tm_modex_recv_other(&ep->name, (void **)&m, &size);
	if (rc != OPAL_SUCCESS || !m) {
		opal_output(0, "mtl tm: no modex data from %s: %d",
			    ep_str(ep), rc);
		return NULL;
	}
	if ((size_t)size != sizeof(*m) || m->magic != MTL_TM_MODEX_MAGIC) {
		opal_output(0, "mtl tm: bad modex data from %s (size %d)",
			    ep_str(ep), (int)size);
		free(m);
		return NULL;
	}
	if (strncmp(m->provider, tm_dev_provider_name(mtl_tm.dev),
		    sizeof(m->provider))) {
		opal_output(0, "mtl tm: %s uses provider %.8s, this rank %s: they cannot talk (set mtl_tm_provider alike everywhere)",
			    ep_str(ep), m->provider,
			    tm_dev_provider_name(mtl_tm.dev));
		free(m);
		return NULL;
	}
	/* a job agrees on one mode for its own ranks only (mtl_tm.h, "One
	 * provider for the job"): two jobs may differ, and nothing makes
	 * their protocols mix (children with tag matching and parents
	 * without hung in 1 of 3 runs, 1 MiB rendezvous included) */
	if (m->use != (uint32_t)mtl_tm.use) {
		opal_output(0, "mtl tm: %s runs the %s, this rank the %s: they cannot talk (each job agrees on one for its own ranks: give both jobs the same mtl_tm_provider and mtl_tm_softhca_no_tm)",
			    ep_str(ep), mtl_tm_use_name((int)m->use),
			    mtl_tm_use_name(mtl_tm.use));
		free(m);
		return NULL;
	}
	return m;
}

/* Why ep's pair could not be made, and, for a QP limit, what to raise. */
static void qp_pair_error(const struct mtl_tm_endpoint *ep, int rc, int err)
{
	const char *hint = "";
	char buf[200];

	if (err == ENOMEM &&
	    !strcmp(tm_dev_provider_name(mtl_tm.dev), "soft")) {
		snprintf(buf, sizeof(buf),
			 "; the soft HCA's QP limit is mtl_tm_softhca_max_qp "
			 "(%llu): two QPs per peer this rank talks to",
			 (unsigned long long)mtl_tm_setting_value(
				 MTL_TM_DEV0 + TM_DEV_P_SOFT_MAX_QP));
		hint = buf;
	} else if (err == ENOMEM) {
		hint = "; the device's QP limit (max_qp) or locked memory "
		       "(ulimit -l) may be too small";
	}
	opal_output(0, "mtl tm: %s: cannot create a QP pair for %s: %s (%s)%s",
		    mtl_tm.dev->name, ep_str(ep), tm_status_str(rc),
		    strerror(err), hint);
}

/* ep's pair, and its engine peer (held until connected, unless held is
 * false: the loopback pair, connected already). */
static int ep_make(struct mtl_tm_endpoint *ep, bool held)
{
	int rc = tm_dev_pair_create(mtl_tm.dev, &ep->qps);

	if (rc != TM_OK) {
		qp_pair_error(ep, rc, errno);
		return OMPI_ERR_OUT_OF_RESOURCE;
	}
	if (!held) {
		struct tm_dev_pair_addr self;

		tm_dev_pair_addr(mtl_tm.dev, &ep->qps, &self);
		rc = tm_dev_pair_connect(mtl_tm.dev, &ep->qps, &self);
		if (rc != TM_OK) {
			opal_output(0, "mtl tm: cannot connect the loopback QPs: %s",
				    tm_status_str(rc));
			tm_dev_pair_destroy(mtl_tm.dev, &ep->qps);
			return OMPI_ERR_UNREACH;
		}
	}
	rc = held ? tm_engine_add_peer_held(mtl_tm.eng, &ep->qps, &ep->peer)
		  : tm_engine_add_peer(mtl_tm.eng, &ep->qps, &ep->peer);
	if (rc != TM_OK) {
		opal_output(0, "mtl tm: cannot add %s to the engine: %s",
			    ep_str(ep), tm_status_str(rc));
		tm_dev_pair_destroy(mtl_tm.dev, &ep->qps);
		return OMPI_ERR_OUT_OF_RESOURCE;
	}
	ep->connected = true;
	ep->state = held ? MTL_TM_EP_CONNECTING : MTL_TM_EP_UP;
	return OMPI_SUCCESS;
}

/*
 * May process name (not this one) ask us to connect?  A rank of this job,
 * or a process of another job that Open MPI knows (it connected to that
 * job): any other name would send PMIx after a job it never heard of.
 */
static bool may_ask(const opal_process_name_t *name)
{
	if (of_this_job(name))
		return name->vpid < mtl_tm.nprocs &&
		       name->vpid != mtl_tm.my_vpid;
	return ompi_proc_find(name) != NULL;
}

/* The connection manager: a request from process id (its CM at *from). */
static int cm_request(void *arg, uint64_t id, const struct tm_cm_addr *from,
		      struct tm_dev_pair **pair)
{
	opal_process_name_t name = { .jobid = (uint32_t)(id >> 32),
				     .vpid = (uint32_t)id };
	struct mtl_tm_endpoint *ep;
	struct mtl_tm_modex *m;
	bool same;

	(void)arg;
	if (!may_ask(&name)) {
		opal_output_verbose(20, mtl_tm_output,
				    "mtl tm: rank %u: a connection request from %s, which Open MPI does not know: refused",
				    mtl_tm.my_vpid, OMPI_NAME_PRINT(&name));
		return TM_ERR_INVALID;
	}
	ep = mtl_tm_ep_get(&name, true);
	if (!ep)
		return TM_ERR_NO_MEMORY;
	if (ep->state != MTL_TM_EP_NONE)
		return TM_ERR_BUSY;
	/* only the address process id published may speak for it */
	m = modex_of(ep);
	if (!m)
		return TM_ERR_INVALID;
	same = !memcmp(&m->cm, from, sizeof(*from));
	free(m);
	if (!same || ep_make(ep, true) != OMPI_SUCCESS)
		return TM_ERR_INVALID;
	*pair = &ep->qps;
	return TM_OK;
}

/* The connection manager: process id's connection is up, or failed. */
static void cm_done(void *arg, uint64_t id, int status, int err)
{
	struct mtl_tm_endpoint *ep = ep_find(id);

	(void)arg;
	if (!ep) /* the CM knows only ids we connected or accepted */
		return;
	if (status == TM_OK) {
		ep->state = MTL_TM_EP_UP;
		mtl_tm.nconnected++;
		tm_engine_peer_release(mtl_tm.eng, ep->peer);
		opal_output_verbose(20, mtl_tm_output,
				    "mtl tm: rank %u: connected to %s (QPs %u/%u)",
				    mtl_tm.my_vpid, ep_str(ep),
				    (ep->qps.rx ? ep->qps.rx : ep->qps.tx)->qp_num,
				    ep->qps.tx->qp_num);
		return;
	}
	ep->state = MTL_TM_EP_FAILED;
	if (err == ETIMEDOUT)
		opal_output(0, "mtl tm: rank %u cannot connect to %s: no answer within mtl_tm_connect_timeout (%u ms): it is gone, or has made no MPI call for that long; its requests fail",
			    mtl_tm.my_vpid, ep_str(ep), mtl_tm.connect_timeout_ms);
	else
		opal_output(0, "mtl tm: rank %u cannot connect to %s: %s (%s); its requests fail",
			    mtl_tm.my_vpid, ep_str(ep), tm_status_str(status),
			    strerror(err));
	tm_engine_peer_fail(mtl_tm.eng, ep->peer);
}

/*
 * The key in CM datagrams (tm_cm_config.job): the user's, not one job's,
 * since processes of different jobs connect (spawn, connect/accept).  A
 * datagram for a process of another job is still refused, by its
 * destination id (mtl_tm_proc_id carries the job).
 */
static uint64_t cm_key(void)
{
	return (uint64_t)geteuid() << 32 ^ 0x746d636dull;
}

/* The connection manager and this rank's one address in the modex. */
int mtl_tm_qps_publish(void)
{
	static const struct tm_cm_ops ops = { .request = cm_request,
					      .done = cm_done };
	struct tm_cm_config cc = { .my_id = mtl_tm_proc_id(OMPI_PROC_MY_NAME),
				   .job = cm_key(),
				   .timeout_ms = mtl_tm.connect_timeout_ms };
	struct mtl_tm_modex m;
	uint32_t r;
	int rc;

	mtl_tm.eps = calloc(mtl_tm.nprocs, sizeof(*mtl_tm.eps));
	if (!mtl_tm.eps)
		return OMPI_ERR_OUT_OF_RESOURCE;
	for (r = 0; r < mtl_tm.nprocs; r++) {
		mtl_tm.eps[r].name = *OMPI_PROC_MY_NAME;
		mtl_tm.eps[r].name.vpid = r;
	}
	rc = tm_cm_create(mtl_tm.dev, &cc, &ops, &mtl_tm.cm);
	if (rc != TM_OK) {
		opal_output(0, "mtl tm: %s: cannot create the connection manager's UD QP: %s (%s)",
			    mtl_tm.dev->name, tm_status_str(rc),
			    strerror(errno));
		return OMPI_ERR_OUT_OF_RESOURCE;
	}
	mtl_tm.cm_skip = 0;
	rc = opal_progress_register_lp(cm_poll);
	if (rc != OPAL_SUCCESS)
		return rc;
	memset(&m, 0, sizeof(m));
	mtl_tm_modex_fill(&m, mtl_tm.can, mtl_tm.use);
	strncpy(m.provider, tm_dev_provider_name(mtl_tm.dev),
		sizeof(m.provider) - 1);
	tm_cm_get_addr(mtl_tm.cm, &m.cm);
	rc = mtl_tm_modex_send(&m, sizeof(m));
	if (rc != OPAL_SUCCESS) {
		opal_output(0, "mtl tm: modex send failed: %d", rc);
		return rc;
	}
	return OMPI_SUCCESS;
}

/*
 * Starts ep's connection (the first use of its rank): the loopback pair
 * at once, any other through the connection manager, the engine peer
 * held until it is up.  With the lock held.
 */
int mtl_tm_connect(struct mtl_tm_endpoint *ep)
{
	struct mtl_tm_modex *m;
	int rc;

	if (ep->state != MTL_TM_EP_NONE)
		return ep->connected ? OMPI_SUCCESS : OMPI_ERR_UNREACH;
	if (ep == &mtl_tm.eps[mtl_tm.my_vpid])
		return ep_make(ep, false);
	m = modex_of(ep);
	if (!m) {
		ep->state = MTL_TM_EP_FAILED;
		return OMPI_ERR_UNREACH;
	}
	rc = ep_make(ep, true);
	if (rc == OMPI_SUCCESS &&
	    tm_cm_connect(mtl_tm.cm, mtl_tm_proc_id(&ep->name), &m->cm,
			  &ep->qps) != TM_OK) {
		opal_output(0, "mtl tm: rank %u cannot start connecting to %s",
			    mtl_tm.my_vpid, ep_str(ep));
		tm_engine_peer_fail(mtl_tm.eng, ep->peer);
		rc = OMPI_ERR_UNREACH;
	}
	cm_schedule();
	if (rc != OMPI_SUCCESS && !ep->connected)
		ep->state = MTL_TM_EP_FAILED;
	free(m);
	return rc;
}

/* ---- routes (mtl_tm.h, "Routes") ---- */

struct mtl_tm_endpoint *mtl_tm_peer_ep(struct ompi_communicator_t *comm,
				       int rank)
{
	ompi_proc_t *proc = ompi_comm_peer_lookup(comm, rank);
	struct mtl_tm_endpoint *ep;
	bool up;

	if (!proc)
		return NULL;
	/* stored (release) under the lock by add_procs or here: read
	 * without it, once the endpoint is made */
	ep = __atomic_load_n(&proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL],
			     __ATOMIC_ACQUIRE);
	if (!ep) {
		/* a proc pml cm has not handed us yet (lazy add_procs), or
		 * one of another job, first used now */
		if (mtl_tm_add_procs(&mtl_tm.super, 1, &proc) != OMPI_SUCCESS)
			return NULL;
		OPAL_THREAD_LOCK(&mtl_tm.lock);
		ep = mtl_tm_ep_get(&proc->super.proc_name, true);
		__atomic_store_n(&proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL],
				 ep, __ATOMIC_RELEASE);
		OPAL_THREAD_UNLOCK(&mtl_tm.lock);
	}
	if (!ep)
		return NULL;
	/* Under the lock, state and connected too: another thread may be
	 * connecting it (ep_make, cm_done), and the caller reads ep->peer,
	 * which that thread stores before connected. */
	OPAL_THREAD_LOCK(&mtl_tm.lock);
	if (ep->state == MTL_TM_EP_NONE)
		mtl_tm_connect(ep); /* its first use: the connection starts */
	up = ep->connected;
	OPAL_THREAD_UNLOCK(&mtl_tm.lock);
	return up ? ep : NULL;
}

int mtl_tm_route_slow(struct ompi_communicator_t *comm, int rank,
		      bool send, uint64_t *route)
{
	uint64_t *route_of = (void *)comm->c_pml_comm;
	struct mtl_tm_endpoint *ep = mtl_tm_peer_ep(comm, rank);
	uint32_t cid = 0;
	int rc;

	if (!ep) {
		if (send)
			opal_output(0, "mtl tm: rank %u: no connection to rank %d of %s",
				    mtl_tm.my_vpid, rank, comm->c_name);
		return OMPI_ERR_UNREACH;
	}
	if (ep->peer > MTL_TM_ROUTE_PEER) {
		/* never: engine peers are numbered from 0, one per QP pair */
		opal_output(0, "mtl tm: rank %u: engine peer %u of rank %d of %s past the routes' %u",
			    mtl_tm.my_vpid, ep->peer, rank, comm->c_name,
			    MTL_TM_ROUTE_PEER);
		return OMPI_ERR_UNREACH;
	}
	*route = MTL_TM_ROUTE_RECV | ep->peer;
	if (send) {
		/* the receiver's id (mtl_tm_compat.h): it matches on its own */
		rc = mtl_tm_peer_cid(comm, rank, &cid);
		if (rc != OMPI_SUCCESS || cid > TM_MAX_CTX) {
			opal_output(0, "mtl tm: rank %u: no context id of %s for its rank %d (%d, id %u)",
				    mtl_tm.my_vpid, comm->c_name, rank, rc, cid);
			return OMPI_ERR_UNREACH;
		}
		*route |= MTL_TM_ROUTE_SEND |
			  (tm_tag_make(cid, (uint32_t)ompi_comm_rank(comm), 0) &
			   ~(uint64_t)UINT32_MAX);
	}
	/* kept until del_comm: a peer's QPs live until finalize */
	if (route_of && rank >= 0 && (uint32_t)rank < route_of[-1])
		__atomic_fetch_or(&route_of[rank], *route, __ATOMIC_RELAXED);
	return OMPI_SUCCESS;
}
