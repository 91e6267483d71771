/*
 * mtl_tm_cancel.c - MPI_Cancel of sends and receives on the matching
 * engine (the requests of mtl_tm_send.c and mtl_tm_recv.c).
 */
#include "mtl_tm.h"

#include "opal/runtime/opal_progress.h"
#include "ompi/request/request.h"

/*
 * Send cancel: the engine asks the receiver (tm_engine_cancel_send).  A
 * send still pending (rendezvous, synchronous, queued) completes later
 * through its callback, cancelled or not, so MPI_Wait sees the outcome.
 * pml cm has already completed an eager standard send (done once posted)
 * and a buffered one (its data copied): MPI_Wait returns at once, so the
 * outcome must be in the status before MPI_Cancel returns, and this waits
 * for the receiver's reply (it needs the receiver to make progress, which
 * MPICH's and our tests do; a dead receiver ends it through the
 * keepalive).  A buffered send's own copy may still be pending; its
 * identity, kept in pml cm's request, finds it.
 */
static int cancel_send(struct mtl_tm_request *req)
{
	struct mtl_tm_request *own = NULL, *waiter = req;
	struct tm_send *s = &req->u.send;
	bool wait;
	int rc;

	OPAL_THREAD_LOCK(&mtl_tm.lock);
	if (req->kind == MTL_TM_REQ_BSEND) {
		s = tm_engine_find_send(mtl_tm.eng, req->u.send.peer,
					req->u.send.seq);
		if (s) {
			own = ucs_container_of(s, struct mtl_tm_request,
					       u.send);
			own->bsend_waiter = req;
		} else {
			s = &req->u.send;
		}
		wait = true;
	} else if (req->completed) {
		wait = true;
	} else if (req->engine_done) {
		/* another thread is completing it right now: too late */
		OPAL_THREAD_UNLOCK(&mtl_tm.lock);
		return OMPI_SUCCESS;
	} else {
		wait = false;
	}
	waiter->cancel_wait = wait;
	rc = tm_engine_cancel_send(mtl_tm.eng, s);
	if (rc != TM_OK) {
		waiter->cancel_wait = false;
		if (own)
			own->bsend_waiter = NULL;
	}
	mtl_tm_unlock_and_complete();
	if (rc == TM_ERR_NOT_FOUND)
		return OMPI_SUCCESS; /* nothing to withdraw: not cancelled */
	if (rc != TM_OK)
		return mtl_tm_to_ompi(rc);
	while (__atomic_load_n(&waiter->cancel_wait, __ATOMIC_ACQUIRE))
		opal_progress();
	if (wait && waiter->cancel_result)
		req->super.ompi_req->req_status._cancelled = true;
	return OMPI_SUCCESS;
}

/*
 * Receives: cancelled iff not yet matched; the engine completes the
 * request either way (TM_REQ_CANCELLED or the message), possibly later,
 * once the card confirmed.
 */
int mtl_tm_cancel(struct mca_mtl_base_module_t *mtl,
		  mca_mtl_request_t *mtl_request, int flag)
{
	struct mtl_tm_request *req = (struct mtl_tm_request *)mtl_request;
	int rc;

	/* an inactive persistent request has no communication to cancel
	 * (Open MPI's MPI_Cancel passes it down): its last send was waited
	 * for, and must stay delivered */
	if (req->super.ompi_req &&
	    req->super.ompi_req->req_state == OMPI_REQUEST_INACTIVE)
		return OMPI_SUCCESS;
	if (req->kind == MTL_TM_REQ_SEND || req->kind == MTL_TM_REQ_BSEND)
		return cancel_send(req);
	if (req->kind != MTL_TM_REQ_RECV)
		return OMPI_SUCCESS;
	OPAL_THREAD_LOCK(&mtl_tm.lock);
	rc = tm_engine_cancel_recv(mtl_tm.eng, &req->u.recv);
	mtl_tm_unlock_and_complete();
	return mtl_tm_to_ompi(rc);
}
