/*
 * mtl_tm_probe.c - MPI probes on the matching engine: iprobe, and the
 * matched probe (improbe) whose message mtl_tm_imrecv (mtl_tm_recv.c)
 * later receives.
 *
 * A probe reports by return value only; a probe of a specific rank fails
 * when that process dies (TM_ERR_PEER_DEAD from the engine), an
 * MPI_ANY_SOURCE one does not.  pml cm's probes call no progress, and a
 * program may spin on MPI_Iprobe alone: a probe that finds nothing gives
 * the connection manager its turn, so a peer connecting to this rank (or
 * the connection the probe itself started) is answered.
 */
#include "mtl_tm.h"

#include "ompi/communicator/communicator.h"
#include "ompi/message/message.h"

/*
 * pml cm passes the caller's own status down for probes (no request in
 * between), so this is the only place where the MTL writes a user's
 * status.  MPI_ERROR stays as the caller set it: probes complete one
 * operation and report errors by return value only (what pml ob1 and ucx
 * do, through OMPI_COPY_STATUS(..., false)).  _cancelled is cleared: the
 * status may be reused from a cancelled receive.
 */
static void probe_status(struct ompi_status_public_t *status,
			 const struct tm_probe_info *info)
{
	if (status == MPI_STATUS_IGNORE)
		return;
	status->MPI_SOURCE = info->env.src;
	status->MPI_TAG = info->env.tag;
	status->_ucount = info->len;
	status->_cancelled = false;
}

int mtl_tm_iprobe(struct mca_mtl_base_module_t *mtl,
		  struct ompi_communicator_t *comm, int src, int tag,
		  int *flag, struct ompi_status_public_t *status)
{
	struct tm_probe_info info;
	int rc;

	mtl_tm_tsan_enter();
	info.from = mtl_tm_src_peer(comm, src);
	mtl_tm_recv_env(comm, src, tag, &info.tag, &info.mask);
	OPAL_THREAD_LOCK(&mtl_tm.lock);
	rc = tm_engine_probe(mtl_tm.eng, &info, NULL);
	if (rc == TM_ERR_NOT_FOUND)
		mtl_tm_cm_progress();
	mtl_tm_unlock_and_complete();
	*flag = rc == TM_OK;
	if (rc == TM_OK)
		probe_status(status, &info);
	return rc == TM_OK || rc == TM_ERR_NOT_FOUND ? OMPI_SUCCESS :
	       mtl_tm_to_ompi(rc);
}

int mtl_tm_improbe(struct mca_mtl_base_module_t *mtl,
		   struct ompi_communicator_t *comm, int src, int tag,
		   int *matched, struct ompi_message_t **message,
		   struct ompi_status_public_t *status)
{
	struct tm_probe_info info;
	struct ompi_message_t *m;
	struct tm_msg *msg = NULL;
	int rc;

	mtl_tm_tsan_enter();
	*matched = 0;
	/* allocated first: once the engine hands the message over there is
	 * no giving it back */
	m = ompi_message_alloc();
	if (!m)
		return OMPI_ERR_OUT_OF_RESOURCE;
	info.from = mtl_tm_src_peer(comm, src);
	mtl_tm_recv_env(comm, src, tag, &info.tag, &info.mask);
	OPAL_THREAD_LOCK(&mtl_tm.lock);
	rc = tm_engine_probe(mtl_tm.eng, &info, &msg);
	if (rc == TM_ERR_NOT_FOUND)
		mtl_tm_cm_progress();
	mtl_tm_unlock_and_complete();
	if (rc != TM_OK) {
		ompi_message_return(m);
		*message = MPI_MESSAGE_NULL;
		return rc == TM_ERR_NOT_FOUND ? OMPI_SUCCESS : mtl_tm_to_ompi(rc);
	}
	m->comm = comm;
	m->req_ptr = msg;
	m->peer = info.env.src;
	m->count = info.len;
	*message = m;
	*matched = 1;
	probe_status(status, &info);
	return OMPI_SUCCESS;
}
