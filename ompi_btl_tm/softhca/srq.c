/*
 * srq.c - SRQs, and the TM-SRQ: the tag list and its operations
 * (doc/DESIGN.md section 3); match.c has what the card does with each
 * message that arrives.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softhca_priv.h"
#include "softhca_sched.h"
#include "softhca_fast.h"

/* ---- plain receive buffers ------------------------------------------- */

/* The buffer array, allocated at the first post; NULL: ENOMEM. */
static struct sh_rbuf *rq_buf(struct sh_rq *rq, uint32_t max_wr)
{
	if (!rq->buf) {
		rq->buf = calloc(max_wr, sizeof(*rq->buf));
		if (rq->buf)
			rq->cap = max_wr;
	}
	return rq->buf;
}

int sh_rq_post(struct sh_rq *rq, uint32_t max_wr, uint32_t max_sge,
	       struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	/* (the queue's fields in locals: a chain of WRs is one loop, not a
	 * reload per entry written) */
	struct sh_rbuf *buf = wr ? rq_buf(rq, max_wr) : rq->buf, *b, *end;
	uint32_t count = rq->count, i = rq->first + count;
	int err = 0;

	if (!buf && wr) {
		*bad = wr;
		return ENOMEM;
	}
	if (!wr)
		return 0;
	/* the next free entry, then one on (first, count < cap: a compare,
	 * not a division) */
	end = buf + rq->cap;
	b = &buf[i < rq->cap ? i : i - rq->cap];
	for (; wr; wr = wr->next, b = b + 1 == end ? buf : b + 1) {
		/* (a negative count is above max_sge, at most SH_MAX_SGE,
		 * as an unsigned: one test) */
		if ((uint32_t)wr->num_sge > max_sge)
			err = EINVAL;
		else if (count == max_wr)
			err = ENOMEM;
		if (err) {
			*bad = wr;
			break;
		}
		count++;
		b->wr_id = wr->wr_id;
		b->num_sge = (uint32_t)wr->num_sge;
		if (b->num_sge == 1) /* what a plain buffer is: no libc call */
			b->sge[0] = wr->sg_list[0];
		else
			memcpy(b->sge, wr->sg_list,
			       sizeof(*b->sge) * b->num_sge);
	}
	rq->count = count;
	return err;
}

void sh_rq_free(struct sh_rq *rq)
{
	free(rq->buf);
	memset(rq, 0, sizeof(*rq));
}

/* ---- tag list -------------------------------------------------------- */

static inline void list_append(struct sh_srq *srq, int32_t h,
			       bool active)
{
	struct sh_tag *t = &srq->tags[h];

	t->prev = srq->list_tail;
	t->next = -1;
	if (srq->list_tail >= 0)
		srq->tags[srq->list_tail].next = h;
	else
		srq->list_head = h;
	srq->list_tail = h;
	t->on_list = true;
	t->active = active;
	srq->list_len++;
	/* a short list is scanned: only its order to keep (see taglist.c) */
	if (!srq->indexed && srq->list_len < SH_INDEX_FROM)
		t->seq = srq->list_seq++;
	else
		sh_tl_insert(srq, h);
	if (!active)
		srq->list_inactive++;
}


static void list_activate_all(struct sh_srq *srq)
{
	for (int32_t h = srq->list_head; h >= 0 && srq->list_inactive;
	     h = srq->tags[h].next) {
		if (!srq->tags[h].active) {
			srq->tags[h].active = true;
			srq->list_inactive--;
		}
	}
}

/* ---- SRQ objects ----------------------------------------------------- */

static int srq_init_tm(struct sh_srq *srq, const struct ibv_tm_cap *cap)
{
	const struct softhca_config *cfg = &srq->ctx->cfg;

	if (!cap->max_num_tags || cap->max_num_tags > cfg->max_num_tags ||
	    !cap->max_ops || cap->max_ops > cfg->max_ops)
		return EINVAL;
	/* mlx5's hidden command QP: one 256-byte WQE (one SGE) per op must
	 * fit max_send_wqebb blocks (doc/mlx5-rules.md rule 2) */
	if (sh_sq_wqebbs(cap->max_ops, 1, 0) > cfg->max_wr)
		return EINVAL;
	srq->max_num_tags = cap->max_num_tags;
	srq->max_ops = cap->max_ops;
	srq->tags = calloc(srq->max_num_tags, sizeof(*srq->tags));
	srq->ops = calloc(srq->max_ops, sizeof(*srq->ops));
	if (!srq->tags || !srq->ops || sh_tl_init(srq))
		return ENOMEM;
	for (uint32_t i = 0; i < srq->max_num_tags; i++)
		srq->tags[i].next = i + 1 < srq->max_num_tags ? (int32_t)i + 1
							       : -1;
	srq->free_head = 0;
	srq->list_head = srq->list_tail = -1;
	srq->tm = true;
	return 0;
}

struct ibv_srq *sh_create_srq_ex(struct ibv_context *c,
				 struct ibv_srq_init_attr_ex *attr)
{
	struct sh_context *ctx = to_sh_ctx(c);
	enum ibv_srq_type type = IBV_SRQT_BASIC;
	struct sh_srq *srq;
	int err = EINVAL;

	if (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)
		type = attr->srq_type;
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
	    !attr->attr.max_wr || attr->attr.max_wr > ctx->cfg.max_wr ||
	    attr->attr.max_sge > SH_MAX_SGE)
		goto fail;
	if (type != IBV_SRQT_BASIC && type != IBV_SRQT_TM) {
		err = EOPNOTSUPP;
		goto fail;
	}
	if (type == IBV_SRQT_TM &&
	    (ctx->cfg.no_tm ||
	     !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq ||
	     !to_sh_cq(attr->cq)->extended ||
	     !(attr->comp_mask & IBV_SRQ_INIT_ATTR_TM) ||
	     (ctx->cfg.strict && attr->attr.max_wr < SH_TM_MIN_PLAIN)))
		goto fail;
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		err = ENOMEM;
		goto fail;
	}
	srq->ctx = ctx;
	srq->max_wr = attr->attr.max_wr;
	srq->max_sge = attr->attr.max_sge ? attr->attr.max_sge : 1;
	if (type == IBV_SRQT_TM) {
		err = srq_init_tm(srq, &attr->tm_cap);
		if (err) {
			sh_tl_fini(srq);
			free(srq->tags);
			free(srq->ops);
			free(srq);
			goto fail;
		}
		srq->cq = to_sh_cq(attr->cq);
	}
	srq->srq.context = c;
	srq->srq.srq_context = attr->srq_context;
	srq->srq.pd = attr->pd;
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);

	pthread_mutex_lock(&ctx->lock);
	if (srq->cq)
		srq->cq->users++;
	srq->next = ctx->srqs;
	ctx->srqs = srq;
	srq->lockfree = sh_obj_attach(ctx, attr->pd, -1);
	pthread_mutex_unlock(&ctx->lock);
	return &srq->srq;
fail:
	errno = err;
	return NULL;
}

struct ibv_srq *sh_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	struct ibv_srq_init_attr_ex ex = {
		.srq_context = a->srq_context,
		.attr = a->attr,
		.comp_mask = IBV_SRQ_INIT_ATTR_PD,
		.pd = pd,
	};

	return sh_create_srq_ex(pd->context, &ex);
}

int sh_destroy_srq(struct ibv_srq *ibsrq)
{
	struct sh_srq *srq = to_sh_srq(ibsrq), **pp;
	struct sh_context *ctx = srq->ctx;

	pthread_mutex_lock(&ctx->lock);
	if (srq->users) {
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY;
	}
	for (pp = &ctx->srqs; *pp; pp = &(*pp)->next)
		if (*pp == srq) {
			*pp = srq->next;
			break;
		}
	/* Completions still queued must not call back into this SRQ. */
	for (struct sh_cq *cq = ctx->cqs; cq; cq = cq->next)
		for (uint32_t i = 0; i < cq->count; i++)
			if (cq->q[(cq->first + i) % cq->cap].srq == srq)
				cq->q[(cq->first + i) % cq->cap].srq = NULL;
	if (srq->cq)
		srq->cq->users--;
	ctx->ops_queued -= srq->ops_count;
	sh_obj_detach(ctx, srq->lockfree);
	pthread_mutex_unlock(&ctx->lock);
	sh_rq_free(&srq->rq);
	if (srq->tm)
		sh_tl_fini(srq);
	free(srq->tags);
	free(srq->ops);
	free(srq);
	return 0;
}

int sh_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad)
{
	struct sh_srq *srq = to_sh_srq(ibsrq);
	int err;

	sh_lock(srq->ctx);
	err = sh_rq_post(&srq->rq, srq->max_wr, srq->max_sge, wr, bad);
	sh_doorbell(srq->ctx, SH_BELL_SRQ_RECV, NULL);
	sh_unlock(srq->ctx);
	return err;
}

/* ---- list operations ------------------------------------------------- */

static int op_check(struct sh_srq *srq, struct ibv_ops_wr *wr)
{
	switch (wr->opcode) {
	case IBV_WR_TAG_ADD:
		if (wr->tm.add.num_sge < 0 ||
		    (uint32_t)wr->tm.add.num_sge > srq->ctx->cfg.max_sge ||
		    (wr->tm.add.num_sge && !wr->tm.add.sg_list))
			return EINVAL;
		return srq->free_head < 0 ? ENOMEM : 0;
	case IBV_WR_TAG_DEL:
		if (wr->tm.handle >= srq->max_num_tags ||
		    !srq->tags[wr->tm.handle].refs)
			return EINVAL;
		return 0;
	case IBV_WR_TAG_SYNC:
		return 0;
	}
	return EINVAL;
}

static void op_run(struct sh_srq *srq, const struct sh_op *op);

/*
 * Takes the op: the card runs it at once when it may (fast, see
 * sh_post_srq_ops), else it joins the queue.
 */
static void op_post(struct sh_srq *srq, struct ibv_ops_wr *wr, bool now)
{
	struct sh_op o, *op = now ? &o : NULL;
	struct sh_tag *t;
	int32_t h;

	/* mlx5's provider records the count from ADDs only (its DEL and
	 * SYNC pass it to the card but not to its own SYNC_REQ test) */
	if (wr->opcode == IBV_WR_TAG_ADD && (wr->flags & IBV_OPS_TM_SYNC))
		srq->posted_cnt = (uint16_t)wr->tm.unexpected_cnt;
	if (wr->opcode == IBV_WR_TAG_ADD) {
		h = srq->free_head;
		t = &srq->tags[h];
		srq->free_head = t->next;
		t->tag = wr->tm.add.tag;
		t->mask = wr->tm.add.mask;
		t->recv_wr_id = wr->tm.add.recv_wr_id;
		t->num_sge = (uint32_t)wr->tm.add.num_sge;
		for (uint32_t i = 0; i < t->num_sge; i++)
			t->sge[i] = wr->tm.add.sg_list[i];
		t->refs = wr->flags & IBV_OPS_SIGNALED ? 2 : 1;
		t->on_list = false;
		t->prev = t->next = -1;
		t->phase = srq->posted_cnt;
		wr->tm.handle = (uint32_t)h;
	} else if (wr->opcode == IBV_WR_TAG_DEL) {
		srq->tags[wr->tm.handle].refs++;
	}
	if (!op) {
		srq->ctx->ops_queued++;
		op = &srq->ops[(srq->ops_first + srq->ops_count++) %
			       srq->max_ops];
	}
	op->seq = srq->ops_posted++;
	op->wr_id = wr->wr_id;
	op->opcode = wr->opcode;
	op->flags = wr->flags;
	op->unexpected_cnt = wr->tm.unexpected_cnt;
	op->handle = wr->tm.handle;
	op->phase = wr->opcode == IBV_WR_TAG_SYNC ? 0 :
		    srq->tags[wr->tm.handle].phase;
	if (now)
		op_run(srq, op);
}

/*
 * An ADD the card runs as it is posted (nothing queued ahead of it): what
 * op_post + op_run do for it, without the queue entry.  The posted count
 * and the card's count take the ADD's unexpected_cnt together, since the
 * card sees the op at once.
 */
static void add_now(struct sh_srq *srq, struct ibv_ops_wr *wr)
{
	int32_t h = srq->free_head;
	struct sh_tag *t = &srq->tags[h];
	bool signaled = wr->flags & IBV_OPS_SIGNALED, insync;
	struct sh_cqe *e;

	if (wr->flags & IBV_OPS_TM_SYNC)
		srq->posted_cnt = srq->sw_cnt =
			(uint16_t)wr->tm.unexpected_cnt;
	srq->free_head = t->next;
	t->tag = wr->tm.add.tag;
	t->mask = wr->tm.add.mask;
	t->recv_wr_id = wr->tm.add.recv_wr_id;
	t->num_sge = (uint32_t)wr->tm.add.num_sge;
	if (t->num_sge == 1)
		t->sge[0] = wr->tm.add.sg_list[0];
	else
		memcpy(t->sge, wr->tm.add.sg_list,
		       sizeof(*t->sge) * t->num_sge);
	/* the list's reference, and the completion's until it is polled */
	t->refs = signaled ? 2 : 1;
	t->phase = srq->posted_cnt;
	wr->tm.handle = (uint32_t)h;
	insync = srq->sw_cnt == srq->hw_cnt;
	list_append(srq, h, insync);
	if (insync && srq->list_inactive)
		list_activate_all(srq);
	if (!signaled) {
		srq->ops_posted++;
		return;
	}
	e = sh_cq_next(srq->cq);
	if (!e) {
		srq->ops_posted++;
		return;
	}
	e->wr_id = wr->wr_id;
	e->tag = 0;
	e->retire_seq = ++srq->ops_posted;
	e->srq = srq;
	e->release_handle = h;
	e->priv = e->byte_len = e->qp_num = e->src_qp = e->vendor_err = 0;
	e->wc_flags = srq->hw_cnt != t->phase ? IBV_WC_TM_SYNC_REQ : 0;
	e->status = IBV_WC_SUCCESS;
	e->opcode = IBV_WC_TM_ADD;
	e->ready = true;
}

int sh_post_srq_ops(struct ibv_srq *ibsrq, struct ibv_ops_wr *wr,
		    struct ibv_ops_wr **bad)
{
	struct sh_srq *srq = to_sh_srq(ibsrq);
	struct sh_context *ctx = srq->ctx;
	struct ibv_ops_wr *first = wr;
	bool now;
	int err = 0;

	sh_lock(ctx);
	/*
	 * AUTO: a card that is quick runs the op before the post returns,
	 * which is legal whenever no op is queued ahead of it (ops run in
	 * post order).  It touches no other work, so the card's quiet state
	 * holds: an RNR-waiting arrival that an ADD could now match was
	 * already keeping it awake.  A card run in progress (a post from a
	 * poll's callback cannot happen: verbs are not re-entered) or any
	 * other mode queues.
	 */
	now = ctx->sched == SOFTHCA_SCHED_AUTO && !ctx->in_progress &&
	      !srq->ops_count;
	for (; wr; wr = wr->next) {
		if (!srq->tm)
			err = EINVAL;
		else if (srq->ops_posted - srq->ops_retired >= srq->max_ops)
			err = ENOMEM;
		else
			err = op_check(srq, wr);
		if (err) {
			*bad = wr;
			break;
		}
		if (wr->opcode == IBV_WR_TAG_ADD)
			srq->adds_posted++;
		if (now && wr->opcode == IBV_WR_TAG_ADD)
			add_now(srq, wr);
		else
			op_post(srq, wr, now);
	}
	/* as mlx5: the ops before a refused one stay posted, under one
	 * doorbell (doc/mlx5-rules.md rule 23) */
	if (wr != first)
		srq->ops_doorbells++;
	/* (ops run at once leave the card nothing: only counted) */
	sh_doorbell(ctx, now ? SH_BELL_POSTED : SH_BELL_OPS, NULL);
	sh_unlock(ctx);
	return err;
}

/* The card processes the oldest posted list op. */
bool sh_srq_op_step(struct sh_srq *srq)
{
	struct sh_op op;

	if (!srq->ops_count)
		return false;
	op = srq->ops[srq->ops_first];
	srq->ops_first = (srq->ops_first + 1) % srq->max_ops;
	srq->ops_count--;
	srq->ctx->ops_queued--;
	op_run(srq, &op);
	return true;
}

/* What the card does with one list op (queued or run at once). */
static void op_run(struct sh_srq *srq, const struct sh_op *op)
{
	enum ibv_wc_status status = IBV_WC_SUCCESS;
	enum ibv_wc_opcode opcode = IBV_WC_TM_SYNC;
	int32_t h = (int32_t)op->handle;
	bool insync;

	if (op->flags & IBV_OPS_TM_SYNC)
		srq->sw_cnt = (uint16_t)op->unexpected_cnt;
	insync = srq->sw_cnt == srq->hw_cnt;
	switch (op->opcode) {
	case IBV_WR_TAG_ADD:
		list_append(srq, h, insync);
		opcode = IBV_WC_TM_ADD;
		break;
	case IBV_WR_TAG_DEL:
		if (srq->tags[h].on_list) {
			sh_list_remove(srq, h);
			sh_tag_put(srq, h);
		} else {
			status = IBV_WC_TM_ERR;
		}
		opcode = IBV_WC_TM_DEL;
		break;
	case IBV_WR_TAG_SYNC:
		h = -1;
		break;
	}
	if (insync && srq->list_inactive)
		list_activate_all(srq);
	if (!(op->flags & IBV_OPS_SIGNALED)) {
		if (op->opcode == IBV_WR_TAG_DEL)
			sh_tag_put(srq, h);
		return;
	}
	sh_cq_push(srq->cq, &(struct sh_cqe){
		.wr_id = op->wr_id,
		.status = status,
		.opcode = opcode,
		.wc_flags = h >= 0 && srq->hw_cnt != op->phase ?
			    IBV_WC_TM_SYNC_REQ : 0,
		.srq = srq,
		.retire_seq = op->seq + 1,
		.release_handle = h,
	});
}
