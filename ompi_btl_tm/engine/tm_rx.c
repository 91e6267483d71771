/*
 * tm_rx.c - plain SRQ buffers, peers, and the TM-CQ batch.  Contract:
 * tm_rx.h.  Owns: the plain part of struct tm_xport, peers, qpn.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "engine/tm_ops.h"
#include "engine/tm_rx.h"

/*
 * Posts the freed plain buffers in pend[] as one chain of receives.  The
 * engine never has more plain buffers out than the SRQ holds, so a
 * refusal will not go away: the engine stops, as without its plain
 * buffers no unexpected or control message can arrive.
 */
static void plain_flush(struct tm_xport *x)
{
	struct ibv_recv_wr *wr = x->plain.wr, *bad;
	uint32_t i, n = x->plain.npend;
	int ret;

	for (i = 0; i + 1 < n; i++)
		wr[x->plain.pend[i]].next = &wr[x->plain.pend[i + 1]];
	wr[x->plain.pend[n - 1]].next = NULL;
	x->plain.npend = 0;
	ret = tmx_fault(x, TM_SITE_POST_PLAIN);
	if (!ret)
		ret = ibv_post_srq_recv(x->dev->srq, &wr[x->plain.pend[0]],
					&bad);
	if (ret) {
		x->st.post_failures++;
		tmx_fatal(x, TM_ERR_IO);
		return;
	}
	x->plain.posted += n;
}

/*
 * (Re)posts plain buffer idx: with the others freed since the last post,
 * once plain.batch of them wait, and at once while fewer than plain.low
 * (half of them, and at least the 33 a TM-SRQ wants: doc/mlx5-rules.md
 * rule 5) are at the SRQ.  So the SRQ never runs short for want of a
 * post, and an 8 B message pays a fraction of one.
 */
void tmx_post_plain(struct tm_xport *x, uint32_t idx)
{
	x->plain.pend[x->plain.npend++] = idx;
	if (x->plain.npend >= x->plain.batch ||
	    x->plain.posted < x->plain.low)
		plain_flush(x);
}

int tmx_rx_init(struct tm_xport *x)
{
	size_t sz = (size_t)x->plain.n * x->plain.size;
	uint32_t i;

	x->qpn = kh_init(tm_qpn);
	for (i = 0; i < TM_QPN_CACHE; i++)
		x->qpn_cache[i].peer = UINT32_MAX;
	x->plain.buf = calloc(1, sz);
	x->plain.wr = calloc(x->plain.n, sizeof(*x->plain.wr));
	x->plain.sge = calloc(x->plain.n, sizeof(*x->plain.sge));
	if (!x->qpn || !x->plain.buf || !x->plain.wr || !x->plain.sge)
		return TM_ERR_NO_MEMORY;
	if (tm_dev_reg(x->dev, x->plain.buf, sz, 0, &x->plain.mr))
		return TM_ERR_IO;
	for (i = 0; i < x->plain.n; i++) {
		x->plain.sge[i].addr = (uintptr_t)(x->plain.buf +
						   (size_t)i * x->plain.size);
		x->plain.sge[i].length = x->plain.size;
		x->plain.sge[i].lkey = x->plain.mr->lkey;
		x->plain.wr[i].wr_id = ((uint64_t)i << 3) | WR_PLAIN;
		x->plain.wr[i].sg_list = &x->plain.sge[i];
		x->plain.wr[i].num_sge = 1;
	}
	/* 1 of 16 may wait: never more than 16 (a few KiB of the SRQ) */
	x->plain.batch = x->plain.n / 16;
	if (x->plain.batch > PLAIN_BATCH_MAX)
		x->plain.batch = PLAIN_BATCH_MAX;
	if (!x->plain.batch)
		x->plain.batch = 1;
	x->plain.low = x->plain.n / 2;
	if (x->plain.low < TM_DEV_MIN_PLAIN)
		x->plain.low = TM_DEV_MIN_PLAIN;
	for (i = 0; i < x->plain.n && !x->fatal; i++)
		tmx_post_plain(x, i);
	if (x->plain.npend && !x->fatal)
		plain_flush(x);
	return x->fatal ? TM_ERR_IO : TM_OK;
}

void tmx_rx_cleanup(struct tm_xport *x)
{
	uint32_t i;

	if (x->plain.mr)
		tm_dev_dereg(x->dev, x->plain.mr);
	free(x->plain.buf);
	free(x->plain.wr);
	free(x->plain.sge);
	for (i = 0; i < x->npeers; i++) {
		free(x->peers[i]->wrs);
		free(x->peers[i]);
	}
	free(x->peers);
	if (x->qpn)
		kh_destroy(tm_qpn, x->qpn);
}

/* Completions name the QP a message arrived on: both map to the peer. */
static int map_qpn(struct tm_xport *x, const struct ibv_qp *qp, uint32_t peer)
{
	int ret;
	khiter_t it = kh_put(tm_qpn, x->qpn, qp->qp_num, &ret);

	if (ret < 0)
		return TM_ERR_NO_MEMORY;
	kh_value(x->qpn, it) = peer;
	x->qpn_cache[qp->qp_num & (TM_QPN_CACHE - 1)].peer = UINT32_MAX;
	return TM_OK;
}

int tmx_add_peer(struct tm_xport *x, const struct tm_dev_pair *qps,
		 uint32_t *peer)
{
	struct tmx_peer **np, *p;

	np = realloc(x->peers, sizeof(*np) * (x->npeers + 1));
	if (!np)
		return TM_ERR_NO_MEMORY;
	x->peers = np;
	p = calloc(1, sizeof(*p));
	if (!p)
		return TM_ERR_NO_MEMORY;
	p->qp = qps->tx;
	p->id = x->npeers;
	p->max_inline = qps->tx_max_inline;
	np[x->npeers++] = p;
	if (tmx_tx_add_peer(x, p) != TM_OK || map_qpn(x, qps->tx, p->id) ||
	    (qps->rx && map_qpn(x, qps->rx, p->id))) {
		/* the signalling bounds stay those of one more peer: safe */
		x->npeers--;
		free(p->wrs);
		free(p);
		return TM_ERR_NO_MEMORY;
	}
	*peer = p->id;
	return TM_OK;
}

/*
 * Without a card every message lands in a plain buffer as IBV_WC_RECV:
 * the transport reads the TMH the card would have, and refuses what a
 * card refuses (doc/mlx5-rules.md: too short for its TMH, or an RNDV for
 * its RVH; an unknown opcode).  1: the message holds on to the buffer.
 */
static int on_plain_no_card(struct tm_xport *x, uint8_t *buf, uint32_t idx,
			    const struct tm_cqe *c)
{
	const struct ibv_tmh *tmh = (const void *)buf;
	uint32_t need = c->byte_len >= TMH_LEN && tmh->opcode == IBV_TMH_RNDV ?
			TMH_LEN + RVH_LEN : TMH_LEN;

	if (c->byte_len < need) {
		x->st.malformed++;
		return 0;
	}
	switch (tmh->opcode) {
	case IBV_TMH_EAGER:
	case IBV_TMH_RNDV:
		return x->cb->unexpected(x->cb_arg, buf, idx, c);
	case IBV_TMH_NO_TAG:
	case IBV_TMH_FIN:
		x->cb->control(x->cb_arg, buf, c);
		return 0;
	}
	x->st.malformed++;
	return 0;
}

static void on_plain(struct tm_xport *x, const struct tm_cqe *c)
{
	uint32_t idx = (uint32_t)(c->wr_id >> 3);
	uint8_t *buf = x->plain.buf + (size_t)idx * x->plain.size;

	if (x->plain.posted) /* a provider's stray completion: no wrap */
		x->plain.posted--;
	if (c->status != IBV_WC_SUCCESS) {
		x->st.errors++;
		/* A tagged message the card decided unexpected (and counted,
		 * at its first packet) whose connection failed before the
		 * rest came.  Count it as the card did: a count one short
		 * leaves every later ADD inactive, for good, on every peer. */
		if (c->opcode == IBV_WC_TM_RECV)
			tmx_count_unexpected(x);
		if (tmx_qp_failed(c->status))
			tmx_peer_fail(x, tmx_peer_of_qpn(x, c->qp_num));
	} else if (c->opcode == IBV_WC_TM_RECV) {
		const struct ibv_tmh *tmh = (const void *)buf;

		if (c->byte_len < TMH_LEN || (tmh->opcode != IBV_TMH_EAGER &&
					      tmh->opcode != IBV_TMH_RNDV))
			x->st.malformed++;
		else if (x->cb->unexpected(x->cb_arg, buf, idx, c))
			return; /* the message holds on to the buffer */
	} else if (c->opcode == IBV_WC_TM_NO_TAG) {
		x->cb->control(x->cb_arg, buf, c);
	} else if (x->no_card && c->opcode == IBV_WC_RECV) {
		if (on_plain_no_card(x, buf, idx, c))
			return;
	} else {
		x->st.malformed++;
	}
	tmx_post_plain(x, idx);
}

/*
 * A wr_id the engine never posted: a receive, ADD or DEL without its
 * receive, a plain buffer past the last, a list op with no card.  Only a
 * provider that handed out a slot it never filled makes one; counted as
 * an error and dropped, as nothing it points at can be trusted.
 */
static int wr_id_impossible(const struct tm_xport *x, int type,
			    const struct tm_cqe *c)
{
	if (type == WR_RECV) /* the common one first */
		return !(c->wr_id & ~WR_TYPE_MASK);
	if (type == WR_PLAIN)
		return (c->wr_id >> 3) >= x->plain.n;
	if (type == WR_SYNC) /* the one op without a receive */
		return x->no_card;
	if (type == WR_ADD || type == WR_DEL)
		return x->no_card || !(c->wr_id & ~WR_TYPE_MASK);
	return 0; /* no such type: on_tm_cqe counts it */
}

/* Dispatches one TM-CQ completion by the type in its wr_id. */
static void on_tm_cqe(struct tm_xport *x, const struct tm_cqe *c)
{
	int type = (int)(c->wr_id & WR_TYPE_MASK);
	void *p = (void *)(uintptr_t)(c->wr_id & ~WR_TYPE_MASK);

	if (wr_id_impossible(x, type, c)) {
		x->st.errors++;
		return;
	}
	if (type != WR_RECV || (c->flags & IBV_WC_TM_MATCH)) {
		/* counted, never acted on (doc/DESIGN.md, Sync protocol) */
		x->st.sync_req_seen += !!(c->flags & IBV_WC_TM_SYNC_REQ);
	}
	switch (type) {
	case WR_RECV:
		x->cb->recv(x->cb_arg, p, c);
		break;
	case WR_PLAIN:
		on_plain(x, c);
		break;
	case WR_ADD:
	case WR_DEL:
	case WR_SYNC:
		tmx_on_op_cqe(x, type, p, c);
		break;
	default:
		x->st.errors++;
	}
}

/*
 * Copies the current completion and up to cq_batch - 1 more out of the
 * CQ (handlers may post, which they may not do inside a poll), then hands
 * each to its owner.  Only the fields the completion's type uses are
 * read: each ibv_wc_read_* is an indirect call.  Inline in
 * tmx_drain_from, which the empty poll of an idle progress call does not
 * reach (tmx_drain): one frame per drain, not two.
 */
static inline __attribute__((always_inline)) int
tm_batch(struct tm_xport *x, struct ibv_cq_ex *cq)
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
		 * need not be asked for (the protocol never looks at it) */
		if (type == WR_RECV && (e->flags & IBV_WC_TM_MATCH))
			e->opcode = IBV_WC_TM_RECV;
		else
			e->opcode = ibv_wc_read_opcode(cq);
		/* only a card-held receive's handlers read the tag and the
		 * priv word (zero on a failed one); a plain buffer's message
		 * carries its TMH, and its e->tm is never read */
		if (type == WR_RECV && e->opcode == IBV_WC_TM_RECV)
			ibv_wc_read_tm_info(cq, &e->tm);
		else if (type == WR_RECV)
			memset(&e->tm, 0, sizeof(e->tm));
	} while (n < x->cq_batch && ibv_next_poll(cq) == 0);
	ibv_end_poll(cq);
	x->in_batch = 1;
	for (i = 0; i < n; i++)
		on_tm_cqe(x, &c[i]);
	x->in_batch = 0;
	return n;
}

/*
 * Processes every completion already in both CQs, after tmx_drain (inline,
 * tm_rx.h) made the first TM-CQ poll (rc) and decided whether the send CQ
 * is due (want_send).  A poll that returned less than a full batch emptied
 * its CQ (the poll runs the card first); what the handlers' own posts
 * complete meanwhile is new, and waits for the next call, so one round is
 * enough unless a batch was full.
 */
int tmx_drain_from(struct tm_xport *x, int rc, int want_send)
{
	struct ibv_cq_ex *cq = x->dev->tm_cq;
	int n, ns, total = 0;

	for (;;) {
		n = 0;
		if (rc == TM_OK)
			n = tm_batch(x, cq);
		else if (rc != TM_ERR_NOT_FOUND)
			/* empty is ENOENT only; any other answer is a CQ
			 * that failed (doc/mlx5-rules.md rule 20): nothing
			 * will arrive again */
			tmx_fatal(x, TM_ERR_IO);
		ns = want_send ? tmx_poll_send(x) : 0;
		total += n + ns;
		if (n != x->cq_batch && ns != CQE_BATCH)
			return total;
		rc = tm_dev_start_poll(cq);
		want_send = tmx_want_poll_send(x);
	}
}
