/*
 * test_ud_hostile.c - the UD QP's mailbox (ud.c) against a writer that
 * forges slot states: every slot of a receiver's mailbox is writable by
 * any process of the same user holding the GID's key, so each forged slot
 * must be refused and counted (softhca_stats.ud_bad), a claim that never
 * finishes must be freed after its second, a full mailbox must lose the
 * datagram (counted in ud_dropped) without a hang, and real datagrams
 * must still get through afterwards.
 *
 * White box (sh_reach.h): the attacker knows the mailbox's layout
 * (softhca_shm.h, struct sh_ud_box), as a real one would.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"
#include "sh_util.h"
#include "sh_reach.h"

#define QKEY 0x1badu
#define NRECV 16u
#define RBUF 512u
#define GRH 40u

struct udq {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
};

static int ud_open(struct sh_side *s, struct udq *u)
{
	const struct tm_verbs *v = sh_v();
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 16, .max_recv_wr = NRECV,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD,
		.sq_sig_all = 1,
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qkey = QKEY };

	u->cq = v->create_cq(s->ctx, 64, NULL, NULL, 0);
	if (!u->cq)
		return -1;
	qa.send_cq = qa.recv_cq = u->cq;
	u->qp = v->create_qp(s->pd, &qa);
	if (!u->qp || v->modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						       IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (v->modify_qp(u->qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return v->modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static int post_recvs(struct sh_side *s, struct udq *u, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		char *buf = sh_alloc(s, RBUF);
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = RBUF,
				       .lkey = s->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uintptr_t)buf,
					  .sg_list = &sge, .num_sge = 1 };
		struct ibv_recv_wr *bad;

		if (ibv_post_recv(u->qp, &wr, &bad))
			return -1;
	}
	return 0;
}

/* One datagram of len bytes (its first byte tag) from a to b's UD QP. */
static int send_dgram(struct sh_side *a, struct udq *u, struct ibv_ah *ah,
		      uint32_t dst_qpn, uint8_t tag, uint32_t len)
{
	char *buf = sh_alloc(a, len ? len : 1);
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len,
			       .lkey = a->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND };
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int n, tries = 0;

	memset(buf, tag, len);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = dst_qpn;
	wr.wr.ud.remote_qkey = QKEY;
	if (ibv_post_send(u->qp, &wr, &bad))
		return -1;
	while ((n = ibv_poll_cq(u->cq, 1, &wc)) == 0 && ++tries < 1000000)
		;
	return n == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

/* Polls b's UD CQ up to ms milliseconds for one receive. */
static int recv_dgram(struct udq *u, struct ibv_wc *wc, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int n = ibv_poll_cq(u->cq, 1, wc);

		if (n)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 +
		 (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	return 0;
}

static struct softhca_stats stats(struct sh_side *s)
{
	struct softhca_stats st;

	if (softhca_query_stats(s->ctx, &st))
		sh_die("softhca_query_stats");
	return st;
}

/* A ready slot as a forger writes it. */
static void forge_ready(struct sh_ud_slot *s, uint32_t len, uint32_t dst_qpn,
			uint32_t qkey, uint32_t claim)
{
	s->len = len;
	s->src_qpn = 7;
	s->dst_qpn = dst_qpn;
	s->qkey = qkey;
	memset(s->sgid, 0xee, sizeof(s->sgid));
	memset(s->data, 0x5a, SH_UD_PAYLOAD);
	atomic_store(&s->state, claim << 2 | SH_UD_READY);
}

static int all_free(struct sh_ud_box *box, uint32_t from, uint32_t n)
{
	for (uint32_t i = from; i < from + n; i++)
		if (atomic_load(&box->slot[i].state))
			return 0;
	return 1;
}

int main(void)
{
	const struct tm_verbs *v = sh_v();
	struct softhca_config cfg;
	struct sh_env e;
	struct udq ua, ub;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_ah *ah;
	struct reach r;
	struct sh_layout l;
	struct sh_ud_box *box;
	struct softhca_stats s0, s1;
	struct ibv_wc wc;
	const uint8_t *got;
	int n;

	alarm(120); /* a card that never stops fails, not hangs */
	sh_config(&cfg);
	if (sh_env_open(&e, &cfg, SOFTHCA_SCHED_MANUAL, 0) ||
	    ud_open(&e.a, &ua) || ud_open(&e.b, &ub) ||
	    post_recvs(&e.b, &ub, NRECV))
		tap_bail("set-up: two contexts with a UD QP each");
	aa.grh.dgid = e.b.gid;
	ah = v->create_ah(e.a.pd, &aa);
	reach_victim(&e.b.gid, &r);
	if (!ah || !r.rings ||
	    sh_layout_compute(&l, r.head.mtu, r.head.ring_depth,
			      r.head.max_qp, r.head.max_mr))
		tap_bail("set-up: the AH and the victim's mailbox");
	box = (struct sh_ud_box *)(r.rings + l.ud_off);

	/* 1: the baseline the rest is measured against */
	n = send_dgram(&e.a, &ua, ah, ub.qp->qp_num, 0x11, 100) == 0 &&
	    recv_dgram(&ub, &wc, 5000);
	got = (const uint8_t *)(uintptr_t)wc.wr_id;
	tap_check(n == 1 && wc.status == IBV_WC_SUCCESS &&
			  wc.byte_len == GRH + 100 && (wc.wc_flags & IBV_WC_GRH) &&
			  !memcmp(got + 8, e.a.gid.raw, 16) && got[GRH] == 0x11 &&
			  got[GRH + 99] == 0x11,
		  "a datagram reaches the receiver, GRH naming its sender, payload intact");

	/* 2: ready slots that lie about their size, QP or qkey */
	s0 = stats(&e.b);
	forge_ready(&box->slot[0], SH_UD_PAYLOAD + 1, ub.qp->qp_num, QKEY, 5);
	forge_ready(&box->slot[1], 0xffffffffu, ub.qp->qp_num, QKEY, 6);
	forge_ready(&box->slot[2], 10, ub.qp->qp_num + 1, QKEY, 7);
	forge_ready(&box->slot[3], 10, ub.qp->qp_num, QKEY + 1, 8);
	atomic_fetch_add(&box->posted, 4);
	n = recv_dgram(&ub, &wc, 200);
	s1 = stats(&e.b);
	tap_check(n == 0 && s1.ud_bad - s0.ud_bad == 4 && all_free(box, 0, 4),
		  "ready slots claiming %u and 2^32-1 bytes, another QP, another qkey: refused, counted (%llu), freed, nothing delivered",
		  SH_UD_PAYLOAD + 1,
		  (unsigned long long)(s1.ud_bad - s0.ud_bad));

	/* 3: states no writer leaves */
	s0 = s1;
	atomic_store(&box->slot[4].state, 9u << 2 | SH_UD_FREE);
	atomic_store(&box->slot[5].state, 0xffffffffu);
	atomic_fetch_add(&box->posted, 1);
	n = recv_dgram(&ub, &wc, 200);
	s1 = stats(&e.b);
	tap_check(n == 0 && s1.ud_bad - s0.ud_bad == 2 && all_free(box, 4, 2),
		  "a free slot with a claim in it and state 3: refused, counted, freed");

	/* 4: a well-formed forgery is a datagram (the CM checks what it says) */
	forge_ready(&box->slot[6], SH_UD_PAYLOAD, ub.qp->qp_num, QKEY, 10);
	atomic_fetch_add(&box->posted, 1);
	n = recv_dgram(&ub, &wc, 5000);
	got = (const uint8_t *)(uintptr_t)wc.wr_id;
	tap_check(n == 1 && wc.status == IBV_WC_SUCCESS &&
			  wc.byte_len == GRH + SH_UD_PAYLOAD &&
			  got[8] == 0xee && got[GRH + SH_UD_PAYLOAD - 1] == 0x5a,
		  "a well-formed slot of the longest size is delivered as its writer says (the GID included)");

	/* 5: a mailbox full of claims that never finish */
	s0 = stats(&e.b);
	for (uint32_t i = 0; i < SH_UD_SLOTS; i++)
		atomic_store(&box->slot[i].state, (100 + i) << 2 | SH_UD_CLAIMED);
	atomic_fetch_add(&box->posted, 1);
	recv_dgram(&ub, &wc, 50); /* the receiver sees them claimed */
	n = send_dgram(&e.a, &ua, ah, ub.qp->qp_num, 0x22, 20);
	s1 = stats(&e.a);
	tap_check(n == 0 && s1.ud_dropped == 1,
		  "a full mailbox: the send completes (UD is unreliable) and the datagram is counted lost at the sender");
	/* claims unchanged for a second are freed; wait for it, bounded */
	n = 0;
	for (int ms = 0; ms < 20000 && !n && !all_free(box, 0, SH_UD_SLOTS);
	     ms += 10)
		n = recv_dgram(&ub, &wc, 10);
	s1 = stats(&e.b);
	tap_check(n == 0 && s1.ud_dropped - s0.ud_dropped == SH_UD_SLOTS &&
			  all_free(box, 0, SH_UD_SLOTS),
		  "every stuck claim is freed after its second and counted lost (%llu), nothing delivered",
		  (unsigned long long)(s1.ud_dropped - s0.ud_dropped));
	n = send_dgram(&e.a, &ua, ah, ub.qp->qp_num, 0x33, 30) == 0 &&
	    recv_dgram(&ub, &wc, 5000);
	got = (const uint8_t *)(uintptr_t)wc.wr_id;
	tap_check(n == 1 && wc.status == IBV_WC_SUCCESS &&
			  wc.byte_len == GRH + 30 && got[GRH] == 0x33,
		  "the mailbox serves real datagrams again");

	reach_drop(&r);
	v->destroy_ah(ah);
	v->destroy_qp(ua.qp);
	v->destroy_qp(ub.qp);
	v->destroy_cq(ua.cq);
	v->destroy_cq(ub.cq);
	sh_env_close(&e);
	return tap_done();
}
