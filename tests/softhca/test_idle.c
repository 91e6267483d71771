/*
 * test_idle.c - soft HCA: an idle poll with many watched rings reads the
 * producers' arrival hint instead of every ring (softhca_shm.h, rx_hint),
 * and that hint, which any peer may write, only ever delays.
 *
 *  - with few rings (scanned) and with more than SH_RX_ARM_FROM (hinted),
 *    the receiver's first poll after each send takes that send; scanned,
 *    the card is quiet after it (the ring's watch entry was published
 *    with the packet taken: else every idle poll would run the card);
 *  - a peer that clears the hint and bits after a packet: the packet is
 *    still taken, within SH_RX_SCAN_EVERY polls;
 *  - a peer that keeps the hint set: every packet still taken once, in
 *    order (the hint is only a reason to look);
 *  - hinted, a packet that waits for a plain buffer keeps the card awake
 *    (its ring shows it to no idle poll): the first poll after the buffer
 *    is posted takes it.
 *
 *  - hinted, a card run reads only the rings the arrival bits name: a peer
 *    that clears a packet's bit (and keeps the card running) delays it to
 *    the periodic look at every ring, within SH_RX_SCAN_EVERY runs;
 *  - a peer that sets every arrival bit: packets still taken once, in
 *    order;
 *  - hinted, a packet sent before its QP was connected: the first poll
 *    after the connection takes it;
 *  - hinted, a message of many packets through a ring of 4 slots (its
 *    QP has a message under way between runs) interleaved with 8 B ones
 *    on other rings: all of them land, intact.
 *
 * White box where a hostile peer writes the ring segment (sh_reach.h).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "sh_util.h"
#include "sh_reach.h"
#include "softhca/softhca_sched.h"

#define IDLE_PAIRS 16 /* past SH_RX_ARM_FROM: armed */

static struct sh_env env;

static void open_env(int pairs, int buffers)
{
	struct softhca_config cfg;

	sh_config(&cfg);
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_AUTO, pairs))
		tap_bail("sh_env_open");
	for (int i = 0; i < buffers; i++)
		if (sh_post_plain(&env.b, 100 + i, sh_alloc(&env.b, 64), 64))
			tap_bail("plain");
	/* the first poll runs the card, which then has nothing left */
	for (int i = 0; i < 4; i++)
		sh_cq_discard(env.b.cq);
}

/* A NO_TAG message on pair i; 1 when the receiver's next poll takes it. */
static int send_then_poll(int pair, uint32_t seed)
{
	struct sh_wc wc;
	uint32_t v = seed;

	if (sh_send_tm(&env, pair, IBV_TMH_NO_TAG, 0, 0, &v, sizeof(v),
		       900 + seed))
		tap_bail("send");
	return sh_poll(env.b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
	       wc.opcode == IBV_WC_TM_NO_TAG;
}

static void test_first_poll(int pairs)
{
	int got = 0, quiet = 0;

	open_env(pairs, 64);
	for (int i = 0; i < pairs; i++) {
		got += send_then_poll(i, (uint32_t)i);
		/* (scanned: the look reads each watch entry, and only that;
		 * hinted, it would count an idle poll) */
		quiet += (uint32_t)pairs <= SH_RX_ARM_FROM &&
			 sh_sched_quiet(to_sh_ctx(env.b.ctx));
	}
	tap_check(got == pairs,
		  "%d rings watched (%s): the first poll after each send "
		  "takes it (%d of %d)", pairs,
		  pairs > 8 ? "hinted" : "scanned", got, pairs);
	if ((uint32_t)pairs <= SH_RX_ARM_FROM)
		tap_check(quiet == pairs,
			  "%d rings scanned: after each poll that took a "
			  "packet the card is quiet, each ring's watch entry "
			  "naming its next slot, so an idle poll does not run "
			  "it (%d of %d)", pairs, quiet, pairs);
	sh_env_close(&env);
}

static struct sh_rings *victim_rings(struct reach *r)
{
	reach_victim(&env.b.gid, r);
	if (!r->rings)
		tap_bail("the ring segment could not be reached");
	return (struct sh_rings *)r->rings;
}

static void test_hint_cleared(void)
{
	struct reach r;
	struct sh_rings *h;
	struct sh_wc wc;
	int polls = 0, got = 0, lost = 0;

	open_env(IDLE_PAIRS, 64);
	h = victim_rings(&r);
	for (int round = 0; round < 4; round++) {
		uint32_t v = (uint32_t)round;

		if (sh_send_tm(&env, round, IBV_TMH_NO_TAG, 0, 0, &v,
			       sizeof(v), 950 + round))
			tap_bail("send");
		/* the attacker: no hint, no bit */
		atomic_store(&h->rx_hint, 0);
		for (unsigned w = 0; w < SH_RX_BIT_WORDS; w++)
			atomic_store(&h->rx_bits[w], 0);
		for (polls = 1; polls <= 64 + 1; polls++)
			if (sh_poll(env.b.cq, &wc) == 1)
				break;
		if (polls > 64 + 1)
			lost++;
		else
			got++;
		tap_diag("hint cleared: taken at poll %d", polls);
	}
	tap_check(got == 4 && !lost,
		  "a peer clears the arrival hint and bits after each of 4 "
		  "packets: "
		  "each still taken within SH_RX_SCAN_EVERY + 1 polls "
		  "(%d taken, %d not)", got, lost);
	reach_drop(&r);
	sh_env_close(&env);
}

static void test_hint_stuck(int set_bits)
{
	struct reach r;
	struct sh_rings *h;
	struct sh_wc wc[8];
	int n = 0, order = 1, empty = 0;
	struct ibv_qp *idle_qp = NULL;

	open_env(IDLE_PAIRS, 64);
	h = victim_rings(&r);
	/* (a QP never connected: its bit names no ring to look at) */
	if (set_bits && !(idle_qp = sh_qp_create(&env.b, env.p[0].rcq,
						 env.b.srq, NULL)))
		tap_bail("qp");
	for (int i = 0; i < 8; i++) {
		uint32_t v = (uint32_t)i;

		if (sh_send_tm(&env, i, IBV_TMH_NO_TAG, 0, 0, &v, sizeof(v),
			       970 + i))
			tap_bail("send");
	}
	for (int i = 0; i < 200; i++) {
		int k;

		atomic_store(&h->rx_hint, 1); /* the attacker */
		if (set_bits)
			for (unsigned w = 0; w < SH_RX_BIT_WORDS; w++)
				atomic_store(&h->rx_bits[w], ~0ull);
		k = sh_poll_all(env.b.cq, wc + n, 8 - n);
		for (int j = 0; j < k; j++)
			order &= wc[n + j].wr_id == (uint64_t)(100 + n + j);
		n += k;
		empty += !k && n == 8;
	}
	tap_check(n == 8 && order && empty > 0,
		  "a peer keeps the arrival hint%s set: 8 packets taken once, "
		  "in order (%d), and polls then find nothing (%d empty)",
		  set_bits ? " and every arrival bit (one of a QP not "
		  "connected)" : "", n, empty);
	if (idle_qp)
		sh_v()->destroy_qp(idle_qp);
	reach_drop(&r);
	sh_env_close(&env);
}

static void test_bits_cleared(void)
{
	struct reach r;
	struct sh_rings *h;
	struct sh_wc wc;
	int first = 0, got = 0, polls;

	open_env(IDLE_PAIRS, 64);
	h = victim_rings(&r);
	for (int round = 0; round < 4; round++) {
		uint32_t v = (uint32_t)round;

		if (sh_send_tm(&env, 2 + round, IBV_TMH_NO_TAG, 0, 0, &v,
			       sizeof(v), 960 + round))
			tap_bail("send");
		/* the attacker: no bit names the ring, the card keeps
		 * running */
		for (unsigned w = 0; w < SH_RX_BIT_WORDS; w++)
			atomic_store(&h->rx_bits[w], 0);
		for (polls = 1; polls <= 64 + 1; polls++) {
			atomic_store(&h->rx_hint, 1);
			if (sh_poll(env.b.cq, &wc) == 1)
				break;
		}
		got += polls <= 64 + 1;
		first += polls == 1;
		tap_diag("bits cleared: taken at poll %d", polls);
	}
	tap_check(got == 4 && first <= 1,
		  "%d rings (hinted): a peer clears the arrival bit of each "
		  "of 4 packets: a run reads only the rings bits name (%d of "
		  "4 taken at the first poll), every ring each "
		  "SH_RX_SCAN_EVERY runs (%d taken within 65)", IDLE_PAIRS,
		  first, got);
	reach_drop(&r);
	sh_env_close(&env);
}

static void test_early_packet(void)
{
	struct sh_pair *p;
	struct sh_wc wc;
	uint32_t v = 5;
	int early, got;

	open_env(IDLE_PAIRS, 64);
	p = &env.p[env.npairs];
	p->scq = sh_cq_ex(env.a.ctx, 64);
	p->rcq = sh_cq_ex(env.b.ctx, 64);
	p->sqp = p->scq ? sh_qp_create(&env.a, p->scq, env.a.srq, NULL) : NULL;
	p->rqp = p->rcq ? sh_qp_create(&env.b, p->rcq, env.b.srq, NULL) : NULL;
	if (!p->sqp || !p->rqp ||
	    sh_qp_connect(p->sqp, &env.b.gid, p->rqp->qp_num))
		tap_bail("half a pair");
	env.npairs++;
	/* sent before the receiving QP is connected: its bit names a ring
	 * no one watches yet */
	if (sh_send_tm(&env, env.npairs - 1, IBV_TMH_NO_TAG, 0, 0, &v,
		       sizeof(v), 995))
		tap_bail("send");
	early = sh_poll(env.b.cq, &wc);
	if (sh_qp_connect(p->rqp, &env.a.gid, p->sqp->qp_num))
		tap_bail("connect");
	got = sh_poll(env.b.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_TM_NO_TAG;
	tap_check(!early && got,
		  "%d rings (hinted): a packet sent before its QP was "
		  "connected is taken by the first poll after (%d early, %s)",
		  IDLE_PAIRS + 1, early, sh_wc_str(&wc));
	sh_env_close(&env);
}

/* Both cards run until n completions came on b's CQ (or 10000 rounds). */
static int pump(struct sh_wc *wc, int n)
{
	int got = 0;

	for (int i = 0; i < 10000 && got < n; i++) {
		got += sh_poll_all(env.b.cq, wc + got, n - got);
		for (int p = 0; p < env.npairs; p++)
			sh_cq_discard(env.p[p].scq);
	}
	return got;
}

static void test_under_way(void)
{
	enum { BIG = 16 * 4096 + 100, SMALL = 6 };
	struct softhca_config cfg;
	struct sh_wc wc[SMALL + 1];
	uint8_t *big = malloc(BIG), *dst[SMALL + 1];
	int got, intact = 1, bigs = 0;

	sh_config(&cfg);
	cfg.ring_depth = 4;
	if (!big || sh_env_open(&env, &cfg, SOFTHCA_SCHED_AUTO, IDLE_PAIRS))
		tap_bail("sh_env_open");
	/* (the card takes rings in any order: any buffer may get it) */
	for (int i = 0; i <= SMALL; i++)
		if (!(dst[i] = sh_alloc(&env.b, BIG + SH_TMH_LEN)) ||
		    sh_post_plain(&env.b, 100 + (uint64_t)i, dst[i],
				  BIG + SH_TMH_LEN))
			tap_bail("plain");
	for (int i = 0; i < BIG; i++)
		big[i] = (uint8_t)(i * 7 + 3);
	if (sh_send_tm(&env, 9, IBV_TMH_NO_TAG, 0, 0, big, BIG, 1))
		tap_bail("send big");
	for (int i = 0; i < SMALL; i++) {
		uint32_t v = (uint32_t)i;

		/* (one poll between: the big message is under way) */
		sh_poll_all(env.b.cq, wc, 0);
		sh_cq_discard(env.p[9].scq);
		if (sh_send_tm(&env, i, IBV_TMH_NO_TAG, 0, 0, &v, sizeof(v),
			       2 + (uint64_t)i))
			tap_bail("send small");
	}
	got = pump(wc, SMALL + 1);
	for (int i = 0; i < got; i++)
		if (wc[i].status != IBV_WC_SUCCESS) {
			tap_diag("%s", sh_wc_str(&wc[i]));
			intact = 0;
		} else if (wc[i].byte_len != 4 + SH_TMH_LEN) {
			bigs++;
			intact &= wc[i].wr_id - 100 <= SMALL &&
				  wc[i].byte_len == BIG + SH_TMH_LEN &&
				  !memcmp(dst[wc[i].wr_id - 100] + SH_TMH_LEN,
					  big, BIG);
		}
	tap_check(got == SMALL + 1 && intact && bigs == 1,
		  "%d rings (hinted), ring depth 4: a %d B message and %d "
		  "8 B ones on other rings all land intact (%d of %d)",
		  IDLE_PAIRS, BIG, SMALL, got, SMALL + 1);
	free(big);
	sh_env_close(&env);
}

static void test_rnr_hinted(void)
{
	struct sh_wc wc;
	uint32_t v = 7;
	int early = 0, got;

	open_env(IDLE_PAIRS, 0);
	if (sh_send_tm(&env, 5, IBV_TMH_NO_TAG, 0, 0, &v, sizeof(v), 990))
		tap_bail("send");
	for (int i = 0; i < 8; i++)
		early += sh_poll(env.b.cq, &wc);
	if (sh_post_plain(&env.b, 500, sh_alloc(&env.b, 64), 64))
		tap_bail("plain");
	got = sh_poll(env.b.cq, &wc) == 1 && wc.wr_id == 500 &&
	      wc.opcode == IBV_WC_TM_NO_TAG;
	tap_check(!early && got,
		  "%d rings (hinted): a packet waiting for a plain buffer is "
		  "taken by the first poll after one is posted (%d early, %s)",
		  IDLE_PAIRS, early, sh_wc_str(&wc));
	sh_env_close(&env);
}

int main(void)
{
	unsetenv("SOFTHCA_SINGLE_THREADED");
	test_first_poll(2);
	test_first_poll(IDLE_PAIRS);
	test_hint_cleared();
	test_hint_stuck(0);
	test_hint_stuck(1);
	test_bits_cleared();
	test_rnr_hinted();
	test_early_packet();
	test_under_way();
	return tap_done();
}
