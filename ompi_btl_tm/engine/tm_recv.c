/*
 * tm_recv.c - the receive state machine (states: tm_engine_priv.h).
 *
 * Contract:
 *  - a new receive first takes the earliest matching unexpected message;
 *    otherwise tm_offload.c places it (card or software-held);
 *  - an unexpected arrival takes the earliest posted receive that accepts
 *    it; a card-held one is claimed: a DEL is decided, and the message is
 *    delivered when the DEL's completion confirms the card let go of the
 *    entry (the "claim race", doc/DESIGN.md "Sync protocol");
 *  - a cancel of a card-held receive is a DEL too; it completes
 *    TM_REQ_CANCELLED if the DEL succeeded, normally if a message won;
 *  - a rendezvous the card could not finish (or one matched in software)
 *    is read by software and answered with a FIN, whatever the outcome
 *    (tm_reply.c);
 *  - a receive completes (callback queued) once finished and no list op
 *    naming it is still pending.
 * Owns: the tm_recv private fields, unexpected messages (tm_msg), clock.
 */
#include <stdlib.h>
#include <string.h>
#include "engine/tm_engine_priv.h"

/* The arrival hook (tests only: tm_engine_test.h). */
static void report_arrival(struct tm_engine *eng, uint64_t tag, uint32_t app,
			   uint32_t peer, uint64_t len, uint64_t stamp,
			   int on_card)
{
	struct tm_arrival a;

	if (!eng->test.arrival_hook)
		return;
	tme_env_from_tag(&a.env, tag);
	a.peer = peer;
	a.send_seq = app & TM_APP_SEQ_MASK;
	a.len = len;
	a.stamp = stamp;
	a.on_card = on_card;
	eng->test.arrival_hook(eng->test.hook_arg, &a);
}

/* ---- completion of requests ----------------------------------------- */

/* r is done: its buffers go back, its callback is queued. */
static inline void recv_done(struct tm_engine *eng, struct tm_recv *r)
{
	r->state = R_DONE;
	tme_stage_put(eng, r);
	if (r->own_mr) {
		tm_dev_mem_put(eng->dev, r->mr);
		r->own_mr = 0;
		r->mr = NULL;
	}
	ucs_list_add_tail(&eng->done_recv, &r->done_link);
	tme_pend(eng, TM_PEND_DONE);
}

void tme_recv_try_done(struct tm_engine *eng, struct tm_recv *r)
{
	if (!(r->flags & RF_FINISHED) || r->ops_pending || r->state == R_DONE)
		return;
	recv_done(eng, r);
}

void tme_recv_finish(struct tm_engine *eng, struct tm_recv *r, int status)
{
	r->status = status;
	if (status == TM_REQ_TRUNCATED)
		eng->st.truncated++;
	if (status == TM_REQ_ERROR)
		eng->st.errors++;
	r->flags |= RF_FINISHED;
	tme_recv_try_done(eng, r);
}

/* ---- matching in software ------------------------------------------- */

/* m is done with: its memory, or its plain buffer back to the card. */
/*
 * A copy for an unexpected message of plen payload bytes.  Small ones are
 * recycled, so that a program whose receives come late does not malloc
 * and free one per message.
 */
static struct tm_msg *msg_alloc(struct tm_engine *eng, uint32_t plen)
{
	struct tm_msg *m;

	if (plen > TM_MSG_SMALL) {
		m = malloc(sizeof(*m) + plen);
		if (m)
			m->plain = TM_MSG_MALLOC;
		return m;
	}
	if (!ucs_list_is_empty(&eng->msg_free)) {
		eng->n_msg_free--;
		m = ucs_list_extract_head(&eng->msg_free, struct tm_msg, all);
	} else {
		m = malloc(sizeof(*m) + TM_MSG_SMALL);
	}
	if (m)
		m->plain = TM_MSG_RECYCLED;
	return m;
}

static void msg_free(struct tm_engine *eng, struct tm_msg *m)
{
	if (m->plain >= 0) {
		tme_post_plain(eng, (uint32_t)m->plain);
	} else if (m->plain == TM_MSG_RECYCLED &&
		   eng->n_msg_free < TM_MSG_KEEP) {
		ucs_list_add_head(&eng->msg_free, &m->all);
		eng->n_msg_free++;
	} else {
		free(m);
	}
}

/* Delivers unexpected message m into receive r (which left the queues). */
static void deliver(struct tm_engine *eng, struct tm_recv *r, struct tm_msg *m)
{
	tme_env_from_tag(&r->env, m->tag);
	r->peer = m->peer;
	r->send_seq = m->app & TM_APP_SEQ_MASK;
	r->match_stamp = m->stamp;
	r->msg_len = m->len;
	r->on_card = 0;
	r->state = R_IDLE; /* out of the queues; finished below */
	ucs_list_del(&m->all);
	if (m->rndv) {
		memcpy(r->hdr, m->hdr, sizeof(r->hdr));
		msg_free(eng, m);
		tme_sw_rndv_start(eng, r, r->msg_len);
		return;
	}
	if (m->app & TM_APP_SYNC)
		tme_recv_reply(eng, r, TX_ACK);
	r->recv_len = m->len < r->len ? m->len : r->len;
	memcpy(r->buf, m->data, r->recv_len);
	msg_free(eng, m);
	tme_recv_finish(eng, r, r->msg_len > r->len ? TM_REQ_TRUNCATED : TM_REQ_OK);
}

/* r names a peer: waits on it, oldest first (see tme_keepalive_scan). */
static void recv_watch(struct tm_engine *eng, struct tm_recv *r)
{
	struct tm_peer *p = eng->peers[r->want_peer];

	r->wait_ns = tme_now_ns();
	if (ucs_list_is_empty(&p->recvq))
		ucs_list_add_tail(&eng->rwait_peers, &p->rwait_link);
	tme_pend(eng, TM_PEND_WAIT);
	ucs_list_add_tail(&p->recvq, &r->peer_link);
	r->flags |= RF_WATCHED;
}

static void recv_unwatch(struct tm_engine *eng, struct tm_recv *r)
{
	struct tm_peer *p;

	if (!(r->flags & RF_WATCHED))
		return;
	p = eng->peers[r->want_peer];
	r->flags &= ~RF_WATCHED;
	ucs_list_del(&r->peer_link);
	if (ucs_list_is_empty(&p->recvq))
		ucs_list_del(&p->rwait_link);
}

static void recv_leave_queues(struct tm_engine *eng, struct tm_recv *r)
{
	/* the flags first: a card-held receive naming no peer (the common
	 * case) is in neither list, and costs no call */
	if (r->flags & RF_WATCHED)
		recv_unwatch(eng, r);
	if (r->flags & RF_SWQ)
		tme_swq_del(eng, r);
	tm_mq_recv_remove(&eng->mq, &r->mq);
}

/*
 * An unexpected message takes the earliest posted receive that accepts it.
 * A card-held receive is claimed: DEL it and complete when the card
 * confirms (the DEL cannot fail: see the contract).
 */
static void handle_unexpected_msg(struct tm_engine *eng, struct tm_msg *m)
{
	struct tm_mq_recv *q = tm_mq_find_recv(&eng->mq, m->tag);
	struct tm_recv *r;

	if (!q) {
		/* a message that cannot be queued cannot be matched: stop
		 * rather than lose it (it stays on all_msgs) */
		if (tm_mq_msg_add(&eng->mq, &m->mq, m->tag, m->stamp) != TM_OK)
			tme_engine_fatal(eng, TM_ERR_NO_MEMORY);
		else
			m->in_uq = 1; /* a CANCEL_REQ may still withdraw it */
		return;
	}
	r = ucs_container_of(q, struct tm_recv, mq);
	recv_leave_queues(eng, r);
	if (r->state == R_SW) {
		eng->st.unexp_to_sw_recv++;
		deliver(eng, r, m);
		return;
	}
	eng->st.unexp_claimed++;
	r->state = R_CLAIM;
	r->claim = m;
	if (!(r->flags & RF_DEL_POSTED)) {
		r->flags |= RF_DEL_POSTED;
		tme_op_decide(eng, WR_DEL, r);
	}
}

/* ---- TM CQ handlers ------------------------------------------------- */

/*
 * The length of a rendezvous request: the metadata's 64 bits when it came
 * and agrees with the RVH (which saturates at 2^32 - 1), else the RVH's.
 */
static uint64_t rndv_len(struct tm_engine *eng, const uint8_t *buf,
			 uint32_t byte_len)
{
	const struct ibv_rvh *rvh = (const void *)(buf + TMH_LEN);
	uint32_t len = be32toh(rvh->len);
	struct tm_rndv_md md;
	uint64_t full;

	if (byte_len < RNDV_HDR_LEN)
		return len;
	memcpy(&md, buf + TMH_LEN + RVH_LEN, sizeof(md));
	full = be64toh(md.len);
	if ((full > UINT32_MAX ? UINT32_MAX : full) != len) {
		eng->st.malformed++;
		return len;
	}
	return full;
}

/* An unexpected tagged message in a plain buffer: keep a copy, match it. */
int tme_on_unexpected(struct tm_engine *eng, uint8_t *buf, uint32_t idx,
		      const struct tm_cqe *c)
{
	const struct ibv_tmh *tmh = (const void *)buf;
	uint32_t plen = 0;
	struct tm_msg *m;
	int rndv = tmh->opcode == IBV_TMH_RNDV, held;

	eng->uq_count++;
	tme_pend(eng, TM_PEND_WORK);
	eng->st.unexpected++;
	if (!rndv && c->byte_len >= TMH_LEN)
		plen = c->byte_len - TMH_LEN;
	m = tme_fault(eng, TM_SITE_ALLOC_MSG) ? NULL : msg_alloc(eng, plen);
	if (m) {
		m->data = (uint8_t *)(m + 1);
	} else {
		/* no copy: the message keeps its plain buffer until it is
		 * received, and the card has one buffer less meanwhile */
		m = &eng->msg_pool[idx];
		m->plain = (int32_t)idx;
		m->data = buf + TMH_LEN;
		eng->st.msg_held++;
	}
	m->tag = be64toh(tmh->tag);
	m->app = be32toh(tmh->app_ctx);
	m->peer = tme_peer_of_qpn(eng, c->qp_num);
	m->rndv = rndv;
	m->in_uq = 0;
	m->len = rndv ? rndv_len(eng, buf, c->byte_len) : plen;
	if (rndv)
		memcpy(m->hdr, buf, TMH_LEN + RVH_LEN);
	else if (m->plain < 0)
		memcpy(m->data, buf + TMH_LEN, plen);
	m->stamp = eng->clock++;
	ucs_list_add_tail(&eng->all_msgs, &m->all);
	report_arrival(eng, m->tag, m->app, m->peer, m->len, m->stamp, 0);
	held = m->plain >= 0; /* m may be gone after the next line */
	handle_unexpected_msg(eng, m);
	return held;
}

/* The card matched r: this is the message's linearisation point. */
static void on_card_match(struct tm_engine *eng, struct tm_recv *r,
			  const struct tm_cqe *c)
{
	uint32_t app = c->tm.priv;
	struct tm_msg *lost = NULL;

	r->flags |= RF_MATCH_SEEN;
	r->on_card = 1;
	tme_env_from_tag(&r->env, c->tm.tag);
	r->peer = tme_peer_of_qpn(eng, c->qp_num);
	r->send_seq = app & TM_APP_SEQ_MASK;
	/* a rendezvous' length is only in its data completion (mlx5 puts it
	 * there; doc/mlx5-rules.md rule 15) */
	r->msg_len = (app & TM_APP_RNDV) ? 0 : c->byte_len;
	if (app & TM_APP_RNDV)
		r->flags |= RF_RNDV;
	if (c->status == IBV_WC_TM_RNDV_INCOMPLETE)
		r->flags |= RF_SW_RNDV;
	r->match_stamp = eng->clock++;
	eng->st.card_matched++;
	if (app & TM_APP_RNDV)
		eng->st.rndv_card++;
	report_arrival(eng, c->tm.tag, app, r->peer, r->msg_len,
		       r->match_stamp, 1);
	if (r->state == R_CARD) {
		recv_leave_queues(eng, r);
	} else if (r->state == R_CLAIM) {
		/* The card used the entry before our DEL: cannot happen while
		 * ops carry the count in order; keep the message anyway. */
		lost = r->claim;
		r->claim = NULL;
		eng->st.claim_del_failed++;
	}
	r->state = R_WAIT_DATA;
	if ((app & TM_APP_SYNC) && !(app & TM_APP_RNDV))
		tme_recv_reply(eng, r, TX_ACK);
	if (lost)
		handle_unexpected_msg(eng, lost);
}

static void on_card_data(struct tm_engine *eng, struct tm_recv *r,
			 const struct tm_cqe *c)
{
	tme_entry_gone(eng, r);
	if (c->status == IBV_WC_TM_RNDV_INCOMPLETE ||
	    (c->status == IBV_WC_SUCCESS && (r->flags & RF_SW_RNDV))) {
		/* handed to software, in either of mlx5's shapes (rule 16):
		 * the card left TMH+RVH in the buffer (>= 32 bytes) */
		memcpy(r->hdr, tme_card_buf(eng, r), TMH_LEN + RVH_LEN);
		tme_stage_put(eng, r);
		/* the RVH length is all there is: the metadata did not come,
		 * and a saturated one still exceeds the buffer (truncated) */
		tme_sw_rndv_start(eng, r, be32toh(((const struct ibv_rvh *)
					      (r->hdr + TMH_LEN))->len));
		return;
	}
	switch (c->status) {
	case IBV_WC_SUCCESS:
		r->msg_len = c->byte_len;
		r->recv_len = r->msg_len < r->len ? r->msg_len : r->len;
		if (r->stage >= 0) {
			memcpy(r->buf, tme_card_buf(eng, r), r->recv_len);
			tme_stage_put(eng, r);
		}
		tme_recv_finish(eng, r, r->msg_len > r->len ?
				TM_REQ_TRUNCATED : TM_REQ_OK);
		break;
	default:
		r->recv_len = 0;
		if (tme_qp_failed(c->status))
			tme_peer_fail(eng, r->peer); /* before the FIN, not after */
		if (r->flags & RF_RNDV) {
			/* the card sends no FIN after a failed read */
			memset(r->hdr, 0, sizeof(r->hdr));
			tmh_fill(r->hdr, IBV_TMH_RNDV, c->tm.priv, c->tm.tag);
			tme_fin_failed(r);
			tme_recv_reply(eng, r, TX_FIN);
		}
		tme_recv_finish(eng, r, TM_REQ_ERROR);
		break;
	}
}

/*
 * The common case in one pass: a small eager message, neither
 * synchronous nor rendezvous, matched and delivered by one successful
 * MATCH|DATA_VALID completion to a card-held receive with nothing else
 * going on (no peer watch, no FIFO, no cancel or DEL, no op pending: a
 * signalled ADD completed before its entry could match, in the same CQ;
 * no test hook).  Does
 * exactly what on_card_match + on_card_data + tme_recv_finish do for it,
 * without their tests for the cases excluded here.  0: not that case.
 */
#define RF_FAST_OK (RF_ENTRY_LIVE | RF_UNCONF | RF_ADD_UNSIG)
static int recv_fast(struct tm_engine *eng, struct tm_recv *r,
		     const struct tm_cqe *c)
{
	uint32_t app = c->tm.priv;
	int status = TM_REQ_OK;

	if (c->status != IBV_WC_SUCCESS ||
	    (c->flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)) !=
	    (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID) ||
	    (app & (TM_APP_RNDV | TM_APP_SYNC)) || (r->flags & ~RF_FAST_OK) ||
	    r->state != R_CARD || r->ops_pending || eng->test.arrival_hook)
		return 0;
	/* the match (on_card_match) */
	r->on_card = 1;
	tme_env_from_tag(&r->env, c->tm.tag);
	r->peer = tme_peer_of_qpn(eng, c->qp_num);
	r->send_seq = app & TM_APP_SEQ_MASK;
	r->match_stamp = eng->clock++;
	eng->st.card_matched++;
	tm_mq_recv_remove(&eng->mq, &r->mq);
	/* the data (on_card_data) */
	tme_entry_gone(eng, r);
	r->msg_len = c->byte_len;
	r->recv_len = r->msg_len < r->len ? r->msg_len : r->len;
	if (r->stage >= 0) {
		memcpy(r->buf, tme_card_buf(eng, r), r->recv_len);
		tme_stage_put(eng, r);
	}
	if (r->msg_len > r->len) {
		status = TM_REQ_TRUNCATED;
		eng->st.truncated++;
	}
	/* the end (tme_recv_finish, tme_recv_try_done) */
	r->status = status;
	r->flags |= RF_MATCH_SEEN | RF_FINISHED;
	recv_done(eng, r);
	return 1;
}

void tme_on_recv_cqe(struct tm_engine *eng, struct tm_recv *r,
		     const struct tm_cqe *c)
{
	if (recv_fast(eng, r, c))
		return;
	if (!(r->flags & RF_MATCH_SEEN))
		on_card_match(eng, r, c);
	/* RNDV_INCOMPLETE without DATA_VALID keeps the tag: the data
	 * completion follows (mlx5's two-completion form) */
	if ((c->flags & IBV_WC_TM_DATA_VALID) ||
	    (c->status != IBV_WC_SUCCESS &&
	     c->status != IBV_WC_TM_RNDV_INCOMPLETE))
		on_card_data(eng, r, c);
}

/* What a completed (or dropped) list op means for the receive it names. */
void tme_on_op_result(struct tm_engine *eng, int type, struct tm_recv *r,
		      const struct tm_cqe *c)
{
	struct tm_msg *m;

	if (!r)
		return;
	r->ops_pending--;
	if (type == WR_ADD && c->status != IBV_WC_SUCCESS) {
		/* never on the list: behave as software-held from now on */
		eng->st.errors++;
		tme_entry_gone(eng, r);
		if (r->state == R_CARD)
			tme_recv_back_to_sw(eng, r);
	} else if (type == WR_DEL && c->status == IBV_WC_SUCCESS) {
		tme_entry_gone(eng, r);
		if (r->state == R_CLAIM) {
			m = r->claim;
			r->claim = NULL;
			deliver(eng, r, m);
		} else if (r->state == R_CARD && (r->flags & RF_PEER_DEAD)) {
			recv_leave_queues(eng, r);
			r->peer = r->want_peer;
			tme_recv_finish(eng, r, TM_REQ_ERROR);
		} else if (r->state == R_CARD) { /* cancel confirmed */
			recv_leave_queues(eng, r);
			r->cancel_stamp = eng->clock++;
			eng->st.cancel_ok++;
			tme_recv_finish(eng, r, TM_REQ_CANCELLED);
		}
	} else if (type == WR_DEL) {
		/* consumed by a message whose completion came first */
		if (r->flags & RF_CANCEL_REQ)
			eng->st.cancel_late++;
	}
	tme_recv_try_done(eng, r);
}

static void recv_init(struct tm_recv *r, void *buf, size_t len,
		      struct ibv_mr *mr)
{
	r->status = TM_REQ_OK;
	memset(&r->env, 0, sizeof(r->env));
	r->msg_len = r->recv_len = 0;
	r->peer = UINT32_MAX;
	r->send_seq = 0;
	r->match_stamp = r->cancel_stamp = 0;
	r->on_card = 0;
	r->buf = buf;
	r->len = len;
	r->mr = mr;
	r->own_mr = 0;
	r->stage = -1;
	r->state = R_IDLE;
	r->ops_pending = 0;
	r->flags = 0;
	r->want_peer = TM_PEER_ANY;
	r->claim = NULL;
}

/*
 * The peer a receive names died: nothing more comes from it.  A
 * software-held receive fails at once; a card-held one once the card
 * confirms its DEL (a message that took the entry first is delivered).
 */
void tme_recv_peer_dead(struct tm_engine *eng, struct tm_peer *p)
{
	struct tm_recv *r;

	while (!ucs_list_is_empty(&p->recvq)) {
		r = ucs_list_head(&p->recvq, struct tm_recv, peer_link);
		recv_unwatch(eng, r);
		if (r->state == R_SW) {
			recv_leave_queues(eng, r);
			r->peer = p->id;
			tme_recv_finish(eng, r, TM_REQ_ERROR);
		} else if (r->state == R_CARD) {
			r->flags |= RF_PEER_DEAD;
			if (!(r->flags & RF_DEL_POSTED)) {
				r->flags |= RF_DEL_POSTED;
				tme_op_decide(eng, WR_DEL, r);
			}
		}
	}
}

int tm_engine_irecv(struct tm_engine *eng, struct tm_recv *r, uint32_t ctx,
		    int32_t src, int32_t tag, void *buf, size_t len,
		    struct ibv_mr *mr)
{
	return tm_engine_irecv_from(eng, r, ctx, src, tag, TM_PEER_ANY, buf,
				    len, mr);
}

int tm_engine_irecv_from(struct tm_engine *eng, struct tm_recv *r,
			 uint32_t ctx, int32_t src, int32_t tag, uint32_t peer,
			 void *buf, size_t len, struct ibv_mr *mr)
{
	struct tm_mq_msg *q;
	uint64_t rtag, mask;
	int rc;

	if (ctx > TM_MAX_CTX || (src != TM_ANY_SRC &&
	    (src < 0 || (uint32_t)src > TM_MAX_SRC)) ||
	    (peer != TM_PEER_ANY && (peer >= eng->npeers || src == TM_ANY_SRC)))
		return TM_ERR_RANGE;
	if (eng->fatal)
		return eng->fatal;
	tme_drain(eng);
	recv_init(r, buf, len, mr);
	r->want_peer = peer;
	r->post_stamp = eng->clock++;
	eng->st.recv_posted++;
	tm_tag_recv(ctx, src, tag, &rtag, &mask);
	q = tm_mq_find_msg(&eng->mq, rtag, mask);
	if (q) {
		tm_mq_msg_remove(&eng->mq, q);
		eng->st.sw_matched_uq++;
		deliver(eng, r, ucs_container_of(q, struct tm_msg, mq));
		goto out;
	}
	if (peer != TM_PEER_ANY && eng->peers[peer]->dead) {
		/* what it sent before dying was looked at above */
		r->peer = peer;
		tme_recv_finish(eng, r, TM_REQ_ERROR);
		goto out;
	}
	rc = tme_recv_place(eng, r, ctx, rtag, mask);
	if (rc != TM_OK)
		return rc;
	if (peer != TM_PEER_ANY)
		recv_watch(eng, r);
out:
	tme_flush_work(eng);
	tme_fire_done(eng);
	return TM_OK;
}

int tm_engine_cancel_recv(struct tm_engine *eng, struct tm_recv *r)
{
	if (eng->fatal)
		return eng->fatal;
	tme_drain(eng);
	if (r->state == R_SW) {
		recv_leave_queues(eng, r);
		r->cancel_stamp = eng->clock++;
		eng->st.cancel_ok++;
		tme_recv_finish(eng, r, TM_REQ_CANCELLED);
	} else if (r->state == R_CARD) {
		r->flags |= RF_CANCEL_REQ;
		if (!(r->flags & RF_DEL_POSTED)) {
			r->flags |= RF_DEL_POSTED;
			tme_op_decide(eng, WR_DEL, r);
		}
	}
	tme_flush_work(eng);
	tme_fire_done(eng);
	return TM_OK;
}

int tm_engine_imrecv(struct tm_engine *eng, struct tm_recv *r,
		     struct tm_msg *msg, void *buf, size_t len,
		     struct ibv_mr *mr)
{
	if (!msg)
		return TM_ERR_INVALID;
	if (eng->fatal)
		return eng->fatal;
	tme_drain(eng);
	recv_init(r, buf, len, mr);
	r->post_stamp = eng->clock++;
	deliver(eng, r, msg);
	tme_flush_work(eng);
	tme_fire_done(eng);
	return TM_OK;
}

void tme_msg_free(struct tm_engine *eng, struct tm_msg *m)
{
	msg_free(eng, m);
}
