/*
 * tm_match_unexp.c - test_tm_match's messages that match no tagged entry:
 * unexpected eager ones (one and several packets), NO_TAG and FIN,
 * malformed ones, receiver-not-ready, and the order in which the card's
 * decisions complete (tm_match.h).
 */
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "tm_match.h"

/* An unexpected eager: the whole message in a plain buffer, counted by
 * the card until software's SYNC says it has it. */
static void unexpected_eager(void)
{
	struct softhca_stats st;
	struct ibv_tmh tmh;
	struct sh_wc wc;
	char *pb;
	int n;

	pb = plain(600, 256);
	eager(0, 0xC0FFEE, 0xa1b2c3d4, 30, 20);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_TM_RECV &&
		  wc.wr_id == 600,
		  "unexpected eager: IBV_WC_TM_RECV SUCCESS to the plain buffer (%s)", sh_wc_str(&wc));
	tap_diag("unexpected completion as reported: %s", sh_wc_str(&wc));
	tap_check((wc.wc_flags & MD) == 0, "unexpected: neither TM_MATCH nor TM_DATA_VALID (0x%x)",
		  wc.wc_flags);
	tap_check(!(wc.wc_flags & IBV_WC_TM_SYNC_REQ),
		  "unexpected: no SYNC_REQ (mlx5 flags it only past a 0x3fff lag) (0x%x)",
		  wc.wc_flags);
	memcpy(&tmh, pb, sizeof(tmh));
	tap_check(wc.byte_len == SH_TMH_LEN + 30 && tmh.opcode == IBV_TMH_EAGER &&
		  be32toh(tmh.app_ctx) == 0xa1b2c3d4 && be64toh(tmh.tag) == 0xC0FFEE &&
		  sh_check(pb + SH_TMH_LEN, 30, 20) && sh_all(pb + 46, 256 - 46, 0xEE),
		  "unexpected: whole message incl. TMH in the plain buffer, byte_len %u", wc.byte_len);
	st = sh_stats(&env.b);
	tap_check(st.hw_unexpected_cnt == 1 && st.unexpected == 1 && st.sw_unexpected_cnt == 0,
		  "unexpected: card counter 1, stats.unexpected 1, software count still 0 (%u %llu %u)",
		  st.hw_unexpected_cnt, (unsigned long long)st.unexpected, st.sw_unexpected_cnt);
	resync();
	st = sh_stats(&env.b);
	tap_check(st.sw_unexpected_cnt == 1, "after SYNC(1) stats.sw_unexpected_cnt is 1");
}

/* NO_TAG and FIN carrying the tag of entry tb: neither matched nor
 * counted (st0: the stats with tb listed). */
static void notag_and_fin(const char *tb, struct softhca_stats st0)
{
	struct softhca_stats st;
	struct sh_wc wc;
	char *pb, msg[128];
	int n;

	/* NO_TAG with the tag of an active entry: not matched, not counted. */
	pb = plain(601, 256);
	sh_put_tmh(msg, IBV_TMH_NO_TAG, 0x99, 0x42);
	memset(msg + SH_TMH_LEN, 'n', 20);
	sh_send_raw(&env, 0, 0, msg, 36, 1);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_TM_NO_TAG &&
		  wc.wr_id == 601 && wc.byte_len == 36 && !memcmp(pb, msg, 36),
		  "NO_TAG: IBV_WC_TM_NO_TAG, whole message in the plain buffer (%s)", sh_wc_str(&wc));
	tap_check((wc.wc_flags & TMF) == 0, "NO_TAG: no MATCH/DATA_VALID/SYNC_REQ (0x%x)",
		  wc.wc_flags);
	st = sh_stats(&env.b);
	tap_check(st.hw_unexpected_cnt == st0.hw_unexpected_cnt && st.unexpected == st0.unexpected &&
		  st.list_entries == st0.list_entries && sh_all(tb, 64, 0xEE),
		  "NO_TAG is not counted and leaves the matching entry alone");

	/* FIN arriving at a receiver: NO_TAG completion, not matched, not counted. */
	pb = plain(602, 256);
	n = sh_put_tmh(msg, IBV_TMH_FIN, 0x98, 0x42);
	n += sh_put_rvh(msg + n, 0x1000, 0x55, 4096);
	sh_send_raw(&env, 0, 0, msg, n, 2);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.opcode == IBV_WC_TM_NO_TAG && wc.wr_id == 602 && wc.byte_len == 32 &&
		  !memcmp(pb, msg, 32),
		  "FIN: IBV_WC_TM_NO_TAG, whole TMH+RVH in the plain buffer (%s)", sh_wc_str(&wc));
	st = sh_stats(&env.b);
	tap_check(st.hw_unexpected_cnt == st0.hw_unexpected_cnt && st.list_entries == st0.list_entries &&
		  sh_all(tb, 64, 0xEE),
		  "FIN is not counted and does not consume the entry with its tag");
}

/* Malformed messages with entry 0x42 listed (st0: the stats then). */
static void malformed(struct softhca_stats st0)
{
	struct softhca_stats st;
	struct sh_wc wc;
	char *pb, msg[128];
	int n;

	/* Malformed messages: IBV_WC_RECV, whole, not counted, entry untouched. */
#define MALFORMED(wrid, len, what)                                                   \
	do {                                                                         \
		pb = plain(wrid, 256);                                               \
		sh_send_raw(&env, 0, 0, msg, len, wrid);                             \
		sh_flush(&env);                                                      \
		n = sh_poll(env.b.cq, &wc);                                          \
		st = sh_stats(&env.b);                                               \
		tap_check(n == 1 && wc.status == IBV_WC_SUCCESS &&                   \
			  wc.opcode == IBV_WC_RECV && wc.wr_id == wrid &&            \
			  wc.byte_len == (uint32_t)(len) && !memcmp(pb, msg, len) && \
			  sh_all(pb + (len), 256 - (len), 0xEE),                     \
			  "malformed (" what "): IBV_WC_RECV, whole message, "       \
			  "byte_len %u (%s)", (unsigned)(len), sh_wc_str(&wc));      \
		tap_check(st.hw_unexpected_cnt == st0.hw_unexpected_cnt &&          \
			  st.unexpected == st0.unexpected &&                         \
			  st.list_entries == st0.list_entries &&                     \
			  !(wc.wc_flags & IBV_WC_TM_SYNC_REQ),                       \
			  "malformed (" what "): not counted, no SYNC_REQ, "         \
			  "entries untouched");                                      \
	} while (0)

	sh_put_tmh(msg, IBV_TMH_EAGER, 0, 0x42);
	MALFORMED(610, 8, "8 bytes, shorter than the TMH");
	MALFORMED(611, 15, "15 bytes, one short of the TMH");
	MALFORMED(612, 0, "empty message");
	sh_put_tmh(msg, 7, 0, 0x42);
	memset(msg + SH_TMH_LEN, 'u', 20);
	MALFORMED(613, 36, "unknown TMH opcode 7");
	sh_put_tmh(msg, IBV_TMH_RNDV, 0, 0x42);
	sh_put_rvh(msg + SH_TMH_LEN, 0x1000, 1, 100);
	MALFORMED(614, 24, "RNDV shorter than TMH+RVH");
	memset(msg + 32, 'm', 40);
	MALFORMED(615, 65, "RNDV of 65 bytes > max_rndv_hdr_size 64");
#undef MALFORMED
}

void test_unexpected_notag_malformed(void)
{
	struct softhca_stats st0;
	struct sh_wc wc;
	char *tb;
	int n;

	open_env(0, 1);
	unexpected_eager();
	tb = guarded(64);
	add(0x42, ALL, tb, 64, 42);
	st0 = sh_stats(&env.b);
	notag_and_fin(tb, st0);
	malformed(st0);

	eager(0, 0x42, 0x7, 10, 21);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.wr_id == 42 && (wc.wc_flags & MD) == MD && sh_check(tb, 10, 21),
		  "after NO_TAG, FIN and malformed messages the entry still matches (%s)",
		  sh_wc_str(&wc));
	sh_env_close(&env);
}

/* Unexpected and NO_TAG messages longer than one MTU: one completion each. */
void test_unexpected_multi(void)
{
	struct sh_wc wc[4];
	char *pb, *pb2, *msg;
	int n;

	open_env(0, 1);
	pb = plain(800, 2048);
	pb2 = plain(801, 2048);
	eager(0, 0xD0, 0x11, 1000, 33);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 1 && is_unexpected(&wc[0]) && wc[0].wr_id == 800 &&
		  wc[0].byte_len == SH_TMH_LEN + 1000 && sh_check(pb + SH_TMH_LEN, 1000, 33) &&
		  sh_all(pb + SH_TMH_LEN + 1000, 2048 - 1016, 0xEE),
		  "unexpected eager of 1016 bytes (mtu %d): one completion, whole message (n=%d %s)",
		  MTU, n, sh_wc_str(&wc[0]));
	msg = malloc(1500);
	sh_put_tmh(msg, IBV_TMH_NO_TAG, 0, 0);
	sh_fill(msg + SH_TMH_LEN, 1500 - SH_TMH_LEN, 34);
	sh_send_raw(&env, 0, 0, msg, 1500, 1);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 1 && wc[0].opcode == IBV_WC_TM_NO_TAG && wc[0].wr_id == 801 &&
		  wc[0].byte_len == 1500 && !memcmp(pb2, msg, 1500),
		  "NO_TAG of 1500 bytes (mtu %d): one completion, whole message (n=%d)", MTU, n);
	free(msg);
	sh_env_close(&env);
}

void test_rnr(void)
{
	struct softhca_stats st;
	struct sh_wc wc[4];
	char *t0, *t1, *p1, *p2, *p3;
	int n;

	open_env(0, 2);
	t0 = guarded(64);
	t1 = guarded(64);
	add(0xE0, ALL, t0, 64, 10);
	add(0xE1, ALL, t1, 64, 11);
	/* No plain buffer: an unexpected message on pair 0 must wait. */
	eager(0, 0xBAD, 1, 24, 50);  /* u1: unexpected */
	eager(0, 0xE0, 2, 24, 51);   /* behind u1 on the same QP, matches t0 */
	eager(1, 0xE1, 3, 24, 52);   /* other QP, matches t1 */
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 1 && wc[0].wr_id == 11 && (wc[0].wc_flags & MD) == MD,
		  "receiver not ready: only the other QP's message completes (n=%d %s)", n,
		  sh_wc_str(&wc[0]));
	st = sh_stats(&env.b);
	tap_check(st.rnr_waits >= 1 && st.list_entries == 1,
		  "the unexpected message waits (rnr_waits %llu), t0 still listed",
		  (unsigned long long)st.rnr_waits);
	tap_check(sh_all(t0, 64, 0xEE), "the message behind it on the same QP did not overtake it");

	p1 = plain(900, 256);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && wc[0].wr_id == 900 && is_unexpected(&wc[0]) &&
		  wc[0].byte_len == SH_TMH_LEN + 24 && sh_check(p1 + SH_TMH_LEN, 24, 50),
		  "after ibv_post_srq_recv the waiting message arrives intact (n=%d %s)", n,
		  sh_wc_str(&wc[0]));
	tap_check(n == 2 && wc[1].wr_id == 10 && (wc[1].wc_flags & MD) == MD &&
		  sh_check(t0, 24, 51),
		  "...then the next message on that QP matches its entry (added in sync) (%s)",
		  sh_wc_str(&wc[1]));
	resync();

	/* Two unexpected messages on one QP, buffers posted one at a time. */
	eager(0, 0xBAD1, 0, 20, 60);
	eager(0, 0xBAD2, 0, 21, 61);
	sh_flush(&env);
	tap_check(sh_poll(env.b.cq, wc) == 0, "two unexpected messages wait with no buffer");
	p2 = plain(901, 256);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 1 && wc[0].wr_id == 901 && wc[0].byte_len == SH_TMH_LEN + 20 &&
		  sh_check(p2 + SH_TMH_LEN, 20, 60),
		  "one buffer: the first message (in QP order) arrives (n=%d)", n);
	p3 = plain(902, 256);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 1 && wc[0].wr_id == 902 && wc[0].byte_len == SH_TMH_LEN + 21 &&
		  sh_check(p3 + SH_TMH_LEN, 21, 61),
		  "next buffer: the second message arrives (n=%d)", n);
	st = sh_stats(&env.b);
	tap_check(st.hw_unexpected_cnt == 3 && st.unexpected == 3,
		  "all three unexpected messages counted exactly once (%u)", st.hw_unexpected_cnt);
	sh_env_close(&env);
}

void test_decision_order(void)
{
	struct sh_wc wc[8];
	char *ta, *tb, *pc;
	int n;

	open_env(0, 2);
	ta = guarded(2000);
	tb = guarded(64);
	add(0xA, ALL, ta, 2000, 1);
	add(0xB, ALL, tb, 64, 2);
	pc = plain(3, 256);
	eager(0, 0xA, 0, 1000, 70); /* multi-packet match on pair 0 */
	eager(1, 0xC, 0, 10, 71);   /* unexpected on pair 1 */
	eager(1, 0xB, 0, 10, 72);   /* match on pair 1 */
	n = sh_step_msg(&env, 0);
	n += sh_step_msg(&env, 1);
	n += sh_step_msg(&env, 1);
	tap_check(n == 3, "stepped: A's first packet, C, B");
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 8);
	tap_check(n == 4 && wc[0].wr_id == 1 && (wc[0].wc_flags & MD) == IBV_WC_TM_MATCH &&
		  wc[1].wr_id == 3 && is_unexpected(&wc[1]) &&
		  wc[2].wr_id == 2 && (wc[2].wc_flags & MD) == MD &&
		  wc[3].wr_id == 1 && (wc[3].wc_flags & MD) == IBV_WC_TM_DATA_VALID,
		  "completions in card decision order: MATCH(A), unexpected(C), MATCH|DV(B), DV(A) "
		  "(n=%d: %llu %llu %llu %llu)", n,
		  (unsigned long long)wc[0].wr_id, (unsigned long long)wc[1].wr_id,
		  (unsigned long long)wc[2].wr_id, (unsigned long long)wc[3].wr_id);
	tap_check(sh_check(ta, 1000, 70) && sh_check(tb, 10, 72) &&
		  sh_check(pc + SH_TMH_LEN, 10, 71), "all three payloads in place");
	resync();

	/* Other interleaving: the unexpected one first. */
	add(0xA, ALL, ta, 2000, 4);
	add(0xB, ALL, tb, 64, 5);
	plain(6, 256);
	eager(0, 0xA, 0, 10, 73);
	eager(1, 0xC, 0, 10, 74);
	eager(1, 0xB, 0, 10, 75);
	n = sh_step_msg(&env, 1);
	n += sh_step_msg(&env, 0);
	n += sh_step_msg(&env, 1);
	tap_check(n == 3, "stepped: C, A, B");
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 8);
	tap_check(n == 3 && wc[0].wr_id == 6 && is_unexpected(&wc[0]) && wc[1].wr_id == 4 &&
		  (wc[1].wc_flags & MD) == MD && wc[2].wr_id == 5 && (wc[2].wc_flags & MD) == MD,
		  "completions in card decision order: unexpected(C), A, B (n=%d)", n);
	resync();

	/*
	 * An unexpected message whose last packet has not arrived holds back
	 * a match decided after it: software must see the unexpected
	 * arrival first, or it could hand the same receive out twice.
	 */
	add(0xB, ALL, tb, 64, 8);
	pc = plain(7, 1024);
	eager(0, 0xD, 0, 600, 76); /* unexpected, 3 packets at MTU 256 */
	eager(1, 0xB, 0, 10, 77);  /* match on pair 1 */
	n = sh_step_msg(&env, 0);
	n += sh_step_msg(&env, 1);
	tap_check(n == 2, "stepped: D's first packet, B");
	n = sh_poll_all(env.b.cq, wc, 8);
	tap_check(n == 0, "match B is held behind the incomplete unexpected D (n=%d)", n);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 8);
	tap_check(n == 2 && wc[0].wr_id == 7 && is_unexpected(&wc[0]) &&
		  wc[0].byte_len == SH_TMH_LEN + 600 && wc[1].wr_id == 8 &&
		  (wc[1].wc_flags & MD) == MD,
		  "after D's last packet: unexpected(D) then MATCH|DV(B) (n=%d)", n);
	tap_check(sh_check(pc + SH_TMH_LEN, 600, 76) && sh_check(tb, 10, 77),
		  "D and B payloads in place");
	sh_env_close(&env);
}
