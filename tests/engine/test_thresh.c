/*
 * test_thresh.c - the offload threshold (doc/DESIGN.md, "Offload
 * policy"): a receive whose buffer is shorter than offload_thresh is
 * matched in software and posts no list op; one at or above it goes to
 * the card and the card matches it; MPI order holds between the two
 * kinds (the prefix rule, and no promotion past an older small receive).
 */
#include <stdio.h>
#include <string.h>
#include "tap.h"
#include "eng_util.h"

static struct eu_world W;

static void open_world_chain(uint32_t tags, uint32_t add_chain)
{
	struct eu_opts o;

	eu_opts_default(&o);
	o.max_num_tags = tags;
	/* the engine's own default, not the 0 the other tests use */
	tm_engine_config_default(&o.ecfg);
	o.ecfg.eager_limit = 1024;
	if (add_chain)
		o.ecfg.add_chain = add_chain;
	if (eu_world_init(&W, 2, &o))
		tap_bail("cannot open the soft HCA world");
}

static void open_world(uint32_t tags)
{
	open_world_chain(tags, 0);
}

static void post(struct eu_recv *t, int tag, size_t off, size_t len)
{
	memset(t, 0, sizeof(*t));
	t->r.cb = eu_recv_cb;
	if (tm_engine_irecv(W.node[0].eng, &t->r, 1, 1, tag,
			    W.node[0].arena + off, len, W.node[0].mr) != TM_OK)
		tap_bail("irecv");
}

static void msg_send(struct eu_send *t, int tag, size_t len, uint8_t seed)
{
	memset(t, 0, sizeof(*t));
	t->s.cb = eu_send_cb;
	eu_fill(W.node[1].arena, len, seed);
	if (tm_engine_isend(W.node[1].eng, &t->s, W.node[1].peer[0], 1, 1,
			    tag, W.node[1].arena, len, W.node[1].mr, 0) != TM_OK)
		tap_bail("isend");
	eu_pump(&W);
}

static uint64_t card_unexpected(void)
{
	struct softhca_stats hs;

	softhca_query_stats(W.node[0].dev->ctx, &hs);
	return hs.unexpected;
}

static void test_default_split(void)
{
	struct tm_engine_config c;
	struct tm_engine_stats st;
	struct eu_recv big, small;
	struct eu_send s1, s2;

	tm_engine_config_default(&c);
	tap_check(c.offload_thresh == TM_OFFLOAD_THRESH_DEFAULT &&
		  c.offload_thresh == 8192, "offload_thresh defaults to 8 KiB");
	open_world(0);
	post(&big, 5, 0, 8192);
	st = eu_node_stats(&W, 0);
	tap_check(st.recv_to_card == 1 && st.ops_posted == 1 &&
		  st.sw_below_thresh == 0,
		  "a receive at the threshold goes to the card (one ADD)");
	msg_send(&s1, 5, 100, 3);
	st = eu_node_stats(&W, 0);
	tap_check(big.done && big.r.on_card && big.r.status == TM_REQ_OK &&
		  st.card_matched == 1 && card_unexpected() == 0 &&
		  eu_check(W.node[0].arena, 100, 3),
		  "... posted before its message, the card matches it");
	post(&small, 6, 16384, 8191);
	st = eu_node_stats(&W, 0);
	tap_check(st.sw_below_thresh == 1 && st.ops_posted == 1 &&
		  st.recv_to_card == 1,
		  "a receive below it is held in software: no list op");
	msg_send(&s2, 6, 200, 4);
	st = eu_node_stats(&W, 0);
	tap_check(small.done && !small.r.on_card &&
		  small.r.status == TM_REQ_OK && small.r.msg_len == 200 &&
		  eu_check(W.node[0].arena + 16384, 200, 4) &&
		  card_unexpected() == 1 && st.unexpected == 1 &&
		  st.unexp_to_sw_recv == 1 && st.uq_len == 0 &&
		  st.syncs == 0 && st.ops_posted == 1,
		  "... its message lands in a plain buffer, is counted as the card counts it, and is delivered from there: no SYNC, no op");
	tap_check(eu_quiet(&W), "nothing left in flight");
	eu_world_fini(&W);
}

/* A small receive held in software keeps an overlapping later card-bound
 * receive off the card (prefix rule) until it matched. */
static void test_prefix(void)
{
	struct eu_recv small, big;
	struct eu_send s1, s2;
	struct tm_engine_stats st;

	open_world(0);
	post(&small, 7, 0, 64);
	post(&big, 7, 16384, 16384);
	st = eu_node_stats(&W, 0);
	tap_check(st.sw_below_thresh == 1 && st.sw_conflict == 1 &&
		  st.recv_to_card == 0,
		  "a later receive of the same source and tag stays off the card (prefix rule)");
	msg_send(&s1, 7, 10, 1);
	msg_send(&s2, 7, 500, 2);
	st = eu_node_stats(&W, 0);
	tap_check(small.done && small.r.msg_len == 10 && big.done &&
		  big.r.msg_len == 500 && eu_check(W.node[0].arena + 16384, 500, 2),
		  "messages match in post order");
	tap_check(st.promoted == 1 && big.r.on_card,
		  "once the small one matched, the other went to the card and the card matched it");
	eu_world_fini(&W);
}

/* No software-held receive posted after the oldest small one goes to the
 * card while that one waits (conservative: whatever their tags). */
static void test_no_promotion_past_small(void)
{
	struct eu_recv l1, sm, l2;
	struct eu_send s1, s2, s3;
	struct tm_engine_stats st;

	open_world(1);
	post(&l1, 1, 0, 8192);      /* takes the one entry */
	post(&sm, 2, 16384, 16);    /* software, below the threshold */
	post(&l2, 3, 32768, 8192);  /* list full: software, may be promoted */
	msg_send(&s1, 1, 100, 1);    /* frees the entry */
	st = eu_node_stats(&W, 0);
	tap_check(l1.done && l1.r.on_card && st.sw_list_full == 1 &&
		  st.promoted == 0 && !l2.done,
		  "a freed entry does not go to a receive posted after a waiting small one");
	msg_send(&s2, 2, 8, 2);
	st = eu_node_stats(&W, 0);
	tap_check(sm.done && !sm.r.on_card && st.promoted == 1,
		  "... it goes once the small one matched");
	msg_send(&s3, 3, 300, 3);
	tap_check(l2.done && l2.r.on_card && l2.r.msg_len == 300,
		  "... and the card matches it");
	eu_world_fini(&W);
}

/* Sends n messages of tag 9 (100 + i bytes, seeded i + 1) to the window
 * r of n receives of len bytes each; counts those delivered whole to
 * their own receive (*in_order) and those the card matched (*on_card). */
static void send_window(struct eu_recv *r, struct eu_send *s, int n,
			size_t len, int *in_order, int *on_card)
{
	int i;

	for (i = 0; i < n; i++)
		msg_send(&s[i], 9, 100 + (size_t)i, (uint8_t)(i + 1));
	*in_order = *on_card = 0;
	for (i = 0; i < n; i++) {
		*in_order += r[i].done == 1 &&
			     r[i].r.msg_len == 100 + (size_t)i &&
			     eu_check(W.node[0].arena + (size_t)i * len,
				      100 + (size_t)i, (uint8_t)(i + 1));
		*on_card += r[i].r.on_card;
	}
}

/*
 * A window of 64 receives at the threshold, posted before any progress
 * call (issue 26 item 4): their ADDs reach the card as one chain at the
 * next progress call, one ibv_post_srq_ops for the 64 (the soft HCA's
 * counts), in post order: 64 messages of one source and tag are matched
 * by the card, each by the receive posted in its turn.
 */
static void test_chained_window(void)
{
	enum { WIN = 64, LEN = 8192 };
	static struct eu_recv r[WIN];
	static struct eu_send s[WIN];
	struct softhca_stats h0, h1;
	struct tm_engine_stats st;
	int i, in_order = 0, on_card = 0;

	open_world(0);
	softhca_query_stats(W.node[0].dev->ctx, &h0);
	for (i = 0; i < WIN; i++)
		post(&r[i], 9, (size_t)i * LEN, LEN);
	softhca_query_stats(W.node[0].dev->ctx, &h1);
	st = eu_node_stats(&W, 0);
	tap_check(st.recv_to_card == WIN && st.card_entries == WIN &&
		  h1.adds_posted == h0.adds_posted &&
		  h1.ops_doorbells == h0.ops_doorbells,
		  "window of %d at the threshold: all for the card, none posted "
		  "before the next progress call (ADDs %llu)", WIN,
		  (unsigned long long)(h1.adds_posted - h0.adds_posted));
	tm_engine_progress(W.node[0].eng);
	softhca_query_stats(W.node[0].dev->ctx, &h1);
	tap_check(h1.adds_posted - h0.adds_posted == WIN &&
		  h1.ops_doorbells - h0.ops_doorbells == 1 &&
		  h1.list_entries == WIN,
		  "... the progress call posts the %d ADDs in one ibv_post_srq_ops "
		  "(ADDs %llu, calls %llu, entries %u)", WIN,
		  (unsigned long long)(h1.adds_posted - h0.adds_posted),
		  (unsigned long long)(h1.ops_doorbells - h0.ops_doorbells),
		  h1.list_entries);
	send_window(r, s, WIN, LEN, &in_order, &on_card);
	st = eu_node_stats(&W, 0);
	tap_check(in_order == WIN && on_card == WIN &&
		  st.card_matched == WIN && card_unexpected() == 0,
		  "... the card matches the %d messages of one source and tag "
		  "in post order (in order %d, on the card %d)", WIN, in_order,
		  on_card);
	tap_check(eu_quiet(&W), "nothing left in flight");
	eu_world_fini(&W);
}

/*
 * add_chain 1 (a card that matches while the host computes): each ADD
 * goes to the card with its receive, one ibv_post_srq_ops each, so a
 * receive is on the card before the next progress call; the messages
 * are still matched there in post order.
 */
static void test_unchained_window(void)
{
	enum { WIN = 16, LEN = 8192 };
	static struct eu_recv r[WIN];
	static struct eu_send s[WIN];
	struct softhca_stats h0, h1;
	int i, in_order = 0, on_card = 0;

	open_world_chain(0, 1);
	softhca_query_stats(W.node[0].dev->ctx, &h0);
	for (i = 0; i < WIN; i++)
		post(&r[i], 9, (size_t)i * LEN, LEN);
	softhca_query_stats(W.node[0].dev->ctx, &h1);
	tap_check(h1.adds_posted - h0.adds_posted == WIN &&
		  h1.ops_doorbells - h0.ops_doorbells == WIN,
		  "add_chain 1: each of %d ADDs posted with its receive, before "
		  "any progress call (ADDs %llu, calls %llu)", WIN,
		  (unsigned long long)(h1.adds_posted - h0.adds_posted),
		  (unsigned long long)(h1.ops_doorbells - h0.ops_doorbells));
	send_window(r, s, WIN, LEN, &in_order, &on_card);
	tap_check(in_order == WIN && on_card == WIN,
		  "... and the card matches them in post order (in order %d, "
		  "on the card %d)", in_order, on_card);
	tap_check(eu_quiet(&W), "add_chain 1: nothing left in flight");
	eu_world_fini(&W);
}

/* The first message from a peer, small and matched in software (the
 * arrival's fast path, whose QP cache is still cold): its receive names
 * the sender as the engine knows it, and the envelope it sent. */
static void test_small_first_peer(void)
{
	struct eu_recv small;
	struct eu_send s;

	open_world(0);
	post(&small, 7, 0, 64);
	msg_send(&s, 7, 10, 5);
	tap_check(small.done && !small.r.on_card &&
		  small.r.status == TM_REQ_OK &&
		  small.r.peer == W.node[0].peer[1] && small.r.env.src == 1 &&
		  small.r.env.tag == 7 && small.r.msg_len == 10 &&
		  eu_check(W.node[0].arena, 10, 5),
		  "a peer's first message, small: its receive names the sender "
		  "(peer %u, wanted %u)", small.r.peer, W.node[0].peer[1]);
	post(&small, 8, 0, 64);
	msg_send(&s, 8, 12, 6);
	tap_check(small.done && small.r.peer == W.node[0].peer[1] &&
		  small.r.env.tag == 8 && eu_check(W.node[0].arena, 12, 6),
		  "... and its second (peer %u)", small.r.peer);
	tap_check(eu_quiet(&W), "nothing left in flight");
	eu_world_fini(&W);
}

int main(void)
{
	test_chained_window();
	test_unchained_window();
	test_default_split();
	test_prefix();
	test_no_promotion_past_small();
	test_small_first_peer();
	return tap_done();
}
