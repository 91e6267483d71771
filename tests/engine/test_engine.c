/*
 * test_engine.c - unit tests of the matching engine on the soft HCA, one
 * behaviour per TAP line: posting and completion (item 1), software shadow
 * and queues (2), the hardware-prefix policy (3), the unexpected counter
 * and the claim race (4), protocols (5), cancel (6).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tap.h"
#include "eng_util.h"


static struct eu_world W;

static struct tm_engine *E(int i)
{
	return W.node[i].eng;
}

static uint8_t *A(int i, size_t off)
{
	return W.node[i].arena + off;
}

static struct ibv_mr *MR(int i)
{
	return W.node[i].mr;
}

static int post_recv_mr(struct eu_recv *t, int node, uint32_t ctx, int src,
			int tag, size_t off, size_t len, struct ibv_mr *mr)
{
	memset(t, 0, sizeof(*t));
	t->r.cb = eu_recv_cb;
	return tm_engine_irecv(E(node), &t->r, ctx, src, tag, A(node, off),
			       len, mr);
}

/* A receive no card can take: longer than the card reads at once (the
 * messages it gets are small: only their bytes are written). */
#define NEVER_LEN ((size_t)UINT32_MAX + 1)

static int post_recv(struct eu_recv *t, int node, uint32_t ctx, int src,
		     int tag, size_t off, size_t len)
{
	return post_recv_mr(t, node, ctx, src, tag, off, len, MR(node));
}

static int send_msg(struct eu_send *t, int from, int to, uint32_t ctx, int tag,
		    size_t off, size_t len, uint8_t seed, unsigned flags)
{
	memset(t, 0, sizeof(*t));
	t->s.cb = eu_send_cb;
	eu_fill(A(from, off), len, seed);
	return tm_engine_isend(E(from), &t->s, W.node[from].peer[to], ctx,
			       from, tag, A(from, off), len, MR(from), flags);
}

static void open_world(int n, uint32_t tags, uint32_t ops,
		       enum softhca_sched sched)
{
	struct eu_opts o;

	eu_opts_default(&o);
	o.max_num_tags = tags;
	o.max_ops = ops;
	o.sched = sched;
	o.ecfg.eager_limit = 1024;
	if (eu_world_init(&W, n, &o))
		tap_bail("cannot open the soft HCA world");
}

static void test_eager_expected(void)
{
	struct eu_recv r;
	struct eu_send s;

	open_world(2, 0, 0, SOFTHCA_SCHED_AUTO);
	post_recv(&r, 0, 3, 1, 42, 0, 512);
	tap_check(eu_node_stats(&W, 0).recv_to_card == 1, "specific receive goes to the card");
	send_msg(&s, 1, 0, 3, 42, 0, 100, 9, 0);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_OK && r.r.on_card &&
		  r.r.msg_len == 100 && eu_check(A(0, 0), 100, 9),
		  "eager expected: card match, data, length");
	tap_check(r.r.env.ctx == 3 && r.r.env.src == 1 && r.r.env.tag == 42 &&
		  r.r.send_seq == s.s.seq, "completion carries the envelope and send id");
	tap_check(s.done == 1 && s.s.status == TM_REQ_OK, "eager send completes");
	tap_check(eu_quiet(&W), "nothing left in flight");
	eu_world_fini(&W);
}

static void test_eager_unexpected(void)
{
	struct eu_recv r;
	struct eu_send s;

	open_world(2, 0, 0, SOFTHCA_SCHED_AUTO);
	send_msg(&s, 1, 0, 3, -5, 0, 300, 1, 0);
	eu_pump(&W);
	tap_check(eu_node_stats(&W, 0).uq_len == 1 && eu_node_stats(&W, 0).unexpected == 1,
		  "unexpected eager waits in the unexpected queue");
	post_recv(&r, 0, 3, 1, -5, 0, 512);
	tap_check(r.done == 1 && r.r.status == TM_REQ_OK && !r.r.on_card &&
		  r.r.msg_len == 300 && eu_check(A(0, 0), 300, 1),
		  "receive matches the unexpected queue at post (negative tag)");
	eu_world_fini(&W);
}

static void test_rndv(void)
{
	struct eu_recv r1, r2;
	struct eu_send s1, s2;

	open_world(2, 0, 0, SOFTHCA_SCHED_AUTO);
	post_recv(&r1, 0, 1, 1, 7, 0, 100000);
	send_msg(&s1, 1, 0, 1, 7, 0, 50000, 3, 0);
	eu_pump(&W);
	tap_check(r1.done && r1.r.status == TM_REQ_OK && r1.r.on_card &&
		  r1.r.msg_len == 50000 && eu_check(A(0, 0), 50000, 3),
		  "rendezvous expected: the card reads");
	tap_check(s1.done && eu_node_stats(&W, 1).fins_recv == 1 && eu_node_stats(&W, 1).fin_unknown == 0,
		  "card FIN completes the rendezvous send once");
	send_msg(&s2, 1, 0, 1, 8, 100000, 60000, 4, 0);
	eu_pump(&W);
	post_recv(&r2, 0, 1, TM_ANY_SRC, 8, 200000, 100000);
	eu_pump(&W);
	tap_check(r2.done && r2.r.status == TM_REQ_OK && !r2.r.on_card &&
		  r2.r.msg_len == 60000 && eu_check(A(0, 200000), 60000, 4),
		  "rendezvous unexpected: software read");
	tap_check(s2.done && eu_node_stats(&W, 0).fins_sent == 1 && eu_node_stats(&W, 1).fins_recv == 2,
		  "software FIN completes the sender");
	eu_world_fini(&W);
}

static void test_truncation(void)
{
	struct eu_recv r1, r2, r3, r4;
	struct eu_send s1, s2, s3, s4;
	int guard_ok;

	open_world(2, 0, 0, SOFTHCA_SCHED_AUTO);
	memset(A(0, 0), 0xee, 4096);
	post_recv(&r1, 0, 1, 1, 1, 0, 64);
	send_msg(&s1, 1, 0, 1, 1, 0, 200, 5, 0);
	eu_pump(&W);
	guard_ok = A(0, 64)[0] == 0xee && A(0, 100)[0] == 0xee;
	tap_check(r1.done && r1.r.status == TM_REQ_TRUNCATED &&
		  r1.r.msg_len == 200 && r1.r.recv_len == 64 &&
		  eu_check(A(0, 0), 64, 5) && guard_ok,
		  "eager truncated on the card: full length, no overrun");
	tap_check(eu_node_stats(&W, 0).truncated == 1,
		  "the card-matched truncation is counted (%llu)",
		  (unsigned long long)eu_node_stats(&W, 0).truncated);
	post_recv(&r2, 0, 1, 1, 2, 1000, 100);
	/* the match is a linearisation point: its own stamp, between the
	 * receive's post and the next post */
	tap_check(r1.r.post_stamp < r1.r.match_stamp &&
		  r1.r.match_stamp < r2.r.post_stamp,
		  "a card match takes its own stamp (%llu < %llu < %llu)",
		  (unsigned long long)r1.r.post_stamp,
		  (unsigned long long)r1.r.match_stamp,
		  (unsigned long long)r2.r.post_stamp);
	send_msg(&s2, 1, 0, 1, 2, 10000, 20000, 6, 0);
	eu_pump(&W);
	tap_check(r2.done && r2.r.status == TM_REQ_TRUNCATED &&
		  r2.r.msg_len == 20000 && r2.r.recv_len == 100 &&
		  eu_check(A(0, 1000), 100, 6) && A(0, 1100)[0] == 0xee,
		  "rendezvous too big for the card's buffer: software finishes");
	tap_check(s2.done, "truncated rendezvous still FINs the sender");
	send_msg(&s3, 1, 0, 1, 3, 40000, 500, 7, 0);
	send_msg(&s4, 1, 0, 1, 4, 50000, 9000, 8, 0);
	eu_pump(&W);
	post_recv(&r3, 0, 1, 1, 3, 2000, 10);
	post_recv(&r4, 0, 1, 1, 4, 3000, 16);
	eu_pump(&W);
	tap_check(r3.done && r3.r.status == TM_REQ_TRUNCATED &&
		  r3.r.msg_len == 500 && A(0, 2010)[0] == 0xee,
		  "unexpected eager truncated in software");
	tap_check(r4.done && r4.r.status == TM_REQ_TRUNCATED &&
		  r4.r.msg_len == 9000 && A(0, 3016)[0] == 0xee && s4.done,
		  "unexpected rendezvous truncated in software");
	eu_world_fini(&W);
}

static void test_ssend(void)
{
	struct eu_recv r;
	struct eu_send s1, s2;

	open_world(2, 0, 0, SOFTHCA_SCHED_AUTO);
	send_msg(&s1, 1, 0, 1, 5, 0, 10, 1, TM_SEND_SYNC);
	eu_pump(&W);
	tap_check(!s1.done, "synchronous send waits while unmatched");
	post_recv(&r, 0, 1, 1, 5, 0, 100);
	eu_pump(&W);
	tap_check(s1.done && r.done, "synchronous send completes on software match");
	post_recv(&r, 0, 1, 1, 6, 0, 100);
	send_msg(&s2, 1, 0, 1, 6, 0, 10, 1, TM_SEND_SYNC);
	tap_check(!s2.done, "synchronous send: not done at post, whatever "
		  "else is pending (an eager one may complete there)");
	eu_pump(&W);
	tap_check(s2.done && r.done && r.r.on_card,
		  "synchronous send completes on card match (ACK)");
	eu_world_fini(&W);
}

static void test_probe(void)
{
	struct tm_probe_info pi;
	struct tm_msg *m;
	struct eu_recv r;
	struct eu_send s1, s2;

	open_world(3, 0, 0, SOFTHCA_SCHED_AUTO);
	tap_check(tm_engine_iprobe(E(0), 1, TM_ANY_SRC, TM_ANY_TAG, &pi) ==
		  TM_ERR_NOT_FOUND, "probe on an empty queue finds nothing");
	send_msg(&s1, 1, 0, 1, 10, 0, 33, 1, 0);
	eu_pump(&W);
	send_msg(&s2, 2, 0, 1, 11, 0, 20000, 2, 0);
	eu_pump(&W);
	tap_check(tm_engine_iprobe(E(0), 1, TM_ANY_SRC, TM_ANY_TAG, &pi) == TM_OK &&
		  pi.env.src == 1 && pi.len == 33,
		  "probe (any, any) sees the earliest message");
	tap_check(tm_engine_iprobe(E(0), 1, 2, TM_ANY_TAG, &pi) == TM_OK &&
		  pi.env.tag == 11 && pi.len == 20000,
		  "probe reports the full rendezvous length");
	tap_check(tm_engine_improbe(E(0), 1, 2, 11, &m, &pi) == TM_OK && m,
		  "matched probe claims the message");
	tap_check(tm_engine_iprobe(E(0), 1, 2, TM_ANY_TAG, &pi) ==
		  TM_ERR_NOT_FOUND, "a claimed message is gone from the queue");
	memset(&r, 0, sizeof(r));
	r.r.cb = eu_recv_cb;
	tm_engine_imrecv(E(0), &r.r, m, A(0, 0), 30000, MR(0));
	eu_pump(&W);
	tap_check(r.done && r.r.msg_len == 20000 && eu_check(A(0, 0), 20000, 2) &&
		  s2.done, "mrecv receives the claimed rendezvous");
	eu_world_fini(&W);
}

static void test_cancel(void)
{
	struct eu_recv r1, r2, r3;
	struct eu_send s;

	open_world(2, 1, 0, SOFTHCA_SCHED_AUTO);
	post_recv(&r1, 0, 1, 1, 1, 0, 100);  /* card */
	post_recv(&r2, 0, 1, 1, 2, 100, 100); /* list full: software */
	tap_check(eu_node_stats(&W, 0).recv_to_card == 1 && eu_node_stats(&W, 0).sw_list_full == 1,
		  "second receive stays in software: list full");
	tm_engine_cancel_recv(E(0), &r2.r);
	tap_check(r2.done && r2.r.status == TM_REQ_CANCELLED,
		  "cancel of a software-held receive");
	tm_engine_cancel_recv(E(0), &r1.r);
	eu_pump(&W);
	tap_check(r1.done && r1.r.status == TM_REQ_CANCELLED &&
		  eu_node_stats(&W, 0).card_entries == 0, "cancel of a card receive: DEL succeeds");
	post_recv(&r3, 0, 1, 1, 3, 0, 100);
	send_msg(&s, 1, 0, 1, 3, 0, 50, 1, 0);
	eu_pump(&W);
	tm_engine_cancel_recv(E(0), &r3.r);
	eu_pump(&W);
	tap_check(r3.done == 1 && r3.r.status == TM_REQ_OK,
		  "cancel after the match: completes normally, once");
	eu_world_fini(&W);
}

/* What tools read (MPI_T): queues per context, the card's high mark. */
static void test_tool_queries(void)
{
	struct eu_recv r[4];
	struct eu_send s[4];
	struct tm_engine_stats st;
	uint64_t p, u;
	int i, ok = 1;
	static const uint32_t ctxs[] = { 1, 1, 1, 2 };
	/* contexts 0..3 once r[0] matched */
	static const uint64_t want[4][2] = { {0, 0}, {2, 2}, {1, 0}, {0, 1} };

	open_world(2, 0, 0, SOFTHCA_SCHED_AUTO);
	for (i = 0; i < 4; i++)
		post_recv(&r[i], 0, ctxs[i], 1, i, 100 * (size_t)i, 100);
	send_msg(&s[0], 1, 0, 1, 10, 0, 10, 1, 0);
	send_msg(&s[1], 1, 0, 1, -10, 100, 10, 1, 0);
	send_msg(&s[2], 1, 0, 3, 10, 200, 10, 1, 0);
	send_msg(&s[3], 1, 0, 1, 0, 300, 10, 1, 0); /* matches r[0] */
	eu_pump(&W);
	for (i = 0; i < 4; i++) {
		tm_engine_ctx_queues(E(0), (uint32_t)i, &p, &u);
		if (p == want[i][0] && u == want[i][1])
			continue;
		tap_diag("context %d: posted %llu, unexpected %llu", i,
			 (unsigned long long)p, (unsigned long long)u);
		ok = 0;
	}
	tap_check(ok && r[0].done, "per-context posted and unexpected counts");
	st = eu_node_stats(&W, 0);
	tap_check(st.card_entries == 3 && st.card_entries_max == 4,
		  "the card's entries and their high-water mark (%u, %u)",
		  st.card_entries, st.card_entries_max);
	for (i = 1; i < 4; i++)
		tm_engine_cancel_recv(E(0), &r[i].r);
	eu_pump(&W);
	tm_engine_ctx_queues(E(0), 1, &p, &u);
	tap_check(p == 0 && u == 2 && eu_node_stats(&W, 0).card_entries_max == 4,
		  "cancelled receives leave the counts; the mark stays");
	eu_world_fini(&W);
}

/* MANUAL card: the DEL of a cancel loses against a message. */
static void test_cancel_race(void)
{
	struct eu_recv r;
	struct eu_send s;
	struct ibv_context *c0;

	open_world(2, 0, 0, SOFTHCA_SCHED_MANUAL);
	c0 = W.node[0].dev->ctx;
	post_recv(&r, 0, 1, 1, 3, 0, 100);
	tm_engine_progress(E(0));                     /* the chained ADD */
	softhca_step(c0, SOFTHCA_WORK_OP, SOFTHCA_ANY_QP); /* ADD */
	send_msg(&s, 1, 0, 1, 3, 0, 50, 1, 0);
	softhca_drain(W.node[1].dev->ctx);            /* to the wire */
	tm_engine_cancel_recv(E(0), &r.r);               /* DEL posted */
	softhca_step(c0, SOFTHCA_WORK_RX, SOFTHCA_ANY_QP); /* match first */
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_OK &&
		  eu_node_stats(&W, 0).cancel_late == 1,
		  "failed DEL of a cancel: the receive completes normally");
	eu_world_fini(&W);
}

/* MANUAL card: an unexpected message overtakes the ADD of its receive. */
static void test_claim(void)
{
	struct eu_recv r1, r2;
	struct eu_send s1, s2;
	struct ibv_context *c0;

	open_world(2, 0, 0, SOFTHCA_SCHED_MANUAL);
	c0 = W.node[0].dev->ctx;
	post_recv(&r1, 0, 1, TM_ANY_SRC, 4, 0, 100);    /* ADD not processed */
	send_msg(&s1, 1, 0, 1, 4, 0, 50, 1, 0);
	send_msg(&s2, 1, 0, 1, 4, 100, 60, 2, 0);
	softhca_drain(W.node[1].dev->ctx);
	softhca_step(c0, SOFTHCA_WORK_RX, SOFTHCA_ANY_QP); /* m1 unexpected */
	softhca_step(c0, SOFTHCA_WORK_OP, SOFTHCA_ANY_QP); /* ADD: inactive */
	softhca_step(c0, SOFTHCA_WORK_RX, SOFTHCA_ANY_QP); /* m2 unexpected */
	eu_pump(&W);
	tap_check(r1.done && r1.r.msg_len == 50 && eu_check(A(0, 0), 50, 1) &&
		  eu_node_stats(&W, 0).unexp_claimed == 1 && eu_node_stats(&W, 0).claim_del_failed == 0,
		  "unexpected message claims its receive back from the card");
	post_recv(&r2, 0, 1, 1, 4, 200, 100);
	tap_check(r2.done && r2.r.msg_len == 60 && eu_node_stats(&W, 0).unexpected == 2,
		  "the entry added out of sync matched nothing");
	tap_check(eu_node_stats(&W, 0).syncs >= 1 || eu_node_stats(&W, 0).ops_posted >= 2,
		  "the count reached the card");
	eu_world_fini(&W);
}

static void test_prefix(void)
{
	struct eu_recv r[9];
	struct eu_send s[4];
	struct tm_engine_stats st;
	int i;

	open_world(3, 2, 0, SOFTHCA_SCHED_AUTO);
	post_recv(&r[0], 0, 1, TM_ANY_SRC, 1, 0, 100);  /* card */
	post_recv(&r[1], 0, 1, 1, TM_ANY_TAG, 100, 100); /* card */
	post_recv(&r[2], 0, 1, 2, 1, 200, 100);          /* full */
	post_recv(&r[3], 0, 1, 2, 1, 300, 100);          /* conflict */
	post_recv(&r[4], 0, 2, 1, 1, 400, 100);          /* other ctx */
	post_recv(&r[5], 0, 1, 3, 9, 500, 100);          /* small: not it */
	st = eu_node_stats(&W, 0);
	tap_check(st.recv_to_card == 2, "wildcards (any source, any tag) go to the card");
	tap_check(st.sw_list_full == 3 && st.sw_conflict == 1,
		  "list full is counted");
	for (i = 0; i < 2; i++) {
		struct eu_recv *t = &r[i];

		tm_engine_cancel_recv(E(0), &t->r);
	}
	eu_pump(&W);
	st = eu_node_stats(&W, 0);
	tap_check(st.promoted == 2 && st.card_entries == 2 && st.sw_held == 2,
		  "freed slots go to the earliest software-held receive of each context");
	post_recv(&r[6], 0, 1, 2, 1, 0, 100);
	st = eu_node_stats(&W, 0);
	tap_check(st.sw_conflict == 2,
		  "an earlier software-held receive keeps a later one off the card");
	post_recv(&r[7], 0, 1, 2, 2, 100, 100);
	post_recv(&r[8], 0, 1, 3, 3, 600, NEVER_LEN);
	st = eu_node_stats(&W, 0);
	tap_check(st.sw_list_full == 4, "a non-conflicting receive meets the full list");
	tap_check(st.sw_long_buf == 1,
		  "a buffer longer than the card reads at once is counted");
	send_msg(&s[0], 2, 0, 1, 1, 0, 10, 1, 0);
	send_msg(&s[1], 2, 0, 1, 1, 0, 11, 2, 0);
	send_msg(&s[2], 2, 0, 1, 1, 0, 12, 3, 0);
	eu_pump(&W);
	tap_check(r[2].done && r[2].r.msg_len == 10 && r[3].done &&
		  r[3].r.msg_len == 11 && r[6].done && r[6].r.msg_len == 12,
		  "software-held receives match in post order");
	eu_world_fini(&W);
}

/* Promotion: software-held receives move to the card when they can. */
static struct eu_recv pr[8];

static int all_on_card(int from, int to)
{
	int i, ok = 1;

	for (i = from; i <= to; i++)
		ok &= pr[i].done == 1 && pr[i].r.on_card;
	return ok;
}

/* A wildcard waits for room; the receives it held back follow it. */
static void test_promote_wildcard(void)
{
	struct eu_send s[8];
	struct tm_engine_stats st;

	open_world(2, 1, 0, SOFTHCA_SCHED_AUTO);
	post_recv(&pr[0], 0, 1, 1, 1, 0, 100);                  /* card */
	post_recv(&pr[1], 0, 1, TM_ANY_SRC, TM_ANY_TAG, 100, 100); /* full */
	post_recv(&pr[2], 0, 1, 1, 2, 200, 100);                /* conflict */
	post_recv(&pr[3], 0, 1, 1, 2, 300, 100);                /* conflict */
	post_recv(&pr[4], 0, 1, 1, 3, 400, 100);                /* conflict */
	st = eu_node_stats(&W, 0);
	tap_check(st.recv_to_card == 1 && st.sw_list_full == 1 &&
		  st.sw_conflict == 3 && st.promoted == 0,
		  "promotion: ANY_SOURCE/ANY_TAG held in software (list full) holds back the rest");
	send_msg(&s[0], 1, 0, 1, 1, 0, 10, 1, 0);
	eu_pump(&W);
	st = eu_node_stats(&W, 0);
	tap_check(pr[0].done && pr[0].r.on_card && st.promoted == 1 &&
		  st.card_entries == 1,
		  "promotion: the slot the match freed goes to the wildcard");
	send_msg(&s[1], 1, 0, 1, 9, 0, 11, 2, 0);
	eu_pump(&W);
	tap_check(all_on_card(1, 1) && pr[1].r.env.tag == 9,
		  "promotion: the promoted wildcard matches on the card");
	send_msg(&s[2], 1, 0, 1, 2, 0, 12, 3, 0);
	eu_pump(&W);
	send_msg(&s[3], 1, 0, 1, 2, 0, 13, 4, 0);
	eu_pump(&W);
	send_msg(&s[4], 1, 0, 1, 3, 0, 14, 5, 0);
	eu_pump(&W);
	st = eu_node_stats(&W, 0);
	tap_check(all_on_card(2, 4) && pr[2].r.msg_len == 12 &&
		  pr[3].r.msg_len == 13 && st.promoted == 4 && st.sw_held == 0,
		  "promotion: the held-back receives follow in post order, each matched on the card");
	tap_check(st.card_matched == 5 && eu_quiet(&W),
		  "promotion: every message matched on the card, nothing left");
	eu_world_fini(&W);
}

/* The conflicting receive leaves software: cancelled, or matched there. */
static void test_promote_conflict_gone(void)
{
	struct eu_send s[3];
	struct tm_engine_stats st;

	open_world(2, 0, 0, SOFTHCA_SCHED_AUTO);
	/* buffers longer than the card reads at once never go to the card:
	 * they stay in software (only the message's bytes are written) */
	post_recv(&pr[0], 0, 1, TM_ANY_SRC, TM_ANY_TAG, 0, NEVER_LEN);
	post_recv(&pr[1], 0, 1, 1, 5, 100, 100);
	post_recv(&pr[2], 0, 2, 1, 5, 200, 100);
	st = eu_node_stats(&W, 0);
	tap_check(st.sw_long_buf == 1 && st.sw_conflict == 1 &&
		  st.recv_to_card == 1,
		  "promotion: a receive that can never go to the card holds back its context only");
	tm_engine_cancel_recv(E(0), &pr[0].r);
	st = eu_node_stats(&W, 0);
	tap_check(pr[0].done && st.promoted == 1 && st.card_entries == 2,
		  "promotion: cancelling it promotes the receive it held back");
	post_recv(&pr[3], 0, 1, 1, TM_ANY_TAG, 300, NEVER_LEN);
	post_recv(&pr[4], 0, 1, 1, 6, 400, 100);
	send_msg(&s[0], 1, 0, 1, 7, 0, 4, 1, 0);
	eu_pump(&W);
	st = eu_node_stats(&W, 0);
	tap_check(pr[3].done && !pr[3].r.on_card && st.promoted == 2,
		  "promotion: it matching in software promotes the receive it held back");
	send_msg(&s[1], 1, 0, 1, 5, 0, 20, 2, 0);
	send_msg(&s[2], 1, 0, 1, 6, 0, 21, 3, 0);
	eu_pump(&W);
	tap_check(pr[1].done && pr[1].r.on_card && pr[4].done &&
		  pr[4].r.on_card && eu_quiet(&W),
		  "promotion: the promoted receives match on the card");
	tm_engine_cancel_recv(E(0), &pr[2].r);
	eu_pump(&W);
	eu_world_fini(&W);
}

/* max_ops = 1, MANUAL card: receives refused for a busy op slot follow. */
static void test_promote_ops(void)
{
	struct eu_send s[8];
	struct tm_engine_stats st;
	int i;

	open_world(2, 0, 1, SOFTHCA_SCHED_MANUAL);
	/* odd ones without an MR: the engine registers them at promotion */
	for (i = 0; i < 8; i++)
		post_recv_mr(&pr[i], 0, 1, 1, i, 100 * (size_t)i, 100,
			     (i & 1) ? NULL : MR(0));
	st = eu_node_stats(&W, 0);
	tap_check(st.recv_to_card == 1 && st.sw_ops_full == 7,
		  "promotion: one op slot, seven receives wait in software");
	eu_pump(&W);
	st = eu_node_stats(&W, 0);
	tap_check(st.promoted == 7 && st.card_entries == 8 && st.sw_held == 0,
		  "promotion: as the ops drain, each goes to the card");
	for (i = 7; i >= 0; i--)
		send_msg(&s[i], 1, 0, 1, i, 100 * (size_t)i, 10, (uint8_t)i, 0);
	eu_pump(&W);
	tap_check(all_on_card(0, 7) && eu_quiet(&W) &&
		  eu_check(A(0, 700), 10, 7),
		  "promotion: all eight match on the card (also those registered at promotion)");
	eu_world_fini(&W);
}

static void test_ops_limit(void)
{
	struct eu_recv r[8];
	struct eu_send s[8];
	int i, ok = 1;

	open_world(2, 0, 1, SOFTHCA_SCHED_MANUAL);
	for (i = 0; i < 8; i++)
		post_recv(&r[i], 0, 1, 1, i, 200 * i, 100);
	tap_check(eu_node_stats(&W, 0).sw_ops_full > 0, "max_ops = 1: busy op slot is counted");
	for (i = 7; i >= 0; i--)
		send_msg(&s[i], 1, 0, 1, i, 100 * i, 10 + i, i, 0);
	eu_pump(&W);
	for (i = 0; i < 8; i++)
		ok &= r[i].done && r[i].r.msg_len == (uint64_t)(10 + i);
	tap_check(ok && eu_quiet(&W), "max_ops = 1: everything completes");
	eu_world_fini(&W);
}

/* More than 65535 unexpected messages: the card's 16-bit count wraps. */
static void test_wrap(void)
{
	struct eu_recv r;
	struct eu_send s;
	int i, ok = 1, n = 66000;

	open_world(2, 4, 0, SOFTHCA_SCHED_AUTO);
	for (i = 0; i < n && ok; i++) {
		send_msg(&s, 1, 0, 1, 1, 0, 4, 1, 0);
		eu_pump(&W);
		post_recv(&r, 0, 1, 1, 1, 0, 64);
		ok = r.done && r.r.msg_len == 4;
	}
	tap_check(ok && eu_node_stats(&W, 0).unexpected == (uint64_t)n,
		  "66000 unexpected messages pass");
	post_recv(&r, 0, 1, 1, 2, 0, 64);
	send_msg(&s, 1, 0, 1, 2, 0, 4, 1, 0);
	eu_pump(&W);
	tap_check(r.done && r.r.on_card,
		  "after the count wrapped, the card matches again");
	eu_world_fini(&W);
}

/*
 * The sync rule (tm_engine.h, "Sync protocol"): a SYNC when an entry may be
 * inactive, none when every entry is known to be in sync.
 */
static void test_sync_stale(void)
{
	struct eu_recv r1, r2;
	struct eu_send s0, s1;
	struct softhca_stats hs;
	struct ibv_context *c0;
	uint64_t syncs;

	open_world(2, 0, 0, SOFTHCA_SCHED_MANUAL);
	c0 = W.node[0].dev->ctx;
	post_recv(&r1, 0, 1, 1, 4, 0, 100);
	tm_engine_progress(E(0));                  /* ADD posted, not processed */
	send_msg(&s0, 1, 0, 1, 5, 0, 8, 1, 0);          /* matches nothing */
	softhca_drain(W.node[1].dev->ctx);
	softhca_step(c0, SOFTHCA_WORK_RX, SOFTHCA_ANY_QP); /* m0 unexpected */
	softhca_step(c0, SOFTHCA_WORK_OP, SOFTHCA_ANY_QP); /* ADD: inactive */
	softhca_query_stats(c0, &hs);
	syncs = eu_node_stats(&W, 0).syncs;
	eu_progress(&W);                                /* count moves */
	tap_check(hs.list_inactive == 1 && eu_node_stats(&W, 0).syncs == syncs + 1,
		  "sync: a SYNC is posted when an entry may be inactive");
	softhca_step(c0, SOFTHCA_WORK_OP, SOFTHCA_ANY_QP); /* the SYNC */
	softhca_query_stats(c0, &hs);
	eu_pump(&W);
	send_msg(&s1, 1, 0, 1, 4, 0, 8, 2, 0);
	eu_pump(&W);
	tap_check(hs.list_inactive == 0 && r1.done && r1.r.on_card &&
		  eu_node_stats(&W, 0).unexp_claimed == 0,
		  "sync: the SYNC activated the entry, the card matches it");
	post_recv(&r2, 0, 1, 1, 5, 200, 100);
	tap_check(r2.done && r2.r.msg_len == 8, "sync: m0 from the queue");
	eu_world_fini(&W);
}

static void test_sync_none_in_sync(void)
{
	struct eu_recv rq[8], r;
	struct eu_send s;
	uint64_t syncs;
	int i, ok = 1;

	open_world(2, 0, 0, SOFTHCA_SCHED_AUTO);
	for (i = 0; i < 8; i++)   /* never matched; ADDs unsignalled */
		post_recv(&rq[i], 0, 1, 1, 100 + i, 0, 64);
	eu_pump(&W);
	syncs = eu_node_stats(&W, 0).syncs;
	send_msg(&s, 1, 0, 1, 1, 0, 4, 1, 0);
	eu_pump(&W);
	post_recv(&r, 0, 1, 1, 1, 256, 64);
	tap_check(r.done && eu_node_stats(&W, 0).syncs <= syncs + 1,
		  "sync: at most one SYNC confirms unconfirmed entries");
	syncs = eu_node_stats(&W, 0).syncs;
	for (i = 0; i < 50 && ok; i++) {
		send_msg(&s, 1, 0, 1, 1, 0, 4, 1, 0);
		eu_pump(&W);
		post_recv(&r, 0, 1, 1, 1, 256, 64);
		ok = r.done && !r.r.on_card;
	}
	tap_check(ok && eu_node_stats(&W, 0).syncs == syncs && eu_node_stats(&W, 0).card_entries == 8,
		  "sync: no SYNC for unexpected messages past entries known "
		  "in sync");
	for (i = 0; i < 8; i++)
		tm_engine_cancel_recv(E(0), &rq[i].r);
	eu_pump(&W);
	eu_world_fini(&W);
}

int main(void)
{
	test_eager_expected();
	test_eager_unexpected();
	test_rndv();
	test_truncation();
	test_ssend();
	test_probe();
	test_cancel();
	test_cancel_race();
	test_tool_queries();
	test_claim();
	test_sync_stale();
	test_sync_none_in_sync();
	test_prefix();
	test_ops_limit();
	test_promote_wildcard();
	test_promote_conflict_gone();
	test_promote_ops();
	test_wrap();
	return tap_done();
}
