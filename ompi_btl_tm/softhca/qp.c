/*
 * qp.c - RC queue pairs (and the UD QP's verbs of its life, ud.c): creation, connection, state changes and receive
 * posting.  The send side (send queue, outbound ring, ibv_post_send) is
 * in egress.c; what arrives is taken and checked in ingress.c; the error
 * state in qperr.c.  Calls only down (ingress, egress, match, rndv for a
 * QP's state; the card through the doorbell).
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "softhca_priv.h"
#include "softhca_sched.h"

/* ---- verbs ----------------------------------------------------------- */

int sh_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		 struct ibv_recv_wr **bad)
{
	struct sh_qp *qp = to_sh_qp(ibqp);
	int err;

	if (qp->srq || qp->qp.state == IBV_QPS_RESET) {
		*bad = wr;
		return EINVAL;
	}
	sh_lock(qp->ctx);
	if (qp->qp.state == IBV_QPS_ERR) {
		for (; wr; wr = wr->next)
			sh_qp_flush_wr(qp, qp->rcq, wr->wr_id, IBV_WC_RECV);
		sh_unlock(qp->ctx);
		return 0;
	}
	err = sh_rq_post(&qp->rq, qp->max_recv_wr, SH_MAX_SGE, wr, bad);
	sh_doorbell(qp->ctx, SH_BELL_RECV, NULL);
	sh_unlock(qp->ctx);
	return err;
}

struct ibv_qp *sh_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct sh_context *ctx = to_sh_ctx(pd->context);
	const struct softhca_config *cfg = &ctx->cfg;
	struct sh_qp *qp;
	uint32_t i;

	if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->qp_type == IBV_QPT_UD && attr->srq) {
		errno = EINVAL;
		return NULL;
	}
	if (!attr->send_cq || !attr->recv_cq ||
	    attr->cap.max_send_wr > cfg->max_wr ||
	    attr->cap.max_recv_wr > cfg->max_wr ||
	    attr->cap.max_send_sge > SH_MAX_SGE ||
	    attr->cap.max_recv_sge > SH_MAX_SGE ||
	    (attr->cap.max_send_wr &&
	     (!sh_sq_wqebbs(attr->cap.max_send_wr, attr->cap.max_send_sge,
			    attr->cap.max_inline_data) ||
	      sh_sq_wqebbs(attr->cap.max_send_wr, attr->cap.max_send_sge,
			   attr->cap.max_inline_data) > cfg->max_wr))) {
		/* the last test: mlx5's send queue size limit (rule 2) */
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	pthread_mutex_lock(&ctx->lock);
	for (i = 0; i < cfg->max_qp && ctx->qps[i]; i++)
		;
	if (i == cfg->max_qp ||
	    (attr->qp_type == IBV_QPT_UD && ctx->ud.qp)) { /* one UD QP */
		pthread_mutex_unlock(&ctx->lock);
		free(qp);
		errno = ENOMEM;
		return NULL;
	}
	ctx->qps[i] = qp;
	if (i >= ctx->qp_hwm)
		ctx->qp_hwm = i + 1;
	qp->ctx = ctx;
	qp->index = i;
	qp->scq = to_sh_cq(attr->send_cq);
	qp->rcq = to_sh_cq(attr->recv_cq);
	qp->srq = attr->srq ? to_sh_srq(attr->srq) : NULL;
	qp->rx_rq = qp->srq ? &qp->srq->rq : &qp->rq;
	qp->rx_tm = qp->srq && qp->srq->tm;
	qp->rx_cq = qp->rx_tm ? qp->srq->cq : qp->rcq;
	qp->max_send_wr = attr->cap.max_send_wr;
	qp->max_send_sge = attr->cap.max_send_sge;
	qp->no_sq = !attr->cap.max_send_wr;
	/* what mlx5 reports back: the WQE less its control segments and
	 * the inline header */
	qp->max_inline = qp->no_sq ? 0 :
		sh_sq_wqe_size(attr->cap.max_send_sge,
			       attr->cap.max_inline_data) - SH_WQE_OVERHEAD - 4;
	qp->max_recv_wr = attr->cap.max_recv_wr ? attr->cap.max_recv_wr : 1;
	qp->sq_sig_all = attr->sq_sig_all;
	qp->in = sh_ring_at(&ctx->lay, ctx->rings, i);
	qp->in_tail = qp->in_idx = qp->in_step = 0;
	qp->rxw = -1;
	sh_ring_clear(ctx, i);
	atomic_store(&qp->in->closed, 0);
	atomic_fetch_add(&qp->in->epoch, 1);
	qp->scq->users++;
	qp->rcq->users++;
	if (qp->srq)
		qp->srq->users++;
	qp->lockfree = sh_obj_attach(ctx, pd, -1);
	if (attr->qp_type == IBV_QPT_UD) {
		qp->ud = true;
		ctx->ud.qp = qp;
		qp->rcq->ud = qp;
	}
	pthread_mutex_unlock(&ctx->lock);

	qp->qp.context = pd->context;
	qp->qp.qp_context = attr->qp_context;
	qp->qp.pd = pd;
	qp->qp.send_cq = attr->send_cq;
	qp->qp.recv_cq = attr->recv_cq;
	qp->qp.srq = attr->srq;
	qp->qp.handle = i;
	qp->qp.qp_num = SH_QPN_BASE + i;
	qp->qp.state = IBV_QPS_RESET;
	qp->qp.qp_type = attr->qp_type;
	pthread_mutex_init(&qp->qp.mutex, NULL);
	pthread_cond_init(&qp->qp.cond, NULL);
	attr->cap.max_inline_data = qp->max_inline;
	return &qp->qp;
}

static int qp_connect(struct sh_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct sh_peer *peer;
	uint32_t idx;

	if ((mask & (IBV_QP_AV | IBV_QP_DEST_QPN)) !=
	    (IBV_QP_AV | IBV_QP_DEST_QPN) || !attr->ah_attr.is_global)
		return EINVAL;
	peer = sh_peer_get(qp->ctx, &attr->ah_attr.grh.dgid);
	if (!peer)
		/* (shm.c says why on stderr) EHOSTUNREACH: nobody answers
		 * for that GID; EACCES: the owner refused (another user, a
		 * wrong key); EPROTO: its segment is not one to trust */
		return errno == ECONNREFUSED ? EHOSTUNREACH
		       : errno ? errno : EINVAL;
	idx = attr->dest_qp_num - SH_QPN_BASE;
	if (attr->dest_qp_num < SH_QPN_BASE || idx >= peer->lay.max_qp ||
	    peer->lay.mtu != qp->ctx->lay.mtu) {
		sh_peer_put(qp->ctx, peer);
		return EINVAL;
	}
	qp->peer = peer;
	qp->dest_qpn = attr->dest_qp_num;
	qp->out = peer->gone ? &peer->gone_ring
			     : sh_ring_at(&peer->lay, peer->rings, idx);
	qp->out_epoch = atomic_load(&qp->out->epoch);
	/* a fresh ring's tail is 0; wherever it is, production starts there */
	qp->out_head = qp->out_tail = atomic_load(&qp->out->tail);
	qp->out_idx = peer->gone ? 0 : qp->out_head % peer->lay.ring_depth;
	qp->out_bits = peer->gone ? NULL : &((struct sh_rings *)peer->rings)
				->rx_bits[sh_rx_bit(idx) / 64];
	qp->out_mask = 1ull << (sh_rx_bit(idx) % 64);
	sh_rx_watch(qp);
	return 0;
}

/* The QP's work goes without a flush owed (reset, destroy). */
static void flush_forget(struct sh_qp *qp)
{
	if (qp->flush_pending) {
		qp->flush_pending = false;
		qp->ctx->flush_n--;
	}
}

static void qp_reset(struct sh_qp *qp)
{
	flush_forget(qp);
	while (qp->sq_count)
		sh_qp_sq_pop(qp);
	qp->rx.dest = SH_RX_IDLE;
	sh_qp_resp_active(qp, false);
	sh_rndv_drop(qp->ctx, qp);
	sh_peer_put(qp->ctx, qp->peer);
	qp->peer = NULL;
	qp->out = NULL;
	qp->rq.count = 0;
	sh_rx_unwatch(qp);
	qp->in_tail = qp->in_idx = qp->in_step = 0;
	sh_ring_clear(qp->ctx, qp->index);
	atomic_store(&qp->in->closed, 0);
}

static bool transition_ok(enum ibv_qp_state from, enum ibv_qp_state to)
{
	switch (to) {
	case IBV_QPS_RESET:
	case IBV_QPS_ERR:
		return true;
	case IBV_QPS_INIT:
		return from == IBV_QPS_RESET || from == IBV_QPS_INIT;
	case IBV_QPS_RTR:
		return from == IBV_QPS_INIT;
	case IBV_QPS_RTS:
		return from == IBV_QPS_RTR || from == IBV_QPS_RTS;
	default:
		return false;
	}
}

static void rts_attr_keep(struct sh_qp *qp, const struct ibv_qp_attr *attr,
			  int mask)
{
	if (mask & IBV_QP_TIMEOUT)
		qp->timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		qp->retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		qp->rnr_retry = attr->rnr_retry;
}

int sh_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct sh_qp *qp = to_sh_qp(ibqp);
	enum ibv_qp_state to;
	int err = 0;

	if (!(mask & IBV_QP_STATE))
		return 0;
	to = attr->qp_state;
	pthread_mutex_lock(&qp->ctx->lock);
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != qp->qp.state)
		err = EINVAL;
	else if (!transition_ok(qp->qp.state, to))
		err = EINVAL;
	else if (to == IBV_QPS_RTR && !qp->ud)
		err = qp_connect(qp, attr, mask);
	else if (to == IBV_QPS_ERR) {
		sh_qp_error(qp, IBV_WC_WR_FLUSH_ERR);
		/* flushed before the verb returns, in any scheduling mode */
		sh_doorbell(qp->ctx, SH_BELL_FLUSH, qp);
	}
	else if (to == IBV_QPS_RESET)
		qp_reset(qp);
	if (!err && to == IBV_QPS_RTS)
		rts_attr_keep(qp, attr, mask);
	if (!err && (mask & IBV_QP_QKEY))
		qp->qkey = attr->qkey;
	if (!err)
		qp->qp.state = to;
	pthread_mutex_unlock(&qp->ctx->lock);
	return err;
}

int sh_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init)
{
	struct sh_qp *qp = to_sh_qp(ibqp);

	(void)mask;
	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));
	pthread_mutex_lock(&qp->ctx->lock);
	attr->qp_state = attr->cur_qp_state = qp->qp.state;
	attr->dest_qp_num = qp->dest_qpn;
	attr->path_mtu = IBV_MTU_4096;
	attr->cap.max_send_wr = qp->max_send_wr;
	attr->cap.max_recv_wr = qp->max_recv_wr;
	attr->cap.max_send_sge = qp->max_send_sge;
	attr->cap.max_recv_sge = SH_MAX_SGE;
	attr->cap.max_inline_data = qp->max_inline;
	attr->timeout = qp->timeout;
	attr->retry_cnt = qp->retry_cnt;
	attr->rnr_retry = qp->rnr_retry;
	pthread_mutex_unlock(&qp->ctx->lock);
	init->send_cq = qp->qp.send_cq;
	init->recv_cq = qp->qp.recv_cq;
	init->srq = qp->qp.srq;
	init->cap = attr->cap;
	init->qp_type = qp->qp.qp_type;
	init->sq_sig_all = (int)qp->sq_sig_all;
	return 0;
}

int sh_destroy_qp(struct ibv_qp *ibqp)
{
	struct sh_qp *qp = to_sh_qp(ibqp);
	struct sh_context *ctx = qp->ctx;

	pthread_mutex_lock(&ctx->lock);
	atomic_store(&qp->in->closed, 1);
	atomic_fetch_add(&qp->in->epoch, 1);
	sh_rx_unwatch(qp);
	flush_forget(qp);
	sh_qp_resp_active(qp, false);
	while (qp->sq_count)
		sh_qp_sq_pop(qp);
	sh_rx_abort(qp);
	sh_rndv_drop(ctx, qp);
	sh_peer_put(ctx, qp->peer);
	qp->scq->users--;
	qp->rcq->users--;
	if (qp->srq)
		qp->srq->users--;
	ctx->qps[qp->index] = NULL;
	if (qp->ud) {
		ctx->ud.qp = NULL;
		qp->rcq->ud = NULL;
	}
	sh_obj_detach(ctx, qp->lockfree);
	pthread_mutex_unlock(&ctx->lock);
	sh_rq_free(&qp->rq);
	free(qp->sq);
	free(qp);
	return 0;
}
