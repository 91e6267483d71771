/*
 * test_notm.c - the engine on a device without tag matching (tm_dev.h,
 * "Provider and mode"; the soft HCA with no_tm, as a ConnectX-4 or
 * rdma_rxe): a plain SRQ, one QP per peer, every message matched in
 * software and every rendezvous read by the receiving engine.
 *
 * Checked: the device opens in the plain mode (no tag list, no rx QP) and
 * refuses to open with tag matching required; eager, zero-byte, rendezvous
 * and synchronous messages, any-source, probe and truncation, all with no
 * list op, no sync, nothing on a card; more unexpected messages than the
 * count a card would need reported (TM_SYNC_LAG_MAX) without a sync; what
 * a card would refuse (too short for a TMH or RVH, an unknown opcode)
 * counted malformed and dropped, traffic going on; and a QP moved to the
 * error state (its WRs flushed, IBV_WC_WR_FLUSH_ERR): the send waiting on
 * that peer fails within the keepalive bound, the message it had sent
 * cannot be read and fails its receive, and the other peer goes on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tap.h"
#include "eng_util.h"
#include "engine/tm_wire.h"
#include "verbs/tm_verbs.h"

#define BIG (200u << 10)      /* rendezvous: above the 8 KiB eager limit */
#define MANY 8300u            /* > TM_SYNC_LAG_MAX (0x2000) unexpected */

static struct eu_world W;

static struct tm_engine_stats stats(int node)
{
	struct tm_engine_stats st;

	tm_engine_get_stats(W.node[node].eng, &st);
	return st;
}

static void irecv(struct eu_recv *t, int src, int tag, void *buf, size_t len)
{
	memset(t, 0, sizeof(*t));
	t->r.cb = eu_recv_cb;
	tm_engine_irecv(W.node[0].eng, &t->r, 1, src, tag, buf, len,
			W.node[0].mr);
}

/* node `from` -> node 0, tag, src = from */
static int isend(struct eu_send *t, int from, int tag, size_t off, size_t len,
		 unsigned flags)
{
	struct eu_node *nd = &W.node[from];

	memset(t, 0, sizeof(*t));
	t->s.cb = eu_send_cb;
	return tm_engine_isend(nd->eng, &t->s, nd->peer[0], 1, from, tag,
			       nd->arena + off, len, nd->mr, flags);
}

static void fill(int node, size_t off, size_t len, uint8_t seed)
{
	for (size_t i = 0; i < len; i++)
		W.node[node].arena[off + i] = (uint8_t)(seed + i * 13);
}

static int same(const uint8_t *p, size_t len, uint8_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)(seed + i * 13))
			return 0;
	return 1;
}

static void test_device(void)
{
	struct ibv_context *ctx = W.node[0].dev->ctx;
	struct ibv_srq_init_attr_ex sa = { 0 };
	struct ibv_device_attr_ex attr;
	struct tm_dev_config dc;
	struct tm_dev *dev = NULL;
	struct ibv_srq *srq;
	int rc;

	tap_check(!W.node[0].dev->tm && !W.node[0].dev->caps.max_num_tags &&
		  !W.node[0].dev->caps.max_ops && !W.node[0].qp[1].rx &&
		  W.node[0].qp[1].tx,
		  "plain mode: no tag list, no ops, one QP per peer (tm %d)",
		  W.node[0].dev->tm);
	/* the soft HCA as a card without tag matching, as mlx5 answers */
	memset(&attr, 0, sizeof(attr));
	ibv_query_device_ex(ctx, NULL, &attr);
	sa.attr.max_wr = 64;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = W.node[0].dev->pd;
	sa.cq = ibv_cq_ex_to_cq(W.node[0].dev->tm_cq);
	sa.tm_cap.max_num_tags = 1;
	sa.tm_cap.max_ops = 2;
	errno = 0;
	srq = ibv_create_srq_ex(ctx, &sa);
	tap_check(!attr.tm_caps.flags && !attr.tm_caps.max_num_tags &&
		  !attr.tm_caps.max_ops && !srq && errno == EINVAL,
		  "no_tm: tm_caps zero, a TM-SRQ refused with EINVAL (errno %d)",
		  errno);
	if (srq)
		W.node[0].dev->verbs->destroy_srq(srq);
	tm_dev_config_default(&dc);
	dc.provider = "soft";
	rc = tm_dev_open(&dc, &dev);
	tap_check(rc == TM_ERR_NO_DEVICE && tm_dev_open_why(),
		  "tag matching required: refused (%s: %s)", tm_status_str(rc),
		  tm_dev_open_why() ? tm_dev_open_why() : "no reason");
	if (rc == TM_OK)
		tm_dev_close(dev);
}

static void test_traffic(void)
{
	uint8_t *rb = W.node[0].arena;
	struct eu_recv r[4];
	struct eu_send s[4];
	struct tm_probe_info info;
	struct tm_engine_stats st;

	fill(1, 0, BIG, 1);
	fill(2, 0, BIG, 2);
	/* pre-posted: specific eager, any-source rendezvous */
	irecv(&r[0], 1, 10, rb, 100);
	irecv(&r[1], TM_ANY_SRC, 11, rb + 4096, BIG);
	isend(&s[0], 1, 10, 0, 100, 0);
	isend(&s[1], 2, 11, 0, BIG, TM_SEND_SYNC);
	/* unexpected: zero bytes, and a rendezvous truncated */
	isend(&s[2], 1, 12, 0, 0, 0);
	isend(&s[3], 2, 13, 0, BIG, 0);
	eu_pump(&W);
	tap_check(r[0].done == 1 && r[0].r.status == TM_REQ_OK &&
		  r[0].r.recv_len == 100 && same(rb, 100, 1) &&
		  r[1].done == 1 && r[1].r.status == TM_REQ_OK &&
		  r[1].r.env.src == 2 && r[1].r.recv_len == BIG &&
		  same(rb + 4096, BIG, 2),
		  "pre-posted eager and any-source rendezvous delivered");
	tap_check(tm_engine_iprobe(W.node[0].eng, 1, TM_ANY_SRC, 13, &info) ==
		  TM_OK && info.len == BIG && info.env.src == 2,
		  "probe sees the unexpected rendezvous (%llu bytes)",
		  (unsigned long long)info.len);
	irecv(&r[2], 1, 12, rb, 10);
	irecv(&r[3], 2, 13, rb + 4096, 1000);
	eu_pump(&W);
	tap_check(r[2].done == 1 && r[2].r.status == TM_REQ_OK &&
		  r[2].r.recv_len == 0 && r[3].done == 1 &&
		  r[3].r.status == TM_REQ_TRUNCATED &&
		  r[3].r.recv_len == 1000 && r[3].r.msg_len == BIG &&
		  same(rb + 4096, 1000, 2),
		  "unexpected zero-byte message, truncated rendezvous");
	tap_check(s[0].done && s[1].done && s[2].done && s[3].done &&
		  s[1].s.status == TM_REQ_OK && s[3].s.status == TM_REQ_OK,
		  "every send completes OK (the synchronous one on its ACK)");
	st = stats(0);
	tap_check(st.card_matched == 0 && st.recv_to_card == 0 &&
		  st.ops_posted == 0 && st.syncs == 0 && st.rndv_sw == 2 &&
		  st.sw_no_tm == 2 && st.sw_no_offload == 0 &&
		  st.sw_matched_uq == 2 &&
		  st.errors == 0 && !st.fatal,
		  "all in software: card matched %llu, to card %llu, ops %llu, syncs %llu, rendezvous read by software %llu, kept in software: no tag matching %llu, offload off %llu",
		  (unsigned long long)st.card_matched,
		  (unsigned long long)st.recv_to_card,
		  (unsigned long long)st.ops_posted,
		  (unsigned long long)st.syncs,
		  (unsigned long long)st.rndv_sw,
		  (unsigned long long)st.sw_no_tm,
		  (unsigned long long)st.sw_no_offload);
}

/* More unexpected arrivals than a card tolerates unreported: with no card
 * there is no count to report, so no SYNC (a plain SRQ refuses list ops:
 * the engine would stop). */
static void test_many(void)
{
	static struct eu_send s[64];
	struct tm_probe_info info;
	struct eu_recv r;
	uint32_t i, got = 0;
	struct tm_engine_stats st;

	for (i = 0; i < MANY; i++) {
		isend(&s[i % 64], 1, 20, 0, 4, 0);
		if (i % 64 == 63)
			eu_pump(&W);
		/* receive as they come, so the queue stays short */
		while (tm_engine_iprobe(W.node[0].eng, 1, 1, 20, &info) == TM_OK) {
			irecv(&r, 1, 20, W.node[0].arena, 4);
			eu_pump(&W);
			got += r.done == 1 && r.r.status == TM_REQ_OK;
		}
	}
	eu_pump(&W);
	while (got < MANY) {
		irecv(&r, 1, 20, W.node[0].arena, 4);
		eu_pump(&W);
		if (r.done != 1)
			break;
		got++;
	}
	st = stats(0);
	tap_check(got == MANY && st.syncs == 0 && st.ops_posted == 0 &&
		  st.ops_in_queue == 0 && !st.fatal && st.post_failures == 0 &&
		  eu_quiet(&W),
		  "%u unexpected messages received, no sync posted or queued, engine idle (fatal %d, ops queued %u)",
		  got, st.fatal, st.ops_in_queue);
}

/* A raw send of `len` bytes whose TMH opcode is op, on a QP of its own. */
static void raw_send(struct tm_dev_pair *qp, uint8_t op, uint32_t len)
{
	struct eu_node *nd = &W.node[1];
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	tmh_fill(nd->arena + BIG, op, 0, 7);
	sge.addr = (uintptr_t)(nd->arena + BIG);
	sge.length = len;
	sge.lkey = nd->mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ibv_post_send(qp->tx, &wr, &bad);
}

static void test_malformed(void)
{
	struct tm_dev_pair raw1 = { 0 }, raw0 = { 0 };
	struct tm_dev_pair_addr a;
	struct eu_recv r;
	struct eu_send s;
	uint64_t before = stats(0).malformed;

	if (tm_dev_pair_create(W.node[1].dev, &raw1) ||
	    tm_dev_pair_create(W.node[0].dev, &raw0))
		tap_bail("cannot create the raw QPs");
	tm_dev_pair_addr(W.node[0].dev, &raw0, &a);
	tm_dev_pair_connect(W.node[1].dev, &raw1, &a);
	tm_dev_pair_addr(W.node[1].dev, &raw1, &a);
	tm_dev_pair_connect(W.node[0].dev, &raw0, &a);
	raw_send(&raw1, IBV_TMH_EAGER, 8);          /* shorter than a TMH */
	raw_send(&raw1, 0x7f, TMH_LEN + 4);         /* no such opcode */
	raw_send(&raw1, IBV_TMH_RNDV, TMH_LEN + 4); /* no room for its RVH */
	eu_pump(&W);
	irecv(&r, 1, 30, W.node[0].arena, 64);
	fill(1, 0, 64, 3);
	isend(&s, 1, 30, 0, 64, 0);
	eu_pump(&W);
	tap_check(stats(0).malformed == before + 3 && r.done == 1 &&
		  r.r.status == TM_REQ_OK && same(W.node[0].arena, 64, 3) &&
		  stats(0).uq_len == 0,
		  "3 malformed arrivals counted (%llu) and dropped; traffic goes on",
		  (unsigned long long)(stats(0).malformed - before));
	tm_dev_pair_destroy(W.node[1].dev, &raw1);
	tm_dev_pair_destroy(W.node[0].dev, &raw0);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Card work and progress everywhere until done or `secs` passed. */
static double pump_until(volatile int *done, double secs)
{
	double t0 = now();

	while (!*done && now() - t0 < secs) {
		for (int i = 0; i < W.n; i++) {
			softhca_drain(W.node[i].dev->ctx);
			tm_engine_progress(W.node[i].eng);
		}
	}
	return now() - t0;
}

static void test_qp_error(void)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct eu_node *n2 = &W.node[2];
	struct eu_recv r, r1;
	struct eu_send s, s1;
	double t;

	/* a rendezvous nobody receives yet: node 2 waits for its FIN */
	isend(&s, 2, 40, 0, BIG, 0);
	eu_pump(&W);
	tap_check(!s.done && stats(0).uq_len == 1,
		  "node 2's rendezvous waits for its FIN");
	n2->dev->verbs->modify_qp(n2->qp[0].tx, &attr, IBV_QP_STATE);
	t = pump_until(&s.done, 5.0);
	tap_check(s.done == 1 && s.s.status == TM_REQ_ERROR &&
		  stats(2).peer_failures == 1,
		  "QP in error (WRs flushed): the waiting send fails in %.2f s (keepalive 50 ms)",
		  t);
	irecv(&r, 2, 40, W.node[0].arena, BIG);
	t = pump_until(&r.done, 5.0);
	tap_check(r.done == 1 && r.r.status == TM_REQ_ERROR,
		  "its message cannot be read: the receive fails in %.2f s (status %d)",
		  t, r.r.status);
	irecv(&r1, 1, 41, W.node[0].arena, 64);
	fill(1, 0, 64, 4);
	isend(&s1, 1, 41, 0, 64, TM_SEND_SYNC);
	pump_until(&s1.done, 5.0);
	eu_pump(&W);
	tap_check(r1.done == 1 && r1.r.status == TM_REQ_OK && s1.done == 1 &&
		  s1.s.status == TM_REQ_OK && same(W.node[0].arena, 64, 4),
		  "the other peer goes on (synchronous send and its receive OK)");
}

/* The other reason a receive stays in software: a card, offload off.
 * Each has its own counter (mtl_tm_sw_offload_off, sw_no_tag_matching). */
static void test_offload_off(void)
{
	struct eu_recv r[2];
	struct eu_send t[2];
	struct tm_engine_stats st;
	struct eu_opts o;
	int i;

	eu_opts_default(&o);
	o.ecfg.offload = 0;
	if (eu_world_init(&W, 2, &o))
		tap_bail("cannot open two soft HCA nodes");
	for (i = 0; i < 2; i++)
		irecv(&r[i], 1, 20 + i, W.node[0].arena + 4096 * (i + 1), 100);
	for (i = 0; i < 2; i++)
		isend(&t[i], 1, 20 + i, 0, 100, 0);
	eu_pump(&W);
	st = stats(0);
	tap_check(r[0].done && r[1].done && st.sw_no_offload == 2 &&
		  st.sw_no_tm == 0 && st.recv_to_card == 0,
		  "a card with offload off: receives counted as offload off "
		  "(%llu), not as no tag matching (%llu)",
		  (unsigned long long)st.sw_no_offload,
		  (unsigned long long)st.sw_no_tm);
	eu_world_fini(&W);
}

int main(void)
{
	struct eu_opts o;

	eu_opts_default(&o);
	o.no_tm = 1;
	o.arena_len = 2 * BIG;
	o.ecfg.keepalive_ms = 50;
	if (eu_world_init(&W, 3, &o))
		tap_bail("cannot open three soft HCA nodes without tag matching");
	test_device();
	test_traffic();
	test_many();
	test_malformed();
	test_qp_error();
	eu_world_fini(&W);
	test_offload_off();
	return tap_done();
}
