/*
 * tm_engine.c - the matching engine (contract in tm_engine.h).
 *
 * Receive states:
 *   R_SW        posted, held in software only (counted for the prefix rule)
 *   R_CARD      posted, ADD posted (maybe not yet processed by the card)
 *   R_CLAIM     an unexpected message took it; waiting for our DEL to
 *               confirm the card no longer holds it
 *   R_WAIT_DATA the card matched it; waiting for its data completion
 *   R_SW_READ   software rendezvous read in flight
 *   R_DONE      finished; completes once no list op naming it is pending
 * Only R_SW and R_CARD receives are in the shadow queues (tm_mq); every
 * R_SW receive is also in its context's FIFO (struct tm_swq) until it
 * matches, is cancelled or is promoted to R_CARD.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/tm_types.h>
#include <ucs/datastruct/khash.h>
#include "engine/tm_engine.h"

enum { R_IDLE, R_SW, R_CARD, R_CLAIM, R_WAIT_DATA, R_SW_READ, R_DONE };

enum {
	RF_CANCEL_REQ = 1 << 0,
	RF_DEL_POSTED = 1 << 1,
	RF_MATCH_SEEN = 1 << 2,
	RF_ENTRY_LIVE = 1 << 3, /* counts against the card's list */
	RF_FINISHED = 1 << 4,
	RF_RNDV = 1 << 5,
	RF_SWQ = 1 << 6,    /* in its context's software-held FIFO */
	RF_PINNED = 1 << 7, /* can never go to the card */
	RF_ADD_UNSIG = 1 << 8, /* its ADD went unsignalled */
	RF_UNCONF = 1 << 9, /* live entry on eng->unconf (may be inactive) */
};

/* wr_id low bits: what a TM-CQ completion is about. */
enum { WR_RECV = 0, WR_PLAIN = 1, WR_ADD = 2, WR_DEL = 3, WR_SYNC = 4 };
#define WR_TYPE_MASK 7ULL
/* signal at least every TM_ADD_SIG_EVERY-th ADD (see op_post) */
#define TM_ADD_SIG_EVERY 16
/* report the count at least every TM_SYNC_LAG_MAX unexpected arrivals (a
 * real card flags SYNC_REQ when software is more than 0x3fff behind) */
#define TM_SYNC_LAG_MAX 0x2000u

enum { TX_EAGER, TX_RNDV, TX_ACK, TX_FIN, TX_READ, TX_KEEPALIVE };
enum { S_WAIT_CQE = 1, S_WAIT_REPLY = 2 };

#define TMH_LEN ((uint32_t)sizeof(struct ibv_tmh))
#define RVH_LEN ((uint32_t)sizeof(struct ibv_rvh))
#define RNDV_HDR_LEN (TMH_LEN + RVH_LEN + (uint32_t)sizeof(struct tm_rndv_md))

struct tm_msg {
	struct tm_mq_msg mq;
	ucs_list_link_t all;
	uint64_t tag;
	uint64_t len;
	uint64_t stamp;
	uint32_t app;
	uint32_t peer;
	int rndv;
	uint8_t hdr[32] __attribute__((aligned(8))); /* TMH+RVH of a RNDV */
	uint8_t data[];    /* eager payload */
};

struct tm_tx {
	ucs_list_link_t link;  /* peer txq while queued */
	ucs_list_link_t all;
	int type;
	int slot;
	uint32_t peer;
	struct tm_send *send;
	struct tm_recv *recv;
	uint32_t hdr_len;
	uint8_t hdr[32] __attribute__((aligned(8))); /* read as ibv_tmh */
};

/* One outstanding signalled list op, in post order (see on_op_cqe). */
struct tm_sig_op {
	uint64_t seq;        /* its place in post order (eng->op_seq) */
	uint32_t unsig;      /* unsignalled ops posted just before it */
	uint32_t count;      /* the unexpected count it carried */
};

struct tm_op {
	ucs_list_link_t link;
	int type;            /* WR_ADD never queued: WR_DEL or WR_SYNC */
	struct tm_recv *r;
	uint32_t count;
};

/*
 * One posted send-queue WR, in post order.  Eager sends, ACKs and FINs are
 * posted unsignalled (see "Selective signalling"): their slots come back
 * when a later signalled WR of the same QP completes, since an RC QP
 * completes its WRs in order.
 */
struct tm_wr {
	int32_t slot;        /* send slot to free, or -1 */
	int sig;             /* signalled: a completion will name it */
	struct tm_tx *tx;    /* what to do at its completion, or NULL */
};

struct tm_peer {
	struct ibv_qp *qp;
	uint32_t id;
	uint32_t next_seq;
	uint32_t sq_out;     /* posted and not yet retired: wr_head - wr_tail */
	struct tm_wr *wrs;   /* [wr_mask + 1], indexed by post count */
	uint32_t wr_mask;
	uint32_t wr_head;    /* WRs posted */
	uint32_t wr_tail;    /* WRs retired */
	uint32_t unsig;      /* unsignalled WRs since the last signalled one */
	uint32_t sig_out;    /* signalled WRs not yet completed */
	ucs_list_link_t txq;
	ucs_list_link_t waitq;     /* sends waiting for FIN/ACK, oldest first */
	ucs_list_link_t wait_link; /* in eng->wait_peers while waitq is not empty */
	uint64_t ka_last_ns;       /* when the last keepalive was queued */
	int ka_out;                /* a keepalive is queued or posted */
	int dead;                  /* its QP failed: nothing goes to it again */
};

/* The software-held receives of one context, in post order. */
struct tm_swq {
	ucs_list_link_t fifo;       /* tm_recv.sw_link */
	ucs_list_link_t ready_link; /* in eng->promo_ready */
	int ready;                  /* the head can go once the card has room */
};

KHASH_MAP_INIT_INT(tm_qpn, uint32_t)
KHASH_MAP_INIT_INT(tm_swq, struct tm_swq *)
KHASH_MAP_INIT_INT64(tm_sends, struct tm_send *)

struct tm_cqe {
	uint64_t wr_id;
	int status;
	int opcode;
	uint32_t flags;
	uint32_t byte_len;
	uint32_t qp_num;
	struct ibv_wc_tm_info tm;
};

struct tm_engine {
	struct tm_dev *dev;
	struct tm_engine_config cfg;
	struct tm_mq mq;
	uint64_t clock;
	uint32_t uq_count;   /* unexpected tagged completions processed */
	uint32_t reported;   /* count carried by the last op decided */
	int sync_req;
	int sync_out;        /* an explicit SYNC is queued or posted */
	uint64_t op_seq;     /* list ops posted */
	uint64_t sync_seq;   /* latest op known processed in sync (0: none) */
	ucs_list_link_t unconf; /* live entries added after sync_seq, in
				 * post order: only these may be inactive */
	uint32_t max_entries;
	uint32_t max_ops;
	uint32_t card_entries;
	uint32_t ops_out;    /* list ops the card still counts as outstanding */
	uint32_t ops_sig_out; /* ... of which signalled (a completion comes) */
	uint32_t ops_unsig;  /* unsignalled ADDs since the last signalled op */
	struct tm_sig_op *op_unsig; /* [max_ops]: each outstanding signalled
				     * op, in post order */
	uint32_t op_unsig_head, op_unsig_tail;
	ucs_list_link_t opq;
	uint32_t opq_len;

	uint8_t *plain;
	struct ibv_mr *plain_mr;
	uint32_t plain_size;
	uint32_t n_plain;
	uint32_t *repost;
	uint32_t n_repost;

	uint8_t *slots;
	struct ibv_mr *slots_mr;
	uint32_t slot_size;
	uint32_t n_slots;
	uint32_t *free_slots;
	uint32_t n_free_slots;
	uint32_t sq_limit;
	uint32_t sig_every;  /* signal at least every sig_every-th WR of a QP */
	uint32_t slot_low;   /* fewer free slots than this: signal every WR */
	uint32_t sig_out;    /* signalled send WRs outstanding (all peers) */
	uint32_t sq_out;     /* send WRs not retired (all peers) */
	uint32_t poll_skip;  /* drains since the send CQ was last polled */

	struct tm_peer **peers;
	uint32_t npeers;
	khash_t(tm_qpn) *qpn;
	khash_t(tm_sends) *sends;
	khash_t(tm_swq) *swq;       /* context id -> its software-held FIFO */
	ucs_list_link_t promo_ready; /* FIFOs whose head may be promoted */

	ucs_list_link_t done_recv;
	ucs_list_link_t done_send;
	ucs_list_link_t all_msgs;
	ucs_list_link_t all_tx;
	uint64_t tx_queued;
	uint64_t reads_active;
	uint64_t sends_waiting;
	ucs_list_link_t wait_peers; /* peers with sends waiting for FIN/ACK */
	uint64_t ka_ns;             /* cfg.keepalive_ms */
	uint64_t ka_next_ns;        /* next look at wait_peers */
	struct tm_engine_stats st;
};

static void deliver(struct tm_engine *eng, struct tm_recv *r,
		    struct tm_msg *m);
static void handle_unexpected_msg(struct tm_engine *eng, struct tm_msg *m);

/* ---- small helpers -------------------------------------------------- */

static struct ibv_tmh *tmh_fill(void *p, uint8_t op, uint32_t app,
				uint64_t tag)
{
	struct ibv_tmh *tmh = p;

	memset(tmh, 0, sizeof(*tmh));
	tmh->opcode = op;
	tmh->app_ctx = htobe32(app);
	tmh->tag = htobe64(tag);
	return tmh;
}

static uint32_t count_now(struct tm_engine *eng)
{
	return eng->uq_count + !!(eng->cfg.faults & TM_FAULT_SYNC_AHEAD);
}

static uint32_t peer_of_qpn(struct tm_engine *eng, uint32_t qpn)
{
	khiter_t it = kh_get(tm_qpn, eng->qpn, qpn);

	return it == kh_end(eng->qpn) ? UINT32_MAX : kh_value(eng->qpn, it);
}

static uint64_t send_key(uint32_t peer, uint32_t seq)
{
	return ((uint64_t)peer << 32) | seq;
}

static void env_from_tag(struct tm_env *env, uint64_t tag)
{
	env->ctx = tm_tag_ctx(tag);
	env->src = (int32_t)tm_tag_src(tag);
	env->tag = tm_tag_user(tag);
}

static void report_arrival(struct tm_engine *eng, uint64_t tag, uint32_t app,
			   uint32_t peer, uint64_t len, uint64_t stamp,
			   int on_card)
{
	struct tm_arrival a;

	if (!eng->cfg.arrival_hook)
		return;
	env_from_tag(&a.env, tag);
	a.peer = peer;
	a.send_seq = app & TM_APP_SEQ_MASK;
	a.len = len;
	a.stamp = stamp;
	a.on_card = on_card;
	eng->cfg.arrival_hook(eng->cfg.hook_arg, &a);
}

/* ---- completion of requests ----------------------------------------- */

static void recv_try_done(struct tm_engine *eng, struct tm_recv *r)
{
	if (!(r->flags & RF_FINISHED) || r->ops_pending || r->state == R_DONE)
		return;
	r->state = R_DONE;
	if (r->own_mr) {
		tm_dev_mem_put(eng->dev, r->mr);
		r->own_mr = 0;
		r->mr = NULL;
	}
	ucs_list_add_tail(&eng->done_recv, &r->done_link);
}

static void recv_finish(struct tm_engine *eng, struct tm_recv *r, int status)
{
	r->status = status;
	if (status == TM_REQ_TRUNCATED)
		eng->st.truncated++;
	if (status == TM_REQ_ERROR)
		eng->st.errors++;
	r->flags |= RF_FINISHED;
	recv_try_done(eng, r);
}

static void send_try_done(struct tm_engine *eng, struct tm_send *s)
{
	if (s->waiting)
		return;
	if (s->own_mr) {
		tm_dev_mem_put(eng->dev, s->mr);
		s->own_mr = 0;
		s->mr = NULL;
	}
	if (s->status == TM_REQ_ERROR)
		eng->st.sends_failed++;
	eng->sends_waiting--;
	ucs_list_add_tail(&eng->done_send, &s->done_link);
}

/* Runs callbacks; a callback may call back into the engine. */
static void fire_done(struct tm_engine *eng)
{
	struct tm_recv *r;
	struct tm_send *s;

	for (;;) {
		if (!ucs_list_is_empty(&eng->done_recv)) {
			r = ucs_list_extract_head(&eng->done_recv,
						  struct tm_recv, done_link);
			if (r->cb)
				r->cb(r);
		} else if (!ucs_list_is_empty(&eng->done_send)) {
			s = ucs_list_extract_head(&eng->done_send,
						  struct tm_send, done_link);
			if (s->cb)
				s->cb(s);
		} else {
			break;
		}
	}
}

/* ---- sends waiting for a reply (FIN/ACK) ---------------------------- */

/*
 * Keepalive pacing is in milliseconds, so the coarse clock will do; the
 * precise one is called on every progress while a send waits and cost a
 * third of the CPU in a bidirectional rendezvous benchmark.
 */
static uint64_t now_ns(void)
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
static int wait_reply_start(struct tm_engine *eng, struct tm_send *s)
{
	struct tm_peer *p = eng->peers[s->peer];
	khiter_t it;
	int ret;

	it = kh_put(tm_sends, eng->sends, send_key(s->peer, s->seq), &ret);
	if (ret < 0)
		return TM_ERR_NO_MEMORY;
	kh_value(eng->sends, it) = s;
	s->waiting |= S_WAIT_REPLY;
	s->wait_ns = now_ns();
	if (ucs_list_is_empty(&p->waitq))
		ucs_list_add_tail(&eng->wait_peers, &p->wait_link);
	ucs_list_add_tail(&p->waitq, &s->wait_link);
	return TM_OK;
}

static void wait_reply_end(struct tm_engine *eng, struct tm_send *s)
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

/* ---- transmit side -------------------------------------------------- */

static struct tm_tx *tx_new(struct tm_engine *eng, int type, uint32_t peer)
{
	struct tm_tx *tx = calloc(1, sizeof(*tx));

	if (!tx)
		return NULL;
	tx->type = type;
	tx->peer = peer;
	tx->slot = -1;
	ucs_list_add_tail(&eng->all_tx, &tx->all);
	return tx;
}

static void tx_free(struct tm_tx *tx)
{
	ucs_list_del(&tx->all);
	free(tx);
}

/* A tx that will never be posted (its peer is dead): fail its request. */
static void tx_abort(struct tm_engine *eng, struct tm_tx *tx)
{
	struct tm_send *s = tx->send;

	switch (tx->type) {
	case TX_EAGER:
	case TX_RNDV:
		s->status = TM_REQ_ERROR;
		s->waiting &= ~S_WAIT_CQE;
		wait_reply_end(eng, s);
		send_try_done(eng, s);
		break;
	case TX_READ:
		eng->reads_active--;
		tx->recv->recv_len = 0;
		recv_finish(eng, tx->recv, TM_REQ_ERROR);
		break;
	case TX_KEEPALIVE:
		eng->peers[tx->peer]->ka_out = 0;
		break;
	default: /* ACK, FIN: nobody left to tell */
		break;
	}
	tx_free(tx);
}

/* Every tx goes through here, so nothing is queued for a dead peer. */
static void tx_queue(struct tm_engine *eng, struct tm_tx *tx)
{
	if (eng->peers[tx->peer]->dead) {
		tx_abort(eng, tx);
		return;
	}
	ucs_list_add_tail(&eng->peers[tx->peer]->txq, &tx->link);
	eng->tx_queued++;
}

/*
 * An error completion on the peer's QP: an RC QP in error never delivers
 * again, so no FIN/ACK will come and nothing queued can go.  Fail what
 * waits on it; WRs already posted complete flushed and fail their own
 * requests (on_send_cqe).
 */
static void peer_fail(struct tm_engine *eng, uint32_t peer)
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
		tx_abort(eng, tx);
	}
	while (!ucs_list_is_empty(&p->waitq)) {
		s = ucs_list_head(&p->waitq, struct tm_send, wait_link);
		s->status = TM_REQ_ERROR;
		wait_reply_end(eng, s);
		send_try_done(eng, s);
	}
}

/*
 * Selective signalling.  A WR is posted signalled when something must
 * happen at its completion (a rendezvous request, a read, a keepalive), or
 * every sig_every-th WR of its QP, or when the send queue or the slots run
 * low; the others are unsignalled, and are retired (their slots freed) by
 * the next signalled completion of their QP, as RC completes in order.  An
 * eager send completes as soon as its data is in its slot (the slot is a
 * buffered copy).  Bounds: sig_every <= n_slots / (2 * npeers), so
 * unsignalled tails hold at most half the slots and an empty free list
 * always has a signalled completion coming; the last WR below sq_limit is
 * signalled, so a full send queue always drains.  An error completes even
 * an unsignalled WR, and retires everything up to it.
 */
static int sq_post(struct tm_engine *eng, struct tm_peer *p,
		   struct ibv_send_wr *wr, int32_t slot, struct tm_tx *keep)
{
	struct ibv_send_wr *bad;
	struct tm_wr *w;
	int sig = keep || p->unsig + 1 >= eng->sig_every ||
		  p->sq_out + 1 >= eng->sq_limit ||
		  eng->n_free_slots < eng->slot_low;

	wr->wr_id = ((uint64_t)p->id << 32) | p->wr_head;
	wr->send_flags = sig ? IBV_SEND_SIGNALED : 0;
	if (ibv_post_send(p->qp, wr, &bad))
		return EAGAIN;
	w = &p->wrs[p->wr_head++ & p->wr_mask];
	w->slot = slot;
	w->sig = sig;
	w->tx = keep;
	p->sq_out++;
	eng->sq_out++;
	if (sig) {
		p->unsig = 0;
		p->sig_out++;
		eng->sig_out++;
	} else {
		p->unsig++;
	}
	return 0;
}

/* Takes a send slot; fills it with hdr (hdr_len) and data (len). */
static int32_t slot_fill(struct tm_engine *eng, const void *hdr,
			 uint32_t hdr_len, const void *data, size_t len,
			 struct ibv_send_wr *wr, struct ibv_sge *sge)
{
	int32_t slot = (int32_t)eng->free_slots[--eng->n_free_slots];
	uint8_t *buf = eng->slots + (size_t)slot * eng->slot_size;

	memcpy(buf, hdr, hdr_len);
	if (len)
		memcpy(buf + hdr_len, data, len);
	sge->addr = (uintptr_t)buf;
	sge->length = hdr_len + (uint32_t)len;
	sge->lkey = eng->slots_mr->lkey;
	wr->next = NULL;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_SEND;
	return slot;
}

/* Posts one queued item; returns 0, or EAGAIN to retry later.  A tx with
 * nothing to do at its completion is done once posted (tx_posted). */
static int tx_post(struct tm_engine *eng, struct tm_peer *p, struct tm_tx *tx)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct tm_send *s = tx->send;
	uint8_t hdr[RNDV_HDR_LEN] __attribute__((aligned(8)));
	struct ibv_rvh *rvh;
	struct tm_rndv_md *md;
	const void *data = NULL;
	uint32_t hdr_len;
	size_t len = 0;
	int32_t slot;

	memset(&wr, 0, sizeof(wr));
	if (tx->type == TX_READ) {
		struct tm_recv *r = tx->recv;

		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = r->rd_va;
		wr.wr.rdma.rkey = r->rd_rkey;
		sge.addr = (uintptr_t)r->buf;
		sge.length = r->rd_len < r->len ? r->rd_len : (uint32_t)r->len;
		sge.lkey = r->mr->lkey;
		return sq_post(eng, p, &wr, -1, tx) ? EAGAIN : 0;
	}
	if (!eng->n_free_slots)
		return EAGAIN;
	switch (tx->type) {
	case TX_EAGER:
		tmh_fill(hdr, IBV_TMH_EAGER, s->app_ctx, s->tag);
		hdr_len = TMH_LEN;
		data = s->buf;
		len = s->len;
		break;
	case TX_RNDV:
		tmh_fill(hdr, IBV_TMH_RNDV, s->app_ctx, s->tag);
		rvh = (struct ibv_rvh *)(hdr + TMH_LEN);
		rvh->va = htobe64((uintptr_t)s->buf);
		rvh->rkey = htobe32(s->mr->rkey);
		rvh->len = htobe32((uint32_t)s->len);
		md = (struct tm_rndv_md *)(hdr + TMH_LEN + RVH_LEN);
		md->len = htobe64(s->len);
		hdr_len = RNDV_HDR_LEN;
		break;
	default: /* ACK, FIN, KEEPALIVE: prepared header */
		memcpy(hdr, tx->hdr, tx->hdr_len);
		hdr_len = tx->hdr_len;
		break;
	}
	slot = slot_fill(eng, hdr, hdr_len, data, len, &wr, &sge);
	if (sq_post(eng, p, &wr, slot, tx->type == TX_RNDV ||
		    tx->type == TX_KEEPALIVE ? tx : NULL)) {
		eng->free_slots[eng->n_free_slots++] = (uint32_t)slot;
		return EAGAIN;
	}
	if (tx->type == TX_FIN)
		eng->st.fins_sent++;
	if (tx->type == TX_ACK)
		eng->st.acks_sent++;
	if (tx->type == TX_KEEPALIVE)
		eng->st.keepalives_sent++;
	return 0;
}

/* tx was posted: an eager send is complete, ACK/FIN need nothing more. */
static void tx_posted(struct tm_engine *eng, struct tm_tx *tx)
{
	if (tx->type == TX_RNDV || tx->type == TX_KEEPALIVE ||
	    tx->type == TX_READ)
		return; /* kept until its completion */
	if (tx->type == TX_EAGER) {
		tx->send->waiting &= ~S_WAIT_CQE;
		send_try_done(eng, tx->send);
	}
	tx_free(tx);
}

static int flush_peer(struct tm_engine *eng, struct tm_peer *p)
{
	struct tm_tx *tx;
	int n = 0;

	while (!ucs_list_is_empty(&p->txq) && p->sq_out < eng->sq_limit) {
		tx = ucs_list_head(&p->txq, struct tm_tx, link);
		if (tx_post(eng, p, tx))
			break;
		ucs_list_del(&tx->link);
		eng->tx_queued--;
		tx_posted(eng, tx);
		n++;
	}
	return n;
}

static int flush_tx(struct tm_engine *eng)
{
	uint32_t i;
	int n = 0;

	if (!eng->tx_queued)
		return 0;
	for (i = 0; i < eng->npeers; i++)
		n += flush_peer(eng, eng->peers[i]);
	return n;
}

static void send_ack(struct tm_engine *eng, uint32_t peer, uint32_t app)
{
	struct tm_tx *tx;

	if (peer >= eng->npeers)
		return;
	tx = tx_new(eng, TX_ACK, peer);
	if (!tx) {
		eng->st.errors++;
		return;
	}
	tmh_fill(tx->hdr, IBV_TMH_NO_TAG,
		 ((uint32_t)TM_CTRL_ACK << TM_APP_CTRL_SHIFT) |
		 (app & TM_APP_SEQ_MASK), 0);
	tx->hdr_len = TMH_LEN;
	tx_queue(eng, tx);
}

/* FIN: a copy of the request's TMH (opcode FIN) and RVH. */
static void send_fin(struct tm_engine *eng, uint32_t peer, const uint8_t *hdr)
{
	struct tm_tx *tx;

	if (peer >= eng->npeers)
		return;
	tx = tx_new(eng, TX_FIN, peer);
	if (!tx) {
		eng->st.errors++;
		return;
	}
	memcpy(tx->hdr, hdr, TMH_LEN + RVH_LEN);
	((struct ibv_tmh *)tx->hdr)->opcode = IBV_TMH_FIN;
	tx->hdr_len = TMH_LEN + RVH_LEN;
	tx_queue(eng, tx);
}

static void send_keepalive(struct tm_engine *eng, struct tm_peer *p,
			   uint64_t now)
{
	struct tm_tx *tx = tx_new(eng, TX_KEEPALIVE, p->id);

	if (!tx)
		return; /* the next look tries again */
	tmh_fill(tx->hdr, IBV_TMH_NO_TAG,
		 (uint32_t)TM_CTRL_KEEPALIVE << TM_APP_CTRL_SHIFT, 0);
	tx->hdr_len = TMH_LEN;
	p->ka_out = 1;
	p->ka_last_ns = now;
	tx_queue(eng, tx);
}

/*
 * Probes each peer whose oldest send has waited ka_ns for its reply, at
 * most once per ka_ns per peer.  Looks at most every ka_ns / 4, and only
 * at peers with waiting sends, so an engine with none pays one list test.
 */
static void keepalive_scan(struct tm_engine *eng)
{
	struct tm_peer *p;
	struct tm_send *s;
	uint64_t now;

	if (ucs_list_is_empty(&eng->wait_peers))
		return;
	now = now_ns();
	if (now < eng->ka_next_ns)
		return;
	eng->ka_next_ns = now + eng->ka_ns / 4;
	ucs_list_for_each(p, &eng->wait_peers, wait_link) {
		s = ucs_list_head(&p->waitq, struct tm_send, wait_link);
		if (!p->ka_out && now - s->wait_ns >= eng->ka_ns &&
		    now - p->ka_last_ns >= eng->ka_ns)
			send_keepalive(eng, p, now);
	}
}

/* ---- list operations ------------------------------------------------ */

/*
 * Selective signalling of ADDs.  Nothing waits for an ADD's completion
 * (the entry's handle is known at post; the receive completes from its
 * match), so ADDs go unsignalled except every TM_ADD_SIG_EVERY-th and the
 * one that would fill the last op slot: the card retires unsignalled ops
 * when a later signalled one is polled, so the op slots always come back.
 * DELs and SYNCs stay signalled: their completions drive claims, cancels
 * and the sync protocol.  The count and order rules are unchanged (every
 * op carries IBV_OPS_TM_SYNC and its count).  An ADD never fails at the
 * card once posted on the soft HCA; should one fail unsignalled (a real
 * card reports errors of unsignalled ops), on_op_cqe puts its receive
 * back in software if it is still posted.
 */
static int op_post(struct tm_engine *eng, int type, struct tm_recv *r,
		   uint32_t count)
{
	struct ibv_ops_wr wr, *bad;
	struct ibv_sge sge;
	int ret, sig;

	sig = type != WR_ADD || eng->ops_unsig + 1 >= TM_ADD_SIG_EVERY ||
	      eng->ops_out + 1 >= eng->max_ops;
	memset(&wr, 0, sizeof(wr));
	wr.flags = (sig ? IBV_OPS_SIGNALED : 0) | IBV_OPS_TM_SYNC;
	wr.tm.unexpected_cnt = count;
	wr.wr_id = (uintptr_t)r | (uint64_t)type;
	switch (type) {
	case WR_ADD:
		wr.opcode = IBV_WR_TAG_ADD;
		sge.addr = (uintptr_t)r->buf;
		sge.length = (uint32_t)r->len;
		sge.lkey = r->mr->lkey;
		wr.tm.add.recv_wr_id = (uintptr_t)r | WR_RECV;
		wr.tm.add.sg_list = &sge;
		wr.tm.add.num_sge = 1;
		wr.tm.add.tag = r->mq.tag;
		wr.tm.add.mask = r->mq.mask;
		break;
	case WR_DEL:
		wr.opcode = IBV_WR_TAG_DEL;
		wr.tm.handle = r->handle;
		break;
	default:
		wr.opcode = IBV_WR_TAG_SYNC;
		break;
	}
	ret = ibv_post_srq_ops(eng->dev->srq, &wr, &bad);
	if (ret)
		return ret;
	if (type == WR_ADD) {
		r->handle = wr.tm.handle;
		if (!sig)
			r->flags |= RF_ADD_UNSIG;
	}
	if (type == WR_SYNC)
		eng->st.syncs++;
	eng->op_seq++;
	if (type == WR_ADD)
		r->add_seq = eng->op_seq;
	eng->ops_out++;
	eng->st.ops_posted++;
	if (sig) {
		struct tm_sig_op *so =
			&eng->op_unsig[eng->op_unsig_head++ % eng->max_ops];

		so->seq = eng->op_seq;
		so->unsig = eng->ops_unsig;
		so->count = count;
		eng->ops_unsig = 0;
		eng->ops_sig_out++;
	} else {
		eng->ops_unsig++;
	}
	return 0;
}

/*
 * Decides a DEL or SYNC now, with the current count; posts it at once if
 * nothing is queued ahead of it and a slot is free, else queues it.  The
 * op keeps the count it was decided with (see the contract).
 */
static void op_decide(struct tm_engine *eng, int type, struct tm_recv *r)
{
	struct tm_op *op;

	eng->reported = count_now(eng);
	if (r)
		r->ops_pending++;
	if (type == WR_SYNC)
		eng->sync_out = 1;
	if (ucs_list_is_empty(&eng->opq) && eng->ops_out < eng->max_ops &&
	    op_post(eng, type, r, eng->reported) == 0)
		return;
	op = malloc(sizeof(*op));
	if (!op) {
		eng->st.errors++;
		if (r)
			r->ops_pending--;
		if (type == WR_SYNC)
			eng->sync_out = 0;
		return;
	}
	op->type = type;
	op->r = r;
	op->count = eng->reported;
	ucs_list_add_tail(&eng->opq, &op->link);
	eng->opq_len++;
	eng->st.ops_queued++;
}

static void on_op_cqe(struct tm_engine *eng, int type, struct tm_recv *r,
		      const struct tm_cqe *c);

static void on_op_result(struct tm_engine *eng, int type, struct tm_recv *r,
			 const struct tm_cqe *c);

/* A queued DEL that must not be posted: as if it failed (IBV_WC_TM_ERR). */
static void op_dropped(struct tm_engine *eng, struct tm_recv *r)
{
	struct tm_cqe c = { .status = IBV_WC_TM_ERR };

	on_op_result(eng, WR_DEL, r, &c);
}

static int flush_ops(struct tm_engine *eng)
{
	struct tm_op *op;
	uint32_t count;
	int n = 0;

	while (!ucs_list_is_empty(&eng->opq) && eng->ops_out < eng->max_ops) {
		op = ucs_list_head(&eng->opq, struct tm_op, link);
		count = (eng->cfg.faults & TM_FAULT_SYNC_ORDER) ?
			count_now(eng) : op->count;
		if (op->type == WR_DEL && !(op->r->flags & RF_ENTRY_LIVE)) {
			/* The entry was consumed and its final completion
			 * polled while the DEL waited: its handle may already
			 * name another entry.  Drop it as a failed DEL. */
			op_dropped(eng, op->r);
		} else if (op_post(eng, op->type, op->r, count)) {
			break;
		}
		ucs_list_del(&op->link);
		eng->opq_len--;
		free(op);
		n++;
	}
	return n;
}

/*
 * An explicit SYNC only when it can matter (the rule and its argument are
 * in the contract, "Sync protocol"): the count moved since the last op was
 * decided, and some live entry may be inactive (eng->unconf), and no SYNC
 * is outstanding (its completion re-runs this); or the card's view lags
 * TM_SYNC_LAG_MAX behind.  Runs after promote(): an ADD posted there
 * carries the current count and makes the SYNC needless.
 */
static void maybe_sync(struct tm_engine *eng)
{
	uint32_t lag = count_now(eng) - eng->reported;

	if (!lag || eng->sync_out)
		return;
	if (!ucs_list_is_empty(&eng->unconf) || lag >= TM_SYNC_LAG_MAX)
		op_decide(eng, WR_SYNC, NULL);
}

static void unconf_del(struct tm_recv *r)
{
	if (r->flags & RF_UNCONF) {
		r->flags &= ~RF_UNCONF;
		ucs_list_del(&r->card_link);
	}
}

/*
 * A signalled op that carried count was processed when the card's counter
 * stood at uq_count: every unexpected arrival the card decided before it
 * completed before it in the same CQ, and none after.  Equal: the op was
 * in sync and activated every entry added before it, for good.
 */
static void op_seen(struct tm_engine *eng, const struct tm_sig_op *so)
{
	struct tm_recv *h;

	if (so->count != eng->uq_count || so->seq <= eng->sync_seq)
		return;
	eng->sync_seq = so->seq;
	while (!ucs_list_is_empty(&eng->unconf)) {
		h = ucs_list_head(&eng->unconf, struct tm_recv, card_link);
		if (h->add_seq > eng->sync_seq)
			break;
		unconf_del(h);
	}
}

static void entry_gone(struct tm_engine *eng, struct tm_recv *r)
{
	if (r->flags & RF_ENTRY_LIVE) {
		r->flags &= ~RF_ENTRY_LIVE;
		eng->card_entries--;
	}
	unconf_del(r);
}

/* ---- software-held FIFOs and promotion ------------------------------ */

static struct tm_swq *swq_of(struct tm_engine *eng, uint32_t ctx, int create)
{
	khiter_t it = kh_get(tm_swq, eng->swq, ctx);
	struct tm_swq *q;
	int ret;

	if (it != kh_end(eng->swq))
		return kh_value(eng->swq, it);
	if (!create)
		return NULL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	it = kh_put(tm_swq, eng->swq, ctx, &ret);
	if (ret < 0) {
		free(q);
		return NULL;
	}
	ucs_list_head_init(&q->fifo);
	kh_value(eng->swq, it) = q;
	return q;
}

/* Keeps q on promo_ready exactly while its head could be promoted. */
static void swq_update(struct tm_engine *eng, struct tm_swq *q)
{
	struct tm_recv *h;
	int ready = 0;

	if (!ucs_list_is_empty(&q->fifo)) {
		h = ucs_list_head(&q->fifo, struct tm_recv, sw_link);
		ready = !(h->flags & RF_PINNED);
	}
	if (ready == q->ready)
		return;
	q->ready = ready;
	if (ready)
		ucs_list_add_tail(&eng->promo_ready, &q->ready_link);
	else
		ucs_list_del(&q->ready_link);
}

/*
 * r becomes software-held: into q in post order.  A new receive is the
 * latest post, so this is O(1) except after a failed ADD (never seen).
 */
static void swq_insert(struct tm_engine *eng, struct tm_swq *q,
		       struct tm_recv *r)
{
	ucs_list_link_t *pos = q->fifo.prev;

	while (pos != &q->fifo &&
	       ucs_container_of(pos, struct tm_recv, sw_link)->post_stamp >
	       r->post_stamp)
		pos = pos->prev;
	ucs_list_insert_after(pos, &r->sw_link);
	r->flags |= RF_SWQ;
	swq_update(eng, q);
}

static void swq_del(struct tm_engine *eng, struct tm_recv *r)
{
	struct tm_swq *q;

	if (!(r->flags & RF_SWQ))
		return;
	r->flags &= ~RF_SWQ;
	ucs_list_del(&r->sw_link);
	q = swq_of(eng, tm_tag_ctx(r->mq.tag), 0);
	if (q)
		swq_update(eng, q);
}

/* Receives no card could take (whatever its state): never promoted. */
static int never_on_card(struct tm_engine *eng, const struct tm_recv *r)
{
	return !eng->cfg.offload || r->len < TMH_LEN + RVH_LEN ||
	       r->len > UINT32_MAX;
}

/* Resources for one more ADD: tests (b) and (c) of the contract. */
static int card_has_room(struct tm_engine *eng)
{
	return eng->card_entries < eng->max_entries &&
	       ucs_list_is_empty(&eng->opq) && eng->ops_out < eng->max_ops;
}

/* Posts r's ADD with the current count; 0 if the card took it. */
static int card_add(struct tm_engine *eng, struct tm_recv *r)
{
	eng->reported = count_now(eng);
	if (op_post(eng, WR_ADD, r, eng->reported))
		return -1;
	if (!(r->flags & RF_ADD_UNSIG))
		r->ops_pending++;
	r->flags |= RF_ENTRY_LIVE | RF_UNCONF;
	ucs_list_add_tail(&eng->unconf, &r->card_link);
	eng->card_entries++;
	return 0;
}

/* The receive of q to promote: its head (see promote()). */
static struct tm_recv *promo_pick(struct tm_engine *eng, struct tm_swq *q)
{
	struct tm_recv *t = ucs_list_tail(&q->fifo, struct tm_recv, sw_link);

	/* the fault: the latest first, past earlier ones it may overlap */
	if ((eng->cfg.faults & TM_FAULT_PREFIX) && !(t->flags & RF_PINNED))
		return t;
	return ucs_list_head(&q->fifo, struct tm_recv, sw_link);
}

/* Promotes one receive of q; 0 if it went to the card. */
static int promote_one(struct tm_engine *eng, struct tm_swq *q)
{
	struct tm_recv *r = promo_pick(eng, q);

	if (!r->mr) {
		/* from the registration cache, like a receive posted to the
		 * card (released with tm_dev_mem_put) */
		if (tm_dev_mem_get(eng->dev, r->buf, r->len,
				   IBV_ACCESS_LOCAL_WRITE, &r->mr) != TM_OK) {
			r->mr = NULL;
			r->flags |= RF_PINNED;
			swq_update(eng, q);
			return -1;
		}
		r->own_mr = 1;
	}
	if (card_add(eng, r))
		return -1;
	swq_del(eng, r);
	tm_mq_set_held(&eng->mq, &r->mq, 0); /* cannot fail when clearing */
	r->state = R_CARD;
	eng->st.promoted++;
	return 0;
}

/*
 * Hands software-held receives to the card while it has room.  Only FIFO
 * heads are taken (see the contract: the prefix rule holds for them), and
 * contexts take turns so that one long FIFO does not starve the others.
 */
static int promote(struct tm_engine *eng)
{
	struct tm_swq *q;
	int n = 0;

	while (!ucs_list_is_empty(&eng->promo_ready) && card_has_room(eng)) {
		q = ucs_list_head(&eng->promo_ready, struct tm_swq, ready_link);
		if (promote_one(eng, q)) {
			if (q->ready)
				break; /* the card refused the ADD: later */
			continue;      /* pinned now: next context */
		}
		n++;
		if (q->ready && eng->promo_ready.prev != &q->ready_link) {
			ucs_list_del(&q->ready_link);
			ucs_list_add_tail(&eng->promo_ready, &q->ready_link);
		}
	}
	return n;
}

/* ---- software rendezvous -------------------------------------------- */

/* r->hdr holds the request's TMH+RVH; reads min(len, buffer) then FINs. */
static void sw_rndv_start(struct tm_engine *eng, struct tm_recv *r)
{
	const struct ibv_rvh *rvh = (const void *)(r->hdr + TMH_LEN);
	struct tm_tx *tx;

	r->rd_va = be64toh(rvh->va);
	r->rd_rkey = be32toh(rvh->rkey);
	r->rd_len = be32toh(rvh->len);
	r->msg_len = r->rd_len;
	eng->st.rndv_sw++;
	if (r->rd_len && r->len && !r->mr) {
		if (tm_dev_mem_get(eng->dev, r->buf, r->len,
				   IBV_ACCESS_LOCAL_WRITE, &r->mr) == TM_OK)
			r->own_mr = 1;
	}
	if (!r->rd_len || !r->len || !r->mr) {
		r->recv_len = 0;
		send_fin(eng, r->peer, r->hdr);
		recv_finish(eng, r, !r->mr && r->rd_len && r->len ?
			    TM_REQ_ERROR : r->rd_len > r->len ?
			    TM_REQ_TRUNCATED : TM_REQ_OK);
		return;
	}
	tx = tx_new(eng, TX_READ, r->peer);
	if (!tx || r->peer >= eng->npeers) {
		if (tx)
			tx_free(tx);
		send_fin(eng, r->peer, r->hdr);
		recv_finish(eng, r, TM_REQ_ERROR);
		return;
	}
	tx->recv = r;
	r->state = R_SW_READ;
	eng->reads_active++;
	tx_queue(eng, tx);
}

static void sw_rndv_done(struct tm_engine *eng, struct tm_recv *r, int status)
{
	eng->reads_active--;
	send_fin(eng, r->peer, r->hdr);
	r->recv_len = r->rd_len < r->len ? r->rd_len : r->len;
	if (status != IBV_WC_SUCCESS)
		recv_finish(eng, r, TM_REQ_ERROR);
	else
		recv_finish(eng, r, r->rd_len > r->len ? TM_REQ_TRUNCATED :
				    TM_REQ_OK);
}

/* ---- matching in software ------------------------------------------- */

/* Delivers unexpected message m into receive r (which left the queues). */
static void deliver(struct tm_engine *eng, struct tm_recv *r, struct tm_msg *m)
{
	env_from_tag(&r->env, m->tag);
	r->peer = m->peer;
	r->send_seq = m->app & TM_APP_SEQ_MASK;
	r->match_stamp = m->stamp;
	r->msg_len = m->len;
	r->on_card = 0;
	r->state = R_IDLE; /* out of the queues; finished below */
	ucs_list_del(&m->all);
	if (m->rndv) {
		memcpy(r->hdr, m->hdr, sizeof(r->hdr));
		free(m);
		sw_rndv_start(eng, r);
		return;
	}
	if (m->app & TM_APP_SYNC)
		send_ack(eng, m->peer, m->app);
	r->recv_len = m->len < r->len ? m->len : r->len;
	memcpy(r->buf, m->data, r->recv_len);
	free(m);
	recv_finish(eng, r, r->msg_len > r->len ? TM_REQ_TRUNCATED : TM_REQ_OK);
}

static void recv_leave_queues(struct tm_engine *eng, struct tm_recv *r)
{
	swq_del(eng, r);
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
		if (tm_mq_msg_add(&eng->mq, &m->mq, m->tag, m->stamp) != TM_OK)
			eng->st.errors++;
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
		op_decide(eng, WR_DEL, r);
	}
}

/* ---- TM CQ handlers ------------------------------------------------- */

static void on_unexpected(struct tm_engine *eng, const uint8_t *buf,
			  const struct tm_cqe *c)
{
	const struct ibv_tmh *tmh = (const void *)buf;
	const struct ibv_rvh *rvh = (const void *)(buf + TMH_LEN);
	uint32_t plen = 0;
	struct tm_msg *m;
	int rndv = tmh->opcode == IBV_TMH_RNDV;

	eng->uq_count++;
	eng->st.unexpected++;
	if (!rndv && c->byte_len >= TMH_LEN)
		plen = c->byte_len - TMH_LEN;
	m = malloc(sizeof(*m) + plen);
	if (!m) {
		eng->st.errors++;
		return;
	}
	m->tag = be64toh(tmh->tag);
	m->app = be32toh(tmh->app_ctx);
	m->peer = peer_of_qpn(eng, c->qp_num);
	m->rndv = rndv;
	m->len = rndv ? be32toh(rvh->len) : plen;
	if (rndv)
		memcpy(m->hdr, buf, TMH_LEN + RVH_LEN);
	else
		memcpy(m->data, buf + TMH_LEN, plen);
	m->stamp = eng->clock++;
	ucs_list_add_tail(&eng->all_msgs, &m->all);
	report_arrival(eng, m->tag, m->app, m->peer, m->len, m->stamp, 0);
	handle_unexpected_msg(eng, m);
}

static void on_control(struct tm_engine *eng, const uint8_t *buf,
		       const struct tm_cqe *c)
{
	const struct ibv_tmh *tmh = (const void *)buf;
	uint32_t app = be32toh(tmh->app_ctx);
	uint32_t peer = peer_of_qpn(eng, c->qp_num);
	uint32_t ctrl = (app & TM_APP_CTRL_MASK) >> TM_APP_CTRL_SHIFT;
	struct tm_send *s;
	khiter_t it;

	if (c->byte_len >= TMH_LEN && tmh->opcode == IBV_TMH_NO_TAG &&
	    ctrl == TM_CTRL_KEEPALIVE) {
		eng->st.keepalives_recv++; /* the transport's ack is the point */
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
	wait_reply_end(eng, s);
	send_try_done(eng, s);
}

/*
 * Does a receive completion say that the QP it came on failed?  Not for
 * one message's trouble: truncation, a rendezvous too big for the buffer,
 * a read the sender's rkey refused (the soft HCA keeps the QP usable then;
 * a real card moves it to error, and the flushes that follow say so).
 */
static int qp_failed(int status)
{
	switch (status) {
	case IBV_WC_SUCCESS:
	case IBV_WC_LOC_LEN_ERR:
	case IBV_WC_TM_RNDV_INCOMPLETE:
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_TM_ERR:
		return 0;
	default:
		return 1;
	}
}

static void post_plain(struct tm_engine *eng, uint32_t idx)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;

	sge.addr = (uintptr_t)(eng->plain + (size_t)idx * eng->plain_size);
	sge.length = eng->plain_size;
	sge.lkey = eng->plain_mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = ((uint64_t)idx << 3) | WR_PLAIN;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	if (ibv_post_srq_recv(eng->dev->srq, &wr, &bad))
		eng->repost[eng->n_repost++] = idx;
}

static void on_plain(struct tm_engine *eng, const struct tm_cqe *c)
{
	uint32_t idx = (uint32_t)(c->wr_id >> 3);
	const uint8_t *buf = eng->plain + (size_t)idx * eng->plain_size;

	if (c->status != IBV_WC_SUCCESS) {
		eng->st.errors++;
		/* A tagged message the card decided unexpected (and counted,
		 * at its first packet) whose connection failed before the
		 * rest came.  Count it as the card did: a count one short
		 * leaves every later ADD inactive, for good, on every peer. */
		if (c->opcode == IBV_WC_TM_RECV) {
			eng->uq_count++;
			eng->st.unexpected++;
		}
		if (qp_failed(c->status))
			peer_fail(eng, peer_of_qpn(eng, c->qp_num));
	} else if (c->opcode == IBV_WC_TM_RECV) {
		const struct ibv_tmh *tmh = (const void *)buf;

		if (c->byte_len < TMH_LEN || (tmh->opcode != IBV_TMH_EAGER &&
					      tmh->opcode != IBV_TMH_RNDV))
			eng->st.malformed++;
		else
			on_unexpected(eng, buf, c);
	} else if (c->opcode == IBV_WC_TM_NO_TAG) {
		on_control(eng, buf, c);
	} else {
		eng->st.malformed++;
	}
	post_plain(eng, idx);
}

/* The card matched r: this is the message's linearisation point. */
static void on_card_match(struct tm_engine *eng, struct tm_recv *r,
			  const struct tm_cqe *c)
{
	uint32_t app = c->tm.priv;
	struct tm_msg *lost = NULL;

	r->flags |= RF_MATCH_SEEN;
	r->on_card = 1;
	env_from_tag(&r->env, c->tm.tag);
	r->peer = peer_of_qpn(eng, c->qp_num);
	r->send_seq = app & TM_APP_SEQ_MASK;
	r->msg_len = c->byte_len;
	if (app & TM_APP_RNDV)
		r->flags |= RF_RNDV;
	r->match_stamp = eng->clock++;
	eng->st.card_matched++;
	if (app & TM_APP_RNDV)
		eng->st.rndv_card++;
	report_arrival(eng, c->tm.tag, app, r->peer,
		       c->status == IBV_WC_TM_RNDV_INCOMPLETE ? 0 : c->byte_len,
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
		send_ack(eng, r->peer, app);
	if (lost)
		handle_unexpected_msg(eng, lost);
}

static void on_card_data(struct tm_engine *eng, struct tm_recv *r,
			 const struct tm_cqe *c)
{
	entry_gone(eng, r);
	switch (c->status) {
	case IBV_WC_SUCCESS:
		if (!(r->flags & RF_RNDV))
			r->msg_len = c->byte_len;
		r->recv_len = r->msg_len;
		recv_finish(eng, r, TM_REQ_OK);
		break;
	case IBV_WC_LOC_LEN_ERR:
		r->msg_len = c->byte_len;
		r->recv_len = r->len;
		recv_finish(eng, r, TM_REQ_TRUNCATED);
		break;
	case IBV_WC_TM_RNDV_INCOMPLETE:
		/* the card left TMH+RVH in the buffer (>= 32 bytes) */
		memcpy(r->hdr, r->buf, TMH_LEN + RVH_LEN);
		sw_rndv_start(eng, r);
		break;
	default:
		r->recv_len = 0;
		if (qp_failed(c->status))
			peer_fail(eng, r->peer); /* before the FIN, not after */
		if (r->flags & RF_RNDV) {
			/* the card sends no FIN after a failed read */
			memset(r->hdr, 0, sizeof(r->hdr));
			tmh_fill(r->hdr, IBV_TMH_RNDV, c->tm.priv, c->tm.tag);
			send_fin(eng, r->peer, r->hdr);
		}
		recv_finish(eng, r, TM_REQ_ERROR);
		break;
	}
}

static void on_recv_cqe(struct tm_engine *eng, struct tm_recv *r,
			const struct tm_cqe *c)
{
	if (!(r->flags & RF_MATCH_SEEN))
		on_card_match(eng, r, c);
	if ((c->flags & IBV_WC_TM_DATA_VALID) || c->status != IBV_WC_SUCCESS)
		on_card_data(eng, r, c);
}

/*
 * The card refused r's ADD: software-held again, in place (post order in
 * its bucket and FIFO), and pinned so that it is not offered again.
 */
static void recv_back_to_sw(struct tm_engine *eng, struct tm_recv *r)
{
	struct tm_swq *q = swq_of(eng, tm_tag_ctx(r->mq.tag), 1);

	if (!q || tm_mq_set_held(&eng->mq, &r->mq, 1) != TM_OK)
		eng->st.errors++;
	r->state = R_SW;
	r->flags |= RF_PINNED;
	if (q)
		swq_insert(eng, q, r);
}

static void on_op_cqe(struct tm_engine *eng, int type, struct tm_recv *r,
		      const struct tm_cqe *c)
{
	const struct tm_sig_op *so;

	if (type == WR_ADD && (r->flags & RF_ADD_UNSIG)) {
		/* an unsignalled ADD's error: it retires nothing, and r is
		 * still posted (a failed ADD cannot have matched) unless a
		 * cancel or claim finished it meanwhile */
		if (c->status != IBV_WC_SUCCESS && r->state != R_DONE) {
			r->ops_pending++; /* on_op_result drops one */
			on_op_result(eng, type, r, c);
		}
		return;
	}
	/* a signalled op: it and every unsignalled op before it retired */
	so = &eng->op_unsig[eng->op_unsig_tail++ % eng->max_ops];
	eng->ops_out -= 1 + so->unsig;
	eng->ops_sig_out--;
	if (c->status == IBV_WC_SUCCESS)
		op_seen(eng, so);
	if (type == WR_SYNC)
		eng->sync_out = 0;
	on_op_result(eng, type, r, c);
}

static void on_op_result(struct tm_engine *eng, int type, struct tm_recv *r,
			 const struct tm_cqe *c)
{
	struct tm_msg *m;

	if (!r)
		return;
	r->ops_pending--;
	if (type == WR_ADD && c->status != IBV_WC_SUCCESS) {
		/* never on the list: behave as software-held from now on */
		eng->st.errors++;
		entry_gone(eng, r);
		if (r->state == R_CARD)
			recv_back_to_sw(eng, r);
	} else if (type == WR_DEL && c->status == IBV_WC_SUCCESS) {
		entry_gone(eng, r);
		if (r->state == R_CLAIM) {
			m = r->claim;
			r->claim = NULL;
			deliver(eng, r, m);
		} else if (r->state == R_CARD) { /* cancel confirmed */
			recv_leave_queues(eng, r);
			r->cancel_stamp = eng->clock++;
			eng->st.cancel_ok++;
			recv_finish(eng, r, TM_REQ_CANCELLED);
		}
	} else if (type == WR_DEL) {
		/* consumed by a message whose completion came first */
		if (r->flags & RF_CANCEL_REQ)
			eng->st.cancel_late++;
	}
	recv_try_done(eng, r);
}

static void on_tm_cqe(struct tm_engine *eng, const struct tm_cqe *c)
{
	int type = (int)(c->wr_id & WR_TYPE_MASK);
	void *p = (void *)(uintptr_t)(c->wr_id & ~WR_TYPE_MASK);

	if (type != WR_RECV || (c->flags & IBV_WC_TM_MATCH)) {
		eng->sync_req = !!(c->flags & IBV_WC_TM_SYNC_REQ);
		eng->st.sync_req_seen += eng->sync_req;
	}
	switch (type) {
	case WR_RECV:
		on_recv_cqe(eng, p, c);
		break;
	case WR_PLAIN:
		on_plain(eng, c);
		break;
	case WR_ADD:
	case WR_DEL:
	case WR_SYNC:
		on_op_cqe(eng, type, p, c);
		break;
	default:
		eng->st.errors++;
	}
}

#define CQE_BATCH 32
/* signal at least every TM_SIG_EVERY-th send WR of a QP */
#define TM_SIG_EVERY 16

/* Copies up to CQE_BATCH completions out, so that handlers may post. */
static int poll_tm_batch(struct tm_engine *eng, struct tm_cqe *out)
{
	struct ibv_cq_ex *cq = eng->dev->tm_cq;
	struct ibv_poll_cq_attr attr = { .comp_mask = 0 };
	int n = 0;

	if (ibv_start_poll(cq, &attr))
		return 0;
	do {
		out[n].wr_id = cq->wr_id;
		out[n].status = cq->status;
		out[n].opcode = ibv_wc_read_opcode(cq);
		out[n].flags = ibv_wc_read_wc_flags(cq);
		out[n].byte_len = ibv_wc_read_byte_len(cq);
		out[n].qp_num = ibv_wc_read_qp_num(cq);
		memset(&out[n].tm, 0, sizeof(out[n].tm));
		if (out[n].opcode == IBV_WC_TM_RECV)
			ibv_wc_read_tm_info(cq, &out[n].tm);
		n++;
	} while (n < CQE_BATCH && ibv_next_poll(cq) == 0);
	ibv_end_poll(cq);
	return n;
}

/* What a kept tx does when its WR completed with status. */
static void tx_complete(struct tm_engine *eng, struct tm_peer *p,
			struct tm_tx *tx, int status)
{
	struct tm_send *s = tx->send;

	switch (tx->type) {
	case TX_RNDV:
		s->waiting &= ~S_WAIT_CQE;
		if (status != IBV_WC_SUCCESS) {
			s->status = TM_REQ_ERROR;
			wait_reply_end(eng, s);
		}
		send_try_done(eng, s);
		break;
	case TX_READ:
		sw_rndv_done(eng, tx->recv, status);
		break;
	case TX_KEEPALIVE:
		p->ka_out = 0;
		break;
	default:
		break;
	}
	tx_free(tx);
}

/* Retires p's oldest WR (it completed with status). */
static void wr_retire(struct tm_engine *eng, struct tm_peer *p, int status)
{
	struct tm_wr *w = &p->wrs[p->wr_tail++ & p->wr_mask];

	p->sq_out--;
	eng->sq_out--;
	if (w->slot >= 0)
		eng->free_slots[eng->n_free_slots++] = (uint32_t)w->slot;
	if (w->sig) {
		p->sig_out--;
		eng->sig_out--;
	}
	if (w->tx)
		tx_complete(eng, p, w->tx, status);
}

/*
 * A completion names its WR by (peer, post count); every earlier WR of
 * that QP completed before it (in order; the unsignalled ones silently).
 */
static void on_send_cqe(struct tm_engine *eng, const struct ibv_wc *wc)
{
	uint32_t peer = (uint32_t)(wc->wr_id >> 32);
	uint32_t n = (uint32_t)wc->wr_id;
	struct tm_peer *p;

	if (peer >= eng->npeers)
		return;
	p = eng->peers[peer];
	/* not outstanding: an unsignalled WR of a dead peer that
	 * tm_engine_idle() already gave up on */
	if (n - p->wr_tail >= p->sq_out)
		return;
	while (p->wr_tail != n)
		wr_retire(eng, p, IBV_WC_SUCCESS);
	if (wc->status != IBV_WC_SUCCESS)
		eng->st.errors++;
	wr_retire(eng, p, wc->status);
	/* any error on an RC QP leaves it in the error state */
	if (wc->status != IBV_WC_SUCCESS)
		peer_fail(eng, p->id);
}

static int poll_send(struct tm_engine *eng)
{
	struct ibv_wc wc[CQE_BATCH];
	int i, n;

	eng->poll_skip = 0;
	n = ibv_poll_cq(eng->dev->send_cq, CQE_BATCH, wc);
	for (i = 0; i < n; i++)
		on_send_cqe(eng, &wc[i]);
	return n > 0 ? n : 0;
}

/*
 * The send CQ is worth a look while a signalled WR is outstanding; with
 * only unsignalled ones out, nothing comes but an error, which can wait a
 * few calls (a waiting send is covered by the keepalive anyway).
 */
static int want_poll_send(struct tm_engine *eng)
{
	return eng->sig_out || (eng->sq_out && ++eng->poll_skip >= 16);
}

/*
 * Processes every completion already in both CQs.  A poll that returned
 * less than a full batch emptied its CQ (the poll runs the card first);
 * what the handlers' own posts complete meanwhile is new, and waits for
 * the next call, so one round is enough unless a batch was full.
 */
static int drain(struct tm_engine *eng)
{
	struct tm_cqe c[CQE_BATCH];
	int i, n, ns, total = 0;

	do {
		n = poll_tm_batch(eng, c);
		for (i = 0; i < n; i++)
			on_tm_cqe(eng, &c[i]);
		ns = want_poll_send(eng) ? poll_send(eng) : 0;
		total += n + ns;
	} while (n == CQE_BATCH || ns == CQE_BATCH);
	return total;
}

static int flush_work(struct tm_engine *eng)
{
	uint32_t i, n_retry = eng->n_repost;

	/* post_plain re-queues what fails again */
	eng->n_repost = 0;
	for (i = 0; i < n_retry; i++)
		post_plain(eng, eng->repost[i]);
	int n = flush_ops(eng);

	n += promote(eng); /* before maybe_sync: an ADD carries the count */
	maybe_sync(eng);
	n += flush_tx(eng);
	return n;
}

/* ---- public API ----------------------------------------------------- */

void tm_engine_config_default(struct tm_engine_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->eager_limit = 8192;
	cfg->n_plain = 256;
	cfg->n_send_slots = 256;
	cfg->offload = 1;
	cfg->keepalive_ms = 1000;
}

static int setup_buffers(struct tm_engine *eng)
{
	size_t sz;
	uint32_t i;

	eng->plain_size = TMH_LEN + (uint32_t)eng->cfg.eager_limit;
	if (eng->plain_size < 64)
		eng->plain_size = 64;
	eng->slot_size = eng->plain_size;
	sz = (size_t)eng->n_plain * eng->plain_size;
	eng->plain = calloc(1, sz);
	eng->repost = calloc(eng->n_plain, sizeof(uint32_t));
	eng->slots = calloc(eng->n_slots, eng->slot_size);
	eng->free_slots = calloc(eng->n_slots, sizeof(uint32_t));
	if (!eng->plain || !eng->repost || !eng->slots || !eng->free_slots)
		return TM_ERR_NO_MEMORY;
	if (tm_dev_reg(eng->dev, eng->plain, sz, 0, &eng->plain_mr) ||
	    tm_dev_reg(eng->dev, eng->slots,
		       (size_t)eng->n_slots * eng->slot_size, 0,
		       &eng->slots_mr))
		return TM_ERR_IO;
	for (i = 0; i < eng->n_slots; i++)
		eng->free_slots[eng->n_free_slots++] = eng->n_slots - 1 - i;
	for (i = 0; i < eng->n_plain; i++)
		post_plain(eng, i);
	return eng->n_repost ? TM_ERR_IO : TM_OK;
}

int tm_engine_create(struct tm_dev *dev, const struct tm_engine_config *cfg,
		     struct tm_engine **out)
{
	struct tm_engine *eng;
	int rc;

	if (!cfg->n_plain || cfg->n_plain >= 32768 || !cfg->n_send_slots)
		return TM_ERR_INVALID;
	eng = calloc(1, sizeof(*eng));
	if (!eng)
		return TM_ERR_NO_MEMORY;
	eng->dev = dev;
	eng->cfg = *cfg;
	eng->n_plain = cfg->n_plain;
	eng->n_slots = cfg->n_send_slots;
	eng->max_entries = dev->caps.max_num_tags;
	if (cfg->max_card_entries && cfg->max_card_entries < eng->max_entries)
		eng->max_entries = cfg->max_card_entries;
	eng->max_ops = dev->caps.max_ops;
	if (!eng->max_ops) {
		free(eng);
		return TM_ERR_INVALID;
	}
	eng->op_unsig = calloc(eng->max_ops, sizeof(*eng->op_unsig));
	eng->sq_limit = dev->qp_max_send_wr > 4 ? dev->qp_max_send_wr / 2 : 1;
	eng->slot_low = eng->n_slots / 4;
	eng->ka_ns = (uint64_t)(cfg->keepalive_ms ? cfg->keepalive_ms : 1000) *
		     1000000ULL;
	ucs_list_head_init(&eng->wait_peers);
	ucs_list_head_init(&eng->opq);
	ucs_list_head_init(&eng->unconf);
	ucs_list_head_init(&eng->done_recv);
	ucs_list_head_init(&eng->done_send);
	ucs_list_head_init(&eng->all_msgs);
	ucs_list_head_init(&eng->all_tx);
	eng->qpn = kh_init(tm_qpn);
	eng->sends = kh_init(tm_sends);
	eng->swq = kh_init(tm_swq);
	ucs_list_head_init(&eng->promo_ready);
	rc = tm_mq_init(&eng->mq);
	if (rc == TM_OK && (!eng->qpn || !eng->sends || !eng->swq ||
			    !eng->op_unsig))
		rc = TM_ERR_NO_MEMORY;
	if (rc == TM_OK)
		rc = setup_buffers(eng);
	if (rc != TM_OK) {
		tm_engine_destroy(eng);
		return rc;
	}
	*out = eng;
	return TM_OK;
}

void tm_engine_destroy(struct tm_engine *eng)
{
	struct tm_msg *m, *mt;
	struct tm_tx *tx, *tt;
	struct tm_op *op, *ot;

	if (!eng)
		return;
	ucs_list_for_each_safe(m, mt, &eng->all_msgs, all)
		free(m);
	ucs_list_for_each_safe(tx, tt, &eng->all_tx, all)
		free(tx);
	ucs_list_for_each_safe(op, ot, &eng->opq, link)
		free(op);
	tm_mq_fini(&eng->mq);
	if (eng->plain_mr)
		tm_dev_dereg(eng->dev, eng->plain_mr);
	if (eng->slots_mr)
		tm_dev_dereg(eng->dev, eng->slots_mr);
	free(eng->plain);
	free(eng->repost);
	free(eng->slots);
	free(eng->free_slots);
	free(eng->op_unsig);
	for (uint32_t i = 0; i < eng->npeers; i++) {
		free(eng->peers[i]->wrs);
		free(eng->peers[i]);
	}
	free(eng->peers);
	if (eng->qpn)
		kh_destroy(tm_qpn, eng->qpn);
	if (eng->sends)
		kh_destroy(tm_sends, eng->sends);
	if (eng->swq) {
		struct tm_swq *q;

		kh_foreach_value(eng->swq, q, free(q));
		kh_destroy(tm_swq, eng->swq);
	}
	free(eng);
}

int tm_engine_add_peer(struct tm_engine *eng, struct ibv_qp *qp,
		       uint32_t *peer)
{
	struct tm_peer **np, *p;
	khiter_t it;
	uint32_t n;
	int ret = 0;

	np = realloc(eng->peers, sizeof(*np) * (eng->npeers + 1));
	if (!np)
		return TM_ERR_NO_MEMORY;
	eng->peers = np;
	p = calloc(1, sizeof(*p));
	if (!p)
		return TM_ERR_NO_MEMORY;
	p->qp = qp;
	p->id = eng->npeers;
	ucs_list_head_init(&p->txq);
	ucs_list_head_init(&p->waitq);
	/* at most sq_limit WRs outstanding: a power of two above it */
	for (n = 1; n <= eng->sq_limit; n <<= 1)
		;
	p->wrs = calloc(n, sizeof(*p->wrs));
	p->wr_mask = n - 1;
	it = p->wrs ? kh_put(tm_qpn, eng->qpn, qp->qp_num, &ret) : 0;
	if (!p->wrs || ret < 0) {
		free(p->wrs);
		free(p);
		return TM_ERR_NO_MEMORY;
	}
	kh_value(eng->qpn, it) = eng->npeers;
	np[eng->npeers] = p;
	*peer = eng->npeers++;
	/* see "Selective signalling" (sq_post) for the bounds */
	n = eng->n_slots / (2 * eng->npeers);
	eng->sig_every = n < 1 ? 1 : n > TM_SIG_EVERY ? TM_SIG_EVERY : n;
	if (eng->sig_every > eng->sq_limit)
		eng->sig_every = eng->sq_limit;
	return TM_OK;
}

/*
 * The eager fast path: nothing queued ahead on a live peer, a slot and a
 * send-queue entry free: copy into the slot, post, and the send is done
 * (or waits for its ACK only), with no tx allocated.  0: take the queue.
 */
static int eager_now(struct tm_engine *eng, struct tm_send *s)
{
	struct tm_peer *p = eng->peers[s->peer];
	uint8_t hdr[TMH_LEN] __attribute__((aligned(8)));
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	int32_t slot;

	if (p->dead || !ucs_list_is_empty(&p->txq) ||
	    p->sq_out >= eng->sq_limit || !eng->n_free_slots)
		return 0;
	if ((s->app_ctx & TM_APP_SYNC) && wait_reply_start(eng, s) != TM_OK)
		return 0;
	tmh_fill(hdr, IBV_TMH_EAGER, s->app_ctx, s->tag);
	slot = slot_fill(eng, hdr, TMH_LEN, s->buf, s->len, &wr, &sge);
	if (sq_post(eng, p, &wr, slot, NULL)) {
		eng->free_slots[eng->n_free_slots++] = (uint32_t)slot;
		if (s->app_ctx & TM_APP_SYNC)
			wait_reply_end(eng, s);
		return 0;
	}
	eng->sends_waiting++;
	s->waiting &= ~S_WAIT_CQE;
	send_try_done(eng, s);
	return 1;
}

int tm_engine_isend(struct tm_engine *eng, struct tm_send *s, uint32_t peer,
		    uint32_t ctx, int32_t src, int32_t tag, const void *buf,
		    size_t len, struct ibv_mr *mr, unsigned flags)
{
	struct tm_tx *tx;
	int ret, reply;

	if (peer >= eng->npeers || ctx > TM_MAX_CTX || src < 0 ||
	    (uint32_t)src > TM_MAX_SRC || len > UINT32_MAX)
		return TM_ERR_RANGE;
	drain(eng);
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
	if (s->kind == TX_EAGER && eager_now(eng, s)) {
		flush_work(eng);
		fire_done(eng);
		return TM_OK;
	}
	tx = tx_new(eng, s->kind, peer);
	if (!tx) {
		if (s->own_mr)
			tm_dev_mem_put(eng->dev, s->mr);
		return TM_ERR_NO_MEMORY;
	}
	tx->send = s;
	if (reply && wait_reply_start(eng, s) != TM_OK) {
		tx_free(tx);
		if (s->own_mr)
			tm_dev_mem_put(eng->dev, s->mr);
		return TM_ERR_NO_MEMORY;
	}
	eng->sends_waiting++;
	tx_queue(eng, tx); /* a dead peer: completes TM_REQ_ERROR at once */
	flush_work(eng);
	fire_done(eng);
	return TM_OK;
}

/* Why r cannot go to the card (a stats counter), or NULL if it can. */
static uint64_t *offload_refusal(struct tm_engine *eng, struct tm_recv *r,
				 uint64_t tag, uint64_t mask)
{
	if (!eng->cfg.offload)
		return &eng->st.sw_no_offload;
	if (!(eng->cfg.faults & TM_FAULT_PREFIX) &&
	    tm_mq_sw_conflict(&eng->mq, tag, mask))
		return &eng->st.sw_conflict;
	if (r->len < TMH_LEN + RVH_LEN || r->len > UINT32_MAX)
		return &eng->st.sw_small_buf;
	if (eng->card_entries >= eng->max_entries)
		return &eng->st.sw_list_full;
	if (!ucs_list_is_empty(&eng->opq) || eng->ops_out >= eng->max_ops)
		return &eng->st.sw_ops_full;
	/* Per-message MRs come from the dev layer's registration cache:
	 * released with tm_dev_mem_put() when the request is done. */
	if (!r->mr) {
		if (tm_dev_mem_get(eng->dev, r->buf, r->len,
				   IBV_ACCESS_LOCAL_WRITE, &r->mr) != TM_OK)
			return &eng->st.sw_reg_fail;
		r->own_mr = 1;
	}
	return NULL;
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
	r->state = R_IDLE;
	r->ops_pending = 0;
	r->flags = 0;
	r->claim = NULL;
}

int tm_engine_irecv(struct tm_engine *eng, struct tm_recv *r, uint32_t ctx,
		    int32_t src, int32_t tag, void *buf, size_t len,
		    struct ibv_mr *mr)
{
	struct tm_mq_msg *q;
	struct tm_swq *swq;
	uint64_t rtag, mask, *why;
	int rc;

	if (ctx > TM_MAX_CTX || (src != TM_ANY_SRC &&
	    (src < 0 || (uint32_t)src > TM_MAX_SRC)))
		return TM_ERR_RANGE;
	drain(eng);
	recv_init(r, buf, len, mr);
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
	r->mq.tag = rtag;
	r->mq.mask = mask;
	promote(eng); /* older software-held receives before this one */
	why = offload_refusal(eng, r, rtag, mask);
	if (!why && card_add(eng, r))
		why = &eng->st.sw_list_full;
	/* a software-held receive must be in its FIFO, or a later one of
	 * its context could be promoted past it: no FIFO, no receive */
	swq = why ? swq_of(eng, ctx, 1) : NULL;
	if (why && !swq) {
		if (r->own_mr)
			tm_dev_mem_put(eng->dev, r->mr);
		return TM_ERR_NO_MEMORY;
	}
	if (why)
		(*why)++;
	else
		eng->st.recv_to_card++;
	rc = tm_mq_post(&eng->mq, &r->mq, rtag, mask, r->post_stamp, !!why);
	if (rc != TM_OK)
		return rc;
	r->state = why ? R_SW : R_CARD;
	if (why) {
		if (never_on_card(eng, r) || why == &eng->st.sw_reg_fail)
			r->flags |= RF_PINNED;
		swq_insert(eng, swq, r);
	}
out:
	flush_work(eng);
	fire_done(eng);
	return TM_OK;
}

int tm_engine_cancel_recv(struct tm_engine *eng, struct tm_recv *r)
{
	drain(eng);
	if (r->state == R_SW) {
		recv_leave_queues(eng, r);
		r->cancel_stamp = eng->clock++;
		eng->st.cancel_ok++;
		recv_finish(eng, r, TM_REQ_CANCELLED);
	} else if (r->state == R_CARD) {
		r->flags |= RF_CANCEL_REQ;
		if (!(r->flags & RF_DEL_POSTED)) {
			r->flags |= RF_DEL_POSTED;
			op_decide(eng, WR_DEL, r);
		}
	}
	flush_work(eng);
	fire_done(eng);
	return TM_OK;
}

static struct tm_msg *probe(struct tm_engine *eng, uint32_t ctx, int32_t src,
			    int32_t tag, struct tm_probe_info *info)
{
	struct tm_mq_msg *q;
	struct tm_msg *m;
	uint64_t rtag, mask;

	drain(eng);
	tm_tag_recv(ctx, src, tag, &rtag, &mask);
	q = tm_mq_find_msg(&eng->mq, rtag, mask);
	info->stamp = eng->clock++;
	if (!q)
		return NULL;
	m = ucs_container_of(q, struct tm_msg, mq);
	env_from_tag(&info->env, m->tag);
	info->len = m->len;
	info->peer = m->peer;
	info->send_seq = m->app & TM_APP_SEQ_MASK;
	return m;
}

int tm_engine_iprobe(struct tm_engine *eng, uint32_t ctx, int32_t src,
		     int32_t tag, struct tm_probe_info *info)
{
	struct tm_msg *m;

	if (ctx > TM_MAX_CTX)
		return TM_ERR_RANGE;
	m = probe(eng, ctx, src, tag, info);
	flush_work(eng);
	fire_done(eng);
	return m ? TM_OK : TM_ERR_NOT_FOUND;
}

int tm_engine_improbe(struct tm_engine *eng, uint32_t ctx, int32_t src,
		      int32_t tag, struct tm_msg **msg,
		      struct tm_probe_info *info)
{
	struct tm_msg *m;

	if (ctx > TM_MAX_CTX)
		return TM_ERR_RANGE;
	m = probe(eng, ctx, src, tag, info);
	if (m)
		tm_mq_msg_remove(&eng->mq, &m->mq);
	*msg = m;
	flush_work(eng);
	fire_done(eng);
	return m ? TM_OK : TM_ERR_NOT_FOUND;
}

int tm_engine_imrecv(struct tm_engine *eng, struct tm_recv *r,
		     struct tm_msg *msg, void *buf, size_t len,
		     struct ibv_mr *mr)
{
	if (!msg)
		return TM_ERR_INVALID;
	drain(eng);
	recv_init(r, buf, len, mr);
	r->post_stamp = eng->clock++;
	deliver(eng, r, msg);
	flush_work(eng);
	fire_done(eng);
	return TM_OK;
}

int tm_engine_progress(struct tm_engine *eng)
{
	int n = drain(eng);

	keepalive_scan(eng);
	n += flush_work(eng);
	fire_done(eng);
	return n;
}

void tm_engine_get_stats(struct tm_engine *eng, struct tm_engine_stats *st)
{
	*st = eng->st;
	st->card_entries = eng->card_entries;
	st->ops_outstanding = eng->ops_out;
	st->ops_in_queue = eng->opq_len;
	st->posted = eng->mq.nrecvs;
	st->sw_held = eng->mq.nsw_held;
	st->uq_len = eng->mq.nmsgs;
	st->sends_waiting = eng->sends_waiting;
	st->tx_queued = eng->tx_queued;
	st->reads_active = eng->reads_active;
	st->unexpected_cnt = eng->reported;
}

int tm_engine_idle(struct tm_engine *eng)
{
	struct tm_peer *p;
	uint32_t i;

	/* unsignalled ADDs may stay outstanding on the card: their entries
	 * are either still posted receives or consumed */
	if (eng->ops_sig_out || eng->opq_len || eng->tx_queued ||
	    eng->reads_active || eng->sends_waiting)
		return 0;
	if (!eng->sq_out)
		return 1;
	/*
	 * Only unsignalled WRs may be left: nothing would ever retire them
	 * (and an ACK or FIN among them may not have left yet).  A live
	 * peer gets a signalled keepalive behind them; a dead peer's are
	 * given up (its QP completes nothing more).  Idle on a later call.
	 */
	if (poll_send(eng) && !eng->sq_out)
		return 1;
	if (eng->sig_out)
		return 0;
	for (i = 0; i < eng->npeers; i++) {
		p = eng->peers[i];
		if (!p->sq_out)
			continue;
		if (p->dead) {
			while (p->sq_out)
				wr_retire(eng, p, IBV_WC_WR_FLUSH_ERR);
		} else if (!p->ka_out) {
			send_keepalive(eng, p, now_ns());
		}
	}
	flush_tx(eng);
	return !eng->sq_out;
}
