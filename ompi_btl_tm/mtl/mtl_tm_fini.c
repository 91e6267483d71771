/*
 * mtl_tm_fini.c - the end of a process: its last sends retired while every
 * peer still runs, then the statistics line and finalize.
 *
 * Sends go unsignalled (engine/tm_tx.h): what became of them is known only
 * when a later signalled request on the same QP completes, so a rank with
 * such sends at its end posts a keepalive to each of their peers and
 * waits for it (tm_engine_idle).  A peer that already tore down its QP
 * fails that keepalive: on the soft HCA at once, over RC on a real card
 * only after the retry window, which would hold finalize up to its drain
 * limit.  So the drain runs before anyone can tear down: MPI_Finalize
 * (Open MPI 4.1 and 5.0 alike) deletes MPI_COMM_SELF's attributes first,
 * then waits in a PMIx fence for every process of the job, and only after
 * the fence calls del_procs and finalizes the pml and with it this MTL.
 * An attribute set on MPI_COMM_SELF at MPI_Init (mtl_tm_watch_finalize)
 * is deleted last (MPI deletes them in reverse order of setting), after
 * the program's own callbacks, which may still communicate; its delete
 * callback drains.  What still flies after that is drained again in
 * finalize, as is everything in a job that never had that attribute
 * (MPI sessions).
 */
#include "mtl_tm.h"
#include "mtl_tm_pvar.h"

#include <time.h>

#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "ompi/attribute/attribute.h"
#include "ompi/communicator/communicator.h"

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * What the card did for this process, for mtl_tm_verbose >= 10 (the
 * statistics line of mtl_tm(7): keep the two in step), from the MPI_T
 * performance variables (mtl_tm_pvar.h), so the two cannot disagree.
 * errors_run: the error count when the last drain began (before the
 * finalize fence, or in finalize without one).  Errors after that
 * happened while peers tore down and are reported apart: 0 when every
 * send was retired before the fence.
 */
static void log_stats(unsigned long long errors_run)
{
	unsigned long long v[MTL_TM_PV_N];

	if (mtl_tm_params.verbose < 10)
		return;
	mtl_tm_pvar_read(v);
	opal_output(mtl_tm_output,
		    "mtl tm: rank %u: receives %llu (to card %llu, from unexpected queue %llu), kept in software: conflict %llu, list full %llu, ops busy %llu, small buffer %llu, long buffer %llu, no staging %llu, offload off %llu, no tag matching %llu, below threshold %llu, registration failed %llu; card matched %llu, unexpected %llu, rendezvous card/sw %llu/%llu, truncated %llu, cancelled %llu, send cancels asked %llu ok %llu late %llu, syncs %llu, promoted %llu, errors %llu (+%llu at teardown), unexpected held at mtl_tm_unexpected_mem %llu, spilled %llu; mode: %s on %s",
		    mtl_tm.my_vpid, v[MTL_TM_PV_RECEIVES],
		    v[MTL_TM_PV_TO_CARD], v[MTL_TM_PV_FROM_UQ],
		    v[MTL_TM_PV_SW_CONFLICT], v[MTL_TM_PV_SW_LIST_FULL],
		    v[MTL_TM_PV_SW_OPS_BUSY], v[MTL_TM_PV_SW_SMALL_BUF],
		    v[MTL_TM_PV_SW_LONG_BUF], v[MTL_TM_PV_SW_NO_STAGE],
		    v[MTL_TM_PV_SW_NO_OFFLOAD], v[MTL_TM_PV_SW_NO_TM],
		    v[MTL_TM_PV_SW_BELOW_THRESH], v[MTL_TM_PV_SW_REG_FAIL], v[MTL_TM_PV_CARD_MATCHED],
		    v[MTL_TM_PV_UNEXPECTED], v[MTL_TM_PV_RNDV_CARD],
		    v[MTL_TM_PV_RNDV_SW], v[MTL_TM_PV_TRUNCATED],
		    v[MTL_TM_PV_CANCELLED], v[MTL_TM_PV_SCANCEL_REQ],
		    v[MTL_TM_PV_SCANCEL_OK], v[MTL_TM_PV_SCANCEL_LATE],
		    v[MTL_TM_PV_SYNCS], v[MTL_TM_PV_PROMOTED], errors_run,
		    v[MTL_TM_PV_ERRORS] - errors_run,
		    v[MTL_TM_PV_UNEXP_THROTTLED], v[MTL_TM_PV_UNEXP_SPILLED],
		    mtl_tm.dev->tm ? "tag matching on the card" :
				     "no tag matching (all matched in software)",
		    mtl_tm.dev->name);
}

/* How long finalize keeps driving the engine for work still in flight. */
#define MTL_TM_DRAIN_SECONDS 5.0

/*
 * Drives the engine until nothing is in flight: an ACK, FIN or read a
 * peer still waits for, or sends not known to have arrived (the engine
 * probes their peers).  Never longer than MTL_TM_DRAIN_SECONDS, so a
 * peer that is gone holds nobody.  1 if all is done.
 */
static int drain(void)
{
	double deadline = now_sec() + MTL_TM_DRAIN_SECONDS;

	for (;;) {
		OPAL_THREAD_LOCK(&mtl_tm.lock);
		if (tm_engine_idle(mtl_tm.eng)) {
			OPAL_THREAD_UNLOCK(&mtl_tm.lock);
			return 1;
		}
		if (now_sec() > deadline) {
			OPAL_THREAD_UNLOCK(&mtl_tm.lock);
			return 0;
		}
		tm_engine_progress(mtl_tm.eng);
		mtl_tm_cm_progress();
		mtl_tm_unlock_and_complete();
	}
}

/* The error count when the drain before the fence began (fence_drain:
 * it ran): errors after it are teardown's (the statistics line).
 * fence_gave_up: it ran out of time, so a peer is gone without the
 * engine knowing yet: finalize does not wait for it a second time. */
static unsigned long long errors_run;
static bool fence_drain, fence_gave_up;
static int self_keyval = -1;

static void note_errors(void)
{
	unsigned long long v[MTL_TM_PV_N];

	mtl_tm_pvar_read(v);
	errors_run = v[MTL_TM_PV_ERRORS];
}

/* MPI_COMM_SELF's attribute goes: MPI_Finalize, before its fence. */
static int self_deleted(MPI_Comm comm, int keyval, void *value, void *extra)
{
	if (!mtl_tm.eng)
		return MPI_SUCCESS;
	note_errors();
	fence_drain = true;
	fence_gave_up = !drain();
	if (fence_gave_up)
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: rank %u: work still in flight %.0f s into MPI_Finalize",
				    mtl_tm.my_vpid, MTL_TM_DRAIN_SECONDS);
	return MPI_SUCCESS;
}

/* A duplicate of MPI_COMM_SELF does not get it. */
static int self_copied(MTL_TM_ATTR_COPY_PARAMS)
{
	*flag = 0;
	return MPI_SUCCESS;
}

void mtl_tm_watch_finalize(struct ompi_communicator_t *comm)
{
	ompi_attribute_fn_ptr_union_t copy, del;
	int rc;

	if (comm != &ompi_mpi_comm_self.comm || self_keyval >= 0)
		return;
	copy.attr_communicator_copy_fn = self_copied;
	del.attr_communicator_delete_fn = self_deleted;
	rc = ompi_attr_create_keyval(COMM_ATTR, copy, del, &self_keyval, NULL,
				     0, NULL);
	if (rc == OMPI_SUCCESS)
		rc = ompi_attr_set_c(COMM_ATTR, comm, &comm->c_keyhash,
				     self_keyval, NULL, false);
	/* without it finalize still drains, only later */
	if (rc != OMPI_SUCCESS)
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: rank %u: no attribute on MPI_COMM_SELF (%d): last sends drained after the finalize fence",
				    mtl_tm.my_vpid, rc);
}

int mtl_tm_finalize(struct mca_mtl_base_module_t *mtl)
{
	if (mtl_tm.progress_registered) {
		opal_progress_unregister(mtl_tm_progress);
		mtl_tm.progress_registered = false;
	}
	mtl_tm.progress_fast = false;
	if (mtl_tm.eng) {
		if (!fence_drain)
			note_errors();
		if (!fence_gave_up && !drain())
			opal_output_verbose(10, mtl_tm_output,
					    "mtl tm: rank %u: finalize with work still in flight after %.0f s",
					    mtl_tm.my_vpid, MTL_TM_DRAIN_SECONDS);
		log_stats(errors_run);
		/* before the QPs go: the engine holds MRs and posts on them */
		tm_engine_destroy(mtl_tm.eng);
		mtl_tm.eng = NULL;
		OBJ_DESTRUCT(&mtl_tm.lock);
	}
	mtl_tm_qps_destroy();
	/* known only once something was registered (made at first use) */
	if (mtl_tm.dev && mtl_tm.dev->rcache_off)
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: %s: there was no registration cache (%s): buffers were registered per message",
				    mtl_tm.dev->name, mtl_tm.dev->rcache_off);
	tm_dev_close(mtl_tm.dev);
	mtl_tm.dev = NULL;
	/* for the next initialisation (MPI sessions): Open MPI frees the
	 * keyval with the rest of its attributes when the last session or
	 * MPI_Finalize ends */
	fence_drain = fence_gave_up = false;
	errors_run = 0;
	self_keyval = -1;
	return OMPI_SUCCESS;
}

