/*
 * mtl_tm_send.c - MPI sends on the matching engine: blocking, nonblocking
 * and buffered, and their completion towards pml cm.
 *
 * Data: a contiguous buffer goes to the engine as is (mtl_tm_data.h
 * says which are); any other datatype is packed into a temporary buffer
 * (ompi_mtl_datatype_pack), freed at completion.  Ready sends are standard ones here; only synchronous sends
 * need the receiver's word (TM_SEND_SYNC).
 *
 * Buffered sends: pml cm packs them into the attached buffer and calls
 * isend, but then completes its request at once, without waiting for the
 * MTL, and may restart it (MPI_Bsend_init) while the first send is still in
 * flight, or free the attached-buffer space when our completion comes.
 * So a buffered send gets a request and a copy of its data of our own,
 * and pml cm's request is completed before isend returns.
 *
 * Context id: the receiver's (mtl_tm_peer_cid): its receives match on
 * its own id of the communicator, which for one made from a group differs
 * from ours.  It comes packed in the tag with our rank, in the
 * communicator's route to the receiver (mtl_tm_route), worked out at the
 * first send there.
 *
 * Completion: an eager standard send is done once posted; the engine says
 * so (TM_DONE) instead of calling back, and the send completes towards
 * pml cm before isend returns (pml cm allows that), with no callback and
 * no pass over the done list.
 *
 * Errors: an engine error on a send (a peer that died, which the engine
 * learns from the soft HCA's RETRY_EXC completion, or a failed read of a
 * rendezvous) becomes MPI_ERR_OTHER in the request's status.
 */
#include "mtl_tm.h"
#include "mtl_tm_data.h"

#include <stdlib.h>

#include "opal/datatype/opal_convertor.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"
#include "ompi/communicator/communicator.h"
#include "ompi/request/request.h"
#include "ompi/mca/mtl/base/mtl_base_datatype.h"

static inline struct mtl_tm_request *send_req(struct tm_send *s)
{
	return ucs_container_of(s, struct mtl_tm_request, u.send);
}

/* A send's outcome as pml cm wants it; frees its packed copy. */
static inline int send_error(struct mtl_tm_request *req)
{
	int st = req->u.send.status;
	int err = st == TM_REQ_OK || st == TM_REQ_CANCELLED ? OMPI_SUCCESS :
		  MPI_ERR_OTHER;

	if (OPAL_UNLIKELY(req->pack_free))
		mtl_tm_free_pack(req);
	req->error = err;
	if (OPAL_UNLIKELY(err != OMPI_SUCCESS))
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: rank %u: send to peer %u failed",
				    mtl_tm.my_vpid, req->u.send.peer);
	return err;
}

/* The sends that do not go back to pml cm as their own: a cancel's
 * outcome, a buffered send's own copy. */
static void send_complete_other(struct mtl_tm_request *req)
{
	bool cancelled = req->u.send.status == TM_REQ_CANCELLED;

	if (req->cancel_wait) {
		/* the outcome of a cancel of a send pml cm already completed
		 * (mtl_tm_cancel.c, "Send cancel"): mtl_tm_cancel reports it */
		req->cancel_result = cancelled;
		__atomic_store_n(&req->cancel_wait, false, __ATOMIC_RELEASE);
		return;
	}
	/* a buffered send's own copy: only a cancel may wait for it */
	if (req->bsend_waiter) {
		req->bsend_waiter->cancel_result = cancelled;
		__atomic_store_n(&req->bsend_waiter->cancel_wait, false,
				 __ATOMIC_RELEASE);
	}
	if (req->u.send.status != TM_REQ_OK && !cancelled)
		opal_output_verbose(10, mtl_tm_output,
				    "mtl tm: rank %u: buffered send to peer %u failed",
				    mtl_tm.my_vpid, req->u.send.peer);
	mtl_tm_free_pack(req);
	free(req);
}

/* A finished send towards pml cm, or the blocking sender waiting on it
 * (inline: send_cb's whole work). */
static inline __attribute__((always_inline)) void
send_complete(struct mtl_tm_request *req)
{
	ompi_request_t *oreq;
	int err;

	if (OPAL_UNLIKELY(req->cancel_wait || req->detached)) {
		send_complete_other(req);
		return;
	}
	err = send_error(req);
	req->completed = true;
	if (req->kind == MTL_TM_REQ_SEND_WAIT) {
		/* mtl_tm_send's: its caller waits for done */
		__atomic_store_n(&req->done, true, __ATOMIC_RELEASE);
		return;
	}
	oreq = req->super.ompi_req;
	/* pml cm does not reset a send's MPI_ERROR when it (re)starts one:
	 * a recycled request would keep an old value */
	oreq->req_status.MPI_ERROR = err;
	oreq->req_status._cancelled = req->u.send.status == TM_REQ_CANCELLED;
	mtl_tm_req_complete(req, req->u.send.buf);
}

/* req->complete of a send: from the done list (mtl_tm_complete_done) */
static void send_complete_fn(struct mtl_tm_request *req)
{
	send_complete(req);
}

/*
 * The engine's callback: runs inside an engine call, under the lock.
 * Without MPI threads it completes the send at once (mtl_tm.h, "Locking
 * and completion"); a blocking send's caller then waits on req->done
 * further up this very thread's stack.  With threads that caller may be
 * another thread, which could return (its req is on its stack) while the
 * engine still holds s: the done list, after the engine call, it is.  A
 * buffered send's own copy goes there too: post_send still reads it after
 * the engine call.
 */
static void send_cb(struct tm_send *s)
{
	struct mtl_tm_request *req = send_req(s);

	req->engine_done = true;
	if (OPAL_LIKELY(!opal_using_threads() && !req->detached)) {
		send_complete(req);
		return;
	}
	mtl_tm_done_add(req, send_complete_fn);
}


/* What a buffered send's pml cm request keeps of its own copy's send. */
static void keep_bsend_identity(struct mtl_tm_request *parent,
				const struct tm_send *own)
{
	/* the copy may be freed as soon as the lock drops: keep its
	 * identity where a cancel can find it, as a completed eager send
	 * (should a cancel re-arm it) */
	parent->u.send.cb = send_cb;
	tm_engine_send_detach(mtl_tm.eng, own, &parent->u.send);
}

/* req's fields and its engine send of (buf, len) to the route's peer;
 * kind: MTL_TM_REQ_SEND, or MTL_TM_REQ_SEND_WAIT for a blocking send. */
static inline __attribute__((always_inline)) void
fill_send(uint64_t route, int tag, void *buf, size_t len, bool pack_free,
	  unsigned flags, bool detached, uint8_t kind,
	  struct mtl_tm_request *req)
{
	struct tm_send *s = &req->u.send;

	mtl_tm_req_start(req, kind);
	req->pack_free = pack_free;
	req->detached = detached;
	/* read only with these (mtl_tm_free_pack, send_complete_other) */
	if (pack_free)
		req->pack_buf = buf;
	if (detached)
		req->bsend_waiter = NULL;
	s->cb = send_cb;
	s->buf = buf;
	s->len = len;
	s->mr = NULL;
	s->tag = (route & ~(uint64_t)UINT32_MAX) | (uint32_t)tag;
	s->peer = mtl_tm_route_peer(route);
	s->flags = flags;
}

/* A post of len bytes to peer that failed (rc < TM_OK): said, and the
 * error as Open MPI's.  Of the request's fields it takes values only:
 * the blocking fast send (mtl_tm_send) then keeps no register for its
 * request's address across the engine call. */
static __attribute__((noinline, cold)) int
send_post_failed(int rc, size_t len, uint32_t peer)
{
	opal_output_verbose(10, mtl_tm_output,
			    "mtl tm: send of %zu bytes to peer %u: %s", len, peer,
			    tm_status_str(rc));
	return mtl_tm_to_ompi(rc);
}

/* What a post that failed (rc < TM_OK) leaves: its copy freed, the
 * error as Open MPI's. */
static __attribute__((noinline)) int
send_failed(struct mtl_tm_request *req, int rc)
{
	mtl_tm_free_pack(req);
	return send_post_failed(rc, req->u.send.len, req->u.send.peer);
}

/*
 * Hands (buf, len) to the engine on req.  req owns buf from here if
 * pack_free (freed at completion, or here on failure).  Returns an OMPI
 * error, TM_OK (posted), or TM_DONE: the engine finished req in the call,
 * and its completion is the caller's.  Without MPI threads no lock and no
 * look at the done list: nothing pml cm waits for goes there (mtl_tm.h).
 */
static inline __attribute__((always_inline)) int
post_send(struct ompi_communicator_t *comm, int dest, int tag,
	  void *buf, size_t len, bool pack_free, unsigned flags, uint8_t kind,
	  struct mtl_tm_request *bsend_parent,
	  struct mtl_tm_request *req)
{
	uint64_t route;
	int rc;

	/* outside the lock: the first send to dest may connect it and ask
	 * PMIx for its context id */
	rc = mtl_tm_route(comm, dest, true, &route);
	if (OPAL_UNLIKELY(rc != OMPI_SUCCESS)) {
		if (pack_free)
			free(buf);
		return rc;
	}
	fill_send(route, tag, buf, len, pack_free, flags, bsend_parent != NULL,
		  kind, req);
	OPAL_THREAD_LOCK(&mtl_tm.lock);
	rc = tm_engine_post_send(mtl_tm.eng, &req->u.send);
	if (rc >= TM_OK && bsend_parent)
		keep_bsend_identity(bsend_parent, &req->u.send);
	if (opal_using_threads())
		mtl_tm_unlock_and_complete();
	return OPAL_UNLIKELY(rc < TM_OK) ? send_failed(req, rc) : rc;
}

/* A send's bytes when they are not in place (mtl_tm_data.h): a prepared
 * convertor's contiguous data past its buffer's start, or Open MPI's
 * packed copy (*free_after). */
static int send_data_slow(struct opal_convertor_t *convertor, void **buf,
			  size_t *len, bool *free_after)
{
	*free_after = false;
	if (mtl_tm_send_start_of(convertor, buf, len))
		return OMPI_SUCCESS;
	return ompi_mtl_datatype_pack(convertor, buf, len, free_after);
}

static inline unsigned send_flags(mca_pml_base_send_mode_t mode)
{
	return mode == MCA_PML_BASE_SEND_SYNCHRONOUS ? TM_SEND_SYNC : 0;
}

/* Any send but a buffered one: its bytes, then post_send. */
static inline __attribute__((always_inline)) int
start_send(struct ompi_communicator_t *comm, int dest, int tag,
	   struct opal_convertor_t *convertor,
	   mca_pml_base_send_mode_t mode, uint8_t kind,
	   struct mtl_tm_request *req)
{
	void *buf;
	size_t len;
	bool free_after = false;
	int rc;

	if (!mtl_tm_send_in_place(convertor, &buf, &len)) {
		rc = send_data_slow(convertor, &buf, &len, &free_after);
		if (rc != OMPI_SUCCESS)
			return rc;
	}
	return post_send(comm, dest, tag, buf, len, free_after,
			 send_flags(mode), kind, NULL, req);
}

/*
 * The common send in a few tests, without MPI threads (mtl_tm.h, the two
 * sets of entry points): its route known, its bytes in place.  Then
 * post_send's steps, with no lock and no copy; *rc as
 * tm_engine_post_send's.  false: the general entry takes it.
 */
static inline __attribute__((always_inline)) bool
send_fast(struct ompi_communicator_t *comm, int dest, int tag,
	  struct opal_convertor_t *convertor, mca_pml_base_send_mode_t mode,
	  uint8_t kind, struct mtl_tm_request *req, int *rc)
{
	uint64_t route;
	void *buf;
	size_t len;

	if (OPAL_UNLIKELY(!mtl_tm_route_known(comm, dest, true, &route) ||
			  !mtl_tm_send_in_place(convertor, &buf, &len)))
		return false;
	fill_send(route, tag, buf, len, false, send_flags(mode), false, kind,
		  req);
	*rc = tm_engine_post_send(mtl_tm.eng, &req->u.send);
	return true;
}

/* A blocking send the engine did not finish at post (TM_OK): its wait
 * (inline: the fast send then needs no register for req's address). */
static inline __attribute__((always_inline)) int
send_wait(struct mtl_tm_request *req)
{
	while (!__atomic_load_n(&req->done, __ATOMIC_ACQUIRE))
		opal_progress();
	return req->error;
}

int mtl_tm_send_general(struct mca_mtl_base_module_t *mtl,
			struct ompi_communicator_t *comm, int dest, int tag,
			struct opal_convertor_t *convertor,
			mca_pml_base_send_mode_t mode)
{
	struct mtl_tm_request req;
	int rc;

	mtl_tm_tsan_enter();
	rc = start_send(comm, dest, tag, convertor, mode, MTL_TM_REQ_SEND_WAIT,
			&req);
	if (rc == TM_DONE)
		return send_error(&req);
	return rc == OMPI_SUCCESS ? send_wait(&req) : rc;
}

int mtl_tm_send(struct mca_mtl_base_module_t *mtl,
		struct ompi_communicator_t *comm, int dest, int tag,
		struct opal_convertor_t *convertor,
		mca_pml_base_send_mode_t mode)
{
	struct mtl_tm_request req;
	int rc;

	mtl_tm_tsan_enter();
	/* mtl is &mtl_tm.super: not kept for the general entry */
	if (!send_fast(comm, dest, tag, convertor, mode, MTL_TM_REQ_SEND_WAIT,
		       &req, &rc))
		return mtl_tm_send_general(&mtl_tm.super, comm, dest, tag,
					   convertor, mode);
	/* TM_DONE: completed OK (tm_engine.h); the bytes are the user's
	 * (no copy to free, on any outcome) */
	if (OPAL_LIKELY(rc == TM_DONE))
		return OMPI_SUCCESS;
	if (rc < TM_OK)
		return send_post_failed(rc, req.u.send.len, req.u.send.peer);
	return send_wait(&req);
}

/* The packed bytes of a buffered send, in a copy of our own (or NULL for
 * none); false if out of memory. */
static bool copy_packed(struct opal_convertor_t *convertor, void **copy,
			size_t *len)
{
	struct iovec iov;
	uint32_t iov_count = 1;

	*copy = NULL;
	opal_convertor_get_packed_size(convertor, len);
	if (!*len)
		return true;
	*copy = malloc(*len);
	if (!*copy)
		return false;
	iov.iov_base = *copy;
	iov.iov_len = *len;
	opal_convertor_pack(convertor, &iov, &iov_count, len);
	return true;
}

/* See "Buffered sends" at the top. */
static int start_buffered(struct ompi_communicator_t *comm, int dest,
			  int tag, struct opal_convertor_t *convertor,
			  mca_mtl_request_t *mtl_request)
{
	struct mtl_tm_request *pml = (struct mtl_tm_request *)mtl_request;
	struct mtl_tm_request *own = malloc(sizeof(*own));
	void *copy;
	size_t len;
	int rc;

	if (!own)
		return OMPI_ERR_OUT_OF_RESOURCE;
	if (!copy_packed(convertor, &copy, &len)) {
		free(own);
		return OMPI_ERR_OUT_OF_RESOURCE;
	}
	own->super.ompi_req = NULL;
	own->super.completion_callback = NULL;
	mtl_tm_req_start(pml, MTL_TM_REQ_BSEND);
	rc = post_send(comm, dest, tag, copy, len, copy != NULL, 0,
		       MTL_TM_REQ_SEND, pml, own);
	if (rc < OMPI_SUCCESS) {
		free(own);
		pml->kind = 0;
		return rc;
	}
	if (rc == TM_DONE)
		send_complete(own); /* frees it */
	mtl_request->ompi_req->req_status.MPI_ERROR = OMPI_SUCCESS;
	/* our copy: the bytes read */
	mtl_tm_req_complete(pml, NULL);
	return OMPI_SUCCESS;
}

/* isend's finish once the engine took req: TM_DONE completes it now. */
static inline __attribute__((always_inline)) int
isend_end(struct mtl_tm_request *req, int rc)
{
	if (OPAL_LIKELY(rc == TM_DONE)) {
		req->engine_done = true;
		send_complete(req);
		return OMPI_SUCCESS;
	}
	return rc;
}

int mtl_tm_isend_general(struct mca_mtl_base_module_t *mtl,
			 struct ompi_communicator_t *comm, int dest, int tag,
			 struct opal_convertor_t *convertor,
			 mca_pml_base_send_mode_t mode, bool blocking,
			 mca_mtl_request_t *mtl_request)
{
	struct mtl_tm_request *req = (struct mtl_tm_request *)mtl_request;

	mtl_tm_req_got(req, &req->tsan_waiter);
	if (OPAL_UNLIKELY(mode == MCA_PML_BASE_SEND_BUFFERED))
		return start_buffered(comm, dest, tag, convertor, mtl_request);
	return isend_end(req, start_send(comm, dest, tag, convertor, mode,
					 MTL_TM_REQ_SEND, req));
}

int mtl_tm_isend(struct mca_mtl_base_module_t *mtl,
		 struct ompi_communicator_t *comm, int dest, int tag,
		 struct opal_convertor_t *convertor,
		 mca_pml_base_send_mode_t mode, bool blocking,
		 mca_mtl_request_t *mtl_request)
{
	struct mtl_tm_request *req = (struct mtl_tm_request *)mtl_request;
	int rc;

	mtl_tm_req_got(req, &req->tsan_waiter);
	if (OPAL_UNLIKELY(mode == MCA_PML_BASE_SEND_BUFFERED ||
			  !send_fast(comm, dest, tag, convertor, mode,
				     MTL_TM_REQ_SEND, req, &rc)))
		return mtl_tm_isend_general(&mtl_tm.super, comm, dest, tag,
					    convertor, mode, blocking,
					    mtl_request);
	if (OPAL_UNLIKELY(rc < TM_OK))
		return send_failed(req, rc);
	return isend_end(req, rc);
}
