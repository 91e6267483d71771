/*
 * test_umem.c - the memory unexpected messages take is bounded
 * (engine/tm_umem.h), and the bound deadlocks nothing.
 *
 * A sender floods a receiver that posts nothing: the receiver's copies
 * stay within unexpected_mem, the rest keep their plain buffers, and once
 * those are all held the sender waits.  Receives posted later get every
 * message, in order, intact, and the memory comes back.  While a receiver
 * holds every buffer, a synchronous send of its own to another node still
 * completes: its ACK needs a plain buffer, which the spill rule frees
 * (one held message copied out per millisecond nobody receives one), and
 * the bound holds again afterwards.  The same holds when the program has
 * taken every held message with a matched probe (MPI_Mprobe) and not yet
 * received them: its rendezvous send's FIN still gets a buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tap.h"
#include "eng_util.h"

#define NPLAIN 40
#define LIMIT  (16u << 10)
#define FLOOD  200
#define LEN    100

static struct eu_world W;
static struct eu_send fs[FLOOD];
static struct eu_recv fr[FLOOD];

static struct tm_engine *E(int i)
{
	return W.node[i].eng;
}

static uint8_t *A(int i, size_t off)
{
	return W.node[i].arena + off;
}

static void open_world(int n)
{
	struct eu_opts o;

	eu_opts_default(&o);
	o.arena_len = 4 << 20;
	o.ecfg.eager_limit = 1024;
	o.ecfg.n_plain = NPLAIN;
	o.ecfg.unexpected_mem = LIMIT;
	if (eu_world_init(&W, n, &o))
		tap_bail("cannot open the soft HCA world");
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Card work and progress everywhere, rounds times. */
static void pump(int rounds)
{
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < W.n; i++) {
			softhca_drain(W.node[i].dev->ctx);
			tm_engine_progress(E(i));
		}
}

/* node 1 floods node 0 with FLOOD messages of LEN bytes, tag 5 */
static int flood(void)
{
	int ok = 1;

	for (int i = 0; i < FLOOD; i++) {
		memset(&fs[i], 0, sizeof(fs[i]));
		fs[i].s.cb = eu_send_cb;
		eu_fill(A(1, (size_t)i * 128), LEN, (uint8_t)i);
		ok &= tm_engine_isend(E(1), &fs[i].s, W.node[1].peer[0], 1, 1,
				      5, A(1, (size_t)i * 128), LEN,
				      W.node[1].mr, 0) == TM_OK;
	}
	pump(300);
	return ok;
}

/* node 0 receives the flood; all there, in order, intact */
static int drain_flood(void)
{
	int ok = 1;

	for (int i = 0; i < FLOOD; i++) {
		memset(&fr[i], 0, sizeof(fr[i]));
		fr[i].r.cb = eu_recv_cb;
		tm_engine_irecv(E(0), &fr[i].r, 1, 1, 5,
				A(0, 65536 + (size_t)i * 128), 128,
				W.node[0].mr);
	}
	eu_pump(&W);
	for (int i = 0; i < FLOOD; i++)
		ok &= fr[i].done == 1 && fr[i].r.status == TM_REQ_OK &&
		      fr[i].r.send_seq == fs[i].s.seq &&
		      fr[i].r.msg_len == LEN &&
		      eu_check(A(0, 65536 + (size_t)i * 128), LEN,
			       (uint8_t)i) &&
		      fs[i].done == 1 && fs[i].s.status == TM_REQ_OK;
	return ok;
}

static void test_bound(void)
{
	struct tm_engine_stats st;
	int sent;

	open_world(2);
	sent = flood();
	st = eu_node_stats(&W, 0);
	tap_check(sent && st.unexp_mem > 0 && st.unexp_mem <= LIMIT &&
		  st.unexp_held == NPLAIN && st.unexp_throttled > 0 &&
		  st.uq_len < FLOOD,
		  "a flood of %d messages: the copies stay within "
		  "unexpected_mem (%llu of %u bytes), %llu keep their plain "
		  "buffers, the rest wait at the sender (%llu arrived)",
		  FLOOD, (unsigned long long)st.unexp_mem, LIMIT,
		  (unsigned long long)st.unexp_held,
		  (unsigned long long)st.uq_len);
	tap_check(drain_flood(),
		  "... receives posted later get every message, in order, "
		  "intact");
	st = eu_node_stats(&W, 0);
	tap_check(st.unexp_mem == 0 && st.unexp_held == 0 && st.uq_len == 0 &&
		  eu_quiet(&W) && !st.fatal,
		  "... and the memory and the buffers come back (%llu bytes, "
		  "%llu held)", (unsigned long long)st.unexp_mem,
		  (unsigned long long)st.unexp_held);
	eu_world_fini(&W);
}

/*
 * Pumps until send t completes.  Gives up only when node 0 copied no held
 * message out for STALL_S seconds (the spill rule runs once a millisecond,
 * so that is a deadlock, not a slow machine), or after GIVE_UP_S.
 */
#define STALL_S   5.0
#define GIVE_UP_S 120.0
static void wait_send(struct eu_send *t)
{
	double t0 = now(), last_t = t0;
	uint64_t last = eu_node_stats(&W, 0).unexp_spilled, sp;

	while (!t->done && now() - last_t < STALL_S && now() - t0 < GIVE_UP_S) {
		pump(1);
		sp = eu_node_stats(&W, 0).unexp_spilled;
		if (sp != last) {
			last = sp;
			last_t = now();
		}
	}
}

static void test_control_gets_through(void)
{
	struct tm_engine_stats st;
	struct eu_send ss;
	struct eu_recv sr;
	double t0;
	int sent;

	open_world(3);
	sent = flood();
	st = eu_node_stats(&W, 0);
	tap_check(sent && st.unexp_held == NPLAIN,
		  "node 0 holds all its %d plain buffers", NPLAIN);
	/* node 0's synchronous send to node 2: its ACK needs a buffer */
	memset(&ss, 0, sizeof(ss));
	memset(&sr, 0, sizeof(sr));
	ss.s.cb = eu_send_cb;
	sr.r.cb = eu_recv_cb;
	tm_engine_irecv(E(2), &sr.r, 1, 0, 6, A(2, 0), 128, W.node[2].mr);
	tm_engine_isend(E(0), &ss.s, W.node[0].peer[2], 1, 0, 6, A(0, 0), 64,
			W.node[0].mr, TM_SEND_SYNC);
	t0 = now();
	wait_send(&ss);
	st = eu_node_stats(&W, 0);
	tap_check(ss.done && ss.s.status == TM_REQ_OK && sr.done &&
		  st.unexp_spilled > 0,
		  "... its synchronous send to node 2 still completes (ACK "
		  "through after %.0f ms, %llu held messages copied out)",
		  (now() - t0) * 1e3, (unsigned long long)st.unexp_spilled);
	pump(300);
	st = eu_node_stats(&W, 0);
	tap_check(st.unexp_mem <= LIMIT + st.unexp_spilled * (LEN + 512) &&
		  st.unexp_held > 0,
		  "... and the bound holds after spills: new arrivals keep "
		  "their buffers (%llu bytes copied, %llu held)",
		  (unsigned long long)st.unexp_mem,
		  (unsigned long long)st.unexp_held);
	tap_check(drain_flood(), "... the flood still arrives whole, in order");
	eu_world_fini(&W);
}

/* node 0 takes every message it holds with a matched probe */
static int probe_all(struct tm_msg **pm, int max)
{
	struct tm_probe_info pi;
	int n = 0;

	while (n < max &&
	       tm_engine_improbe(E(0), 1, 1, 5, &pm[n], &pi) == TM_OK)
		n++;
	return n;
}

/* node 0 receives the n messages it probed, then the rest of the flood */
static int drain_probed(struct tm_msg **pm, int n)
{
	int ok = 1;

	for (int i = 0; i < FLOOD; i++) {
		memset(&fr[i], 0, sizeof(fr[i]));
		fr[i].r.cb = eu_recv_cb;
		if (i < n)
			tm_engine_imrecv(E(0), &fr[i].r, pm[i],
					 A(0, 65536 + (size_t)i * 128), 128,
					 W.node[0].mr);
		else
			tm_engine_irecv(E(0), &fr[i].r, 1, 1, 5,
					A(0, 65536 + (size_t)i * 128), 128,
					W.node[0].mr);
	}
	eu_pump(&W);
	for (int i = 0; i < FLOOD; i++)
		ok &= fr[i].done == 1 && fr[i].r.status == TM_REQ_OK &&
		      fr[i].r.send_seq == fs[i].s.seq &&
		      eu_check(A(0, 65536 + (size_t)i * 128), LEN,
			       (uint8_t)i) &&
		      fs[i].done == 1 && fs[i].s.status == TM_REQ_OK;
	return ok;
}

static void test_probed_make_way(void)
{
	static struct tm_msg *pm[FLOOD];
	struct tm_engine_stats st;
	struct eu_send ss;
	struct eu_recv sr;
	double t0;
	int n;

	open_world(3);
	tap_check(flood() && eu_node_stats(&W, 0).unexp_held == NPLAIN,
		  "node 0 holds all its %d plain buffers", NPLAIN);
	n = probe_all(pm, FLOOD);
	st = eu_node_stats(&W, 0);
	tap_check(n >= NPLAIN && st.uq_len == 0,
		  "... and takes all %d arrived messages with matched probes",
		  n);
	/* a rendezvous send to node 2: its FIN needs a plain buffer */
	memset(&ss, 0, sizeof(ss));
	memset(&sr, 0, sizeof(sr));
	ss.s.cb = eu_send_cb;
	sr.r.cb = eu_recv_cb;
	eu_fill(A(0, 1 << 20), 8192, 77);
	tm_engine_irecv(E(2), &sr.r, 1, 0, 6, A(2, 1 << 20), 8192,
			W.node[2].mr);
	tm_engine_isend(E(0), &ss.s, W.node[0].peer[2], 1, 0, 6,
			A(0, 1 << 20), 8192, W.node[0].mr, 0);
	t0 = now();
	wait_send(&ss);
	st = eu_node_stats(&W, 0);
	tap_check(ss.done && ss.s.status == TM_REQ_OK && sr.done &&
		  eu_check(A(2, 1 << 20), 8192, 77),
		  "... its rendezvous send to node 2 still completes (FIN "
		  "through after %.0f ms, %llu held messages copied out)",
		  (now() - t0) * 1e3, (unsigned long long)st.unexp_spilled);
	tap_check(drain_probed(pm, n),
		  "... the probed messages and the rest of the flood arrive "
		  "whole, in order");
	st = eu_node_stats(&W, 0);
	tap_check(st.unexp_mem == 0 && st.unexp_held == 0 && eu_quiet(&W),
		  "... and the memory and the buffers come back (%llu bytes, "
		  "%llu held)", (unsigned long long)st.unexp_mem,
		  (unsigned long long)st.unexp_held);
	eu_world_fini(&W);
}

int main(void)
{
	test_bound();
	test_control_gets_through();
	test_probed_make_way();
	return tap_done();
}
