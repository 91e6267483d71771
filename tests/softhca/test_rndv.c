/*
 * test_rndv.c - soft HCA: rendezvous.  Matched RNDV (card RDMA read, two
 * completions, FIN to the sender), RNDV_INCOMPLETE, bad rkeys, unexpected
 * RNDV finished by software, FIN to a plain receive queue, the copy-read
 * fallback, several rendezvous at once, read pacing.
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
#define MD (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)

static struct sh_env env;

struct src {
	char *buf;
	uint32_t len;
	struct ibv_mr *mr;
};

static void open_env(int force_copy_read, uint32_t mtu, int npairs)
{
	struct softhca_config cfg;

	sh_config(&cfg);
	/* These QPs carry sends both ways (one QP per side, with a send
	 * queue): the lenient model, where such a QP still gets card
	 * rendezvous.  The strict (default, mlx5) shapes are pinned by
	 * test_mlx5_rules and test_mlx5_replay. */
	cfg.strict = 0;
	cfg.force_copy_read = force_copy_read;
	if (mtu)
		cfg.mtu = mtu;
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_MANUAL, npairs))
		tap_bail("sh_env_open failed");
}

/* Sender data in its own MR on side a. */
static struct src mksrc(uint32_t len, uint32_t seed, int access)
{
	struct src s;

	s.len = len;
	s.buf = malloc(len + 64);
	if (!s.buf)
		tap_bail("malloc");
	sh_fill(s.buf, len, seed);
	s.mr = softhca_verbs()->reg_mr(env.a.pd, s.buf, len, access);
	if (!s.mr)
		tap_bail("reg_mr");
	return s;
}

static void freesrc(struct src *s)
{
	softhca_verbs()->dereg_mr(s->mr);
	free(s->buf);
}

static char *guarded(struct sh_side *side, uint32_t len)
{
	char *b = sh_alloc(side, len + 64);

	memset(b, 0xEE, len + 64);
	return b;
}

static uint32_t add(uint64_t tag, void *buf, uint32_t len, uint64_t recv_wr_id,
		    uint32_t cnt)
{
	struct sh_wc wc;
	uint32_t h;

	if (sh_add(&env.b, 0xadd, recv_wr_id, buf, len, tag, ALL, cnt,
		   IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC, &h))
		tap_bail("ADD");
	while (sh_step_op(&env.b))
		;
	if (sh_poll(env.b.cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
		tap_bail("ADD completion");
	return h;
}

/* Checks a FIN (TMH opcode FIN + RVH) in buf. */
static int is_fin(const char *buf, uint64_t tag, uint32_t app, uint64_t va,
		  uint32_t rkey, uint32_t len)
{
	struct ibv_tmh tmh;
	struct ibv_rvh rvh;

	memcpy(&tmh, buf, sizeof(tmh));
	memcpy(&rvh, buf + SH_TMH_LEN, sizeof(rvh));
	return tmh.opcode == IBV_TMH_FIN && be64toh(tmh.tag) == tag &&
	       be32toh(tmh.app_ctx) == app && be64toh(rvh.va) == va &&
	       be32toh(rvh.rkey) == rkey && be32toh(rvh.len) == len;
}

static void test_matched(int copy)
{
	const char *mode = copy ? "copy-read" : "cma";
	struct softhca_stats sb0, sb, sa;
	struct sh_wc wc[4], fw;
	struct src s;
	char *t, *fin, meta[8] = "metadata";
	int n, r, steps;

	open_env(copy, 0, 1);
	s = mksrc(10000, 1, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	fin = guarded(&env.a, 128);
	sh_post_plain(&env.a, 900, fin, 128);
	t = guarded(&env.b, 10000);
	add(0x4242, t, 10000, 50, 0);
	sb0 = sh_stats(&env.b);

	sh_send_rndv(&env, 0, 0x4242, 0x1111, (uintptr_t)s.buf, s.mr->rkey, 10000,
		     meta, sizeof(meta), 1);
	tap_check(sh_step_msg(&env, 0), "[%s] RNDV request moved and processed", mode);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n >= 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_TM_RECV &&
		  (wc[0].wc_flags & MD) == IBV_WC_TM_MATCH && wc[0].wr_id == 50,
		  "[%s] matched RNDV: first completion TM_MATCH only, at once (n=%d %s)", mode, n,
		  sh_wc_str(&wc[0]));
	tap_check(n >= 1 && wc[0].tag == 0x4242 && wc[0].priv == 0x1111,
		  "[%s] MATCH completion: tag and priv from the TMH", mode);
	if (n == 1) {
		/* Card-side read, then the data completion. */
		steps = 0;
		while ((r = softhca_step(env.b.ctx, SOFTHCA_WORK_READ, SOFTHCA_ANY_QP)) ||
		       (copy && (softhca_step(env.b.ctx, SOFTHCA_WORK_TX, SOFTHCA_ANY_QP) |
				 softhca_step(env.a.ctx, SOFTHCA_WORK_RX, SOFTHCA_ANY_QP) |
				 softhca_step(env.a.ctx, SOFTHCA_WORK_TX, SOFTHCA_ANY_QP) |
				 softhca_step(env.b.ctx, SOFTHCA_WORK_RX, SOFTHCA_ANY_QP))))
			if (++steps > 100000)
				break;
		n = sh_poll_all(env.b.cq, wc + 1, 3) + 1;
	}
	tap_check(n == 2 && wc[1].status == IBV_WC_SUCCESS && wc[1].opcode == IBV_WC_TM_RECV &&
		  (wc[1].wc_flags & MD) == IBV_WC_TM_DATA_VALID && wc[1].wr_id == 50,
		  "[%s] second completion TM_DATA_VALID, same wr_id (n=%d %s)", mode, n,
		  sh_wc_str(&wc[1]));
	tap_check(n == 2 && wc[1].byte_len == 10000,
		  "[%s] DATA_VALID byte_len is the rendezvous length (%u)", mode, wc[1].byte_len);
	tap_check(sh_check(t, 10000, 1) && sh_all(t + 10000, 64, 0xEE),
		  "[%s] the card read the sender's data into the tagged buffer, nothing past it", mode);
	/* With cma the sender's card has not run yet; with copy reads it
	 * served the read, so the FIN may already be there. */
	n = sh_poll(env.a.cq, &fw);
	if (!copy)
		tap_check(n == 0, "[cma] no FIN before the sender's card ran");
	if (n == 0) {
		sh_flush(&env);
		n = sh_poll(env.a.cq, &fw);
	}
	tap_check(n == 1 && fw.status == IBV_WC_SUCCESS && fw.opcode == IBV_WC_TM_NO_TAG &&
		  fw.wr_id == 900 && fw.qp_num == env.p[0].sqp->qp_num,
		  "[%s] sender gets FIN as IBV_WC_TM_NO_TAG on its TM-SRQ plain buffer (%s)", mode,
		  sh_wc_str(&fw));
	tap_check(n == 1 && fw.byte_len == SH_TMH_LEN + SH_RVH_LEN &&
		  is_fin(fin, 0x4242, 0x1111, (uintptr_t)s.buf, s.mr->rkey, 10000) &&
		  sh_all(fin + 32, 128 + 64 - 32, 0xEE),
		  "[%s] FIN = TMH copy with opcode FIN + the RVH, 32 bytes (byte_len %u)", mode,
		  fw.byte_len);
	sb = sh_stats(&env.b);
	sa = sh_stats(&env.a);
	tap_check(sb.matched == sb0.matched + 1 && sb.unexpected == 0 &&
		  sb.card_reads == sb0.card_reads + 1,
		  "[%s] stats: one match, one card read", mode);
	if (copy)
		tap_check(sb.copy_reads == sb0.copy_reads + 1 && sb.cma_reads == sb0.cma_reads,
			  "[copy-read] the read went by request/response (copy %llu cma %llu)",
			  (unsigned long long)sb.copy_reads, (unsigned long long)sb.cma_reads);
	else
		tap_check(sb.cma_reads == sb0.cma_reads + 1,
			  "[cma] the read used process_vm_readv (cma %llu copy %llu)",
			  (unsigned long long)sb.cma_reads, (unsigned long long)sb.copy_reads);
	tap_check(sa.hw_unexpected_cnt == 0 && sa.unexpected == 0,
		  "[%s] FIN is not counted as unexpected at the sender", mode);
	freesrc(&s);
	sh_env_close(&env);
}

static void test_small_and_maxhdr(void)
{
	struct sh_wc wc[4];
	struct src s;
	char *t1, *t2, meta[32];
	int n;

	open_env(0, 0, 1);
	s = mksrc(10, 2, IBV_ACCESS_REMOTE_READ);
	sh_post_plain(&env.a, 901, sh_alloc(&env.a, 64), 64);
	sh_post_plain(&env.a, 902, sh_alloc(&env.a, 64), 64);
	t1 = guarded(&env.b, 100);
	t2 = guarded(&env.b, 100);
	add(0x10, t1, 100, 60, 0);
	add(0x11, t2, 100, 61, 0);
	sh_send_rndv(&env, 0, 0x10, 0, (uintptr_t)s.buf, s.mr->rkey, 10, NULL, 0, 1);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && (wc[0].wc_flags & MD) == IBV_WC_TM_MATCH &&
		  (wc[1].wc_flags & MD) == IBV_WC_TM_DATA_VALID && wc[1].byte_len == 10 &&
		  sh_check(t1, 10, 2) && sh_all(t1 + 10, 90 + 64, 0xEE),
		  "10-byte rendezvous (no metadata) still completes twice; data in place (n=%d)", n);
	memset(meta, 'M', sizeof(meta));
	sh_send_rndv(&env, 0, 0x11, 0, (uintptr_t)s.buf, s.mr->rkey, 10, meta, 32, 2);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && wc[0].wr_id == 61 && (wc[0].wc_flags & MD) == IBV_WC_TM_MATCH &&
		  wc[1].status == IBV_WC_SUCCESS && sh_check(t2, 10, 2),
		  "RNDV of exactly max_rndv_hdr_size (64 bytes) is matched normally (n=%d %s)", n,
		  sh_wc_str(&wc[0]));
	n = sh_poll_all(env.a.cq, wc, 4);
	tap_check(n == 2 && wc[0].wr_id == 901 && wc[1].wr_id == 902 &&
		  wc[0].opcode == IBV_WC_TM_NO_TAG, "two FINs at the sender (n=%d)", n);
	freesrc(&s);
	sh_env_close(&env);
}

static void test_incomplete(void)
{
	struct softhca_stats sb0, sb;
	struct sh_wc wc[4], w;
	struct src s;
	char *t, *t2, *rd, *pb, fin[32], meta[8] = "METADATA";
	struct ibv_tmh tmh;
	struct ibv_rvh rvh;
	int n, i, found;

	open_env(0, 0, 1);
	s = mksrc(10000, 3, IBV_ACCESS_REMOTE_READ);
	sh_post_plain(&env.a, 903, sh_alloc(&env.a, 64), 64);
	t = guarded(&env.b, 100);
	add(0x20, t, 100, 70, 0);
	sb0 = sh_stats(&env.b);
	sh_send_rndv(&env, 0, 0x20, 0x2222, (uintptr_t)s.buf, s.mr->rkey, 10000, meta, 8, 1);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	found = -1;
	for (i = 0; i < n; i++)
		if (wc[i].status == IBV_WC_TM_RNDV_INCOMPLETE)
			found = i;
	tap_check(found == n - 1 && found >= 0 && wc[found].wr_id == 70,
		  "tagged buffer too small: final completion IBV_WC_TM_RNDV_INCOMPLETE (n=%d %s)",
		  n, n ? sh_wc_str(&wc[n - 1]) : "");
	for (i = 0; i < n; i++)
		tap_diag("rndv_incomplete completion %d: %s", i, sh_wc_str(&wc[i]));
	memcpy(&tmh, t, sizeof(tmh));
	memcpy(&rvh, t + SH_TMH_LEN, sizeof(rvh));
	tap_check(tmh.opcode == IBV_TMH_RNDV && be64toh(tmh.tag) == 0x20 &&
		  be32toh(tmh.app_ctx) == 0x2222 && be64toh(rvh.va) == (uintptr_t)s.buf &&
		  be32toh(rvh.rkey) == s.mr->rkey && be32toh(rvh.len) == 10000,
		  "RNDV_INCOMPLETE: TMH+RVH scattered into the tagged buffer");
	tap_check(sh_all(t + 32, 68 + 64, 0xEE), "RNDV_INCOMPLETE: no data past TMH+RVH written");
	sb = sh_stats(&env.b);
	tap_check(sb.matched == sb0.matched + 1 && sb.card_reads == sb0.card_reads &&
		  sb.hw_unexpected_cnt == 0 && sb.list_entries == 0,
		  "RNDV_INCOMPLETE: counts as a match, entry consumed, card did not read, not unexpected");
	tap_check(sh_poll(env.a.cq, &w) == 0, "RNDV_INCOMPLETE: no FIN to the sender");

	/* Software finishes: RDMA read on the receiving QP, then FIN. */
	rd = guarded(&env.b, 10000);
	n = sh_post_read(env.p[0].rqp, rd, env.b.mr->lkey, 10000, be64toh(rvh.va),
			 be32toh(rvh.rkey), 77);
	sh_flush(&env);
	n = n ? -1 : sh_poll(env.p[0].rcq, &w);
	tap_check(n == 1 && w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_RDMA_READ &&
		  w.wr_id == 77 && sh_check(rd, 10000, 3),
		  "software RDMA_READ on the TM-SRQ's QP fetches the data (%s)", sh_wc_str(&w));
	memcpy(fin, t, 32);
	fin[0] = IBV_TMH_FIN;
	sh_send_raw(&env, 0, 1, fin, 32, 78);
	sh_flush(&env);
	n = sh_poll(env.a.cq, &w);
	tap_check(n == 1 && w.opcode == IBV_WC_TM_NO_TAG && w.wr_id == 903,
		  "software FIN reaches the sender as TM_NO_TAG (%s)", sh_wc_str(&w));

	/* Buffer smaller than TMH+RVH: as much as fits. */
	t2 = guarded(&env.b, 20);
	add(0x21, t2, 20, 71, 0);
	sh_send_rndv(&env, 0, 0x21, 0x2323, (uintptr_t)s.buf, s.mr->rkey, 10000, NULL, 0, 2);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	memcpy(&tmh, t2, sizeof(tmh));
	tap_check(n >= 1 && wc[n - 1].status == IBV_WC_TM_RNDV_INCOMPLETE && wc[n - 1].wr_id == 71 &&
		  tmh.opcode == IBV_TMH_RNDV && be64toh(tmh.tag) == 0x21 &&
		  sh_all(t2 + 20, 64, 0xEE),
		  "20-byte tagged buffer: RNDV_INCOMPLETE, first 20 bytes of TMH+RVH, nothing past (n=%d)",
		  n);

	/* The entry is gone: the same tag goes unexpected now. */
	pb = guarded(&env.b, 128);
	sh_post_plain(&env.b, 904, pb, 128);
	sh_send_rndv(&env, 0, 0x20, 0, (uintptr_t)s.buf, s.mr->rkey, 10000, NULL, 0, 3);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &w);
	tap_check(n == 1 && w.wr_id == 904 && !(w.wc_flags & MD),
		  "after RNDV_INCOMPLETE the entry was consumed: same tag now unexpected");
	freesrc(&s);
	sh_env_close(&env);
}

static void test_bad_rkey(void)
{
	struct sh_wc wc[4], w;
	struct src s, ro;
	char *t;
	int n;

	open_env(0, 0, 1);
	s = mksrc(4096, 4, IBV_ACCESS_REMOTE_READ);
	ro = mksrc(4096, 5, IBV_ACCESS_LOCAL_WRITE);
	sh_post_plain(&env.a, 905, sh_alloc(&env.a, 64), 64);

	t = guarded(&env.b, 8192);
	add(0x30, t, 8192, 80, 0);
	sh_send_rndv(&env, 0, 0x30, 0, (uintptr_t)s.buf, s.mr->rkey ^ 0x5a5a00, 4096, NULL, 0, 1);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && (wc[0].wc_flags & MD) == IBV_WC_TM_MATCH && wc[0].wr_id == 80 &&
		  wc[1].status == IBV_WC_REM_ACCESS_ERR && wc[1].wr_id == 80,
		  "RNDV with a wrong rkey: MATCH, then IBV_WC_REM_ACCESS_ERR (n=%d %s)", n,
		  n > 1 ? sh_wc_str(&wc[1]) : "");
	tap_check(sh_all(t, 8192 + 64, 0xEE), "wrong rkey: nothing written to the tagged buffer");
	tap_check(sh_poll(env.a.cq, &w) == 0, "wrong rkey: no FIN");
	sh_pair_add(&env);

	t = guarded(&env.b, 8192);
	add(0x31, t, 8192, 81, 0);
	sh_send_rndv(&env, 1, 0x31, 0, (uintptr_t)s.buf, s.mr->rkey, 4097, NULL, 0, 2);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && wc[1].status == IBV_WC_REM_ACCESS_ERR && wc[1].wr_id == 81 &&
		  sh_all(t, 8192 + 64, 0xEE) && sh_poll(env.a.cq, &w) == 0,
		  "RNDV one byte longer than the sender's MR: REM_ACCESS_ERR, nothing written, no FIN (n=%d)",
		  n);
	sh_pair_add(&env);

	t = guarded(&env.b, 8192);
	add(0x32, t, 8192, 82, 0);
	sh_send_rndv(&env, 2, 0x32, 0, (uintptr_t)ro.buf, ro.mr->rkey, 4096, NULL, 0, 3);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && wc[1].status == IBV_WC_REM_ACCESS_ERR && wc[1].wr_id == 82 &&
		  sh_all(t, 8192 + 64, 0xEE) && sh_poll(env.a.cq, &w) == 0,
		  "RNDV naming an MR without REMOTE_READ: REM_ACCESS_ERR, no FIN (n=%d)", n);
	freesrc(&s);
	freesrc(&ro);
	sh_env_close(&env);
}

static void test_unexpected_rndv(int copy)
{
	const char *mode = copy ? "copy-read" : "cma";
	struct softhca_stats sb;
	struct ibv_tmh tmh;
	struct ibv_rvh rvh;
	struct sh_wc w;
	struct src s;
	char *pb, *rd, *fin, meta[24], finmsg[32];
	int n;

	open_env(copy, 512, 1);
	s = mksrc(100000, 6, IBV_ACCESS_REMOTE_READ);
	fin = guarded(&env.a, 64);
	sh_post_plain(&env.a, 906, fin, 64);
	pb = guarded(&env.b, 256);
	sh_post_plain(&env.b, 907, pb, 256);
	sh_fill(meta, sizeof(meta), 60);
	sh_send_rndv(&env, 0, 0x40, 0x4444, (uintptr_t)s.buf, s.mr->rkey, 100000, meta,
		     sizeof(meta), 1);
	sh_flush(&env);
	n = sh_poll(env.b.cq, &w);
	tap_check(n == 1 && w.opcode == IBV_WC_TM_RECV && !(w.wc_flags & MD) && w.wr_id == 907 &&
		  w.byte_len == 32 + sizeof(meta),
		  "[%s] unexpected RNDV: TM_RECV without MATCH to the plain buffer, byte_len %u (%s)",
		  mode, (unsigned)(32 + sizeof(meta)), sh_wc_str(&w));
	memcpy(&tmh, pb, sizeof(tmh));
	memcpy(&rvh, pb + 16, sizeof(rvh));
	tap_check(tmh.opcode == IBV_TMH_RNDV && be64toh(tmh.tag) == 0x40 &&
		  be32toh(tmh.app_ctx) == 0x4444 && be64toh(rvh.va) == (uintptr_t)s.buf &&
		  be32toh(rvh.rkey) == s.mr->rkey && be32toh(rvh.len) == 100000 &&
		  !memcmp(pb + 32, meta, sizeof(meta)) && sh_all(pb + 56, 200, 0xEE),
		  "[%s] unexpected RNDV: whole TMH+RVH+metadata in the plain buffer", mode);
	sb = sh_stats(&env.b);
	tap_check(sb.hw_unexpected_cnt == 1 && sb.card_reads == 0,
		  "[%s] unexpected RNDV counted; the card did not read", mode);
	tap_check(sh_poll(env.a.cq, &w) == 0, "[%s] no FIN from the card for an unexpected RNDV", mode);

	rd = guarded(&env.b, 100000);
	n = sh_post_read(env.p[0].rqp, rd, env.b.mr->lkey, 100000, be64toh(rvh.va),
			 be32toh(rvh.rkey), 88);
	sh_flush(&env);
	n = n ? -1 : sh_poll(env.p[0].rcq, &w);
	tap_check(n == 1 && w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_RDMA_READ &&
		  w.wr_id == 88 && sh_check(rd, 100000, 6) && sh_all(rd + 100000, 64, 0xEE),
		  "[%s] software RDMA_READ of 100000 bytes (mtu 512) brings the data (%s)", mode,
		  sh_wc_str(&w));
	sb = sh_stats(&env.b);
	if (copy)
		tap_check(sb.copy_reads >= 1 && sb.cma_reads == 0,
			  "[copy-read] software read went by request/response (copy %llu cma %llu)",
			  (unsigned long long)sb.copy_reads, (unsigned long long)sb.cma_reads);
	memcpy(finmsg, pb, 32);
	finmsg[0] = IBV_TMH_FIN;
	sh_send_raw(&env, 0, 1, finmsg, 32, 89);
	sh_flush(&env);
	n = sh_poll(env.a.cq, &w);
	tap_check(n == 1 && w.opcode == IBV_WC_TM_NO_TAG && w.wr_id == 906 && w.byte_len == 32 &&
		  is_fin(fin, 0x40, 0x4444, (uintptr_t)s.buf, s.mr->rkey, 100000),
		  "[%s] software FIN delivered to the sender as TM_NO_TAG (%s)", mode, sh_wc_str(&w));
	n = sh_poll(env.p[0].rcq, &w);
	tap_check(n == 1 && w.wr_id == 89 && w.status == IBV_WC_SUCCESS && w.opcode == IBV_WC_SEND,
		  "[%s] the software FIN's send completes on the receiver's QP send CQ", mode);
	freesrc(&s);
	sh_env_close(&env);
}

/* rdma-core's test_tm_rndv: the sender's QP has a plain receive queue. */
static void test_fin_to_plain_rq(void)
{
	struct ibv_cq_ex *scq, *rcq, *bscq;
	struct ibv_qp *aqp, *bqp;
	struct sh_wc wc[4], w;
	struct src s;
	char *fin, *t;
	struct ibv_sge sge;
	struct ibv_recv_wr rwr, *bad;
	char msg[32];
	int n;

	open_env(0, 0, 0);
	scq = sh_cq_ex(env.a.ctx, 16);
	rcq = sh_cq_ex(env.a.ctx, 16);
	bscq = sh_cq_ex(env.b.ctx, 16);
	aqp = sh_qp_create(&env.a, scq, NULL, rcq);
	bqp = sh_qp_create(&env.b, bscq, env.b.srq, NULL);
	if (!aqp || !bqp || sh_qp_connect(aqp, &env.b.gid, bqp->qp_num) ||
	    sh_qp_connect(bqp, &env.a.gid, aqp->qp_num))
		tap_bail("plain-RQ pair");
	s = mksrc(3000, 7, IBV_ACCESS_REMOTE_READ);
	fin = guarded(&env.a, 64);
	sge = (struct ibv_sge){ .addr = (uintptr_t)fin, .length = 64, .lkey = env.a.mr->lkey };
	rwr = (struct ibv_recv_wr){ .wr_id = 910, .sg_list = &sge, .num_sge = 1 };
	bad = NULL;
	if (ibv_post_recv(aqp, &rwr, &bad))
		tap_bail("post_recv");
	t = guarded(&env.b, 3000);
	add(0x50, t, 3000, 90, 0);
	n = sh_put_tmh(msg, IBV_TMH_RNDV, 0x5, 0x50);
	sh_put_rvh(msg + n, (uintptr_t)s.buf, s.mr->rkey, 3000);
	sh_qp_send(&env.a, aqp, msg, 32, 1, IBV_SEND_SIGNALED);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && (wc[0].wc_flags & MD) == IBV_WC_TM_MATCH &&
		  (wc[1].wc_flags & MD) == IBV_WC_TM_DATA_VALID && sh_check(t, 3000, 7),
		  "RNDV from a QP without SRQ: matched and read (n=%d)", n);
	n = sh_poll(rcq, &w);
	tap_check(n == 1 && w.opcode == IBV_WC_RECV && w.wr_id == 910 && w.byte_len == 32 &&
		  is_fin(fin, 0x50, 0x5, (uintptr_t)s.buf, s.mr->rkey, 3000),
		  "FIN to a sender with a plain receive queue completes IBV_WC_RECV (%s)",
		  sh_wc_str(&w));
	softhca_verbs()->destroy_qp(aqp);
	softhca_verbs()->destroy_qp(bqp);
	sh_cq_destroy(scq);
	sh_cq_destroy(rcq);
	sh_cq_destroy(bscq);
	freesrc(&s);
	sh_env_close(&env);
}

static void test_many(int copy)
{
	const char *mode = copy ? "copy-read" : "cma";
	struct sh_wc wc[16];
	struct src s[3];
	char *t[3], *fin[3];
	int n, i, j, ok_match = 1, ok_dv = 1, ok_fin = 1;
	unsigned seen = 0;
	uint32_t len[3] = { 70000, 1, 300000 };

	open_env(copy, 1024, 3);
	for (i = 0; i < 3; i++) {
		s[i] = mksrc(len[i], 100 + i, IBV_ACCESS_REMOTE_READ);
		fin[i] = guarded(&env.a, 64);
		sh_post_plain(&env.a, 920 + i, fin[i], 64);
		t[i] = guarded(&env.b, len[i]);
		add(0x60 + i, t[i], len[i], 95 + i, 0);
	}
	for (i = 0; i < 3; i++)
		sh_send_rndv(&env, i, 0x60 + i, 0x600 + i, (uintptr_t)s[i].buf, s[i].mr->rkey,
			     len[i], NULL, 0, i);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 16);
	for (i = 0; i < 3; i++) {
		int m = 0, d = 0;

		for (j = 0; j < n; j++) {
			if (wc[j].wr_id != (uint64_t)(95 + i))
				continue;
			if ((wc[j].wc_flags & MD) == IBV_WC_TM_MATCH && !d)
				m++;
			if ((wc[j].wc_flags & MD) == IBV_WC_TM_DATA_VALID &&
			    wc[j].status == IBV_WC_SUCCESS && wc[j].byte_len == len[i])
				d++;
		}
		ok_match &= m == 1;
		ok_dv &= d == 1 && sh_check(t[i], len[i], 100 + i) &&
			 sh_all(t[i] + len[i], 64, 0xEE);
	}
	tap_check(n == 6 && ok_match, "[%s] three rendezvous at once: one MATCH each, before its data (n=%d)",
		  mode, n);
	tap_check(ok_dv, "[%s] three rendezvous at once (70000, 1, 300000 B): data and byte_len right",
		  mode);
	n = sh_poll_all(env.a.cq, wc, 16);
	/* Plain buffers are taken in arrival order: find the FIN's pair by its tag. */
	for (i = 0; i < n; i++) {
		int b = (int)wc[i].wr_id - 920, k = -1;
		struct ibv_tmh tmh;

		if (b >= 0 && b < 3) {
			memcpy(&tmh, fin[b], sizeof(tmh));
			k = (int)(be64toh(tmh.tag) - 0x60);
		}
		ok_fin &= k >= 0 && k < 3 && wc[i].opcode == IBV_WC_TM_NO_TAG &&
			  is_fin(fin[b], 0x60 + k, 0x600 + k, (uintptr_t)s[k].buf, s[k].mr->rkey,
				 len[k]) &&
			  wc[i].qp_num == env.p[k].sqp->qp_num;
		if (k >= 0 && k < 3)
			seen |= 1u << k;
	}
	ok_fin &= seen == 7;
	tap_check(n == 3 && ok_fin, "[%s] three FINs, each on its QP with its own TMH/RVH (n=%d)",
		  mode, n);
	for (i = 0; i < 3; i++)
		freesrc(&s[i]);
	sh_env_close(&env);
}

/*
 * AUTO: a card run reads at most 1 MiB of a rendezvous (SH_READ_CHUNK,
 * read pacing), whatever the clock says (a run may read less, or nothing
 * while posts are recent).  So a 4 MiB read needs four card runs, and a
 * poll runs the card once: the data completion cannot come before the
 * fourth poll.  (The bound only; never a timing.)
 */
static void test_read_pacing(void)
{
	const uint32_t len = 4u << 20;
	struct softhca_config cfg;
	struct softhca_stats st;
	struct sh_wc wc, aw;
	struct src s;
	char *t, *fin;
	int polls = 0, data_at = 0, match_at = 0;

	sh_config(&cfg);
	cfg.strict = 0;
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_AUTO, 1))
		tap_bail("sh_env_open failed");
	s = mksrc(len, 7, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	fin = guarded(&env.a, 128);
	sh_post_plain(&env.a, 901, fin, 128);
	t = sh_alloc(&env.b, len);
	add(0x77, t, len, 60, 0);
	sh_send_rndv(&env, 0, 0x77, 0, (uintptr_t)s.buf, s.mr->rkey, len,
		     NULL, 0, 1);
	while (!data_at && ++polls < 20000000) {
		/* (the sender's card too, for a copy read or the FIN) */
		sh_poll(env.a.cq, &aw);
		if (sh_poll(env.b.cq, &wc) != 1)
			continue;
		if (wc.wc_flags & IBV_WC_TM_MATCH)
			match_at = polls;
		if (wc.wc_flags & IBV_WC_TM_DATA_VALID)
			data_at = polls;
	}
	st = sh_stats(&env.b);
	tap_check(match_at && data_at && sh_check(t, len, 7),
		  "[pacing] 4 MiB rendezvous: matched at poll %d, data at poll %d",
		  match_at, data_at);
	if (st.cma_reads)
		tap_check(data_at >= 4,
			  "[pacing] at most 1 MiB per card run: the data completion "
			  "comes at the fourth poll or later (poll %d)", data_at);
	else
		tap_diag("[pacing] no cma read here: the bound is not checked");
	freesrc(&s);
	sh_env_close(&env);
}

int main(void)
{
	alarm(60);
	test_matched(0);
	test_matched(1);
	test_small_and_maxhdr();
	test_incomplete();
	test_bad_rkey();
	test_unexpected_rndv(0);
	test_unexpected_rndv(1);
	test_fin_to_plain_rq();
	test_many(0);
	test_many(1);
	test_read_pacing();
	return tap_done();
}
