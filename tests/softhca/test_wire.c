/*
 * test_wire.c - the send side of the wire: the post fast path against the
 * queued path, and inline data.
 *
 * In AUTO a SEND posted to an idle QP is written into the peer's ring and
 * completed inside the post; otherwise (MANUAL, a busy send queue, a full
 * ring, a multi-packet message) it waits in the send queue for the card.
 * Both must give the same completions, statuses, order and data: the same
 * script of WRs runs once in AUTO and once in MANUAL (cards stepped by
 * softhca_drain) and the results are compared.  A ring of depth 3 (not a
 * power of two) makes both ends wrap many times.  Last, the consumer's
 * published tail lies to a producer whose ring is full.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "softhca/sh_util.h"
#include "softhca/softhca_priv.h"

#define MTU      256u
#define NPLAIN   64
#define BUFSZ    1024u
#define MAXWC    256

struct outcome {
	int nsend, nrecv;
	struct sh_wc send[MAXWC];
	struct sh_wc recv[MAXWC];
	uint8_t data[NPLAIN][BUFSZ];
};

static struct ibv_send_wr *mk_wr(struct ibv_send_wr *wr, struct ibv_sge *sge,
				 void *buf, uint32_t len, uint32_t lkey,
				 uint64_t wr_id, unsigned int flags)
{
	memset(wr, 0, sizeof(*wr));
	sge->addr = (uintptr_t)buf;
	sge->length = len;
	sge->lkey = lkey;
	wr->wr_id = wr_id;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_SEND;
	wr->send_flags = flags;
	return wr;
}

/* A NO_TAG message of len bytes (TMH included), pattern seed. */
static void *msg(struct sh_side *s, uint32_t len, uint32_t seed)
{
	uint8_t *m = sh_alloc(s, len);

	sh_fill(m, len, seed);
	sh_put_tmh(m, IBV_TMH_NO_TAG, 0, 0);
	return m;
}

static int post1(struct ibv_qp *qp, void *buf, uint32_t len, uint32_t lkey,
		 uint64_t wr_id, unsigned int flags)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	return ibv_post_send(qp, mk_wr(&wr, &sge, buf, len, lkey, wr_id, flags),
			     &bad);
}

/*
 * The script: signalled and unsignalled sends, inline ones (the buffer
 * overwritten right after the post), bad lkeys, multi-packet sends that
 * queue, a chained list, and enough traffic to fill and wrap the ring.
 */
static int run_script(enum softhca_sched sched, struct outcome *o)
{
	struct softhca_config cfg;
	struct ibv_send_wr wr[3], *bad;
	struct ibv_sge sge[3];
	struct sh_env e;
	uint8_t *plain[NPLAIN], *m;
	uint32_t lk;
	int err = 0, i, n;

	sh_config(&cfg);
	cfg.mtu = MTU;
	cfg.ring_depth = 3;
	if (sh_env_open(&e, &cfg, sched, 1))
		return -1;
	lk = e.a.mr->lkey;
	for (i = 0; i < NPLAIN; i++) {
		plain[i] = sh_alloc(&e.b, BUFSZ);
		memset(plain[i], 0xEE, BUFSZ);
		sh_post_plain(&e.b, 1000 + (uint64_t)i, plain[i], BUFSZ);
	}
	sh_flush(&e);
	sh_cq_discard(e.b.cq);

	struct ibv_qp *qp = e.p[0].sqp;

	/*
	 * (The first WR after the connect checks the peer, so it queues; the
	 * failing ones come next, while the ring has room, so that AUTO takes
	 * them on the fast path.)
	 */
	err |= post1(qp, msg(&e.a, 24, 1), 24, lk, 1, IBV_SEND_SIGNALED);
	err |= post1(qp, msg(&e.a, 24, 5), 24, lk + 4096, 5,
		     IBV_SEND_SIGNALED);
	err |= post1(qp, msg(&e.a, 24, 6), 24, lk + 4096, 6, 0);
	err |= post1(qp, msg(&e.a, 24, 2), 24, lk, 2, 0);
	/* two SGEs under the key WR 2 left cached, the second outside its
	 * MR: every SGE is checked, not only the first */
	{
		static uint8_t outside[16];
		struct ibv_sge two[2] = {
			{ (uintptr_t)msg(&e.a, 16, 14), 16, lk },
			{ (uintptr_t)outside, 16, lk },
		};

		mk_wr(&wr[0], &sge[0], NULL, 0, lk, 14, IBV_SEND_SIGNALED);
		wr[0].sg_list = two;
		wr[0].num_sge = 2;
		err |= ibv_post_send(qp, &wr[0], &bad);
	}
	m = msg(&e.a, 40, 3);
	err |= post1(qp, m, 40, lk, 3, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
	memset(m, 0x5A, 40);
	m = msg(&e.a, 40, 4);
	err |= post1(qp, m, 40, lk, 4, IBV_SEND_INLINE);
	memset(m, 0x5A, 40);
	/* inline data is not checked against any lkey (as on mlx5) */
	m = msg(&e.a, 32, 7);
	err |= post1(qp, m, 32, lk + 4096, 7, IBV_SEND_INLINE |
		     IBV_SEND_SIGNALED);
	memset(m, 0x5A, 32);
	err |= post1(qp, msg(&e.a, 700, 8), 700, lk, 8, IBV_SEND_SIGNALED);
	err |= post1(qp, msg(&e.a, 24, 9), 24, lk, 9, IBV_SEND_SIGNALED);
	/* drain, then a list whose first WR is fast and the rest queue */
	sh_flush(&e);
	mk_wr(&wr[0], &sge[0], msg(&e.a, 24, 10), 24, lk, 10,
	      IBV_SEND_SIGNALED);
	mk_wr(&wr[1], &sge[1], msg(&e.a, 300, 11), 300, lk, 11, 0);
	m = msg(&e.a, 48, 12);
	mk_wr(&wr[2], &sge[2], m, 48, lk, 12,
	      IBV_SEND_SIGNALED | IBV_SEND_INLINE);
	wr[0].next = &wr[1];
	wr[1].next = &wr[2];
	err |= ibv_post_send(qp, wr, &bad);
	memset(m, 0x5A, 48);
	/* many small ones: the 3-slot ring fills and wraps */
	for (i = 0; i < 40; i++)
		err |= post1(qp, msg(&e.a, 16 + (uint32_t)i, 100 + (uint32_t)i),
			     16 + (uint32_t)i, lk, 100 + (uint64_t)i,
			     i % 3 ? 0 : IBV_SEND_SIGNALED);
	for (i = 0; i < 1000; i++) {
		sh_flush(&e);
		n = sh_poll_all(e.p[0].scq, o->send + o->nsend,
				MAXWC - o->nsend);
		o->nsend += n;
		n = sh_poll_all(e.b.cq, o->recv + o->nrecv, MAXWC - o->nrecv);
		o->nrecv += n;
	}
	for (i = 0; i < NPLAIN; i++)
		memcpy(o->data[i], plain[i], BUFSZ);
	sh_env_close(&e);
	return err;
}

static int wc_same(const struct sh_wc *a, const struct sh_wc *b)
{
	return a->status == b->status && a->opcode == b->opcode &&
	       a->wr_id == b->wr_id && a->byte_len == b->byte_len &&
	       a->wc_flags == b->wc_flags;
}

static void test_fast_vs_queued(void)
{
	static struct outcome fast, slow;
	int same_send, same_recv, i, prot = 0, sig = 0, recv_ok = 1;

	memset(&fast, 0, sizeof(fast));
	memset(&slow, 0, sizeof(slow));
	tap_check(!run_script(SOFTHCA_SCHED_AUTO, &fast) &&
		  !run_script(SOFTHCA_SCHED_MANUAL, &slow),
		  "the script posts without errors in AUTO and MANUAL");
	same_send = fast.nsend == slow.nsend;
	for (i = 0; same_send && i < fast.nsend; i++)
		same_send = wc_same(&fast.send[i], &slow.send[i]);
	for (i = 0; i < slow.nsend; i++) {
		prot += slow.send[i].status == IBV_WC_LOC_PROT_ERR;
		sig += slow.send[i].status == IBV_WC_SUCCESS;
	}
	/* 1 3 7 8 9 10 12 signalled + 14 of the 40; 5, 6 and 14 fail */
	tap_check(sig == 7 + 14 && prot == 3,
		  "queued path: signalled sends and failed ones complete "
		  "(%d success, %d LOC_PROT_ERR)", sig, prot);
	tap_check(same_send,
		  "fast path: the same send completions, in the same order "
		  "(%d vs %d queued)", fast.nsend, slow.nsend);
	same_recv = fast.nrecv == slow.nrecv &&
		    !memcmp(fast.data, slow.data, sizeof(fast.data));
	for (i = 0; same_recv && i < fast.nrecv; i++)
		same_recv = wc_same(&fast.recv[i], &slow.recv[i]);
	tap_check(same_recv,
		  "fast path: the receiver gets the same messages, bytes and "
		  "completions (%d vs %d queued)", fast.nrecv, slow.nrecv);
	/* what arrived, in order: 1-4, 7-12, then the 40 */
	{
		static const uint32_t seeds[] = { 1, 2, 3, 4, 7, 8, 9, 10, 11,
						  12 };
		static const uint32_t lens[] = { 24, 24, 40, 40, 32, 700, 24,
						 24, 300, 48 };
		const int nseed = (int)(sizeof(seeds) / sizeof(seeds[0]));

		recv_ok = fast.nrecv == nseed + 40;
		for (i = 0; recv_ok && i < fast.nrecv; i++) {
			uint32_t s = i < nseed ? seeds[i]
					       : 100 + (uint32_t)(i - nseed);
			uint32_t l = i < nseed ? lens[i]
					       : 16 + (uint32_t)(i - nseed);
			uint8_t ref[BUFSZ];

			sh_fill(ref, l, s);
			sh_put_tmh(ref, IBV_TMH_NO_TAG, 0, 0);
			recv_ok = fast.recv[i].status == IBV_WC_SUCCESS &&
				  fast.recv[i].byte_len == l &&
				  fast.recv[i].wr_id == 1000 + (uint64_t)i &&
				  !memcmp(fast.data[i], ref, l);
		}
	}
	tap_check(recv_ok,
		  "every message arrives whole and in order, inline ones with "
		  "the bytes of post time (%d messages)", fast.nrecv);
}

/* An inline send's buffer may be reused as soon as the post returns. */
static void test_inline_reuse(enum softhca_sched sched, const char *how)
{
	struct sh_env e;
	struct sh_wc wc;
	uint8_t *buf, *dst, ref[56];
	int ok, ret;

	if (sh_env_open(&e, NULL, sched, 1))
		sh_die("env");
	dst = sh_alloc(&e.b, 256);
	sh_post_plain(&e.b, 6, dst, 256);
	sh_post_plain(&e.b, 7, dst, 256);
	sh_flush(&e);
	sh_cq_discard(e.b.cq);
	/* a first send checks the peer (AUTO then posts straight to the ring) */
	ret = sh_send_tm(&e, 0, IBV_TMH_NO_TAG, 0, 0, "warm", 4, 2);
	ret |= sh_wait(&e, e.b.cq, &wc, 5000) != 1;
	ret |= sh_wait(&e, e.p[0].scq, &wc, 5000) != 1;
	memset(dst, 0xEE, 256);
	/* unregistered memory: inline data needs no lkey */
	buf = malloc(56);
	sh_fill(ref, 56, 99);
	sh_put_tmh(ref, IBV_TMH_NO_TAG, 0, 0);
	memcpy(buf, ref, 56);
	ret |= post1(e.p[0].sqp, buf, 56, 0, 1,
		     IBV_SEND_INLINE | IBV_SEND_SIGNALED);
	memset(buf, 0x5A, 56);
	ok = !ret && sh_wait(&e, e.b.cq, &wc, 5000) == 1 &&
	     wc.status == IBV_WC_SUCCESS && wc.byte_len == 56 &&
	     !memcmp(dst, ref, 56) && sh_all(dst + 56, 200, 0xEE);
	tap_check(ok, "%s: an inline send carries its bytes as of the post "
		  "(buffer overwritten at once)", how);
	ok = sh_wait(&e, e.p[0].scq, &wc, 5000) == 1 &&
	     wc.status == IBV_WC_SUCCESS && wc.wr_id == 1;
	tap_check(ok, "%s: and completes SUCCESS", how);
	free(buf);
	sh_env_close(&e);
}

/*
 * The ring's tail is the consumer's to write, in memory the producer maps:
 * one claiming that far more was consumed than was ever sent must fail the
 * sending QP (counted as a bad packet), not let it overwrite slots.
 */
static void test_tail_lie(enum softhca_sched sched, const char *how)
{
	struct softhca_config cfg;
	struct sh_context *b;
	struct sh_ring *ring;
	struct sh_env e;
	struct sh_wc wc;
	int i, ret = 0, ok;

	sh_config(&cfg);
	cfg.ring_depth = 3;
	if (sh_env_open(&e, &cfg, sched, 1))
		sh_die("env");
	/* three sends fill the ring; b's card never runs, so nothing is
	 * consumed */
	for (i = 0; i < 3; i++)
		ret |= post1(e.p[0].sqp, msg(&e.a, 24, (uint32_t)i), 24,
			     e.a.mr->lkey, (uint64_t)i, IBV_SEND_SIGNALED);
	for (i = 0; i < 3; i++)
		ret |= softhca_drain(e.a.ctx) < 0 ||
		       sh_wait(NULL, e.p[0].scq, &wc, 5000) != 1 ||
		       wc.status != IBV_WC_SUCCESS;
	b = to_sh_ctx(e.b.ctx);
	ring = sh_ring_at(&b->lay, b->rings,
			  e.p[0].rqp->qp_num - SH_QPN_BASE);
	atomic_store(&ring->tail, 1000u);
	ret |= post1(e.p[0].sqp, msg(&e.a, 24, 9), 24, e.a.mr->lkey, 9,
		     IBV_SEND_SIGNALED);
	softhca_drain(e.a.ctx);
	ok = !ret && sh_wait(NULL, e.p[0].scq, &wc, 5000) == 1 &&
	     wc.wr_id == 9 && wc.status == IBV_WC_RETRY_EXC_ERR &&
	     sh_stats(&e.a).bad_packets == 1;
	tap_check(ok, "%s: a tail claiming 1000 packets consumed of 3 fails "
		  "the send (%s), counted as a bad packet", how,
		  ret ? "posting failed" : sh_wc_str(&wc));
	sh_env_close(&e);
}

int main(void)
{
	test_fast_vs_queued();
	test_inline_reuse(SOFTHCA_SCHED_AUTO, "AUTO (posted straight to "
			  "the ring)");
	test_inline_reuse(SOFTHCA_SCHED_MANUAL, "MANUAL (queued)");
	test_tail_lie(SOFTHCA_SCHED_AUTO, "AUTO");
	test_tail_lie(SOFTHCA_SCHED_MANUAL, "MANUAL");
	return tap_done();
}
