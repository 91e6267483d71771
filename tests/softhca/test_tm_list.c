/*
 * test_tm_list.c - soft HCA: TM-SRQ list operations (ADD / DEL / SYNC),
 * handles, signalled vs unsignalled, max_num_tags, max_ops, max_sge.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "sh_util.h"

#define ALL ~0ULL

static struct sh_env env;

static void open_env(uint32_t max_num_tags, uint32_t max_ops, uint32_t max_sge)
{
	struct softhca_config cfg;

	sh_config(&cfg);
	if (max_num_tags)
		cfg.max_num_tags = max_num_tags;
	if (max_ops)
		cfg.max_ops = max_ops;
	if (max_sge)
		cfg.max_sge = max_sge;
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_MANUAL, 1))
		tap_bail("sh_env_open failed");
}

static void close_env(void)
{
	sh_env_close(&env);
}

static void send_eager(uint64_t tag, const char *text, uint64_t wr_id)
{
	if (sh_send_tm(&env, 0, IBV_TMH_EAGER, tag, 0xabc, text,
		       (uint32_t)strlen(text), wr_id))
		tap_bail("send failed");
}

static void post_plains(int n, uint64_t wr_id0)
{
	int i;

	for (i = 0; i < n; i++)
		if (sh_post_plain(&env.b, wr_id0 + i, sh_alloc(&env.b, 256), 256))
			tap_bail("post plain");
}

static void fill_add(struct ibv_ops_wr *wr, struct ibv_sge *sge, void *buf,
		     uint32_t len, uint64_t wr_id, uint64_t tag, int flags)
{
	memset(wr, 0, sizeof(*wr));
	sge->addr = (uintptr_t)buf;
	sge->length = len;
	sge->lkey = env.b.mr->lkey;
	wr->wr_id = wr_id;
	wr->opcode = IBV_WR_TAG_ADD;
	wr->flags = flags;
	wr->tm.add.recv_wr_id = wr_id + 1000;
	wr->tm.add.sg_list = sge;
	wr->tm.add.num_sge = 1;
	wr->tm.add.tag = tag;
	wr->tm.add.mask = ALL;
	wr->tm.handle = 0xdeadbeef;
}

static void test_basic_ops(void)
{
	struct ibv_ops_wr w1, w2, w3, *bad;
	struct ibv_sge s1, s2, s3[2];
	struct softhca_stats st;
	struct sh_wc wc;
	char *b1, *b2, *b3;
	uint32_t h;
	int ret, n;

	open_env(0, 0, 0);
	b1 = sh_alloc(&env.b, 64);
	b2 = sh_alloc(&env.b, 64);
	b3 = sh_alloc(&env.b, 64);

	/* Two ADDs in one chain; handles come back at post time. */
	fill_add(&w1, &s1, b1, 64, 1, 0x11, IBV_OPS_SIGNALED);
	fill_add(&w2, &s2, b2, 64, 2, 0x22, 0);
	w1.next = &w2;
	bad = NULL;
	ret = ibv_post_srq_ops(env.b.srq, &w1, &bad);
	tap_check(ret == 0, "ibv_post_srq_ops(ADD->ADD chain) returns 0 (%d)", ret);
	tap_check(w1.tm.handle != 0xdeadbeef && w2.tm.handle != 0xdeadbeef &&
		  w1.tm.handle != w2.tm.handle,
		  "each ADD gets its own handle at post time (%u, %u)", w1.tm.handle,
		  w2.tm.handle);
	tap_check(sh_poll(env.b.cq, &wc) == 0,
		  "MANUAL mode: no completion before the card processes the op");
	tap_check(sh_step_op(&env.b) == 1 && sh_step_op(&env.b) == 1 &&
		  sh_step_op(&env.b) == 0,
		  "softhca_step(OP) processes the two ADDs one at a time, then reports none");
	n = 0;
	while (sh_poll(env.b.cq, &wc) == 1) {
		n++;
		tap_check(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_TM_ADD &&
			  wc.wr_id == 1 && !(wc.wc_flags & IBV_WC_TM_SYNC_REQ),
			  "signalled ADD completes IBV_WC_TM_ADD SUCCESS wr_id=1, no SYNC_REQ (%s)",
			  sh_wc_str(&wc));
	}
	tap_check(n == 1, "only the signalled ADD completes (%d completions)", n);
	st = sh_stats(&env.b);
	tap_check(st.list_entries == 2 && st.list_inactive == 0,
		  "stats: 2 active entries on the list (%u, %u inactive)",
		  st.list_entries, st.list_inactive);

	/* SYNC, signalled. */
	ret = sh_sync(&env.b, 5, 0, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC);
	sh_flush(&env);
	ret = ret ? -1 : sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_TM_SYNC &&
		  wc.wr_id == 5 && !(wc.wc_flags & IBV_WC_TM_SYNC_REQ),
		  "signalled SYNC completes IBV_WC_TM_SYNC SUCCESS (%s)", sh_wc_str(&wc));

	/* DEL of an active entry. */
	ret = sh_del(&env.b, 6, w2.tm.handle, 0, IBV_OPS_SIGNALED);
	sh_flush(&env);
	ret = ret ? -1 : sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_TM_DEL &&
		  wc.wr_id == 6,
		  "DEL of an active entry completes IBV_WC_TM_DEL SUCCESS (%s)", sh_wc_str(&wc));
	st = sh_stats(&env.b);
	tap_check(st.list_entries == 1, "stats: one entry left after DEL (%u)", st.list_entries);
	post_plains(1, 50);
	send_eager(0x22, "deleted", 900);
	sh_flush(&env);
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.opcode == IBV_WC_TM_RECV && wc.wr_id == 50 &&
		  !(wc.wc_flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)),
		  "a message for the deleted entry's tag goes unexpected (%s)", sh_wc_str(&wc));
	sh_sync(&env.b, 7, 1, IBV_OPS_TM_SYNC | IBV_OPS_SIGNALED);
	sh_flush(&env);
	sh_poll(env.b.cq, &wc);

	/* DEL of a consumed entry (its completion not yet polled). */
	send_eager(0x11, "consume", 901);
	sh_flush(&env);
	ret = sh_del(&env.b, 8, w1.tm.handle, 1, IBV_OPS_SIGNALED);
	tap_check(ret == 0, "posting DEL of a consumed (unpolled) entry succeeds (%d)", ret);
	sh_flush(&env);
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.wr_id == 1001 && (wc.wc_flags & IBV_WC_TM_MATCH),
		  "entry 1 consumed by a matching message (%s)", sh_wc_str(&wc));
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.status == IBV_WC_TM_ERR && wc.wr_id == 8,
		  "DEL of a consumed entry completes with IBV_WC_TM_ERR (%s)", sh_wc_str(&wc));
	tap_check(ret == 1 && wc.opcode == IBV_WC_TM_DEL,
		  "...and its opcode is IBV_WC_TM_DEL (0x%x)", wc.opcode);

	/* Unsignalled ops: nothing at all on the CQ. */
	ret = sh_add(&env.b, 9, 19, b3, 64, 0x33, ALL, 1, 0, &h);
	ret |= sh_sync(&env.b, 10, 1, IBV_OPS_TM_SYNC);
	ret |= sh_del(&env.b, 11, h, 1, 0);
	sh_flush(&env);
	tap_check(ret == 0 && sh_poll(env.b.cq, &wc) == 0,
		  "unsignalled ADD, SYNC and DEL produce no completion");
	st = sh_stats(&env.b);
	tap_check(st.list_entries == 0, "...but were done: the list is empty (%u)", st.list_entries);

	/* max_sge = 1: two SGEs fail EINVAL; earlier WRs of the chain stand. */
	fill_add(&w1, &s1, b1, 64, 20, 0x44, 0);
	fill_add(&w3, &s3[0], b3, 32, 21, 0x55, 0);
	s3[1] = s3[0];
	s3[1].addr += 32;
	w3.tm.add.num_sge = 2;
	w1.next = &w3;
	bad = NULL;
	ret = ibv_post_srq_ops(env.b.srq, &w1, &bad);
	tap_check(ret == EINVAL && bad == &w3,
		  "ADD with 2 SGEs (max_sge 1) fails EINVAL with bad_wr at it (%d)", ret);
	sh_flush(&env);
	post_plains(1, 60);
	send_eager(0x44, "first of chain", 902);
	sh_flush(&env);
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.wr_id == 1020 &&
		  (wc.wc_flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)) ==
		  (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID),
		  "the ADD before the failed one in the chain was posted and matches (%s)",
		  sh_wc_str(&wc));
	close_env();
}

/* DEL racing with a message that consumes the entry (MANUAL order). */
static void test_del_race(void)
{
	struct softhca_stats st;
	struct sh_wc wc[4];
	char *b = NULL;
	uint32_t h;
	int ret, n;

	open_env(0, 0, 0);
	b = sh_alloc(&env.b, 64);
	memset(b, 0xEE, 64);
	sh_add(&env.b, 1, 101, b, 64, 0x7, ALL, 0, IBV_OPS_SIGNALED, &h);
	sh_flush(&env);
	sh_poll(env.b.cq, wc);

	ret = sh_del(&env.b, 2, h, 0, IBV_OPS_SIGNALED);
	send_eager(0x7, "race", 900);
	tap_check(ret == 0 && sh_step_msg(&env, 0), "message processed before the DEL");
	tap_check(sh_step_op(&env.b) == 1, "then the DEL is processed");
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && wc[0].wr_id == 101 && wc[0].opcode == IBV_WC_TM_RECV &&
		  (wc[0].wc_flags & IBV_WC_TM_MATCH) && wc[1].wr_id == 2 &&
		  wc[1].status == IBV_WC_TM_ERR,
		  "message matched first, DEL then fails IBV_WC_TM_ERR, in that order (n=%d %s / %s)",
		  n, sh_wc_str(&wc[0]), sh_wc_str(&wc[1]));
	tap_check(!memcmp(b, "race", 4), "the data went to the tagged buffer");

	/* The other way round: DEL first, then the message is unexpected. */
	sh_add(&env.b, 3, 103, b, 64, 0x8, ALL, 0, IBV_OPS_SIGNALED, &h);
	sh_flush(&env);
	sh_poll(env.b.cq, wc);
	post_plains(1, 70);
	ret = sh_del(&env.b, 4, h, 0, IBV_OPS_SIGNALED);
	send_eager(0x8, "late", 901);
	tap_check(ret == 0 && sh_step_op(&env.b) == 1 && sh_step_msg(&env, 0),
		  "DEL processed before the message");
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && wc[0].wr_id == 4 && wc[0].status == IBV_WC_SUCCESS &&
		  wc[0].opcode == IBV_WC_TM_DEL && wc[1].wr_id == 70 &&
		  wc[1].opcode == IBV_WC_TM_RECV &&
		  !(wc[1].wc_flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)),
		  "DEL succeeds, then the message goes unexpected (n=%d %s / %s)",
		  n, sh_wc_str(&wc[0]), sh_wc_str(&wc[1]));
	st = sh_stats(&env.b);
	tap_check(st.unexpected == 1 && st.matched == 1,
		  "stats: 1 matched, 1 unexpected (%llu, %llu)",
		  (unsigned long long)st.matched, (unsigned long long)st.unexpected);
	close_env();
}

static void test_max_num_tags(void)
{
	struct ibv_ops_wr w1, w2, *bad;
	struct ibv_sge s1, s2;
	struct sh_wc wc;
	char *b1, *b2;
	uint32_t h;
	int ret;

	open_env(1, 0, 0);
	b1 = sh_alloc(&env.b, 64);
	b2 = sh_alloc(&env.b, 64);
	fill_add(&w1, &s1, b1, 64, 1, 0x1, IBV_OPS_SIGNALED);
	fill_add(&w2, &s2, b2, 64, 2, 0x2, IBV_OPS_SIGNALED);
	bad = NULL;
	ret = ibv_post_srq_ops(env.b.srq, &w1, &bad);
	tap_check(ret == 0, "max_num_tags=1: first ADD posts (%d)", ret);
	bad = NULL;
	ret = ibv_post_srq_ops(env.b.srq, &w2, &bad);
	tap_check(ret == ENOMEM && bad == &w2,
		  "max_num_tags=1: second ADD fails ENOMEM with bad_wr set (%d)", ret);
	sh_flush(&env);
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.opcode == IBV_WC_TM_ADD && wc.wr_id == 1 &&
		  wc.status == IBV_WC_SUCCESS, "first ADD completes (%s)", sh_wc_str(&wc));
	tap_check(sh_poll(env.b.cq, &wc) == 0, "the rejected ADD leaves no completion");
	bad = NULL;
	ret = ibv_post_srq_ops(env.b.srq, &w2, &bad);
	tap_check(ret == ENOMEM, "still ENOMEM while the entry is on the list (%d)", ret);

	send_eager(0x1, "take it", 900);
	sh_flush(&env);
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.wr_id == 1001 && (wc.wc_flags & IBV_WC_TM_MATCH),
		  "a message consumes the entry (%s)", sh_wc_str(&wc));
	ret = sh_add(&env.b, 3, 1003, b2, 64, 0x2, ALL, 0, IBV_OPS_SIGNALED, &h);
	tap_check(ret == 0, "after consumption + poll an ADD succeeds again (%d)", ret);
	sh_flush(&env);
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.wr_id == 3 && wc.status == IBV_WC_SUCCESS,
		  "...and completes SUCCESS (%s)", sh_wc_str(&wc));
	send_eager(0x2, "second", 901);
	sh_flush(&env);
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.wr_id == 1003 && (wc.wc_flags & IBV_WC_TM_MATCH) &&
		  !memcmp(b2, "second", 6),
		  "...and its entry matches (%s)", sh_wc_str(&wc));

	/* DEL frees the slot too (after its completion is polled). */
	ret = sh_add(&env.b, 4, 1004, b1, 64, 0x4, ALL, 0, IBV_OPS_SIGNALED, &h);
	sh_flush(&env);
	sh_poll(env.b.cq, &wc);
	ret |= sh_del(&env.b, 5, h, 0, IBV_OPS_SIGNALED);
	sh_flush(&env);
	sh_poll(env.b.cq, &wc);
	tap_check(ret == 0 && wc.wr_id == 5 && wc.status == IBV_WC_SUCCESS,
		  "ADD then DEL with max_num_tags=1 (%s)", sh_wc_str(&wc));
	ret = sh_add(&env.b, 6, 1006, b1, 64, 0x6, ALL, 0, IBV_OPS_SIGNALED, &h);
	tap_check(ret == 0, "after DEL completion is polled, ADD succeeds (%d)", ret);
	close_env();
}

/* A handle must not come back while its entry's final completion is unpolled. */
static void test_handle_reuse(void)
{
	uint32_t h1, h[3];
	struct sh_wc wc;
	char *b;
	int ret, i, distinct = 1;

	open_env(4, 0, 0);
	b = sh_alloc(&env.b, 64 * 4);
	ret = sh_add(&env.b, 1, 1001, b, 64, 0x1, ALL, 0, IBV_OPS_SIGNALED, &h1);
	sh_flush(&env);
	sh_poll(env.b.cq, &wc);
	send_eager(0x1, "gone", 900);
	sh_flush(&env);
	/* Entry consumed, its TM_RECV completion not polled yet. */
	for (i = 0; i < 3; i++) {
		ret |= sh_add(&env.b, 2 + i, 1002 + i, b + 64 * (i + 1), 64, 0x10 + i,
			      ALL, 0, IBV_OPS_SIGNALED, &h[i]);
		distinct &= h[i] != h1;
	}
	tap_check(ret == 0 && distinct && h[0] != h[1] && h[1] != h[2] && h[0] != h[2],
		  "handle of a consumed entry is not reused before its completion is polled "
		  "(h1=%u new %u %u %u)", h1, h[0], h[1], h[2]);
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.wr_id == 1001, "the consumed entry's completion comes first");
	close_env();
}

static void test_max_ops(void)
{
	struct softhca_stats st;
	struct ibv_ops_wr w[3], *bad;
	struct ibv_sge s[3];
	struct sh_wc wc;
	char *b;
	uint32_t h;
	int ret;

	/* max_ops = 1 */
	open_env(0, 1, 0);
	b = sh_alloc(&env.b, 64 * 4);
	ret = sh_add(&env.b, 1, 1001, b, 64, 0x1, ALL, 0, IBV_OPS_SIGNALED, &h);
	tap_check(ret == 0, "max_ops=1: a signalled ADD posts (%d)", ret);
	fill_add(&w[0], &s[0], b + 64, 64, 2, 0x2, 0);
	bad = NULL;
	ret = ibv_post_srq_ops(env.b.srq, &w[0], &bad);
	tap_check(ret == ENOMEM && bad == &w[0],
		  "max_ops=1: a second (unsignalled) op fails ENOMEM with bad_wr (%d)", ret);
	ret = sh_sync(&env.b, 3, 0, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC);
	tap_check(ret == ENOMEM, "max_ops=1: a SYNC fails ENOMEM too (%d)", ret);
	sh_flush(&env);
	ret = sh_sync(&env.b, 3, 0, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC);
	tap_check(ret == ENOMEM,
		  "processed but not polled: the op is still outstanding (%d)", ret);
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.wr_id == 1 && wc.opcode == IBV_WC_TM_ADD, "ADD completion polled");
	ret = sh_sync(&env.b, 4, 0, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC);
	tap_check(ret == 0, "after the signalled op is polled, an op posts again (%d)", ret);
	sh_flush(&env);
	sh_poll(env.b.cq, &wc);
	close_env();

	/* max_ops = 2: an unsignalled op is outstanding until a later
	 * signalled op is polled. */
	open_env(0, 2, 0);
	b = sh_alloc(&env.b, 64 * 4);
	ret = sh_add(&env.b, 10, 1010, b, 64, 0x10, ALL, 0, 0, &h);
	ret |= sh_add(&env.b, 11, 1011, b + 64, 64, 0x11, ALL, 0, 0, &h);
	tap_check(ret == 0, "max_ops=2: two unsignalled ADDs post");
	ret = sh_add(&env.b, 12, 1012, b + 128, 64, 0x12, ALL, 0, IBV_OPS_SIGNALED, &h);
	tap_check(ret == ENOMEM, "max_ops=2: a third op fails ENOMEM (%d)", ret);
	sh_flush(&env);
	st = sh_stats(&env.b);
	tap_check(st.ops_outstanding == 2 && st.list_entries == 2,
		  "processed unsignalled ops stay outstanding (ops_outstanding %u, entries %u)",
		  st.ops_outstanding, st.list_entries);
	ret = sh_add(&env.b, 12, 1012, b + 128, 64, 0x12, ALL, 0, IBV_OPS_SIGNALED, &h);
	tap_check(ret == ENOMEM, "...so a further op still fails ENOMEM (%d)", ret);
	close_env();

	open_env(0, 2, 0);
	b = sh_alloc(&env.b, 64 * 4);
	ret = sh_add(&env.b, 20, 1020, b, 64, 0x20, ALL, 0, 0, &h);
	ret |= sh_sync(&env.b, 21, 0, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC);
	tap_check(ret == 0, "max_ops=2: unsignalled ADD + signalled SYNC post");
	ret = sh_sync(&env.b, 22, 0, IBV_OPS_TM_SYNC);
	tap_check(ret == ENOMEM, "third op fails ENOMEM (%d)", ret);
	sh_flush(&env);
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.wr_id == 21 && wc.opcode == IBV_WC_TM_SYNC,
		  "only the SYNC completes (%s)", sh_wc_str(&wc));
	st = sh_stats(&env.b);
	tap_check(st.ops_outstanding == 0,
		  "polling the signalled op retires it and the unsignalled op before it (%u)",
		  st.ops_outstanding);
	fill_add(&w[0], &s[0], b + 64, 64, 23, 0x23, 0);
	fill_add(&w[1], &s[1], b + 128, 64, 24, 0x24, IBV_OPS_SIGNALED);
	fill_add(&w[2], &s[2], b + 192, 64, 25, 0x25, 0);
	w[0].next = &w[1];
	w[1].next = &w[2];
	bad = NULL;
	ret = ibv_post_srq_ops(env.b.srq, &w[0], &bad);
	tap_check(ret == ENOMEM && bad == &w[2],
		  "a chain of 3 with max_ops=2: ENOMEM at the third (%d, bad=%s)", ret,
		  bad == &w[2] ? "w2" : bad == &w[1] ? "w1" : bad == &w[0] ? "w0" : "?");
	sh_flush(&env);
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.wr_id == 24 && sh_poll(env.b.cq, &wc) == 0,
		  "the two posted ops of the chain were done (%s)", sh_wc_str(&wc));
	close_env();
}

int main(void)
{
	alarm(60);
	test_basic_ops();
	test_del_race();
	test_max_num_tags();
	test_handle_reuse();
	test_max_ops();
	return tap_done();
}
