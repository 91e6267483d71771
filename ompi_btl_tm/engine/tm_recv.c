/*
 * tm_recv.c - the receive state machine.  Contract: tm_recv.h.
 */
#include <stdlib.h>
#include <string.h>
#include "engine/tm_offload.h"
#include "engine/tm_recv.h"
#include "engine/tm_reply.h"
#include "engine/tm_rx.h"
#include "engine/tm_tx.h"
#include "engine/tm_umem.h"
#include "engine/tm_work.h"

int tme_recv_init(struct tm_engine *eng)
{
	ucs_list_head_init(&eng->recv.all_msgs);
	ucs_list_head_init(&eng->recv.msg_free);
	eng->recv.copy_max = eng->x.cfg.unexpected_mem;
	eng->recv.msg_pool = calloc(eng->x.plain.n,
				    sizeof(*eng->recv.msg_pool));
	return eng->recv.msg_pool ? TM_OK : TM_ERR_NO_MEMORY;
}

void tme_recv_cleanup(struct tm_engine *eng)
{
	struct tm_msg *m, *mt;

	if (eng->recv.all_msgs.next) {
		ucs_list_for_each_safe(m, mt, &eng->recv.all_msgs, all)
			if (m->plain < 0)
				free(m);
		ucs_list_for_each_safe(m, mt, &eng->recv.msg_free, all)
			free(m);
	}
	free(eng->recv.msg_pool);
}

/* The arrival hook (tests only: tm_engine_test.h). */
static void report_arrival(struct tm_xport *x, uint64_t tag, uint32_t app,
			   uint32_t peer, uint64_t len, uint64_t stamp,
			   int on_card)
{
	struct tm_arrival a;

	if (!x->test.arrival_hook)
		return;
	tme_env_from_tag(&a.env, tag);
	a.peer = peer;
	a.send_seq = app & TM_APP_SEQ_MASK;
	a.len = len;
	a.stamp = stamp;
	a.on_card = on_card;
	x->test.arrival_hook(x->test.hook_arg, &a);
}

/* r's DEL, once: its list op names r until the op's result comes. */
static void recv_del(struct tm_xport *x, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	if (q->flags & RF_DEL_POSTED)
		return;
	q->flags |= RF_DEL_POSTED;
	q->ops_pending++;
	tmx_op_decide(x, WR_DEL, &q->t);
}

/* ---- unexpected messages -------------------------------------------- */

/*
 * The steps of a delivery by software (deliver, and deliver_plain's fast
 * form of it).  Step: r (out of the queues) takes a message's envelope.
 */
static inline void take_env(struct tm_recv *r, uint64_t tag, uint32_t app,
			    uint32_t peer, uint64_t stamp, uint64_t len)
{
	tme_env_from_tag(&r->env, tag);
	r->peer = peer;
	r->send_seq = app & TM_APP_SEQ_MASK;
	r->match_stamp = stamp;
	r->msg_len = len;
	r->on_card = 0;
	tme_rstate(rp(r), R_IDLE); /* out of the queues; finished below */
}

/* Step: an eager message's outcome for r, and how much of it r takes. */
static inline int eager_fit(struct tm_recv *r)
{
	r->recv_len = r->msg_len < r->b.len ? r->msg_len : r->b.len;
	return r->msg_len > r->b.len ? TM_REQ_TRUNCATED : TM_REQ_OK;
}

/* Step: an eager message's payload into r (its ACK first if it asks for
 * one); r's outcome.  The payload is r->msg_len bytes at data. */
static inline int take_eager(struct tm_engine *eng, struct tm_recv *r,
			     uint32_t app, const uint8_t *data)
{
	int status = eager_fit(r);

	if (app & TM_APP_SYNC)
		tme_recv_reply(eng, r, TX_ACK);
	memcpy(r->b.buf, data, r->recv_len);
	return status;
}

/* Delivers unexpected message m into receive r (which left the queues). */
static void deliver(struct tm_engine *eng, struct tm_recv *r, struct tm_msg *m)
{
	struct tme_recv *q = rp(r);
	int status;

	take_env(r, m->tag, m->app, m->peer, m->stamp, m->len);
	ucs_list_del(&m->all);
	if (m->rndv) {
		memcpy(q->hdr, m->hdr, sizeof(q->hdr));
		tme_msg_free(eng, m);
		tme_sw_rndv_start(eng, r, r->msg_len);
		return;
	}
	status = take_eager(eng, r, m->app, m->data);
	tme_msg_free(eng, m);
	tme_recv_finish(eng, r, status);
}

/* r names a peer: the keepalive watches it (tme_keepalive_scan finds it
 * among the posted receives and stamps it: no clock read, no list here). */
static inline void recv_watch(struct tm_engine *eng, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	q->wait_ns = 0;
	q->flags |= RF_WATCHED;
	eng->send.nwatched++;
	tme_pend(eng, TM_PEND_WAIT);
}

/* Inline: a step of the fast path (recv_leave_queues) for a receive
 * naming its peer, every MPI receive with a source. */
static inline __attribute__((always_inline)) void
recv_unwatch(struct tm_engine *eng, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	if (!(q->flags & RF_WATCHED))
		return;
	q->flags &= ~RF_WATCHED;
	eng->send.nwatched--;
}

/* Step: r leaves the watch and the small list (a receive in no FIFO). */
static inline __attribute__((always_inline)) void
recv_leave_small(struct tm_engine *eng, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	/* the flags first: a card-held receive naming no peer (the common
	 * case) is in neither list, and costs no call */
	if (q->flags & RF_WATCHED)
		recv_unwatch(eng, r);
	if (q->flags & RF_SMALL)
		tme_small_del(eng, r);
}

/* Step: r leaves the watch, and the small list or its FIFO. */
static inline __attribute__((always_inline)) void
recv_leave_lists(struct tm_engine *eng, struct tm_recv *r)
{
	recv_leave_small(eng, r);
	if (rp(r)->flags & RF_SWQ)
		tme_swq_del(eng, r);
}

/* Inline: a step of the fast paths (recv_fast, plain_fast) as of the slow
 * ones. */
static inline __attribute__((always_inline)) void
recv_leave_queues(struct tm_engine *eng, struct tm_recv *r)
{
	recv_leave_lists(eng, r);
	tm_mq_recv_remove(&eng->mq, &rp(r)->mq);
}

/*
 * An unexpected message takes the earliest posted receive that accepts it.
 * A card-held receive is claimed: DEL it and complete when the card
 * confirms (the DEL cannot fail: see the contract).
 */
static void handle_unexpected_msg(struct tm_engine *eng, struct tm_msg *m,
				  struct tm_mq_recv *mq)
{
	struct tm_recv *r;

	if (!mq) {
		/* a message that cannot be queued cannot be matched: stop
		 * rather than lose it (it stays on all_msgs) */
		if (tm_mq_msg_add(&eng->mq, &m->mq, m->tag, m->stamp) != TM_OK)
			tmx_fatal(&eng->x, TM_ERR_NO_MEMORY);
		else
			m->in_uq = 1; /* a CANCEL_REQ may still withdraw it */
		return;
	}
	r = rpub(ucs_container_of(mq, struct tme_recv, mq));
	recv_leave_queues(eng, r);
	if (rp(r)->state == R_SW) {
		eng->x.st.unexp_to_sw_recv++;
		deliver(eng, r, m);
		return;
	}
	eng->x.st.unexp_claimed++;
	rp(r)->claim = m;
	recv_del(&eng->x, r);
	tme_rstate(rp(r), R_CLAIM);
}

/*
 * The length of a rendezvous request: the metadata's 64 bits when it came
 * and agrees with the RVH (which saturates at 2^32 - 1), else the RVH's.
 */
static uint64_t rndv_len(struct tm_xport *x, const uint8_t *buf,
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
		x->st.malformed++;
		return len;
	}
	return full;
}

/*
 * An eager message a software-held receive takes at once (small
 * receives, offload off, no card): the steps of handle_unexpected_msg and
 * deliver, from where it landed and with no tm_msg: one copy, no
 * allocation, and the plain buffer goes back when this returns (0).
 */
static int deliver_plain(struct tm_engine *eng, struct tm_recv *r,
			 const uint8_t *buf, uint64_t tag, uint32_t plen,
			 const struct tm_cqe *c)
{
	uint32_t app = be32toh(((const struct ibv_tmh *)buf)->app_ctx);
	uint32_t peer = tmx_peer_of_qpn(&eng->x, c->qp_num);
	uint64_t stamp = eng->clock++;

	report_arrival(&eng->x, tag, app, peer, plen, stamp, 0);
	recv_leave_queues(eng, r);
	eng->x.st.unexp_to_sw_recv++;
	take_env(r, tag, app, peer, stamp, plen);
	tme_recv_finish(eng, r, take_eager(eng, r, app, buf + TMH_LEN));
	return 0;
}

/*
 * An unexpected message that no software-held receive takes at once: a
 * copy (or its plain buffer) on the unexpected queue, or a claim on the
 * card-held receive that wants it, or a rendezvous.  Out of line: the
 * common arrival (deliver_plain) keeps a small frame.
 */
static __attribute__((noinline)) int
unexpected_keep(struct tm_engine *eng, uint8_t *buf, uint32_t idx,
		const struct tm_cqe *c, uint64_t tag, struct tm_mq_recv *want)
{
	const struct ibv_tmh *tmh = (const void *)buf;
	int rndv = tmh->opcode == IBV_TMH_RNDV, held;
	uint32_t plen = 0;
	struct tm_msg *m = NULL;

	if (!rndv && c->byte_len >= TMH_LEN)
		plen = c->byte_len - TMH_LEN;
	if (!tmx_fault(&eng->x, TM_SITE_ALLOC_MSG))
		m = tme_msg_alloc(eng, plen);
	if (m) {
		m->data = (uint8_t *)(m + 1);
	} else {
		/* no copy: the message keeps its plain buffer until it is
		 * received, and the card has one buffer less meanwhile */
		m = &eng->recv.msg_pool[idx];
		m->data = buf + TMH_LEN;
		tme_msg_hold(eng, m, idx);
	}
	m->tag = tag;
	m->app = be32toh(tmh->app_ctx);
	m->peer = tmx_peer_of_qpn(&eng->x, c->qp_num);
	m->rndv = rndv;
	m->in_uq = 0;
	m->len = rndv ? rndv_len(&eng->x, buf, c->byte_len) : plen;
	if (rndv)
		memcpy(m->hdr, buf, TMH_LEN + RVH_LEN);
	else if (m->plain < 0)
		memcpy(m->data, buf + TMH_LEN, plen);
	m->stamp = eng->clock++;
	ucs_list_add_tail(&eng->recv.all_msgs, &m->all);
	report_arrival(&eng->x, m->tag, m->app, m->peer, m->len, m->stamp, 0);
	held = m->plain >= 0; /* m may be gone after the next line */
	handle_unexpected_msg(eng, m, want);
	return held;
}

/*
 * An unexpected tagged message in a plain buffer: matched at once by the
 * software-held receive that wants it (deliver_plain: from where it
 * landed), else kept (unexpected_keep).  1: the message holds on to its
 * plain buffer.  Out of line: plain_fast's cases take the same steps
 * with no tests.
 */
static __attribute__((noinline)) int
on_unexpected_slow(struct tm_engine *eng, uint8_t *buf, uint32_t idx,
		   const struct tm_cqe *c)
{
	const struct ibv_tmh *tmh = (const void *)buf;
	uint64_t tag = be64toh(tmh->tag);
	struct tm_mq_recv *want;

	tmx_count_unexpected(&eng->x);
	want = tm_mq_find_recv(&eng->mq, tag);
	if (want && tmh->opcode != IBV_TMH_RNDV && c->byte_len >= TMH_LEN &&
	    ucs_container_of(want, struct tme_recv, mq)->state == R_SW)
		return deliver_plain(eng, rpub(ucs_container_of(
				     want, struct tme_recv, mq)), buf, tag,
				     c->byte_len - TMH_LEN, c);
	return unexpected_keep(eng, buf, idx, c, tag, want);
}

/*
 * The common arrival: an eager message for the first software-held
 * receive of the lazy FIFO (no bucket yet), neither synchronous nor for
 * a receive in a FIFO or holding a registration, from a peer in the
 * qpn cache, with no test hook.  deliver_plain's steps less their tests,
 * the copy last; no frame.  Anything else: on_unexpected_slow.
 */
int tme_on_unexpected(struct tm_engine *eng, uint8_t *buf, uint32_t idx,
		      const struct tm_cqe *c)
{
	const struct ibv_tmh *tmh = (const void *)buf;
	uint64_t tag = be64toh(tmh->tag);
	uint32_t app = be32toh(tmh->app_ctx);
	uint32_t peer = tmx_peer_cached(&eng->x, c->qp_num);
	struct tme_recv *q;
	struct tm_recv *r;

	if (eng->mq.nbucketed || !eng->mq.nrecvs)
		return on_unexpected_slow(eng, buf, idx, c);
	q = ucs_list_head(&eng->mq.lazy, struct tme_recv, mq.link);
	if (!tm_tag_accepts(q->mq.tag, q->mq.mask, tag) ||
	    tmh->opcode != IBV_TMH_EAGER || c->byte_len < TMH_LEN ||
	    q->state != R_SW || (q->flags & RF_SWQ) || q->own_mr ||
	    (app & TM_APP_SYNC) || eng->x.test.arrival_hook ||
	    peer == UINT32_MAX)
		return on_unexpected_slow(eng, buf, idx, c);
	r = rpub(q);
	tmx_count_unexpected(&eng->x);
	recv_leave_small(eng, r);
	tm_mq_recv_remove_lazy(&eng->mq, &q->mq);
	eng->x.st.unexp_to_sw_recv++;
	take_env(r, tag, app, peer, eng->clock++, c->byte_len - TMH_LEN);
	tme_recv_outcome(eng, r, eager_fit(r));
	if (!q->ops_pending)
		tme_recv_queue_done(eng, r);
	memcpy(r->b.buf, buf + TMH_LEN, r->recv_len);
	return 0;
}

/* ---- the card's completions ------------------------------------------ */

/*
 * The steps of a card-held receive's completion.  The slow path
 * (on_card_match, on_card_data) and the fast one (recv_fast) are built
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
		handle_unexpected_msg(eng, lost,
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
	tme_recv_queue_done(eng, r); /* puts the stage back: nothing runs
				      * before the copy below */
	if (staged)
		memcpy(r->b.buf, from, r->recv_len);
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
			deliver(eng, r, m);
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

static void recv_init(struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	r->status = TM_REQ_OK;
	memset(&r->env, 0, sizeof(r->env));
	r->msg_len = r->recv_len = 0;
	r->peer = UINT32_MAX;
	r->send_seq = 0;
	r->match_stamp = r->cancel_stamp = 0;
	r->on_card = 0;
	tmx_tctx_init(&q->t);
	q->own_mr = 0;
	q->state = R_IDLE;
	q->ops_pending = 0;
	q->flags = 0;
	q->want_peer = TM_PEER_ANY;
	q->claim = NULL;
}

/*
 * The peer a receive names died: nothing more comes from it.  A
 * software-held receive fails at once; a card-held one once the card
 * confirms its DEL (a message that took the entry first is delivered).
 */
struct dead_look {
	uint32_t peer;
	ucs_list_link_t list; /* tme_recv.peer_link, oldest first */
};

/* tme_recv_peer_dead's look at one posted receive: those naming the dead
 * peer join a list in post order, inserted from its tail (the queues are
 * walked FIFO by FIFO, each in post order, so most go last). */
static void dead_recv(struct tm_mq_recv *m, void *arg)
{
	struct tme_recv *q = ucs_container_of(m, struct tme_recv, mq);
	struct dead_look *l = arg;
	ucs_list_link_t *at = l->list.prev;

	if (!(q->flags & RF_WATCHED) || q->want_peer != l->peer)
		return;
	while (at != &l->list &&
	       ucs_container_of(at, struct tme_recv, peer_link)->mq.seq >
	       q->mq.seq)
		at = at->prev;
	ucs_list_insert_after(at, &q->peer_link);
}

void tme_recv_peer_dead(struct tm_engine *eng, uint32_t peer)
{
	struct dead_look look = { .peer = peer };
	struct tm_recv *r;

	if (!eng->send.nwatched)
		return;
	ucs_list_head_init(&look.list);
	tm_mq_for_each_recv(&eng->mq, dead_recv, &look);
	while (!ucs_list_is_empty(&look.list)) {
		r = recv_head(&look.list, peer_link);
		ucs_list_del(&rp(r)->peer_link);
		recv_unwatch(eng, r);
		if (rp(r)->state == R_SW) {
			recv_leave_queues(eng, r);
			r->peer = peer;
			tme_recv_finish(eng, r, TM_REQ_ERROR);
		} else if (rp(r)->state == R_CARD) {
			rp(r)->flags |= RF_PEER_DEAD;
			recv_del(&eng->x, r);
		}
	}
}

/* Step: r starts, stamped in post order (inline: every post). */
static inline void recv_start(struct tm_engine *eng, struct tm_recv *r)
{
	recv_init(r);
	rp(r)->want_peer = r->from;
	r->post_stamp = eng->clock++;
	eng->x.st.recv_posted++;
}

/* Step: r, which stays in software, joins the queues and, naming a
 * peer, the keepalive's watch (cannot fail). */
static inline void recv_wait_sw(struct tm_engine *eng, struct tm_recv *r)
{
	tme_place_sw(eng, r, r->tag, r->mask);
	if (r->from != TM_PEER_ANY)
		recv_watch(eng, r);
}

static int recv_post(struct tm_engine *eng, struct tm_recv *r)
{
	uint64_t rtag = r->tag, mask = r->mask;
	uint32_t peer = r->from;
	struct tm_mq_msg *m;
	int rc;

	recv_start(eng, r);
	m = tm_mq_find_msg(&eng->mq, rtag, mask);
	if (m) {
		tm_mq_msg_remove(&eng->mq, m);
		eng->x.st.sw_matched_uq++;
		deliver(eng, r, ucs_container_of(m, struct tm_msg, mq));
		return TM_OK;
	}
	if (peer != TM_PEER_ANY && eng->x.ndead && eng->x.peers[peer]->dead) {
		/* what it sent before dying was looked at above */
		r->peer = peer;
		tme_recv_finish(eng, r, TM_REQ_ERROR);
		return TM_OK;
	}
	if (tme_recv_stays_sw(eng, r)) {
		recv_wait_sw(eng, r);
		return TM_OK;
	}
	rc = tme_recv_place(eng, r, tm_tag_ctx(rtag), rtag, mask);
	if (rc != TM_OK)
		return rc;
	if (peer != TM_PEER_ANY)
		recv_watch(eng, r);
	return TM_OK;
}

static void recv_cancel(struct tm_engine *eng, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	if (q->state == R_SW) {
		recv_leave_queues(eng, r);
		r->cancel_stamp = eng->clock++;
		eng->x.st.cancel_ok++;
		tme_recv_finish(eng, r, TM_REQ_CANCELLED);
	} else if (q->state == R_CARD) {
		q->flags |= RF_CANCEL_REQ;
		recv_del(&eng->x, r);
	}
}

static void recv_imrecv(struct tm_engine *eng, struct tm_recv *r,
			struct tm_msg *msg)
{
	recv_init(r);
	r->post_stamp = eng->clock++;
	deliver(eng, r, msg);
}

/* ---- entry points (tm_engine.h) ------------------------------------ */

static __attribute__((noinline)) int
post_recv_slow(struct tm_engine *eng, struct tm_recv *r)
{
	int rc;

	if (eng->x.fatal)
		return eng->x.fatal;
	/* Only a receive bound for the card needs what the CQs hold first
	 * (the count its ADD carries).  One that stays in software cannot be
	 * passed: a message still in a CQ arrives after it, and its
	 * completion finds it in the shadow queue like any earlier one.  Not
	 * while ADDs wait in the chain either: a poll would let the card look
	 * at arrivals before it has them (tm_ops.h); the ADD then carries an
	 * older count, which the sync rule covers. */
	if (!tme_len_stays_sw(&eng->x, r->len) && !eng->x.ops.chain_n)
		tmx_drain(&eng->x);
	rc = recv_post(eng, r);
	if (rc != TM_OK)
		return rc;
	tme_call_end(eng);
	return TM_OK;
}

/*
 * recv_post's steps less its tests, for a receive that stays in software
 * with no unexpected message, no dead peer and nothing for tme_call_end
 * to do, before or after (the steps queue no work and no callback).  A
 * leaf with no frame: the rest is post_recv_slow's.
 */
int tm_engine_post_recv(struct tm_engine *eng, struct tm_recv *r)
{
	if (!tm_tag_recv_ok(r->tag, r->mask) ||
	    (r->from != TM_PEER_ANY &&
	     (r->from >= eng->x.npeers || !(r->mask & TM_MASK_SRC))))
		return TM_ERR_RANGE;
	if (eng->x.fatal | eng->mq.nmsgs | eng->x.ndead ||
	    !tme_recv_stays_sw(eng, r) || !tme_fire_now_ok(eng))
		return post_recv_slow(eng, r);
	recv_start(eng, r);
	recv_wait_sw(eng, r);
	return TM_OK;
}

int tm_engine_cancel_recv(struct tm_engine *eng, struct tm_recv *r)
{
	if (eng->x.fatal)
		return eng->x.fatal;
	tmx_drain(&eng->x);
	recv_cancel(eng, r);
	tme_call_end(eng);
	return TM_OK;
}

int tm_engine_post_mrecv(struct tm_engine *eng, struct tm_recv *r,
			 struct tm_msg *msg)
{
	if (!msg)
		return TM_ERR_INVALID;
	if (eng->x.fatal)
		return eng->x.fatal;
	tmx_drain(&eng->x);
	recv_imrecv(eng, r, msg);
	tme_call_end(eng);
	return TM_OK;
}

