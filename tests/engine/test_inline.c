/*
 * test_inline.c - the small-message paths.  Sends posted inline
 * (IBV_SEND_INLINE): what the tx QP reports, completion at post with the
 * buffer free for reuse, the boundary between inline and slot sends,
 * inline sends that waited in the queue, inline control messages (ACK).
 * Unexpected messages: the recycled copies of small ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "eng_util.h"
#include "engine/tm_engine_test.h"

static struct eu_world W;

static struct tm_engine *E(int i)
{
	return W.node[i].eng;
}

static uint8_t *A(int i, size_t off)
{
	return W.node[i].arena + off;
}

/* Posts and queued items seen by the fault hook (which lets all pass). */
static unsigned n_post, n_alloc;

static int count_hook(void *arg, enum tm_site site)
{
	(void)arg;
	n_post += site == TM_SITE_POST_SEND;
	n_alloc += site >= TM_SITE_ALLOC_TX &&
		   site <= TM_SITE_ALLOC_TX_KEEPALIVE;
	return 0;
}

static const struct tm_engine_test counting = { .fault = count_hook };

static void open_world(enum softhca_sched sched)
{
	struct eu_opts o;

	eu_opts_default(&o);
	o.sched = sched;
	o.ecfg.test = &counting;
	o.ecfg.eager_limit = 1024;
	if (eu_world_init(&W, 2, &o))
		tap_bail("cannot open the soft HCA world");
}

static int post_recv(struct eu_recv *t, int tag, size_t off, size_t len)
{
	memset(t, 0, sizeof(*t));
	t->r.cb = eu_recv_cb;
	return tm_engine_irecv(E(0), &t->r, 1, 1, tag, A(0, off), len,
			       W.node[0].mr);
}

static int send_msg(struct eu_send *t, int tag, size_t off, size_t len,
		    uint8_t seed, unsigned flags)
{
	memset(t, 0, sizeof(*t));
	t->s.cb = eu_send_cb;
	eu_fill(A(1, off), len, seed);
	return tm_engine_isend(E(1), &t->s, W.node[1].peer[0], 1, 1, tag,
			       A(1, off), len, W.node[1].mr, flags);
}

/* The soft HCA behaves as mlx5: a 2-SGE RC WQE is 256 bytes, 192 of
 * them control segments, and the inline header takes 4 (rules 2, 11). */
static void test_qp_reports(void)
{
	open_world(SOFTHCA_SCHED_AUTO);
	tap_check(W.node[1].qp[0].tx_max_inline == 60,
		  "the tx QP of a pair reports max_inline_data 60 (%u)",
		  W.node[1].qp[0].tx_max_inline);
	eu_world_fini(&W);
}

/*
 * MANUAL: the card does nothing until pumped, so whatever the receiver
 * gets was copied out of the sender's buffer at post time.
 */
static void test_done_at_post(void)
{
	struct eu_recv r;
	struct eu_send s;

	open_world(SOFTHCA_SCHED_MANUAL);
	post_recv(&r, 5, 0, 64);
	send_msg(&s, 5, 0, 8, 3, 0);
	tap_check(s.done == 1 && s.s.status == TM_REQ_OK &&
		  eu_node_stats(&W, 1).sends_inline == 1,
		  "an 8-byte send goes inline and completes inside isend "
		  "(done %d, inline %llu)", s.done,
		  (unsigned long long)eu_node_stats(&W, 1).sends_inline);
	memset(A(1, 0), 0xee, 8); /* the caller reuses its buffer at once */
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_OK && r.r.msg_len == 8 &&
		  eu_check(A(0, 0), 8, 3),
		  "... the receiver gets the bytes of the post, not the reuse");
	tap_check(eu_quiet(&W), "... and nothing is left outstanding");
	eu_world_fini(&W);
}

/* The largest inline payload and one byte more: inline, then a slot;
 * the same result either way. */
static void test_boundary(void)
{
	struct eu_recv r[2];
	struct eu_send s[2];
	uint32_t max = 0;
	uint64_t inl0;
	size_t len;
	int i;

	open_world(SOFTHCA_SCHED_MANUAL);
	max = W.node[1].qp[0].tx_max_inline - 16; /* less the TMH */
	for (i = 0; i < 2; i++) {
		len = max + (size_t)i;
		post_recv(&r[i], 20 + i, 4096 * (size_t)i, 512);
		inl0 = eu_node_stats(&W, 1).sends_inline;
		n_post = n_alloc = 0;
		send_msg(&s[i], 20 + i, 4096 * (size_t)i, len,
			 (uint8_t)(40 + i), 0);
		/* not a refused inline post and a retry from the queue */
		tap_check(n_post == 1 && n_alloc == 0,
			  "%zu payload bytes: one post, nothing queued "
			  "(posts %u, queued %u)", len, n_post, n_alloc);
		tap_check(eu_node_stats(&W, 1).sends_inline - inl0 == (i == 0 ? 1u : 0u),
			  "%zu payload bytes: %s", len,
			  i == 0 ? "inline (the largest that fits)" :
			  "through a send slot (one byte past)");
		tap_check(s[i].done == 1 && s[i].s.status == TM_REQ_OK,
			  "... the send completes at post");
		memset(A(1, 4096 * (size_t)i), 0x5a, len);
	}
	eu_pump(&W);
	for (i = 0; i < 2; i++)
		tap_check(r[i].done == 1 && r[i].r.status == TM_REQ_OK &&
			  r[i].r.msg_len == max + (size_t)i &&
			  eu_check(A(0, 4096 * (size_t)i), max + (size_t)i,
				(uint8_t)(40 + i)),
			  "%zu bytes arrive intact", max + (size_t)i);
	tap_check(eu_quiet(&W), "nothing left outstanding");
	eu_world_fini(&W);
}

/*
 * With the card stopped nothing retires, so the send queue fills; later
 * sends wait in the peer's queue and go out inline from there once the
 * card runs: all complete, in order, intact, and every WR is retired.
 */
#define NQ 300
static void test_queued(void)
{
	static struct eu_recv r[NQ];
	static struct eu_send s[NQ];
	int i, at_post = 0, ok = 1, order = 1;

	open_world(SOFTHCA_SCHED_MANUAL);
	for (i = 0; i < NQ; i++)
		post_recv(&r[i], 7, 64 * (size_t)i, 64);
	for (i = 0; i < NQ; i++) {
		send_msg(&s[i], 7, 64 * (size_t)i, 8, (uint8_t)i, 0);
		at_post += s[i].done;
	}
	tap_check(at_post > 0 && at_post < NQ,
		  "a full send queue: %d of %d sends done at post, the rest "
		  "queued", at_post, NQ);
	eu_pump(&W);
	for (i = 0; i < NQ; i++) {
		ok &= s[i].done == 1 && r[i].done == 1 &&
		      r[i].r.status == TM_REQ_OK;
		/* each receive got the message sent i-th (same tag: order) */
		order &= eu_check(A(0, 64 * (size_t)i), 8, (uint8_t)i);
	}
	/* tm_engine_idle() puts a signalled keepalive behind unsignalled
	 * WRs: control messages go inline too */
	tap_check(ok && order && eu_node_stats(&W, 1).sends_inline ==
		  NQ + eu_node_stats(&W, 1).keepalives_sent,
		  "... all complete, in order and intact, every one inline "
		  "(%llu, %llu keepalives)",
		  (unsigned long long)eu_node_stats(&W, 1).sends_inline,
		  (unsigned long long)eu_node_stats(&W, 1).keepalives_sent);
	tap_check(eu_quiet(&W), "... and every WR is retired");
	eu_world_fini(&W);
}

/*
 * AUTO: an eager send does not poll unless its send queue is full; then
 * it drains, and the WRs the card completed meanwhile (as many as the
 * receiving card acknowledged) make room: in a run of sends with no
 * progress between, more than a send queue's worth complete at post.
 */
static void test_run_no_progress(void)
{
	static struct eu_recv r[NQ];
	static struct eu_send s[NQ];
	int i, at_post = 0, ok = 1, sq;

	open_world(SOFTHCA_SCHED_AUTO);
	sq = (int)W.node[1].dev->qp_max_send_wr / 2; /* the engine's limit */
	for (i = 0; i < NQ; i++)
		post_recv(&r[i], 8, 64 * (size_t)i, 64);
	for (i = 0; i < NQ; i++) {
		send_msg(&s[i], 8, 64 * (size_t)i, 8, (uint8_t)(i + 1), 0);
		at_post += s[i].done;
	}
	eu_pump(&W);
	for (i = 0; i < NQ; i++)
		ok &= r[i].done == 1 && eu_check(A(0, 64 * (size_t)i), 8,
					      (uint8_t)(i + 1));
	tap_check(at_post > sq && ok,
		  "%d sends in a row, no progress between: more than a send "
		  "queue (%d) done at post (%d), all delivered in order", NQ,
		  sq, at_post);
	eu_world_fini(&W);
}

/*
 * One message at a time with progress between, for four send queues'
 * worth: the silent WRs that each signalled completion retires give their
 * room back (counted per peer), so every send completes at post.
 */
static void test_retire_room(void)
{
	struct eu_recv r;
	struct eu_send s;
	int i, k, n, at_post = 0, ok = 1;

	open_world(SOFTHCA_SCHED_AUTO);
	n = 4 * (int)(W.node[1].dev->qp_max_send_wr / 2);
	for (i = 0; i < n; i++) {
		post_recv(&r, 9, 0, 64);
		send_msg(&s, 9, 0, 8, (uint8_t)i, 0);
		at_post += s.done;
		/* plain progress, not eu_pump: its idle test would signal a
		 * keepalive after every send */
		for (k = 0; k < 1000 && !r.done; k++) {
			tm_engine_progress(E(0));
			tm_engine_progress(E(1));
		}
		ok &= r.done == 1 && s.done == 1 && eu_check(A(0, 0), 8, (uint8_t)i);
	}
	tap_check(ok && at_post == n,
		  "%d sends one at a time: all delivered, every one done at "
		  "post (%d)", n, at_post);
	/* selective signalling holds: the silent WRs' room comes back, so
	 * the queue never looks full enough to signal every WR */
	tap_check(eu_node_stats(&W, 1).send_cqes * 4 < (uint64_t)n,
		  "... fewer than one in four signalled (%llu completions)",
		  (unsigned long long)eu_node_stats(&W, 1).send_cqes);
	eu_pump(&W);
	tap_check(eu_quiet(&W), "... and every WR is retired");
	eu_world_fini(&W);
}

/* A synchronous send: its ACK is a 16-byte control message, inline. */
static void test_ack_inline(void)
{
	struct eu_recv r;
	struct eu_send s;

	open_world(SOFTHCA_SCHED_AUTO);
	post_recv(&r, 9, 0, 64);
	send_msg(&s, 9, 0, 8, 77, TM_SEND_SYNC);
	eu_pump(&W);
	tap_check(r.done == 1 && s.done == 1 && s.s.status == TM_REQ_OK &&
		  eu_node_stats(&W, 0).acks_sent == 1 &&
		  eu_node_stats(&W, 0).sends_inline == 1 + eu_node_stats(&W, 0).keepalives_sent,
		  "a synchronous send completes; its ACK went inline "
		  "(acks %llu, inline %llu)",
		  (unsigned long long)eu_node_stats(&W, 0).acks_sent,
		  (unsigned long long)eu_node_stats(&W, 0).sends_inline);
	eu_world_fini(&W);
}

/*
 * Unexpected messages of sizes on both sides of TM_MSG_SMALL (256), in
 * rounds, so that a copy recycled from a short message holds a longer
 * one next time: every message arrives whole (ASan sees any overrun).
 */
#define NU 36
static void test_unexpected_recycle(void)
{
	static const size_t sz[] = { 0, 8, 255, 256, 257, 1000 };
	struct eu_recv r;
	struct eu_send s[NU];
	int round, i, ok = 1;
	size_t len;

	open_world(SOFTHCA_SCHED_AUTO);
	for (round = 0; round < 4; round++) {
		for (i = 0; i < NU; i++)
			send_msg(&s[i], 100 + i, 1024 * (size_t)i,
				 sz[(i + round) % 6], (uint8_t)(round * 50 + i),
				 0);
		eu_pump(&W);
		for (i = 0; i < NU; i++) {
			len = sz[(i + round) % 6];
			post_recv(&r, 100 + i, 0, 1024);
			eu_pump(&W);
			ok &= r.done == 1 && r.r.status == TM_REQ_OK &&
			      r.r.msg_len == len && !r.r.on_card &&
			      eu_check(A(0, 0), len, (uint8_t)(round * 50 + i));
		}
	}
	tap_check(ok && eu_node_stats(&W, 0).unexpected == 4 * NU,
		  "%d unexpected messages of 0..1000 bytes in 4 rounds, "
		  "copies recycled between rounds: all arrive whole", 4 * NU);
	eu_world_fini(&W);
}

int main(void)
{
	test_qp_reports();
	test_done_at_post();
	test_boundary();
	test_queued();
	test_run_no_progress();
	test_retire_room();
	test_ack_inline();
	test_unexpected_recycle();
	return tap_done();
}
