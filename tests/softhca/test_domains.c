/*
 * test_domains.c - soft HCA: thread domains (doc/mlx5-rules.md rule 22):
 * which objects leave a context lock-free (every QP, SRQ and CQ on one
 * TD, CQs single-threaded), what is refused (a CQ on a PD that is no
 * parent domain, unknown flags, allocators), that the lock comes back and
 * goes again as locked objects come and go, and tm_dev's choice (a TD by
 * default, locked objects if concurrent).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "sh_util.h"
#include "dev/tm_dev.h"

static int lock_free(struct ibv_context *ctx)
{
	struct softhca_stats st;

	softhca_query_stats(ctx, &st); /* ENOENT without a TM-SRQ is fine */
	return st.lock_free;
}

static struct ibv_cq_ex *cq_on(struct ibv_context *ctx, struct ibv_pd *pd,
			       uint32_t flags)
{
	struct ibv_cq_init_attr_ex a = {
		.cqe = 64,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS |
			     (pd ? IBV_CQ_INIT_ATTR_MASK_PD : 0),
		.flags = flags,
		.parent_domain = pd,
	};

	return ibv_create_cq_ex(ctx, &a);
}

static struct ibv_qp *qp_on(struct ibv_pd *pd, struct ibv_cq_ex *cq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = ibv_cq_ex_to_cq(cq),
		.recv_cq = ibv_cq_ex_to_cq(cq),
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	return sh_v()->create_qp(pd, &a);
}

static void test_thread_domains(void)
{
	const struct tm_verbs *v = sh_v();
	struct ibv_context *ctx = sh_open_ctx();
	struct ibv_td_init_attr tda = { 0 };
	struct ibv_parent_domain_init_attr pa = { 0 };
	struct ibv_pd *pd, *pdp, *pdp2;
	struct ibv_td *td, *td2;
	struct ibv_cq_ex *cq, *cq2;
	struct ibv_qp *qp, *qp2, *qp3;
	int (*lf_start)(struct ibv_cq_ex *, struct ibv_poll_cq_attr *);
	void (*lf_end)(struct ibv_cq_ex *);

	if (!ctx)
		tap_bail("open");
	pd = v->alloc_pd(ctx);
	td = ibv_alloc_td(ctx, &tda);
	td2 = ibv_alloc_td(ctx, &tda);
	pa.pd = pd;
	pa.td = td;
	pdp = pd && td ? ibv_alloc_parent_domain(ctx, &pa) : NULL;
	pa.td = td2;
	pdp2 = pd && td2 ? ibv_alloc_parent_domain(ctx, &pa) : NULL;
	if (!pdp || !pdp2)
		tap_bail("thread domain / parent domain");
	tap_check(!lock_free(ctx), "a context with no objects locks");

	errno = 0;
	tap_check(!cq_on(ctx, pd, IBV_CREATE_CQ_ATTR_SINGLE_THREADED) &&
		  errno == EINVAL,
		  "a CQ on a PD that is no parent domain: EINVAL (as mlx5)");
	errno = 0;
	tap_check(!cq_on(ctx, pdp, 1u << 7) && errno == EINVAL,
		  "a CQ with an unknown creation flag: EINVAL");
	pa.comp_mask = 1;
	errno = 0;
	tap_check(!ibv_alloc_parent_domain(ctx, &pa) && errno == EOPNOTSUPP,
		  "a parent domain asking for allocators: EOPNOTSUPP");
	pa.comp_mask = 0;

	cq = cq_on(ctx, pdp, IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
	qp = cq ? qp_on(pdp, cq) : NULL;
	if (!qp)
		tap_bail("CQ/QP on the parent domain");
	tap_check(lock_free(ctx),
		  "QP and single-threaded CQ on one TD: no lock");
	lf_start = cq->start_poll;
	lf_end = cq->end_poll;
	qp2 = qp_on(pd, cq);
	tap_check(qp2 && !lock_free(ctx), "... a QP on the plain PD: locks");
	/* (the lock-free poll calls leave the locks out: softhca_cq.h) */
	tap_check(cq->start_poll != lf_start && cq->end_poll != lf_end,
		  "... and the CQ made lock-free polls with the locking calls");
	v->destroy_qp(qp2);
	tap_check(lock_free(ctx), "... destroyed: no lock again");
	tap_check(cq->start_poll == lf_start && cq->end_poll == lf_end,
		  "... and its lock-free poll calls again");
	qp2 = qp_on(pd, cq);
	qp3 = qp_on(pd, cq);
	if (qp3)
		v->destroy_qp(qp3);
	tap_check(qp2 && qp3 && !lock_free(ctx),
		  "... two QPs on the plain PD, one destroyed: the other still "
		  "locks");
	v->destroy_qp(qp2);
	tap_check(lock_free(ctx), "... both destroyed: no lock again");
	cq2 = cq_on(ctx, pdp, 0);
	tap_check(cq2 && !lock_free(ctx),
		  "... a CQ on the TD without SINGLE_THREADED: locks");
	v->destroy_cq(ibv_cq_ex_to_cq(cq2));
	qp2 = qp_on(pdp2, cq);
	tap_check(qp2 && !lock_free(ctx),
		  "... a QP on a second TD (another thread): locks");
	v->destroy_qp(qp2);
	tap_check(lock_free(ctx), "... destroyed: no lock again");

	tap_check(v->dealloc_pd(pd) == EBUSY,
		  "a PD under a parent domain: EBUSY");
	tap_check(ibv_dealloc_td(td) == EBUSY,
		  "a TD under a parent domain: EBUSY");
	v->destroy_qp(qp);
	v->destroy_cq(ibv_cq_ex_to_cq(cq));
	tap_check(!v->dealloc_pd(pdp) && !v->dealloc_pd(pdp2) &&
		  !ibv_dealloc_td(td) && !ibv_dealloc_td(td2) &&
		  !v->dealloc_pd(pd) && !v->close_device(ctx),
		  "parent domains, TDs, PD and context torn down in order");
}

static void test_dev_td(void)
{
	struct tm_dev_config dc;
	struct tm_dev *dev;

	tm_dev_config_default(&dc);
	dc.provider = "soft";
	dc.settled = 1;
	if (tm_dev_open(&dc, &dev) != TM_OK)
		tap_bail("tm_dev_open");
	tap_check(dev->td && dev->pd != dev->base_pd && lock_free(dev->ctx),
		  "tm_dev: objects on a thread domain, context lock-free");
	tm_dev_close(dev);
	dc.concurrent = 1;
	if (tm_dev_open(&dc, &dev) != TM_OK)
		tap_bail("tm_dev_open");
	tap_check(!dev->td && dev->pd == dev->base_pd && !lock_free(dev->ctx),
		  "tm_dev concurrent: plain PD, context locked");
	tm_dev_close(dev);
}

int main(void)
{
	/* the lock-free suites run set this; here the default is pinned */
	unsetenv("SOFTHCA_SINGLE_THREADED");
	test_thread_domains();
	test_dev_td();
	return tap_done();
}
