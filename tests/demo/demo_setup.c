/*
 * demo_setup.c - one side of softhca_demo opens the soft HCA and makes
 * its PD, MR arena, CQ_ex, TM-SRQ and RC QP, connects the QP to the
 * peer's over the pipes, and tears it all down (contract: demo.h).
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softhca/softhca.h"
#include "demo.h"

/* What the two sides swap over the pipes to connect their QPs. */
struct conn_info {
	union ibv_gid gid;
	uint32_t qp_num;
};

uint8_t *arena_alloc(struct proc *p, size_t len)
{
	uint8_t *b = p->arena + p->arena_used;

	len = (len + 63) & ~(size_t)63;
	if (p->arena_used + len > ARENA_SIZE)
		die(p, "arena", ENOMEM);
	p->arena_used += len;
	return b;
}

void post_plain(struct proc *p, int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)p->plain[i],
		.length = PLAIN_SIZE,
		.lkey = p->mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = WRID_PLAIN + i,
		.sg_list = &sge,
		.num_sge = 1,
	}, *bad;
	int ret;

	ret = ibv_post_srq_recv(p->srq, &wr, &bad);
	if (ret)
		die(p, "ibv_post_srq_recv", ret);
}

/* The soft HCA, configured from the environment, opened; needs RC TM. */
static void open_card(struct proc *p)
{
	struct softhca_config cfg;
	char why[200];
	struct ibv_device_attr_ex dattr;
	int n, ret;

	softhca_config_default(&cfg);
	ret = softhca_config_from_env(&cfg, NULL, why, sizeof(why));
	if (ret)
		die(p, why, ret);
	ret = softhca_set_config(&cfg);
	if (ret)
		die(p, "softhca_set_config", ret);

	p->sv = softhca_verbs();
	if (!p->sv)
		die(p, "softhca_verbs", ENODEV);
	p->devs = p->sv->get_device_list(&n);
	if (!p->devs || n < 1)
		die(p, "get_device_list", p->devs ? ENODEV : errno);
	p->ctx = p->sv->open_device(p->devs[0]);
	if (!p->ctx)
		die(p, "open_device", errno);

	memset(&dattr, 0, sizeof(dattr));
	ret = ibv_query_device_ex(p->ctx, NULL, &dattr);
	if (ret)
		die(p, "ibv_query_device_ex", ret);
	say(p, "device %s (%s verbs): tm_caps flags 0x%x max_num_tags %u max_ops %u max_rndv_hdr_size %u max_sge %u",
	    p->sv->get_device_name(p->devs[0]), p->sv->name,
	    dattr.tm_caps.flags, dattr.tm_caps.max_num_tags,
	    dattr.tm_caps.max_ops, dattr.tm_caps.max_rndv_hdr_size,
	    dattr.tm_caps.max_sge);
	if (!(dattr.tm_caps.flags & IBV_TM_CAP_RC))
		die(p, "device lacks IBV_TM_CAP_RC", EOPNOTSUPP);
}

/* The PD, the registered arena and the CQ_ex. */
static void make_pd_mr_cq(struct proc *p)
{
	struct ibv_cq_init_attr_ex cattr = {
		.cqe = 256,
		.wc_flags = IBV_WC_EX_WITH_TM_INFO | IBV_WC_EX_WITH_BYTE_LEN |
			    IBV_WC_EX_WITH_QP_NUM,
	};

	p->pd = p->sv->alloc_pd(p->ctx);
	if (!p->pd)
		die(p, "alloc_pd", errno);

	if (posix_memalign((void **)&p->arena, 4096, ARENA_SIZE))
		die(p, "posix_memalign", ENOMEM);
	memset(p->arena, 0, ARENA_SIZE);
	p->mr = p->sv->reg_mr(p->pd, p->arena, ARENA_SIZE,
			      IBV_ACCESS_LOCAL_WRITE);
	if (!p->mr)
		die(p, "reg_mr", errno);

	p->cq = ibv_create_cq_ex(p->ctx, &cattr);
	if (!p->cq)
		die(p, "ibv_create_cq_ex", errno);
}

/* The TM-SRQ and the RC QP attached to it, both on the one CQ. */
static void make_srq_qp(struct proc *p, bool sends)
{
	struct ibv_srq_init_attr_ex sattr;
	struct ibv_qp_init_attr qattr;

	memset(&sattr, 0, sizeof(sattr));
	sattr.attr.max_wr = 64;
	sattr.attr.max_sge = 1;
	sattr.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			  IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sattr.srq_type = IBV_SRQT_TM;
	sattr.pd = p->pd;
	sattr.cq = ibv_cq_ex_to_cq(p->cq);
	sattr.tm_cap.max_num_tags = 32;
	sattr.tm_cap.max_ops = 16;
	p->srq = ibv_create_srq_ex(p->ctx, &sattr);
	if (!p->srq)
		die(p, "ibv_create_srq_ex(IBV_SRQT_TM)", errno);

	memset(&qattr, 0, sizeof(qattr));
	qattr.send_cq = ibv_cq_ex_to_cq(p->cq);
	qattr.recv_cq = ibv_cq_ex_to_cq(p->cq);
	qattr.srq = p->srq;
	qattr.qp_type = IBV_QPT_RC;
	qattr.cap.max_send_wr = sends ? 64 : 0;
	qattr.cap.max_send_sge = sends ? 1 : 0;
	p->qp = p->sv->create_qp(p->pd, &qattr);
	if (!p->qp)
		die(p, "create_qp", errno);
}

void setup(struct proc *p, bool sends)
{
	int i;

	open_card(p);
	make_pd_mr_cq(p);
	make_srq_qp(p, sends);
	for (i = 0; i < NUM_PLAIN; i++) {
		p->plain[i] = arena_alloc(p, PLAIN_SIZE);
		post_plain(p, i);
	}
	say(p, "PD, CQ_ex, TM-SRQ, RC QP %u ready; %d plain buffers posted",
	    p->qp->qp_num, NUM_PLAIN);
}

void connect_qp(struct proc *p)
{
	struct conn_info me, peer;
	struct ibv_qp_attr a;
	int ret;

	memset(&me, 0, sizeof(me));
	ret = p->sv->query_gid(p->ctx, 1, 0, &me.gid);
	if (ret)
		die(p, "query_gid", ret);
	me.qp_num = p->qp->qp_num;
	pipe_write(p, &me, sizeof(me));
	pipe_read(p, &peer, sizeof(peer));
	say(p, "peer qp %u gid %016llx:%016llx", peer.qp_num,
	    (unsigned long long)be64toh(peer.gid.global.subnet_prefix),
	    (unsigned long long)be64toh(peer.gid.global.interface_id));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
	ret = p->sv->modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		die(p, "modify_qp INIT", ret);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = peer.qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer.gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	ret = p->sv->modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_AV |
			       IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			       IBV_QP_MIN_RNR_TIMER);
	if (ret)
		die(p, "modify_qp RTR", ret);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	ret = p->sv->modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (ret)
		die(p, "modify_qp RTS", ret);
	say(p, "QP %u -> RTS, connected to qp %u", p->qp->qp_num, peer.qp_num);
}

void teardown(struct proc *p)
{
	int ret;

	if ((ret = p->sv->destroy_qp(p->qp)))
		fail(p, "destroy_qp: %s", strerror(ret));
	if ((ret = p->sv->destroy_srq(p->srq)))
		fail(p, "destroy_srq: %s", strerror(ret));
	if ((ret = p->sv->destroy_cq(ibv_cq_ex_to_cq(p->cq))))
		fail(p, "destroy_cq: %s", strerror(ret));
	if ((ret = p->sv->dereg_mr(p->mr)))
		fail(p, "dereg_mr: %s", strerror(ret));
	if ((ret = p->sv->dealloc_pd(p->pd)))
		fail(p, "dealloc_pd: %s", strerror(ret));
	if ((ret = p->sv->close_device(p->ctx)))
		fail(p, "close_device: %s", strerror(ret));
	p->sv->free_device_list(p->devs);
	free(p->arena);
}
