/*
 * tm_send.c - send requests, the replies they wait for, keepalive.
 * Contract: tm_send.h.
 */
#include <stdlib.h>
#include <string.h>
#include "engine/tm_rx.h"
#include "engine/tm_send.h"
#include "engine/tm_tx.h"
#include "engine/tm_work.h"

/* The key of a send waiting for its reply: who it went to, and its seq. */
static uint64_t send_key(uint32_t peer, uint32_t seq)
{
	return ((uint64_t)peer << 32) | seq;
}

int tme_send_init(struct tm_engine *eng)
{
	ucs_list_head_init(&eng->send.wait_peers);
	eng->send.ka_ns = (uint64_t)(eng->x.cfg.keepalive_ms ?
				     eng->x.cfg.keepalive_ms :
				     TM_KEEPALIVE_MS_DEFAULT) * 1000000ULL;
	eng->send.sends = kh_init(tm_sends);
	return eng->send.sends ? TM_OK : TM_ERR_NO_MEMORY;
}

void tme_send_cleanup(struct tm_engine *eng)
{
	uint32_t i;

	if (eng->peers)
		for (i = 0; i < eng->x.npeers; i++)
			free(eng->peers[i]);
	free(eng->peers);
	if (eng->send.sends)
		kh_destroy(tm_sends, eng->send.sends);
}

int tme_send_add_peer(struct tm_engine *eng, uint32_t id)
{
	struct tme_peer **np, *p;

	np = realloc(eng->peers, sizeof(*np) * (id + 1));
	if (!np)
		return TM_ERR_NO_MEMORY;
	eng->peers = np;
	p = calloc(1, sizeof(*p));
	if (!p)
		return TM_ERR_NO_MEMORY;
	p->id = id;
	ucs_list_head_init(&p->waitq);
	np[id] = p;
	return TM_OK;
}

/* ---- sends waiting for a reply (FIN/ACK) ---------------------------- */

/*
 * s waits for its FIN/ACK from now on: findable by (peer, seq) when the
 * reply comes, and in its peer's FIFO (oldest first) so that the keepalive
 * sees how long the peer has been silent and a peer failure finds them all.
 */
int tme_wait_reply_start(struct tm_engine *eng, struct tm_send *s)
{
	struct tme_send *q = sp(s);
	struct tme_peer *p = eng->peers[s->peer];
	khiter_t it;
	int ret;

	it = kh_put(tm_sends, eng->send.sends, send_key(s->peer, s->seq), &ret);
	if (ret < 0)
		return TM_ERR_NO_MEMORY;
	kh_value(eng->send.sends, it) = s;
	q->waiting |= S_WAIT_REPLY;
	q->wait_ns = tmx_now_ns();
	if (ucs_list_is_empty(&p->waitq))
		ucs_list_add_tail(&eng->send.wait_peers, &p->wait_link);
	tme_pend(eng, TM_PEND_WAIT);
	ucs_list_add_tail(&p->waitq, &q->wait_link);
	return TM_OK;
}

void tme_wait_reply_end(struct tm_engine *eng, struct tm_send *s)
{
	struct tme_send *q = sp(s);
	struct tme_peer *p = eng->peers[s->peer];
	khiter_t it;

	if (!(q->waiting & S_WAIT_REPLY))
		return;
	q->waiting &= ~S_WAIT_REPLY;
	it = kh_get(tm_sends, eng->send.sends, send_key(s->peer, s->seq));
	if (it != kh_end(eng->send.sends) && kh_value(eng->send.sends, it) == s)
		kh_del(tm_sends, eng->send.sends, it);
	ucs_list_del(&q->wait_link);
	if (ucs_list_is_empty(&p->waitq))
		ucs_list_del(&p->wait_link);
}

/* The send's item is done: posted (EAGER), its WR completed (RNDV), or
 * never to be posted (TMX_ABORTED: its peer died). */
static void send_tx_done(struct tm_tx *tx, int status)
{
	struct tm_engine *eng = ucs_container_of(tx->x, struct tm_engine, x);
	struct tm_send *s = tx->arg;

	sp(s)->waiting &= ~S_WAIT_CQE;
	if (status != IBV_WC_SUCCESS) {
		s->status = TM_REQ_ERROR;
		tme_wait_reply_end(eng, s);
	}
	tme_send_try_done(eng, s);
}

void tme_send_peer_dead(struct tm_engine *eng, uint32_t peer)
{
	struct tme_peer *p = eng->peers[peer];
	struct tm_send *s;

	while (!ucs_list_is_empty(&p->waitq)) {
		s = send_head(&p->waitq, wait_link);
		s->status = TM_REQ_ERROR;
		tme_wait_reply_end(eng, s);
		tme_send_try_done(eng, s);
	}
}

struct ka_look {
	struct tm_engine *eng;
	uint64_t now;
};

/* tme_keepalive_scan's look at one posted receive. */
static void ka_recv(struct tm_mq_recv *m, void *arg)
{
	struct tme_recv *q = ucs_container_of(m, struct tme_recv, mq);
	struct ka_look *l = arg;
	uint64_t ka = l->eng->send.ka_ns;
	struct tmx_peer *xp;

	if (!(q->flags & RF_WATCHED))
		return;
	if (!q->wait_ns) {
		q->wait_ns = l->now;
		return;
	}
	xp = l->eng->x.peers[q->want_peer];
	if (l->now - q->wait_ns >= ka && l->now - xp->ka_last_ns >= ka)
		tmx_keepalive(&l->eng->x, xp, l->now);
}

/*
 * Probes each peer whose oldest send has waited ka_ns for its reply, or
 * that a posted receive naming it has waited ka_ns for, at most once per
 * ka_ns per peer.  Looks at most every ka_ns / 4, and runs only every
 * TM_KA_SCAN_CALLS-th progress call (tme_keepalive_tick), so an engine
 * with receives naming their peers (every MPI receive with a source) pays
 * a counter per progress call, not a clock read, and a receive costs its
 * post a count, no list: the look walks the posted receives (O(posted)
 * per ka_ns / 4).  A receive is stamped when a look first sees it
 * (posting it reads no clock): its peer is probed between ka_ns and
 * ka_ns * 1.5 (plus TM_KA_SCAN_CALLS calls) after its post.
 */
void tme_keepalive_scan(struct tm_engine *eng)
{
	uint64_t now, ka = eng->send.ka_ns;
	struct ka_look look;
	struct tmx_peer *xp;
	struct tme_peer *p;

	eng->send.ka_calls = TM_KA_SCAN_CALLS - 1;
	if (ucs_list_is_empty(&eng->send.wait_peers) &&
	    !eng->send.nwatched) {
		eng->x.pending &= ~TM_PEND_WAIT;
		return;
	}
	now = tmx_now_ns();
	if (now < eng->send.ka_next_ns)
		return;
	eng->send.ka_next_ns = now + ka / 4;
	ucs_list_for_each(p, &eng->send.wait_peers, wait_link) {
		xp = eng->x.peers[p->id];
		if (now - sp(send_head(&p->waitq, wait_link))->wait_ns >= ka &&
		    now - xp->ka_last_ns >= ka)
			tmx_keepalive(&eng->x, xp, now);
	}
	if (eng->send.nwatched) {
		look.eng = eng;
		look.now = now;
		tm_mq_for_each_recv(&eng->mq, ka_recv, &look);
	}
}

/*
 * A probe naming peer found nothing.  Probes leave no state to scan, so
 * the caller's own calls pace the keepalive: once they have found nothing
 * for ka_ns without a pause longer than ka_ns, the peer is probed (at most
 * once per ka_ns), and when it has died the probe says so.
 */
int tme_probe_missed(struct tm_engine *eng, uint32_t peer)
{
	struct tme_peer *p;
	struct tmx_peer *xp;
	uint64_t now, ka = eng->send.ka_ns;

	if (peer == TM_PEER_ANY)
		return TM_ERR_NOT_FOUND;
	p = eng->peers[peer];
	xp = eng->x.peers[peer];
	if (xp->dead)
		return TM_ERR_PEER_DEAD;
	now = tmx_now_ns();
	if (now - p->probe_last_ns > ka)
		p->probe_since_ns = now;
	p->probe_last_ns = now;
	if (now - p->probe_since_ns >= ka && now - xp->ka_last_ns >= ka)
		tmx_keepalive(&eng->x, xp, now);
	return TM_ERR_NOT_FOUND;
}

void tme_send_on_reply(struct tm_engine *eng, uint32_t peer, uint32_t app,
		       int opcode)
{
	struct tm_send *s;
	khiter_t it;

	if (opcode == IBV_TMH_FIN)
		eng->x.st.fins_recv++;
	it = kh_get(tm_sends, eng->send.sends,
		    send_key(peer, app & TM_APP_SEQ_MASK));
	if (it == kh_end(eng->send.sends)) {
		eng->x.st.fin_unknown++;
		return;
	}
	s = kh_value(eng->send.sends, it);
	if (opcode == IBV_TMH_FIN && (app & TM_APP_FIN_ERR))
		s->status = TM_REQ_ERROR;
	sp(s)->cflags |= S_REPLIED; /* matched: a cancel from now on is late */
	tme_wait_reply_end(eng, s);
	tme_send_try_done(eng, s);
}

/* send_start_rest's answer: s is done, and the call has nothing else to do
 * (tme_call_end would only fire its callback): tm_engine_post_send tells
 * the caller instead (TM_DONE) */
#define SEND_FIRE 2

/*
 * The eager fast path: nothing queued ahead on a live peer and a
 * send-queue entry free (tmx_eager_ready): the data is out of the
 * caller's buffer when the post returns, so the send is done (or waits for
 * its ACK only), with no tx allocated.  0: take the queue; SEND_FIRE: done,
 * with nothing else pending (tme_fire_now_ok): its callback is not queued.
 */
static inline __attribute__((always_inline)) int
eager_now(struct tm_engine *eng, struct tm_send *s)
{
	struct tme_send *q = sp(s);

	if (!(q->app_ctx & TM_APP_SYNC)) {
		if (!tmx_eager_post(&eng->x, s->peer, q->tag, q->app_ctx,
				    q->buf, q->len))
			return 0;
	} else {
		/* the reply may come as soon as it is posted */
		if (!tmx_eager_ready(&eng->x, s->peer, q->len) ||
		    tme_wait_reply_start(eng, s) != TM_OK)
			return 0;
		if (!tmx_eager_post(&eng->x, s->peer, q->tag, q->app_ctx,
				    q->buf, q->len)) {
			tme_wait_reply_end(eng, s);
			return 0;
		}
	}
	eng->send.sends_waiting++;
	q->waiting &= ~S_WAIT_CQE;
	if (!q->waiting && tme_fire_now_ok(eng)) {
		tme_send_release(eng, s);
		return SEND_FIRE;
	}
	tme_send_try_done(eng, s);
	return 1;
}

/*
 * A standard eager send that goes out now with nothing else pending
 * (tme_fire_now_ok): eager_now's first step, done at post, and nothing
 * of s kept but what a later cancel reads (send_begin set it).  The
 * fields eager_now fills are for a send that waits; this one does not.
 */
static inline __attribute__((always_inline)) int
eager_done_now(struct tm_engine *eng, struct tm_send *s)
{
	return s->len <= eng->x.cfg.eager_limit &&
	       !(s->flags & TM_SEND_SYNC) && tme_fire_now_ok(eng) &&
	       tmx_eager_post(&eng->x, s->peer, s->tag, s->seq, s->buf,
			      s->len);
}

/* s's header (and data) into its item: TMH, or TMH+RVH+length. */
static void send_fill(struct tm_tx *tx, struct tm_send *s)
{
	struct tme_send *q = sp(s);
	struct ibv_rvh *rvh;
	struct tm_rndv_md *md;

	tx->done = send_tx_done;
	tx->arg = s;
	tx->key = s->seq;
	if (q->kind == TX_EAGER) {
		tmh_fill(tx->hdr, IBV_TMH_EAGER, q->app_ctx, q->tag);
		tx->hdr_len = TMH_LEN;
		tx->data = q->buf;
		tx->len = q->len;
		return;
	}
	tmh_fill(tx->hdr, IBV_TMH_RNDV, q->app_ctx, q->tag);
	rvh = (struct ibv_rvh *)(tx->hdr + TMH_LEN);
	rvh->va = htobe64((uintptr_t)q->buf);
	rvh->rkey = htobe32(q->mr->rkey);
	/* saturated: longer than any card buffer (tm_offload.c, refusal 3),
	 * so the card hands it to software, which reads the full length from
	 * the metadata */
	rvh->len = htobe32(q->len > UINT32_MAX ? UINT32_MAX : (uint32_t)q->len);
	md = (struct tm_rndv_md *)(tx->hdr + TMH_LEN + RVH_LEN);
	md->len = htobe64(q->len);
	tx->hdr_len = RNDV_HDR_LEN;
}

/* Step: s starts, with its sequence number on its peer, holding nothing. */
static inline void send_begin(struct tm_engine *eng, struct tm_send *s)
{
	struct tme_send *q = sp(s);

	s->status = TM_REQ_OK;
	s->seq = eng->peers[s->peer]->next_seq++ & TM_APP_SEQ_MASK;
	q->own_mr = 0;
	q->cflags = 0;
	q->waiting = 0;
}

/* A send (begun) that eager_done_now did not take: queued, or posted to
 * wait for its completion or reply. */
static int send_start_rest(struct tm_engine *eng, struct tm_send *s)
{
	struct tme_send *q = sp(s);
	uint32_t peer = s->peer;
	size_t len = s->len;
	struct tm_tx *tx;
	int ret, reply;

	/* A send takes no stamp: the completions in the CQs may wait for the
	 * next call.  An eager one drains only if the fast path found the
	 * send queue or the slots full, which retiring WRs may cure. */
	if (len > eng->x.cfg.eager_limit)
		tmx_drain(&eng->x);
	q->tag = s->tag;
	q->buf = s->buf;
	q->len = len;
	q->mr = s->mr;
	q->app_ctx = s->seq;
	q->waiting = S_WAIT_CQE;
	q->kind = len <= eng->x.cfg.eager_limit ? TX_EAGER : TX_RNDV;
	reply = q->kind == TX_RNDV || (s->flags & TM_SEND_SYNC);
	if (q->kind == TX_EAGER && (s->flags & TM_SEND_SYNC))
		q->app_ctx |= TM_APP_SYNC;
	if (q->kind == TX_RNDV) {
		q->app_ctx |= TM_APP_RNDV;
		if (!q->mr) {
			ret = tm_dev_mem_get(eng->x.dev, (void *)q->buf, len,
					     IBV_ACCESS_REMOTE_READ, &q->mr);
			if (ret != TM_OK)
				return ret;
			q->own_mr = 1;
		}
	}
	if (q->kind == TX_EAGER) {
		ret = eager_now(eng, s);
		if (!ret && tmx_drain(&eng->x))
			ret = eager_now(eng, s);
		if (ret)
			return ret == SEND_FIRE ? SEND_FIRE : TM_OK;
	}
	tx = tmx_tx_new(&eng->x, q->kind, peer);
	if (!tx) {
		if (q->own_mr)
			tm_dev_mem_put(eng->x.dev, q->mr);
		return TM_ERR_NO_MEMORY;
	}
	send_fill(tx, s);
	if (reply && tme_wait_reply_start(eng, s) != TM_OK) {
		tmx_tx_free(tx);
		if (q->own_mr)
			tm_dev_mem_put(eng->x.dev, q->mr);
		return TM_ERR_NO_MEMORY;
	}
	eng->send.sends_waiting++;
	/* a dead peer: completes TM_REQ_ERROR at once */
	tmx_tx_queue(&eng->x, tx);
	return TM_OK;
}

void tm_engine_send_detach(struct tm_engine *eng, const struct tm_send *from,
			   struct tm_send *s)
{
	struct tme_send *q = sp(s);

	(void)eng;
	*q = *sp((struct tm_send *)from);
	s->peer = from->peer;
	s->seq = from->seq;
	s->status = TM_REQ_OK;
	q->waiting = 0;
	q->cflags = 0;
	q->own_mr = 0;
	q->mr = NULL;
}

/* A send in the reply table (waiting for FIN/ACK/CANCEL_REP), or queued
 * on its peer and not yet posted. */
struct tm_send *tme_find_send(struct tm_engine *eng, uint32_t peer,
			      uint32_t seq)
{
	khiter_t it = kh_get(tm_sends, eng->send.sends, send_key(peer, seq));
	struct tm_tx *tx;

	if (it != kh_end(eng->send.sends))
		return kh_value(eng->send.sends, it);
	tx = tmx_tx_find_send(&eng->x, peer, seq);
	return tx ? tx->arg : NULL;
}

int tme_send_withdraw(struct tm_engine *eng, struct tm_send *s, int status)
{
	struct tm_tx *tx = tmx_tx_find_send(&eng->x, s->peer, s->seq);

	if (!tx || tx->arg != s)
		return 0;
	tmx_tx_withdraw(&eng->x, tx);
	s->status = status;
	sp(s)->waiting &= ~S_WAIT_CQE;
	tme_wait_reply_end(eng, s);
	tme_send_try_done(eng, s);
	return 1;
}

/* ---- sends ----------------------------------------------------------- */

static __attribute__((noinline)) int
post_send_rest(struct tm_engine *eng, struct tm_send *s)
{
	int rc = send_start_rest(eng, s);

	if (rc == SEND_FIRE)
		return TM_DONE;
	if (rc != TM_OK)
		return rc;
	tme_call_end(eng);
	return TM_OK;
}

/* The eager fast path (eager_done_now) in a small frame; the rest out of
 * line (post_send_rest). */
int tm_engine_post_send(struct tm_engine *eng, struct tm_send *s)
{
	if (s->peer >= eng->x.npeers)
		return TM_ERR_RANGE;
	if (eng->x.fatal)
		return eng->x.fatal;
	send_begin(eng, s);
	if (eager_done_now(eng, s))
		return TM_DONE;
	return post_send_rest(eng, s);
}

struct tm_send *tm_engine_find_send(struct tm_engine *eng, uint32_t peer,
				    uint32_t seq)
{
	return tme_find_send(eng, peer, seq);
}


