/*
 * test_send_cancel.c - tm_engine_cancel_send (tm_cancel.c): a send is
 * withdrawn exactly when its receiver has not matched it, and then never
 * delivered; once matched (card, software receive, claim, matched probe,
 * truncating receive) the cancel is late and the message is delivered.
 * Each case ends with one outcome on both sides, the sender's callback run
 * the right number of times, and both engines idle.  Node 1 sends, node 0
 * receives; SOFTHCA_SCHED_MANUAL cases order arrivals by hand.
 */
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "eng_util.h"

static struct eu_world W;

#define EAGER 1024

static struct ibv_context *card(int n)
{
	return W.node[n].dev->ctx;
}

static void open_world(enum softhca_sched sched, uint32_t slots)
{
	struct eu_opts o;

	eu_opts_default(&o);
	o.sched = sched;
	o.seed = 777;
	o.ecfg.eager_limit = EAGER;
	if (slots)
		o.ecfg.n_send_slots = slots;
	if (eu_world_init(&W, 2, &o))
		tap_bail("cannot open the soft HCA world");
}

static void recv_post(struct eu_recv *r, int32_t tag, size_t off, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->r.cb = eu_recv_cb;
	if (tm_engine_irecv(W.node[0].eng, &r->r, 0, 1, tag,
			    W.node[0].arena + off, len, W.node[0].mr) != TM_OK)
		tap_bail("irecv");
}

/* Data at sender offset off: bytes (i + seed). */
static void send_post(struct eu_send *s, int32_t tag, size_t off, size_t len,
		      unsigned flags, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		W.node[1].arena[off + i] = (uint8_t)(i + seed);
	memset(s, 0, sizeof(*s));
	s->s.cb = eu_send_cb;
	if (tm_engine_isend(W.node[1].eng, &s->s, W.node[1].peer[0], 0, 1, tag,
			    W.node[1].arena + off, len, W.node[1].mr,
			    flags) != TM_OK)
		tap_bail("isend");
}

static int data_ok(size_t off, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (W.node[0].arena[off + i] != (uint8_t)(i + seed))
			return 0;
	return 1;
}

static int cancel(struct eu_send *s)
{
	return tm_engine_cancel_send(W.node[1].eng, &s->s);
}

/* Receives posted after the cancel get the next message, not the
 * withdrawn one; the queues are empty and every engine idle. */
static void check_gone(const char *what, int32_t tag)
{
	struct eu_recv r;
	struct eu_send s2;
	struct tm_engine_stats st;

	st = eu_node_stats(&W, 0);
	tap_check(st.uq_len == 0 && st.reads_active == 0,
		  "%s: the receiver holds nothing of it (uq %lu)", what,
		  (unsigned long)st.uq_len);
	recv_post(&r, tag, 0, 8192);
	eu_pump(&W);
	tap_check(r.done == 0, "%s: a later receive does not get it", what);
	send_post(&s2, tag, 16384, 10, 0, 99);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.recv_len == 10 && data_ok(0, 10, 99),
		  "%s: ... but the next message with its tag", what);
	tap_check(eu_quiet(&W), "%s: both sides idle", what);
}

/* An eager standard send completed once posted; still unexpected. */
static void test_eager_unexpected(void)
{
	struct eu_send s;
	struct tm_engine_stats st0, st1;

	open_world(SOFTHCA_SCHED_AUTO, 0);
	send_post(&s, 5, 0, 100, 0, 1);
	eu_pump(&W);
	tap_check(s.done == 1 && s.s.status == TM_REQ_OK,
		  "eager: completed at post, before any match");
	tap_check(cancel(&s) == TM_OK, "eager: the cancel is asked");
	eu_pump(&W);
	st0 = eu_node_stats(&W, 0);
	st1 = eu_node_stats(&W, 1);
	tap_check(s.done == 2 && s.s.status == TM_REQ_CANCELLED,
		  "eager unexpected: the callback runs once more, cancelled (done %d, status %d)",
		  s.done, s.s.status);
	tap_check(st1.scancel_req == 1 && st1.scancel_ok == 1 &&
		  st1.scancel_late == 0 && st0.scancel_served == 1,
		  "eager unexpected: counted (asked %lu ok %lu late %lu served %lu)",
		  (unsigned long)st1.scancel_req, (unsigned long)st1.scancel_ok,
		  (unsigned long)st1.scancel_late,
		  (unsigned long)st0.scancel_served);
	tap_check(cancel(&s) == TM_ERR_NOT_FOUND && s.done == 2,
		  "eager: a second cancel has nothing to do");
	check_gone("eager unexpected", 5);
	eu_world_fini(&W);
}

/* The message is still on the sender's card when the REQ is queued. */
static void test_eager_not_arrived(void)
{
	struct eu_send s;

	open_world(SOFTHCA_SCHED_MANUAL, 0);
	send_post(&s, 6, 0, 100, 0, 2);
	tap_check(s.done == 1, "not arrived: the eager send completed");
	tap_check(cancel(&s) == TM_OK, "not arrived: the cancel is asked");
	eu_pump(&W);
	tap_check(s.done == 2 && s.s.status == TM_REQ_CANCELLED,
		  "not arrived: the REQ follows the message on its QP, cancelled");
	check_gone("not arrived", 6);
	eu_world_fini(&W);
}

/* One send slot: the second send waits on the sender's queue. */
static void test_queued(void)
{
	struct eu_send a, b;
	struct eu_recv r;
	struct tm_engine_stats st0, st1;

	open_world(SOFTHCA_SCHED_MANUAL, 1);
	send_post(&a, 7, 0, 100, 0, 3);
	send_post(&b, 8, 4096, 100, 0, 4);
	tap_check(a.done == 1 && b.done == 0,
		  "queued: set-up: the second send waits for a slot");
	tap_check(cancel(&b) == TM_OK && b.done == 1 &&
		  b.s.status == TM_REQ_CANCELLED,
		  "queued: withdrawn at once, never posted");
	eu_pump(&W);
	st0 = eu_node_stats(&W, 0);
	st1 = eu_node_stats(&W, 1);
	tap_check(st0.scancel_served == 0 && st0.unexpected == 1 &&
		  st1.scancel_ok == 1,
		  "queued: nothing of it reached the receiver (unexpected %lu)",
		  (unsigned long)st0.unexpected);
	recv_post(&r, 7, 0, 4096);
	eu_pump(&W);
	tap_check(r.done == 1 && data_ok(0, 100, 3),
		  "queued: the send before it is delivered");
	check_gone("queued", 8);
	eu_world_fini(&W);
}

/* Matched: on the card, from the unexpected queue, by a truncating
 * receive, by a matched probe.  The cancel is late, data delivered. */
static void test_late(int how)
{
	static const char *name[] = { "card match", "software match",
				      "truncating receive", "matched probe",
				      "sync ACKed" };
	struct eu_send s;
	struct eu_recv r;
	struct tm_engine_stats st1;
	struct tm_msg *m = NULL;
	struct tm_probe_info info;
	size_t rlen = how == 2 ? 50 : 4096;
	int rc;

	open_world(SOFTHCA_SCHED_AUTO, 0);
	if (how == 0 || how == 4)
		recv_post(&r, 9, 0, rlen);
	eu_pump(&W);
	send_post(&s, 9, 0, 100, how == 4 ? TM_SEND_SYNC : 0, 5);
	eu_pump(&W);
	if (how == 1 || how == 2)
		recv_post(&r, 9, 0, rlen);
	if (how == 3) {
		memset(&r, 0, sizeof(r));
		r.r.cb = eu_recv_cb;
		if (tm_engine_improbe(W.node[0].eng, 0, 1, 9, &m, &info) != TM_OK)
			tap_bail("improbe");
	}
	rc = cancel(&s);
	eu_pump(&W);
	if (how == 3) {
		tm_engine_imrecv(W.node[0].eng, &r.r, m, W.node[0].arena,
				 4096, W.node[0].mr);
		eu_pump(&W);
	}
	st1 = eu_node_stats(&W, 1);
	if (how == 4)
		tap_check(rc == TM_ERR_NOT_FOUND && s.done == 1 &&
			  st1.scancel_req == 0,
			  "%s: known matched, nothing asked", name[how]);
	else
		tap_check(rc == TM_OK && s.done == 2 && s.s.status == TM_REQ_OK &&
			  st1.scancel_late == 1 && st1.scancel_ok == 0,
			  "%s: late, the send's outcome stays delivered (done %d status %d late %lu)",
			  name[how], s.done, s.s.status,
			  (unsigned long)st1.scancel_late);
	tap_check(r.done == 1 && data_ok(0, how == 2 ? 50 : 100, 5) &&
		  r.r.status == (how == 2 ? TM_REQ_TRUNCATED : TM_REQ_OK),
		  "%s: the receiver got the message", name[how]);
	tap_check(eu_quiet(&W), "%s: both sides idle", name[how]);
	eu_world_fini(&W);
}

/* Pending sends: rendezvous and synchronous, withdrawn while unexpected. */
static void test_pending(int rndv)
{
	const char *what = rndv ? "rendezvous unexpected" : "sync unexpected";
	size_t len = rndv ? 3 * EAGER : 100;
	struct eu_send s;
	struct tm_engine_stats st0;

	open_world(SOFTHCA_SCHED_AUTO, 0);
	send_post(&s, 10, 0, len, rndv ? 0 : TM_SEND_SYNC, 6);
	eu_pump(&W);
	tap_check(s.done == 0, "%s: set-up: waiting for its reply", what);
	tap_check(cancel(&s) == TM_OK, "%s: asked", what);
	tap_check(cancel(&s) == TM_ERR_NOT_FOUND,
		  "%s: a second cancel while one is out does nothing", what);
	eu_pump(&W);
	st0 = eu_node_stats(&W, 0);
	tap_check(s.done == 1 && s.s.status == TM_REQ_CANCELLED,
		  "%s: completes once, cancelled", what);
	tap_check(st0.fins_sent == 0 && st0.acks_sent == 0 &&
		  st0.rndv_sw == 0,
		  "%s: the receiver never read it nor replied", what);
	check_gone(what, 10);
	eu_world_fini(&W);
}

/* A rendezvous matched on the card: late; completes with its FIN. */
static void test_rndv_late(void)
{
	struct eu_send s;
	struct eu_recv r;
	struct tm_engine_stats st1;

	open_world(SOFTHCA_SCHED_MANUAL, 0);
	recv_post(&r, 11, 0, 8192);
	eu_pump(&W);
	send_post(&s, 11, 0, 3 * EAGER, 0, 7);
	/* the request reaches the card, which matches it and starts
	 * reading; the cancel comes while the read is in flight */
	while (softhca_step(card(1), SOFTHCA_WORK_TX, SOFTHCA_ANY_QP))
		;
	softhca_step(card(0), SOFTHCA_WORK_RX, SOFTHCA_ANY_QP);
	tap_check(cancel(&s) == TM_OK && s.done == 0,
		  "rendezvous on the card: asked, still waiting");
	eu_pump(&W);
	tap_check(s.done == 1 && s.s.status == TM_REQ_OK && r.done == 1 &&
		  data_ok(0, 3 * EAGER, 7),
		  "rendezvous on the card: late, delivered, the send completes once OK");
	st1 = eu_node_stats(&W, 1);
	tap_check(st1.fin_unknown == 0,
		  "rendezvous on the card: the send waited for its FIN (%lu FINs for nobody)",
		  (unsigned long)st1.fin_unknown);
	tap_check(eu_quiet(&W), "rendezvous on the card: idle");
	eu_world_fini(&W);
}

/*
 * Races, ordered by hand.  claim: the receive's ADD is not processed yet
 * when the message arrives, so the message claims the receive and a DEL is
 * outstanding when the REQ arrives: matched, late.  before/after: the
 * receive is posted between the message's and the REQ's arrivals (late),
 * or after both (withdrawn: the receive stays pending).
 */
static void test_race(int which)
{
	static const char *name[] = { "race: claim with DEL outstanding",
				      "race: receive between message and REQ",
				      "race: receive after the REQ" };
	struct eu_send s;
	struct eu_recv r;
	struct tm_engine_stats st0;

	open_world(SOFTHCA_SCHED_MANUAL, 0);
	send_post(&s, 12, 0, 100, 0, 8);
	if (cancel(&s) != TM_OK)
		tap_bail("cancel");
	while (softhca_step(card(1), SOFTHCA_WORK_TX, SOFTHCA_ANY_QP))
		;
	if (which == 0)
		recv_post(&r, 12, 0, 4096); /* ADD posted, not processed */
	softhca_step(card(0), SOFTHCA_WORK_RX, SOFTHCA_ANY_QP); /* message */
	eu_progress(&W);
	st0 = eu_node_stats(&W, 0);
	if (which == 0)
		tap_check(st0.unexp_claimed == 1 && r.done == 0,
			  "%s: set-up: the message claimed the receive", name[which]);
	if (which == 1)
		recv_post(&r, 12, 0, 4096);
	softhca_step(card(0), SOFTHCA_WORK_RX, SOFTHCA_ANY_QP); /* REQ */
	eu_progress(&W);
	if (which == 2)
		recv_post(&r, 12, 0, 4096);
	eu_pump(&W);
	st0 = eu_node_stats(&W, 0);
	if (which == 2) {
		tap_check(s.done == 2 && s.s.status == TM_REQ_CANCELLED &&
			  r.done == 0 && st0.uq_len == 0,
			  "%s: withdrawn, the receive waits", name[which]);
		tm_engine_cancel_recv(W.node[0].eng, &r.r);
		eu_pump(&W);
	} else {
		tap_check(s.done == 2 && s.s.status == TM_REQ_OK &&
			  r.done == 1 && data_ok(0, 100, 8),
			  "%s: late, delivered (send done %d status %d, recv %d)",
			  name[which], s.done, s.s.status, r.done);
	}
	tap_check(eu_quiet(&W), "%s: idle", name[which]);
	eu_world_fini(&W);
}

/*
 * Random schedules (the card at random, receives, sends and cancels in a
 * random order): a cancelled send is never received, every other send is
 * received once with its data, the callback count fits the cancel's
 * answer, and everything ends idle.
 */
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static int pick(int n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (int)(rng % (uint64_t)n);
}

static void test_random(int rounds)
{
	enum { N = 8 };
	static const size_t lens[] = { 0, 10, 500, 3 * EAGER };
	struct eu_send s[N];
	struct eu_recv r[N];
	int posted[N], sent[N], asked[N], rc[N], d0[N];
	int bad_excl = 0, bad_data = 0, bad_cb = 0, bad_idle = 0;
	int ncanc = 0, nlate = 0, round, i, step;
	size_t len[N];
	struct tm_engine_stats st;

	open_world(SOFTHCA_SCHED_RANDOM, 0);
	for (round = 0; round < rounds; round++) {
		memset(posted, 0, sizeof(posted));
		memset(sent, 0, sizeof(sent));
		memset(asked, 0, sizeof(asked));
		/* 3 actions per message (post, send, cancel) in random order;
		 * a cancel needs its send, and only half the sends get one */
		for (step = 0; step < 6 * N; step++) {
			i = pick(N);
			switch (pick(4)) {
			case 0:
				if (!posted[i]) {
					recv_post(&r[i], 1000 + i,
						  (size_t)i * 8192, 8192);
					posted[i] = 1;
				}
				break;
			case 1:
				if (!sent[i]) {
					len[i] = lens[pick(4)];
					send_post(&s[i], 1000 + i,
						  (size_t)i * 4096, len[i],
						  pick(2) ? TM_SEND_SYNC : 0,
						  (uint8_t)(round + i));
					sent[i] = 1;
				}
				break;
			case 2:
				if (sent[i] && !asked[i] && pick(2)) {
					d0[i] = s[i].done;
					rc[i] = cancel(&s[i]);
					asked[i] = 1;
				}
				break;
			default:
				eu_progress(&W);
			}
		}
		for (i = 0; i < N; i++) {
			if (!sent[i]) {
				len[i] = 10;
				send_post(&s[i], 1000 + i, (size_t)i * 4096,
					  10, 0, (uint8_t)(round + i));
			}
			if (!posted[i])
				recv_post(&r[i], 1000 + i, (size_t)i * 8192,
					  8192);
		}
		eu_pump(&W);
		for (i = 0; i < N; i++) {
			int gone = s[i].s.status == TM_REQ_CANCELLED;

			if (gone) {
				ncanc++;
				/* its receive must still be waiting */
				bad_excl += r[i].done != 0;
				tm_engine_cancel_recv(W.node[0].eng, &r[i].r);
			} else {
				nlate += asked[i];
				bad_excl += r[i].done != 1 ||
					    s[i].s.status != TM_REQ_OK;
				bad_data += r[i].r.recv_len != len[i] ||
					    !data_ok((size_t)i * 8192, len[i],
						     (uint8_t)(round + i));
			}
			if (asked[i])
				bad_cb += s[i].done != (rc[i] == TM_OK && d0[i] ? 2 : 1);
			else
				bad_cb += s[i].done != 1;
		}
		eu_pump(&W);
		bad_idle += !eu_quiet(&W);
	}
	tap_check(!bad_excl,
		  "random: %d rounds: cancelled and never received, or received once (%d cancelled, %d late, %d wrong)",
		  rounds, ncanc, nlate, bad_excl);
	tap_check(!bad_data, "random: the delivered ones carry their data (%d wrong)",
		  bad_data);
	tap_check(!bad_cb, "random: callbacks as the cancel's answer says (%d wrong)",
		  bad_cb);
	st = eu_node_stats(&W, 1);
	tap_check(st.fin_unknown == 0,
		  "random: no send stopped waiting before its FIN/ACK (%lu came for nobody)",
		  (unsigned long)st.fin_unknown);
	tap_check(!bad_idle && ncanc > 0 && nlate > 0,
		  "random: idle after each round; both outcomes seen");
	eu_world_fini(&W);
}

/*
 * A buffered send's handle (tm_engine_send_detach): it takes the identity
 * of a send that completed at post, owes no callback of its own, and a
 * cancel through it withdraws that send's message (or says it matched);
 * the send itself never calls back again.
 */
static void detach(struct eu_send *h, const struct eu_send *s)
{
	memset(h, 0xa5, sizeof(*h)); /* whatever the storage held */
	h->s.cb = eu_send_cb;
	h->done = 0;
	tm_engine_send_detach(W.node[1].eng, &s->s, &h->s);
}

static void test_detach(void)
{
	struct eu_send s, h;
	struct eu_recv r;

	open_world(SOFTHCA_SCHED_AUTO, 0);
	send_post(&s, 7, 0, 100, 0, 4);
	detach(&h, &s);
	tap_check(h.s.peer == s.s.peer && h.s.seq == s.s.seq &&
		  h.s.status == TM_REQ_OK && h.s.cb == eu_send_cb,
		  "detach: the handle names the send and keeps its callback");
	eu_pump(&W);
	tap_check(s.done == 1 && h.done == 0,
		  "detach: the send completed at post, the handle owes nothing");
	tap_check(cancel(&h) == TM_OK, "detach: a cancel through the handle is asked");
	eu_pump(&W);
	tap_check(h.done == 1 && h.s.status == TM_REQ_CANCELLED && s.done == 1,
		  "detach: the handle completes CANCELLED, the send stays done");
	tap_check(cancel(&h) == TM_ERR_NOT_FOUND,
		  "detach: a second cancel has nothing to ask");
	check_gone("detach", 7);

	recv_post(&r, 8, 0, 8192);
	send_post(&s, 8, 0, 100, 0, 5);
	detach(&h, &s);
	eu_pump(&W);
	tap_check(r.done == 1 && data_ok(0, 100, 5) && cancel(&h) == TM_OK,
		  "detach: a matched send's handle may ask too");
	eu_pump(&W);
	tap_check(h.done == 1 && h.s.status == TM_REQ_OK && s.done == 1 &&
		  eu_quiet(&W),
		  "detach: ... and completes OK (delivered), nothing left");
	eu_world_fini(&W);
}

/* Bad input: an error code, never a crash. */
static void test_bad(void)
{
	struct eu_send s;

	open_world(SOFTHCA_SCHED_AUTO, 0);
	memset(&s, 0, sizeof(s));
	s.s.peer = 1000;
	tap_check(cancel(&s) == TM_ERR_INVALID,
		  "bad: a send naming no peer is refused");
	tap_check(tm_engine_find_send(W.node[1].eng, 1000, 0) == NULL,
		  "bad: find_send of an unknown peer finds nothing");
	eu_world_fini(&W);
}

int main(void)
{
	int i;

	test_eager_unexpected();
	test_eager_not_arrived();
	test_queued();
	for (i = 0; i < 5; i++)
		test_late(i);
	test_pending(0);
	test_pending(1);
	test_rndv_late();
	for (i = 0; i < 3; i++)
		test_race(i);
	test_random(300);
	test_detach();
	test_bad();
	return tap_done();
}
