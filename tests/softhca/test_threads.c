/*
 * test_threads.c - soft HCA: scheduling modes and thread safety.
 *  - AUTO: the card runs inside verbs calls, no explicit stepping needed.
 *  - RANDOM: random amounts of work per call still deliver everything.
 *  - Threads: two threads sending on different QPs, one thread adding and
 *    deleting tagged entries, one thread polling and reposting buffers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "sh_util.h"

#define ALL ~0ULL
#define MD (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)

static struct sh_env env;

static void test_auto(void)
{
	struct softhca_config cfg;
	struct sh_wc wc;
	char *t, p[64];
	uint32_t h;
	int n;

	sh_config(&cfg);
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_AUTO, 1))
		tap_bail("env");
	t = sh_alloc(&env.b, 64);
	sh_add(&env.b, 1, 10, t, 64, 0x1, ALL, 0, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC, &h);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.opcode == IBV_WC_TM_ADD && wc.status == IBV_WC_SUCCESS,
		  "AUTO: an ADD is done by the time the next poll returns");
	sh_fill(p, sizeof(p), 5);
	sh_send_tm(&env, 0, IBV_TMH_EAGER, 0x1, 0, p, 48, 2);
	n = sh_wait(NULL, env.b.cq, &wc, 5000);
	tap_check(n == 1 && wc.wr_id == 10 && (wc.wc_flags & MD) == MD && sh_check(t, 48, 5),
		  "AUTO: a posted send is delivered and matched with polling only (%s)",
		  sh_wc_str(&wc));
	n = sh_poll(env.p[0].scq, &wc);
	tap_check(n == 1 && wc.wr_id == 2 && wc.status == IBV_WC_SUCCESS,
		  "AUTO: the send completion is there");
	sh_env_close(&env);
}

static void test_random(void)
{
	enum { NT = 100, NU = 50 };
	struct softhca_config cfg;
	struct softhca_stats st;
	struct sh_wc wc;
	char *t[NT], *pl[NU], p[100];
	int got_t[NT] = { 0 }, got_u = 0, bad = 0, i, total = 0;
	double end;
	uint32_t h;

	sh_config(&cfg);
	cfg.mtu = 64;
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_RANDOM, 2))
		tap_bail("env");
	softhca_set_sched(env.a.ctx, SOFTHCA_SCHED_RANDOM, 12345);
	softhca_set_sched(env.b.ctx, SOFTHCA_SCHED_RANDOM, 54321);
	for (i = 0; i < NT; i++) {
		t[i] = sh_alloc(&env.b, 100);
		if (sh_add(&env.b, 1000 + i, i, t[i], 100, 0x100 + i, ALL, 0,
			   IBV_OPS_TM_SYNC | (i == NT - 1 ? IBV_OPS_SIGNALED : 0), &h))
			tap_bail("add");
	}
	/* Let every ADD be done before any message can arrive. */
	end = sh_now() + 10;
	while (sh_now() < end && sh_poll(env.b.cq, &wc) == 0)
		;
	tap_check(wc.opcode == IBV_WC_TM_ADD && wc.wr_id == 1000 + NT - 1,
		  "RANDOM: list ops get done by repeated polling");
	for (i = 0; i < NU; i++) {
		pl[i] = sh_alloc(&env.b, 128);
		sh_post_plain(&env.b, 5000 + i, pl[i], 128);
	}
	for (i = 0; i < NT + NU; i++) {
		int pair = i & 1;
		uint64_t tag = i < NT ? 0x100 + (uint64_t)i : 0x9999;

		sh_fill(p, sizeof(p), i);
		sh_send_tm(&env, pair, IBV_TMH_EAGER, tag, i, p, 100, i);
	}
	end = sh_now() + 20;
	while (sh_now() < end && total < NT + NU) {
		sh_cq_discard(env.p[0].scq);
		sh_cq_discard(env.p[1].scq);
		if (sh_poll(env.b.cq, &wc) != 1)
			continue;
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_TM_RECV) {
			bad++;
			continue;
		}
		if (wc.wc_flags & IBV_WC_TM_DATA_VALID) {
			total++;
			if (wc.wr_id < NT && !got_t[wc.wr_id] && wc.byte_len == 100 &&
			    sh_check(t[wc.wr_id], 100, (uint32_t)wc.wr_id))
				got_t[wc.wr_id] = 1;
			else
				bad++;
		} else if (!(wc.wc_flags & IBV_WC_TM_MATCH)) {
			total++;
			if (wc.wr_id >= 5000 && wc.wr_id < 5000 + NU && wc.byte_len == 116)
				got_u++;
			else
				bad++;
		}
	}
	for (i = 0; i < NT; i++)
		if (!got_t[i])
			bad++;
	tap_check(total == NT + NU && got_u == NU && !bad,
		  "RANDOM: %d matched multi-packet and %d unexpected messages all delivered "
		  "intact (total %d, bad %d)", NT, NU, total, bad);
	st = sh_stats(&env.b);
	tap_check(st.matched == NT && st.unexpected == NU && st.list_entries == 0,
		  "RANDOM: stats agree (matched %llu unexpected %llu)",
		  (unsigned long long)st.matched, (unsigned long long)st.unexpected);
	sh_env_close(&env);
}

/* ---- threads ---------------------------------------------------------------- */

#define NMSG 4000
#define NOPS 400
#define NBUF 512
#define SLOTS 128

struct sender {
	int pair;
	char *slots;     /* SLOTS x 64 bytes in a's arena */
	int posted, completed, errors;
};

static atomic_int stop;
static atomic_int ops_add_ok, ops_del_ok;

/* Counts the send completions the CQ holds now. */
static void sender_reap(struct sender *s, struct ibv_cq_ex *cq)
{
	struct sh_wc wc;

	while (sh_poll(cq, &wc) == 1) {
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)s->completed)
			s->errors++;
		s->completed++;
	}
}

static void *sender_main(void *arg)
{
	struct sender *s = arg;
	struct ibv_qp *qp = env.p[s->pair].sqp;
	struct ibv_cq_ex *cq = env.p[s->pair].scq;

	while (s->completed < NMSG && !atomic_load(&stop)) {
		if (s->posted < NMSG && s->posted - s->completed < SLOTS) {
			char *m = s->slots + 64 * (s->posted % SLOTS);
			struct ibv_sge sge = { .addr = (uintptr_t)m, .length = 24,
					       .lkey = env.a.mr->lkey };
			struct ibv_send_wr wr, *bad = NULL;
			uint32_t seq = (uint32_t)s->posted;

			sh_put_tmh(m, IBV_TMH_NO_TAG, (uint32_t)s->pair, 0);
			memcpy(m + 16, &seq, 4);
			memcpy(m + 20, &s->pair, 4);
			memset(&wr, 0, sizeof(wr));
			wr.wr_id = s->posted;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_SEND;
			wr.send_flags = IBV_SEND_SIGNALED;
			if (ibv_post_send(qp, &wr, &bad) == 0)
				s->posted++;
		}
		sender_reap(s, cq);
	}
	/* A send completes when its packet is in the peer's ring, so once
	 * the poller stopped (every message in, or its deadline) what the CQ
	 * holds is all there will be: a sender the scheduler kept off the
	 * core while the poller finished still counts its last ones. */
	sender_reap(s, cq);
	return NULL;
}

static void *ops_main(void *arg)
{
	char *bufs = arg;
	int i, ret;

	for (i = 0; i < NOPS && !atomic_load(&stop); i++) {
		uint32_t h;

		do {
			ret = sh_add(&env.b, 0x10000 + i, 0x20000 + i, bufs + 64 * (i % 16), 64,
				     0xF000 + i, ALL, 0, IBV_OPS_SIGNALED, &h);
			if (ret == ENOMEM)
				usleep(100);
		} while (ret == ENOMEM && !atomic_load(&stop));
		if (ret)
			break;
		do {
			ret = sh_del(&env.b, 0x30000 + i, h, 0, IBV_OPS_SIGNALED);
			if (ret == ENOMEM)
				usleep(100);
		} while (ret == ENOMEM && !atomic_load(&stop));
		if (ret)
			break;
	}
	return NULL;
}

struct poller {
	char *bufs;
	uint32_t next_seq[2];
	int got, errors, order_errors, ops_errors;
};

static void *poller_main(void *arg)
{
	struct poller *pl = arg;
	double end = sh_now() + 120; /* loaded machines (ASan, other jobs) */
	struct sh_wc wc;

	while ((pl->got < 2 * NMSG || atomic_load(&ops_add_ok) < NOPS ||
		atomic_load(&ops_del_ok) < NOPS) && sh_now() < end) {
		if (sh_poll(env.b.cq, &wc) != 1)
			continue;
		if (wc.opcode == IBV_WC_TM_ADD || wc.opcode == IBV_WC_TM_DEL) {
			if (wc.status != IBV_WC_SUCCESS)
				pl->ops_errors++;
			else if (wc.opcode == IBV_WC_TM_ADD)
				atomic_fetch_add(&ops_add_ok, 1);
			else
				atomic_fetch_add(&ops_del_ok, 1);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_TM_NO_TAG ||
		    wc.byte_len != 24 || wc.wr_id >= NBUF) {
			pl->errors++;
			continue;
		}
		{
			char *b = pl->bufs + 64 * wc.wr_id;
			uint32_t seq;
			int pair, k;

			memcpy(&seq, b + 16, 4);
			memcpy(&pair, b + 20, 4);
			k = wc.qp_num == env.p[0].rqp->qp_num ? 0 :
			    wc.qp_num == env.p[1].rqp->qp_num ? 1 : -1;
			if (k < 0 || pair != k)
				pl->errors++;
			else if (seq != pl->next_seq[k]++)
				pl->order_errors++;
			pl->got++;
			if (sh_post_plain(&env.b, wc.wr_id, b, 64))
				pl->errors++;
		}
	}
	atomic_store(&stop, 1);
	return NULL;
}

static void test_threads(void)
{
	struct softhca_config cfg;
	struct softhca_stats st;
	struct sender s[2];
	struct poller pl;
	pthread_t ts[2], tp, to;
	char *opbufs;
	int i;

	sh_config(&cfg);
	cfg.mtu = 512;
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_AUTO, 2))
		tap_bail("env");
	memset(&pl, 0, sizeof(pl));
	pl.bufs = sh_alloc(&env.b, 64 * NBUF);
	for (i = 0; i < NBUF; i++)
		if (sh_post_plain(&env.b, i, pl.bufs + 64 * i, 64))
			tap_bail("post plain");
	opbufs = sh_alloc(&env.b, 64 * 16);
	for (i = 0; i < 2; i++) {
		memset(&s[i], 0, sizeof(s[i]));
		s[i].pair = i;
		s[i].slots = sh_alloc(&env.a, 64 * SLOTS);
	}
	atomic_store(&stop, 0);
	if (pthread_create(&tp, NULL, poller_main, &pl) ||
	    pthread_create(&ts[0], NULL, sender_main, &s[0]) ||
	    pthread_create(&ts[1], NULL, sender_main, &s[1]) ||
	    pthread_create(&to, NULL, ops_main, opbufs))
		tap_bail("pthread_create");
	pthread_join(ts[0], NULL);
	pthread_join(ts[1], NULL);
	pthread_join(to, NULL);
	pthread_join(tp, NULL);

	tap_check(s[0].completed == NMSG && s[1].completed == NMSG && !s[0].errors &&
		  !s[1].errors,
		  "threads: both senders' %d sends complete SUCCESS in order (%d/%d, errors %d/%d)",
		  NMSG, s[0].completed, s[1].completed, s[0].errors, s[1].errors);
	tap_check(pl.got == 2 * NMSG && !pl.errors,
		  "threads: the poller received all %d messages, each from the right QP (got %d, errors %d)",
		  2 * NMSG, pl.got, pl.errors);
	tap_check(pl.got > 0 && !pl.order_errors,
		  "threads: per-QP order kept under concurrency (%d out of order)", pl.order_errors);
	tap_check(atomic_load(&ops_add_ok) == NOPS && atomic_load(&ops_del_ok) == NOPS &&
		  !pl.ops_errors,
		  "threads: %d ADD + %d DEL posted from a third thread all complete SUCCESS (%d, %d, errors %d)",
		  NOPS, NOPS, atomic_load(&ops_add_ok), atomic_load(&ops_del_ok), pl.ops_errors);
	st = sh_stats(&env.b);
	tap_check(st.list_entries == 0 && st.unexpected == 0 && st.matched == 0,
		  "threads: list empty afterwards, NO_TAG traffic neither matched nor counted");
	sh_env_close(&env);
}

int main(void)
{
	alarm(180); /* above the threads phase's own 120 s bound */
	test_auto();
	test_random();
	test_threads();
	return tap_done();
}
