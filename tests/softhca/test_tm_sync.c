/*
 * test_tm_sync.c - soft HCA: the unexpected-count synchronisation of the
 * TM-SRQ (the m1/m2 race of the tag matching documents), IBV_OPS_TM_SYNC
 * semantics, SYNC_REQ flags, and the 16-bit wrap of the card's counter.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "sh_util.h"

#define ALL ~0ULL
#define MD (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)
#define SIG IBV_OPS_SIGNALED
#define TSYNC IBV_OPS_TM_SYNC

static struct sh_env env;
static uint64_t sid = 1;

static void open_env(void)
{
	struct softhca_config cfg;

	sh_config(&cfg);
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_MANUAL, 1))
		tap_bail("sh_env_open failed");
}

static void eager(uint64_t tag, uint32_t seed)
{
	char p[24];

	sh_fill(p, sizeof(p), seed);
	if (sh_send_tm(&env, 0, IBV_TMH_EAGER, tag, seed, p, sizeof(p), sid++))
		tap_bail("send");
}

static void plains(int n, uint64_t wr_id0)
{
	int i;

	for (i = 0; i < n; i++)
		if (sh_post_plain(&env.b, wr_id0 + i, sh_alloc(&env.b, 128), 128))
			tap_bail("post plain");
}

static char *tbuf(void)
{
	char *b = sh_alloc(&env.b, 64);

	memset(b, 0xEE, 64);
	return b;
}

static int unexp(const struct sh_wc *wc)
{
	return wc->status == IBV_WC_SUCCESS && wc->opcode == IBV_WC_TM_RECV &&
	       !(wc->wc_flags & MD);
}

static int matched(const struct sh_wc *wc, uint64_t wr_id)
{
	return wc->status == IBV_WC_SUCCESS && wc->opcode == IBV_WC_TM_RECV &&
	       (wc->wc_flags & MD) == MD && wc->wr_id == wr_id;
}

/* Runs everything, then returns the single completion expected. */
static int one(struct sh_wc *wc)
{
	struct sh_wc extra;

	sh_flush(&env);
	if (sh_poll(env.b.cq, wc) != 1)
		return 0;
	if (sh_poll(env.b.cq, &extra) == 1) {
		tap_diag("unexpected extra completion: %s", sh_wc_str(&extra));
		return 0;
	}
	return 1;
}

static void test_m1_m2_race(void)
{
	struct softhca_stats st;
	struct sh_wc wc[4];
	char *b1;
	uint32_t h1;
	int n, ret;

	open_env();
	plains(8, 100);
	b1 = tbuf();

	/* m1 arrives before b1 is posted: unexpected. */
	eager(0x5, 1);
	tap_check(sh_step_msg(&env, 0), "m1 moved and processed");
	/* Software posts b1 before it has seen m1: its count is 0. */
	ret = sh_add(&env.b, 1, 11, b1, 64, 0x5, ALL, 0, SIG | TSYNC, &h1);
	tap_check(ret == 0 && sh_step_op(&env.b) == 1, "ADD b1 with the stale count 0 processed");
	st = sh_stats(&env.b);
	tap_check(st.list_entries == 1 && st.list_inactive == 1 && st.hw_unexpected_cnt == 1,
		  "b1 is on the list but inactive (entries %u inactive %u hw %u)",
		  st.list_entries, st.list_inactive, st.hw_unexpected_cnt);
	/* m2 would match b1: it must not. */
	eager(0x5, 2);
	tap_check(sh_step_msg(&env, 0), "m2 moved and processed");
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 3 && unexp(&wc[0]) && wc[0].wr_id == 100 &&
		  !(wc[0].wc_flags & IBV_WC_TM_SYNC_REQ),
		  "m1: unexpected, no SYNC_REQ (lag 1 <= 0x3fff, as mlx5) (n=%d %s)",
		  n, sh_wc_str(&wc[0]));
	tap_check(n == 3 && wc[1].opcode == IBV_WC_TM_ADD && wc[1].wr_id == 1 &&
		  wc[1].status == IBV_WC_SUCCESS && (wc[1].wc_flags & IBV_WC_TM_SYNC_REQ),
		  "stale ADD completes SUCCESS with SYNC_REQ (%s)", sh_wc_str(&wc[1]));
	tap_check(n == 3 && unexp(&wc[2]) && wc[2].wr_id == 101 &&
		  !(wc[2].wc_flags & IBV_WC_TM_SYNC_REQ) && sh_all(b1, 64, 0xEE),
		  "m2 does NOT match the stale b1: unexpected too, b1 untouched (%s)",
		  sh_wc_str(&wc[2]));
	st = sh_stats(&env.b);
	tap_check(st.hw_unexpected_cnt == 2 && st.unexpected == 2 && st.matched == 0,
		  "card counter 2 after m1 and m2");

	/* A SYNC with a wrong count (1) does not activate b1. */
	ret = sh_sync(&env.b, 2, 1, SIG | TSYNC);
	tap_check(ret == 0 && one(&wc[0]) && wc[0].opcode == IBV_WC_TM_SYNC &&
		  wc[0].status == IBV_WC_SUCCESS && !(wc[0].wc_flags & IBV_WC_TM_SYNC_REQ),
		  "SYNC(1) while the card is at 2: completes, never SYNC_REQ on a SYNC (mlx5) (%s)",
		  sh_wc_str(&wc[0]));
	st = sh_stats(&env.b);
	tap_check(st.list_inactive == 1 && st.sw_unexpected_cnt == 1,
		  "...b1 stays inactive, software count recorded as 1 (%u, %u)",
		  st.list_inactive, st.sw_unexpected_cnt);
	/* The right count activates it. */
	ret = sh_sync(&env.b, 3, 2, SIG | TSYNC);
	tap_check(ret == 0 && one(&wc[0]) && wc[0].opcode == IBV_WC_TM_SYNC && wc[0].wr_id == 3 &&
		  !(wc[0].wc_flags & IBV_WC_TM_SYNC_REQ),
		  "SYNC(2): completes without SYNC_REQ (%s)", sh_wc_str(&wc[0]));
	st = sh_stats(&env.b);
	tap_check(st.list_inactive == 0 && st.list_entries == 1 && st.sw_unexpected_cnt == 2,
		  "...and b1 is active now (inactive %u)", st.list_inactive);
	eager(0x5, 3);
	tap_check(one(&wc[0]) && matched(&wc[0], 11) && sh_check(b1, 24, 3) &&
		  !(wc[0].wc_flags & IBV_WC_TM_SYNC_REQ),
		  "m3 matches b1 after the sync (%s)", sh_wc_str(&wc[0]));
	sh_env_close(&env);
}

static void test_in_sync_entries_stay_active(void)
{
	struct softhca_stats st;
	struct sh_wc wc;
	char *ba, *ba2;
	uint32_t h;

	open_env();
	plains(8, 200);
	ba = tbuf();
	ba2 = tbuf();
	sh_add(&env.b, 1, 21, ba, 64, 0xA, ALL, 0, TSYNC, &h);
	sh_flush(&env);
	eager(0xB, 1); /* unexpected: card counter 1, software still at 0 */
	tap_check(one(&wc) && unexp(&wc), "an unrelated message goes unexpected");
	/* Posted before software saw it: stale, inactive. */
	sh_add(&env.b, 2, 22, ba2, 64, 0xA, ALL, 0, TSYNC, &h);
	sh_flush(&env);
	st = sh_stats(&env.b);
	tap_check(st.list_entries == 2 && st.list_inactive == 1,
		  "the entry added in sync is still active, the stale one is not (%u/%u)",
		  st.list_inactive, st.list_entries);
	eager(0xA, 2);
	tap_check(one(&wc) && matched(&wc, 21) && sh_check(ba, 24, 2),
		  "entry added while in sync matches after a later unexpected arrival (%s)",
		  sh_wc_str(&wc));
	tap_check(!(wc.wc_flags & IBV_WC_TM_SYNC_REQ),
		  "...and its completion has no SYNC_REQ (mlx5: only list ops and unexpected) (0x%x)",
		  wc.wc_flags);
	eager(0xA, 3);
	tap_check(one(&wc) && unexp(&wc) && sh_all(ba2, 64, 0xEE),
		  "the next message does not take the inactive entry (%s)", sh_wc_str(&wc));
	sh_env_close(&env);
}

static void test_add_without_tm_sync(void)
{
	struct softhca_stats st;
	struct sh_wc wc;
	char *b2, *b3, *b4;
	uint32_t h2, h3, h4, hx;

	open_env();
	plains(8, 300);
	b2 = tbuf();
	b3 = tbuf();
	b4 = tbuf();

	/* Software reports 0 (in sync); an unexpected message moves the card to 1. */
	eager(0x99, 1);
	tap_check(one(&wc) && unexp(&wc), "one unexpected message: card at 1");
	/* ADD without IBV_OPS_TM_SYNC but with the right count in the field:
	 * the card must use the last reported count (0), so it is stale. */
	sh_add(&env.b, 1, 31, b2, 64, 0x2, ALL, 1, SIG, &h2);
	tap_check(one(&wc) && wc.opcode == IBV_WC_TM_ADD && (wc.wc_flags & IBV_WC_TM_SYNC_REQ),
		  "ADD(cnt field 1, no TM_SYNC flag) completes with SYNC_REQ (%s)", sh_wc_str(&wc));
	st = sh_stats(&env.b);
	tap_check(st.list_inactive == 1 && st.sw_unexpected_cnt == 0,
		  "...it used the last reported count 0: entry inactive, sw count still 0 (%u %u)",
		  st.list_inactive, st.sw_unexpected_cnt);
	eager(0x2, 2);
	tap_check(one(&wc) && unexp(&wc) && sh_all(b2, 64, 0xEE),
		  "...a message for it goes unexpected (card now at 2)");

	/* Report 2 with a SYNC: the card is back in sync; b2 becomes active. */
	sh_sync(&env.b, 2, 2, SIG | TSYNC);
	tap_check(one(&wc) && !(wc.wc_flags & IBV_WC_TM_SYNC_REQ), "SYNC(2) in sync");
	/* ADD without the flag and a garbage count: uses 2, active. */
	sh_add(&env.b, 3, 33, b3, 64, 0x3, ALL, 12345, SIG, &h3);
	tap_check(one(&wc) && wc.opcode == IBV_WC_TM_ADD && (wc.wc_flags & IBV_WC_TM_SYNC_REQ),
		  "ADD(garbage count, no TM_SYNC) while in sync completes with SYNC_REQ: mlx5's "
		  "provider learns counts from ADDs with TM_SYNC only, and none said 2");
	eager(0x3, 3);
	tap_check(one(&wc) && matched(&wc, 33) && sh_check(b3, 24, 3),
		  "...and its entry is active (the field was ignored) (%s)", sh_wc_str(&wc));
	eager(0x2, 4);
	tap_check(one(&wc) && matched(&wc, 31) && sh_check(b2, 24, 4),
		  "the once-stale entry b2 was activated by the sync (%s)", sh_wc_str(&wc));

	/* Re-sync by an ADD carrying the right count, and by a DEL. */
	eager(0x98, 5); /* card 3 */
	tap_check(one(&wc) && unexp(&wc), "another unexpected: card at 3");
	sh_add(&env.b, 4, 34, b4, 64, 0x4, ALL, 2, TSYNC, &h4); /* stale */
	sh_flush(&env);
	st = sh_stats(&env.b);
	tap_check(st.list_inactive == 1, "stale ADD(2) while card at 3: inactive (%u)",
		  st.list_inactive);
	sh_add(&env.b, 5, 35, tbuf(), 64, 0x5, ALL, 3, SIG | TSYNC, &hx);
	tap_check(one(&wc) && !(wc.wc_flags & IBV_WC_TM_SYNC_REQ),
		  "an ADD carrying the right count (3) completes in sync");
	st = sh_stats(&env.b);
	tap_check(st.list_inactive == 0 && st.list_entries == 2,
		  "...and activates every entry on the list, the stale one included (%u/%u)",
		  st.list_inactive, st.list_entries);

	eager(0x97, 6); /* card 4 */
	tap_check(one(&wc) && unexp(&wc), "another unexpected: card at 4");
	sh_add(&env.b, 6, 36, tbuf(), 64, 0x6, ALL, 3, TSYNC, &hx); /* stale */
	sh_flush(&env);
	st = sh_stats(&env.b);
	tap_check(st.list_inactive == 1, "stale ADD(3) while card at 4: inactive");
	sh_del(&env.b, 7, h4, 4, SIG | TSYNC);
	tap_check(one(&wc) && wc.opcode == IBV_WC_TM_DEL && wc.status == IBV_WC_SUCCESS &&
		  (wc.wc_flags & IBV_WC_TM_SYNC_REQ),
		  "DEL carrying the right count (4) completes, with SYNC_REQ: mlx5 compares "
		  "the card's count with its entry's ADD (2) (%s)", sh_wc_str(&wc));
	st = sh_stats(&env.b);
	tap_check(st.list_inactive == 0 && st.list_entries == 2,
		  "...and activates the stale entry (%u/%u)", st.list_inactive, st.list_entries);
	eager(0x6, 7);
	tap_check(one(&wc) && matched(&wc, 36), "the entry activated by DEL matches");

	/* A count larger than the card's is out of sync too. */
	eager(0x96, 8); /* card 5 */
	one(&wc);
	sh_add(&env.b, 8, 38, tbuf(), 64, 0x8, ALL, 6, SIG | TSYNC, &hx);
	tap_check(one(&wc) && (wc.wc_flags & IBV_WC_TM_SYNC_REQ),
		  "ADD with a count ahead of the card (6 vs 5): SYNC_REQ (%s)", sh_wc_str(&wc));
	eager(0x8, 9);
	tap_check(one(&wc) && unexp(&wc), "...and its entry is inactive");
	sh_env_close(&env);
}

static void test_wrap(void)
{
	const uint32_t total = 65536 + 5, batch = 512;
	struct softhca_stats st;
	struct sh_wc wc;
	double t0 = sh_now();
	uint32_t sent = 0, got = 0, i, n, bad = 0, h;
	char tmh[16];
	char *bufs, *b;
	size_t mark;
	int timed_out = 0;

	open_env();
	bufs = sh_alloc(&env.b, batch * 32);
	sh_put_tmh(tmh, IBV_TMH_EAGER, 0, 0xFFFF);
	while (sent < total) {
		n = total - sent < batch ? total - sent : batch;
		for (i = 0; i < n; i++)
			if (sh_post_plain(&env.b, sent + i, bufs + 32 * i, 32))
				tap_bail("post plain");
		mark = sh_mem_mark(&env.a);
		for (i = 0; i < n; i++)
			if (sh_qp_send(&env.a, env.p[0].sqp, tmh, 16, sent + i,
				       (i == n - 1) ? IBV_SEND_SIGNALED : 0))
				tap_bail("send");
		sh_flush(&env);
		for (i = 0; i < n; i++) {
			if (sh_poll(env.b.cq, &wc) != 1) {
				bad++;
				break;
			}
			got++;
			if (!unexp(&wc) || wc.wr_id != sent + i)
				bad++;
		}
		sh_cq_discard(env.p[0].scq);
		sh_mem_reset(&env.a, mark);
		sent += n;
		if (sh_now() - t0 > 40) {
			timed_out = 1;
			break;
		}
	}
	tap_diag("%u unexpected messages in %.2f s", got, sh_now() - t0);
	tap_check(!timed_out && got == total && !bad,
		  "65541 unexpected messages delivered in order (got %u, bad %u)", got, bad);
	st = sh_stats(&env.b);
	tap_check(st.hw_unexpected_cnt == 5 && st.unexpected == total,
		  "card counter wrapped in 16 bits: %u (stats.unexpected %llu)",
		  st.hw_unexpected_cnt, (unsigned long long)st.unexpected);

	b = tbuf();
	sh_add(&env.b, 1, 41, b, 64, 0x1, ALL, 65540, SIG | TSYNC, &h);
	tap_check(one(&wc) && (wc.wc_flags & IBV_WC_TM_SYNC_REQ),
		  "ADD with count 65540 (4 in 16 bits) is stale (%s)", sh_wc_str(&wc));
	sh_sync(&env.b, 2, total, SIG | TSYNC);
	tap_check(one(&wc) && wc.opcode == IBV_WC_TM_SYNC && !(wc.wc_flags & IBV_WC_TM_SYNC_REQ),
		  "SYNC with count 65541 equals the wrapped counter 5: in sync (%s)", sh_wc_str(&wc));
	eager(0x1, 1);
	tap_check(one(&wc) && matched(&wc, 41), "...and the entry matches (%s)", sh_wc_str(&wc));
	b = tbuf();
	sh_add(&env.b, 3, 42, b, 64, 0x2, ALL, 5, SIG | TSYNC, &h);
	tap_check(one(&wc) && !(wc.wc_flags & IBV_WC_TM_SYNC_REQ),
		  "ADD with count 5 is also in sync (16-bit compare)");
	eager(0x2, 2);
	tap_check(one(&wc) && matched(&wc, 42), "...and matches");
	sh_env_close(&env);
}

int main(void)
{
	alarm(60);
	test_m1_m2_race();
	test_in_sync_entries_stay_active();
	test_add_without_tm_sync();
	test_wrap();
	return tap_done();
}
