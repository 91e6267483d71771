/*
 * tm_engine.c - the engine's lifecycle and completion dispatch: create,
 * destroy, peers, the plain (unexpected/control) receive buffers, polling
 * both CQs and handing each completion to its module, progress.
 *
 * Contract: tm_engine.h (public), tm_engine_priv.h (the modules).  Every
 * public entry point runs tme_drain() first (an eager send only when its
 * fast path is blocked: sends take no stamp), then its own work, then
 * tme_flush_work() and tme_fire_done(), so callbacks never run inside CQ
 * polling and queued work moves on every call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "engine/tm_engine_priv.h"

/*
 * (Re)posts plain buffer idx.  The engine never has more plain buffers out
 * than the SRQ holds, so a refusal will not go away: the engine stops, as
 * without its plain buffers no unexpected or control message can arrive.
 */
void tme_post_plain(struct tm_engine *eng, uint32_t idx)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;
	int ret;

	sge.addr = (uintptr_t)(eng->plain + (size_t)idx * eng->plain_size);
	sge.length = eng->plain_size;
	sge.lkey = eng->plain_mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = ((uint64_t)idx << 3) | WR_PLAIN;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ret = tme_fault(eng, TM_SITE_POST_PLAIN);
	if (!ret)
		ret = ibv_post_srq_recv(eng->dev->srq, &wr, &bad);
	if (ret) {
		eng->st.post_failures++;
		tme_engine_fatal(eng, TM_ERR_IO);
	}
}

/*
 * Without a card every message lands in a plain buffer as IBV_WC_RECV:
 * the engine reads the TMH the card would have, and refuses what a card
 * refuses (doc/mlx5-rules.md: too short for its TMH, or an RNDV for its
 * RVH; an unknown opcode).  1: the message holds on to the buffer.
 */
static int on_plain_no_card(struct tm_engine *eng, uint8_t *buf, uint32_t idx,
			    const struct tm_cqe *c)
{
	const struct ibv_tmh *tmh = (const void *)buf;
	uint32_t need = c->byte_len >= TMH_LEN && tmh->opcode == IBV_TMH_RNDV ?
			TMH_LEN + RVH_LEN : TMH_LEN;

	if (c->byte_len < need) {
		eng->st.malformed++;
		return 0;
	}
	switch (tmh->opcode) {
	case IBV_TMH_EAGER:
	case IBV_TMH_RNDV:
		return tme_on_unexpected(eng, buf, idx, c);
	case IBV_TMH_NO_TAG:
	case IBV_TMH_FIN:
		tme_on_control(eng, buf, c);
		return 0;
	}
	eng->st.malformed++;
	return 0;
}

static void on_plain(struct tm_engine *eng, const struct tm_cqe *c)
{
	uint32_t idx = (uint32_t)(c->wr_id >> 3);
	uint8_t *buf = eng->plain + (size_t)idx * eng->plain_size;

	if (c->status != IBV_WC_SUCCESS) {
		eng->st.errors++;
		/* A tagged message the card decided unexpected (and counted,
		 * at its first packet) whose connection failed before the
		 * rest came.  Count it as the card did: a count one short
		 * leaves every later ADD inactive, for good, on every peer. */
		if (c->opcode == IBV_WC_TM_RECV) {
			eng->uq_count++;
			tme_pend(eng, TM_PEND_WORK);
			eng->st.unexpected++;
		}
		if (tme_qp_failed(c->status))
			tme_peer_fail(eng, tme_peer_of_qpn(eng, c->qp_num));
	} else if (c->opcode == IBV_WC_TM_RECV) {
		const struct ibv_tmh *tmh = (const void *)buf;

		if (c->byte_len < TMH_LEN || (tmh->opcode != IBV_TMH_EAGER &&
					      tmh->opcode != IBV_TMH_RNDV))
			eng->st.malformed++;
		else if (tme_on_unexpected(eng, buf, idx, c))
			return; /* the message holds on to the buffer */
	} else if (c->opcode == IBV_WC_TM_NO_TAG) {
		tme_on_control(eng, buf, c);
	} else if (eng->no_card && c->opcode == IBV_WC_RECV) {
		if (on_plain_no_card(eng, buf, idx, c))
			return;
	} else {
		eng->st.malformed++;
	}
	tme_post_plain(eng, idx);
}

/* Dispatches one TM-CQ completion by the type in its wr_id. */
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
		tme_on_recv_cqe(eng, p, c);
		break;
	case WR_PLAIN:
		on_plain(eng, c);
		break;
	case WR_ADD:
	case WR_DEL:
	case WR_SYNC:
		tme_on_op_cqe(eng, type, p, c);
		break;
	default:
		eng->st.errors++;
	}
}

/*
 * Copies the current completion and up to CQE_BATCH - 1 more out of the
 * CQ (handlers may post, which they may not do inside a poll), then hands
 * each to its module.  Only the fields the completion's type uses are
 * read: each ibv_wc_read_* is an indirect call.  Out of line, so that the
 * empty poll of an idle progress call does not pay for the batch's frame.
 */
static __attribute__((noinline)) int tm_batch(struct tm_engine *eng,
					      struct ibv_cq_ex *cq)
{
	struct tm_cqe c[CQE_BATCH], *e;
	int i, n = 0, type;

	do {
		e = &c[n++];
		e->wr_id = cq->wr_id;
		e->status = cq->status;
		e->flags = ibv_wc_read_wc_flags(cq);
		type = (int)(e->wr_id & WR_TYPE_MASK);
		if (type != WR_RECV && type != WR_PLAIN) {
			/* list ops: status and flags only */
			e->opcode = 0;
			e->byte_len = 0;
			e->qp_num = 0;
			memset(&e->tm, 0, sizeof(e->tm));
			continue;
		}
		e->byte_len = ibv_wc_read_byte_len(cq);
		e->qp_num = ibv_wc_read_qp_num(cq);
		/* MATCH comes only on a TM_RECV completion: the opcode
		 * need not be asked for (tm_recv.c never looks at it) */
		if (type == WR_RECV && (e->flags & IBV_WC_TM_MATCH))
			e->opcode = IBV_WC_TM_RECV;
		else
			e->opcode = ibv_wc_read_opcode(cq);
		if (e->opcode == IBV_WC_TM_RECV)
			ibv_wc_read_tm_info(cq, &e->tm);
		else
			memset(&e->tm, 0, sizeof(e->tm));
	} while (n < CQE_BATCH && ibv_next_poll(cq) == 0);
	ibv_end_poll(cq);
	for (i = 0; i < n; i++)
		on_tm_cqe(eng, &c[i]);
	return n;
}

/*
 * Processes every completion already in both CQs, after tme_drain (inline,
 * tm_engine_priv.h) made the first TM-CQ poll (rc) and decided whether the
 * send CQ is due (want_send).  A poll that returned less than a full
 * batch emptied its CQ (the poll runs the card first); what the handlers'
 * own posts complete meanwhile is new, and waits for the next call, so one
 * round is enough unless a batch was full.
 */
int tme_drain_from(struct tm_engine *eng, int rc, int want_send)
{
	struct ibv_cq_ex *cq = eng->dev->tm_cq;
	int n, ns, total = 0;

	for (;;) {
		n = 0;
		if (rc == TM_OK)
			n = tm_batch(eng, cq);
		else if (rc != TM_ERR_NOT_FOUND)
			/* empty is ENOENT only; any other answer is a CQ
			 * that failed (doc/mlx5-rules.md rule 20): nothing
			 * will arrive again */
			tme_engine_fatal(eng, TM_ERR_IO);
		ns = want_send ? tme_poll_send(eng) : 0;
		total += n + ns;
		if (n != CQE_BATCH && ns != CQE_BATCH)
			return total;
		rc = tm_dev_start_poll(cq);
		want_send = tme_want_poll_send(eng);
	}
}

int tme_flush_work_slow(struct tm_engine *eng)
{
	int n = 0;

	if (eng->fatal)
		return 0; /* stopped: no more posts */
	/* Each test below is the first test of the function it guards, so
	 * the common nothing-to-do case costs no call into another module. */
	if (!ucs_list_is_empty(&eng->opq))
		n += tme_flush_ops(eng);
	/* before maybe_sync: an ADD carries the count */
	if (!ucs_list_is_empty(&eng->promo_ready))
		n += tme_promote(eng);
	if (tme_count_now(eng) != eng->reported)
		tme_maybe_sync(eng);
	if (!ucs_list_is_empty(&eng->owed))
		n += tme_recv_pay_owed(eng);
	if (eng->cancel_owed_head != eng->cancel_owed_tail)
		n += tme_cancel_pay_owed(eng);
	if (eng->tx_queued)
		n += tme_flush_tx(eng);
	/* the handlers above may have queued more, or left some: look at
	 * what is really there */
	if (ucs_list_is_empty(&eng->opq) &&
	    (ucs_list_is_empty(&eng->promo_ready) || eng->promo_stuck) &&
	    !tme_sync_wanted(eng) &&
	    ucs_list_is_empty(&eng->owed) &&
	    eng->cancel_owed_head == eng->cancel_owed_tail && !eng->tx_queued)
		eng->pending &= ~TM_PEND_WORK;
	return n;
}

/* ---- public API ----------------------------------------------------- */

#define TM_KEEPALIVE_MS_DEFAULT 1000

_Static_assert(TMH_LEN == 16, "TM_ENGINE_EAGER_LIMIT_MAX counts a 16-byte TMH");

void tm_engine_config_default(struct tm_engine_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->eager_limit = 8192;
	cfg->n_plain = 256;
	cfg->n_send_slots = 256;
	cfg->offload = 1;
	cfg->keepalive_ms = TM_KEEPALIVE_MS_DEFAULT;
}

int tm_engine_config_check(const struct tm_engine_config *cfg,
			   enum tm_engine_setting *bad)
{
	enum tm_engine_setting b = TM_SETTING_NONE;

	if (cfg->eager_limit > TM_ENGINE_EAGER_LIMIT_MAX)
		b = TM_SETTING_EAGER_LIMIT;
	else if (cfg->n_plain < TM_ENGINE_N_PLAIN_MIN ||
		 cfg->n_plain > TM_ENGINE_N_PLAIN_MAX)
		b = TM_SETTING_N_PLAIN;
	else if (cfg->n_send_slots < TM_ENGINE_N_SEND_SLOTS_MIN ||
		 cfg->n_send_slots > TM_ENGINE_N_SEND_SLOTS_MAX)
		b = TM_SETTING_N_SEND_SLOTS;
	else if (cfg->keepalive_ms > TM_KEEPALIVE_MAX_MS)
		b = TM_SETTING_KEEPALIVE_MS;
	if (bad)
		*bad = b;
	return b == TM_SETTING_NONE ? TM_OK : TM_ERR_INVALID;
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
	eng->msg_pool = calloc(eng->n_plain, sizeof(*eng->msg_pool));
	eng->slots = calloc(eng->n_slots, eng->slot_size);
	eng->free_slots = calloc(eng->n_slots, sizeof(uint32_t));
	if (!eng->plain || !eng->msg_pool || !eng->slots || !eng->free_slots)
		return TM_ERR_NO_MEMORY;
	if (tm_dev_reg(eng->dev, eng->plain, sz, 0, &eng->plain_mr) ||
	    tm_dev_reg(eng->dev, eng->slots,
		       (size_t)eng->n_slots * eng->slot_size, 0,
		       &eng->slots_mr))
		return TM_ERR_IO;
	for (i = 0; i < eng->n_slots; i++)
		eng->free_slots[eng->n_free_slots++] = eng->n_slots - 1 - i;
	for (i = 0; i < eng->n_plain && !eng->fatal; i++)
		tme_post_plain(eng, i);
	return eng->fatal ? TM_ERR_IO : TM_OK;
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
	eng->dev = dev;
	eng->cfg = *cfg;
	if (cfg->test)
		eng->test = *cfg->test;
	/* TM_FAULT_SYNC_AHEAD: a count to report before any arrival */
	tme_pend(eng, TM_PEND_WORK);
	eng->cfg.test = NULL; /* the caller's copy need not outlive create */
	eng->n_plain = cfg->n_plain;
	eng->n_slots = cfg->n_send_slots;
	eng->max_entries = dev->caps.max_num_tags;
	if (cfg->max_card_entries && cfg->max_card_entries < eng->max_entries)
		eng->max_entries = cfg->max_card_entries;
	eng->max_ops = dev->caps.max_ops;
	/* A device without tag matching is a card with no list: every
	 * receive stays in software, and no list op is ever posted. */
	eng->no_card = !dev->tm;
	if (eng->no_card) {
		eng->cfg.offload = 0;
		eng->max_entries = eng->max_ops = 0;
	} else if (!eng->max_ops) {
		free(eng);
		return TM_ERR_INVALID;
	}
	/* Below 2^32 - 1, so that the saturated RVH length of a longer
	 * message exceeds every card buffer (doc/DESIGN.md, "Long messages");
	 * a device that reports nothing gets a ConnectX's 1 GiB. */
	eng->max_read = dev->max_msg_sz ? dev->max_msg_sz : 1u << 30;
	if (eng->max_read > UINT32_MAX - 1)
		eng->max_read = UINT32_MAX - 1;
	if (eng->max_read < TMH_LEN + cfg->eager_limit) {
		free(eng);
		return TM_ERR_INVALID; /* an eager message would not fit */
	}
	eng->op_unsig = calloc(eng->max_ops + 1, sizeof(*eng->op_unsig));
	eng->sq_limit = dev->qp_max_send_wr > 4 ? dev->qp_max_send_wr / 2 : 1;
	eng->slot_low = eng->n_slots / 4;
	eng->ka_ns = (uint64_t)(cfg->keepalive_ms ? cfg->keepalive_ms :
				TM_KEEPALIVE_MS_DEFAULT) *
		     1000000ULL;
	ucs_list_head_init(&eng->wait_peers);
	ucs_list_head_init(&eng->rwait_peers);
	ucs_list_head_init(&eng->opq);
	ucs_list_head_init(&eng->unconf);
	ucs_list_head_init(&eng->done_recv);
	ucs_list_head_init(&eng->done_send);
	ucs_list_head_init(&eng->all_msgs);
	ucs_list_head_init(&eng->msg_free);
	ucs_list_head_init(&eng->owed);
	ucs_list_head_init(&eng->all_tx);
	eng->qpn = kh_init(tm_qpn);
	for (uint32_t i = 0; i < TM_QPN_CACHE; i++)
		eng->qpn_cache[i].peer = UINT32_MAX;
	eng->sends = kh_init(tm_sends);
	eng->swq = kh_init(tm_swq);
	ucs_list_head_init(&eng->promo_ready);
	rc = tm_mq_init(&eng->mq);
	if (rc == TM_OK && (!eng->qpn || !eng->sends || !eng->swq ||
			    !eng->op_unsig))
		rc = TM_ERR_NO_MEMORY;
	if (rc == TM_OK)
		rc = setup_buffers(eng);
	if (rc == TM_OK)
		rc = tme_stage_setup(eng);
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

	if (!eng)
		return;
	ucs_list_for_each_safe(m, mt, &eng->all_msgs, all)
		if (m->plain < 0)
			free(m);
	ucs_list_for_each_safe(m, mt, &eng->msg_free, all)
		free(m);
	ucs_list_for_each_safe(tx, tt, &eng->all_tx, all)
		free(tx);
	tm_mq_fini(&eng->mq);
	if (eng->plain_mr)
		tm_dev_dereg(eng->dev, eng->plain_mr);
	if (eng->slots_mr)
		tm_dev_dereg(eng->dev, eng->slots_mr);
	free(eng->plain);
	free(eng->msg_pool);
	free(eng->slots);
	free(eng->free_slots);
	free(eng->op_unsig);
	tme_stage_cleanup(eng);
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

/* Completions name the QP a message arrived on: both map to the peer. */
static int map_qpn(struct tm_engine *eng, const struct ibv_qp *qp,
		   uint32_t peer)
{
	int ret;
	khiter_t it = kh_put(tm_qpn, eng->qpn, qp->qp_num, &ret);

	if (ret < 0)
		return TM_ERR_NO_MEMORY;
	kh_value(eng->qpn, it) = peer;
	eng->qpn_cache[qp->qp_num & (TM_QPN_CACHE - 1)].peer = UINT32_MAX;
	return TM_OK;
}

int tm_engine_add_peer(struct tm_engine *eng, const struct tm_dev_pair *qps,
		       uint32_t *peer)
{
	struct tm_peer **np, *p;
	uint32_t n;

	np = realloc(eng->peers, sizeof(*np) * (eng->npeers + 1));
	if (!np)
		return TM_ERR_NO_MEMORY;
	eng->peers = np;
	p = calloc(1, sizeof(*p));
	if (!p)
		return TM_ERR_NO_MEMORY;
	p->qp = qps->tx;
	p->id = eng->npeers;
	p->max_inline = qps->tx_max_inline;
	ucs_list_head_init(&p->txq);
	ucs_list_head_init(&p->waitq);
	ucs_list_head_init(&p->recvq);
	/* at most sq_limit WRs outstanding: a power of two above it */
	for (n = 1; n <= eng->sq_limit; n <<= 1)
		;
	p->wrs = calloc(n, sizeof(*p->wrs));
	p->wr_mask = n - 1;
	if (!p->wrs || map_qpn(eng, qps->tx, p->id) ||
	    (qps->rx && map_qpn(eng, qps->rx, p->id))) {
		free(p->wrs);
		free(p);
		return TM_ERR_NO_MEMORY;
	}
	np[eng->npeers] = p;
	*peer = eng->npeers++;
	/* see "Selective signalling" (sq_post) for the bounds */
	n = eng->n_slots / (2 * eng->npeers);
	eng->sig_every = n < 1 ? 1 : n > TM_SIG_EVERY ? TM_SIG_EVERY : n;
	if (eng->sig_every > eng->sq_limit)
		eng->sig_every = eng->sq_limit;
	eng->sig_max = eng->sq_limit / 2 > eng->sig_every ?
		       eng->sq_limit / 2 : eng->sig_every;
	return TM_OK;
}

int tm_engine_progress(struct tm_engine *eng)
{
	int n;

	if (eng->fatal)
		return eng->fatal;
	n = tme_drain(eng);
	if (!eng->pending)
		return n;
	if (eng->pending & TM_PEND_WAIT)
		tme_keepalive_scan(eng);
	n += tme_flush_work(eng);
	tme_fire_done(eng);
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
	st->fatal = eng->fatal;
}

int tm_engine_idle(struct tm_engine *eng)
{
	/* unsignalled ADDs may stay outstanding on the card: their entries
	 * are either still posted receives or consumed */
	if (eng->ops_sig_out || eng->opq_len || eng->tx_queued ||
	    eng->reads_active || eng->sends_waiting)
		return 0;
	if (!eng->sq_out)
		return 1;
	return tme_tx_idle(eng);
}
