/*
 * test_mlx5_rules.c - soft HCA: what a ConnectX (mlx5) card refuses and the
 * completion shapes it produces (doc/mlx5-rules.md; each TAP line names
 * the rule it pins).  The strict-mode rules run with cfg.strict = 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "sh_util.h"

#define ALL ~0ULL

static struct sh_env env;

static void open_env(int strict, uint32_t max_num_tags)
{
	struct softhca_config cfg;

	sh_config(&cfg);
	cfg.strict = strict;
	if (max_num_tags)
		cfg.max_num_tags = max_num_tags;
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_MANUAL, 1))
		tap_bail("sh_env_open failed");
}

static struct ibv_srq *tm_srq(struct sh_side *s, struct ibv_cq *cq,
			      uint32_t max_wr, uint32_t tags, uint32_t ops)
{
	struct ibv_srq_init_attr_ex sa;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = max_wr;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = s->pd;
	sa.cq = cq;
	sa.tm_cap.max_num_tags = tags;
	sa.tm_cap.max_ops = ops;
	errno = 0;
	return ibv_create_srq_ex(s->ctx, &sa);
}

static struct ibv_qp *rc_qp(struct sh_side *s, struct ibv_cq_ex *scq,
			    uint32_t max_send_wr)
{
	struct ibv_qp_init_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = ibv_cq_ex_to_cq(scq);
	qa.recv_cq = ibv_cq_ex_to_cq(s->cq);
	qa.srq = s->srq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = max_send_wr;
	qa.cap.max_send_sge = max_send_wr ? 1 : 0;
	errno = 0;
	return sh_v()->create_qp(s->pd, &qa);
}

/*
 * Pair 1 in the hardware's layout: a's sending QP connected to a QP on b
 * with no send queue (the card's rendezvous QP on b).
 */
static int add_nosq_pair(void)
{
	struct sh_pair *p = &env.p[env.npairs];

	memset(p, 0, sizeof(*p));
	p->scq = sh_cq_ex(env.a.ctx, 64);
	p->rcq = sh_cq_ex(env.b.ctx, 64);
	if (!p->scq || !p->rcq)
		tap_bail("cq");
	p->sqp = rc_qp(&env.a, p->scq, 64);
	p->rqp = rc_qp(&env.b, p->rcq, 0);
	if (!p->sqp || !p->rqp)
		tap_bail("no-SQ pair");
	if (sh_qp_connect(p->sqp, &env.b.gid, p->rqp->qp_num) ||
	    sh_qp_connect(p->rqp, &env.a.gid, p->sqp->qp_num))
		tap_bail("connect");
	return env.npairs++;
}

static void test_caps_and_limits(void)
{
	const struct ibv_device_attr_ex *at;
	struct ibv_cq_init_attr_ex ca;
	struct ibv_cq *legacy;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_cq_ex *cq;
	uint32_t qpwr;

	open_env(0, 0);
	at = &env.b.attr;
	qpwr = (uint32_t)at->orig_attr.max_qp_wr;
	tap_check(at->tm_caps.max_ops == 32768 && qpwr == 32768 &&
		  at->tm_caps.max_num_tags == 1023 &&
		  at->tm_caps.max_sge == 1 &&
		  at->tm_caps.max_rndv_hdr_size == 64 &&
		  (at->tm_caps.flags & IBV_TM_CAP_RC) &&
		  at->orig_attr.max_cqe == (1 << 22) - 1 &&
		  at->orig_attr.max_qp_rd_atom == 16,
		  "rule 1: caps look like a ConnectX-5 (max_ops %u, max_qp_wr %u, "
		  "max_num_tags %u = 2^10 - 1, max_cqe %d)", at->tm_caps.max_ops,
		  qpwr, at->tm_caps.max_num_tags, at->orig_attr.max_cqe);

	srq = tm_srq(&env.b, ibv_cq_ex_to_cq(env.b.cq), 64, 16,
		     at->tm_caps.max_ops);
	tap_check(!srq && errno == EINVAL,
		  "rule 2: TM-SRQ with max_ops = advertised max refused EINVAL (%d)",
		  errno);
	srq = tm_srq(&env.b, ibv_cq_ex_to_cq(env.b.cq), 64, 16, qpwr / 4);
	tap_check(srq != NULL, "rule 2: max_ops = max_qp_wr / 4 accepted");
	if (srq)
		sh_v()->destroy_srq(srq);
	srq = tm_srq(&env.b, ibv_cq_ex_to_cq(env.b.cq), 64, 16, qpwr / 4 + 1);
	tap_check(!srq && errno == EINVAL,
		  "rule 2: max_ops = max_qp_wr / 4 + 1 refused (command queue "
		  "rounds up past max_send_wqebb) (%d)", errno);

	legacy = sh_v()->create_cq(env.b.ctx, 64, NULL, NULL, 0);
	srq = legacy ? tm_srq(&env.b, legacy, 64, 16, 8) : NULL;
	tap_check(legacy && !srq && errno == EINVAL,
		  "rule 3: TM-SRQ on a legacy (non-extended) CQ refused (%d)",
		  errno);
	if (legacy)
		sh_v()->destroy_cq(legacy);

	srq = tm_srq(&env.b, ibv_cq_ex_to_cq(env.b.cq), 64,
		     at->tm_caps.max_num_tags + 1, 8);
	tap_check(!srq && errno == EINVAL,
		  "rule 4: max_num_tags above the cap refused (%d)", errno);
	srq = tm_srq(&env.b, ibv_cq_ex_to_cq(env.b.cq),
		     (uint32_t)at->orig_attr.max_srq_wr + 1, 16, 8);
	tap_check(!srq && errno == EINVAL,
		  "rule 4: a TM-SRQ with attr.max_wr above max_srq_wr refused (%d)",
		  errno);
	if (srq)
		sh_v()->destroy_srq(srq);
	srq = tm_srq(&env.b, ibv_cq_ex_to_cq(env.b.cq), 32, 16, 8);
	tap_check(srq != NULL,
		  "rule 5: not strict: a TM-SRQ with 32 plain WQEs is created");
	if (srq)
		sh_v()->destroy_srq(srq);

	qp = rc_qp(&env.a, env.a.cq, qpwr);
	tap_check(!qp && errno == EINVAL,
		  "rule 2: RC QP with max_send_wr = max_qp_wr refused (256-byte "
		  "WQEs) (%d)", errno);
	qp = rc_qp(&env.a, env.a.cq, qpwr / 4);
	tap_check(qp != NULL, "rule 2: RC QP with max_send_wr = max_qp_wr / 4 "
		  "created");
	if (qp)
		sh_v()->destroy_qp(qp);

	memset(&ca, 0, sizeof(ca));
	ca.cqe = (uint32_t)at->orig_attr.max_cqe + 1;
	ca.wc_flags = IBV_WC_STANDARD_FLAGS;
	errno = 0;
	cq = ibv_create_cq_ex(env.a.ctx, &ca);
	tap_check(!cq && errno == EINVAL, "CQ above max_cqe refused (%d)",
		  errno);
	sh_env_close(&env);
}

/* pair p's sender was created with 1 send SGE and no inline request */
static void test_send_limits(int p)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_sge sge[2];
	char *buf = sh_alloc(&env.a, 128);
	int ret;

	struct ibv_qp_init_attr ca;
	struct ibv_qp *qp;

	memset(&ca, 0, sizeof(ca));
	ca.send_cq = ca.recv_cq = ibv_cq_ex_to_cq(env.a.cq);
	ca.srq = env.a.srq;
	ca.qp_type = IBV_QPT_RC;
	ca.cap.max_send_wr = 16;
	ca.cap.max_send_sge = 1;
	qp = sh_v()->create_qp(env.a.pd, &ca);
	tap_check(qp && ca.cap.max_inline_data == 60,
		  "rule 11: creating a 1-SGE RC QP returns max_inline_data 60 "
		  "(256-byte WQE less control and inline headers) (%u)",
		  ca.cap.max_inline_data);
	if (qp)
		sh_v()->destroy_qp(qp);
	memset(&qi, 0, sizeof(qi));
	sh_v()->query_qp(env.p[p].sqp, &qa, IBV_QP_CAP, &qi);
	tap_check(qi.cap.max_inline_data == 60 && qi.cap.max_send_sge == 1,
		  "rule 11: query_qp reports the same (%u, %u SGE)",
		  qi.cap.max_inline_data, qi.cap.max_send_sge);
	memset(buf, 0, 128);
	buf[0] = IBV_TMH_NO_TAG;
	/* AUTO: a card that starts a one-packet SEND at its post, so on a
	 * lock-free context (the suite's second run) the one-WR post path
	 * must refuse these itself */
	softhca_set_sched(env.a.ctx, SOFTHCA_SCHED_AUTO, 0);
	for (int i = 0; i < 2; i++) {
		sge[i].addr = (uintptr_t)buf + 32u * (uint32_t)i;
		sge[i].length = 16;
		sge[i].lkey = env.a.mr->lkey;
	}
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = sge;
	wr.num_sge = 2;
	wr.opcode = IBV_WR_SEND;
	ret = ibv_post_send(env.p[p].sqp, &wr, &bad);
	tap_check(ret == ENOMEM && bad == &wr,
		  "rule 11: 2 SGEs on a QP created with max_send_sge 1: ENOMEM (%d)",
		  ret);
	sge[0].length = 61;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_INLINE;
	ret = ibv_post_send(env.p[p].sqp, &wr, &bad);
	tap_check(ret == ENOMEM,
		  "rule 11: 61 inline bytes past max_inline_data 60: ENOMEM (%d)",
		  ret);
	sge[0].length = 60;
	ret = ibv_post_send(env.p[p].sqp, &wr, &bad);
	tap_check(ret == 0, "rule 11: 60 inline bytes post (%d)", ret);
	softhca_set_sched(env.a.ctx, SOFTHCA_SCHED_MANUAL, 0);
}

static void test_nosq_send(void)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	char *buf;
	int p, ret;

	open_env(0, 0);
	p = add_nosq_pair();
	buf = sh_alloc(&env.b, 64);
	sge.addr = (uintptr_t)buf;
	sge.length = 16;
	sge.lkey = env.b.mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 7;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	ret = ibv_post_send(env.p[p].rqp, &wr, &bad);
	tap_check(ret == ENOMEM && bad == &wr,
		  "rule 11: send on a QP without a send queue: ENOMEM, bad_wr set "
		  "(%d)", ret);
	/* no SGE: within max_send_sge 0, so only the queue refuses it */
	wr.num_sge = 0;
	bad = NULL;
	ret = ibv_post_send(env.p[p].rqp, &wr, &bad);
	tap_check(ret == ENOMEM && bad == &wr,
		  "rule 11: a 0-SGE send on a QP without a send queue: ENOMEM "
		  "(the queue, not the SGE count, refuses it) (%d)", ret);
	test_send_limits(p);
	sh_env_close(&env);
}

static void test_strict_srq_min(void)
{
	struct ibv_srq *srq;

	open_env(1, 0);
	srq = tm_srq(&env.b, ibv_cq_ex_to_cq(env.b.cq), 32, 16, 8);
	tap_check(!srq && errno == EINVAL,
		  "rule 5: strict: TM-SRQ with 32 plain WQEs refused (%d)", errno);
	srq = tm_srq(&env.b, ibv_cq_ex_to_cq(env.b.cq), 33, 16, 8);
	tap_check(srq != NULL, "rule 5: strict: 33 plain WQEs accepted");
	if (srq)
		sh_v()->destroy_srq(srq);
	sh_env_close(&env);
}

struct src {
	char *buf;
	struct ibv_mr *mr;
};

static struct src mksrc(uint32_t len, uint32_t seed)
{
	struct src s;

	s.buf = malloc(len);
	if (!s.buf)
		tap_bail("malloc");
	sh_fill(s.buf, len, seed);
	s.mr = sh_v()->reg_mr(env.a.pd, s.buf, len, IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_LOCAL_WRITE);
	if (!s.mr)
		tap_bail("reg_mr");
	return s;
}

static void freesrc(struct src *s)
{
	sh_v()->dereg_mr(s->mr);
	free(s->buf);
}

/* Rendezvous on the card's QP (no send queue) and on a QP that has one. */
static void test_strict_rndv(void)
{
	enum { LEN = 10000 };
	struct src s;
	struct sh_wc wc[4];
	char *dst, *plain;
	int p, n;

	open_env(1, 0);
	p = add_nosq_pair();
	s = mksrc(LEN, 11);
	dst = sh_alloc(&env.b, LEN);
	plain = sh_alloc(&env.a, 256);
	sh_post_plain(&env.a, 900, plain, 256);

	sh_add(&env.b, 1, 501, dst, LEN, 0x42, ALL, 0, 0, NULL);
	sh_send_rndv(&env, p, 0x42, 5, (uintptr_t)s.buf, s.mr->rkey, LEN,
		     NULL, 0, 61);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && wc[0].status == IBV_WC_SUCCESS &&
		  wc[0].opcode == IBV_WC_TM_RECV &&
		  wc[0].wc_flags == IBV_WC_TM_MATCH && wc[0].wr_id == 501 &&
		  wc[0].tag == 0x42,
		  "rule 15: strict, no-SQ QP: first completion TM_RECV MATCH only "
		  "(%d: %s)", n, n ? sh_wc_str(&wc[0]) : "-");
	tap_check(n == 2 && wc[0].byte_len == 0,
		  "rule 15: strict: the first completion carries no length (%u)",
		  n ? wc[0].byte_len : 0);
	tap_check(n == 2 && wc[1].status == IBV_WC_SUCCESS &&
		  wc[1].wc_flags == IBV_WC_TM_DATA_VALID &&
		  wc[1].byte_len == LEN && wc[1].wr_id == 501 &&
		  sh_check(dst, LEN, 11),
		  "rule 15: then DATA_VALID with the length, data in place (%s)",
		  n == 2 ? sh_wc_str(&wc[1]) : "-");
	tap_check(sh_stats(&env.b).card_reads == 1,
		  "rule 10: the card read it (card_reads %lu)",
		  (unsigned long)sh_stats(&env.b).card_reads);
	n = sh_poll_all(env.a.cq, wc, 4);
	tap_check(n == 1 && wc[0].opcode == IBV_WC_TM_NO_TAG &&
		  wc[0].wr_id == 900 && (uint8_t)plain[0] == IBV_TMH_FIN,
		  "rule 12: the card's FIN reaches the sender's TM-SRQ as "
		  "TM_NO_TAG in a plain buffer (%d)", n);
	sh_cq_discard(env.p[p].scq);

	/* pair 0: b's QP has a send queue: no card rendezvous there */
	memset(dst, 0, LEN);
	sh_add(&env.b, 2, 502, dst, LEN, 0x43, ALL, 0, 0, NULL);
	sh_send_rndv(&env, 0, 0x43, 6, (uintptr_t)s.buf, s.mr->rkey, LEN,
		     NULL, 0, 62);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && wc[0].status == IBV_WC_TM_RNDV_INCOMPLETE &&
		  wc[0].wc_flags == IBV_WC_TM_MATCH && wc[0].wr_id == 502 &&
		  wc[1].status == IBV_WC_SUCCESS &&
		  wc[1].wc_flags == IBV_WC_TM_DATA_VALID &&
		  wc[1].byte_len == SH_TMH_LEN + SH_RVH_LEN,
		  "rule 10/16: strict, QP with a send queue: handed to software "
		  "(RNDV_INCOMPLETE MATCH, then DATA_VALID with the header) (%d: %s)",
		  n, n ? sh_wc_str(&wc[0]) : "-");
	tap_check(sh_stats(&env.b).card_reads == 1 &&
		  ((const struct ibv_tmh *)dst)->opcode == IBV_TMH_RNDV,
		  "rule 10: no card read; TMH+RVH left in the tagged buffer");
	freesrc(&s);
	sh_env_close(&env);
}

/* RNDV too big for the buffer: the tag stays held until the second. */
static void test_strict_rndv_incomplete(void)
{
	struct src s;
	struct sh_wc wc;
	char *dst;
	uint32_t h;
	int p, ret, got;

	open_env(1, 1);
	p = add_nosq_pair();
	s = mksrc(4096, 3);
	dst = sh_alloc(&env.b, 64);
	sh_add(&env.b, 1, 601, dst, 64, 0x7, ALL, 0, 0, &h);
	sh_send_rndv(&env, p, 0x7, 1, (uintptr_t)s.buf, s.mr->rkey, 4096,
		     NULL, 0, 71);
	sh_flush(&env);
	got = sh_poll(env.b.cq, &wc);
	tap_check(got == 1 && wc.status == IBV_WC_TM_RNDV_INCOMPLETE &&
		  wc.wc_flags == IBV_WC_TM_MATCH && wc.wr_id == 601,
		  "rule 16: strict: RNDV_INCOMPLETE with MATCH only (%s)",
		  got == 1 ? sh_wc_str(&wc) : "none");
	ret = sh_add(&env.b, 2, 602, dst, 64, 0x8, ALL, 0, 0, NULL);
	tap_check(ret == ENOMEM,
		  "rule 16: strict: the tag is still held after the first "
		  "completion (1-entry list: ADD fails ENOMEM, %d)", ret);
	got = sh_poll(env.b.cq, &wc);
	tap_check(got == 1 && wc.status == IBV_WC_SUCCESS &&
		  wc.wc_flags == IBV_WC_TM_DATA_VALID && wc.wr_id == 601 &&
		  wc.byte_len == SH_TMH_LEN + SH_RVH_LEN,
		  "rule 16: strict: then DATA_VALID with the header length (%s)",
		  got == 1 ? sh_wc_str(&wc) : "none");
	ret = sh_add(&env.b, 3, 603, dst, 64, 0x9, ALL, 0, 0, NULL);
	tap_check(ret == 0, "rule 16: polled, the tag is free again (%d)", ret);
	freesrc(&s);
	sh_env_close(&env);
}

/* Eager longer than the tagged buffer: no tagged error, QP to error. */
static void test_strict_overflow(void)
{
	char payload[200], *dst, *plain;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct sh_wc wc[4];
	int n;

	open_env(1, 0);
	dst = sh_alloc(&env.b, 64);
	plain = sh_alloc(&env.b, 512);
	sh_post_plain(&env.b, 800, plain, 512);
	sh_fill(payload, sizeof(payload), 9);
	sh_add(&env.b, 1, 701, dst, 64, 0x5, ALL, 0, 0, NULL);
	sh_send_tm(&env, 0, IBV_TMH_EAGER, 0x5, 0, payload, sizeof(payload),
		   81);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n >= 1 && wc[0].status == IBV_WC_LOC_LEN_ERR &&
		  wc[0].opcode == IBV_WC_RECV && wc[0].wr_id == 800,
		  "rule 17: strict: eager overflow completes the plain WQE with "
		  "LOC_LEN_ERR (%d: %s)", n, n ? sh_wc_str(&wc[0]) : "-");
	tap_check(n == 1 || (n > 1 && wc[1].wr_id != 701),
		  "rule 17: strict: no completion names the tagged buffer");
	memset(&qa, 0, sizeof(qa));
	sh_v()->query_qp(env.p[0].rqp, &qa, IBV_QP_STATE, &qi);
	tap_check(qa.qp_state == IBV_QPS_ERR,
		  "rule 17: strict: the receiving QP is in the error state (%d)",
		  qa.qp_state);
	sh_env_close(&env);
}

/* SYNC_REQ on unexpected arrivals only past mlx5's 0x3fff lag (rule 9). */
static void test_sync_req_lag(void)
{
	char *plain, payload[8] = { 0 };
	struct sh_wc wc;
	uint32_t i, flag_at_3fff = 1, flag_at_4000 = 0, bad = 0;

	open_env(0, 0);
	plain = sh_alloc(&env.b, 64);
	for (i = 1; i <= 0x4000; i++) {
		sh_post_plain(&env.b, i, plain, 64);
		sh_send_tm(&env, 0, IBV_TMH_EAGER, 0x99, 0, payload,
			   sizeof(payload), i);
		sh_flush(&env);
		sh_cq_discard(env.p[0].scq);
		if (sh_poll(env.b.cq, &wc) != 1 || wc.wr_id != i) {
			bad++;
			continue;
		}
		if (i == 0x3fff)
			flag_at_3fff = wc.wc_flags & IBV_WC_TM_SYNC_REQ;
		if (i == 0x4000)
			flag_at_4000 = wc.wc_flags & IBV_WC_TM_SYNC_REQ;
	}
	tap_check(!bad && !flag_at_3fff && flag_at_4000,
		  "rule 9: unexpected arrivals: no SYNC_REQ up to 0x3fff behind, "
		  "SYNC_REQ at 0x4000 (bad %u, 0x%x, 0x%x)", bad, flag_at_3fff,
		  flag_at_4000);
	sh_env_close(&env);
}

/*
 * mlx5 sets SYNC_REQ only on list-op and unexpected completions: a match
 * and its data completion carry none even while the card is ahead.
 */
static void test_no_sync_req_on_matches(void)
{
	enum { LEN = 8192 };
	char *dst, *plain, payload[8] = { 0 };
	struct sh_wc wc[4];
	struct src s;
	int n;

	open_env(0, 0);
	s = mksrc(LEN, 5);
	dst = sh_alloc(&env.b, LEN);
	plain = sh_alloc(&env.b, 64);
	sh_post_plain(&env.b, 900, plain, 64);
	sh_add(&env.b, 1, 701, dst, LEN, 0x31, ALL, 0, IBV_OPS_TM_SYNC, NULL);
	sh_flush(&env);
	sh_send_tm(&env, 0, IBV_TMH_EAGER, 0x99, 0, payload, sizeof(payload),
		   1);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	if (n != 1 || wc[0].wr_id != 900)
		tap_bail("the unexpected arrival");
	sh_send_rndv(&env, 0, 0x31, 2, (uintptr_t)s.buf, s.mr->rkey, LEN,
		     NULL, 0, 2);
	sh_flush(&env);
	n = sh_poll_all(env.b.cq, wc, 4);
	tap_check(n == 2 && wc[0].wr_id == 701 && wc[1].wr_id == 701 &&
		  !((wc[0].wc_flags | wc[1].wc_flags) & IBV_WC_TM_SYNC_REQ) &&
		  sh_stats(&env.b).hw_unexpected_cnt == 1,
		  "rule 9: a rendezvous matched while the card is 1 ahead: "
		  "no SYNC_REQ on its MATCH or DATA_VALID completion (%d: 0x%x 0x%x)",
		  n, n > 0 ? wc[0].wc_flags : 0, n > 1 ? wc[1].wc_flags : 0);
	freesrc(&s);
	sh_env_close(&env);
}

/* A chain of ADDs in wr[0..n-1] (tags 0x40 + i), linked, unsignalled. */
static void chain_adds(struct ibv_ops_wr *wr, struct ibv_sge *sge, int n,
		       char *buf)
{
	int i;

	memset(wr, 0, n * sizeof(*wr));
	for (i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)(buf + 64 * i);
		sge[i].length = 64;
		sge[i].lkey = env.b.mr->lkey;
		wr[i].wr_id = 500 + i;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].opcode = IBV_WR_TAG_ADD;
		wr[i].flags = IBV_OPS_TM_SYNC;
		wr[i].tm.add.recv_wr_id = 600 + i;
		wr[i].tm.add.sg_list = &sge[i];
		wr[i].tm.add.num_sge = 1;
		wr[i].tm.add.tag = 0x40 + i;
		wr[i].tm.add.mask = ALL;
	}
}

/*
 * Rule 23: ibv_post_srq_ops takes a linked list.  The ops before the first
 * refused one are posted (one doorbell for them all) and stay posted; the
 * refused op is returned in *bad and nothing after it is looked at.
 */
static void test_op_chain(void)
{
	struct ibv_ops_wr wr[4], *bad;
	struct ibv_sge sge[4];
	struct softhca_stats st0, st;
	char *buf, payload[8] = { 0 };
	struct sh_wc wc;
	int ret;

	open_env(0, 3);
	buf = sh_alloc(&env.b, 4 * 64);
	st0 = sh_stats(&env.b);
	chain_adds(wr, sge, 4, buf);
	bad = NULL;
	ret = ibv_post_srq_ops(env.b.srq, wr, &bad);
	sh_flush(&env);
	st = sh_stats(&env.b);
	tap_check(ret == ENOMEM && bad == &wr[3] && st.list_entries == 3 &&
		  st.adds_posted - st0.adds_posted == 3 &&
		  st.ops_doorbells - st0.ops_doorbells == 1 &&
		  wr[0].tm.handle != wr[1].tm.handle &&
		  wr[1].tm.handle != wr[2].tm.handle &&
		  wr[0].tm.handle != wr[2].tm.handle,
		  "rule 23: a chain of 4 ADDs on a 3-entry list: ENOMEM, *bad "
		  "is the 4th, the first 3 posted under one doorbell (ret %d, "
		  "bad %td, entries %u, doorbells %llu)", ret,
		  bad ? bad - wr : -1, st.list_entries,
		  (unsigned long long)(st.ops_doorbells - st0.ops_doorbells));
	sh_send_tm(&env, 0, IBV_TMH_EAGER, 0x41, 0, payload, sizeof(payload), 1);
	sh_flush(&env);
	memset(&wc, 0, sizeof(wc));
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.wr_id == 601 &&
		  (wc.wc_flags & IBV_WC_TM_MATCH),
		  "rule 23: ... and they stay posted: the 2nd entry matches "
		  "its message (%s)", sh_wc_str(&wc));
	st0 = sh_stats(&env.b);
	chain_adds(wr, sge, 2, buf);
	bad = NULL;
	ret = ibv_post_srq_ops(env.b.srq, wr, &bad);
	st = sh_stats(&env.b);
	tap_check(ret == ENOMEM && bad == &wr[1] &&
		  st.adds_posted - st0.adds_posted == 1 &&
		  st.ops_doorbells - st0.ops_doorbells == 1,
		  "rule 23: the freed entry takes the chain's first ADD, the "
		  "second is refused (ret %d, bad %td)", ret, bad ? bad - wr : -1);
	st0 = st;
	chain_adds(wr, sge, 1, buf);
	bad = NULL;
	ret = ibv_post_srq_ops(env.b.srq, wr, &bad);
	st = sh_stats(&env.b);
	tap_check(ret == ENOMEM && bad == &wr[0] &&
		  st.adds_posted == st0.adds_posted &&
		  st.ops_doorbells == st0.ops_doorbells,
		  "rule 23: a chain refused at its first op posts nothing and "
		  "rings no doorbell");
	sh_env_close(&env);

	open_env(0, 0);
	buf = sh_alloc(&env.b, 4 * 64);
	chain_adds(wr, sge, 3, buf);
	wr[1].opcode = (enum ibv_ops_wr_opcode)0x7f; /* no list op */
	bad = NULL;
	ret = ibv_post_srq_ops(env.b.srq, wr, &bad);
	sh_flush(&env);
	st = sh_stats(&env.b);
	tap_check(ret == EINVAL && bad == &wr[1] && st.list_entries == 1 &&
		  st.adds_posted == 1 && st.ops_doorbells == 1,
		  "rule 23: an invalid op in the middle: EINVAL, *bad names it, "
		  "the ADD before it is posted, the one after it is not "
		  "(entries %u)", st.list_entries);
	sh_env_close(&env);
}

int main(void)
{
	/* each check sets the mode it needs */
	unsetenv("TM_SOFTHCA_STRICT");
	test_sync_req_lag();
	test_no_sync_req_on_matches();
	test_caps_and_limits();
	test_nosq_send();
	test_strict_srq_min();
	test_strict_rndv();
	test_strict_rndv_incomplete();
	test_strict_overflow();
	test_op_chain();
	return tap_done();
}
