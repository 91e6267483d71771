/*
 * test_cq.c - soft HCA: extended CQ poll API, legacy ibv_poll_cq, send
 * completions, CQ growth, an entry held while more are pushed, inline sends, QP receive queues and basic SRQs,
 * and which CQ a QP on a TM-SRQ completes on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "sh_util.h"

#define TM_FLAGS (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID | IBV_WC_TM_SYNC_REQ)

static struct sh_env env;

static void test_poll_api(void)
{
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	struct ibv_cq_ex *cq = env.b.cq;
	char *buf[3], msg[40];
	int ret, i, ok;

	ret = ibv_start_poll(cq, &pa);
	tap_check(ret == ENOENT, "start_poll on an empty CQ returns ENOENT (%d)", ret);

	for (i = 0; i < 3; i++) {
		buf[i] = sh_alloc(&env.b, 256);
		memset(buf[i], 0xEE, 256);
		if (sh_post_plain(&env.b, 100 + i, buf[i], 256))
			tap_bail("post plain");
	}
	for (i = 0; i < 3; i++) {
		sh_put_tmh(msg, IBV_TMH_NO_TAG, 0x1000 + i, 0x77);
		memset(msg + SH_TMH_LEN, 'a' + i, sizeof(msg) - SH_TMH_LEN);
		if (sh_send_raw(&env, 0, 0, msg, 20 + i, 200 + i))
			tap_bail("send");
	}
	sh_flush(&env);

	ret = ibv_start_poll(cq, &pa);
	tap_check(ret == 0, "start_poll returns 0 when a completion is ready (%d)", ret);
	if (ret)
		tap_bail("no completion after a NO_TAG send");
	tap_check(cq->status == IBV_WC_SUCCESS && cq->wr_id == 100,
		  "cq->status SUCCESS and cq->wr_id = plain buffer's wr_id (%d %llu)",
		  cq->status, (unsigned long long)cq->wr_id);
	tap_check(ibv_wc_read_opcode(cq) == IBV_WC_TM_NO_TAG,
		  "read_opcode: IBV_WC_TM_NO_TAG (0x%x)", ibv_wc_read_opcode(cq));
	tap_check(ibv_wc_read_byte_len(cq) == 20,
		  "read_byte_len: whole message length 20 (%u)", ibv_wc_read_byte_len(cq));
	tap_check(ibv_wc_read_qp_num(cq) == env.p[0].rqp->qp_num,
		  "read_qp_num: the receiving QP (%u vs %u)", ibv_wc_read_qp_num(cq),
		  env.p[0].rqp->qp_num);
	tap_check((ibv_wc_read_wc_flags(cq) & TM_FLAGS) == 0,
		  "read_wc_flags: no MATCH/DATA_VALID/SYNC_REQ on NO_TAG (0x%x)",
		  ibv_wc_read_wc_flags(cq));
	ret = ibv_next_poll(cq);
	tap_check(ret == 0 && cq->wr_id == 101 && ibv_wc_read_byte_len(cq) == 21,
		  "next_poll returns the second completion in order");
	ret = ibv_next_poll(cq);
	tap_check(ret == 0 && cq->wr_id == 102 && ibv_wc_read_byte_len(cq) == 22,
		  "next_poll returns the third completion in order");
	ret = ibv_next_poll(cq);
	tap_check(ret == ENOENT, "next_poll returns ENOENT after the last (%d)", ret);
	ibv_end_poll(cq);
	ret = ibv_start_poll(cq, &pa);
	tap_check(ret == ENOENT, "polled completions are consumed: start_poll ENOENT again (%d)", ret);
	if (ret == 0)
		ibv_end_poll(cq);

	ok = 1;
	for (i = 0; i < 3; i++) {
		ok &= (unsigned char)buf[i][0] == IBV_TMH_NO_TAG;
		ok &= sh_all(buf[i] + SH_TMH_LEN, 4 + i, 'a' + i);
		ok &= sh_all(buf[i] + 20 + i, 256 - 20 - i, 0xEE);
	}
	tap_check(ok, "NO_TAG messages delivered whole (TMH included) and nothing more");

	/* Send completions on the sender's send CQ. */
	{
		struct sh_wc wc[4];
		int n = sh_poll_all(env.p[0].scq, wc, 4);

		tap_check(n == 3 && wc[0].wr_id == 200 && wc[1].wr_id == 201 &&
			  wc[2].wr_id == 202 && wc[0].status == IBV_WC_SUCCESS &&
			  wc[0].opcode == IBV_WC_SEND && wc[2].status == IBV_WC_SUCCESS,
			  "signalled sends complete IBV_WC_SEND SUCCESS in order (n=%d %s)", n,
			  n ? sh_wc_str(&wc[0]) : "");
		tap_check(n >= 1 && wc[0].qp_num == env.p[0].sqp->qp_num,
			  "send completion qp_num is the sending QP");
	}
}

static void test_legacy_poll(void)
{
	struct ibv_cq *cq = ibv_cq_ex_to_cq(env.b.cq);
	struct ibv_wc wc[2];
	char *buf = sh_alloc(&env.b, 128), msg[48];
	int n;

	memset(wc, 0, sizeof(wc));
	n = ibv_poll_cq(cq, 2, wc);
	tap_check(n == 0, "ibv_poll_cq on an empty CQ returns 0 (%d)", n);

	if (sh_post_plain(&env.b, 300, buf, 128))
		tap_bail("post plain");
	sh_put_tmh(msg, IBV_TMH_NO_TAG, 0, 0);
	memset(msg + SH_TMH_LEN, 'L', sizeof(msg) - SH_TMH_LEN);
	if (sh_send_raw(&env, 0, 0, msg, sizeof(msg), 301))
		tap_bail("send");
	sh_flush(&env);
	n = ibv_poll_cq(cq, 2, wc);
	tap_check(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 300 &&
		  wc[0].opcode == IBV_WC_TM_NO_TAG && wc[0].byte_len == sizeof(msg) &&
		  wc[0].qp_num == env.p[0].rqp->qp_num,
		  "legacy ibv_poll_cq on a CQ_ex returns the same fields (n=%d wr_id=%llu op=0x%x len=%u)",
		  n, (unsigned long long)wc[0].wr_id, wc[0].opcode, wc[0].byte_len);
	sh_cq_discard(env.p[0].scq);
}

/* A QP pair whose QPs use the given CQs; srq NULL means own RQ. */
static int make_pair(struct ibv_cq *a_scq, struct ibv_cq *b_scq,
		     struct ibv_cq *b_rcq, struct ibv_srq *b_srq,
		     struct ibv_qp **aqp, struct ibv_qp **bqp, int inline_sz)
{
	const struct tm_verbs *v = softhca_verbs();
	struct ibv_qp_init_attr qa;
	uint32_t wr = env.a.attr.orig_attr.max_qp_wr < 512 ?
		      env.a.attr.orig_attr.max_qp_wr : 512;

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = a_scq;
	qa.recv_cq = ibv_cq_ex_to_cq(env.a.cq);
	qa.srq = env.a.srq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = wr;
	qa.cap.max_send_sge = 1;
	qa.cap.max_inline_data = inline_sz;
	*aqp = v->create_qp(env.a.pd, &qa);
	if (!*aqp)
		return -1;
	if (inline_sz && (int)qa.cap.max_inline_data < inline_sz)
		return -2;

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = b_scq;
	qa.recv_cq = b_rcq ? b_rcq : ibv_cq_ex_to_cq(env.b.cq);
	qa.srq = b_srq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = wr;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_wr = b_srq ? 0 : 64;
	qa.cap.max_recv_sge = b_srq ? 0 : 1;
	*bqp = v->create_qp(env.b.pd, &qa);
	if (!*bqp)
		return -1;
	if (sh_qp_connect(*aqp, &env.b.gid, (*bqp)->qp_num) ||
	    sh_qp_connect(*bqp, &env.a.gid, (*aqp)->qp_num))
		return -1;
	return 0;
}

static int post_send(struct ibv_qp *qp, void *buf, uint32_t len, uint32_t lkey,
		     uint64_t wr_id, int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = flags;
	return ibv_post_send(qp, &wr, &bad);
}

static void test_legacy_cq_and_unsignalled(void)
{
	const struct tm_verbs *v = softhca_verbs();
	struct ibv_cq *lcq = v->create_cq(env.a.ctx, 16, NULL, NULL, 0);
	struct ibv_cq_ex *bscq = sh_cq_ex(env.b.ctx, 16);
	struct ibv_qp *aqp = NULL, *bqp = NULL;
	struct ibv_wc wc[4];
	struct sh_wc sw[4];
	char *sbuf = sh_alloc(&env.a, 64), *rbuf = sh_alloc(&env.b, 64);
	int n;

	tap_check(lcq != NULL, "legacy create_cq through the table");
	if (!lcq || !bscq || make_pair(lcq, ibv_cq_ex_to_cq(bscq),
				       NULL, env.b.srq, &aqp, &bqp, 0))
		tap_bail("legacy pair");

	sh_put_tmh(sbuf, IBV_TMH_NO_TAG, 0, 0);
	sh_post_plain(&env.b, 400, rbuf, 64);
	sh_post_plain(&env.b, 401, rbuf, 64);
	n = post_send(aqp, sbuf, 16, env.a.mr->lkey, 410, IBV_SEND_SIGNALED);
	tap_check(n == 0, "send on a QP with a legacy send CQ posts");
	sh_flush(&env);
	n = ibv_poll_cq(lcq, 4, wc);
	tap_check(n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 410 &&
		  wc[0].opcode == IBV_WC_SEND,
		  "legacy CQ: signalled send completes IBV_WC_SEND (n=%d)", n);

	n = post_send(aqp, sbuf, 16, env.a.mr->lkey, 411, 0);
	sh_flush(&env);
	tap_check(n == 0 && ibv_poll_cq(lcq, 4, wc) == 0,
		  "unsignalled send produces no send completion");
	n = sh_poll_all(env.b.cq, sw, 4);
	tap_check(n == 2 && sw[0].wr_id == 400 && sw[1].wr_id == 401 &&
		  sw[1].opcode == IBV_WC_TM_NO_TAG && sw[1].qp_num == bqp->qp_num,
		  "both messages (signalled and unsignalled) were delivered (n=%d)", n);

	v->destroy_qp(aqp);
	v->destroy_qp(bqp);
	tap_check(v->destroy_cq(lcq) == 0, "legacy destroy_cq returns 0");
	sh_cq_destroy(bscq);
}

static void test_cq_growth(void)
{
	struct ibv_cq_ex *tiny = sh_cq_ex(env.a.ctx, 2);
	struct ibv_cq_ex *bscq = sh_cq_ex(env.b.ctx, 2);
	struct ibv_qp *aqp = NULL, *bqp = NULL;
	const int N = 300;
	struct sh_wc wc;
	char *rbuf, msg[16];
	int i, n, inorder;

	if (!tiny || !bscq || make_pair(ibv_cq_ex_to_cq(tiny), ibv_cq_ex_to_cq(bscq),
					NULL, env.b.srq, &aqp, &bqp, 0))
		tap_bail("growth pair");
	rbuf = sh_alloc(&env.b, 64 * N);
	for (i = 0; i < N; i++)
		if (sh_post_plain(&env.b, 1000 + i, rbuf + 64 * i, 64))
			tap_bail("post plain");
	for (i = 0; i < N; i++) {
		sh_put_tmh(msg, IBV_TMH_NO_TAG, i, i);
		if (sh_qp_send(&env.a, aqp, msg, 16, 5000 + i, IBV_SEND_SIGNALED))
			sh_die("send %d", i);
		if (i % 50 == 49)
			sh_flush(&env);
	}
	sh_flush(&env);
	n = 0;
	inorder = 1;
	while (sh_poll(tiny, &wc) == 1) {
		inorder &= wc.wr_id == (uint64_t)(5000 + n) && wc.status == IBV_WC_SUCCESS;
		n++;
	}
	tap_check(n == N && inorder,
		  "a CQ created with cqe=2 keeps all %d send completions, in order (got %d)", N, n);
	n = 0;
	inorder = 1;
	while (sh_poll(env.b.cq, &wc) == 1) {
		inorder &= wc.wr_id == (uint64_t)(1000 + n) && wc.opcode == IBV_WC_TM_NO_TAG;
		n++;
	}
	tap_check(n == N && inorder,
		  "the TM-SRQ CQ keeps all %d receive completions, in order (got %d)", N, n);
	softhca_verbs()->destroy_qp(aqp);
	softhca_verbs()->destroy_qp(bqp);
	sh_cq_destroy(tiny);
	sh_cq_destroy(bscq);
}

/*
 * An entry start_poll returned is read in place: a completion pushed while
 * it is held (here by a post between start_poll and end_poll, on a full
 * queue whose next free slot is the held one) must not land on it.
 */
static void test_held_entry(void)
{
	const struct tm_verbs *v = softhca_verbs();
	struct ibv_cq_ex *cq = sh_cq_ex(env.a.ctx, 64);
	struct ibv_cq_ex *bscq = sh_cq_ex(env.b.ctx, 64);
	struct ibv_qp *q1, *q2, *b1, *b2;
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	char *rbuf = sh_alloc(&env.b, 64 * 65), msg[16];
	uint32_t held_qp;
	int i, n, inorder, ok;

	if (!cq || !bscq ||
	    make_pair(ibv_cq_ex_to_cq(cq), ibv_cq_ex_to_cq(bscq), NULL,
		      env.b.srq, &q1, &b1, 0) ||
	    make_pair(ibv_cq_ex_to_cq(cq), ibv_cq_ex_to_cq(bscq), NULL,
		      env.b.srq, &q2, &b2, 0))
		tap_bail("held pair");
	for (i = 0; i < 65; i++)
		if (sh_post_plain(&env.b, 3000 + i, rbuf + 64 * i, 64))
			tap_bail("post plain");
	sh_put_tmh(msg, IBV_TMH_NO_TAG, 0, 0);
	/* 64 completions: the queue (64 entries to start with) is full */
	for (i = 0; i < 64; i++)
		if (sh_qp_send(&env.a, q1, msg, 16, 6000 + i, IBV_SEND_SIGNALED))
			tap_bail("send");
	sh_flush(&env);
	if (ibv_start_poll(cq, &pa))
		tap_bail("start_poll");
	if (sh_qp_send(&env.a, q2, msg, 16, 6064, IBV_SEND_SIGNALED))
		tap_bail("send 64");
	sh_flush(&env);
	held_qp = ibv_wc_read_qp_num(cq);
	ok = cq->wr_id == 6000 && held_qp == q1->qp_num &&
	     ibv_wc_read_opcode(cq) == IBV_WC_SEND;
	inorder = 1;
	for (n = 1; !ibv_next_poll(cq); n++)
		inorder &= cq->wr_id == (uint64_t)(6000 + n) &&
			   ibv_wc_read_qp_num(cq) ==
				   (n < 64 ? q1 : q2)->qp_num;
	ibv_end_poll(cq);
	tap_check(ok, "a held entry survives a completion pushed meanwhile "
		  "onto a full queue (qp %u, want %u)", held_qp, q1->qp_num);
	tap_check(n == 65 && inorder,
		  "... and the rest follow it, in order (got %d)", n);
	sh_cq_discard(env.b.cq);
	v->destroy_qp(q1);
	v->destroy_qp(q2);
	v->destroy_qp(b1);
	v->destroy_qp(b2);
	sh_cq_destroy(cq);
	sh_cq_destroy(bscq);
}

static void test_inline(void)
{
	struct ibv_cq_ex *ascq = sh_cq_ex(env.a.ctx, 16);
	struct ibv_cq_ex *bscq = sh_cq_ex(env.b.ctx, 16);
	struct ibv_qp *aqp = NULL, *bqp = NULL;
	char stackbuf[32], *rbuf = sh_alloc(&env.b, 64);
	struct sh_wc wc;
	int ret;

	ret = (!ascq || !bscq) ? -1 :
	      make_pair(ibv_cq_ex_to_cq(ascq), ibv_cq_ex_to_cq(bscq), NULL,
			env.b.srq, &aqp, &bqp, 32);
	tap_check(ret == 0, "QP with max_inline_data=32 is created (%d)", ret);
	if (ret)
		return;
	memset(rbuf, 0xEE, 64);
	sh_post_plain(&env.b, 600, rbuf, 64);
	sh_put_tmh(stackbuf, IBV_TMH_NO_TAG, 0, 0);
	memset(stackbuf + SH_TMH_LEN, 'I', 16);
	/* Not registered memory: lkey 0 is fine for an inline send. */
	ret = post_send(aqp, stackbuf, 32, 0, 601, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
	tap_check(ret == 0, "IBV_SEND_INLINE send from unregistered memory posts (%d)", ret);
	memset(stackbuf, 'X', sizeof(stackbuf)); /* before the card moves it */
	sh_flush(&env);
	ret = sh_poll(env.b.cq, &wc);
	tap_check(ret == 1 && wc.wr_id == 600 && wc.byte_len == 32 &&
		  rbuf[0] == IBV_TMH_NO_TAG && sh_all(rbuf + SH_TMH_LEN, 16, 'I') &&
		  sh_all(rbuf + 32, 32, 0xEE),
		  "inline send carries the bytes as they were at post time");
	ret = sh_poll(ascq, &wc);
	tap_check(ret == 1 && wc.wr_id == 601 && wc.status == IBV_WC_SUCCESS,
		  "inline signalled send completes");
	softhca_verbs()->destroy_qp(aqp);
	softhca_verbs()->destroy_qp(bqp);
	sh_cq_destroy(ascq);
	sh_cq_destroy(bscq);
}

static void test_rq_and_basic_srq(void)
{
	const struct tm_verbs *v = softhca_verbs();
	struct ibv_cq_ex *ascq = sh_cq_ex(env.a.ctx, 16);
	struct ibv_cq_ex *bscq = sh_cq_ex(env.b.ctx, 16);
	struct ibv_cq_ex *brcq = sh_cq_ex(env.b.ctx, 16);
	struct ibv_qp *aqp = NULL, *bqp = NULL;
	char *rbuf = sh_alloc(&env.b, 128), msg[40];
	struct ibv_sge sge = { .addr = (uintptr_t)rbuf, .length = 128,
			       .lkey = env.b.mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 700, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad = NULL;
	struct ibv_srq_init_attr sa;
	struct ibv_srq *bsrq;
	struct sh_wc wc;
	int ret;

	/* A QP with its own receive queue: no tag matching at all. */
	if (!ascq || !bscq || !brcq ||
	    make_pair(ibv_cq_ex_to_cq(ascq), ibv_cq_ex_to_cq(bscq),
		      ibv_cq_ex_to_cq(brcq), NULL, &aqp, &bqp, 0))
		tap_bail("rq pair");
	ret = ibv_post_recv(bqp, &rwr, &bad);
	tap_check(ret == 0, "ibv_post_recv on a QP receive queue (%d)", ret);
	sh_put_tmh(msg, IBV_TMH_EAGER, 5, 5);
	memset(msg + SH_TMH_LEN, 'R', sizeof(msg) - SH_TMH_LEN);
	sh_qp_send(&env.a, aqp, msg, sizeof(msg), 701, IBV_SEND_SIGNALED);
	sh_flush(&env);
	ret = sh_poll(brcq, &wc);
	tap_check(ret == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 700 &&
		  wc.opcode == IBV_WC_RECV && wc.byte_len == sizeof(msg) &&
		  wc.qp_num == bqp->qp_num && !memcmp(rbuf, msg, sizeof(msg)),
		  "QP receive queue: message completes IBV_WC_RECV on the QP's recv CQ, whole (%s)",
		  sh_wc_str(&wc));
	tap_check(sh_poll(env.b.cq, &wc) == 0, "...and nothing appears on the TM-SRQ CQ");
	v->destroy_qp(aqp);
	v->destroy_qp(bqp);

	/* A basic SRQ. */
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 1;
	bsrq = v->create_srq(env.b.pd, &sa);
	tap_check(bsrq != NULL, "basic SRQ via the table's create_srq");
	if (!bsrq)
		return;
	if (make_pair(ibv_cq_ex_to_cq(ascq), ibv_cq_ex_to_cq(bscq),
		      ibv_cq_ex_to_cq(brcq), bsrq, &aqp, &bqp, 0))
		tap_bail("basic srq pair");
	memset(rbuf, 0, 128);
	rwr.wr_id = 710;
	ret = ibv_post_srq_recv(bsrq, &rwr, &bad);
	tap_check(ret == 0, "ibv_post_srq_recv on a basic SRQ");
	sh_qp_send(&env.a, aqp, msg, 24, 711, IBV_SEND_SIGNALED);
	sh_flush(&env);
	ret = sh_poll(brcq, &wc);
	tap_check(ret == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 710 &&
		  wc.opcode == IBV_WC_RECV && wc.byte_len == 24 &&
		  !memcmp(rbuf, msg, 24),
		  "basic SRQ: message completes IBV_WC_RECV on the QP's recv CQ (%s)",
		  sh_wc_str(&wc));
	v->destroy_qp(aqp);
	v->destroy_qp(bqp);
	tap_check(v->destroy_srq(bsrq) == 0, "destroy_srq of a basic SRQ returns 0");
	sh_cq_destroy(ascq);
	sh_cq_destroy(bscq);
	sh_cq_destroy(brcq);
}

/*
 * A QP failed while a message is under way into a plain buffer: the
 * completion slot that buffer reserved is filled (flushed), so the CQ it
 * shares with other QPs does not stall behind it.
 */
static void test_flush_midway(void)
{
	struct softhca_config cfg;
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct sh_env e;
	struct sh_wc wc[4];
	char *b1, *b2, msg[1000];
	int n;

	sh_config(&cfg);
	cfg.mtu = 256;
	if (sh_env_open(&e, &cfg, SOFTHCA_SCHED_MANUAL, 2))
		tap_bail("sh_env_open (mtu 256)");
	b1 = sh_alloc(&e.b, 2048);
	b2 = sh_alloc(&e.b, 2048);
	sh_post_plain(&e.b, 21, b1, 2048);
	sh_post_plain(&e.b, 22, b2, 2048);
	sh_fill(msg, sizeof(msg), 4);
	sh_send_tm(&e, 0, IBV_TMH_NO_TAG, 0, 0, msg, sizeof(msg), 1);
	/* its first packet only: the message is under way on pair 0 */
	if (!sh_step_msg(&e, 0))
		tap_bail("first packet");
	sh_v()->modify_qp(e.p[0].rqp, &qa, IBV_QP_STATE);
	sh_send_tm(&e, 1, IBV_TMH_NO_TAG, 0, 0, "after", 6, 2);
	sh_flush(&e);
	n = sh_poll_all(e.b.cq, wc, 4);
	tap_check(n == 2 && wc[0].wr_id == 21 &&
		  wc[0].status == IBV_WC_WR_FLUSH_ERR && wc[1].wr_id == 22 &&
		  wc[1].status == IBV_WC_SUCCESS,
		  "a QP failed with a message under way: its plain buffer "
		  "completes flushed, the next QP's message after it (%d: %s)",
		  n, n > 1 ? sh_wc_str(&wc[1]) : n ? sh_wc_str(&wc[0]) : "-");
	sh_cq_discard(e.p[0].scq);
	sh_cq_discard(e.p[1].scq);
	sh_env_close(&e);
}

/*
 * A QP on the TM-SRQ whose receive CQ is not the SRQ's: what arrives
 * without a tagged buffer (NO_TAG, unexpected) completes on the TM-SRQ's
 * CQ, as everything the card decides there does (the XRQ's CQ on mlx5);
 * the QP's own receive CQ stays empty.
 */
static void test_srq_cq(void)
{
	struct softhca_config cfg;
	struct ibv_qp_init_attr qa;
	struct ibv_cq_ex *own;
	struct ibv_qp *sqp, *rqp;
	char msg[SH_TMH_LEN + 8];
	struct sh_wc wc;
	int n, m;

	sh_config(&cfg);
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_MANUAL, 1))
		tap_bail("sh_env_open failed");
	own = sh_cq_ex(env.b.ctx, 16);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = ibv_cq_ex_to_cq(env.p[0].rcq);
	qa.recv_cq = ibv_cq_ex_to_cq(own);
	qa.srq = env.b.srq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 16;
	qa.cap.max_send_sge = 2;
	rqp = own ? sh_v()->create_qp(env.b.pd, &qa) : NULL;
	sqp = sh_qp_create(&env.a, env.p[0].scq, env.a.srq, NULL);
	if (!rqp || !sqp || sh_qp_connect(sqp, &env.b.gid, rqp->qp_num) ||
	    sh_qp_connect(rqp, &env.a.gid, sqp->qp_num))
		tap_bail("a QP with its own receive CQ");
	for (int i = 0; i < 2; i++)
		if (sh_post_plain(&env.b, 700 + i, sh_alloc(&env.b, 256), 256))
			tap_bail("post plain");
	sh_put_tmh(msg, IBV_TMH_NO_TAG, 0, 0);
	memcpy(msg + SH_TMH_LEN, "own cq!", 8);
	if (sh_qp_send(&env.a, sqp, msg, sizeof(msg), 1, 0))
		tap_bail("send NO_TAG");
	sh_put_tmh(msg, IBV_TMH_EAGER, 0, 0x5eed);
	if (sh_qp_send(&env.a, sqp, msg, sizeof(msg), 2, 0))
		tap_bail("send eager");
	sh_flush(&env);
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.opcode == IBV_WC_TM_NO_TAG && wc.wr_id == 700 &&
		  wc.qp_num == rqp->qp_num,
		  "QP on the TM-SRQ with its own receive CQ: NO_TAG completes "
		  "on the TM-SRQ's CQ (%s)", sh_wc_str(&wc));
	n = sh_poll(env.b.cq, &wc);
	tap_check(n == 1 && wc.status == IBV_WC_SUCCESS &&
		  wc.opcode == IBV_WC_TM_RECV && !(wc.wc_flags & TM_FLAGS) &&
		  wc.wr_id == 701,
		  "... and so does an unexpected message (%s)", sh_wc_str(&wc));
	m = sh_poll(own, &wc);
	tap_check(m == 0, "... the QP's own receive CQ gets nothing (%d)", m);
	sh_v()->destroy_qp(sqp);
	sh_v()->destroy_qp(rqp);
	sh_cq_destroy(own);
	sh_env_close(&env);
}

int main(void)
{
	struct softhca_config cfg;

	alarm(60);
	sh_config(&cfg);
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_MANUAL, 1))
		tap_bail("sh_env_open failed");
	test_poll_api();
	test_legacy_poll();
	test_legacy_cq_and_unsignalled();
	test_cq_growth();
	test_held_entry();
	test_inline();
	test_rq_and_basic_srq();
	sh_env_close(&env);
	test_flush_midway();
	test_srq_cq();
	return tap_done();
}
