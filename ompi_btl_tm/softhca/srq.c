/*
 * srq.c - SRQs, and the TM-SRQ: the tag list, its operations, and what the
 * card does with each message that arrives (doc/DESIGN.md section 3).
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softhca_priv.h"

/* ---- plain receive buffers ------------------------------------------- */

int sh_rq_post(struct sh_rq *rq, uint32_t max_wr, uint32_t max_sge,
	       struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	for (; wr; wr = wr->next) {
		struct sh_rbuf *b;

		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge) {
			*bad = wr;
			return EINVAL;
		}
		if (rq->count == max_wr) {
			*bad = wr;
			return ENOMEM;
		}
		if (!rq->buf) {
			rq->buf = calloc(max_wr, sizeof(*rq->buf));
			if (!rq->buf) {
				*bad = wr;
				return ENOMEM;
			}
			rq->cap = max_wr;
		}
		b = &rq->buf[(rq->first + rq->count++) % rq->cap];
		b->wr_id = wr->wr_id;
		b->num_sge = (uint32_t)wr->num_sge;
		memcpy(b->sge, wr->sg_list, sizeof(*b->sge) * b->num_sge);
	}
	return 0;
}

void sh_rq_free(struct sh_rq *rq)
{
	free(rq->buf);
	memset(rq, 0, sizeof(*rq));
}

/* ---- tag list -------------------------------------------------------- */

static void tag_put(struct sh_srq *srq, int32_t h)
{
	struct sh_tag *t = &srq->tags[h];

	if (--t->refs)
		return;
	t->next = srq->free_head;
	srq->free_head = h;
}

static void list_append(struct sh_srq *srq, int32_t h, bool active)
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
	sh_tl_insert(srq, h);
	if (!active)
		srq->list_inactive++;
}

static void list_remove(struct sh_srq *srq, int32_t h)
{
	struct sh_tag *t = &srq->tags[h];

	if (t->prev >= 0)
		srq->tags[t->prev].next = t->next;
	else
		srq->list_head = t->next;
	if (t->next >= 0)
		srq->tags[t->next].prev = t->prev;
	else
		srq->list_tail = t->prev;
	t->on_list = false;
	srq->list_len--;
	sh_tl_remove(srq, h);
	if (!t->active)
		srq->list_inactive--;
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

/* SYNC_REQ of an unexpected arrival (see sh_srq.posted_cnt) */
static uint32_t sync_flag(const struct sh_srq *srq)
{
	return (uint16_t)(srq->hw_cnt - srq->posted_cnt) > SH_MAX_SYNC_DIFF ?
	       IBV_WC_TM_SYNC_REQ : 0;
}

void sh_srq_retire(struct sh_srq *srq, int32_t handle, uint64_t retire_seq)
{
	if (handle >= 0)
		tag_put(srq, handle);
	if (retire_seq > srq->ops_retired)
		srq->ops_retired = retire_seq;
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
	    (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq ||
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
	sh_card_kick(srq->ctx);
	sh_card_progress_post(srq->ctx);
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
	if (!op)
		op = &srq->ops[(srq->ops_first + srq->ops_count++) %
			       srq->max_ops];
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

int sh_post_srq_ops(struct ibv_srq *ibsrq, struct ibv_ops_wr *wr,
		    struct ibv_ops_wr **bad)
{
	struct sh_srq *srq = to_sh_srq(ibsrq);
	struct sh_context *ctx = srq->ctx;
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
		op_post(srq, wr, now);
	}
	if (now) {
		/* what sh_card_progress_ops notes for read pacing */
		ctx->post_seq++;
	} else {
		sh_card_kick(ctx);
		sh_card_progress_ops(ctx);
	}
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
			list_remove(srq, h);
			tag_put(srq, h);
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
			tag_put(srq, h);
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

/* ---- arrivals -------------------------------------------------------- */

static void rx_finish(struct sh_qp *qp)
{
	struct sh_rx *rx = &qp->rx;

	if (rx->dest == SH_RX_PLAIN) {
		sh_cq_fill(rx->cq, rx->cqe_seq, &rx->cqe);
	} else {
		sh_cq_push(rx->cq, &rx->cqe);
	}
	rx->dest = SH_RX_IDLE;
}

/*
 * Writes the packet's share of the message, less the skipped headers
 * (pkt: the checked header copy; data: the payload in the ring).
 */
static void rx_data(struct sh_qp *qp, const struct sh_pkt *pkt,
		    const uint8_t *data)
{
	struct sh_rx *rx = &qp->rx;
	uint32_t start = rx->off > rx->skip ? rx->off : rx->skip;
	uint32_t end = rx->off + pkt->len;

	if (end > start && rx->cqe.status != IBV_WC_LOC_PROT_ERR)
		rx->written += sh_scatter(rx->sge, rx->num_sge,
					  start - rx->skip,
					  data + (start - rx->off),
					  end - start);
	rx->off = end;
	if (pkt->flags & SH_PKT_LAST)
		rx_finish(qp);
}

static void rx_start(struct sh_qp *qp, enum sh_rx_dest dest,
		     const struct ibv_sge *sge, uint32_t nsge,
		     const struct sh_pkt *pkt, uint32_t skip, struct sh_cq *cq)
{
	struct sh_rx *rx = &qp->rx;

	rx->dest = dest;
	memcpy(rx->sge, sge, sizeof(*sge) * nsge);
	rx->num_sge = nsge;
	rx->msg_len = pkt->msg_len;
	rx->off = 0;
	rx->skip = skip;
	rx->written = 0;
	rx->cq = cq;
	memset(&rx->cqe, 0, sizeof(rx->cqe));
	rx->cqe.release_handle = -1;
	rx->cqe.qp_num = qp->qp.qp_num;
	rx->cqe.src_qp = qp->dest_qpn;
	rx->cqe.status = sh_local_check(qp->ctx, sge, nsge,
					IBV_ACCESS_LOCAL_WRITE);
	if (rx->cqe.status == IBV_WC_SUCCESS &&
	    pkt->msg_len - skip > sge_total(sge, nsge))
		rx->cqe.status = IBV_WC_LOC_LEN_ERR;
}

/*
 * Delivers the whole message to the next plain buffer.  Returns EAGAIN when
 * there is none: the message stays on the wire (receiver not ready).
 */
static int rx_plain(struct sh_qp *qp, const struct sh_pkt *pkt,
		    const uint8_t *data, enum ibv_wc_opcode opcode,
		    bool unexpected)
{
	struct sh_srq *srq = qp->srq;
	struct sh_rq *rq = srq ? &srq->rq : &qp->rq;
	struct sh_cq *cq = srq && srq->tm ? srq->cq : qp->rcq;
	struct sh_rbuf b;

	if (!rq->count) {
		if (srq && !qp->rnr)
			srq->rnr_waits++;
		qp->rnr = true;
		return EAGAIN;
	}
	qp->rnr = false;
	b = rq->buf[rq->first];
	rq->first = (rq->first + 1) % rq->cap;
	rq->count--;
	if (unexpected) {
		srq->hw_cnt++;
		srq->unexpected++;
	}
	rx_start(qp, SH_RX_PLAIN, b.sge, b.num_sge, pkt, 0, cq);
	qp->rx.cqe.wr_id = b.wr_id;
	qp->rx.cqe.opcode = opcode;
	qp->rx.cqe.byte_len = pkt->msg_len;
	if (unexpected)
		qp->rx.cqe.wc_flags = sync_flag(srq);
	if (sh_cq_reserve(cq, &qp->rx.cqe_seq))
		return ENOMEM;
	rx_data(qp, pkt, data);
	return 0;
}

static void rx_matched_cqe(struct sh_qp *qp, struct sh_tag *t,
			   const struct ibv_tmh *tmh, struct sh_cqe *cqe)
{
	memset(cqe, 0, sizeof(*cqe));
	cqe->wr_id = t->recv_wr_id;
	cqe->opcode = IBV_WC_TM_RECV;
	cqe->tag = be64toh(tmh->tag);
	cqe->priv = be32toh(tmh->app_ctx);
	cqe->qp_num = qp->qp.qp_num;
	cqe->src_qp = qp->dest_qpn;
	cqe->release_handle = -1;
}

/*
 * Strict mode, an eager message longer than the tagged buffer it matched:
 * mlx5 has no tag-aware error for this (doc/mlx5-rules.md rule 17).  The
 * entry is consumed without a tagged completion; the error completion is
 * a responder error, which mlx5 attributes to a plain SRQ WQE; the QP
 * moves to error.
 */
static void rx_eager_overflow(struct sh_qp *qp, const struct sh_pkt *pkt,
			      int32_t h)
{
	struct sh_srq *srq = qp->srq;
	struct sh_cqe cqe = { .release_handle = -1 };

	list_remove(srq, h);
	tag_put(srq, h);
	srq->matched++;
	if (srq->rq.count) {
		cqe.wr_id = srq->rq.buf[srq->rq.first].wr_id;
		srq->rq.first = (srq->rq.first + 1) % srq->rq.cap;
		srq->rq.count--;
	}
	cqe.status = IBV_WC_LOC_LEN_ERR;
	cqe.opcode = IBV_WC_RECV;
	cqe.byte_len = pkt->msg_len;
	cqe.qp_num = qp->qp.qp_num;
	cqe.src_qp = qp->dest_qpn;
	sh_cq_push(srq->cq, &cqe);
	sh_qp_error(qp, IBV_WC_WR_FLUSH_ERR);
}

static void rx_eager_matched(struct sh_qp *qp, const struct sh_pkt *pkt,
			     const uint8_t *data, int32_t h)
{
	struct sh_srq *srq = qp->srq;
	struct sh_tag *t = &srq->tags[h];
	const struct ibv_tmh *tmh = (const void *)pkt->data;
	struct sh_cqe cqe;

	if (qp->ctx->cfg.strict &&
	    pkt->msg_len - SH_TMH_LEN > sge_total(t->sge, t->num_sge)) {
		rx_eager_overflow(qp, pkt, h);
		return;
	}
	list_remove(srq, h);
	srq->matched++;
	rx_matched_cqe(qp, t, tmh, &cqe);
	rx_start(qp, SH_RX_TAGGED, t->sge, t->num_sge, pkt, SH_TMH_LEN,
		 srq->cq);
	qp->rx.cqe.wr_id = cqe.wr_id;
	qp->rx.cqe.opcode = cqe.opcode;
	qp->rx.cqe.tag = cqe.tag;
	qp->rx.cqe.priv = cqe.priv;
	qp->rx.cqe.byte_len = pkt->msg_len - SH_TMH_LEN;
	qp->rx.cqe.srq = srq;
	qp->rx.cqe.release_handle = h;
	if (pkt->flags & SH_PKT_LAST) {
		qp->rx.cqe.wc_flags = IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID;
	} else {
		cqe.byte_len = qp->rx.cqe.byte_len;
		cqe.wc_flags = IBV_WC_TM_MATCH;
		cqe.status = IBV_WC_SUCCESS;
		sh_cq_push(srq->cq, &cqe);
		qp->rx.cqe.wc_flags = IBV_WC_TM_DATA_VALID;
	}
	rx_data(qp, pkt, data);
}

/*
 * A matched eager message in one packet, the common small case: what
 * rx_eager_matched + rx_start + rx_data + rx_finish do for it, without
 * the per-QP message state (one completion, MATCH|DATA_VALID).
 */
static void rx_eager_one(struct sh_qp *qp, const struct sh_pkt *pkt,
			 const uint8_t *data, int32_t h)
{
	struct sh_srq *srq = qp->srq;
	struct sh_tag *t = &srq->tags[h];
	const struct ibv_tmh *tmh = (const void *)pkt->data;
	uint32_t len = pkt->msg_len - SH_TMH_LEN;
	uint32_t room = sge_total(t->sge, t->num_sge);
	struct sh_cqe cqe;

	if (len > room && qp->ctx->cfg.strict) {
		rx_eager_overflow(qp, pkt, h);
		return;
	}
	list_remove(srq, h);
	srq->matched++;
	cqe = (struct sh_cqe){
		.wr_id = t->recv_wr_id,
		.tag = be64toh(tmh->tag),
		.srq = srq,
		.release_handle = h,
		.priv = be32toh(tmh->app_ctx),
		.byte_len = len,
		.qp_num = qp->qp.qp_num,
		.src_qp = qp->dest_qpn,
		.wc_flags = IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID,
		.opcode = IBV_WC_TM_RECV,
	};
	cqe.status = sh_local_check(qp->ctx, t->sge, t->num_sge,
				    IBV_ACCESS_LOCAL_WRITE);
	if (cqe.status == IBV_WC_SUCCESS && len > room)
		cqe.status = IBV_WC_LOC_LEN_ERR;
	/* as rx_data: a too-long payload still fills the buffer */
	if (cqe.status == IBV_WC_LOC_PROT_ERR)
		;
	else if (t->num_sge == 1)
		memcpy((void *)(uintptr_t)t->sge[0].addr, data + SH_TMH_LEN,
		       len < room ? len : room);
	else
		sh_scatter(t->sge, t->num_sge, 0, data + SH_TMH_LEN, len);
	sh_cq_push(srq->cq, &cqe);
}

static void rx_rndv_matched(struct sh_qp *qp, const struct sh_pkt *pkt,
			    int32_t h)
{
	struct sh_srq *srq = qp->srq;
	struct sh_tag *t = &srq->tags[h];
	const struct ibv_tmh *tmh = (const void *)pkt->data;
	const struct ibv_rvh *rvh = (const void *)(pkt->data + SH_TMH_LEN);
	uint32_t len = be32toh(rvh->len), hdr;
	bool strict = qp->ctx->cfg.strict;
	struct sh_read_job *job;
	struct sh_cqe cqe;

	list_remove(srq, h);
	srq->matched++;
	rx_matched_cqe(qp, t, tmh, &cqe);
	cqe.srq = srq;
	cqe.wc_flags = IBV_WC_TM_MATCH;
	cqe.status = sh_local_check(qp->ctx, t->sge, t->num_sge,
				    IBV_ACCESS_LOCAL_WRITE);
	/* The card cannot read more than max_msg_sz at once: software must
	 * not hand it a buffer that long (doc/DESIGN.md, "Long messages"). */
	if (cqe.status == IBV_WC_SUCCESS && len > qp->ctx->cfg.max_msg_sz &&
	    len <= sge_total(t->sge, t->num_sge))
		cqe.status = IBV_WC_REM_INV_REQ_ERR;
	/* strict: only a QP without a send queue is the card's rendezvous
	 * QP (mlx5 offload_type RNDV, rule 10) */
	job = cqe.status == IBV_WC_SUCCESS &&
	      len <= sge_total(t->sge, t->num_sge) &&
	      (!strict || qp->no_sq) ? calloc(1, sizeof(*job)) : NULL;
	if (!job) {
		/* Software finishes the transfer from the headers. */
		if (cqe.status != IBV_WC_SUCCESS) {
			cqe.release_handle = h;
			sh_cq_push(srq->cq, &cqe);
			return;
		}
		cqe.status = IBV_WC_TM_RNDV_INCOMPLETE;
		hdr = sh_scatter(t->sge, t->num_sge, 0, pkt->data,
				 SH_TMH_LEN + SH_RVH_LEN);
		if (!strict) {
			/* mlx5 CONSUMED_MSG_SW_RDNV: one completion */
			cqe.wc_flags |= IBV_WC_TM_DATA_VALID;
			cqe.byte_len = hdr;
			cqe.release_handle = h;
			sh_cq_push(srq->cq, &cqe);
			return;
		}
		/* mlx5 CONSUMED_SW_RDNV then EXPECTED (rule 16): the first
		 * keeps the tag, the second has the length and frees it */
		cqe.srq = NULL;
		sh_cq_push(srq->cq, &cqe);
		cqe.status = IBV_WC_SUCCESS;
		cqe.wc_flags = IBV_WC_TM_DATA_VALID;
		cqe.byte_len = hdr;
		cqe.srq = srq;
		cqe.release_handle = h;
		sh_cq_push(srq->cq, &cqe);
		return;
	}
	/* strict: the length is only in the DATA_VALID completion (rule 15) */
	cqe.byte_len = strict ? 0 : len;
	cqe.srq = NULL;
	sh_cq_push(srq->cq, &cqe);

	job->qp = qp;
	job->recv_wr_id = t->recv_wr_id;
	memcpy(job->sge, t->sge, sizeof(*t->sge) * t->num_sge);
	job->num_sge = t->num_sge;
	memcpy(job->hdr, pkt->data, sizeof(job->hdr));
	job->tag = cqe.tag;
	job->priv = cqe.priv;
	job->va = be64toh(rvh->va);
	job->rkey = be32toh(rvh->rkey);
	job->len = len;
	job->handle = h;
	sh_card_queue_read(qp->ctx, job);
}

static bool tmh_valid(const struct sh_pkt *pkt, uint32_t rndv_max)
{
	const struct ibv_tmh *tmh = (const void *)pkt->data;

	if (pkt->msg_len < SH_TMH_LEN || pkt->len < SH_TMH_LEN ||
	    tmh->reserved[0] || tmh->reserved[1] || tmh->reserved[2])
		return false;
	switch (tmh->opcode) {
	case IBV_TMH_NO_TAG:
	case IBV_TMH_FIN:
	case IBV_TMH_EAGER:
		return true;
	case IBV_TMH_RNDV:
		return pkt->msg_len >= SH_TMH_LEN + SH_RVH_LEN &&
		       pkt->msg_len <= rndv_max && (pkt->flags & SH_PKT_LAST);
	}
	return false;
}

/*
 * The card's decision for the first packet of a message.  Returns 0 when
 * the packet was taken, EAGAIN when it must wait for a plain buffer.
 */
int sh_rx_first(struct sh_qp *qp, const struct sh_pkt *pkt,
		const uint8_t *data)
{
	struct sh_srq *srq = qp->srq;
	const struct ibv_tmh *tmh = (const void *)pkt->data;
	int32_t h;

	if (!srq || !srq->tm)
		return rx_plain(qp, pkt, data, IBV_WC_RECV, false);
	if (!tmh_valid(pkt, qp->ctx->cfg.max_rndv_hdr_size))
		return rx_plain(qp, pkt, data, IBV_WC_RECV, false);
	if (tmh->opcode == IBV_TMH_NO_TAG || tmh->opcode == IBV_TMH_FIN)
		return rx_plain(qp, pkt, data, IBV_WC_TM_NO_TAG, false);

	/* the first active entry, in list order, whose tag & mask accept */
	h = sh_tl_match(srq, be64toh(tmh->tag));
	if (h < 0)
		return rx_plain(qp, pkt, data, IBV_WC_TM_RECV, true);
	if (tmh->opcode == IBV_TMH_EAGER && (pkt->flags & SH_PKT_LAST))
		rx_eager_one(qp, pkt, data, h);
	else if (tmh->opcode == IBV_TMH_EAGER)
		rx_eager_matched(qp, pkt, data, h);
	else
		rx_rndv_matched(qp, pkt, h);
	return 0;
}

void sh_rx_more(struct sh_qp *qp, const struct sh_pkt *pkt,
		const uint8_t *data)
{
	if (qp->rx.dest != SH_RX_IDLE)
		rx_data(qp, pkt, data);
}
