/*
 * softhca_cq.h - the soft HCA's completion queues: the entries the card
 * writes, the CQ object and the calls of cq.c.
 *
 * The card writes an entry (sh_cq_push, or sh_cq_reserve then
 * sh_cq_fill when its contents are known later) in the order it decided
 * it; a poll (start/next/end_poll, ibv_poll_cq) takes entries from the
 * front and stops at the first one not ready.  The queue grows instead of
 * overrunning.  Everything here is guarded by the context's lock (or used
 * by one thread on a lock-free context; see softhca_priv.h, "Locking").
 * A polled entry releases what it holds on its SRQ (sh_srq_retire).
 */
#ifndef SOFTHCA_CQ_H
#define SOFTHCA_CQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct sh_context;
struct sh_srq;
struct sh_qp;

struct sh_cqe {
	uint64_t wr_id;
	uint64_t tag;
	uint64_t retire_seq;    /* list ops up to this seq (excl.) retire */
	struct sh_srq *srq;     /* owner of release_handle / retire_seq,
				 * which are read only when it is set */
	int32_t release_handle; /* tag slot reference dropped when polled */
	uint32_t priv;
	uint32_t byte_len;
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
	uint32_t vendor_err;
	uint8_t status;         /* enum ibv_wc_status, all below 256 */
	uint8_t opcode;         /* enum ibv_wc_opcode, all below 256 */
	bool ready;
};
/* (a power of two: the queue is indexed with a shift, and an entry is
 * one cache line) */
_Static_assert(sizeof(struct sh_cqe) == 64, "a CQ entry is 64 bytes");
_Static_assert(IBV_WC_TM_RNDV_INCOMPLETE < 256 && IBV_WC_TM_NO_TAG < 256,
	       "the statuses and opcodes the card writes fit a byte");

struct sh_cq {
	struct ibv_cq_ex cq_ex;      /* first: ibv_cq_ex_to_cq() casts */
	struct sh_context *ctx;
	pthread_mutex_t poll_lock;
	bool lockfree;               /* counted as such (sh_obj_attach) */
	struct sh_cqe *q;            /* circular, grows */
	uint32_t cap, first, count;
	uint64_t first_seq;          /* sequence number of q[first] */
	/*
	 * The entry start/next_poll returned, read in place: its slot stays
	 * out of use while held (until end_poll or the next pop), so a
	 * completion pushed meanwhile grows the queue instead of landing on
	 * it, and a growth that frees the slot moves it to cur_copy first.
	 * A locking context copies the entry to cur_copy at once instead
	 * (another thread may grow the queue while this one reads).
	 */
	const struct sh_cqe *cur;
	struct sh_cqe cur_copy;
	bool held;
	/* cfg.rxe_cq: a next_poll found nothing (overrun at end_poll), and
	 * the zeroed slot the next poll returns */
	bool rxe_overrun, rxe_phantom;
	bool rxe_cq;                 /* cfg.rxe_cq set (read per empty poll) */
	int users;                   /* QPs and SRQs that complete here */
	struct sh_qp *ud;            /* the UD QP receiving here (ud.c) */
	bool extended;               /* made by create_cq_ex: a TM-SRQ's CQ
				      * must be (mlx5 reads TM info from it) */
	struct sh_cq *next;
};

/*
 * count changes under ctx->lock but is peeked without it (an empty poll
 * on a quiet card: cq_start_poll, cq_next_poll), so its stores are atomic
 * too; relaxed, as the peek only decides whether to take the lock, under
 * which the queue is read again.
 */
static inline void sh_cq_count_add(struct sh_cq *cq, int32_t d)
{
	__atomic_store_n(&cq->count, cq->count + (uint32_t)d,
			 __ATOMIC_RELAXED);
}

static inline struct sh_cq *to_sh_cq(struct ibv_cq *cq)
{
	return (struct sh_cq *)cq;
}

/* cq.c: the CQ write (any step), the CQ objects and the poll verbs */
int sh_cq_push(struct sh_cq *cq, const struct sh_cqe *cqe);
int sh_cq_grow(struct sh_cq *cq);
int sh_cq_reserve(struct sh_cq *cq, uint64_t *seq);
void sh_cq_fill(struct sh_cq *cq, uint64_t seq, const struct sh_cqe *cqe);
struct ibv_cq_ex *sh_create_cq_ex(struct ibv_context *c,
				  struct ibv_cq_init_attr_ex *attr);
struct ibv_cq *sh_create_cq(struct ibv_context *c, int cqe, void *cq_context,
			    struct ibv_comp_channel *ch, int vec);
int sh_destroy_cq(struct ibv_cq *cq);
int sh_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sh_req_notify_cq(struct ibv_cq *cq, int solicited_only);
/* Installs the CQ's poll calls: the lock-free set while its context
 * takes no lock and cfg.rxe_cq is off, else the general one.  Called
 * under ctx->lock when the CQ is made and whenever ctx->locking changes
 * (which the contract keeps apart from the data path). */
void sh_cq_pick_poll(struct sh_cq *cq);

#endif /* SOFTHCA_CQ_H */
