/*
 * test_sync.c - the sync rule and the op slots keep the card in use
 * (tm_engine.h, "Sync protocol" and selective signalling of ADDs).  Both
 * failures they guard against leave every result right and only make the
 * card idle or slow, so these tests look at the card itself:
 *  - an ADD the card processed while an unexpected message was on its way
 *    (count out of sync) is inactive; its own signalled completion, which
 *    carried the stale count, must not be taken as confirmation: a SYNC
 *    must follow, so the entry becomes active and its message is matched
 *    on the card;
 *  - a long run with few op slots: every signalled op's completion must
 *    give back its slot and those of the unsignalled ops before it, or the
 *    engine runs out of slots and keeps receives in software.
 */
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "eng_util.h"

static struct eu_world W;

static struct ibv_context *card(int n)
{
	return W.node[n].dev->ctx;
}

static void recv_post(struct eu_recv *r, int32_t tag, size_t off)
{
	memset(r, 0, sizeof(*r));
	r->r.cb = eu_recv_cb;
	if (tm_engine_irecv(W.node[0].eng, &r->r, 0, 1, tag,
			    W.node[0].arena + off, 4096, W.node[0].mr) != TM_OK)
		tap_bail("irecv");
}

static void send_post(struct eu_send *s, int32_t tag, size_t len)
{
	memset(s, 0, sizeof(*s));
	s->s.cb = eu_send_cb;
	if (tm_engine_isend(W.node[1].eng, &s->s, W.node[1].peer[0], 0, 1, tag,
			    W.node[1].arena, len, W.node[1].mr, 0) != TM_OK)
		tap_bail("isend");
}

static void open_world(enum softhca_sched sched, uint32_t tags, uint32_t ops)
{
	struct eu_opts o;

	eu_opts_default(&o);
	o.sched = sched;
	o.seed = 12345;
	o.max_num_tags = tags;
	o.max_ops = ops;
	o.ecfg.eager_limit = 1024;
	if (eu_world_init(&W, 2, &o))
		tap_bail("cannot open the soft HCA world");
}

/*
 * A is on the card; B's ADD is posted carrying count 0; the card then
 * decides X (unexpected, its counter 1) and only then processes B's ADD:
 * B is inactive.  Every op is signalled with max_ops 1, so B's ADD
 * completes carrying count 0 while the engine has seen 1.
 */
static void test_stale_op(uint32_t ops)
{
	struct eu_recv a, b, xr;
	struct eu_send sa, sb, sx;
	struct softhca_stats hs;
	struct tm_engine_stats st;

	open_world(SOFTHCA_SCHED_MANUAL, 0, ops);
	recv_post(&a, 1, 0);
	eu_pump(&W);
	send_post(&sx, 9, 100);
	while (softhca_step(card(1), SOFTHCA_WORK_TX, SOFTHCA_ANY_QP))
		;
	recv_post(&b, 2, 8192);
	tm_engine_progress(W.node[0].eng); /* ADD on the card's queue, count 0 */
	softhca_step(card(0), SOFTHCA_WORK_RX, SOFTHCA_ANY_QP); /* X */
	softhca_step(card(0), SOFTHCA_WORK_OP, SOFTHCA_ANY_QP); /* B's ADD */
	softhca_query_stats(card(0), &hs);
	tap_check(hs.list_entries == 2 && hs.list_inactive == 1,
		  "max_ops %u: set-up: B's ADD went to the card and is inactive (entries %u, inactive %u)",
		  ops, hs.list_entries, hs.list_inactive);
	eu_pump(&W);
	softhca_query_stats(card(0), &hs);
	tm_engine_get_stats(W.node[0].eng, &st);
	tap_check(hs.list_entries == 2 && hs.list_inactive == 0 &&
		  st.card_entries == 2,
		  "max_ops %u: an ADD processed out of sync is made active (entries %u, inactive %u)",
		  ops, hs.list_entries, hs.list_inactive);
	send_post(&sb, 2, 100);
	send_post(&sa, 1, 100);
	eu_pump(&W);
	tap_check(b.done == 1 && b.r.on_card && a.done == 1 && a.r.on_card,
		  "max_ops %u: both receives then matched on the card (B %d, A %d)",
		  ops, b.r.on_card, a.r.on_card);
	recv_post(&xr, 9, 16384);
	eu_pump(&W);
	tap_check(xr.done == 1 && xr.r.status == TM_REQ_OK && eu_quiet(&W),
		  "max_ops %u: the unexpected one is received; idle", ops);
	eu_world_fini(&W);
}

/*
 * Rounds of: 8 receives posted (to the card), their 8 messages and 2
 * that nobody waits for yet, then receives for those 2.  2 op slots, the
 * card scheduled at random.
 */
static void test_long_run(void)
{
	enum { ROUNDS = 1000, PER = 8 };
	struct eu_recv r[PER + 2], probe;
	struct eu_send s[PER + 2];
	struct softhca_stats hs;
	struct tm_engine_stats st;
	uint64_t posted = 0, on_card = 0;
	int round, i, all_done = 1;

	open_world(SOFTHCA_SCHED_RANDOM, 16, 2);
	for (round = 0; round < ROUNDS; round++) {
		for (i = 0; i < PER; i++)
			recv_post(&r[i], i, (size_t)i * 4096);
		eu_pump(&W);
		for (i = 0; i < PER; i++)
			send_post(&s[i], i, 100);
		send_post(&s[PER], 100 + round % 3, 50);
		send_post(&s[PER + 1], 200, 60);
		eu_pump(&W);
		recv_post(&r[PER], 100 + round % 3, PER * 4096);
		recv_post(&r[PER + 1], 200, (PER + 1) * 4096);
		eu_pump(&W);
		for (i = 0; i < PER + 2; i++)
			all_done &= r[i].done == 1 && s[i].done == 1;
		for (i = 0; i < PER; i++)
			on_card += r[i].r.on_card;
		posted += PER;
	}
	tap_check(all_done, "long run: every request completed once");
	tap_check(on_card * 10 >= posted * 9,
		  "long run, 2 op slots: %lu of %lu pre-posted receives matched on the card (>= 90%%)",
		  (unsigned long)on_card, (unsigned long)posted);
	/* a signalled DEL retires every op before it */
	recv_post(&probe, 7777, 0);
	eu_pump(&W);
	tm_engine_cancel_recv(W.node[0].eng, &probe.r);
	eu_pump(&W);
	tm_engine_get_stats(W.node[0].eng, &st);
	softhca_query_stats(card(0), &hs);
	tap_check(probe.done == 1 && probe.r.status == TM_REQ_CANCELLED &&
		  st.ops_outstanding == 0 && hs.ops_outstanding == 0 &&
		  hs.list_entries == 0 && eu_quiet(&W),
		  "long run: no op slot taken at the end (engine %u, card %u)",
		  st.ops_outstanding, hs.ops_outstanding);
	tap_check(st.unexpected == hs.unexpected,
		  "long run: engine and card counted the same unexpected messages (%lu, %lu)",
		  (unsigned long)st.unexpected, (unsigned long)hs.unexpected);
	eu_world_fini(&W);
}

int main(void)
{
	test_stale_op(1);
	test_stale_op(0);
	test_long_run();
	return tap_done();
}
