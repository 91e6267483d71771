/*
 * tm_api.c - the top of the engine: create and destroy (the modules'
 * parts, bottom up), peers, progress, statistics, and the transport's
 * callbacks.
 *
 * Contract: every public entry point (here, and in the module it
 * concerns) runs tmx_drain() first (an eager send only when its fast path
 * is blocked: sends take no stamp), then its module's work, then
 * tme_call_end() (tm_work.h), so callbacks never run inside CQ polling and
 * queued work moves on every call.  The transport's news lands here
 * (struct tmx_cb) and goes to the protocol module it concerns.
 */
#include <stdlib.h>
#include <string.h>
#include "engine/tm_cancel.h"
#include "engine/tm_offload.h"
#include "engine/tm_recv.h"
#include "engine/tm_reply.h"
#include "engine/tm_rx.h"
#include "engine/tm_send.h"
#include "engine/tm_tx.h"
#include "engine/tm_umem.h"
#include "engine/tm_work.h"

/* ---- what the transport reports ------------------------------------- */

static void cb_op_done(void *arg, int type, struct tm_tctx *t,
		       const struct tm_cqe *c)
{
	if (t) /* a SYNC names no receive */
		tme_on_op_result(arg, type, recv_of_tctx(t), c);
}

static int cb_unexpected(void *arg, uint8_t *buf, uint32_t idx,
			 const struct tm_cqe *c)
{
	return tme_on_unexpected(arg, buf, idx, c);
}

/* A NO_TAG or FIN message: a reply a waiting send expects, a cancel's
 * request or answer, or a keepalive. */
static void cb_control(void *arg, const uint8_t *buf, const struct tm_cqe *c)
{
	struct tm_engine *eng = arg;
	const struct ibv_tmh *tmh = (const void *)buf;
	uint32_t app = be32toh(tmh->app_ctx);
	uint32_t peer = tmx_peer_of_qpn(&eng->x, c->qp_num);

	if (c->byte_len < TMH_LEN) {
		eng->x.st.malformed++;
		return;
	}
	if (tmh->opcode == IBV_TMH_NO_TAG) {
		switch ((app & TM_APP_CTRL_MASK) >> TM_APP_CTRL_SHIFT) {
		case TM_CTRL_KEEPALIVE:
			/* the transport's acknowledgement is the point */
			eng->x.st.keepalives_recv++;
			return;
		case TM_CTRL_CANCEL_REQ:
			tme_on_cancel_req(eng, peer, app);
			return;
		case TM_CTRL_CANCEL_REP:
			tme_on_cancel_rep(eng, peer, app, be64toh(tmh->tag));
			return;
		case TM_CTRL_ACK:
			break;
		default:
			eng->x.st.malformed++;
			return;
		}
	}
	tme_send_on_reply(eng, peer, app, tmh->opcode);
}

/* Nothing comes from peer or goes to it again: what waits on it fails. */
static void cb_peer_failed(void *arg, uint32_t peer)
{
	tme_send_peer_dead(arg, peer);
	tme_recv_peer_dead(arg, peer);
}

static const struct tmx_cb engine_cb = {
	.recv = tme_on_recv_cqe, /* the hot one: no wrapper */
	.op_done = cb_op_done,
	.unexpected = cb_unexpected,
	.control = cb_control,
	.peer_failed = cb_peer_failed,
};

/* ---- create, destroy, peers ------------------------------------------ */

/* The transport's settings, from the device and the configuration. */
static int xport_setup(struct tm_xport *x, struct tm_dev *dev,
		       const struct tm_engine_config *cfg)
{
	x->dev = dev;
	x->cfg = *cfg;
	if (cfg->test)
		x->test = *cfg->test;
	x->cfg.test = NULL; /* the caller's copy need not outlive create */
	/* TM_FAULT_SYNC_AHEAD: a count to report before any arrival */
	tmx_pend(x, TM_PEND_WORK);
	x->cb = &engine_cb;
	x->plain.n = cfg->n_plain;
	x->plain.size = TMH_LEN + (uint32_t)cfg->eager_limit;
	if (x->plain.size < 64)
		x->plain.size = 64;
	x->tx.n_slots = cfg->n_send_slots;
	x->ops.max_entries = dev->caps.max_num_tags;
	if (cfg->max_card_entries && cfg->max_card_entries < x->ops.max_entries)
		x->ops.max_entries = cfg->max_card_entries;
	x->ops.max_ops = dev->caps.max_ops;
	/* A device without tag matching is a card with no list: every
	 * receive stays in software, and no list op is ever posted. */
	x->no_card = !dev->tm;
	x->cq_batch = dev->cq_poll_max < CQE_BATCH ? (int)dev->cq_poll_max :
		      CQE_BATCH;
	if (x->cq_batch < 1)
		x->cq_batch = 1;
	if (x->no_card) {
		x->cfg.offload = 0;
		x->ops.max_entries = x->ops.max_ops = 0;
	} else if (!x->ops.max_ops) {
		return TM_ERR_INVALID;
	}
	/* neither changes after this: asked on every receive, kept */
	x->has_card = x->cfg.offload && x->ops.max_entries;
	/* Below 2^32 - 1, so that the saturated RVH length of a longer
	 * message exceeds every card buffer (doc/DESIGN.md, "Long messages");
	 * a device that reports nothing gets a ConnectX's 1 GiB. */
	x->max_read = dev->max_msg_sz ? dev->max_msg_sz : 1u << 30;
	if (x->max_read > UINT32_MAX - 1)
		x->max_read = UINT32_MAX - 1;
	if (x->max_read < TMH_LEN + cfg->eager_limit)
		return TM_ERR_INVALID; /* an eager message would not fit */
	return TM_OK;
}

int tm_engine_create(struct tm_dev *dev, const struct tm_engine_config *cfg,
		     struct tm_engine **out)
{
	struct tm_engine *eng;
	int rc;

	if (tm_engine_config_check(cfg, NULL) != TM_OK)
		return TM_ERR_INVALID;
	eng = calloc(1, sizeof(*eng));
	if (!eng)
		return TM_ERR_NO_MEMORY;
	rc = xport_setup(&eng->x, dev, cfg);
	if (rc != TM_OK) {
		free(eng);
		return rc;
	}
	eng->x.cb_arg = eng;
	ucs_list_head_init(&eng->done_recv);
	ucs_list_head_init(&eng->done_send);
	tme_reply_init(eng);
	rc = tm_mq_init(&eng->mq);
	if (rc == TM_OK)
		rc = tmx_tx_init(&eng->x, eng->x.plain.size);
	if (rc == TM_OK)
		rc = tmx_rx_init(&eng->x);
	if (rc == TM_OK)
		rc = tmx_ops_init(&eng->x);
	if (rc == TM_OK)
		rc = tme_recv_init(eng);
	if (rc == TM_OK)
		rc = tme_offload_init(eng);
	if (rc == TM_OK)
		rc = tme_send_init(eng);
	if (rc != TM_OK) {
		tm_engine_destroy(eng);
		return rc;
	}
	*out = eng;
	return TM_OK;
}

void tm_engine_destroy(struct tm_engine *eng)
{
	if (!eng)
		return;
	tme_send_cleanup(eng);
	tme_offload_cleanup(eng);
	tme_recv_cleanup(eng);
	tm_mq_fini(&eng->mq);
	tmx_ops_cleanup(&eng->x);
	tmx_rx_cleanup(&eng->x);
	tmx_tx_cleanup(&eng->x);
	free(eng);
}

int tm_engine_add_peer(struct tm_engine *eng, const struct tm_dev_pair *qps,
		       uint32_t *peer)
{
	uint32_t id = eng->x.npeers;
	int rc = tme_send_add_peer(eng, id);

	if (rc == TM_OK)
		rc = tmx_add_peer(&eng->x, qps, peer);
	if (rc != TM_OK && eng->peers && eng->x.npeers == id) {
		free(eng->peers[id]);
		eng->peers[id] = NULL;
	}
	return rc;
}

int tm_engine_add_peer_held(struct tm_engine *eng,
			    const struct tm_dev_pair *qps, uint32_t *peer)
{
	int rc = tm_engine_add_peer(eng, qps, peer);

	if (rc == TM_OK)
		tmx_peer_hold(&eng->x, eng->x.peers[*peer]);
	return rc;
}

void tm_engine_peer_release(struct tm_engine *eng, uint32_t peer)
{
	tmx_peer_release(&eng->x, peer);
}

void tm_engine_peer_fail(struct tm_engine *eng, uint32_t peer)
{
	tmx_peer_fail(&eng->x, peer);
	tme_fire_done(eng);
}

/* ---- progress and state ---------------------------------------------- */

int tm_engine_progress(struct tm_engine *eng)
{
	int n;

	/* one test for both: stopped, or ADDs chained since the last call
	 * (posted before the poll lets the card look at arrivals) */
	if (eng->x.fatal | (int)eng->x.ops.chain_n) {
		tmx_add_flush(&eng->x);
		if (eng->x.fatal)
			return eng->x.fatal;
	}
	n = tmx_drain(&eng->x);
	if (!eng->x.pending)
		return n;
	if (eng->x.pending & TM_PEND_WAIT)
		tme_keepalive_tick(eng);
	if (eng->x.pending & TM_PEND_HELD)
		n += tme_umem_spill(eng);
	n += tme_flush_work(eng);
	tme_fire_done(eng);
	return n;
}

void tm_engine_get_stats(struct tm_engine *eng, struct tm_engine_stats *st)
{
	*st = eng->x.st;
	st->card_entries = eng->x.ops.card_entries;
	st->card_entries_max = eng->x.ops.card_entries_max;
	st->ops_outstanding = eng->x.ops.ops_out;
	st->ops_in_queue = eng->x.ops.opq_len;
	st->posted = eng->mq.nrecvs;
	/* without a card every posted receive is in software, uncounted
	 * (tme_recv_place) */
	st->sw_held = tmx_has_card(&eng->x) ? eng->mq.nsw_held :
		      eng->mq.nrecvs;
	st->uq_len = eng->mq.nmsgs;
	st->sends_waiting = eng->send.sends_waiting;
	st->tx_queued = eng->x.tx.tx_queued;
	st->send_slots_busy = eng->x.tx.n_slots - eng->x.tx.n_free_slots;
	st->reads_active = eng->reply.reads_active;
	st->unexp_mem = eng->recv.copy_bytes;
	st->unexp_held = eng->recv.n_held;
	st->unexpected_cnt = eng->x.ops.reported;
	st->fatal = eng->x.fatal;
}

void tm_engine_ctx_queues(struct tm_engine *eng, uint32_t ctx,
			  uint64_t *posted, uint64_t *unexpected)
{
	tm_mq_count_ctx(&eng->mq, ctx, posted, unexpected);
}

int tm_engine_idle(struct tm_engine *eng)
{
	/* unsignalled ADDs may stay outstanding on the card: their entries
	 * are either still posted receives or consumed */
	if (eng->x.ops.ops_sig_out || eng->x.ops.opq_len ||
	    eng->x.ops.chain_n || eng->x.ops.add_failed ||
	    eng->x.tx.tx_queued || eng->reply.reads_active ||
	    eng->send.sends_waiting)
		return 0;
	if (!eng->x.tx.sq_out)
		return 1;
	return tmx_tx_idle(&eng->x);
}
