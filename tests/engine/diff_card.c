/*
 * diff_card.c - what the differential test asks beyond right results:
 * that the card is used, and that engine and card agree on the counts the
 * sync protocol rests on (tm_engine.h, "Sync protocol").  Right results
 * alone cannot show it: an engine that matches nearly everything in
 * software after an uncounted unexpected message passes the reference.
 *
 *  - Traffic both ways (random runs): node 0, the matching node, also
 *    sends to the others (rendezvous and synchronous eager), so FINs and
 *    ACKs reach it interleaved with its tagged arrivals.  Each other node
 *    takes them with catch-all receives of one envelope, so the i-th it
 *    posts must get node 0's i-th message to it, whole.
 *  - The pre-posted phase (random runs): on a clean engine, receives that
 *    all fit the card are posted before their messages are sent; they
 *    must all be on the card and active, and at least 90% of them must be
 *    matched there.
 *  - At the end of every run (card_agree): the engine counted as many
 *    unexpected messages as the card; an ADD decided then is active (it
 *    carries the engine's count, the card compares it with its own); and
 *    once a signalled DEL retired everything, no op slot is taken, on
 *    either side.
 */
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "diff.h"

static uint8_t *rev_sbuf(int slot)
{
	return S.w.node[0].arena + (size_t)(NSLOT + slot) * SLOT;
}

static uint8_t *rev_rbuf(int node, int i)
{
	return S.w.node[node].arena + (size_t)(NSLOT + i) * SLOT;
}

/* node 0's messages to node j carry a pattern of their index, not seq */
static uint8_t rev_pattern(int node, uint32_t idx, size_t i)
{
	return pattern(EU_MAXN + node, idx, i);
}

static void rrecv_cb(struct tm_recv *r)
{
	struct rrecv *q = (struct rrecv *)r;
	const uint8_t *b = rev_rbuf(q->node, q->slot);
	struct rsend *m;
	size_t i;

	if (q->done++) {
		fail("node %d: catch-all %u completed twice", q->node, q->idx);
		return;
	}
	if (r->status == TM_REQ_CANCELLED)
		return;
	m = q->idx < (uint32_t)S.nrs[q->node] ? S.rs[q->node][q->idx] : NULL;
	if (!m) {
		fail("node %d: catch-all %u got seq %u, node 0 sent only %d (a later receive took an earlier message?)",
		     q->node, q->idx, r->send_seq, S.nrs[q->node]);
		return;
	}
	S.rr_got[q->node]++;
	if (r->status != TM_REQ_OK || r->peer != S.w.node[q->node].peer[0] ||
	    r->send_seq != m->s.seq || r->msg_len != m->len ||
	    r->recv_len != m->len) {
		fail("node %d: catch-all %u got peer %u seq %u len %lu status %d, expected node 0's seq %u len %zu (out of order?)",
		     q->node, q->idx, r->peer, r->send_seq,
		     (unsigned long)r->msg_len, r->status, m->s.seq, m->len);
		return;
	}
	for (i = 0; i < m->len; i++)
		if (b[i] != rev_pattern(q->node, q->idx, i)) {
			fail("node %d: catch-all %u: byte %zu wrong", q->node,
			     q->idx, i);
			return;
		}
}

static void rsend_cb(struct tm_send *s)
{
	struct rsend *d = (struct rsend *)s;

	if (d->done++)
		fail("node 0's send %u to node %d completed twice", s->seq,
		     d->node);
	if (s->status != TM_REQ_OK)
		fail("node 0's send %u to node %d failed", s->seq, d->node);
	S.rsfree[S.nrsfree++] = d->slot;
}

static void rr_post(int node, int i)
{
	struct rrecv *q = &S.rr[node][i];

	memset(q, 0, sizeof(*q));
	q->r.cb = rrecv_cb;
	q->node = node;
	q->slot = i;
	q->posted = 1;
	q->idx = S.rr_next[node]++;
	if (tm_engine_irecv(S.w.node[node].eng, &q->r, 0, TM_ANY_SRC,
			    TM_ANY_TAG, rev_rbuf(node, i), SLOT,
			    S.w.node[node].mr) != TM_OK)
		fail("node %d: catch-all irecv failed", node);
}

/* Outside callbacks: a completed catch-all is posted again. */
static void rr_repost(void)
{
	int node, i;

	for (node = 1; node <= S.k; node++)
		for (i = 0; i < RPOST; i++)
			if (!S.rr[node][i].posted || S.rr[node][i].done)
				rr_post(node, i);
}

void rev_reset(void)
{
	int i;

	rev_free();
	memset(S.rr, 0, sizeof(S.rr));
	memset(S.rr_next, 0, sizeof(S.rr_next));
	memset(S.rr_got, 0, sizeof(S.rr_got));
	S.nrsfree = 0;
	for (i = 0; i < NREV; i++)
		S.rsfree[S.nrsfree++] = i;
	S.rev_on = 1;
	rr_repost();
}

void ev_rsend(void)
{
	static const size_t lens[] = { 0, 100, 1000, 2000, 6000, 30000 };
	int node = 1 + choose(S.k);
	size_t len = lens[choose(6)];
	/* eager ones synchronous: an ACK must come back to node 0 */
	unsigned flags = len <= 1024 || choose(4) == 0 ? TM_SEND_SYNC : 0;
	int tag = choose(3);
	struct rsend *d;
	uint32_t idx;
	uint8_t *b;
	size_t i;

	if (!S.rev_on || !S.nrsfree)
		return;
	rr_repost();
	d = calloc(1, sizeof(*d));
	if (!d)
		tap_bail("out of memory");
	d->node = node;
	d->slot = S.rsfree[--S.nrsfree];
	d->len = len;
	d->s.cb = rsend_cb;
	idx = (uint32_t)S.nrs[node];
	S.rs[node] = grow(S.rs[node], &S.caprs[node], S.nrs[node] + 1,
			  sizeof(*S.rs[node]));
	S.rs[node][S.nrs[node]++] = d;
	b = rev_sbuf(d->slot);
	for (i = 0; i < len; i++)
		b[i] = rev_pattern(node, idx, i);
	if (tm_engine_isend(S.w.node[0].eng, &d->s, S.w.node[0].peer[node],
			    0, 0, tag, b, len, S.w.node[0].mr, flags) != TM_OK)
		fail("node 0: isend to node %d failed", node);
}

static int rev_left(void)
{
	int node, j, left = 0;

	for (node = 1; node <= S.k; node++)
		for (j = 0; j < S.nrs[node]; j++)
			left += !S.rs[node][j]->done;
	return left;
}

void rev_drain(void)
{
	int round;

	if (!S.rev_on)
		return;
	for (round = 0; round < 1000 && rev_left(); round++) {
		rr_repost();
		eu_pump(&S.w);
	}
	if (rev_left())
		fail("%d of node 0's sends never completed", rev_left());
}

void rev_fini(void)
{
	int node, i;

	if (!S.rev_on)
		return;
	for (node = 1; node <= S.k; node++)
		for (i = 0; i < RPOST; i++)
			if (S.rr[node][i].posted && !S.rr[node][i].done)
				tm_engine_cancel_recv(S.w.node[node].eng,
						      &S.rr[node][i].r);
	eu_pump(&S.w);
	for (node = 1; node <= S.k; node++) {
		for (i = 0; i < RPOST; i++)
			if (S.rr[node][i].posted && !S.rr[node][i].done)
				fail("node %d: catch-all %u never completed",
				     node, S.rr[node][i].idx);
		if (S.rr_got[node] != (uint32_t)S.nrs[node])
			fail("node %d received %u of node 0's %d messages",
			     node, S.rr_got[node], S.nrs[node]);
		S.t_rsends += (uint64_t)S.nrs[node];
	}
	S.rev_on = 0;
}

void rev_free(void)
{
	int node, j;

	for (node = 0; node < EU_MAXN; node++) {
		for (j = 0; j < S.nrs[node]; j++)
			free(S.rs[node][j]);
		S.nrs[node] = 0;
	}
	S.rev_on = 0;
}

void card_phase(void)
{
	static const size_t plens[] = { 0, 100, 1000, 6000, 30000 };
	struct tm_engine *eng = S.w.node[0].eng;
	struct tm_engine_stats st;
	struct softhca_stats hs;
	int n = S.card_tags && S.card_tags < 24 ? (int)S.card_tags : 24;
	int first = S.nrecvs, i, on = 0;

	if (!S.phase_on || S.failed)
		return;
	memset(&hs, 0, sizeof(hs));
	tm_engine_get_stats(eng, &st);
	if (st.posted || st.uq_len || S.nrfree < n) {
		fail("pre-posted phase: node 0 not clean (posted %lu uq %lu)",
		     (unsigned long)st.posted, (unsigned long)st.uq_len);
		return;
	}
	for (i = 0; i < n; i++)
		post_recv_env(i & 1, 1 + i % S.k, i % 3, 32768);
	eu_pump(&S.w);
	tm_engine_get_stats(eng, &st);
	softhca_query_stats(S.w.node[0].dev->ctx, &hs);
	if (diff_notm ? st.card_entries || st.recv_to_card :
	    st.card_entries != (uint32_t)n || hs.list_entries != (uint32_t)n ||
	    hs.list_inactive) {
		fail("pre-posted phase: %d receives, %u on the card by the engine, the card holds %u (%u inactive)",
		     n, st.card_entries, hs.list_entries, hs.list_inactive);
		return;
	}
	for (i = 0; i < n; i++)
		send_env(1 + i % S.k, i & 1, i % 3, plens[i % 5],
			 i % 4 == 1 ? TM_SEND_SYNC : 0);
	eu_pump(&S.w);
	for (i = first; i < S.nrecvs; i++) {
		if (!S.recvs[i]->done) {
			fail("pre-posted phase: recv %d never completed", i);
			return;
		}
		on += S.recvs[i]->r.on_card;
	}
	if (diff_notm) {
		if (on)
			fail("pre-posted phase without tag matching: %d receives matched on a card",
			     on);
		return;
	}
	S.t_phase_recvs += (uint64_t)n;
	S.t_phase_card += (uint64_t)on;
	if (on * 10 < n * 9)
		fail("pre-posted phase: %d of %d receives matched on the card (< 90%%)",
		     on, n);
}

void card_agree(void)
{
	struct tm_engine *eng = S.w.node[0].eng;
	struct ibv_context *ctx = S.w.node[0].dev->ctx;
	struct tm_engine_stats st;
	struct softhca_stats hs;
	struct drecv *d;
	int n = S.nrecvs;

	if (S.failed)
		return;
	tm_engine_get_stats(eng, &st);
	if (diff_notm) {
		/* no card to agree with: nothing may have gone to one */
		if (st.ops_posted || st.syncs || st.ops_outstanding ||
		    st.ops_in_queue || st.card_matched || st.fatal)
			fail("without tag matching: ops %lu syncs %lu outstanding %u queued %u card matched %lu fatal %d",
			     (unsigned long)st.ops_posted,
			     (unsigned long)st.syncs, st.ops_outstanding,
			     st.ops_in_queue, (unsigned long)st.card_matched,
			     st.fatal);
		return;
	}
	softhca_query_stats(ctx, &hs);
	if (st.unexpected != hs.unexpected)
		fail("node 0 counted %lu unexpected messages, its card %lu",
		     (unsigned long)st.unexpected,
		     (unsigned long)hs.unexpected);
	/* tag 7: no message carries it; the reference sees post + cancel;
	 * long enough for the card (offload_thresh) */
	post_recv_env(1, 1, 7, S.thresh > 64 ? S.thresh : 64);
	if (S.nrecvs != n + 1) {
		fail("no receive slot left for the count probe");
		return;
	}
	d = S.recvs[n];
	eu_pump(&S.w);
	softhca_query_stats(ctx, &hs);
	if (hs.list_entries != 1 || hs.list_inactive)
		fail("an ADD decided at the end: card entries %u, inactive %u (card count %u, engine reported %u)",
		     hs.list_entries, hs.list_inactive, hs.hw_unexpected_cnt,
		     hs.sw_unexpected_cnt);
	d->cancel_req = 1;
	tm_engine_cancel_recv(eng, &d->r);
	eu_pump(&S.w);
	tm_engine_get_stats(eng, &st);
	softhca_query_stats(ctx, &hs);
	if (!d->done || d->r.status != TM_REQ_CANCELLED)
		fail("the count probe was not cancelled");
	if (st.ops_outstanding || hs.ops_outstanding)
		fail("op slots taken at idle: engine %u, card %u",
		     st.ops_outstanding, hs.ops_outstanding);
}
