/*
 * mtl_tm_data.c - the data path of mtl tm: sends, receives, probes,
 * cancel.
 *
 * NOT WIRED YET.  Every entry point says so once per process on stderr and
 * returns OMPI_ERR_NOT_SUPPORTED, which pml cm hands to the MPI error
 * handler (pml cm reports it as MPI_ERR_INTERN): a program fails at its first
 * point-to-point call instead of hanging or losing data.
 *
 * What wiring does, per entry (engine/tm_engine.h):
 *   isend/send  endpoint = ompi_comm_peer_lookup(comm, dest)
 *               ->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL]; contiguous
 *               data straight from the convertor, else pack into
 *               pack_buf; tm_engine_isend(ctx = cid, src = comm rank,
 *               tag, TM_SEND_SYNC for MCA_PML_BASE_SEND_SYNCHRONOUS);
 *               send = isend + wait on opal_progress.
 *   irecv       tm_engine_irecv(ctx, src or TM_ANY_SRC, tag or TM_ANY_TAG);
 *               the callback fills ompi_req->req_status (MPI_SOURCE =
 *               env.src, MPI_TAG = env.tag, _ucount = recv_len,
 *               MPI_ERR_TRUNCATE for TM_REQ_TRUNCATED, _cancelled) and
 *               calls completion_callback.
 *   iprobe      tm_engine_iprobe; improbe/imrecv: tm_engine_improbe into
 *               an ompi_message_t (req_ptr = struct tm_msg *),
 *               tm_engine_imrecv.
 *   cancel      receives: tm_engine_cancel_recv; sends: not cancellable
 *               until the engine's send-cancel exists (return success,
 *               the send completes normally, as pml ob1 does).
 * All under mtl_tm.lock; callbacks run after the engine call returns.
 */
#include "mtl_tm.h"

#include "opal/util/output.h"

enum {
	ENTRY_SEND, ENTRY_ISEND, ENTRY_IRECV, ENTRY_IPROBE, ENTRY_IMPROBE,
	ENTRY_IMRECV, ENTRY_CANCEL, ENTRY_MAX
};

static const char *const entry_names[ENTRY_MAX] = {
	"send", "isend", "irecv", "iprobe", "improbe", "imrecv", "cancel",
};

/* Said once per entry point, so a looping program does not flood. */
static int not_wired(int entry)
{
	static volatile int said[ENTRY_MAX];

	if (!said[entry]) {
		said[entry] = 1;
		opal_output(0, "mtl tm: %s is not wired to the matching engine yet: returning OMPI_ERR_NOT_SUPPORTED",
			    entry_names[entry]);
	}
	return OMPI_ERR_NOT_SUPPORTED;
}

int mtl_tm_send(struct mca_mtl_base_module_t *mtl,
		struct ompi_communicator_t *comm, int dest, int tag,
		struct opal_convertor_t *convertor,
		mca_pml_base_send_mode_t mode)
{
	return not_wired(ENTRY_SEND);
}

int mtl_tm_isend(struct mca_mtl_base_module_t *mtl,
		 struct ompi_communicator_t *comm, int dest, int tag,
		 struct opal_convertor_t *convertor,
		 mca_pml_base_send_mode_t mode, bool blocking,
		 mca_mtl_request_t *mtl_request)
{
	return not_wired(ENTRY_ISEND);
}

int mtl_tm_irecv(struct mca_mtl_base_module_t *mtl,
		 struct ompi_communicator_t *comm, int src, int tag,
		 struct opal_convertor_t *convertor,
		 mca_mtl_request_t *mtl_request)
{
	return not_wired(ENTRY_IRECV);
}

int mtl_tm_iprobe(struct mca_mtl_base_module_t *mtl,
		  struct ompi_communicator_t *comm, int src, int tag,
		  int *flag, struct ompi_status_public_t *status)
{
	*flag = 0;
	return not_wired(ENTRY_IPROBE);
}

int mtl_tm_improbe(struct mca_mtl_base_module_t *mtl,
		   struct ompi_communicator_t *comm, int src, int tag,
		   int *matched, struct ompi_message_t **message,
		   struct ompi_status_public_t *status)
{
	*matched = 0;
	return not_wired(ENTRY_IMPROBE);
}

int mtl_tm_imrecv(struct mca_mtl_base_module_t *mtl,
		  struct opal_convertor_t *convertor,
		  struct ompi_message_t **message,
		  mca_mtl_request_t *mtl_request)
{
	return not_wired(ENTRY_IMRECV);
}

int mtl_tm_cancel(struct mca_mtl_base_module_t *mtl,
		  mca_mtl_request_t *mtl_request, int flag)
{
	return not_wired(ENTRY_CANCEL);
}
