/*
 * test_mlx5_replay.c - rdma-core's tests/test_tag_matching.py, replayed in
 * C on the soft HCA with the same sizes and the same expected completions
 * (doc/mlx5-rules.md rules 9-16).  The layout is the test's: the server
 * (side b) has a TM-SRQ with max_ops 10 and the device's max_num_tags, 33
 * plain WQEs, and an RC QP with no send queue on it; the client (side a)
 * has an RC QP with its own receive queue (33 WQEs, wr_id 0) and one CQ
 * for sends and receives.  Each scenario posts tags 1..9 (signalled ADDs,
 * each completion checked), then sends tags 9..1 and checks the opcode,
 * flags, wr_id, tag and data of each completion, reposting a plain WQE
 * after each message as the Python test does.  Runs once with the soft
 * HCA strict and once not: both must give these shapes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "sh_util.h"

#define TAG_MASK 0xffffULL
#define HW_MIN_PLAIN 33
#define SYNC_WRID 27
#define FIXED_SEND_TAG 0x1234
#define ITERS 10
#define MSG_SIZE 1024

struct side_x {
	struct sh_side s;
	struct ibv_qp *qp;
	char *buf;         /* the test's "mr": MSG_SIZE bytes */
	uint32_t unexp_cnt;
};

static struct side_x srv, cli;
static char exp_msg[MSG_SIZE]; /* the client's message as sent */
static int strict_mode;
static int failures;

static void check(int ok, const char *what, const struct sh_wc *wc)
{
	if (!ok) {
		failures++;
		tap_diag("%s: %s", what, wc ? sh_wc_str(wc) : "no completion");
	}
}

static void setup(int strict)
{
	struct ibv_srq_init_attr_ex sa;
	struct ibv_qp_init_attr qa;
	struct softhca_config cfg;
	int i;

	sh_config(&cfg);
	cfg.strict = strict;
	if (softhca_set_config(&cfg))
		tap_bail("config");
	memset(&srv, 0, sizeof(srv));
	memset(&cli, 0, sizeof(cli));
	if (sh_side_open(&srv.s, SOFTHCA_SCHED_MANUAL, 0) ||
	    sh_side_open(&cli.s, SOFTHCA_SCHED_MANUAL, 0))
		tap_bail("sides");

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 64;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = srv.s.pd;
	sa.cq = ibv_cq_ex_to_cq(srv.s.cq);
	sa.tm_cap.max_num_tags = srv.s.attr.tm_caps.max_num_tags;
	sa.tm_cap.max_ops = 10;
	srv.s.srq = ibv_create_srq_ex(srv.s.ctx, &sa);
	if (!srv.s.srq)
		tap_bail("TM-SRQ with max_ops 10");

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = ibv_cq_ex_to_cq(srv.s.cq);
	qa.recv_cq = ibv_cq_ex_to_cq(srv.s.cq);
	qa.srq = srv.s.srq;
	qa.qp_type = IBV_QPT_RC; /* cap all 0: no send queue */
	srv.qp = sh_v()->create_qp(srv.s.pd, &qa);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = ibv_cq_ex_to_cq(cli.s.cq);
	qa.recv_cq = ibv_cq_ex_to_cq(cli.s.cq);
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 4;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_wr = 64;
	qa.cap.max_recv_sge = 4;
	cli.qp = sh_v()->create_qp(cli.s.pd, &qa);
	if (!srv.qp || !cli.qp ||
	    sh_qp_connect(srv.qp, &cli.s.gid, cli.qp->qp_num) ||
	    sh_qp_connect(cli.qp, &srv.s.gid, srv.qp->qp_num))
		tap_bail("QPs");
	srv.buf = sh_alloc(&srv.s, MSG_SIZE);
	cli.buf = sh_alloc(&cli.s, MSG_SIZE);
	for (i = 0; i < HW_MIN_PLAIN; i++) {
		struct ibv_sge sge = { (uintptr_t)cli.buf, MSG_SIZE,
				       cli.s.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 0, .sg_list = &sge,
					  .num_sge = 1 }, *bad;

		if (ibv_post_recv(cli.qp, &wr, &bad) ||
		    sh_post_plain(&srv.s, 0, srv.buf, MSG_SIZE))
			tap_bail("33 receive WQEs");
	}
}

static void teardown(void)
{
	sh_v()->destroy_qp(srv.qp);
	sh_v()->destroy_qp(cli.qp);
	sh_side_close(&srv.s);
	sh_side_close(&cli.s);
}

static void run_cards(void)
{
	while (softhca_drain(srv.s.ctx) + softhca_drain(cli.s.ctx))
		;
}

static int poll1(struct side_x *x, struct sh_wc *wc)
{
	run_cards();
	return sh_poll(x->s.cq, wc) == 1;
}

static void post_sync(void)
{
	struct sh_wc wc;

	sh_sync(&srv.s, SYNC_WRID, srv.unexp_cnt,
		IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC);
	check(poll1(&srv, &wc) && wc.status == IBV_WC_SUCCESS &&
	      wc.wr_id == SYNC_WRID && wc.opcode == IBV_WC_TM_SYNC,
	      "SYNC completion", &wc);
}

/* The Python test's poll_cq_ex on the server: unexpected -> count, SYNC. */
static int poll_server(struct sh_wc *wc)
{
	if (!poll1(&srv, wc) || wc->status != IBV_WC_SUCCESS)
		return 0;
	if (wc->opcode == IBV_WC_TM_RECV &&
	    !(wc->wc_flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID))) {
		srv.unexp_cnt++;
		post_sync();
	} else if (wc->opcode == IBV_WC_TM_ADD &&
		   (wc->wc_flags & IBV_WC_TM_SYNC_REQ)) {
		post_sync();
	}
	return 1;
}

static void client_send(uint32_t len)
{
	struct sh_wc wc;

	if (sh_qp_send(&cli.s, cli.qp, cli.buf, len, 0, IBV_SEND_SIGNALED))
		tap_bail("client send");
	check(poll1(&cli, &wc) && wc.status == IBV_WC_SUCCESS &&
	      wc.opcode == IBV_WC_SEND, "client send completion", &wc);
}

/* tm_traffic() of the Python test; returns the number of mismatches. */
static int tm_traffic(uint8_t op, uint64_t fixed_tag)
{
	struct sh_wc wc;
	uint32_t hdr = srv.s.attr.tm_caps.max_rndv_hdr_size;
	uint32_t curr_unexp = 1;
	int t;

	failures = 0;
	for (t = 1; t < ITERS; t++) {
		sh_add(&srv.s, (uint64_t)t, (uint64_t)t, srv.buf, MSG_SIZE,
		       (uint64_t)t, TAG_MASK, srv.unexp_cnt, IBV_OPS_SIGNALED,
		       NULL);
		check(poll_server(&wc) && wc.wr_id == (uint64_t)t &&
		      wc.opcode == IBV_WC_TM_ADD, "ADD completion", &wc);
	}
	for (t = ITERS - 1; t >= 1; t--) {
		uint64_t tag = fixed_tag ? fixed_tag : (uint64_t)t;
		uint64_t exp_tag = fixed_tag ? 0 : (uint64_t)t;
		unsigned exp_flags = fixed_tag ? 0 :
				     op == IBV_TMH_RNDV ? IBV_WC_TM_MATCH :
				     IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID;
		enum ibv_wc_opcode exp_op = op == IBV_TMH_NO_TAG ?
					    IBV_WC_TM_NO_TAG : IBV_WC_TM_RECV;

		sh_fill(cli.buf, MSG_SIZE, (uint32_t)t);
		sh_put_tmh(cli.buf, op, 0, tag);
		if (op == IBV_TMH_RNDV) {
			struct ibv_sge sge = { (uintptr_t)cli.buf, MSG_SIZE,
					       cli.s.mr->lkey };
			struct ibv_recv_wr rwr = { .wr_id = (uint64_t)t,
						   .sg_list = &sge,
						   .num_sge = 1 }, *bad;

			sh_put_rvh(cli.buf + SH_TMH_LEN, (uintptr_t)cli.buf,
				   cli.s.mr->rkey, MSG_SIZE);
			if (ibv_post_recv(cli.qp, &rwr, &bad))
				tap_bail("client recv for the FIN");
		}
		memset(srv.buf, 0, MSG_SIZE);
		/* the FIN lands in the client's buffer: compare with a copy */
		memcpy(exp_msg, cli.buf, MSG_SIZE);
		client_send(op == IBV_TMH_RNDV ? hdr : MSG_SIZE);
		check(poll_server(&wc) && wc.opcode == exp_op &&
		      wc.wc_flags == exp_flags && wc.wr_id == exp_tag &&
		      wc.tag == exp_tag, "receive completion", &wc);
		if (op == IBV_TMH_RNDV) {
			check(poll1(&cli, &wc) && wc.status == IBV_WC_SUCCESS &&
			      wc.opcode == IBV_WC_RECV && wc.wr_id == 0,
			      "client FIN receive", &wc);
			check(poll_server(&wc) && wc.opcode == IBV_WC_TM_RECV &&
			      wc.wc_flags == IBV_WC_TM_DATA_VALID &&
			      wc.wr_id == exp_tag && wc.tag == exp_tag &&
			      wc.byte_len == MSG_SIZE, "rndv data completion",
			      &wc);
			check(!memcmp(srv.buf, exp_msg, MSG_SIZE),
			      "rndv data", NULL);
		} else if (fixed_tag) {
			check(!memcmp(srv.buf, exp_msg, MSG_SIZE),
			      "whole message in the plain buffer", NULL);
		} else {
			check(!memcmp(srv.buf, exp_msg + SH_TMH_LEN,
				      MSG_SIZE - SH_TMH_LEN),
			      "payload without TMH in the tagged buffer", NULL);
		}
		if (fixed_tag && op != IBV_TMH_NO_TAG) {
			check(srv.unexp_cnt == curr_unexp, "unexpected count",
			      NULL);
			curr_unexp++;
		}
		sh_post_plain(&srv.s, 0, srv.buf, MSG_SIZE);
	}
	return failures;
}

/* Not in the Python test: a rendezvous too big for its tagged buffer. */
static int rndv_incomplete(void)
{
	struct sh_wc wc;
	uint32_t hdr = srv.s.attr.tm_caps.max_rndv_hdr_size;

	failures = 0;
	sh_add(&srv.s, 1, 1, srv.buf, 48, 0x77, TAG_MASK, srv.unexp_cnt,
	       IBV_OPS_SIGNALED, NULL);
	check(poll_server(&wc) && wc.opcode == IBV_WC_TM_ADD, "ADD", &wc);
	sh_put_tmh(cli.buf, IBV_TMH_RNDV, 0, 0x77);
	sh_put_rvh(cli.buf + SH_TMH_LEN, (uintptr_t)cli.buf, cli.s.mr->rkey,
		   MSG_SIZE);
	client_send(hdr);
	if (strict_mode) {
		check(poll1(&srv, &wc) &&
		      wc.status == IBV_WC_TM_RNDV_INCOMPLETE &&
		      wc.opcode == IBV_WC_TM_RECV &&
		      wc.wc_flags == IBV_WC_TM_MATCH && wc.wr_id == 1,
		      "RNDV_INCOMPLETE, MATCH only", &wc);
		check(poll1(&srv, &wc) && wc.status == IBV_WC_SUCCESS &&
		      wc.wc_flags == IBV_WC_TM_DATA_VALID && wc.wr_id == 1,
		      "then DATA_VALID", &wc);
	} else {
		check(poll1(&srv, &wc) &&
		      wc.status == IBV_WC_TM_RNDV_INCOMPLETE &&
		      wc.opcode == IBV_WC_TM_RECV &&
		      wc.wc_flags == (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID) &&
		      wc.wr_id == 1, "RNDV_INCOMPLETE, MATCH + DATA_VALID",
		      &wc);
	}
	check(!memcmp(srv.buf, cli.buf, SH_TMH_LEN + SH_RVH_LEN),
	      "TMH + RVH in the tagged buffer", NULL);
	check(sh_poll(srv.s.cq, &wc) == 0, "nothing more", &wc);
	return failures;
}

int main(void)
{
	static const struct {
		const char *name;
		uint8_t op;
		uint64_t fixed;
	} sc[] = {
		{ "test_tm_traffic: ADDs, then eager sends in reverse order "
		  "match with MATCH|DATA_VALID", IBV_TMH_EAGER, 0 },
		{ "test_tm_unexpected_tag: TM_RECV without flags, wr_id of the "
		  "plain WQE, then SYNC; count 1..9", IBV_TMH_EAGER,
		  FIXED_SEND_TAG },
		{ "test_tm_no_tag: TM_NO_TAG, whole message, no SYNC",
		  IBV_TMH_NO_TAG, FIXED_SEND_TAG },
		{ "test_tm_rndv: MATCH, the client's FIN as RECV, then "
		  "DATA_VALID with the data", IBV_TMH_RNDV, 0 },
	};
	int mode;
	size_t i;

	/* both modes are run: the environment must not pick one */
	unsetenv("TM_SOFTHCA_STRICT");
	for (mode = 1; mode >= 0; mode--) {
		strict_mode = mode;
		for (i = 0; i < sizeof(sc) / sizeof(sc[0]); i++) {
			setup(mode);
			tap_check(tm_traffic(sc[i].op, sc[i].fixed) == 0,
				  "%s: %s", mode ? "strict" : "default",
				  sc[i].name);
			teardown();
		}
		setup(mode);
		tap_check(rndv_incomplete() == 0,
			  "%s: rendezvous too big for the tagged buffer: %s",
			  mode ? "strict" : "default",
			  mode ? "RNDV_INCOMPLETE MATCH, then DATA_VALID" :
				 "one RNDV_INCOMPLETE MATCH|DATA_VALID");
		teardown();
	}
	return tap_done();
}
