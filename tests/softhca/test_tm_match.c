/*
 * test_tm_match.c - soft HCA: how arriving messages are classified and
 * delivered by the TM-SRQ: eager matches (single and multi packet), tag and
 * mask matching in list order, unexpected, NO_TAG / FIN, malformed messages,
 * eager truncation, multi-SGE tagged buffers, receiver-not-ready, and the
 * order of completions.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "sh_util.h"

#define ALL ~0ULL
#define MTU 256
#define MD (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)
#define TMF (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID | IBV_WC_TM_SYNC_REQ)

static struct sh_env env;
static uint32_t sw_cnt; /* unexpected messages software has seen */
static uint64_t next_id = 1;

static void open_env_mode(uint32_t max_sge, int npairs, int strict)
{
	struct softhca_config cfg;

	sh_config(&cfg);
	cfg.strict = strict;
	cfg.mtu = MTU;
	if (max_sge)
		cfg.max_sge = max_sge;
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_MANUAL, npairs))
		tap_bail("sh_env_open failed");
	sw_cnt = 0;
}

static void open_env(uint32_t max_sge, int npairs)
{
	open_env_mode(max_sge, npairs, 1);
}

/* ADD (signalled, in sync), processed and its completion consumed. */
static uint32_t add(uint64_t tag, uint64_t mask, void *buf, uint32_t len,
		    uint64_t recv_wr_id)
{
	struct sh_wc wc;
	uint32_t h;

	if (sh_add(&env.b, 0xadd0000 + next_id++, recv_wr_id, buf, len, tag, mask,
		   sw_cnt, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC, &h))
		tap_bail("ADD failed");
	while (sh_step_op(&env.b))
		;
	if (sh_poll(env.b.cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS ||
	    wc.opcode != IBV_WC_TM_ADD)
		sh_die("ADD did not complete: %s", sh_wc_str(&wc));
	return h;
}

/* Software has handled one more unexpected message: report it. */
static void resync(void)
{
	struct sh_wc wc;

	sw_cnt++;
	if (sh_sync(&env.b, 0x5c, sw_cnt, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC))
		tap_bail("SYNC failed");
	while (sh_step_op(&env.b))
		;
	if (sh_poll(env.b.cq, &wc) != 1 || wc.opcode != IBV_WC_TM_SYNC ||
	    (wc.wc_flags & IBV_WC_TM_SYNC_REQ))
		sh_die("SYNC did not complete in sync: %s", sh_wc_str(&wc));
}

static char *plain(uint64_t wr_id, uint32_t len)
{
	char *b = sh_alloc(&env.b, len);

	memset(b, 0xEE, len);
	if (sh_post_plain(&env.b, wr_id, b, len))
		tap_bail("post plain");
	return b;
}

static char *guarded(uint32_t len)
{
	char *b = sh_alloc(&env.b, len + 64);

	memset(b, 0xEE, len + 64);
	return b;
}

static void eager(int pair, uint64_t tag, uint32_t app, uint32_t len, uint32_t seed)
{
	char *p = malloc(len ? len : 1);

	sh_fill(p, len, seed);
	if (sh_send_tm(&env, pair, IBV_TMH_EAGER, tag, app, p, len, next_id++))
		tap_bail("send failed");
	free(p);
}

static int is_unexpected(const struct sh_wc *wc)
{
	return wc->status == IBV_WC_SUCCESS && wc->opcode == IBV_WC_TM_RECV &&
	       !(wc->wc_flags & MD);
}

static void test_eager_single(void)
{
	struct softhca_stats st;
	struct sh_wc wc;
	char *b;
	int n;

	open_env(0, 1);
	b = guarded(128);
	add(0x1234, ALL, b, 128, 77);
	eager(0, 0x1234, 0x12345678, 40, 1);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_TM_RECV,
		  "eager match: SUCCESS, IBV_WC_TM_RECV (%s)", sh_wc_str(&wc));
	tap_check((wc.wc_flags & TMF) == MD,
		  "eager single packet: TM_MATCH|TM_DATA_VALID in one completion, no SYNC_REQ (0x%x)",
		  wc.wc_flags);
	tap_check(wc.wr_id == 77, "completion wr_id is the ADD's recv_wr_id (%llu)",
		  (unsigned long long)wc.wr_id);
	tap_check(wc.byte_len == 40, "byte_len is the payload length, headers excluded (%u)",
		  wc.byte_len);
	tap_check(wc.tag == 0x1234 && wc.priv == 0x12345678,
		  "read_tm_info: tag and priv (app_ctx) from the TMH (0x%llx, 0x%x)",
		  (unsigned long long)wc.tag, wc.priv);
	tap_check(wc.qp_num == env.p[0].rqp->qp_num, "qp_num is the receiving QP");
	tap_check(sh_check(b, 40, 1) && sh_all(b + 40, 128 + 64 - 40, 0xEE),
		  "payload at the buffer's start, TMH skipped, nothing written past it");
	tap_check(sh_poll(env.b.cq, &wc) == 0, "exactly one completion for a single-packet eager");
	st = sh_stats(&env.b);
	tap_check(st.matched == 1 && st.unexpected == 0 && st.hw_unexpected_cnt == 0 &&
		  st.list_entries == 0,
		  "stats: matched 1, unexpected 0, entry consumed");

	/* Exactly one MTU (TMH + payload == mtu): still one completion. */
	b = guarded(MTU);
	add(0x55, ALL, b, MTU, 78);
	eager(0, 0x55, 1, MTU - SH_TMH_LEN, 2);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, &wc, 1);
	tap_check(n == 1 && (wc.wc_flags & TMF) == MD && wc.byte_len == MTU - SH_TMH_LEN &&
		  sh_poll(env.b.cq, &wc) == 0 && sh_check(b, MTU - SH_TMH_LEN, 2),
		  "eager message of exactly one MTU (TMH+%u): one MATCH|DATA_VALID completion",
		  MTU - SH_TMH_LEN);

	/* Zero-length payload. */
	b = guarded(16);
	add(0x56, ALL, b, 16, 79);
	eager(0, 0x56, 3, 0, 3);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && (wc.wc_flags & TMF) == MD && wc.byte_len == 0 && wc.wr_id == 79 &&
		  sh_all(b, 16 + 64, 0xEE),
		  "eager with an empty payload matches, byte_len 0, buffer untouched (%s)",
		  sh_wc_str(&wc));
	sh_env_close(&env);
}

static void test_eager_multi(void)
{
	struct sh_wc wc[4];
	char *b;
	int n;

	open_env(0, 1);
	/* One byte over one MTU. */
	b = guarded(512);
	add(0x77, ALL, b, 512, 90);
	eager(0, 0x77, 0xfeed, MTU - SH_TMH_LEN + 1, 4);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && wc[0].wr_id == 90 && wc[1].wr_id == 90 &&
		  (wc[0].wc_flags & MD) == IBV_WC_TM_MATCH &&
		  (wc[1].wc_flags & MD) == IBV_WC_TM_DATA_VALID,
		  "eager of MTU+1 bytes: two completions, MATCH then DATA_VALID, same wr_id (n=%d)", n);
	tap_check(n == 2 && wc[1].byte_len == MTU - SH_TMH_LEN + 1 &&
		  sh_check(b, MTU - SH_TMH_LEN + 1, 4) &&
		  sh_all(b + MTU - SH_TMH_LEN + 1, 64, 0xEE),
		  "...data complete, DATA_VALID byte_len is the payload length (%u)",
		  n == 2 ? wc[1].byte_len : 0);

	/* Stepwise: the match is reported on the first packet. */
	b = guarded(2000);
	add(0x78, ALL, b, 2000, 91);
	eager(0, 0x78, 0xbeef, 1000, 5);
	tap_check(sh_step_msg(&env, 0), "first packet of a 1000-byte eager moved and processed");
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_TM_RECV &&
		  (wc[0].wc_flags & TMF) == IBV_WC_TM_MATCH && wc[0].wr_id == 91,
		  "after the first packet: one MATCH completion, no DATA_VALID yet (n=%d %s)",
		  n, sh_wc_str(&wc[0]));
	tap_check(n == 1 && wc[0].tag == 0x78 && wc[0].priv == 0xbeef,
		  "MATCH completion carries tag and priv (0x%llx 0x%x)",
		  (unsigned long long)wc[0].tag, wc[0].priv);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_TM_RECV &&
		  (wc[0].wc_flags & MD) == IBV_WC_TM_DATA_VALID && wc[0].wr_id == 91 &&
		  wc[0].byte_len == 1000,
		  "after the rest: DATA_VALID completion, byte_len 1000 (n=%d %s)", n,
		  sh_wc_str(&wc[0]));
	tap_check(sh_check(b, 1000, 5) && sh_all(b + 1000, 1064 - 1000, 0xEE),
		  "multi-packet eager data in place, nothing past it");
	sh_env_close(&env);
}

static void test_tag_mask(void)
{
	struct sh_wc wc;
	char *b[7];
	int i, n;

	open_env(0, 1);
	for (i = 0; i < 7; i++)
		b[i] = guarded(64);
	add(0x100, ALL, b[0], 64, 1);
	add(0x200, ALL, b[1], 64, 2);
	add(0x3F0, ~0xFFULL, b[2], 64, 3);
	add(0x305, ALL, b[3], 64, 4);
	add(0, 0, b[4], 64, 5);
	add(0xAAAA000000000001ULL, 0xFFFFFFFFULL, b[5], 64, 6);

	eager(0, 0x200, 0, 8, 10);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.wr_id == 2 && wc.tag == 0x200 && (wc.wc_flags & MD) == MD,
		  "tag 0x200 skips the non-matching first entry and takes 0x200 (%s)",
		  sh_wc_str(&wc));
	eager(0, 0x305, 0, 8, 11);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.wr_id == 3 && wc.tag == 0x305,
		  "tag 0x305: the earlier masked entry (0x3F0/~0xFF) wins over the later exact one (%s)",
		  sh_wc_str(&wc));
	eager(0, 0x305, 0, 8, 12);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.wr_id == 4 && wc.tag == 0x305,
		  "the second 0x305 takes the exact entry (%s)", sh_wc_str(&wc));
	eager(0, 0x999, 0, 8, 13);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.wr_id == 5,
		  "mask 0 (full wildcard) entry takes an otherwise unmatched tag 0x999 (%s)",
		  sh_wc_str(&wc));
	eager(0, 0x5555000000000001ULL, 0, 8, 14);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.wr_id == 6 && wc.tag == 0x5555000000000001ULL,
		  "mask 0xFFFFFFFF ignores the high 32 bits (%s)", sh_wc_str(&wc));
	eager(0, 0x100, 0, 8, 15);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.wr_id == 1 && sh_check(b[0], 8, 15),
		  "tag 0x100 takes the first entry (%s)", sh_wc_str(&wc));
	plain(500, 256);
	eager(0, 0x100, 0, 8, 16);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.wr_id == 500 && is_unexpected(&wc),
		  "every entry is consumed once: another 0x100 goes unexpected (%s)", sh_wc_str(&wc));
	sh_env_close(&env);
}

/*
 * More distinct masks than the card indexes by group (softhca_priv.h,
 * SH_MASK_GROUPS): list order must still decide, across groups and the
 * overflow list alike.
 */
static void test_many_masks(void)
{
	enum { N = 12 };
	struct sh_wc wc;
	char *b[N];
	int i, n, ok = 1;

	open_env(0, 1);
	/* Entries that never match, so that the list is long enough to be
	 * indexed (softhca_priv.h, SH_INDEX_FROM) rather than scanned. */
	for (i = 0; i < 10; i++)
		add(0x1000 + i, ALL, guarded(64), 64, 900 + i);
	/* Entry i keeps the low 8 + i bits of 0x7777: all accept tag 0x7777. */
	for (i = 0; i < N; i++) {
		b[i] = guarded(64);
		add(0x7777, (1ULL << (8 + i)) - 1, b[i], 64, 100 + i);
	}
	for (i = 0; i < N; i++) {
		eager(0, 0x7777, 0, 8, 20 + i);
		sh_flush(&env);
		n = sh_poll(env.b.cq, &wc);
		if (n != 1 || wc.wr_id != (uint64_t)(100 + i))
			ok = 0;
	}
	tap_check(ok, "%d entries with %d distinct masks are taken in list order",
		  N, N);
	sh_env_close(&env);
}

static void test_unexpected_notag_malformed(void)
{
	struct softhca_stats st0, st;
	struct ibv_tmh tmh;
	struct sh_wc wc;
	char *pb, *tb, msg[128];
	int n;

	open_env(0, 1);
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

	/* NO_TAG with the tag of an active entry: not matched, not counted. */
	tb = guarded(64);
	add(0x42, ALL, tb, 64, 42);
	st0 = sh_stats(&env.b);
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

	eager(0, 0x42, 0x7, 10, 21);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.wr_id == 42 && (wc.wc_flags & MD) == MD && sh_check(tb, 10, 21),
		  "after NO_TAG, FIN and malformed messages the entry still matches (%s)",
		  sh_wc_str(&wc));
	sh_env_close(&env);
}

static void test_truncation(void)
{
	struct sh_wc wc[4];
	char *b;
	int n;

	/* the lenient model's tagged LOC_LEN_ERR; mlx5 (strict, the default)
	 * has none: test_mlx5_rules pins its shape */
	open_env_mode(0, 1, 0);
	/* Payload exactly the buffer's size: no truncation. */
	b = guarded(40);
	add(0x79, ALL, b, 40, 69);
	eager(0, 0x79, 0, 40, 29);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].byte_len == 40 &&
		  sh_check(b, 40, 29) && sh_all(b + 40, 64, 0xEE),
		  "eager payload exactly the tagged buffer's size: SUCCESS, byte_len 40 (%s)",
		  sh_wc_str(&wc[0]));
	b = guarded(40);
	add(0x7a, ALL, b, 40, 70);
	eager(0, 0x7a, 0, 100, 30);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 1 && wc[0].status == IBV_WC_LOC_LEN_ERR && wc[0].wr_id == 70,
		  "eager 100 B into a 40 B buffer: one completion, IBV_WC_LOC_LEN_ERR (n=%d %s)",
		  n, sh_wc_str(&wc[0]));
	tap_check(n >= 1 && wc[0].byte_len == 100,
		  "truncated: byte_len is the full payload length (%u)", wc[0].byte_len);
	tap_check(sh_check(b, 40, 30) && sh_all(b + 40, 64, 0xEE),
		  "truncated: exactly 40 bytes written, guard bytes untouched");
	plain(700, 256);
	eager(0, 0x7a, 0, 10, 31);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc[0]);
	tap_check(n == 1 && wc[0].wr_id == 700 && is_unexpected(&wc[0]),
		  "the truncated entry was consumed: the next message is unexpected");
	resync();

	/* Multi-packet truncation. */
	b = guarded(300);
	add(0x7b, ALL, b, 300, 71);
	eager(0, 0x7b, 0, 1000, 32);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && wc[0].wr_id == 71 && wc[0].status == IBV_WC_SUCCESS &&
		  (wc[0].wc_flags & MD) == IBV_WC_TM_MATCH && wc[1].wr_id == 71 &&
		  wc[1].status == IBV_WC_LOC_LEN_ERR && wc[1].byte_len == 1000,
		  "eager 1000 B (multi-packet) into 300 B: MATCH, then LOC_LEN_ERR byte_len 1000 (n=%d %s / %s)",
		  n, sh_wc_str(&wc[0]), sh_wc_str(&wc[1]));
	tap_check(sh_check(b, 300, 32) && sh_all(b + 300, 64, 0xEE),
		  "multi-packet truncation: exactly 300 bytes written, guard untouched");
	sh_env_close(&env);
}

/* Unexpected and NO_TAG messages longer than one MTU: one completion each. */
static void test_unexpected_multi(void)
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

static void test_multi_sge(void)
{
	struct ibv_sge sge[2];
	struct ibv_ops_wr wr, *bad = NULL;
	struct sh_wc wc;
	char *x, *y, *p;
	int ret, n;

	open_env(2, 1);
	x = guarded(20);
	y = guarded(30);
	sge[0] = (struct ibv_sge){ .addr = (uintptr_t)x, .length = 20, .lkey = env.b.mr->lkey };
	sge[1] = (struct ibv_sge){ .addr = (uintptr_t)y, .length = 30, .lkey = env.b.mr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.opcode = IBV_WR_TAG_ADD;
	wr.flags = IBV_OPS_SIGNALED;
	wr.tm.add.recv_wr_id = 80;
	wr.tm.add.sg_list = sge;
	wr.tm.add.num_sge = 2;
	wr.tm.add.tag = 0x2;
	wr.tm.add.mask = ALL;
	ret = ibv_post_srq_ops(env.b.srq, &wr, &bad);
	tap_check(ret == 0, "max_sge=2: ADD with two SGEs posts (%d)", ret);
	sh_flush(&env);
	sh_poll(env.b.cq, &wc);
	eager(0, 0x2, 0, 45, 40);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	p = malloc(45);
	sh_fill(p, 45, 40);
	tap_check(n == 1 && wc.wr_id == 80 && (wc.wc_flags & MD) == MD && wc.byte_len == 45 &&
		  !memcmp(x, p, 20) && !memcmp(y, p + 20, 25) && sh_all(x + 20, 64, 0xEE) &&
		  sh_all(y + 25, 30 + 64 - 25, 0xEE),
		  "payload scattered over two SGEs in order (%s)", sh_wc_str(&wc));
	free(p);
	sh_env_close(&env);
}

static void test_rnr(void)
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

static void test_decision_order(void)
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

int main(void)
{
	alarm(60);
	test_eager_single();
	test_eager_multi();
	test_tag_mask();
	test_many_masks();
	test_unexpected_notag_malformed();
	test_truncation();
	test_unexpected_multi();
	test_multi_sge();
	test_rnr();
	test_decision_order();
	return tap_done();
}
