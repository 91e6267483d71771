/*
 * softhca_match.h - the card's decision for the first packet of a message
 * on a QP (doc/DESIGN.md section 3): matched against the tag list, or into
 * a plain buffer (no TM-SRQ, NO_TAG and FIN, or unexpected), and the
 * one-packet message finished there: one check, one copy, its completion
 * written straight into the CQ.  Inline, because it runs in the packet
 * step's frame (softhca_ingress.h; included after softhca_priv.h and
 * softhca_fast.h by ingress.c and sched.c, and by match.c for the
 * declarations below): a small message is the common arrival, and a call
 * per packet costs it a frame.
 *
 * Contract: sh_rx_first(qp, pkt, data) takes the first packet of a
 * message (pkt: the checked header copy, data: the payload in the ring);
 * 0 when it was taken, EAGAIN when it must wait for a plain buffer (RNR:
 * the packet stays in the ring).  Messages of several packets, the
 * rendezvous and strict mode's eager overflow are match.c's (below).
 */
#ifndef SOFTHCA_MATCH_H
#define SOFTHCA_MATCH_H

#include <endian.h>
#include <errno.h>
#include <string.h>

/* match.c: the paths a one-packet eager or plain message does not take */
int sh_rx_plain_start(struct sh_qp *qp, const struct sh_pkt *pkt,
		      const uint8_t *data, const struct sh_rbuf *b,
		      enum ibv_wc_opcode opcode, uint32_t flags,
		      struct sh_cq *cq);
void sh_rx_eager_overflow(struct sh_qp *qp, const struct sh_pkt *pkt,
			  int32_t h);
void sh_rx_eager_matched(struct sh_qp *qp, const struct sh_pkt *pkt,
			 const uint8_t *data, int32_t h);
void sh_rx_rndv_matched(struct sh_qp *qp, const struct sh_pkt *pkt,
			int32_t h);

/* SYNC_REQ of an unexpected arrival (see sh_srq.posted_cnt) */
static inline uint32_t sync_flag(const struct sh_srq *srq)
{
	return (uint16_t)(srq->hw_cnt - srq->posted_cnt) > SH_MAX_SYNC_DIFF ?
	       IBV_WC_TM_SYNC_REQ : 0;
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
static inline __attribute__((always_inline)) int
rx_plain_one(struct sh_qp *qp, const struct sh_pkt *pkt, const uint8_t *data,
	     const struct sh_rbuf *b, enum ibv_wc_opcode opcode, uint32_t flags,
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
	e->srq = NULL; /* (so retire_seq and release_handle are not read) */
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
static inline __attribute__((always_inline)) int
rx_plain(struct sh_qp *qp, const struct sh_pkt *pkt, const uint8_t *data,
	 enum ibv_wc_opcode opcode, bool unexpected)
{
	struct sh_srq *srq = qp->srq;
	struct sh_rq *rq = qp->rx_rq;
	struct sh_cq *cq = qp->rx_cq;
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
	/* several packets: the per-QP message state (match.c) */
	return sh_rx_plain_start(qp, pkt, data, b, opcode,
				 unexpected ? sync_flag(srq) : 0, cq);
}

/*
 * A matched eager message in one packet, the common small case: what
 * rx_eager_matched + rx_start + rx_data + rx_finish do for it, without
 * the per-QP message state: one check, one copy, and the one completion
 * (MATCH|DATA_VALID) written straight into the CQ.
 */
static inline __attribute__((always_inline)) void
rx_eager_one(struct sh_qp *qp, const struct sh_pkt *pkt, const uint8_t *data,
	     int32_t h)
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
		sh_rx_eager_overflow(qp, pkt, h);
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

static inline bool tmh_valid(const struct sh_pkt *pkt, uint32_t rndv_max)
{
	const struct ibv_tmh *tmh = (const void *)pkt->data;

	if (pkt->msg_len < SH_TMH_LEN || pkt->len < SH_TMH_LEN ||
	    tmh->reserved[0] || tmh->reserved[1] || tmh->reserved[2])
		return false;
	/* EAGER, NO_TAG or FIN: any shape (one bit test, not three) */
	if (tmh->opcode < 32 &&
	    ((1u << IBV_TMH_EAGER | 1u << IBV_TMH_NO_TAG | 1u << IBV_TMH_FIN) >>
	     tmh->opcode & 1))
		return true;
	return tmh->opcode == IBV_TMH_RNDV &&
	       pkt->msg_len >= SH_TMH_LEN + SH_RVH_LEN &&
	       pkt->msg_len <= rndv_max && (pkt->flags & SH_PKT_LAST);
}

/*
 * The card's decision for the first packet of a message.  Returns 0 when
 * the packet was taken, EAGAIN when it must wait for a plain buffer.
 */
static inline __attribute__((always_inline)) int
sh_rx_first(struct sh_qp *qp, const struct sh_pkt *pkt, const uint8_t *data)
{
	struct sh_srq *srq = qp->srq;
	const struct ibv_tmh *tmh = (const void *)pkt->data;
	enum ibv_wc_opcode opcode = IBV_WC_RECV;
	bool unexpected = false;
	int32_t h;

	/* (one call of rx_plain, which the compiler then inlines) */
	if (!qp->rx_tm || !tmh_valid(pkt, qp->ctx->cfg.max_rndv_hdr_size)) {
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
				sh_rx_eager_matched(qp, pkt, data, h);
			else
				sh_rx_rndv_matched(qp, pkt, h);
			return 0;
		}
		opcode = IBV_WC_TM_RECV;
		unexpected = true;
	}
	return rx_plain(qp, pkt, data, opcode, unexpected);
}

#endif /* SOFTHCA_MATCH_H */
