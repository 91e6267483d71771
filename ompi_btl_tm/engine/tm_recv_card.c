/*
 * tm_recv_card.c - a card-held receive's completions: the card's match
 * and data, and the results of the list ops naming it.  Part of the
 * receive state machine (contract: tm_recv.h; shared steps:
 * tm_recv_steps.h).
 */
#include <stdlib.h>
#include <string.h>
#include "engine/tm_recv.h"
#include "engine/tm_recv_steps.h"
#include "engine/tm_tx.h"
#include "engine/tm_umem.h"
#include "engine/tm_work.h"

/*
 * The steps of a card-held receive's completion.  The slow path
 * (on_card_match, on_card_data) and the fast one (tme_on_recv_cqe) are built
 * from the same steps; the fast one only skips the tests for the cases it
 * excludes.
 */

/* Step: the card matched r (from peer); this is the message's
 * linearisation point. */
static inline void match_take_from(struct tm_engine *eng, struct tm_recv *r,
				   const struct tm_cqe *c, uint32_t peer)
{
	uint32_t app = c->tm.priv;

	rp(r)->flags |= RF_MATCH_SEEN;
	r->on_card = 1;
	tme_env_from_tag(&r->env, c->tm.tag);
	r->peer = peer;
	r->send_seq = app & TM_APP_SEQ_MASK;
	r->match_stamp = eng->clock++;
	eng->x.st.card_matched++;
}

static inline void match_take(struct tm_engine *eng, struct tm_recv *r,
			      const struct tm_cqe *c)
{
	match_take_from(eng, r, c, tmx_peer_of_qpn(&eng->x, c->qp_num));
}

/* Step: an eager message's data is in place: copied out of its staging
 * buffer, if it has one.  Returns r's status. */
static inline int data_eager(struct tm_xport *x, struct tm_recv *r,
			     const struct tm_cqe *c)
{
	struct tme_recv *q = rp(r);
	int status;

	r->msg_len = c->byte_len;
	status = eager_fit(r);
	if (q->t.stage >= 0) {
		memcpy(r->b.buf, tmx_card_buf(x, &q->t, &r->b),
		       r->recv_len);
		tmx_stage_put(x, &q->t);
	}
	return status;
}

static void on_card_match(struct tm_engine *eng, struct tm_recv *r,
			  const struct tm_cqe *c)
{
	struct tme_recv *q = rp(r);
	uint32_t app = c->tm.priv;
	struct tm_msg *lost = NULL;

	match_take(eng, r, c);
	/* a rendezvous' length is only in its data completion (mlx5 puts it
	 * there; doc/mlx5-rules.md rule 15) */
	r->msg_len = (app & TM_APP_RNDV) ? 0 : c->byte_len;
	if (app & TM_APP_RNDV) {
		q->flags |= RF_RNDV;
		eng->x.st.rndv_card++;
	}
	if (c->status == IBV_WC_TM_RNDV_INCOMPLETE)
		q->flags |= RF_SW_RNDV;
	report_arrival(&eng->x, c->tm.tag, app, r->peer, r->msg_len,
		       r->match_stamp, 1);
	if (q->state == R_CARD) {
		recv_leave_queues(eng, r);
	} else if (q->state == R_CLAIM) {
		/* The card used the entry before our DEL: cannot happen while
		 * ops carry the count in order; keep the message anyway. */
		lost = q->claim;
		q->claim = NULL;
		eng->x.st.claim_del_failed++;
	}
	tme_rstate(q, R_WAIT_DATA);
	if ((app & TM_APP_SYNC) && !(app & TM_APP_RNDV))
		tme_recv_reply(eng, r, TX_ACK);
	if (lost)
		tme_handle_unexpected(eng, lost,
				      tm_mq_find_recv(&eng->mq, lost->tag));
}

static void on_card_data(struct tm_engine *eng, struct tm_recv *r,
			 const struct tm_cqe *c)
{
	struct tme_recv *q = rp(r);

	tmx_entry_gone(&eng->x, &q->t);
	if (c->status == IBV_WC_TM_RNDV_INCOMPLETE ||
	    (c->status == IBV_WC_SUCCESS && (q->flags & RF_SW_RNDV))) {
		/* handed to software, in either of mlx5's shapes (rule 16):
		 * the card left TMH+RVH in the buffer (>= 32 bytes) */
		memcpy(q->hdr, tmx_card_buf(&eng->x, &q->t, &r->b),
		       TMH_LEN + RVH_LEN);
		tmx_stage_put(&eng->x, &q->t);
		/* the RVH length is all there is: the metadata did not come,
		 * and a saturated one still exceeds the buffer (truncated) */
		tme_sw_rndv_start(eng, r, be32toh(((const struct ibv_rvh *)
					      (q->hdr + TMH_LEN))->len));
		return;
	}
	if (c->status == IBV_WC_SUCCESS) {
		tme_recv_finish(eng, r, data_eager(&eng->x, r, c));
		return;
	}
	r->recv_len = 0;
	if (tmx_qp_failed(c->status)) /* before the FIN, not after */
		tmx_peer_fail(&eng->x, r->peer);
	if (q->flags & RF_RNDV) {
		/* the card sends no FIN after a failed read */
		memset(q->hdr, 0, sizeof(q->hdr));
		tmh_fill(q->hdr, IBV_TMH_RNDV, c->tm.priv, c->tm.tag);
		tme_fin_failed(r);
		tme_recv_reply(eng, r, TX_FIN);
	}
	tme_recv_finish(eng, r, TM_REQ_ERROR);
}

/* A card-held receive's completion, in general: the match, the data, or
 * both (the cases tme_on_recv_cqe does not take in one pass). */
static __attribute__((noinline)) void
on_recv_cqe_slow(struct tm_engine *eng, struct tm_recv *r,
		 const struct tm_cqe *c)
{
	if (!(rp(r)->flags & RF_MATCH_SEEN))
		on_card_match(eng, r, c);
	/* RNDV_INCOMPLETE without DATA_VALID keeps the tag: the data
	 * completion follows (mlx5's two-completion form) */
	if ((c->flags & IBV_WC_TM_DATA_VALID) ||
	    (c->status != IBV_WC_SUCCESS &&
	     c->status != IBV_WC_TM_RNDV_INCOMPLETE))
		on_card_data(eng, r, c);
}

/*
 * The common case in one pass: a small eager message, neither
 * synchronous nor rendezvous, matched and delivered by one successful
 * MATCH|DATA_VALID completion to a card-held receive with nothing else
 * going on (no protocol flag but a peer watch: no FIFO, no cancel or DEL;
 * no op pending: a signalled ADD completed before its entry could match,
 * in the same CQ; no registration of its own; no bucket yet; its peer's
 * QP in the cache; no test hook).  The steps of on_card_match and
 * on_card_data, without their tests for the cases excluded here: no
 * rendezvous or ACK, no claim, no FIFO to leave, nothing left naming it
 * when it finishes; the copy out of its staging buffer last, so that the
 * function needs no frame.  Anything else: on_recv_cqe_slow.
 */
void tme_on_recv_cqe(void *arg, struct tm_tctx *t, const struct tm_cqe *c)
{
	struct tm_engine *eng = arg;
	struct tm_recv *r = recv_of_tctx(t);
	struct tme_recv *q = rp(r);
	uint32_t peer = tmx_peer_cached(&eng->x, c->qp_num);
	const void *from;
	int staged;

	if (c->status != IBV_WC_SUCCESS ||
	    (c->flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)) !=
	    (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID) ||
	    (c->tm.priv & (TM_APP_RNDV | TM_APP_SYNC)) ||
	    (q->flags & ~RF_WATCHED) || q->state != R_CARD ||
	    q->ops_pending || q->own_mr || q->mq.bucket ||
	    peer == UINT32_MAX || eng->x.test.arrival_hook) {
		on_recv_cqe_slow(eng, r, c);
		return;
	}
	match_take_from(eng, r, c, peer);
	recv_leave_small(eng, r);
	tm_mq_recv_remove_lazy(&eng->mq, &q->mq);
	tme_rstate(q, R_WAIT_DATA);
	tmx_entry_gone(&eng->x, &q->t);
	r->msg_len = c->byte_len;
	staged = q->t.stage >= 0;
	from = tmx_card_buf(&eng->x, &q->t, &r->b);
	tme_recv_outcome(eng, r, eager_fit(r));
	if (staged)
		copy_payload(r->b.buf, from, r->recv_len);
	tme_recv_fire(eng, r); /* puts the stage back */
}

/* What a completed (or dropped) list op means for the receive it names. */
void tme_on_op_result(struct tm_engine *eng, int type, struct tm_recv *r,
		      const struct tm_cqe *c)
{
	struct tme_recv *q = rp(r);
	struct tm_msg *m;

	if (type == WR_ADD && (q->t.flags & TC_ADD_UNSIG)) {
		/* an unsignalled ADD failed: r is still posted (a failed ADD
		 * cannot have matched) unless a cancel or claim finished it
		 * meanwhile; nothing counted it in ops_pending */
		if (q->state == R_DONE)
			return;
		q->ops_pending++;
	}
	q->ops_pending--;
	if (type == WR_ADD && c->status != IBV_WC_SUCCESS) {
		/* never on the list: behave as software-held from now on; a
		 * chained ADD refused at post found the list full, as one
		 * posted alone would (tm_ops.h) */
		if (c->status == TM_WC_REFUSED)
			eng->x.st.sw_list_full++;
		else
			eng->x.st.errors++;
		tmx_entry_gone(&eng->x, &q->t);
		if (q->state == R_CARD)
			tme_recv_back_to_sw(eng, r);
	} else if (type == WR_DEL && c->status == IBV_WC_SUCCESS) {
		tmx_entry_gone(&eng->x, &q->t);
		if (q->state == R_CLAIM) {
			m = q->claim;
			q->claim = NULL;
			tme_deliver(eng, r, m);
		} else if (q->state == R_CARD && (q->flags & RF_PEER_DEAD)) {
			recv_leave_queues(eng, r);
			r->peer = q->want_peer;
			tme_recv_finish(eng, r, TM_REQ_ERROR);
		} else if (q->state == R_CARD) { /* cancel confirmed */
			recv_leave_queues(eng, r);
			r->cancel_stamp = eng->clock++;
			eng->x.st.cancel_ok++;
			tme_recv_finish(eng, r, TM_REQ_CANCELLED);
		}
	} else if (type == WR_DEL) {
		/* consumed by a message whose completion came first */
		if (q->flags & RF_CANCEL_REQ)
			eng->x.st.cancel_late++;
	}
	tme_recv_try_done(eng, r);
}

