/*
 * match.c - what the card does with each message that arrives on a QP
 * attached to a TM-SRQ (doc/DESIGN.md section 3): match against the tag
 * list, or unexpected into a plain buffer, eager or rendezvous.  The
 * decision and the one-packet messages are in softhca_match.h (inline in
 * the packet step); here are the messages of several packets, the
 * rendezvous and the strict overflow, and the message state they share.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softhca_priv.h"
#include "softhca_fast.h"
#include "softhca_match.h"

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
 * The first packet of a message of several into plain buffer b (taken):
 * the message state that the packets after it fill (rx_data), the
 * completion's place reserved in decision order.
 */
int sh_rx_plain_start(struct sh_qp *qp, const struct sh_pkt *pkt,
		      const uint8_t *data, const struct sh_rbuf *b,
		      enum ibv_wc_opcode opcode, uint32_t flags,
		      struct sh_cq *cq)
{
	rx_start(qp, SH_RX_PLAIN, b->sge, b->num_sge, pkt, 0, cq);
	qp->rx.cqe.wr_id = b->wr_id;
	qp->rx.cqe.opcode = opcode;
	qp->rx.cqe.byte_len = pkt->msg_len;
	qp->rx.cqe.wc_flags = flags;
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
void sh_rx_eager_overflow(struct sh_qp *qp, const struct sh_pkt *pkt,
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

void sh_rx_eager_matched(struct sh_qp *qp, const struct sh_pkt *pkt,
			 const uint8_t *data, int32_t h)
{
	struct sh_srq *srq = qp->srq;
	struct sh_tag *t = &srq->tags[h];
	const struct ibv_tmh *tmh = (const void *)pkt->data;
	struct sh_cqe cqe;

	if (qp->ctx->cfg.strict &&
	    pkt->msg_len - SH_TMH_LEN > sge_total(t->sge, t->num_sge)) {
		sh_rx_eager_overflow(qp, pkt, h);
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

void sh_rx_rndv_matched(struct sh_qp *qp, const struct sh_pkt *pkt,
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

void sh_rx_more(struct sh_qp *qp, const struct sh_pkt *pkt,
		const uint8_t *data)
{
	if (qp->rx.dest != SH_RX_IDLE)
		rx_data(qp, pkt, data);
}
