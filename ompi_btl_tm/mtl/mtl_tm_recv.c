/*
 * mtl_tm_recv.c - MPI receives on the matching engine: posted receives
 * (irecv), receives of a probed message (imrecv), and their completion
 * towards pml cm.
 *
 * Data: a contiguous buffer is handed to the engine as is (mtl_tm_data.h
 * says which are); any other datatype is received through a temporary
 * buffer (ompi_mtl_datatype_recv_buf) and unpacked at completion.
 *
 * Small receives go to the engine as they are: below mtl_tm_offload_thresh
 * it matches them in software, which finishes a truncated rendezvous into
 * any buffer (doc/DESIGN.md, "Offload policy").
 *
 * Status: a receive's status counts the bytes delivered (at most the
 * receive's length), and reports MPI_ERR_TRUNCATE, or MPI_ERR_TYPE for a
 * message ending inside a basic element of its datatype.  Those go in the
 * request's own status, which Open MPI turns into the return value or,
 * for the multiple-completion calls, copies out whole.  An engine error
 * (a peer that died, a failed read) becomes MPI_ERR_OTHER.  A receive
 * from a specific rank names that rank's engine peer, so it fails when
 * that process dies (MPI_ANY_SOURCE ones do not).
 */
#include "mtl_tm.h"
#include "mtl_tm_data.h"

#include <string.h>

#include "opal/datatype/opal_convertor.h"
#include "opal/datatype/opal_datatype_internal.h"
#include "opal/util/output.h"
#include "ompi/communicator/communicator.h"
#include "ompi/message/message.h"
#include "ompi/request/request.h"
#include "ompi/mca/mtl/base/mtl_base_datatype.h"

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

/* got bytes of the packed staging copy into the user's datatype: exactly
 * what arrived (a truncated message fills the packed buffer, never more). */
static void unpack(struct mtl_tm_request *req, void *from, size_t got)
{
	struct iovec iov = { .iov_base = from, .iov_len = got };
	uint32_t iov_count = 1;
	size_t len = got;

	opal_convertor_unpack(req->convertor, &iov, &iov_count, &len);
}

/* The status of a matched message: its envelope, the bytes delivered. */
static inline __attribute__((always_inline)) void
recv_status(const struct tm_recv *r, int err, ompi_status_public_t *st)
{
	st->MPI_SOURCE = r->env.src;
	st->MPI_TAG = r->env.tag;
	st->_ucount = r->recv_len;
	st->MPI_ERROR = err;
}

/* A matched message into the user's buffer and status. */
static void recv_deliver(struct mtl_tm_request *req, ompi_status_public_t *st)
{
	struct tm_recv *r = &req->u.recv;
	size_t got = r->recv_len;
	bool trunc = r->status == TM_REQ_TRUNCATED;

	/* a message that fills the receive is whole elements of its type */
	recv_status(r, trunc ? MPI_ERR_TRUNCATE :
		    got != r->len &&
		    partial_element(req->convertor, got) ? MPI_ERR_TYPE :
		    OMPI_SUCCESS, st);
	if (OPAL_UNLIKELY(req->pack_free) && got)
		unpack(req, r->buf, got);
}

/* A finished receive towards pml cm: its status, its staging copy
 * unpacked and freed, then pml cm's completion callback. */
static void recv_complete(struct mtl_tm_request *req)
{
	struct tm_recv *r = &req->u.recv;
	ompi_status_public_t *st = &req->super.ompi_req->req_status;

	if (OPAL_LIKELY(r->status == TM_REQ_OK ||
			r->status == TM_REQ_TRUNCATED)) {
		recv_deliver(req, st);
	} else if (r->status == TM_REQ_CANCELLED) {
		st->_cancelled = true;
	} else {
		recv_status(r, MPI_ERR_OTHER, st);
		st->_ucount = 0;
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: rank %u: receive failed (peer %u)",
				    mtl_tm.my_vpid, r->peer);
	}
	if (OPAL_UNLIKELY(req->pack_free))
		mtl_tm_free_pack(req);
	mtl_tm_req_complete(req, mtl_tm_user_buf(req->convertor));
}

static inline struct mtl_tm_request *recv_req(struct tm_recv *r)
{
	return ucs_container_of(r, struct mtl_tm_request, u.recv);
}

/*
 * The engine's callback of a receive staged in a buffer of ours (and of
 * the others' uncommon cases): runs inside an engine call, under the
 * lock; without MPI threads it completes the receive at once (mtl_tm.h,
 * "Locking and completion"), with them it leaves it on the done list.
 */
static __attribute__((noinline)) void recv_cb_staged(struct tm_recv *r)
{
	struct mtl_tm_request *req = recv_req(r);

	if (!opal_using_threads()) {
		recv_complete(req);
		return;
	}
	mtl_tm_done_add(req, recv_complete);
}

/*
 * The engine's callback of a receive in place (the callback is chosen at
 * post: prepare_recv).  Its common case, a message that fills it, in a
 * few tests: recv_complete's steps for it.
 */
static void recv_cb(struct tm_recv *r)
{
	struct mtl_tm_request *req = recv_req(r);
	ompi_status_public_t *st;

	if (OPAL_LIKELY(!opal_using_threads() && r->status == TM_REQ_OK &&
			r->recv_len == r->len)) {
		/* recv_status but MPI_ERROR: pml cm sets OMPI_SUCCESS there
		 * when it starts a receive, before it calls irecv or imrecv */
		st = &req->super.ompi_req->req_status;
		st->MPI_SOURCE = r->env.src;
		st->MPI_TAG = r->env.tag;
		st->_ucount = r->recv_len;
		mtl_tm_req_complete(req, r->buf);
		return;
	}
	recv_cb_staged(r);
}

/* A receive whose bytes are not in place (mtl_tm_data.h): Open MPI's
 * staging buffer for them (pack_free), unpacked at completion. */
static int recv_staged(struct opal_convertor_t *convertor,
		       struct mtl_tm_request *req)
{
	struct tm_recv *r = &req->u.recv;
	bool free_on_error;
	int rc;

	rc = ompi_mtl_datatype_recv_buf(convertor, &r->buf, &r->len,
					&free_on_error);
	if (rc != OMPI_SUCCESS)
		return rc;
	if (free_on_error && !r->buf)
		return OMPI_ERR_OUT_OF_RESOURCE;
	req->pack_free = free_on_error;
	req->pack_buf = r->buf;
	return OMPI_SUCCESS;
}

/* The fields of a receive into (buf, len) but its envelope; cb: recv_cb
 * in place, recv_cb_staged staged. */
static inline __attribute__((always_inline)) void
fill_recv(struct opal_convertor_t *convertor, void (*cb)(struct tm_recv *),
	  struct mtl_tm_request *req)
{
	struct tm_recv *r = &req->u.recv;

	mtl_tm_req_start(req, MTL_TM_REQ_RECV);
	req->convertor = convertor;
	r->cb = cb;
	r->mr = NULL;
}

/*
 * Where a receive lands: a contiguous datatype's bytes where they lie in
 * the user's buffer (mtl_tm_data.h), any other into a staging buffer of
 * ours, unpacked at completion (Open MPI's own rule,
 * ompi_mtl_datatype_recv_buf).
 */
static inline __attribute__((always_inline)) int
prepare_recv(struct opal_convertor_t *convertor,
	     struct mtl_tm_request *req)
{
	if (mtl_tm_recv_in_place(convertor, &req->u.recv.buf,
				 &req->u.recv.len)) {
		fill_recv(convertor, recv_cb, req);
		return OMPI_SUCCESS;
	}
	fill_recv(convertor, recv_cb_staged, req);
	return recv_staged(convertor, req);
}

/* A post the engine refused: the staging copy freed, Open MPI's error. */
static __attribute__((noinline)) int
recv_failed(struct mtl_tm_request *req, int rc)
{
	mtl_tm_free_pack(req);
	return mtl_tm_to_ompi(rc);
}

/* The engine call of a receive or a probed message's, under the lock
 * with MPI threads. */
static inline __attribute__((always_inline)) int
post_recv(struct mtl_tm_request *req, struct tm_msg *msg)
{
	int rc;

	OPAL_THREAD_LOCK(&mtl_tm.lock);
	rc = msg ? tm_engine_post_mrecv(mtl_tm.eng, &req->u.recv, msg) :
		   tm_engine_post_recv(mtl_tm.eng, &req->u.recv);
	if (opal_using_threads())
		mtl_tm_unlock_and_complete();
	return rc == TM_OK ? OMPI_SUCCESS : recv_failed(req, rc);
}

int mtl_tm_irecv_general(struct mca_mtl_base_module_t *mtl,
			 struct ompi_communicator_t *comm, int src, int tag,
			 struct opal_convertor_t *convertor,
			 mca_mtl_request_t *mtl_request)
{
	struct mtl_tm_request *req = (struct mtl_tm_request *)mtl_request;
	struct tm_recv *r = &req->u.recv;
	int rc;

	mtl_tm_req_got(req, &req->tsan_waiter);
	r->from = mtl_tm_src_peer(comm, src);
	rc = prepare_recv(convertor, req);
	if (rc != OMPI_SUCCESS)
		return rc;
	mtl_tm_recv_env(comm, src, tag, &r->tag, &r->mask);
	return post_recv(req, NULL);
}

/* The common receive's steps once its source's engine peer is known
 * (from; TM_PEER_ANY for MPI_ANY_SOURCE): its bytes in place, the engine
 * call.  false: not in place, the general entry takes it. */
static inline __attribute__((always_inline)) bool
irecv_fast(struct ompi_communicator_t *comm, int src, int tag,
	   struct opal_convertor_t *convertor, uint32_t from,
	   struct mtl_tm_request *req, int *rc)
{
	struct tm_recv *r = &req->u.recv;

	if (OPAL_UNLIKELY(!mtl_tm_recv_in_place(convertor, &r->buf, &r->len)))
		return false;
	r->from = from;
	fill_recv(convertor, recv_cb, req);
	mtl_tm_recv_env(comm, src, tag, &r->tag, &r->mask);
	*rc = tm_engine_post_recv(mtl_tm.eng, r);
	return true;
}

/*
 * The common receive in a few tests, without MPI threads (mtl_tm.h, the
 * two sets of entry points): its source's route known, or any source
 * (the route's bound refuses MPI_ANY_SOURCE: tested only then), its
 * bytes in place; then no lock and no staging.  Each case is its own
 * copy of irecv_fast, with the source's tests folded away.
 */
int mtl_tm_irecv(struct mca_mtl_base_module_t *mtl,
		 struct ompi_communicator_t *comm, int src, int tag,
		 struct opal_convertor_t *convertor,
		 mca_mtl_request_t *mtl_request)
{
	struct mtl_tm_request *req = (struct mtl_tm_request *)mtl_request;
	uint64_t route;
	int rc;

	mtl_tm_req_got(req, &req->tsan_waiter);
	if (OPAL_LIKELY(mtl_tm_route_known(comm, src, false, &route))) {
		if (OPAL_UNLIKELY(!irecv_fast(comm, src, tag, convertor,
					      mtl_tm_route_peer(route), req,
					      &rc)))
			goto general;
	} else if (src != MPI_ANY_SOURCE ||
		   !irecv_fast(comm, MPI_ANY_SOURCE, tag, convertor,
			       TM_PEER_ANY, req, &rc)) {
		goto general;
	}
	/* in place: no staging copy to free */
	return OPAL_LIKELY(rc == TM_OK) ? OMPI_SUCCESS : mtl_tm_to_ompi(rc);
general:
	/* mtl is &mtl_tm.super: not kept for the general entry */
	return mtl_tm_irecv_general(&mtl_tm.super, comm, src, tag, convertor,
				    mtl_request);
}

int mtl_tm_imrecv(struct mca_mtl_base_module_t *mtl,
		  struct opal_convertor_t *convertor,
		  struct ompi_message_t **message,
		  mca_mtl_request_t *mtl_request)
{
	struct mtl_tm_request *req = (struct mtl_tm_request *)mtl_request;
	struct tm_msg *msg = (*message)->req_ptr;
	int rc;

	mtl_tm_req_got(req, &req->tsan_waiter);
	rc = prepare_recv(convertor, req);
	if (rc != OMPI_SUCCESS)
		return rc;
	rc = post_recv(req, msg);
	if (rc != OMPI_SUCCESS)
		return rc;
	/* the engine owns the message now; the handle is spent */
	ompi_message_return(*message);
	*message = MPI_MESSAGE_NULL;
	return OMPI_SUCCESS;
}
