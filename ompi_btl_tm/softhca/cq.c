/*
 * cq.c - completion queues: the extended poll API and ibv_poll_cq.
 *
 * Entries are kept in the order the card decided them.  An entry can be
 * reserved before its contents are known (an unexpected message whose last
 * packet has not arrived yet); polling stops at the first entry that is not
 * ready, which is what keeps unexpected arrivals and matches in decision
 * order.  The queue grows instead of overrunning.  The entry a poll
 * returns is read where it lies (lock-free contexts) while it is held, so
 * a push counts its slot as taken (struct sh_cq, cur).  The objects and
 * the contract are in softhca_cq.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softhca_cq.h"
#include "softhca_priv.h"
#include "softhca_sched.h"

static struct sh_cqe *cq_at(struct sh_cq *cq, uint64_t seq)
{
	/* cap is a power of two */
	return &cq->q[(cq->first + (uint32_t)(seq - cq->first_seq)) &
		      (cq->cap - 1)];
}

int sh_cq_grow(struct sh_cq *cq)
{
	uint32_t cap = cq->cap ? cq->cap * 2 : 64;
	struct sh_cqe *q = malloc(sizeof(*q) * cap);

	if (!q)
		return ENOMEM;
	if (cq->held && cq->cur != &cq->cur_copy) {
		cq->cur_copy = *cq->cur;
		cq->cur = &cq->cur_copy;
	}
	for (uint32_t i = 0; i < cq->count; i++)
		q[i] = cq->q[(cq->first + i) & (cq->cap - 1)];
	free(cq->q);
	cq->q = q;
	cq->cap = cap;
	cq->first = 0;
	return 0;
}

int sh_cq_reserve(struct sh_cq *cq, uint64_t *seq)
{
	if (cq->count + cq->held == cq->cap && sh_cq_grow(cq))
		return ENOMEM;
	*seq = cq->first_seq + cq->count;
	sh_cq_count_add(cq, 1);
	cq_at(cq, *seq)->ready = false;
	return 0;
}

void sh_cq_fill(struct sh_cq *cq, uint64_t seq, const struct sh_cqe *cqe)
{
	struct sh_cqe *e = cq_at(cq, seq);

	*e = *cqe;
	e->ready = true;
}

int sh_cq_push(struct sh_cq *cq, const struct sh_cqe *cqe)
{
	struct sh_cqe *e;

	if (cq->count + cq->held == cq->cap && sh_cq_grow(cq))
		return ENOMEM;
	e = &cq->q[(cq->first + cq->count) & (cq->cap - 1)];
	sh_cq_count_add(cq, 1);
	*e = *cqe;
	e->ready = true;
	return 0;
}

/* Takes the oldest ready entry (cq->cur, held until the next pop or
 * end_poll) and returns it, NULL if none; the caller holds ctx->lock.
 * locking: ctx->locking (a constant in the lock-free poll).  (Inline:
 * every poll pops.  Returned, so that the caller's reads of it need not
 * load cq->cur again past the retire's stores.) */
static inline __attribute__((always_inline)) const struct sh_cqe *
cq_pop(struct sh_cq *cq, bool locking)
{
	struct sh_cqe *e;
	const struct sh_cqe *cur;

	if (!cq->count)
		return NULL;
	e = &cq->q[cq->first];
	if (!e->ready)
		return NULL;
	if (locking) {
		/* another thread may grow the queue while this one reads */
		cq->cur_copy = *e;
		cur = &cq->cur_copy;
	} else {
		cur = e;
		cq->held = true;
	}
	cq->cur = cur;
	cq->first = (cq->first + 1) & (cq->cap - 1);
	cq->first_seq++;
	sh_cq_count_add(cq, -1);
	if (e->srq)
		sh_srq_retire(e->srq, e->release_handle, e->retire_seq);
	return cur;
}

/* the never-written slot an overrun CQ returns (cfg.rxe_cq) */
static const struct sh_cqe rxe_zero;

/*
 * The poll calls come in two sets, the way mlx5 picks its poll calls per
 * CQ (doc/mlx5-rules.md rule 22): the general ones read the context's
 * locking and the CQ's cfg.rxe_cq, the lock-free ones are the same steps
 * with those known false (sh_cq_pick_poll installs them when they are).
 * locking and rxe below are those two answers.
 */
static inline __attribute__((always_inline)) int
poll_run(struct sh_cq *cq, bool quiet, bool locking, bool rxe)
{
	struct ibv_cq_ex *ibcq = &cq->cq_ex;
	const struct sh_cqe *e;

	if (locking)
		pthread_mutex_lock(&cq->poll_lock);
	if (rxe && cq->rxe_phantom) {
		cq->rxe_phantom = false;
		cq->cur = &rxe_zero;
		ibcq->wr_id = 0;
		ibcq->status = IBV_WC_SUCCESS;
		return 0;
	}
	sh_lock_as(cq->ctx, locking);
	if (!quiet)
		sh_doorbell(cq->ctx, SH_BELL_POLL, NULL);
	e = cq_pop(cq, locking);
	sh_unlock_as(cq->ctx, locking);
	if (!e) {
		if (locking)
			pthread_mutex_unlock(&cq->poll_lock);
		return ENOENT;
	}
	ibcq->wr_id = e->wr_id;
	ibcq->status = e->status;
	return 0;
}

static __attribute__((noinline)) int cq_start_poll_run(struct sh_cq *cq,
							bool quiet)
{
	return poll_run(cq, quiet, cq->ctx->locking, cq->rxe_cq);
}

static __attribute__((noinline)) int cq_start_poll_run_lf(struct sh_cq *cq,
							   bool quiet)
{
	return poll_run(cq, quiet, false, false);
}

/* (the idle poll returns from here: no frame for the rest) */
static inline __attribute__((always_inline)) int
poll_start(struct ibv_cq_ex *ibcq, struct ibv_poll_cq_attr *attr, bool lf)
{
	struct sh_cq *cq = (struct sh_cq *)ibcq;
	bool quiet;

	if (attr && attr->comp_mask)
		return EINVAL;
	/* a quiet card: only the queue to look at */
	quiet = sh_sched_quiet(cq->ctx);
	if (quiet && !__atomic_load_n(&cq->count, __ATOMIC_ACQUIRE) &&
	    (lf || !cq->rxe_phantom))
		return ENOENT;
	return lf ? cq_start_poll_run_lf(cq, quiet)
		  : cq_start_poll_run(cq, quiet);
}

static int cq_start_poll(struct ibv_cq_ex *ibcq, struct ibv_poll_cq_attr *attr)
{
	return poll_start(ibcq, attr, false);
}

static int cq_start_poll_lf(struct ibv_cq_ex *ibcq,
			    struct ibv_poll_cq_attr *attr)
{
	return poll_start(ibcq, attr, true);
}

/* next_poll found nothing */
static inline int cq_next_none(struct sh_cq *cq)
{
	/* a poll of the zeroed slot alone leaves the index right: one such
	 * slot per overrun, not a stream of them */
	if (cq->rxe_cq)
		cq->rxe_overrun = cq->cur != &rxe_zero;
	return ENOENT;
}

/*
 * A next_poll that saw an entry: the pop and its two fields.  locking and
 * rxe as in poll_run: the general set reads them (the context's locking
 * once), the lock-free one knows them false (no lock, no frame).
 */
static inline __attribute__((always_inline)) int
next_pop(struct sh_cq *cq, bool locking, bool rxe)
{
	const struct sh_cqe *e;

	sh_lock_as(cq->ctx, locking);
	e = cq_pop(cq, locking);
	sh_unlock_as(cq->ctx, locking);
	if (!e)
		return rxe ? cq_next_none(cq) : ENOENT;
	cq->cq_ex.wr_id = e->wr_id;
	cq->cq_ex.status = e->status;
	return 0;
}

static __attribute__((noinline)) int cq_next_pop(struct sh_cq *cq)
{
	return next_pop(cq, cq->ctx->locking, cq->rxe_cq);
}

/* (out of line, so that the empty answer sets up nothing; frameless, as
 * its pop calls nothing: the next_poll's call is a jump) */
static __attribute__((noinline)) int cq_next_pop_lf(struct sh_cq *cq)
{
	return next_pop(cq, false, false);
}

/* (the usual end of a poll, an empty queue, returns from here: one load,
 * without the lock or a frame, as at start_poll; an entry pushed meanwhile
 * is the next poll's) */
static int cq_next_poll(struct ibv_cq_ex *ibcq)
{
	struct sh_cq *cq = (struct sh_cq *)ibcq;

	if (!__atomic_load_n(&cq->count, __ATOMIC_ACQUIRE))
		return cq_next_none(cq);
	return cq_next_pop(cq);
}

static int cq_next_poll_lf(struct ibv_cq_ex *ibcq)
{
	struct sh_cq *cq = (struct sh_cq *)ibcq;

	if (!__atomic_load_n(&cq->count, __ATOMIC_ACQUIRE))
		return ENOENT; /* (cq_next_none without cfg.rxe_cq) */
	return cq_next_pop_lf(cq);
}

static void cq_end_poll(struct ibv_cq_ex *ibcq)
{
	struct sh_cq *cq = (struct sh_cq *)ibcq;

	/* Stored only when set: a locking context never holds an entry
	 * (cq_pop copies it) nor overruns unless rxe_cq, and the thread
	 * driving the card reads held under ctx->lock alone (sh_cq_push),
	 * not this poll_lock. */
	if (cq->held)
		cq->held = false;
	if (cq->rxe_cq) {
		cq->rxe_phantom = cq->rxe_overrun;
		cq->rxe_overrun = false;
	}
	if (cq->ctx->locking)
		pthread_mutex_unlock(&cq->poll_lock);
}

/* (no overrun to carry, no lock to give back) */
static void cq_end_poll_lf(struct ibv_cq_ex *ibcq)
{
	((struct sh_cq *)ibcq)->held = false;
}

void sh_cq_pick_poll(struct sh_cq *cq)
{
	bool lf = !cq->ctx->locking && !cq->rxe_cq;

	cq->cq_ex.start_poll = lf ? cq_start_poll_lf : cq_start_poll;
	cq->cq_ex.next_poll = lf ? cq_next_poll_lf : cq_next_poll;
	cq->cq_ex.end_poll = lf ? cq_end_poll_lf : cq_end_poll;
}

#define CUR(ibcq) (*((struct sh_cq *)(ibcq))->cur)

static enum ibv_wc_opcode cq_read_opcode(struct ibv_cq_ex *c)
{
	return CUR(c).opcode;
}

static uint32_t cq_read_vendor_err(struct ibv_cq_ex *c)
{
	return CUR(c).vendor_err;
}

static uint32_t cq_read_byte_len(struct ibv_cq_ex *c)
{
	return CUR(c).byte_len;
}

static __be32 cq_read_imm_data(struct ibv_cq_ex *c)
{
	(void)c;
	return 0;
}

static uint32_t cq_read_qp_num(struct ibv_cq_ex *c)
{
	return CUR(c).qp_num;
}

static uint32_t cq_read_src_qp(struct ibv_cq_ex *c)
{
	return CUR(c).src_qp;
}

static unsigned int cq_read_wc_flags(struct ibv_cq_ex *c)
{
	return CUR(c).wc_flags;
}

static uint32_t cq_read_slid(struct ibv_cq_ex *c)
{
	(void)c;
	return 1;
}

static uint8_t cq_read_zero8(struct ibv_cq_ex *c)
{
	(void)c;
	return 0;
}

static uint64_t cq_read_zero64(struct ibv_cq_ex *c)
{
	(void)c;
	return 0;
}

static uint16_t cq_read_cvlan(struct ibv_cq_ex *c)
{
	(void)c;
	return 0;
}

static uint32_t cq_read_flow_tag(struct ibv_cq_ex *c)
{
	(void)c;
	return 0;
}

static void cq_read_tm_info(struct ibv_cq_ex *c, struct ibv_wc_tm_info *ti)
{
	ti->tag = CUR(c).tag;
	ti->priv = CUR(c).priv;
}

#undef CUR

struct ibv_cq_ex *sh_create_cq_ex(struct ibv_context *c,
				  struct ibv_cq_init_attr_ex *attr)
{
	struct sh_context *ctx = to_sh_ctx(c);
	struct sh_cq *cq;

	struct ibv_pd *pd = attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD ?
			    attr->parent_domain : NULL;
	int flags = attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS ?
		    (int)attr->flags : 0;

	/* mlx5 refuses more entries than the device's max_cqe, flags other
	 * than SINGLE_THREADED and IGNORE_OVERRUN (ours never overruns),
	 * and a PD that is not a parent domain of this context */
	if (attr->cqe < 1 || attr->cqe > SH_MAX_CQE ||
	    (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS |
				IBV_CQ_INIT_ATTR_MASK_PD)) ||
	    (flags & ~(IBV_CREATE_CQ_ATTR_SINGLE_THREADED |
		       IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN)) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	     (!pd || pd->context != c ||
	      !sh_container_of(pd, struct sh_pd, pd)->parent)) ||
	    (attr->wc_flags & ~(uint64_t)IBV_WC_STANDARD_FLAGS &
	     ~(uint64_t)IBV_WC_EX_WITH_TM_INFO &
	     ~(uint64_t)IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	cq->ctx = ctx;
	cq->rxe_cq = ctx->cfg.rxe_cq != 0;
	cq->extended = true;
	pthread_mutex_init(&cq->poll_lock, NULL);
	cq->cq_ex.context = c;
	cq->cq_ex.channel = attr->channel;
	cq->cq_ex.cq_context = attr->cq_context;
	cq->cq_ex.cqe = (int)attr->cqe;
	pthread_mutex_init(&cq->cq_ex.mutex, NULL);
	pthread_cond_init(&cq->cq_ex.cond, NULL);
	cq->cq_ex.read_opcode = cq_read_opcode;
	cq->cq_ex.read_vendor_err = cq_read_vendor_err;
	cq->cq_ex.read_byte_len = cq_read_byte_len;
	cq->cq_ex.read_imm_data = cq_read_imm_data;
	cq->cq_ex.read_qp_num = cq_read_qp_num;
	cq->cq_ex.read_src_qp = cq_read_src_qp;
	cq->cq_ex.read_wc_flags = cq_read_wc_flags;
	cq->cq_ex.read_slid = cq_read_slid;
	cq->cq_ex.read_sl = cq_read_zero8;
	cq->cq_ex.read_dlid_path_bits = cq_read_zero8;
	cq->cq_ex.read_completion_ts = cq_read_zero64;
	cq->cq_ex.read_completion_wallclock_ns = cq_read_zero64;
	cq->cq_ex.read_cvlan = cq_read_cvlan;
	cq->cq_ex.read_flow_tag = cq_read_flow_tag;
	cq->cq_ex.read_tm_info = cq_read_tm_info;

	pthread_mutex_lock(&ctx->lock);
	if (sh_cq_grow(cq)) {
		pthread_mutex_unlock(&ctx->lock);
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->next = ctx->cqs;
	ctx->cqs = cq;
	cq->lockfree = sh_obj_attach(ctx, pd, flags);
	sh_cq_pick_poll(cq);
	pthread_mutex_unlock(&ctx->lock);
	return &cq->cq_ex;
}

struct ibv_cq *sh_create_cq(struct ibv_context *c, int cqe, void *cq_context,
			    struct ibv_comp_channel *ch, int vec)
{
	struct ibv_cq_init_attr_ex attr = {
		.cqe = cqe > 0 ? (uint32_t)cqe : 0,
		.cq_context = cq_context,
		.channel = ch,
		.comp_vector = vec > 0 ? (uint32_t)vec : 0,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_cq_ex *cq = sh_create_cq_ex(c, &attr);

	if (!cq)
		return NULL;
	to_sh_cq(ibv_cq_ex_to_cq(cq))->extended = false;
	return ibv_cq_ex_to_cq(cq);
}

int sh_destroy_cq(struct ibv_cq *ibcq)
{
	struct sh_cq *cq = to_sh_cq(ibcq), **pp;
	struct sh_context *ctx = cq->ctx;

	pthread_mutex_lock(&ctx->lock);
	if (cq->users) {
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY;
	}
	for (pp = &ctx->cqs; *pp; pp = &(*pp)->next)
		if (*pp == cq) {
			*pp = cq->next;
			break;
		}
	sh_obj_detach(ctx, cq->lockfree);
	pthread_mutex_unlock(&ctx->lock);
	pthread_mutex_destroy(&cq->poll_lock);
	free(cq->q);
	free(cq);
	return 0;
}

int sh_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct sh_cq *cq = to_sh_cq(ibcq);
	const struct sh_cqe *e;
	int i;

	bool quiet = sh_sched_quiet(cq->ctx);

	if (cq->ud) { /* the mailbox, read only by polling (ud.c) */
		sh_lock(cq->ctx);
		sh_ud_pull(cq);
		sh_unlock(cq->ctx);
	}
	if (quiet && !__atomic_load_n(&cq->count, __ATOMIC_ACQUIRE))
		return 0;
	if (cq->ctx->locking)
		pthread_mutex_lock(&cq->poll_lock);
	sh_lock(cq->ctx);
	if (!quiet)
		sh_doorbell(cq->ctx, SH_BELL_POLL, NULL);
	for (i = 0; i < n && (e = cq_pop(cq, cq->ctx->locking)); i++) {
		memset(&wc[i], 0, sizeof(wc[i]));
		wc[i].wr_id = e->wr_id;
		wc[i].status = e->status;
		wc[i].opcode = e->opcode;
		wc[i].vendor_err = e->vendor_err;
		wc[i].byte_len = e->byte_len;
		wc[i].qp_num = e->qp_num;
		wc[i].src_qp = e->src_qp;
		wc[i].wc_flags = e->wc_flags;
		wc[i].slid = 1;
	}
	cq->held = false;
	sh_unlock(cq->ctx);
	if (cq->ctx->locking)
		pthread_mutex_unlock(&cq->poll_lock);
	return i;
}

int sh_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	(void)cq;
	(void)solicited_only;
	return EOPNOTSUPP;
}
