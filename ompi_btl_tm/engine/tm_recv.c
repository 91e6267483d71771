/*
 * tm_recv.c - the receive state machine: posting, unexpected messages,
 * cancels and dead peers (a card-held receive's completions:
 * tm_recv_card.c).  Contract: tm_recv.h.
 */
#include <stdlib.h>
#include <string.h>
#include "engine/tm_offload.h"
#include "engine/tm_recv.h"
#include "engine/tm_recv_steps.h"
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

/* ---- unexpected messages -------------------------------------------- */

/* Delivers unexpected message m into receive r (which left the queues). */
void tme_deliver(struct tm_engine *eng, struct tm_recv *r, struct tm_msg *m)
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

/*
 * An unexpected message takes the earliest posted receive that accepts it.
 * A card-held receive is claimed: DEL it and complete when the card
 * confirms (the DEL cannot fail: see the contract).
 */
void tme_handle_unexpected(struct tm_engine *eng, struct tm_msg *m,
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
		tme_deliver(eng, r, m);
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
 * receives, offload off, no card): the steps of tme_handle_unexpected and
 * tme_deliver, from where it landed and with no tm_msg: one copy, no
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
	tme_handle_unexpected(eng, m, want);
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
 * a receive in a FIFO (one a failed allocation left out of its bucket),
 * from a peer in the qpn cache, with no test hook.  deliver_plain's
 * steps less their tests, the copy last; no frame.  Anything else:
 * on_unexpected_slow.
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
	    q->state != R_SW || (q->flags & RF_SWQ) ||
	    (app & TM_APP_SYNC) || eng->x.test.arrival_hook ||
	    peer == UINT32_MAX)
		return on_unexpected_slow(eng, buf, idx, c);
	/* registered by the offload checklist: only a receive it sent to the
	 * card, which on coming back joins a FIFO */
	TME_ASSERT(!q->own_mr);
	r = rpub(q);
	tmx_count_unexpected(&eng->x);
	recv_leave_small(eng, r);
	tm_mq_recv_remove_lazy(&eng->mq, &q->mq);
	eng->x.st.unexp_to_sw_recv++;
	take_env(r, tag, app, peer, eng->clock++, c->byte_len - TMH_LEN);
	tme_recv_outcome(eng, r, eager_fit(r));
	/* no list op (never on the card) and no reply owed yet (not
	 * synchronous): tme_recv_try_done's tests hold */
	TME_ASSERT(!q->ops_pending);
	copy_payload(r->b.buf, buf + TMH_LEN, r->recv_len);
	tme_recv_fire(eng, r);
	return 0;
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
		tme_deliver(eng, r, ucs_container_of(m, struct tm_msg, mq));
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
	tme_deliver(eng, r, msg);
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

/* The end of a post (tme_call_end) that found work or callbacks queued:
 * out of line, so that tm_engine_post_recv needs no frame. */
static __attribute__((noinline)) int post_recv_end(struct tm_engine *eng)
{
	tme_call_end(eng);
	return TM_OK;
}

/*
 * recv_post's steps less its tests, for a receive that stays in software
 * with no unexpected message queued and no dead peer (the steps queue no
 * work and no callback).  A leaf with no frame: the rest is
 * post_recv_slow's, and the call's end post_recv_end's.
 */
int tm_engine_post_recv(struct tm_engine *eng, struct tm_recv *r)
{
	if (!tm_tag_recv_ok(r->tag, r->mask) ||
	    (r->from != TM_PEER_ANY &&
	     (r->from >= eng->x.npeers || !(r->mask & TM_MASK_SRC))))
		return TM_ERR_RANGE;
	if (eng->x.fatal | eng->mq.nmsgs | eng->x.ndead ||
	    !tme_recv_stays_sw(eng, r))
		return post_recv_slow(eng, r);
	recv_start(eng, r);
	recv_wait_sw(eng, r);
	if (!tme_fire_now_ok(eng))
		return post_recv_end(eng);
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

