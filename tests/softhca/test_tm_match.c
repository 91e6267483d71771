/*
 * test_tm_match.c - soft HCA: how arriving messages are classified and
 * delivered by the TM-SRQ: eager matches (single and multi packet), tag and
 * mask matching in list order, unexpected, NO_TAG / FIN, malformed messages,
 * eager truncation, multi-SGE tagged buffers, receiver-not-ready, and the
 * order of completions.  This file: main and the messages that match a
 * tagged entry; the rest and the shared steps: tm_match.h.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "tm_match.h"

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
