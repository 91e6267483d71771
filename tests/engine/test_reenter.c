/*
 * test_reenter.c - a receive's callback that calls back into the engine
 * while the engine is still handling the batch of completions the
 * receive's message came in (tm_engine.h, "Completion": the arrival fast
 * paths fire a callback at once).  The nested call must not poll past
 * the rest of the batch: the messages after it in the batch come first.
 *
 * One sender, N messages of one tag, each carrying its number; the
 * receiver posts the first receive only, and its callback posts the
 * other N - 1 and then calls in again (progress, or the post itself
 * polls: a receive bound for the card).  The CQ hands out 4 completions
 * per poll, so the batch that holds message 0 also holds 1-3, and 4-11
 * wait in the CQ: a nested poll would take them first, and receive 1
 * would get message 4.  Message 0 lands in a plain buffer for a
 * software-held receive, then is matched by the card; each receive
 * checks its data is in place when its callback runs.  Last, callbacks
 * keep their order when one in the batch was queued (the slow path).
 */
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "eng_util.h"

#define N 12
#define MSG 8
#define TAG 21
#define BATCH 4
#define THRESH 64        /* offload_thresh: MSG stays in software */
#define CARD_LEN 4096    /* a receive bound for the card */

static struct eu_world W;
static struct tm_recv R[N];
static int done[N];
static int data_in[N];     /* its message was in its buffer at its callback */
static size_t later_len;   /* the length of receives 1..N-1 */
static int nested_calls;   /* calls the first callback made in a batch */
static uint64_t arrivals;  /* messages handled before it ran */
static int in_progress;    /* the test's own progress call is running */

/* Messages the receiver's engine has handled: unexpected or card-matched. */
static uint64_t handled(void)
{
	struct tm_engine_stats st = eu_node_stats(&W, 0);

	return st.unexpected + st.card_matched;
}

static uint8_t *rbuf(int i)
{
	return W.node[0].arena + (size_t)i * 4096;
}

static void seen(struct tm_recv *r)
{
	int i = (int)(r - R);

	done[i]++;
	data_in[i] = r->recv_len == MSG && eu_check(rbuf(i), MSG, (uint8_t)i);
}

static void later_cb(struct tm_recv *r)
{
	seen(r);
}

static void post(int i, size_t len, void (*cb)(struct tm_recv *))
{
	memset(&R[i], 0, sizeof(R[i]));
	R[i].cb = cb;
	memset(rbuf(i), 0, len);
	if (tm_engine_irecv(W.node[0].eng, &R[i], 0, 1, TAG, rbuf(i), len,
			    W.node[0].mr) != TM_OK)
		tap_bail("irecv");
}

/* Receive 0's: the rest are posted from inside the batch, then progress. */
static void first_cb(struct tm_recv *r)
{
	seen(r);
	if (!in_progress)
		return; /* not from inside the batch: the test shows it */
	nested_calls++;
	arrivals = handled();
	for (int i = 1; i < N; i++)
		post(i, later_len, later_cb);
	tm_engine_progress(W.node[0].eng);
}

static void send_all_n(int n)
{
	static struct tm_send S[N];
	static uint8_t sbuf[N][MSG];

	for (int i = 0; i < n; i++) {
		memset(&S[i], 0, sizeof(S[i]));
		eu_fill(sbuf[i], MSG, (uint8_t)i);
		if (tm_engine_isend(W.node[1].eng, &S[i], W.node[1].peer[0], 0,
				    1, TAG, sbuf[i], MSG, NULL, 0) < 0)
			tap_bail("isend");
	}
}

/* Every message into the receiver's CQ, none handled by its engine. */
static void deliver_all(void)
{
	while (softhca_step(W.node[1].dev->ctx, SOFTHCA_WORK_TX,
			    SOFTHCA_ANY_QP))
		;
	while (softhca_step(W.node[0].dev->ctx, SOFTHCA_WORK_RX,
			    SOFTHCA_ANY_QP))
		;
}

static void run(const char *what, size_t first_len, size_t len)
{
	int in_order = 1, once = 1;
	uint64_t base = handled();

	memset(done, 0, sizeof(done));
	memset(data_in, 0, sizeof(data_in));
	nested_calls = 0;
	arrivals = 0;
	later_len = len;
	post(0, first_len, first_cb);
	eu_pump(&W);
	send_all_n(N);
	deliver_all();
	in_progress = 1;
	tm_engine_progress(W.node[0].eng);
	in_progress = 0;
	eu_pump(&W);
	for (int i = 0; i < N; i++) {
		once &= done[i] == 1;
		in_order &= done[i] == 1 && data_in[i];
	}
	tap_check(nested_calls == 1 && arrivals == base + 1,
		  "%s: the first callback ran inside the batch, after its own arrival only (%lu), and called in",
		  what, (unsigned long)(arrivals - base));
	tap_check(once, "%s: every receive completed once", what);
	tap_check(in_order,
		  "%s: receive i got message i, in its buffer when its callback ran (the batch's rest before the CQ's)",
		  what);
	tap_check(eu_quiet(&W), "%s: idle after", what);
}

/* Callbacks in order of completion: one queued (a synchronous message's,
 * which owes an ACK: the slow path) before the next, which the fast path
 * could fire at once, in the same batch. */
static int order[2], norder;

static void order_cb(struct tm_recv *r)
{
	if (norder < 2)
		order[norder++] = (int)(r - R);
}

static void test_order(void)
{
	static struct tm_send S[2];
	static uint8_t sbuf[2][MSG];

	norder = 0;
	post(0, MSG, order_cb);
	post(1, MSG, order_cb);
	eu_pump(&W);
	for (int i = 0; i < 2; i++) {
		memset(&S[i], 0, sizeof(S[i]));
		eu_fill(sbuf[i], MSG, (uint8_t)i);
		if (tm_engine_isend(W.node[1].eng, &S[i], W.node[1].peer[0], 0,
				    1, TAG, sbuf[i], MSG, NULL,
				    i ? 0 : TM_SEND_SYNC) < 0)
			tap_bail("isend");
	}
	deliver_all();
	tm_engine_progress(W.node[0].eng);
	tap_check(norder == 2 && order[0] == 0 && order[1] == 1,
		  "callbacks in completion order: a queued one (synchronous) before the fast path's next (%d: %d %d)",
		  norder, order[0], order[1]);
	eu_pump(&W);
	tap_check(eu_quiet(&W), "order: idle after");
}

int main(void)
{
	struct eu_opts o;
	struct tm_engine_stats st;

	eu_opts_default(&o);
	o.sched = SOFTHCA_SCHED_MANUAL;
	o.cq_poll_max = BATCH;
	o.ecfg.offload_thresh = THRESH;
	if (eu_world_init(&W, 2, &o))
		tap_bail("cannot open the soft HCA world");
	/* a peer's first message takes the slow path (it names its QP):
	 * one first, so that message 0 below takes the fast one */
	post(0, MSG, later_cb);
	send_all_n(1);
	eu_pump(&W);
	if (done[0] != 1)
		tap_bail("the first message did not arrive");
	/* message 0 in a plain buffer (tme_on_unexpected) */
	run("software-held receive, small ones and progress from its callback",
	    MSG, MSG);
	run("software-held receive, card-bound ones from its callback", MSG,
	    CARD_LEN);
	st = eu_node_stats(&W, 0);
	tap_check(st.card_entries_max > 0 && st.card_matched == 0,
		  "so far the callbacks' receives went to the card (%u entries at most), and message 0 never did",
		  (unsigned)st.card_entries_max);
	/* message 0 matched by the card (tme_on_recv_cqe) */
	run("card-held receive, small ones and progress from its callback",
	    CARD_LEN, MSG);
	test_order();
	st = eu_node_stats(&W, 0);
	tap_check(st.card_matched == 1,
		  "the card matched message 0 of the last run (%lu)",
		  (unsigned long)st.card_matched);
	eu_world_fini(&W);
	return tap_done();
}
