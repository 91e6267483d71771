/*
 * match.c - what the card does with each message that arrives on a QP
 * attached to a TM-SRQ (doc/DESIGN.md section 3): match against the tag
 * list, or unexpected into a plain buffer, eager or rendezvous.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softhca_priv.h"
#include "softhca_fast.h"

/* SYNC_REQ of an unexpected arrival (see sh_srq.posted_cnt) */
static uint32_t sync_flag(const struct sh_srq *srq)
{
	return (uint16_t)(srq->hw_cnt - srq->posted_cnt) > SH_MAX_SYNC_DIFF ?
	       IBV_WC_TM_SYNC_REQ : 0;
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

/* A message under way ends flushed (its QP failed or goes away). */
void sh_rx_abort(struct sh_qp *qp)
{
	struct sh_rx *rx = &qp->rx;

	if (rx->dest == SH_RX_IDLE)
		return;
	rx->cqe.status = IBV_WC_WR_FLUSH_ERR;
	rx_finish(qp);
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
 * The data of a one-packet message into a buffer of room bytes (sge):
 * the lkey check (from the cache for one SGE), the length check, the copy
 * (a too-long message still fills the buffer, as rx_data does).
 */
static inline __attribute__((always_inline)) enum ibv_wc_status
rx_one_copy(struct sh_context *ctx, const struct ibv_sge *sge, uint32_t nsge,
	    uint32_t room, const uint8_t *src, uint32_t len)
{
	bool one = nsge == 1;
	enum ibv_wc_status st;

	st = one && (!room || sh_lkey_cached(ctx, sge, IBV_ACCESS_LOCAL_WRITE))
		     ? IBV_WC_SUCCESS
		     : sh_local_check(ctx, sge, nsge, IBV_ACCESS_LOCAL_WRITE);
	if (st == IBV_WC_SUCCESS && len > room)
		st = IBV_WC_LOC_LEN_ERR;
	if (st == IBV_WC_LOC_PROT_ERR)
		return st;
	if (one && len <= 32)
		sh_copy_small((uint8_t *)(uintptr_t)sge[0].addr, src,
			      len < room ? len : room);
	else if (one)
		memcpy((void *)(uintptr_t)sge[0].addr, src,
		       len < room ? len : room);
	else
		sh_scatter(sge, nsge, 0, src, len);
	return st;
}

/*
 * A one-packet message into plain buffer b: what rx_start + rx_data +
 * rx_finish do for it, without the per-QP message state (an unexpected
 * small message, the deep-queue case): one check, one copy, the
 * completion written straight into the CQ.
 */
static int rx_plain_one(struct sh_qp *qp, const struct sh_pkt *pkt,
			const uint8_t *data, const struct sh_rbuf *b,
			enum ibv_wc_opcode opcode, uint32_t flags,
			struct sh_cq *cq)
{
	uint32_t room = b->num_sge == 1 ? b->sge[0].length
					: sge_total(b->sge, b->num_sge);
	uint32_t len = pkt->msg_len;
	enum ibv_wc_status st;
	struct sh_cqe *e;

	st = rx_one_copy(qp->ctx, b->sge, b->num_sge, room, data, len);
	e = sh_cq_next(cq);
	if (!e)
		return ENOMEM;
	e->wr_id = b->wr_id;
	e->tag = 0;
	e->retire_seq = 0;
	e->srq = NULL;
	e->release_handle = -1;
	e->priv = 0;
	e->byte_len = len;
	e->qp_num = qp->qp.qp_num;
	e->src_qp = qp->dest_qpn;
	e->wc_flags = flags;
	e->vendor_err = 0;
	e->status = st;
	e->opcode = opcode;
	e->ready = true;
	return 0;
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
	const struct sh_rbuf *b;

	if (!rq->count) {
		if (srq && !qp->rnr)
			srq->rnr_waits++;
		qp->rnr = true;
		return EAGAIN;
	}
	qp->rnr = false;
	b = sh_rq_take(rq);
	if (unexpected) {
		srq->hw_cnt++;
		srq->unexpected++;
	}
	if ((pkt->flags & (SH_PKT_FIRST | SH_PKT_LAST)) ==
	    (SH_PKT_FIRST | SH_PKT_LAST))
		return rx_plain_one(qp, pkt, data, b, opcode,
				    unexpected ? sync_flag(srq) : 0, cq);
	rx_start(qp, SH_RX_PLAIN, b->sge, b->num_sge, pkt, 0, cq);
	qp->rx.cqe.wr_id = b->wr_id;
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

	sh_list_remove(srq, h);
	sh_tag_put(srq, h);
	srq->matched++;
	if (srq->rq.count)
		cqe.wr_id = sh_rq_take(&srq->rq)->wr_id;
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
	sh_list_remove(srq, h);
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
 * the per-QP message state: one check, one copy, and the one completion
 * (MATCH|DATA_VALID) written straight into the CQ.
 */
static void rx_eager_one(struct sh_qp *qp, const struct sh_pkt *pkt,
			 const uint8_t *data, int32_t h)
{
	struct sh_srq *srq = qp->srq;
	struct sh_tag *t = &srq->tags[h];
	const struct ibv_tmh *tmh = (const void *)pkt->data;
	uint32_t len = pkt->msg_len - SH_TMH_LEN;
	uint32_t room = t->num_sge == 1 ? t->sge[0].length
					: sge_total(t->sge, t->num_sge);
	enum ibv_wc_status st;
	struct sh_cqe *e;

	if (len > room && qp->ctx->cfg.strict) {
		rx_eager_overflow(qp, pkt, h);
		return;
	}
	sh_list_remove(srq, h);
	srq->matched++;
	st = rx_one_copy(qp->ctx, t->sge, t->num_sge, room, data + SH_TMH_LEN,
			 len);
	e = sh_cq_next(srq->cq);
	if (!e)
		return;
	e->wr_id = t->recv_wr_id;
	e->tag = be64toh(tmh->tag);
	e->retire_seq = 0;
	e->srq = srq;
	e->release_handle = h;
	e->priv = be32toh(tmh->app_ctx);
	e->byte_len = len;
	e->qp_num = qp->qp.qp_num;
	e->src_qp = qp->dest_qpn;
	e->wc_flags = IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID;
	e->vendor_err = 0;
	e->status = st;
	e->opcode = IBV_WC_TM_RECV;
	e->ready = true;
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

	sh_list_remove(srq, h);
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
	sh_rndv_queue(qp->ctx, job);
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
	enum ibv_wc_opcode opcode = IBV_WC_RECV;
	bool unexpected = false;
	int32_t h;

	/* (one call of rx_plain, which the compiler then inlines) */
	if (!srq || !srq->tm ||
	    !tmh_valid(pkt, qp->ctx->cfg.max_rndv_hdr_size)) {
		/* a plain SRQ or QP, or no valid TMH: a plain receive */
	} else if (tmh->opcode == IBV_TMH_NO_TAG ||
		   tmh->opcode == IBV_TMH_FIN) {
		opcode = IBV_WC_TM_NO_TAG;
	} else {
		/* the first active entry, in list order, whose tag & mask
		 * accept */
		h = sh_tl_match(srq, be64toh(tmh->tag));
		if (h >= 0) {
			if (tmh->opcode == IBV_TMH_EAGER &&
			    (pkt->flags & SH_PKT_LAST))
				rx_eager_one(qp, pkt, data, h);
			else if (tmh->opcode == IBV_TMH_EAGER)
				rx_eager_matched(qp, pkt, data, h);
			else
				rx_rndv_matched(qp, pkt, h);
			return 0;
		}
		opcode = IBV_WC_TM_RECV;
		unexpected = true;
	}
	return rx_plain(qp, pkt, data, opcode, unexpected);
}

void sh_rx_more(struct sh_qp *qp, const struct sh_pkt *pkt,
		const uint8_t *data)
{
	if (qp->rx.dest != SH_RX_IDLE)
		rx_data(qp, pkt, data);
}
