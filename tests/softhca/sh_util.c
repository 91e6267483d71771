/*
 * sh_util.c - shared helpers for the soft HCA unit tests (see sh_util.h).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "sh_util.h"

#define SH_ARENA_SIZE (64u << 20)

const struct tm_verbs *sh_v(void)
{
	return softhca_verbs();
}

void sh_die(const char *fmt, ...)
{
	va_list ap;

	printf("Bail out! ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

/* The defaults with the SOFTHCA_* variables applied (test_lockfree_suites.sh
 * runs the suites with SOFTHCA_SINGLE_THREADED=1): a config a test sets is
 * not overridden by the environment later. */
void sh_config(struct softhca_config *cfg)
{
	char why[200];

	softhca_config_default(cfg);
	if (softhca_config_from_env(cfg, NULL, why, sizeof(why)))
		sh_die("%s", why);
}

double sh_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct ibv_context *sh_open_ctx(void)
{
	const struct tm_verbs *v = sh_v();
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n = 0, i;

	list = v->get_device_list(&n);
	if (!list)
		return NULL;
	for (i = 0; i < n; i++) {
		const char *name = v->get_device_name(list[i]);

		if (name && !strcmp(name, SH_DEV_NAME)) {
			ctx = v->open_device(list[i]);
			break;
		}
	}
	v->free_device_list(list);
	return ctx;
}

struct ibv_cq_ex *sh_cq_ex(struct ibv_context *ctx, int cqe)
{
	struct ibv_cq_init_attr_ex ca;

	memset(&ca, 0, sizeof(ca));
	ca.cqe = cqe;
	ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM |
		      IBV_WC_EX_WITH_TM_INFO;
	return ibv_create_cq_ex(ctx, &ca);
}

void sh_cq_destroy(struct ibv_cq_ex *cq)
{
	if (cq)
		sh_v()->destroy_cq(ibv_cq_ex_to_cq(cq));
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

int sh_side_open(struct sh_side *s, enum softhca_sched sched, int with_srq)
{
	const struct tm_verbs *v = sh_v();
	int ret;

	memset(s, 0, sizeof(*s));
	s->ctx = sh_open_ctx();
	if (!s->ctx)
		return errno ? errno : ENODEV;
	softhca_set_sched(s->ctx, sched, 0);
	ret = ibv_query_device_ex(s->ctx, NULL, &s->attr);
	if (ret)
		return ret;
	ret = v->query_gid(s->ctx, 1, 0, &s->gid);
	if (ret)
		return ret;
	s->pd = v->alloc_pd(s->ctx);
	if (!s->pd)
		return errno ? errno : ENOMEM;
	s->cq = sh_cq_ex(s->ctx, 256);
	if (!s->cq)
		return errno ? errno : ENOMEM;
	s->mem_size = SH_ARENA_SIZE;
	s->mem = mmap(NULL, s->mem_size, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->mem == MAP_FAILED) {
		s->mem = NULL;
		return ENOMEM;
	}
	s->mr = v->reg_mr(s->pd, s->mem, s->mem_size,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			  IBV_ACCESS_REMOTE_WRITE);
	if (!s->mr)
		return errno ? errno : ENOMEM;
	if (with_srq) {
		struct ibv_srq_init_attr_ex sa;

		memset(&sa, 0, sizeof(sa));
		sa.attr.max_wr = min_u32(4096, s->attr.orig_attr.max_srq_wr);
		sa.attr.max_sge = 1;
		sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
		sa.srq_type = IBV_SRQT_TM;
		sa.pd = s->pd;
		sa.cq = ibv_cq_ex_to_cq(s->cq);
		sa.tm_cap.max_num_tags = s->attr.tm_caps.max_num_tags;
		/* as on mlx5, the advertised max_ops does not fit the
		 * command queue: at most max_qp_wr / 4 (mlx5-rules rule 2) */
		sa.tm_cap.max_ops = min_u32(s->attr.tm_caps.max_ops,
			(uint32_t)s->attr.orig_attr.max_qp_wr / 4);
		s->srq = ibv_create_srq_ex(s->ctx, &sa);
		if (!s->srq)
			return errno ? errno : ENOMEM;
	}
	return 0;
}

void sh_side_close(struct sh_side *s)
{
	const struct tm_verbs *v = sh_v();

	if (s->srq)
		v->destroy_srq(s->srq);
	if (s->mr)
		v->dereg_mr(s->mr);
	if (s->mem)
		munmap(s->mem, s->mem_size);
	sh_cq_destroy(s->cq);
	if (s->pd)
		v->dealloc_pd(s->pd);
	if (s->ctx)
		v->close_device(s->ctx);
	memset(s, 0, sizeof(*s));
}

struct ibv_qp *sh_qp_create(struct sh_side *s, struct ibv_cq_ex *scq,
			    struct ibv_srq *srq, struct ibv_cq_ex *rcq)
{
	struct ibv_qp_init_attr qa;
	/* a send WQE takes up to 4 blocks of max_qp_wr (mlx5, rule 2) */
	uint32_t wr = min_u32(1024, s->attr.orig_attr.max_qp_wr / 4);

	memset(&qa, 0, sizeof(qa));
	qa.send_cq = ibv_cq_ex_to_cq(scq);
	qa.recv_cq = ibv_cq_ex_to_cq(srq ? s->cq : rcq);
	qa.srq = srq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = wr;
	qa.cap.max_send_sge = 2; /* TMH + payload, as the engine posts */
	qa.cap.max_recv_wr = srq ? 0 : wr;
	qa.cap.max_recv_sge = srq ? 0 : 1;
	qa.cap.max_inline_data = 0;
	return sh_v()->create_qp(s->pd, &qa);
}

int sh_qp_connect(struct ibv_qp *qp, const union ibv_gid *gid, uint32_t qpn)
{
	const struct tm_verbs *v = sh_v();
	struct ibv_qp_attr at;
	int ret;

	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_INIT;
	at.pkey_index = 0;
	at.port_num = 1;
	at.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_WRITE;
	ret = v->modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		return ret;

	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTR;
	at.path_mtu = IBV_MTU_4096;
	at.dest_qp_num = qpn;
	at.rq_psn = 0;
	at.max_dest_rd_atomic = 1;
	at.min_rnr_timer = 12;
	at.ah_attr.is_global = 1;
	at.ah_attr.grh.dgid = *gid;
	at.ah_attr.grh.sgid_index = 0;
	at.ah_attr.grh.hop_limit = 1;
	at.ah_attr.port_num = 1;
	ret = v->modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;

	memset(&at, 0, sizeof(at));
	at.qp_state = IBV_QPS_RTS;
	at.timeout = 14;
	at.retry_cnt = 7;
	at.rnr_retry = 7;
	at.sq_psn = 0;
	at.max_rd_atomic = 1;
	return v->modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_TIMEOUT |
			    IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			    IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int sh_pair_add(struct sh_env *e)
{
	struct sh_pair *p;

	if (e->npairs >= SH_MAX_PAIRS)
		return -1;
	p = &e->p[e->npairs];
	memset(p, 0, sizeof(*p));
	p->scq = sh_cq_ex(e->a.ctx, 64);
	p->rcq = sh_cq_ex(e->b.ctx, 64);
	if (!p->scq || !p->rcq)
		return -1;
	p->sqp = sh_qp_create(&e->a, p->scq, e->a.srq, NULL);
	p->rqp = sh_qp_create(&e->b, p->rcq, e->b.srq, NULL);
	if (!p->sqp || !p->rqp)
		return -1;
	if (sh_qp_connect(p->sqp, &e->b.gid, p->rqp->qp_num) ||
	    sh_qp_connect(p->rqp, &e->a.gid, p->sqp->qp_num))
		return -1;
	return e->npairs++;
}

int sh_env_open(struct sh_env *e, const struct softhca_config *cfg,
		enum softhca_sched sched, int npairs)
{
	int ret, i;

	memset(e, 0, sizeof(*e));
	if (cfg) {
		ret = softhca_set_config(cfg);
		if (ret)
			return ret;
	}
	ret = sh_side_open(&e->a, sched, 1);
	if (ret)
		return ret;
	ret = sh_side_open(&e->b, sched, 1);
	if (ret)
		return ret;
	for (i = 0; i < npairs; i++)
		if (sh_pair_add(e) < 0)
			return errno ? errno : EINVAL;
	return 0;
}

void sh_env_close(struct sh_env *e)
{
	const struct tm_verbs *v = sh_v();
	int i;

	for (i = 0; i < e->npairs; i++) {
		if (e->p[i].sqp)
			v->destroy_qp(e->p[i].sqp);
		if (e->p[i].rqp)
			v->destroy_qp(e->p[i].rqp);
		sh_cq_destroy(e->p[i].scq);
		sh_cq_destroy(e->p[i].rcq);
	}
	sh_side_close(&e->a);
	sh_side_close(&e->b);
	memset(e, 0, sizeof(*e));
}

void *sh_alloc(struct sh_side *s, size_t len)
{
	size_t off = (s->mem_used + 63) & ~(size_t)63;

	if (off + len > s->mem_size)
		sh_die("sh_alloc: arena exhausted (%zu + %zu)", off, len);
	s->mem_used = off + len;
	return s->mem + off;
}

size_t sh_mem_mark(struct sh_side *s)
{
	return s->mem_used;
}

void sh_mem_reset(struct sh_side *s, size_t mark)
{
	s->mem_used = mark;
}

int sh_post_plain(struct sh_side *s, uint64_t wr_id, void *buf, uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)buf, .length = len, .lkey = s->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad = NULL;

	return ibv_post_srq_recv(s->srq, &wr, &bad);
}

int sh_add(struct sh_side *s, uint64_t wr_id, uint64_t recv_wr_id, void *buf,
	   uint32_t len, uint64_t tag, uint64_t mask, uint32_t cnt, int flags,
	   uint32_t *handle)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)buf, .length = len, .lkey = s->mr->lkey,
	};
	struct ibv_ops_wr wr, *bad = NULL;
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_TAG_ADD;
	wr.flags = flags;
	wr.tm.unexpected_cnt = cnt;
	wr.tm.add.recv_wr_id = recv_wr_id;
	wr.tm.add.sg_list = &sge;
	wr.tm.add.num_sge = 1;
	wr.tm.add.tag = tag;
	wr.tm.add.mask = mask;
	ret = ibv_post_srq_ops(s->srq, &wr, &bad);
	if (!ret && handle)
		*handle = wr.tm.handle;
	return ret;
}

int sh_del(struct sh_side *s, uint64_t wr_id, uint32_t handle, uint32_t cnt,
	   int flags)
{
	struct ibv_ops_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_TAG_DEL;
	wr.flags = flags;
	wr.tm.unexpected_cnt = cnt;
	wr.tm.handle = handle;
	return ibv_post_srq_ops(s->srq, &wr, &bad);
}

int sh_sync(struct sh_side *s, uint64_t wr_id, uint32_t cnt, int flags)
{
	struct ibv_ops_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_TAG_SYNC;
	wr.flags = flags;
	wr.tm.unexpected_cnt = cnt;
	return ibv_post_srq_ops(s->srq, &wr, &bad);
}

uint32_t sh_put_tmh(void *dst, uint8_t op, uint32_t app_ctx, uint64_t tag)
{
	struct ibv_tmh tmh;

	memset(&tmh, 0, sizeof(tmh));
	tmh.opcode = op;
	tmh.app_ctx = htobe32(app_ctx);
	tmh.tag = htobe64(tag);
	memcpy(dst, &tmh, sizeof(tmh));
	return SH_TMH_LEN;
}

uint32_t sh_put_rvh(void *dst, uint64_t va, uint32_t rkey, uint32_t len)
{
	struct ibv_rvh rvh;

	rvh.va = htobe64(va);
	rvh.rkey = htobe32(rkey);
	rvh.len = htobe32(len);
	memcpy(dst, &rvh, sizeof(rvh));
	return SH_RVH_LEN;
}

int sh_qp_send(struct sh_side *s, struct ibv_qp *qp, const void *msg,
	       uint32_t len, uint64_t wr_id, int send_flags)
{
	void *buf = sh_alloc(s, len ? len : 1);
	struct ibv_sge sge = {
		.addr = (uintptr_t)buf, .length = len, .lkey = s->mr->lkey,
	};
	struct ibv_send_wr wr, *bad = NULL;

	if (len)
		memcpy(buf, msg, len);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = send_flags;
	return ibv_post_send(qp, &wr, &bad);
}

int sh_send_raw(struct sh_env *e, int pair, int from_b, const void *msg,
		uint32_t len, uint64_t wr_id)
{
	struct sh_side *s = from_b ? &e->b : &e->a;
	struct ibv_qp *qp = from_b ? e->p[pair].rqp : e->p[pair].sqp;

	return sh_qp_send(s, qp, msg, len, wr_id, IBV_SEND_SIGNALED);
}

int sh_send_tm(struct sh_env *e, int pair, uint8_t op, uint64_t tag,
	       uint32_t app_ctx, const void *payload, uint32_t len,
	       uint64_t wr_id)
{
	char *msg = malloc(SH_TMH_LEN + len);
	int ret;

	if (!msg)
		return ENOMEM;
	sh_put_tmh(msg, op, app_ctx, tag);
	if (len)
		memcpy(msg + SH_TMH_LEN, payload, len);
	ret = sh_send_raw(e, pair, 0, msg, SH_TMH_LEN + len, wr_id);
	free(msg);
	return ret;
}

int sh_send_rndv(struct sh_env *e, int pair, uint64_t tag, uint32_t app_ctx,
		 uint64_t va, uint32_t rkey, uint32_t len, const void *meta,
		 uint32_t metalen, uint64_t wr_id)
{
	char msg[4096];
	uint32_t n;

	if (SH_TMH_LEN + SH_RVH_LEN + metalen > sizeof(msg))
		return EINVAL;
	n = sh_put_tmh(msg, IBV_TMH_RNDV, app_ctx, tag);
	n += sh_put_rvh(msg + n, va, rkey, len);
	if (metalen)
		memcpy(msg + n, meta, metalen);
	n += metalen;
	return sh_send_raw(e, pair, 0, msg, n, wr_id);
}

int sh_post_read(struct ibv_qp *qp, void *dst, uint32_t lkey, uint32_t len,
		 uint64_t raddr, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)dst, .length = len, .lkey = lkey,
	};
	struct ibv_send_wr wr, *bad = NULL;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

int sh_poll(struct ibv_cq_ex *cq, struct sh_wc *wc)
{
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	int ret;

	memset(wc, 0, sizeof(*wc));
	ret = ibv_start_poll(cq, &pa);
	if (ret == ENOENT)
		return 0;
	if (ret)
		return -ret;
	wc->status = cq->status;
	wc->wr_id = cq->wr_id;
	wc->opcode = ibv_wc_read_opcode(cq);
	wc->wc_flags = ibv_wc_read_wc_flags(cq);
	wc->byte_len = ibv_wc_read_byte_len(cq);
	wc->qp_num = ibv_wc_read_qp_num(cq);
	if (wc->opcode == IBV_WC_TM_RECV || wc->opcode == IBV_WC_TM_NO_TAG) {
		struct ibv_wc_tm_info ti;

		memset(&ti, 0, sizeof(ti));
		ibv_wc_read_tm_info(cq, &ti);
		wc->tag = ti.tag;
		wc->priv = ti.priv;
	}
	ibv_end_poll(cq);
	return 1;
}

int sh_poll_all(struct ibv_cq_ex *cq, struct sh_wc *wc, int max)
{
	int n = 0;

	while (n < max && sh_poll(cq, &wc[n]) == 1)
		n++;
	return n;
}

int sh_cq_discard(struct ibv_cq_ex *cq)
{
	struct sh_wc wc;
	int n = 0;

	while (sh_poll(cq, &wc) == 1)
		n++;
	return n;
}

int sh_step_msg(struct sh_env *e, int pair)
{
	int tx, rx;

	tx = softhca_step(e->a.ctx, SOFTHCA_WORK_TX, e->p[pair].sqp->qp_num);
	rx = softhca_step(e->b.ctx, SOFTHCA_WORK_RX, e->p[pair].rqp->qp_num);
	return tx == 1 && rx == 1;
}

int sh_step_op(struct sh_side *s)
{
	return softhca_step(s->ctx, SOFTHCA_WORK_OP, SOFTHCA_ANY_QP);
}

int sh_flush(struct sh_env *e)
{
	int total = 0, n, rounds = 0;

	do {
		n = softhca_drain(e->a.ctx) + softhca_drain(e->b.ctx);
		total += n;
		if (++rounds > 1000000)
			sh_die("sh_flush: cards never quiesce");
	} while (n > 0);
	return total;
}

int sh_wait(struct sh_env *e, struct ibv_cq_ex *cq, struct sh_wc *wc,
	    int timeout_ms)
{
	double end = sh_now() + timeout_ms / 1000.0;
	int ret;

	for (;;) {
		ret = sh_poll(cq, wc);
		if (ret)
			return ret;
		if (sh_now() > end)
			return 0;
		if (e)
			sh_flush(e);
	}
}

void sh_fill(void *p, size_t n, uint32_t seed)
{
	unsigned char *c = p;
	uint32_t x = seed * 2654435761u + 12345;
	size_t i;

	for (i = 0; i < n; i++) {
		x = x * 1103515245u + 12345;
		c[i] = (unsigned char)(x >> 16);
	}
}

int sh_check(const void *p, size_t n, uint32_t seed)
{
	const unsigned char *c = p;
	uint32_t x = seed * 2654435761u + 12345;
	size_t i;

	for (i = 0; i < n; i++) {
		x = x * 1103515245u + 12345;
		if (c[i] != (unsigned char)(x >> 16))
			return 0;
	}
	return 1;
}

int sh_all(const void *p, size_t n, unsigned char c)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i] != c)
			return 0;
	return 1;
}

struct softhca_stats sh_stats(struct sh_side *s)
{
	struct softhca_stats st;

	memset(&st, 0, sizeof(st));
	if (softhca_query_stats(s->ctx, &st))
		sh_die("softhca_query_stats failed");
	return st;
}

const char *sh_wc_str(const struct sh_wc *wc)
{
	static char buf[8][200];
	static int k;
	char *b = buf[k++ & 7];

	snprintf(b, sizeof(buf[0]),
		 "status=%d(%s) opcode=0x%x flags=0x%x wr_id=%llu byte_len=%u "
		 "tag=0x%llx priv=0x%x qp=%u",
		 wc->status, ibv_wc_status_str(wc->status), wc->opcode,
		 wc->wc_flags, (unsigned long long)wc->wr_id, wc->byte_len,
		 (unsigned long long)wc->tag, wc->priv, wc->qp_num);
	return b;
}
