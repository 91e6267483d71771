/*
 * fastpath_plain.c - test_fastpath's plain-buffer part: the one-packet
 * unexpected path into a plain buffer (every completion field, the
 * length error), the SRQ's FIFO wrapping (reposted one at a time and in
 * chains), and a chain with a refused WR.  fastpath.h says what the
 * parts share.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "sh_util.h"
#include "fastpath.h"

/*
 * The one-packet unexpected path: a message no entry takes lands whole
 * (TMH included) in the next plain buffer, counted unexpected; a buffer
 * too short gets LOC_LEN_ERR, byte_len the message, and is filled to its
 * length only.
 */
void test_plain_one(void)
{
	struct softhca_config cfg;
	struct softhca_stats st;
	struct sh_wc wc[4];
	char p[64], *b1, *b2;
	int n;

	sh_config(&cfg);
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_AUTO, 1))
		tap_bail("sh_env_open");
	b1 = sh_alloc(&env.b, 128);
	b2 = sh_alloc(&env.b, 128);
	memset(b1, 0xEE, 128);
	memset(b2, 0xEE, 128);
	if (sh_post_plain(&env.b, 21, b1, 128) ||
	    sh_post_plain(&env.b, 22, b2, 24))
		tap_bail("plain");
	sh_fill(p, 40, 5);
	if (sh_send_tm(&env, 0, IBV_TMH_EAGER, 90, 5, p, 40, 1))
		tap_bail("send");
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 1 && wc[0].status == IBV_WC_SUCCESS &&
		  wc[0].opcode == IBV_WC_TM_RECV && wc[0].wc_flags == 0 &&
		  wc[0].wr_id == 21 && wc[0].byte_len == 16 + 40 &&
		  wc[0].qp_num == env.p[0].rqp->qp_num &&
		  sh_check(b1 + 16, 40, 5) && sh_all(b1 + 56, 72, 0xEE),
		  "one-packet unexpected: the whole message in the plain "
		  "buffer, every field (%s)", n ? sh_wc_str(&wc[0]) : "none");
	sh_fill(p, 40, 6);
	if (sh_send_tm(&env, 0, IBV_TMH_EAGER, 91, 6, p, 40, 2))
		tap_bail("send");
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 1 && wc[0].status == IBV_WC_LOC_LEN_ERR &&
		  wc[0].wr_id == 22 && wc[0].byte_len == 16 + 40 &&
		  sh_check(b2 + 16, 8, 6) && sh_all(b2 + 24, 104, 0xEE),
		  "plain buffer too short: LOC_LEN_ERR, byte_len the message, "
		  "the buffer filled to its length only (%s)",
		  n ? sh_wc_str(&wc[0]) : "none");
	if (softhca_query_stats(env.b.ctx, &st))
		tap_bail("query_stats");
	tap_check(st.unexpected == 2 && st.hw_unexpected_cnt == 2,
		  "both counted unexpected by the card (%llu, count %u)",
		  (unsigned long long)st.unexpected, st.hw_unexpected_cnt);

	/* no plain buffer left: the next one waits in its ring; the buffer
	 * posted later takes it at the next poll (a post runs no card) */
	sh_fill(p, 8, 7);
	if (sh_send_tm(&env, 0, IBV_TMH_EAGER, 92, 7, p, 8, 3))
		tap_bail("send");
	n = sh_poll_all(env.b.cq, wc, 4);
	if (softhca_query_stats(env.b.ctx, &st))
		tap_bail("query_stats");
	tap_check(n == 0 && st.rnr_waits == 1,
		  "no plain buffer: the message waits (%d completions, "
		  "rnr_waits %llu)", n, (unsigned long long)st.rnr_waits);
	b1 = sh_alloc(&env.b, 64);
	if (sh_post_plain(&env.b, 23, b1, 64))
		tap_bail("plain");
	n = 0;
	for (int i = 0; i < 1000 && !n; i++)
		n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 1 && wc[0].status == IBV_WC_SUCCESS &&
		  wc[0].wr_id == 23 && sh_check(b1 + 16, 8, 7),
		  "a buffer posted later takes it at the next polls (%s)",
		  n ? sh_wc_str(&wc[0]) : "none");
	sh_env_close(&env);
}

/*
 * The plain-buffer FIFO wraps: three buffers kept posted and reposted as
 * each is consumed, for more than two laps of the SRQ's 4096 entries;
 * every message lands in the buffer posted for it, in post order.
 */
void test_plain_wrap(void)
{
	enum { KEEP = 3, MSGS = 2 * 4096 + 100 };
	struct softhca_config cfg;
	struct sh_wc wc;
	char p[8], *buf[KEEP];
	int bad = -1, i, n;

	sh_config(&cfg);
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_AUTO, 1))
		tap_bail("sh_env_open");
	for (i = 0; i < KEEP; i++) {
		buf[i] = sh_alloc(&env.b, 64);
		if (sh_post_plain(&env.b, 1000 + i, buf[i], 64))
			tap_bail("plain");
	}
	for (i = 0; i < MSGS && bad < 0; i++) {
		sh_fill(p, 8, (uint32_t)i);
		if (sh_send_tm(&env, 0, IBV_TMH_EAGER, 7, 0, p, 8, 1))
			tap_bail("send");
		n = 0;
		for (int k = 0; k < 1000 && !n; k++)
			n = sh_poll(env.b.cq, &wc);
		/* the buffers come back in post order: i's is i % KEEP */
		if (n != 1 || wc.status != IBV_WC_SUCCESS ||
		    wc.wr_id != 1000 + (uint64_t)i ||
		    !sh_check(buf[i % KEEP] + 16, 8, (uint32_t)i))
			bad = i;
		else if (sh_post_plain(&env.b, 1000 + i + KEEP,
				       buf[i % KEEP], 64))
			tap_bail("repost");
		sh_cq_discard(env.a.cq);
	}
	tap_check(bad < 0, "%d messages through 3 reposted plain buffers (two "
		  "laps of the SRQ): each in its buffer, in post order (first "
		  "wrong: %d)", MSGS, bad);
	sh_env_close(&env);
}

/*
 * Plain buffers posted in chains (one ibv_post_srq_recv for several, as
 * the engine reposts them) wrap the FIFO inside a chain: chains of 7 into
 * the SRQ's 4096 entries, for more than a lap; every message lands in the
 * buffer posted for it, in post order.
 */
void test_plain_wrap_chain(void)
{
	enum { CHAIN = 7, MSGS = 4096 + 10 * CHAIN };
	struct ibv_recv_wr wr[CHAIN], *bad;
	struct ibv_sge sge[CHAIN];
	struct softhca_config cfg;
	struct sh_wc wc;
	char p[8], *buf[CHAIN];
	int bad_at = -1, i, n;

	sh_config(&cfg);
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_AUTO, 1))
		tap_bail("sh_env_open");
	for (i = 0; i < CHAIN; i++)
		buf[i] = sh_alloc(&env.b, 64);
	for (i = 0; i < MSGS && bad_at < 0; i++) {
		if (!(i % CHAIN)) {
			/* the next chain, wr_id 2000 + its message */
			for (int k = 0; k < CHAIN; k++) {
				sge[k] = (struct ibv_sge){
					.addr = (uintptr_t)buf[k], .length = 64,
					.lkey = env.b.mr->lkey };
				wr[k] = (struct ibv_recv_wr){
					.wr_id = 2000 + (uint64_t)(i + k),
					.next = k + 1 < CHAIN ? &wr[k + 1] : NULL,
					.sg_list = &sge[k], .num_sge = 1 };
			}
			bad = NULL;
			if (ibv_post_srq_recv(env.b.srq, wr, &bad))
				tap_bail("plain chain");
		}
		sh_fill(p, 8, (uint32_t)i);
		if (sh_send_tm(&env, 0, IBV_TMH_EAGER, 7, 0, p, 8, 1))
			tap_bail("send");
		n = 0;
		for (int k = 0; k < 1000 && !n; k++)
			n = sh_poll(env.b.cq, &wc);
		if (n != 1 || wc.status != IBV_WC_SUCCESS ||
		    wc.wr_id != 2000 + (uint64_t)i ||
		    !sh_check(buf[i % CHAIN] + 16, 8, (uint32_t)i))
			bad_at = i;
		sh_cq_discard(env.a.cq);
	}
	tap_check(bad_at < 0, "%d messages through chains of %d plain buffers "
		  "(a chain crosses the end of the SRQ's 4096): each in its "
		  "buffer, in post order (first wrong: %d)", MSGS, CHAIN,
		  bad_at);
	sh_env_close(&env);
}

/*
 * A chain with a refused WR (num_sge negative, or past the SRQ's
 * max_sge): EINVAL, *bad names it, and the WRs before it stay posted, as
 * on mlx5 (doc/mlx5-rules.md rule 23); nothing of it or after it is.
 */
void test_plain_refused(void)
{
	struct ibv_recv_wr wr[3], *bad;
	struct ibv_sge sge[3];
	struct softhca_config cfg;
	struct sh_wc wc;
	char p[8], *buf[3];
	int ret[2], n, first, later = 0;

	sh_config(&cfg);
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_AUTO, 1))
		tap_bail("sh_env_open");
	for (int k = 0; k < 3; k++) {
		buf[k] = sh_alloc(&env.b, 64);
		sge[k] = (struct ibv_sge){ .addr = (uintptr_t)buf[k],
					   .length = 64,
					   .lkey = env.b.mr->lkey };
		wr[k] = (struct ibv_recv_wr){
			.wr_id = 3000 + (uint64_t)k,
			.next = k + 1 < 3 ? &wr[k + 1] : NULL,
			.sg_list = &sge[k], .num_sge = 1 };
	}
	for (int t = 0; t < 2; t++) {
		/* the SRQ has max_sge 1 (sh_util.c); the second time the
		 * first WR names the third buffer */
		wr[1].num_sge = t ? 2 : -1;
		wr[0].wr_id = 3000 + 10 * (uint64_t)t;
		sge[0].addr = (uintptr_t)buf[2 * t];
		bad = NULL;
		ret[t] = ibv_post_srq_recv(env.b.srq, wr, &bad);
		ret[t] = ret[t] == EINVAL && bad == &wr[1];
	}
	/* two messages for the two buffers before the refused WRs, a third
	 * that waits: no buffer of the rest was posted */
	for (int i = 0; i < 3; i++) {
		sh_fill(p, 8, (uint32_t)i);
		if (sh_send_tm(&env, 0, IBV_TMH_EAGER, 7, 0, p, 8, 1))
			tap_bail("send");
	}
	n = 0;
	for (int k = 0; k < 1000 && n < 2; k++)
		if (sh_poll(env.b.cq, &wc) == 1)
			n += wc.status == IBV_WC_SUCCESS &&
			     wc.wr_id == 3000 + 10 * (uint64_t)n &&
			     sh_check(buf[2 * n] + 16, 8, (uint32_t)n);
	first = n;
	for (int k = 0; k < 100; k++)
		later += sh_poll(env.b.cq, &wc);
	tap_check(ret[0] && ret[1] && first == 2 && !later,
		  "a chain whose second WR has num_sge -1, then 2 (max_sge "
		  "1): EINVAL at it both times (%d, %d), the first WR posted "
		  "each time (%d of 2 messages in it), the rest not (%d "
		  "more taken)", ret[0], ret[1], first, later);
	sh_env_close(&env);
}
