/*
 * mtl_tm_data.c - the data path of mtl tm: sends, receives, probes,
 * cancel, on the matching engine (engine/tm_engine.h).
 *
 * Envelope: the engine's tag carries (ctx, src, tag) = (the communicator's
 * context id, the sender's rank in that communicator (its local group for
 * an intercommunicator), the MPI tag); the destination is the engine peer
 * of the QP this process keeps for the destination's rank in the job.
 * MPI_ANY_SOURCE / MPI_ANY_TAG become TM_ANY_SRC / TM_ANY_TAG; the tag
 * layout keeps ANY_TAG off Open MPI's negative internal tags.
 *
 * Data: a contiguous buffer goes to the engine as is; any other datatype
 * is packed into (sends) or received through (receives) a temporary
 * buffer, unpacked at completion.
 *
 * Buffered sends: pml cm packs them into the attached buffer and calls
 * isend, but then completes its request at once, without waiting for the
 * MTL, and may restart it (MPI_Bsend_init) while the first send is still in
 * flight, or free the attached-buffer space when our completion comes.
 * So a buffered send gets a request and a copy of its data of our own,
 * and pml cm's request is completed before isend returns.
 *
 * Small receives: the engine keeps a receive whose buffer cannot hold
 * the tag and rendezvous headers in software (it could not finish a
 * truncated rendezvous otherwise), and the prefix rule then keeps every
 * later receive that could take the same message off the card too.  Tiny
 * receives are the common case (barriers are zero-byte messages), so a
 * receive of fewer than sizeof(small) bytes lands in a staging area in the
 * request and is copied (or unpacked) out at completion; the MTL works
 * out truncation against the user's length from the full message length.
 *
 * Cancels: mtl_tm_cancel.c.
 *
 * Locking and completion: every engine call holds mtl_tm.lock.  The
 * engine's callbacks only queue the request on mtl_tm.done; after the
 * engine call, mtl_tm_unlock_and_complete() drops the lock and then fills
 * in the MPI status and calls pml cm's completion callback.  So pml cm
 * code (which may start new operations) never runs under the lock, and
 * the engine never sees a call from inside itself.  One exception, which
 * runs no pml cm code: a blocking send (mtl_tm_send) without MPI threads
 * is finished in its callback (see send_cb).
 *
 * Threads (MPI_THREAD_MULTIPLE): the thread that completes a request is
 * whichever drove the engine, often not the one waiting for it (Open MPI
 * keeps all but one waiting thread asleep on a condition variable, and
 * the completion wakes it).  Yielding the core after completing another
 * thread's request, and letting threads that wait for the lock in ahead
 * of the progress hook, were tried (bench/latency_mt, two receiving
 * threads on one core): no measurable change, a hand-over costs ~30 us
 * either way, as with pml ob1 (bench/README.md, "Threads").
 *
 * Errors: an engine error on a request (a peer that died, a failed
 * read) becomes MPI_ERR_OTHER in the request's status; the engine reports
 * a send to a dead peer through the soft HCA's RETRY_EXC completion.  A
 * receive reports MPI_ERR_TRUNCATE, or MPI_ERR_TYPE for a message ending
 * inside a basic element of its datatype.  Those go in the request's own
 * status, which Open MPI turns into the return value or, for the
 * multiple-completion calls, copies out whole; a user's status is written
 * here only by the probes (see probe_status).  A receive or probe from a
 * specific rank names that rank's engine peer, so it fails too when that
 * process dies (MPI_ANY_SOURCE ones do not).
 */
#include "mtl_tm.h"

#include <stdlib.h>
#include <string.h>

#include "opal/datatype/opal_convertor.h"
#include "opal/datatype/opal_datatype_internal.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "ompi/communicator/communicator.h"
#include "ompi/message/message.h"
#include "ompi/proc/proc.h"
#include "ompi/request/request.h"
#include "ompi/mca/mtl/base/mtl_base_datatype.h"

static void free_pack(struct mtl_tm_request *req)
{
	if (req->pack_free)
		free(req->pack_buf);
	req->pack_buf = NULL;
	req->pack_free = false;
}

/* A send's outcome as pml cm wants it; frees its packed copy. */
static int send_error(struct mtl_tm_request *req)
{
	int st = req->u.send.status;
	int err = st == TM_REQ_OK || st == TM_REQ_CANCELLED ? OMPI_SUCCESS :
		  MPI_ERR_OTHER;

	free_pack(req);
	req->error = err;
	if (err != OMPI_SUCCESS)
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: rank %u: send to peer %u failed",
				    mtl_tm.my_vpid, req->u.send.peer);
	return err;
}

/* Engine callbacks: run inside an engine call, under the lock. */
static void send_cb(struct tm_send *s)
{
	struct mtl_tm_request *req = s->arg;

	req->engine_done = true;
	/*
	 * A blocking send (mtl_tm_send: no ompi request, nothing of pml cm
	 * runs at its completion) without MPI threads: its caller waits on
	 * req->done further up this very thread's stack, so it is done here
	 * rather than through the done list.  With threads its caller may
	 * be another thread, which could return (its req is on its stack)
	 * while the engine still holds s: the done list, after the engine
	 * call, it is.
	 */
	if (!req->super.ompi_req && !req->detached && !mtl_tm.mpi_threads) {
		send_error(req);
		req->done = true;
		return;
	}
	ucs_list_add_tail(&mtl_tm.done, &req->done_link);
}

static void recv_cb(struct tm_recv *r)
{
	struct mtl_tm_request *req = r->arg;

	ucs_list_add_tail(&mtl_tm.done, &req->done_link);
}

static void complete_send(struct mtl_tm_request *req)
{
	bool cancelled = req->u.send.status == TM_REQ_CANCELLED;

	if (req->cancel_wait) {
		/* the outcome of a cancel of a send pml cm already completed
		 * (see "Send cancel"): mtl_tm_cancel reports it */
		req->cancel_result = cancelled;
		req->cancel_wait = false;
		return;
	}
	if (req->detached) {
		/* a buffered send's own copy: only a cancel may wait for it */
		if (req->bsend_waiter) {
			req->bsend_waiter->cancel_result = cancelled;
			req->bsend_waiter->cancel_wait = false;
		}
		if (req->u.send.status != TM_REQ_OK && !cancelled)
			opal_output_verbose(10, mtl_tm_output,
					    "mtl tm: rank %u: buffered send to peer %u failed",
					    mtl_tm.my_vpid, req->u.send.peer);
		free_pack(req);
		free(req);
		return;
	}

	int err = send_error(req);

	/* pml cm does not reset a send's MPI_ERROR when it (re)starts one:
	 * a recycled request would keep an old value */
	if (req->super.ompi_req) {
		req->super.ompi_req->req_status.MPI_ERROR = err;
		req->super.ompi_req->req_status._cancelled = cancelled;
	}
	req->completed = true;
	req->super.completion_callback(&req->super);
}

/*
 * A message that ends inside a basic element of the receive type (3 bytes
 * into MPI_INT) cannot have matched the receive's type signature.  The
 * wire carries bytes only, so this is the one signature mismatch a
 * receiver can see.  pml ob1 and ucx let it pass with the element half
 * written; MPICH reports MPI_ERR_TYPE, and so does tm.  Only datatypes
 * built from one basic type are judged, in O(1) from the set of basic
 * types they use: for mixed ones it would take a walk of the type's
 * description (opal_datatype_get_element_count, which also allocas a
 * stack entry per loop of the type and overflows the stack on large
 * derived types), on every receive.
 */
static bool partial_element(const struct opal_convertor_t *conv, size_t got)
{
	const opal_datatype_t *dt = conv ? conv->pDesc : NULL;
	uint32_t used;
	size_t esize;
	int basic;

	if (!dt || !got)
		return false;
	/* bits below OPAL_DATATYPE_FIRST_TYPE are loop and bound markers */
	used = dt->bdt_used & ~((1u << OPAL_DATATYPE_FIRST_TYPE) - 1);
	if (!used || (used & (used - 1)))
		return false;
	basic = __builtin_ctz(used);
	if (basic >= OPAL_DATATYPE_MAX_PREDEFINED)
		return false;
	esize = opal_datatype_local_sizes[basic];
	return esize > 1 && got % esize;
}

static void complete_recv(struct mtl_tm_request *req)
{
	struct tm_recv *r = &req->u.recv;
	ompi_status_public_t *st = &req->super.ompi_req->req_status;
	struct iovec iov;
	uint32_t iov_count = 1;
	size_t len, got;
	void *from;
	bool trunc;

	switch (r->status) {
	case TM_REQ_CANCELLED:
		st->_cancelled = true;
		break;
	case TM_REQ_OK:
	case TM_REQ_TRUNCATED:
		st->MPI_SOURCE = r->env.src;
		st->MPI_TAG = r->env.tag;
		from = req->pack_buf;
		got = r->recv_len;
		trunc = r->status == TM_REQ_TRUNCATED;
		if (req->staged) {
			/* the engine filled the staging area; the user's
			 * buffer is pack_len bytes */
			from = req->small;
			got = r->msg_len < req->pack_len ? r->msg_len :
			      req->pack_len;
			trunc = r->msg_len > req->pack_len;
			if (!req->pack_free && got)
				memcpy(req->pack_buf, req->small, got);
		}
		st->_ucount = got;
		st->MPI_ERROR = trunc ? MPI_ERR_TRUNCATE :
				partial_element(req->convertor, got) ?
				MPI_ERR_TYPE : OMPI_SUCCESS;
		if (req->pack_free && got) {
			/* exactly what arrived: a truncated message fills the
			 * packed buffer, never more */
			iov.iov_base = from;
			iov.iov_len = got;
			len = got;
			opal_convertor_unpack(req->convertor, &iov, &iov_count,
					      &len);
		}
		break;
	default:
		st->MPI_SOURCE = r->env.src;
		st->MPI_TAG = r->env.tag;
		st->_ucount = 0;
		st->MPI_ERROR = MPI_ERR_OTHER;
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: rank %u: receive failed (peer %u)",
				    mtl_tm.my_vpid, r->peer);
		break;
	}
	free_pack(req);
	req->super.completion_callback(&req->super);
}

/* mtl_tm_unlock_and_complete() (mtl_tm.h) once the engine finished some. */
int mtl_tm_complete_done(void)
{
	struct mtl_tm_request *req;
	UCS_LIST_HEAD(list);
	int n = 0;

	ucs_list_splice_tail(&list, &mtl_tm.done);
	ucs_list_head_init(&mtl_tm.done);
	OPAL_THREAD_UNLOCK(&mtl_tm.lock);
	while (!ucs_list_is_empty(&list)) {
		/* off the list first: completion may free or reuse req */
		req = ucs_list_extract_head(&list, struct mtl_tm_request,
					    done_link);
		if (req->kind != MTL_TM_REQ_RECV) /* SEND, BSEND */
			complete_send(req);
		else
			complete_recv(req);
		n++;
	}
	return n;
}

/* The endpoint of rank `rank` of comm (remote group for intercomms). */
static struct mtl_tm_endpoint *peer_ep(struct ompi_communicator_t *comm,
				       int rank)
{
	ompi_proc_t *proc = ompi_comm_peer_lookup(comm, rank);
	struct mtl_tm_endpoint *ep;

	if (!proc)
		return NULL;
	ep = proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL];
	if (!ep) {
		/* a proc pml cm has not handed us yet: connect it now */
		if (mtl_tm_add_procs(&mtl_tm.super, 1, &proc) != OMPI_SUCCESS)
			return NULL;
		ep = proc->proc_endpoints[OMPI_PROC_ENDPOINT_TAG_MTL];
	}
	return ep && ep->connected ? ep : NULL;
}

/*
 * The engine peer that source rank src of comm names, for requests that
 * should fail when it dies (the engine cannot tell which process a
 * (context, rank) pair is); TM_PEER_ANY for MPI_ANY_SOURCE.
 */
static uint32_t src_peer(struct ompi_communicator_t *comm, int src)
{
	struct mtl_tm_endpoint *ep;

	if (src == MPI_ANY_SOURCE)
		return TM_PEER_ANY;
	ep = peer_ep(comm, src);
	return ep ? ep->peer : TM_PEER_ANY;
}

/*
 * Hands (buf, len) to the engine on req.  req owns buf from here if
 * pack_free (freed at completion, or here on failure).
 */
static int post_send(struct ompi_communicator_t *comm, int dest, int tag,
		     void *buf, size_t len, bool pack_free, unsigned flags,
		     struct mtl_tm_request *bsend_parent,
		     struct mtl_tm_request *req)
{
	struct mtl_tm_endpoint *ep = peer_ep(comm, dest);
	bool detached = bsend_parent != NULL;
	int rc;

	req->kind = MTL_TM_REQ_SEND;
	req->detached = detached;
	req->convertor = NULL;
	req->pack_buf = buf;
	req->pack_len = len;
	req->pack_free = pack_free;
	req->done = false;
	req->error = OMPI_SUCCESS;
	req->engine_done = false;
	req->completed = false;
	req->cancel_wait = false;
	req->bsend_waiter = NULL;
	req->u.send.cb = send_cb;
	req->u.send.arg = req;
	if (!ep) {
		free_pack(req);
		opal_output(0, "mtl tm: rank %u: no connection to rank %d of %s",
			    mtl_tm.my_vpid, dest, comm->c_name);
		return OMPI_ERR_UNREACH;
	}

	OPAL_THREAD_LOCK(&mtl_tm.lock);
	rc = tm_engine_isend(mtl_tm.eng, &req->u.send, ep->peer,
			     mtl_tm_comm_cid(comm), ompi_comm_rank(comm), tag,
			     buf, len, NULL, flags);
	if (rc == TM_OK && bsend_parent) {
		/* the copy may be freed by the unlock below: keep its
		 * identity where a cancel can find it */
		bsend_parent->u.send = req->u.send;
		bsend_parent->u.send.cb = send_cb;
		bsend_parent->u.send.arg = bsend_parent;
		/* as a completed eager send, should a cancel re-arm it */
		bsend_parent->u.send.status = TM_REQ_OK;
		bsend_parent->u.send.waiting = 0;
		bsend_parent->u.send.cflags = 0;
		bsend_parent->u.send.own_mr = 0;
		bsend_parent->u.send.mr = NULL;
	}
	mtl_tm_unlock_and_complete();
	if (rc != TM_OK) {
		free_pack(req);
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: isend of %zu bytes to rank %d: %s",
				    len, dest, tm_status_str(rc));
		return mtl_tm_to_ompi(rc);
	}
	return OMPI_SUCCESS;
}

static int start_send(struct ompi_communicator_t *comm, int dest, int tag,
		      struct opal_convertor_t *convertor,
		      mca_pml_base_send_mode_t mode,
		      struct mtl_tm_request *req)
{
	void *buf;
	size_t len;
	bool free_after;
	int rc;

	rc = ompi_mtl_datatype_pack(convertor, &buf, &len, &free_after);
	if (rc != OMPI_SUCCESS)
		return rc;
	/* Ready sends are standard ones here; only synchronous needs the
	 * receiver's word. */
	return post_send(comm, dest, tag, buf, len, free_after,
			 mode == MCA_PML_BASE_SEND_SYNCHRONOUS ? TM_SEND_SYNC : 0,
			 NULL, req);
}

static void blocking_send_done(struct mca_mtl_request_t *mreq)
{
	((struct mtl_tm_request *)mreq)->done = true;
}

int mtl_tm_send(struct mca_mtl_base_module_t *mtl,
		struct ompi_communicator_t *comm, int dest, int tag,
		struct opal_convertor_t *convertor,
		mca_pml_base_send_mode_t mode)
{
	struct mtl_tm_request req;
	int rc;

	req.super.ompi_req = NULL;
	req.super.completion_callback = blocking_send_done;
	rc = start_send(comm, dest, tag, convertor, mode, &req);
	if (rc != OMPI_SUCCESS)
		return rc;
	while (!req.done)
		opal_progress();
	return req.error;
}

/* See "Buffered sends" at the top. */
static int start_buffered(struct ompi_communicator_t *comm, int dest,
			  int tag, struct opal_convertor_t *convertor,
			  mca_mtl_request_t *mtl_request)
{
	struct mtl_tm_request *pml = (struct mtl_tm_request *)mtl_request;
	struct mtl_tm_request *own = malloc(sizeof(*own));
	void *copy = NULL;
	size_t len;
	int rc;

	if (!own)
		return OMPI_ERR_OUT_OF_RESOURCE;
	opal_convertor_get_packed_size(convertor, &len);
	if (len) {
		struct iovec iov;
		uint32_t iov_count = 1;

		copy = malloc(len);
		if (!copy) {
			free(own);
			return OMPI_ERR_OUT_OF_RESOURCE;
		}
		iov.iov_base = copy;
		iov.iov_len = len;
		opal_convertor_pack(convertor, &iov, &iov_count, &len);
	}
	own->super.ompi_req = NULL;
	own->super.completion_callback = NULL;
	pml->kind = MTL_TM_REQ_BSEND;
	pml->cancel_wait = false;
	rc = post_send(comm, dest, tag, copy, len, copy != NULL, 0, pml, own);
	if (rc != OMPI_SUCCESS) {
		free(own);
		pml->kind = 0;
		return rc;
	}
	mtl_request->ompi_req->req_status.MPI_ERROR = OMPI_SUCCESS;
	mtl_request->completion_callback(mtl_request);
	return OMPI_SUCCESS;
}

int mtl_tm_isend(struct mca_mtl_base_module_t *mtl,
		 struct ompi_communicator_t *comm, int dest, int tag,
		 struct opal_convertor_t *convertor,
		 mca_pml_base_send_mode_t mode, bool blocking,
		 mca_mtl_request_t *mtl_request)
{
	if (mode == MCA_PML_BASE_SEND_BUFFERED)
		return start_buffered(comm, dest, tag, convertor, mtl_request);
	return start_send(comm, dest, tag, convertor, mode,
			  (struct mtl_tm_request *)mtl_request);
}

/* Where a receive lands: the user's buffer, or a staging one to unpack. */
static int prepare_recv(struct opal_convertor_t *convertor,
			struct mtl_tm_request *req)
{
	bool free_on_error;
	int rc;

	rc = ompi_mtl_datatype_recv_buf(convertor, &req->pack_buf,
					&req->pack_len, &free_on_error);
	if (rc != OMPI_SUCCESS)
		return rc;
	if (free_on_error && !req->pack_buf)
		return OMPI_ERR_OUT_OF_RESOURCE;
	req->pack_free = free_on_error;
	req->staged = false;
	req->kind = MTL_TM_REQ_RECV;
	req->convertor = convertor;
	req->u.recv.cb = recv_cb;
	req->u.recv.arg = req;
	return OMPI_SUCCESS;
}

int mtl_tm_irecv(struct mca_mtl_base_module_t *mtl,
		 struct ompi_communicator_t *comm, int src, int tag,
		 struct opal_convertor_t *convertor,
		 mca_mtl_request_t *mtl_request)
{
	struct mtl_tm_request *req = (struct mtl_tm_request *)mtl_request;
	uint32_t peer = src_peer(comm, src);
	int rc;

	void *buf;
	size_t len;

	rc = prepare_recv(convertor, req);
	if (rc != OMPI_SUCCESS)
		return rc;
	buf = req->pack_buf;
	len = req->pack_len;
	if (len < sizeof(req->small)) {
		/* See "Small receives" at the top. */
		req->staged = true;
		buf = req->small;
		len = sizeof(req->small);
	}
	OPAL_THREAD_LOCK(&mtl_tm.lock);
	rc = tm_engine_irecv_from(mtl_tm.eng, &req->u.recv,
				  mtl_tm_comm_cid(comm),
				  src == MPI_ANY_SOURCE ? TM_ANY_SRC : src,
				  tag == MPI_ANY_TAG ? TM_ANY_TAG : tag, peer,
				  buf, len, NULL);
	mtl_tm_unlock_and_complete();
	if (rc != TM_OK) {
		free_pack(req);
		return mtl_tm_to_ompi(rc);
	}
	return OMPI_SUCCESS;
}

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
	uint32_t peer = src_peer(comm, src);
	int rc;

	OPAL_THREAD_LOCK(&mtl_tm.lock);
	rc = tm_engine_iprobe_from(mtl_tm.eng, mtl_tm_comm_cid(comm),
				   src == MPI_ANY_SOURCE ? TM_ANY_SRC : src,
				   tag == MPI_ANY_TAG ? TM_ANY_TAG : tag, peer,
				   &info);
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

	*matched = 0;
	/* allocated first: once the engine hands the message over there is
	 * no giving it back */
	m = ompi_message_alloc();
	if (!m)
		return OMPI_ERR_OUT_OF_RESOURCE;
	OPAL_THREAD_LOCK(&mtl_tm.lock);
	rc = tm_engine_improbe_from(mtl_tm.eng, mtl_tm_comm_cid(comm),
				    src == MPI_ANY_SOURCE ? TM_ANY_SRC : src,
				    tag == MPI_ANY_TAG ? TM_ANY_TAG : tag,
				    src_peer(comm, src), &msg, &info);
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

int mtl_tm_imrecv(struct mca_mtl_base_module_t *mtl,
		  struct opal_convertor_t *convertor,
		  struct ompi_message_t **message,
		  mca_mtl_request_t *mtl_request)
{
	struct mtl_tm_request *req = (struct mtl_tm_request *)mtl_request;
	struct tm_msg *msg = (*message)->req_ptr;
	int rc;

	rc = prepare_recv(convertor, req);
	if (rc != OMPI_SUCCESS)
		return rc;
	OPAL_THREAD_LOCK(&mtl_tm.lock);
	rc = tm_engine_imrecv(mtl_tm.eng, &req->u.recv, msg, req->pack_buf,
			      req->pack_len, NULL);
	mtl_tm_unlock_and_complete();
	if (rc != TM_OK) {
		free_pack(req);
		return mtl_tm_to_ompi(rc);
	}
	/* the engine owns the message now; the handle is spent */
	ompi_message_return(*message);
	*message = MPI_MESSAGE_NULL;
	return OMPI_SUCCESS;
}
