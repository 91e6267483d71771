/*
 * mtl_tm_addr.c - addresses and connections (mtl_tm.h, "Addressing"):
 * the constant-size address this rank publishes in the modex (under the
 * key of mtl_tm_modex.c), and a peer's QP pair, made and connected by the
 * connection manager (dev/tm_dev_cm.h) when the peer is first used, as
 * the active side (mtl_tm_connect) or the passive one (cm_request).  A
 * peer of this job has its endpoint in mtl_tm.eps, a process of another
 * job one in mtl_tm.others, made at its first use or request.
 */
#include "mtl_tm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ucs/datastruct/khash.h>

#include "opal/util/output.h"
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

void mtl_tm_qps_destroy(void)
{
	struct mtl_tm_endpoint *ep;
	uint32_t r;

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
	if (rc != OMPI_SUCCESS && !ep->connected)
		ep->state = MTL_TM_EP_FAILED;
	free(m);
	return rc;
}

/* The connection manager's turn in progress: every call while a
 * connection is under way, else every MTL_TM_CM_EVERY-th (requests from
 * peers wait that long). */
#define MTL_TM_CM_EVERY 64
int mtl_tm_cm_progress(void)
{
	if (!mtl_tm.cm || (!tm_cm_pending(mtl_tm.cm) &&
			   ++mtl_tm.cm_skip < MTL_TM_CM_EVERY))
		return 0;
	mtl_tm.cm_skip = 0;
	return tm_cm_progress(mtl_tm.cm) > 0;
}
