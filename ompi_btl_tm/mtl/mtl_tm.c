/*
 * mtl_tm.c - the control path of mtl tm: device, QPs and modex at init,
 * add/del procs, add/del comm, progress, finalize.  See mtl_tm.h for the
 * addressing scheme.
 *
 * The matching engine (engine/tm_engine.h) is created at init, learns
 * each peer's QP at add_procs, is driven by the progress hook and drained
 * at finalize.
 */
#include "mtl_tm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opal/mca/pmix/pmix.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "ompi/communicator/communicator.h"
#include "ompi/proc/proc.h"
#include "ompi/mca/rte/rte.h"

#include <infiniband/tm_types.h>
#include "softhca/softhca.h"

struct mtl_tm_module mtl_tm = {
	.super = {
		/* The engine's tag layout: 14-bit context id, 32-bit tag. */
		.mtl_max_contextid = TM_MAX_CTX,
		.mtl_max_tag = INT32_MAX,
		.mtl_request_size = sizeof(struct mtl_tm_request) -
				    sizeof(struct mca_mtl_request_t),
		/* QPs are made for the whole job at init (mtl_tm.h). */
		.mtl_flags = MCA_MTL_BASE_FLAG_REQUIRE_WORLD,
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

static const char *provider_name(int prov)
{
	switch (prov) {
	case MTL_TM_PROVIDER_SOFT: return "soft";
	case MTL_TM_PROVIDER_VERBS: return "verbs";
	}
	return "auto";
}

/* Parameters that cannot work together are refused before any set-up. */
static int check_params(void)
{
	const struct mtl_tm_params *p = &mtl_tm_params;
	size_t eager = p->eager_limit;

	if (p->rndv_threshold && p->rndv_threshold - 1 < eager)
		eager = p->rndv_threshold - 1;
	if (p->n_plain == 0 || p->n_plain >= 32768) {
		mtl_tm_show_error("bad-parameter",
				  "mtl_tm_plain_buffers must be 1..32767 (is %u).",
				  p->n_plain);
		return OMPI_ERR_BAD_PARAM;
	}
	/* An unexpected eager message lands whole in one plain buffer. */
	if (p->plain_size < eager + sizeof(struct ibv_tmh)) {
		mtl_tm_show_error("bad-parameter",
				  "mtl_tm_plain_buffer_size (%zu) must hold the tag header\n"
				  "(%zu) plus the eager size (%zu: the smaller of mtl_tm_eager_limit\n"
				  "and mtl_tm_rndv_threshold - 1).",
				  p->plain_size, sizeof(struct ibv_tmh), eager);
		return OMPI_ERR_BAD_PARAM;
	}
	return OMPI_SUCCESS;
}

/* The soft HCA reads its limits when a context opens: set them first. */
static int set_softhca_config(uint32_t nprocs)
{
	const struct mtl_tm_params *p = &mtl_tm_params;
	struct softhca_config c;
	int err;

	softhca_config_default(&c);
	c.mtu = p->sh_mtu;
	c.ring_depth = p->sh_ring_depth;
	c.max_num_tags = p->sh_max_num_tags;
	c.max_ops = p->sh_max_ops;
	c.max_rndv_hdr_size = p->sh_max_rndv_hdr_size;
	/* one QP per rank of the job, our own included */
	c.max_qp = p->sh_max_qp < nprocs ? nprocs : p->sh_max_qp;
	c.max_mr = p->sh_max_mr;
	c.max_wr = p->sh_max_wr;
	c.sched = (enum softhca_sched)p->sh_sched;
	c.seed = p->sh_seed;
	c.force_copy_read = getenv("SOFTHCA_FORCE_COPY_READ") &&
			    strcmp(getenv("SOFTHCA_FORCE_COPY_READ"), "0");
	err = softhca_set_config(&c);
	if (err) {
		mtl_tm_show_error("bad-parameter",
				  "the soft HCA refuses its limits (%s):\n"
				  "mtl_tm_softhca_mtu %u, _ring_depth %u, _max_num_tags %u,\n"
				  "_max_ops %u, _max_rndv_hdr_size %u, _max_qp %u, _max_mr %u,\n"
				  "_max_wr %u.  See softhca(7) for the ranges.",
				  strerror(err), c.mtu, c.ring_depth,
				  c.max_num_tags, c.max_ops,
				  c.max_rndv_hdr_size, c.max_qp, c.max_mr,
				  c.max_wr);
		return OMPI_ERR_BAD_PARAM;
	}
	return OMPI_SUCCESS;
}

static void destroy_qps(void)
{
	uint32_t r;

	if (!mtl_tm.eps)
		return;
	for (r = 0; r < mtl_tm.nprocs; r++)
		if (mtl_tm.eps[r].qp)
			tm_dev_qp_destroy(mtl_tm.dev, mtl_tm.eps[r].qp);
	free(mtl_tm.eps);
	mtl_tm.eps = NULL;
}

/* One QP per rank of the job, and their numbers in the modex. */
static int create_qps_and_publish(void)
{
	struct mtl_tm_modex *m;
	struct ibv_qp *qp;
	size_t size;
	uint32_t r;
	int rc;

	mtl_tm.eps = calloc(mtl_tm.nprocs, sizeof(*mtl_tm.eps));
	size = sizeof(*m) + mtl_tm.nprocs * sizeof(m->qpn[0]);
	m = calloc(1, size);
	if (!mtl_tm.eps || !m) {
		free(m);
		return OMPI_ERR_OUT_OF_RESOURCE;
	}
	m->magic = MTL_TM_MODEX_MAGIC;
	m->nqp = mtl_tm.nprocs;
	strncpy(m->provider, mtl_tm.dev->verbs->name, sizeof(m->provider) - 1);
	for (r = 0; r < mtl_tm.nprocs; r++) {
		rc = tm_dev_qp_create(mtl_tm.dev, &qp);
		if (rc != TM_OK) {
			opal_output(0, "mtl tm: %s: cannot create QP %u of %u: %s (%s)",
				    mtl_tm.dev->name, r, mtl_tm.nprocs,
				    tm_status_str(rc), strerror(errno));
			free(m);
			return OMPI_ERR_OUT_OF_RESOURCE;
		}
		mtl_tm.eps[r].qp = qp;
		mtl_tm.eps[r].vpid = r;
		if (r == 0)
			tm_dev_qp_addr(mtl_tm.dev, qp, &m->addr);
		m->qpn[r] = qp->qp_num;
	}
	m->addr.qp_num = 0;
	OPAL_MODEX_SEND(rc, OPAL_PMIX_GLOBAL,
			&mca_mtl_tm_component.mtl_version, m, size);
	free(m);
	if (rc != OPAL_SUCCESS) {
		opal_output(0, "mtl tm: modex send failed: %d", rc);
		return rc;
	}
	return OMPI_SUCCESS;
}

int mtl_tm_module_init(bool enable_mpi_threads)
{
	const struct mtl_tm_params *p = &mtl_tm_params;
	struct tm_engine_config ecfg;
	struct tm_dev_config cfg;
	int rc;

	mtl_tm.nprocs = ompi_process_info.num_procs;
	mtl_tm.my_vpid = OMPI_PROC_MY_NAME->vpid;
	mtl_tm.mpi_threads = enable_mpi_threads;
	if (mtl_tm.nprocs == 0 || mtl_tm.my_vpid >= mtl_tm.nprocs) {
		opal_output(0, "mtl tm: odd job size %u / rank %u",
			    mtl_tm.nprocs, mtl_tm.my_vpid);
		return OMPI_ERROR;
	}
	rc = check_params();
	if (rc != OMPI_SUCCESS)
		return rc;
	if (p->provider != MTL_TM_PROVIDER_VERBS) {
		rc = set_softhca_config(mtl_tm.nprocs);
		if (rc != OMPI_SUCCESS)
			return rc;
	}

	tm_dev_config_default(&cfg);
	cfg.provider = provider_name(p->provider);
	cfg.max_num_tags = p->max_tags;
	cfg.max_ops = p->max_ops;
	cfg.srq_max_wr = p->n_plain;
	rc = tm_dev_open(&cfg, &mtl_tm.dev);
	if (rc != TM_OK) {
		/* tm_dev_open said why on stderr */
		mtl_tm_show_error("no-device",
				  "cannot open a tag-matching device (provider %s): %s.",
				  cfg.provider, tm_status_str(rc));
		return OMPI_ERR_NOT_AVAILABLE;
	}
	opal_output_verbose(10, mtl_tm_output,
			    "mtl tm: rank %u of %u on %s: %u tags, %u ops, rndv header %u",
			    mtl_tm.my_vpid, mtl_tm.nprocs, mtl_tm.dev->name,
			    mtl_tm.dev->caps.max_num_tags,
			    mtl_tm.dev->caps.max_ops,
			    mtl_tm.dev->caps.max_rndv_hdr_size);

	rc = create_qps_and_publish();
	if (rc != OMPI_SUCCESS)
		goto fail;

	tm_engine_config_default(&ecfg);
	ecfg.eager_limit = p->eager_limit;
	if (p->rndv_threshold && p->rndv_threshold - 1 < ecfg.eager_limit)
		ecfg.eager_limit = p->rndv_threshold - 1;
	ecfg.n_plain = p->n_plain;
	ecfg.n_send_slots = p->send_slots;
	ecfg.max_card_entries = p->max_tags;
	ecfg.offload = p->offload;
	ecfg.keepalive_ms = p->keepalive_ms;
	rc = tm_engine_create(mtl_tm.dev, &ecfg, &mtl_tm.eng);
	if (rc != TM_OK) {
		opal_output(0, "mtl tm: %s: cannot create the matching engine: %s",
			    mtl_tm.dev->name, tm_status_str(rc));
		rc = OMPI_ERR_OUT_OF_RESOURCE;
		goto fail;
	}
	ucs_list_head_init(&mtl_tm.done);

	OBJ_CONSTRUCT(&mtl_tm.lock, opal_mutex_t);
	/* pml cm has no progress hook of its own: without this nothing
	 * would drive the engine while MPI waits. */
	rc = opal_progress_register(mtl_tm_progress);
	if (rc != OPAL_SUCCESS) {
		OBJ_DESTRUCT(&mtl_tm.lock);
		goto fail;
	}
	mtl_tm.progress_registered = true;
	return OMPI_SUCCESS;

fail:
	tm_engine_destroy(mtl_tm.eng);
	mtl_tm.eng = NULL;
	destroy_qps();
	tm_dev_close(mtl_tm.dev);
	mtl_tm.dev = NULL;
	return rc;
}

/* Connects our QP for rank vpid to that rank's QP for us. */
static int connect_peer(struct mtl_tm_endpoint *ep,
			const opal_process_name_t *name)
{
	struct mtl_tm_modex *m = NULL;
	struct tm_dev_addr addr;
	int32_t size = 0;
	int rc;

	if (ep->vpid == mtl_tm.my_vpid) {
		/* loopback: our QP for ourselves talks to itself */
		tm_dev_qp_addr(mtl_tm.dev, ep->qp, &addr);
	} else {
		OPAL_MODEX_RECV(rc, &mca_mtl_tm_component.mtl_version, name,
				(void **)&m, &size);
		if (rc != OPAL_SUCCESS || !m) {
			opal_output(0, "mtl tm: no modex data from rank %u: %d",
				    ep->vpid, rc);
			return OMPI_ERR_UNREACH;
		}
		if ((size_t)size < sizeof(*m) || m->magic != MTL_TM_MODEX_MAGIC ||
		    m->nqp != mtl_tm.nprocs ||
		    (size_t)size < sizeof(*m) + m->nqp * sizeof(m->qpn[0])) {
			opal_output(0, "mtl tm: bad modex data from rank %u (size %d)",
				    ep->vpid, (int)size);
			free(m);
			return OMPI_ERR_UNREACH;
		}
		if (strncmp(m->provider, mtl_tm.dev->verbs->name,
			    sizeof(m->provider))) {
			opal_output(0, "mtl tm: rank %u uses provider %.8s, this rank %s: they cannot talk (set mtl_tm_provider alike everywhere)",
				    ep->vpid, m->provider,
				    mtl_tm.dev->verbs->name);
			free(m);
			return OMPI_ERR_UNREACH;
		}
		addr = m->addr;
		addr.qp_num = m->qpn[mtl_tm.my_vpid];
		free(m);
	}
	rc = tm_dev_qp_connect(mtl_tm.dev, ep->qp, &addr);
	if (rc != TM_OK) {
		opal_output(0, "mtl tm: cannot connect to rank %u (QP %u): %s",
			    ep->vpid, addr.qp_num, tm_status_str(rc));
		return OMPI_ERR_UNREACH;
	}
	rc = tm_engine_add_peer(mtl_tm.eng, ep->qp, &ep->peer);
	if (rc != TM_OK) {
		opal_output(0, "mtl tm: cannot add rank %u to the engine: %s",
			    ep->vpid, tm_status_str(rc));
		return OMPI_ERR_OUT_OF_RESOURCE;
	}
	ep->connected = true;
	opal_output_verbose(20, mtl_tm_output,
			    "mtl tm: rank %u: QP %u connected to rank %u QP %u",
			    mtl_tm.my_vpid, ep->qp->qp_num, ep->vpid,
			    addr.qp_num);
	return OMPI_SUCCESS;
}

int mtl_tm_add_procs(struct mca_mtl_base_module_t *mtl, size_t nprocs,
		     struct ompi_proc_t **procs)
{
	struct mtl_tm_endpoint *ep;
	opal_process_name_t *name;
	int rc = OMPI_SUCCESS;
	size_t i;

	OPAL_THREAD_LOCK(&mtl_tm.lock);
	for (i = 0; i < nprocs; i++) {
		name = &procs[i]->super.proc_name;
		if (name->jobid != OMPI_PROC_MY_NAME->jobid ||
		    name->vpid >= mtl_tm.nprocs) {
			opal_output(0, "mtl tm: %s is not in this job: processes from MPI_Comm_spawn or connect/accept are not supported",
				    OMPI_NAME_PRINT(name));
			rc = OMPI_ERR_NOT_SUPPORTED;
			break;
		}
		ep = &mtl_tm.eps[name->vpid];
		if (!ep->connected) {
			rc = connect_peer(ep, name);
			if (rc != OMPI_SUCCESS)
				break;
		}
		procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL] = ep;
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
		procs[i]->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL] = NULL;
	return OMPI_SUCCESS;
}

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* What the card did for this process, for mtl_tm_verbose >= 10. */
/*
 * errors_run: the engine's error count when finalize began.  Errors after
 * that are teardown races (a peer that finished first destroyed its QPs
 * while this rank still drained) and are reported apart.
 */
static void log_stats(uint64_t errors_run)
{
	struct tm_engine_stats st;

	if (mtl_tm_params.verbose < 10)
		return;
	tm_engine_get_stats(mtl_tm.eng, &st);
	opal_output(mtl_tm_output,
		    "mtl tm: rank %u: receives %llu (to card %llu, from unexpected queue %llu), kept in software: conflict %llu, list full %llu, ops busy %llu, small buffer %llu; card matched %llu, unexpected %llu, rendezvous card/sw %llu/%llu, truncated %llu, cancelled %llu, syncs %llu, promoted %llu, errors %llu (+%llu at teardown)",
		    mtl_tm.my_vpid, (unsigned long long)st.recv_posted,
		    (unsigned long long)st.recv_to_card,
		    (unsigned long long)st.sw_matched_uq,
		    (unsigned long long)st.sw_conflict,
		    (unsigned long long)st.sw_list_full,
		    (unsigned long long)st.sw_ops_full,
		    (unsigned long long)st.sw_small_buf,
		    (unsigned long long)st.card_matched,
		    (unsigned long long)st.unexpected,
		    (unsigned long long)st.rndv_card,
		    (unsigned long long)st.rndv_sw,
		    (unsigned long long)st.truncated,
		    (unsigned long long)st.cancel_ok,
		    (unsigned long long)st.syncs,
		    (unsigned long long)st.promoted,
		    (unsigned long long)errors_run,
		    (unsigned long long)(st.errors - errors_run));
}

/* How long finalize keeps driving the engine for work still in flight. */
#define MTL_TM_DRAIN_SECONDS 5.0

int mtl_tm_finalize(struct mca_mtl_base_module_t *mtl)
{
	double deadline = now_sec() + MTL_TM_DRAIN_SECONDS;

	if (mtl_tm.progress_registered) {
		opal_progress_unregister(mtl_tm_progress);
		mtl_tm.progress_registered = false;
	}
	if (mtl_tm.eng) {
		struct tm_engine_stats st;

		tm_engine_get_stats(mtl_tm.eng, &st);
		/*
		 * An ACK, FIN or read a peer still waits for may be queued or
		 * on the wire: keep going until nothing is in flight, but
		 * never hang here on a peer that is gone.
		 */
		for (;;) {
			OPAL_THREAD_LOCK(&mtl_tm.lock);
			if (tm_engine_idle(mtl_tm.eng) || now_sec() > deadline) {
				OPAL_THREAD_UNLOCK(&mtl_tm.lock);
				break;
			}
			tm_engine_progress(mtl_tm.eng);
			mtl_tm_unlock_and_complete();
		}
		if (!tm_engine_idle(mtl_tm.eng))
			opal_output_verbose(10, mtl_tm_output,
					    "mtl tm: rank %u: finalize with work still in flight after %.0f s",
					    mtl_tm.my_vpid, MTL_TM_DRAIN_SECONDS);
		log_stats(st.errors);
		/* before the QPs go: the engine holds MRs and posts on them */
		tm_engine_destroy(mtl_tm.eng);
		mtl_tm.eng = NULL;
		OBJ_DESTRUCT(&mtl_tm.lock);
	}
	destroy_qps();
	tm_dev_close(mtl_tm.dev);
	mtl_tm.dev = NULL;
	return OMPI_SUCCESS;
}

/*
 * The tag carries the context id and the sender's rank in its local group
 * (the receiver's remote group for an intercommunicator): both must fit.
 */
int mtl_tm_add_comm(struct mca_mtl_base_module_t *mtl,
		    struct ompi_communicator_t *comm)
{
	uint32_t cid = ompi_comm_get_cid(comm);
	int size = ompi_comm_size(comm);

	if (OMPI_COMM_IS_INTER(comm) && ompi_comm_remote_size(comm) > size)
		size = ompi_comm_remote_size(comm);
	if (cid > TM_MAX_CTX || (uint32_t)size > TM_MAX_SRC + 1u) {
		opal_output(0, "mtl tm: communicator %s (context id %u, %d ranks) exceeds the tag layout (%u context ids, %u ranks)",
			    comm->c_name, cid, size, TM_MAX_CTX + 1,
			    TM_MAX_SRC + 1);
		return OMPI_ERR_NOT_SUPPORTED;
	}
	return OMPI_SUCCESS;
}

int mtl_tm_del_comm(struct mca_mtl_base_module_t *mtl,
		    struct ompi_communicator_t *comm)
{
	return OMPI_SUCCESS;
}

/*
 * Called from opal_progress() by every thread that waits.  The engine is
 * single threaded: a thread that finds it busy leaves the work to the
 * thread inside.
 */
int mtl_tm_progress(void)
{
	int n;

	if (!mtl_tm.eng)
		return 0;
	if (OPAL_THREAD_TRYLOCK(&mtl_tm.lock))
		return 0;
	n = tm_engine_progress(mtl_tm.eng);
	n = (n > 0 ? n : 0) + mtl_tm_unlock_and_complete();
	return n;
}
