/*
 * tm_send.c - send requests, the replies they wait for, and peer failure.
 *
 * Contract (argument: doc/DESIGN.md, "Sends" and "Dead peers"):
 *  - an eager send is posted from its slot at once when nothing is queued
 *    ahead (tm_tx.c), else queued on its peer; a rendezvous or synchronous
 *    send also waits for its FIN/ACK, findable by (peer, seq);
 *  - a send that waited keepalive_ms for its reply makes the engine post a
 *    signalled KEEPALIVE on that peer's QP (at most one per keepalive_ms
 *    per peer, looked at from tm_engine_progress) so that a dead receiver
 *    fails something;
 *  - any error completion on a peer's QP, or a transport error on a
 *    receive from it, marks the peer dead: every send waiting on it or
 *    queued for it, every queued read from it, completes TM_REQ_ERROR, and
 *    nothing is sent to it again.
 * Owns: sends (the reply table), wait_peers, sends_waiting, keepalive
 * pacing, tm_peer.waitq/dead/ka_*.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "engine/tm_engine_priv.h"

/* The key of a send waiting for its reply: who it went to, and its seq. */
static uint64_t send_key(uint32_t peer, uint32_t seq)
{
	return ((uint64_t)peer << 32) | seq;
}

/* ---- sends waiting for a reply (FIN/ACK) ---------------------------- */

/*
 * Keepalive pacing is in milliseconds, so the coarse clock will do; the
 * precise one is called on every progress while a send waits and cost a
 * third of the CPU in a bidirectional rendezvous benchmark.
 */
uint64_t tme_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * s waits for its FIN/ACK from now on: findable by (peer, seq) when the
 * reply comes, and in its peer's FIFO (oldest first) so that the keepalive
 * sees how long the peer has been silent and a peer failure finds them all.
 */
int tme_wait_reply_start(struct tm_engine *eng, struct tm_send *s)
{
	struct tm_peer *p = eng->peers[s->peer];
	khiter_t it;
	int ret;

	it = kh_put(tm_sends, eng->sends, send_key(s->peer, s->seq), &ret);
	if (ret < 0)
		return TM_ERR_NO_MEMORY;
	kh_value(eng->sends, it) = s;
	s->waiting |= S_WAIT_REPLY;
	s->wait_ns = tme_now_ns();
	if (ucs_list_is_empty(&p->waitq))
		ucs_list_add_tail(&eng->wait_peers, &p->wait_link);
	tme_pend(eng, TM_PEND_WAIT);
	ucs_list_add_tail(&p->waitq, &s->wait_link);
	return TM_OK;
}

void tme_wait_reply_end(struct tm_engine *eng, struct tm_send *s)
{
	struct tm_peer *p = eng->peers[s->peer];
	khiter_t it;

	if (!(s->waiting & S_WAIT_REPLY))
		return;
	s->waiting &= ~S_WAIT_REPLY;
	it = kh_get(tm_sends, eng->sends, send_key(s->peer, s->seq));
	if (it != kh_end(eng->sends) && kh_value(eng->sends, it) == s)
		kh_del(tm_sends, eng->sends, it);
	ucs_list_del(&s->wait_link);
	if (ucs_list_is_empty(&p->waitq))
		ucs_list_del(&p->wait_link);
}

/*
 * An error completion on the peer's QP: an RC QP in error never delivers
 * again, so no FIN/ACK will come and nothing queued can go.  Fail what
 * waits on it; WRs already posted complete flushed and fail their own
 * requests (on_send_cqe).
 */
void tme_peer_fail(struct tm_engine *eng, uint32_t peer)
{
	struct tm_peer *p;
	struct tm_send *s;
	struct tm_tx *tx;

	if (peer >= eng->npeers || eng->peers[peer]->dead)
		return;
	p = eng->peers[peer];
	p->dead = 1;
	eng->st.peer_failures++;
	while (!ucs_list_is_empty(&p->txq)) {
		tx = ucs_list_extract_head(&p->txq, struct tm_tx, link);
		eng->tx_queued--;
		tme_tx_abort(eng, tx);
	}
	while (!ucs_list_is_empty(&p->waitq)) {
		s = ucs_list_head(&p->waitq, struct tm_send, wait_link);
		s->status = TM_REQ_ERROR;
		tme_wait_reply_end(eng, s);
		tme_send_try_done(eng, s);
	}
	tme_recv_peer_dead(eng, p);
}

/* ACK: a synchronous send matched.  TM_ERR_NO_MEMORY: not sent (the
 * receive owes it, tm_recv.c). */
int tme_send_ack(struct tm_engine *eng, uint32_t peer, uint32_t app)
{
	struct tm_tx *tx;

	if (peer >= eng->npeers)
		return TM_OK; /* an unknown peer: nobody to tell */
	tx = tme_tx_new(eng, TX_ACK, peer);
	if (!tx)
		return TM_ERR_NO_MEMORY;
	tmh_fill(tx->hdr, IBV_TMH_NO_TAG,
		 ((uint32_t)TM_CTRL_ACK << TM_APP_CTRL_SHIFT) |
		 (app & TM_APP_SEQ_MASK), 0);
	tx->hdr_len = TMH_LEN;
	tme_tx_queue(eng, tx);
	return TM_OK;
}

/*
 * FIN: a copy of the request's TMH (opcode FIN) and RVH; as for ACK.  A
 * receive that failed the transfer (the read was refused, the buffer could
 * not be registered) has set TM_APP_FIN_ERR in that TMH (tm_recv.c), so
 * that the send fails too rather than report a transfer that did not
 * happen.
 */
int tme_send_fin(struct tm_engine *eng, uint32_t peer, const uint8_t *hdr)
{
	struct ibv_tmh *tmh;
	struct tm_tx *tx;

	if (peer >= eng->npeers)
		return TM_OK; /* an unknown peer: nobody to tell */
	tx = tme_tx_new(eng, TX_FIN, peer);
	if (!tx)
		return TM_ERR_NO_MEMORY;
	memcpy(tx->hdr, hdr, TMH_LEN + RVH_LEN);
	tmh = (struct ibv_tmh *)tx->hdr;
	tmh->opcode = IBV_TMH_FIN;
	tx->hdr_len = TMH_LEN + RVH_LEN;
	tme_tx_queue(eng, tx);
	return TM_OK;
}

void tme_send_keepalive(struct tm_engine *eng, struct tm_peer *p,
			   uint64_t now)
{
	struct tm_tx *tx = tme_tx_new(eng, TX_KEEPALIVE, p->id);

	if (!tx)
		return; /* the next look tries again */
	tmh_fill(tx->hdr, IBV_TMH_NO_TAG,
		 (uint32_t)TM_CTRL_KEEPALIVE << TM_APP_CTRL_SHIFT, 0);
	tx->hdr_len = TMH_LEN;
	p->ka_out = 1;
	p->ka_last_ns = now;
	tme_tx_queue(eng, tx);
}

/*
 * Probes each peer whose oldest send has waited ka_ns for its reply, or
 * whose oldest receive naming it has waited ka_ns, at most once per ka_ns
 * per peer.  Looks at most every ka_ns / 4, and only at such peers, so an
 * engine with none pays two list tests.
 */
void tme_keepalive_scan(struct tm_engine *eng)
{
	struct tm_peer *p;
	struct tm_send *s;
	struct tm_recv *r;
	uint64_t now;

	if (ucs_list_is_empty(&eng->wait_peers) &&
	    ucs_list_is_empty(&eng->rwait_peers)) {
		eng->pending &= ~TM_PEND_WAIT;
		return;
	}
	now = tme_now_ns();
	if (now < eng->ka_next_ns)
		return;
	eng->ka_next_ns = now + eng->ka_ns / 4;
	ucs_list_for_each(p, &eng->wait_peers, wait_link) {
		s = ucs_list_head(&p->waitq, struct tm_send, wait_link);
		if (!p->ka_out && now - s->wait_ns >= eng->ka_ns &&
		    now - p->ka_last_ns >= eng->ka_ns)
			tme_send_keepalive(eng, p, now);
	}
	ucs_list_for_each(p, &eng->rwait_peers, rwait_link) {
		r = ucs_list_head(&p->recvq, struct tm_recv, peer_link);
		if (!p->ka_out && now - r->wait_ns >= eng->ka_ns &&
		    now - p->ka_last_ns >= eng->ka_ns)
			tme_send_keepalive(eng, p, now);
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
	struct tm_peer *p;
	uint64_t now;

	if (peer == TM_PEER_ANY)
		return TM_ERR_NOT_FOUND;
	p = eng->peers[peer];
	if (p->dead)
		return TM_ERR_PEER_DEAD;
	now = tme_now_ns();
	if (now - p->probe_last_ns > eng->ka_ns)
		p->probe_since_ns = now;
	p->probe_last_ns = now;
	if (!p->ka_out && now - p->probe_since_ns >= eng->ka_ns &&
	    now - p->ka_last_ns >= eng->ka_ns)
		tme_send_keepalive(eng, p, now);
	return TM_ERR_NOT_FOUND;
}

/* A NO_TAG or FIN message: the reply a waiting send expects, or a probe. */
void tme_on_control(struct tm_engine *eng, const uint8_t *buf,
		       const struct tm_cqe *c)
{
	const struct ibv_tmh *tmh = (const void *)buf;
	uint32_t app = be32toh(tmh->app_ctx);
	uint32_t peer = tme_peer_of_qpn(eng, c->qp_num);
	uint32_t ctrl = (app & TM_APP_CTRL_MASK) >> TM_APP_CTRL_SHIFT;
	struct tm_send *s;
	khiter_t it;

	if (c->byte_len >= TMH_LEN && tmh->opcode == IBV_TMH_NO_TAG &&
	    ctrl == TM_CTRL_KEEPALIVE) {
		eng->st.keepalives_recv++; /* the transport's ack is the point */
		return;
	}
	if (c->byte_len >= TMH_LEN && tmh->opcode == IBV_TMH_NO_TAG &&
	    ctrl == TM_CTRL_CANCEL_REQ) {
		tme_on_cancel_req(eng, peer, app);
		return;
	}
	if (c->byte_len >= TMH_LEN && tmh->opcode == IBV_TMH_NO_TAG &&
	    ctrl == TM_CTRL_CANCEL_REP) {
		tme_on_cancel_rep(eng, peer, app, be64toh(tmh->tag));
		return;
	}
	if (c->byte_len < TMH_LEN ||
	    (tmh->opcode == IBV_TMH_NO_TAG && ctrl != TM_CTRL_ACK)) {
		eng->st.malformed++;
		return;
	}
	if (tmh->opcode == IBV_TMH_FIN)
		eng->st.fins_recv++;
	it = kh_get(tm_sends, eng->sends, send_key(peer, app & TM_APP_SEQ_MASK));
	if (it == kh_end(eng->sends)) {
		eng->st.fin_unknown++;
		return;
	}
	s = kh_value(eng->sends, it);
	if (tmh->opcode == IBV_TMH_FIN && (app & TM_APP_FIN_ERR))
		s->status = TM_REQ_ERROR;
	s->cflags |= S_REPLIED; /* matched: a cancel from now on is late */
	tme_wait_reply_end(eng, s);
	tme_send_try_done(eng, s);
}

int tm_engine_isend(struct tm_engine *eng, struct tm_send *s, uint32_t peer,
		    uint32_t ctx, int32_t src, int32_t tag, const void *buf,
		    size_t len, struct ibv_mr *mr, unsigned flags)
{
	struct tm_tx *tx;
	int ret, reply;

	if (peer >= eng->npeers || ctx > TM_MAX_CTX || src < 0 ||
	    (uint32_t)src > TM_MAX_SRC)
		return TM_ERR_RANGE;
	if (eng->fatal)
		return eng->fatal;
	/* A send takes no stamp: the completions in the CQs may wait for the
	 * next call.  An eager one drains only if the fast path found the
	 * send queue or the slots full, which retiring WRs may cure. */
	if (len > eng->cfg.eager_limit)
		tme_drain(eng);
	s->status = TM_REQ_OK;
	s->peer = peer;
	s->seq = eng->peers[peer]->next_seq++ & TM_APP_SEQ_MASK;
	s->tag = tm_tag_make(ctx, (uint32_t)src, tag);
	s->buf = buf;
	s->len = len;
	s->mr = mr;
	s->own_mr = 0;
	s->app_ctx = s->seq;
	s->waiting = S_WAIT_CQE;
	s->cflags = 0;
	s->kind = len <= eng->cfg.eager_limit ? TX_EAGER : TX_RNDV;
	reply = s->kind == TX_RNDV || (flags & TM_SEND_SYNC);
	if (s->kind == TX_EAGER && (flags & TM_SEND_SYNC))
		s->app_ctx |= TM_APP_SYNC;
	if (s->kind == TX_RNDV) {
		s->app_ctx |= TM_APP_RNDV;
		if (!mr) {
			ret = tm_dev_mem_get(eng->dev, (void *)buf, len,
					     IBV_ACCESS_REMOTE_READ, &s->mr);
			if (ret != TM_OK)
				return ret;
			s->own_mr = 1;
		}
	}
	if (s->kind == TX_EAGER &&
	    (tme_eager_now(eng, s) ||
	     (tme_drain(eng) && tme_eager_now(eng, s)))) {
		tme_flush_work(eng);
		tme_fire_done(eng);
		return TM_OK;
	}
	tx = tme_tx_new(eng, s->kind, peer);
	if (!tx) {
		if (s->own_mr)
			tm_dev_mem_put(eng->dev, s->mr);
		return TM_ERR_NO_MEMORY;
	}
	tx->send = s;
	if (reply && tme_wait_reply_start(eng, s) != TM_OK) {
		tme_tx_free(tx);
		if (s->own_mr)
			tm_dev_mem_put(eng->dev, s->mr);
		return TM_ERR_NO_MEMORY;
	}
	eng->sends_waiting++;
	tme_tx_queue(eng, tx); /* a dead peer: completes TM_REQ_ERROR at once */
	tme_flush_work(eng);
	tme_fire_done(eng);
	return TM_OK;
}

/* A send in the reply table (waiting for FIN/ACK/CANCEL_REP), or queued
 * on its peer and not yet posted. */
struct tm_send *tm_engine_find_send(struct tm_engine *eng, uint32_t peer,
				    uint32_t seq)
{
	khiter_t it = kh_get(tm_sends, eng->sends, send_key(peer, seq));
	struct tm_tx *tx;

	if (it != kh_end(eng->sends))
		return kh_value(eng->sends, it);
	if (peer >= eng->npeers)
		return NULL;
	ucs_list_for_each(tx, &eng->peers[peer]->txq, link)
		if (tx->send && tx->send->seq == seq)
			return tx->send;
	return NULL;
}
