/*
 * test_failures.c - settings out of range, and allocation or post failures
 * inside the engine (injected through the fault hook of tm_engine_test.h):
 * none may lose work silently.  Each is either absorbed (back-pressure,
 * a retry that can succeed) so that every message still arrives, or
 * reported (the request fails, the engine stops and says so).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "eng_util.h"
#include "engine/tm_engine_test.h"

static struct eu_world W;

/* Per site: the errno to inject, and how many more times (-1: always). */
static int fault_err[TM_SITE_POST_PLAIN + 1];
static int fault_left[TM_SITE_POST_PLAIN + 1];
static unsigned fault_hits;

static int fault_hook(void *arg, enum tm_site site)
{
	(void)arg;
	if (!fault_left[site])
		return 0;
	if (fault_left[site] > 0)
		fault_left[site]--;
	fault_hits++;
	return fault_err[site];
}

static void fault_set(enum tm_site site, int err, int times)
{
	fault_err[site] = err;
	fault_left[site] = times;
}

static void fault_clear(void)
{
	memset(fault_left, 0, sizeof(fault_left));
	fault_hits = 0;
}

static const struct tm_engine_test hooks = { .fault = fault_hook };

static struct tm_engine *E(int i)
{
	return W.node[i].eng;
}

static uint8_t *A(int i, size_t off)
{
	return W.node[i].arena + off;
}

static int world_no_tm; /* the next world's soft HCA offers no tag matching */

static void open_world_ops(uint32_t n_plain, uint32_t max_ops,
			   enum softhca_sched sched)
{
	struct eu_opts o;

	fault_clear();
	eu_opts_default(&o);
	o.no_tm = world_no_tm;
	o.max_ops = max_ops;
	o.sched = sched;
	o.arena_len = 4 << 20;
	o.ecfg.eager_limit = 1024;
	if (n_plain)
		o.ecfg.n_plain = n_plain;
	o.ecfg.test = &hooks;
	if (eu_world_init(&W, 2, &o))
		tap_bail("cannot open the soft HCA world");
}

static void open_world(uint32_t n_plain)
{
	open_world_ops(n_plain, 0, SOFTHCA_SCHED_AUTO);
}

static int post_recv(struct eu_recv *t, int node, int tag, size_t off,
		     size_t len)
{
	memset(t, 0, sizeof(*t));
	t->r.cb = eu_recv_cb;
	return tm_engine_irecv(E(node), &t->r, 1, 1, tag, A(node, off), len,
			       W.node[node].mr);
}

/* node 1 sends len bytes (pattern seed) from arena offset off to node 0 */
static int send_msg(struct eu_send *t, int tag, size_t off, size_t len,
		    uint8_t seed, unsigned flags)
{
	memset(t, 0, sizeof(*t));
	t->s.cb = eu_send_cb;
	eu_fill(A(1, off), len, seed);
	return tm_engine_isend(E(1), &t->s, W.node[1].peer[0], 1, 1, tag,
			       A(1, off), len, W.node[1].mr, flags);
}

/* Like eu_pump, but stops at an engine error instead of spinning on it;
 * returns the first error seen, or 0. */
static int pump(int rounds)
{
	int i, r, rc = 0;

	/* progress first: it posts the chained ADDs (eu_pump) */
	for (r = 0; r < rounds; r++)
		for (i = 0; i < W.n; i++) {
			int n = tm_engine_progress(E(i));

			softhca_drain(W.node[i].dev->ctx);
			if (n < 0 && !rc)
				rc = n;
		}
	return rc;
}

/* ---- settings (issue 8 part 4) -------------------------------------- */

static void test_config(void)
{
	struct tm_engine_config c;
	struct tm_dev_config dc;
	struct tm_engine *eng = NULL;
	enum tm_engine_setting bad;
	struct tm_dev *dev;

	tm_engine_config_default(&c);
	tap_check(tm_engine_config_check(&c, &bad) == TM_OK &&
		  bad == TM_SETTING_NONE, "the default config is valid");
	c.eager_limit = 4294967396ULL;
	tap_check(tm_engine_config_check(&c, &bad) == TM_ERR_INVALID &&
		  bad == TM_SETTING_EAGER_LIMIT,
		  "eager_limit 4294967396 is refused and named");
	c.eager_limit = TM_ENGINE_EAGER_LIMIT_MAX;
	tap_check(tm_engine_config_check(&c, &bad) == TM_OK,
		  "eager_limit TM_ENGINE_EAGER_LIMIT_MAX is valid");
	c.eager_limit = TM_ENGINE_EAGER_LIMIT_MAX + 1;
	tap_check(tm_engine_config_check(&c, &bad) == TM_ERR_INVALID &&
		  bad == TM_SETTING_EAGER_LIMIT,
		  "eager_limit one above the bound is refused");
	tm_engine_config_default(&c);
	c.n_send_slots = 0;
	tap_check(tm_engine_config_check(&c, &bad) == TM_ERR_INVALID &&
		  bad == TM_SETTING_N_SEND_SLOTS, "n_send_slots 0 is named");
	tm_engine_config_default(&c);
	c.n_plain = 0;
	tap_check(tm_engine_config_check(&c, &bad) == TM_ERR_INVALID &&
		  bad == TM_SETTING_N_PLAIN, "n_plain 0 is named");
	c.n_plain = TM_ENGINE_N_PLAIN_MAX + 1;
	tap_check(tm_engine_config_check(&c, &bad) == TM_ERR_INVALID &&
		  bad == TM_SETTING_N_PLAIN, "n_plain 32768 is named");
	c.n_plain = TM_ENGINE_N_PLAIN_MAX;
	tap_check(tm_engine_config_check(&c, NULL) == TM_OK,
		  "n_plain 32767 is valid");

	tm_dev_config_default(&dc);
	dc.provider = "soft";
	if (tm_dev_open(&dc, &dev) != TM_OK)
		tap_bail("cannot open a soft HCA device");
	tm_engine_config_default(&c);
	c.eager_limit = 4294967396ULL;
	tap_check(tm_engine_create(dev, &c, &eng) == TM_ERR_INVALID && !eng,
		  "tm_engine_create refuses eager_limit 4294967396");
	tm_engine_config_default(&c);
	c.n_send_slots = 0;
	tap_check(tm_engine_create(dev, &c, &eng) == TM_ERR_INVALID && !eng,
		  "tm_engine_create refuses n_send_slots 0");
	tm_dev_close(dev);
}

/* ---- no memory for an unexpected message's copy --------------------- */

/*
 * P + 4 unexpected messages (eager, and every fourth a rendezvous) reach a
 * receiver with the fewest plain buffers a TM-SRQ may have (P = 33) and no
 * memory for copies: the first P keep their buffers, the rest wait at the
 * card (back-pressure).  Receives posted afterwards get all of them, in
 * order, intact.
 */
static void test_unexpected_no_memory(void)
{
	enum { P = TM_ENGINE_N_PLAIN_MIN, N = P + 4 };
	struct eu_recv r[N];
	struct eu_send s[N];
	int i, ok = 1, sent = 1;

	open_world(P);
	fault_set(TM_SITE_ALLOC_MSG, ENOMEM, -1);
	for (i = 0; i < N; i++)
		sent &= send_msg(&s[i], 5, (size_t)i * 4096,
				 i % 4 == 3 ? 3000 : 100 + i, (uint8_t)i,
				 0) == TM_OK;
	pump(200);
	tap_check(sent && eu_node_stats(&W, 0).msg_held == P && eu_node_stats(&W, 0).uq_len == P,
		  "no memory: P unexpected messages keep their plain buffers "
		  "(held %llu, queued %llu)",
		  (unsigned long long)eu_node_stats(&W, 0).msg_held,
		  (unsigned long long)eu_node_stats(&W, 0).uq_len);
	for (i = 0; i < N; i++)
		post_recv(&r[i], 0, 5, 65536 + (size_t)i * 4096, 4096);
	eu_pump(&W);
	for (i = 0; i < N; i++)
		ok &= r[i].done == 1 && r[i].r.status == TM_REQ_OK &&
		      r[i].r.send_seq == s[i].s.seq &&
		      r[i].r.msg_len == (i % 4 == 3 ? 3000u : 100u + i) &&
		      eu_check(A(0, 65536 + (size_t)i * 4096), r[i].r.msg_len,
			    (uint8_t)i) &&
		      s[i].done == 1 && s[i].s.status == TM_REQ_OK;
	tap_check(ok, "... and every one is received, in order, intact");
	tap_check(eu_node_stats(&W, 0).msg_held >= P && eu_node_stats(&W, 0).uq_len == 0 &&
		  eu_quiet(&W) && eu_node_stats(&W, 0).fatal == 0,
		  "... the rest waited at the card; nothing left over");
	eu_world_fini(&W);
}

/*
 * A matched probe copies the held message it takes out of its plain
 * buffer (tm_umem.h); without memory for the copy the message keeps the
 * buffer and is still received whole through tm_engine_imrecv.
 */
static void test_probe_no_memory(void)
{
	enum { P = TM_ENGINE_N_PLAIN_MIN };
	struct tm_probe_info pi;
	struct tm_msg *m = NULL;
	struct eu_recv r[P];
	struct eu_send s[P];
	int i, ok = 1, sent = 1;

	open_world(P);
	fault_set(TM_SITE_ALLOC_MSG, ENOMEM, -1);
	for (i = 0; i < P; i++)
		sent &= send_msg(&s[i], 5, (size_t)i * 4096, 100 + i,
				 (uint8_t)i, 0) == TM_OK;
	pump(200);
	tap_check(sent && tm_engine_improbe(E(0), 1, 1, 5, &m, &pi) == TM_OK &&
		  m && eu_node_stats(&W, 0).unexp_held == P &&
		  eu_node_stats(&W, 0).unexp_spilled == 0,
		  "no memory: a matched probe takes a held message, which keeps "
		  "its buffer (held %llu)",
		  (unsigned long long)eu_node_stats(&W, 0).unexp_held);
	memset(&r[0], 0, sizeof(r[0]));
	r[0].r.cb = eu_recv_cb;
	tm_engine_imrecv(E(0), &r[0].r, m, A(0, 65536), 4096, W.node[0].mr);
	fault_clear();
	for (i = 1; i < P; i++)
		post_recv(&r[i], 0, 5, 65536 + (size_t)i * 4096, 4096);
	eu_pump(&W);
	for (i = 0; i < P; i++)
		ok &= r[i].done == 1 && r[i].r.status == TM_REQ_OK &&
		      r[i].r.send_seq == s[i].s.seq &&
		      r[i].r.msg_len == 100u + i &&
		      eu_check(A(0, 65536 + (size_t)i * 4096), 100 + i,
			       (uint8_t)i) &&
		      s[i].done == 1;
	tap_check(ok && eu_quiet(&W) && eu_node_stats(&W, 0).unexp_held == 0,
		  "... it and the rest are received, in order, intact; "
		  "nothing left over");
	eu_world_fini(&W);
}

/*
 * Freed plain buffers go back to the SRQ in chains (tm_rx.c), but at once
 * while it is short: with 64 buffers (chains of 4) all held by unexpected
 * messages (no memory for copies) and one more message waiting at the
 * sender, the one buffer freed by receiving a held message must reach
 * the SRQ at once, or the waiting message never arrives.  No tag
 * matching: no card entry can take that message instead.
 */
static void test_plain_refill(void)
{
	enum { P = 64, N = P + 1 };
	static struct eu_send s[N];
	static struct eu_recv r[N];
	int i, ok, sent = 1;

	world_no_tm = 1;
	open_world(P);
	world_no_tm = 0;
	fault_set(TM_SITE_ALLOC_MSG, ENOMEM, -1);
	for (i = 0; i < N; i++)
		sent &= send_msg(&s[i], i == P ? 7 : 5, (size_t)i * 4096, 100,
				 (uint8_t)i, 0) == TM_OK;
	pump(200);
	ok = sent && eu_node_stats(&W, 0).msg_held == P &&
	     eu_node_stats(&W, 0).uq_len == P;
	post_recv(&r[0], 0, 5, 1 << 20, 4096);
	post_recv(&r[P], 0, 7, (1 << 20) + 4096, 4096);
	eu_pump(&W);
	tap_check(ok && r[0].done == 1 && r[P].done == 1 &&
		  eu_check(A(0, (1 << 20) + 4096), 100, (uint8_t)P),
		  "all %d plain buffers held: the one freed goes back at once "
		  "and the waiting message arrives (done %d)", P, r[P].done);
	fault_clear();
	for (i = 1; i < P; i++)
		post_recv(&r[i], 0, 5, (2 << 20) + (size_t)i * 128, 128);
	eu_pump(&W);
	for (i = 0, ok = 1; i < N; i++)
		ok &= r[i].done == 1 && s[i].done == 1;
	tap_check(ok && eu_quiet(&W) && eu_node_stats(&W, 0).fatal == 0,
		  "... then every message is received, nothing left over");
	eu_world_fini(&W);
}

/* ---- no memory for an ACK or FIN ------------------------------------ */

static void test_ack_no_memory(void)
{
	struct eu_recv r1, r2;
	struct eu_send s1, s2;

	open_world(0);
	/* matched in software: the message was unexpected */
	send_msg(&s1, 9, 0, 64, 1, TM_SEND_SYNC);
	eu_pump(&W);
	fault_set(TM_SITE_ALLOC_TX_ACK, ENOMEM, -1);
	post_recv(&r1, 0, 9, 0, 1024);
	/* matched by the card: the receive was posted first */
	post_recv(&r2, 0, 10, 4096, 1024);
	send_msg(&s2, 10, 4096, 64, 2, TM_SEND_SYNC);
	pump(100);
	tap_check(!r1.done && !s1.done && !r2.done && !s2.done &&
		  eu_node_stats(&W, 0).replies_owed == 2,
		  "no memory for two ACKs: both receives hold, both senders "
		  "wait (owed %llu)",
		  (unsigned long long)eu_node_stats(&W, 0).replies_owed);
	fault_clear();
	eu_pump(&W);
	tap_check(r1.done == 1 && r1.r.status == TM_REQ_OK && !r1.r.on_card &&
		  s1.done == 1 && s1.s.status == TM_REQ_OK &&
		  r2.done == 1 && r2.r.status == TM_REQ_OK && r2.r.on_card &&
		  s2.done == 1 && s2.s.status == TM_REQ_OK && eu_quiet(&W),
		  "... memory back: the ACKs go, all four complete");
	eu_world_fini(&W);
}

/*
 * The only deferred work is the owed ACK: a card-matched synchronous
 * message on an otherwise quiet engine.  The owed reply alone must keep
 * the engine coming back to it (eng->pending).
 */
static void test_ack_owed_alone(void)
{
	struct eu_recv r;
	struct eu_send s;

	open_world(0);
	post_recv(&r, 0, 11, 0, 1024);
	eu_pump(&W);
	fault_set(TM_SITE_ALLOC_TX_ACK, ENOMEM, 1);
	send_msg(&s, 11, 0, 64, 3, TM_SEND_SYNC);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.on_card && s.done == 1 &&
		  s.s.status == TM_REQ_OK && eu_node_stats(&W, 0).replies_owed == 1 &&
		  eu_quiet(&W),
		  "one ACK owed with nothing else pending: paid from progress, "
		  "both complete (owed %llu)",
		  (unsigned long long)eu_node_stats(&W, 0).replies_owed);
	fault_clear();
	eu_world_fini(&W);
}

static void test_fin_no_memory(void)
{
	struct eu_recv r;
	struct eu_send s;

	open_world(0);
	send_msg(&s, 3, 0, 20000, 7, 0);
	eu_pump(&W);
	fault_set(TM_SITE_ALLOC_TX_FIN, ENOMEM, -1);
	post_recv(&r, 0, 3, 65536, 32768);
	pump(100);
	tap_check(!r.done && !s.done && eu_node_stats(&W, 0).replies_owed == 1,
		  "no memory for a FIN after a software read: receive and "
		  "sender wait");
	fault_clear();
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_OK &&
		  r.r.msg_len == 20000 && eu_check(A(0, 65536), 20000, 7) &&
		  s.done == 1 && s.s.status == TM_REQ_OK && eu_quiet(&W),
		  "... memory back: the FIN goes, both complete");
	eu_world_fini(&W);
}

static void test_read_no_memory(void)
{
	struct eu_recv r;
	struct eu_send s;

	open_world(0);
	send_msg(&s, 3, 0, 20000, 7, 0);
	eu_pump(&W);
	fault_set(TM_SITE_ALLOC_TX_READ, ENOMEM, -1);
	post_recv(&r, 0, 3, 65536, 32768);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_ERROR &&
		  s.done == 1 && eu_quiet(&W),
		  "no memory for a software read: the receive fails, the "
		  "sender still gets its FIN");
	eu_world_fini(&W);
}

/* ---- list ops waiting for a slot ----------------------------------- */

/*
 * With one op slot, two cancels of card-held receives queue two DELs at
 * once; each lives in its own receive (no allocation, so none can fail),
 * and both receives end cancelled.
 */
static void test_queued_dels(void)
{
	struct eu_recv r0, r1;
	struct tm_engine_stats st;

	open_world_ops(0, 1, SOFTHCA_SCHED_MANUAL);
	post_recv(&r0, 0, 11, 0, 1024);
	eu_pump(&W);
	post_recv(&r1, 0, 12, 4096, 1024);
	tm_engine_cancel_recv(E(0), &r0.r);
	tm_engine_cancel_recv(E(0), &r1.r);
	st = eu_node_stats(&W, 0);
	tap_check(st.card_entries == 2 && st.ops_in_queue == 2,
		  "one op slot, two cancels: two DELs queued (queued %u)",
		  st.ops_in_queue);
	eu_pump(&W);
	tap_check(r0.done == 1 && r0.r.status == TM_REQ_CANCELLED &&
		  r1.done == 1 && r1.r.status == TM_REQ_CANCELLED &&
		  eu_quiet(&W) && eu_node_stats(&W, 0).card_entries == 0,
		  "... both receives end cancelled, the card list empty");
	eu_world_fini(&W);
}

/* ---- posts that fail ------------------------------------------------- */

static void test_post_send(void)
{
	struct eu_recv r;
	struct eu_send s, s2;
	int rc;

	open_world(0);
	post_recv(&r, 0, 4, 0, 1024);
	fault_set(TM_SITE_POST_SEND, ENOMEM, 5);
	send_msg(&s, 4, 0, 200, 3, 0);
	eu_pump(&W);
	tap_check(fault_hits == 5 && r.done == 1 && r.r.status == TM_REQ_OK &&
		  eu_check(A(0, 0), 200, 3) && s.done == 1 &&
		  s.s.status == TM_REQ_OK && eu_node_stats(&W, 1).post_failures == 0,
		  "a full send queue (ENOMEM) is retried until the send goes");
	eu_world_fini(&W);

	open_world(0);
	fault_set(TM_SITE_POST_SEND, EINVAL, -1);
	send_msg(&s, 4, 0, 200, 3, 0);
	rc = pump(20);
	tap_check(s.done == 1 && s.s.status == TM_REQ_ERROR && rc == 0 &&
		  eu_node_stats(&W, 1).post_failures == 1 && eu_node_stats(&W, 1).peer_failures == 1,
		  "a send the QP refuses (EINVAL) fails, and its peer is dead");
	fault_hits = 0;
	send_msg(&s2, 4, 0, 200, 3, 0);
	tap_check(s2.done == 1 && s2.s.status == TM_REQ_ERROR &&
		  fault_hits == 0 && tm_engine_idle(E(1)),
		  "... later sends to it fail at once; nothing is retried");
	eu_world_fini(&W);
}

static void test_post_ops(void)
{
	struct tm_engine_stats st;
	struct eu_recv r, r2;
	struct eu_send s;

	open_world(0);
	fault_set(TM_SITE_POST_OPS, ENOMEM, 1);
	post_recv(&r, 0, 6, 0, 1024);
	tm_engine_progress(E(0)); /* posts the chained ADD: refused */
	st = eu_node_stats(&W, 0);
	tap_check(st.sw_held == 1 && st.card_entries == 0 &&
		  st.ops_outstanding == 0 && st.ops_posted == 0 &&
		  st.sw_list_full == 1 && st.errors == 0 && st.fatal == 0,
		  "an ADD the card has no room for (ENOMEM) puts the receive "
		  "back in software, its op slot and entry freed (held %llu, "
		  "entries %u, ops %u)", (unsigned long long)st.sw_held,
		  st.card_entries, st.ops_outstanding);
	send_msg(&s, 6, 0, 100, 4, 0);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_OK && s.done == 1,
		  "... and it still matches");
	eu_world_fini(&W);

	/* the cancel's drain posts the chain, the card refuses it, and the
	 * cancel's DEL is decided before the refusal is reported */
	open_world(0);
	post_recv(&r, 0, 6, 0, 1024);
	post_recv(&r2, 0, 7, 4096, 1024);
	fault_set(TM_SITE_POST_OPS, ENOMEM, 1);
	tm_engine_cancel_recv(E(0), &r.r);
	st = eu_node_stats(&W, 0);
	tap_check(r.done == 1 && r.r.status == TM_REQ_CANCELLED &&
		  st.cancel_ok == 1 && st.card_entries == 0 &&
		  st.ops_outstanding == 0 && st.sw_held == 1 && !r2.done,
		  "a cancel whose receive's chained ADD the card refused: "
		  "cancelled at once, no DEL posted; the other receive of the "
		  "chain back in software (entries %u, ops %u, held %llu)",
		  st.card_entries, st.ops_outstanding,
		  (unsigned long long)st.sw_held);
	send_msg(&s, 7, 0, 100, 5, 0);
	eu_pump(&W);
	tap_check(r2.done == 1 && r2.r.status == TM_REQ_OK && s.done == 1 &&
		  eu_quiet(&W), "... and that one still matches");
	fault_clear();
	eu_world_fini(&W);

	open_world(0);
	fault_set(TM_SITE_POST_OPS, EINVAL, -1);
	post_recv(&r, 0, 6, 0, 1024);
	tap_check(tm_engine_progress(E(0)) == TM_ERR_IO &&
		  eu_node_stats(&W, 0).fatal == TM_ERR_IO && eu_node_stats(&W, 0).post_failures == 1,
		  "a list op the card refuses (EINVAL) stops the engine "
		  "loudly");
	tap_check(post_recv(&r2, 0, 6, 4096, 1024) == TM_ERR_IO &&
		  tm_engine_progress(E(0)) == TM_ERR_IO,
		  "... every later call says so");
	fault_clear();
	eu_world_fini(&W);
}

/* Freed plain buffers go back in chains (tm_rx.c): unexpected messages
 * arrive one at a time until the repost that takes a refusal. */
static void test_post_plain(void)
{
	static struct eu_send s[64];
	int rc = 0, n;

	open_world(0);
	fault_set(TM_SITE_POST_PLAIN, EINVAL, -1);
	for (n = 0; n < 64 && !rc; n++) {
		send_msg(&s[n], 8, 0, 100, 1, 0);
		rc = pump(20);
	}
	tap_check(rc == TM_ERR_IO && eu_node_stats(&W, 0).fatal == TM_ERR_IO &&
		  eu_node_stats(&W, 0).uq_len == (uint64_t)n && n <= 16,
		  "a plain buffer the SRQ refuses stops the engine loudly, at "
		  "the latest when 16 wait (%d messages, all kept)", n);
	fault_clear();
	eu_world_fini(&W);
}

static int start_poll_eio(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *a)
{
	(void)cq;
	(void)a;
	return EIO;
}

/*
 * The TM CQ fails (start_poll answers neither 0 nor ENOENT,
 * doc/mlx5-rules.md rule 20): nothing will arrive again, so the engine
 * stops, and says so from every later call, rather than poll an empty
 * queue for ever.
 */
static void test_cq_failure(void)
{
	int (*orig)(struct ibv_cq_ex *, struct ibv_poll_cq_attr *);
	struct ibv_cq_ex *cq;
	struct eu_recv r;
	int rc, rc2;

	open_world(0);
	cq = W.node[0].dev->tm_cq;
	orig = cq->start_poll;
	cq->start_poll = start_poll_eio;
	tm_engine_progress(E(0)); /* finds it */
	rc = tm_engine_progress(E(0));
	rc2 = post_recv(&r, 0, 5, 0, 64);
	cq->start_poll = orig;
	tap_check(rc == TM_ERR_IO && rc2 == TM_ERR_IO &&
		  eu_node_stats(&W, 0).fatal == TM_ERR_IO,
		  "a TM CQ that fails stops the engine: progress %d, then "
		  "irecv %d", rc, rc2);
	eu_world_fini(&W);
}

int main(void)
{
	test_config();
	test_unexpected_no_memory();
	test_plain_refill();
	test_probe_no_memory();
	test_ack_no_memory();
	test_ack_owed_alone();
	test_fin_no_memory();
	test_read_no_memory();
	test_queued_dels();
	test_post_send();
	test_post_ops();
	test_post_plain();
	test_cq_failure();
	return tap_done();
}
