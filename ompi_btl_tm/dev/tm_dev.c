/*
 * tm_dev.c - provider choice, TM-SRQ, RC QPs, MRs (see tm_dev.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dev/tm_dev.h"
#include "softhca/softhca.h"

const char *tm_status_str(int status)
{
	switch (status) {
	case TM_OK: return "ok";
	case TM_ERR_NO_DEVICE: return "no device";
	case TM_ERR_NO_MEMORY: return "out of memory";
	case TM_ERR_INVALID: return "invalid argument";
	case TM_ERR_RANGE: return "value outside the tag layout";
	case TM_ERR_IO: return "verbs call failed";
	case TM_ERR_NOT_FOUND: return "not found";
	case TM_ERR_BUSY: return "busy";
	case TM_ERR_UNSUPPORTED: return "unsupported";
	}
	return "unknown status";
}

void tm_dev_config_default(struct tm_dev_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->provider = "auto";
	cfg->srq_max_wr = 1024;
	cfg->qp_max_send_wr = 256;
	cfg->cq_size = 4096;
}

/* Opens the first device of table v that has RC tag matching. */
static struct ibv_context *open_tm_device(const struct tm_verbs *v,
					  struct ibv_device_attr_ex *attr,
					  const char **devname)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, n = 0;

	list = v->get_device_list(&n);
	if (!list)
		return NULL;
	for (i = 0; i < n && !ctx; i++) {
		ctx = v->open_device(list[i]);
		if (!ctx)
			continue;
		memset(attr, 0, sizeof(*attr));
		if (ibv_query_device_ex(ctx, NULL, attr) ||
		    !(attr->tm_caps.flags & IBV_TM_CAP_RC)) {
			v->close_device(ctx);
			ctx = NULL;
			continue;
		}
		*devname = v->get_device_name(list[i]);
	}
	v->free_device_list(list);
	return ctx;
}

static uint32_t clamp_cap(uint32_t want, uint32_t cap)
{
	return (want == 0 || want > cap) ? cap : want;
}

static int create_queues(struct tm_dev *dev, const struct tm_dev_config *cfg)
{
	struct ibv_cq_init_attr_ex cq_attr = {
		.cqe = cfg->cq_size,
		.wc_flags = IBV_WC_EX_WITH_TM_INFO | IBV_WC_EX_WITH_BYTE_LEN |
			    IBV_WC_EX_WITH_QP_NUM,
	};
	struct ibv_srq_init_attr_ex srq_attr = {
		.attr = { .max_wr = cfg->srq_max_wr, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM,
		.srq_type = IBV_SRQT_TM,
	};

	dev->pd = dev->verbs->alloc_pd(dev->ctx);
	if (!dev->pd)
		return TM_ERR_IO;
	dev->tm_cq = ibv_create_cq_ex(dev->ctx, &cq_attr);
	if (!dev->tm_cq)
		return TM_ERR_IO;
	dev->send_cq = dev->verbs->create_cq(dev->ctx, cfg->cq_size, NULL,
					     NULL, 0);
	if (!dev->send_cq)
		return TM_ERR_IO;
	srq_attr.pd = dev->pd;
	srq_attr.cq = ibv_cq_ex_to_cq(dev->tm_cq);
	srq_attr.tm_cap.max_num_tags = dev->caps.max_num_tags;
	srq_attr.tm_cap.max_ops = dev->caps.max_ops;
	dev->srq = ibv_create_srq_ex(dev->ctx, &srq_attr);
	if (!dev->srq)
		return TM_ERR_IO;
	return TM_OK;
}

static int query_port(struct tm_dev *dev)
{
	struct ibv_port_attr pattr;

	dev->port = 1;
	memset(&pattr, 0, sizeof(pattr));
	if (ibv_query_port(dev->ctx, dev->port, &pattr))
		return TM_ERR_IO;
	dev->lid = pattr.lid;
	dev->mtu = pattr.active_mtu;
	if (dev->verbs->query_gid(dev->ctx, dev->port, 0, &dev->gid))
		return TM_ERR_IO;
	return TM_OK;
}

int tm_dev_open(const struct tm_dev_config *cfg, struct tm_dev **out)
{
	struct ibv_device_attr_ex attr;
	const char *prov = cfg->provider ? cfg->provider : "auto";
	const char *devname = "?";
	struct tm_dev *dev;
	int rc;

	if (getenv("TM_DEV_PROVIDER"))
		prov = getenv("TM_DEV_PROVIDER");
	if (strcmp(prov, "auto") && strcmp(prov, "soft") &&
	    strcmp(prov, "verbs")) {
		fprintf(stderr, "tm_dev: unknown provider '%s'\n", prov);
		return TM_ERR_INVALID;
	}
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return TM_ERR_NO_MEMORY;
	if (strcmp(prov, "soft")) {
		dev->verbs = &tm_verbs_ibv;
		dev->ctx = open_tm_device(dev->verbs, &attr, &devname);
	}
	if (!dev->ctx && strcmp(prov, "verbs")) {
		dev->verbs = softhca_verbs();
		dev->ctx = open_tm_device(dev->verbs, &attr, &devname);
	}
	if (!dev->ctx) {
		fprintf(stderr, "tm_dev: no TM-capable device (provider %s)\n",
			prov);
		free(dev);
		return TM_ERR_NO_DEVICE;
	}
	snprintf(dev->name, sizeof(dev->name), "%s:%s", dev->verbs->name,
		 devname);
	dev->caps.max_num_tags = clamp_cap(cfg->max_num_tags,
					   attr.tm_caps.max_num_tags);
	dev->caps.max_ops = clamp_cap(cfg->max_ops, attr.tm_caps.max_ops);
	dev->caps.max_rndv_hdr_size = attr.tm_caps.max_rndv_hdr_size;
	dev->caps.max_sge = attr.tm_caps.max_sge;
	dev->qp_max_send_wr = cfg->qp_max_send_wr;
	rc = query_port(dev);
	if (rc == TM_OK)
		rc = create_queues(dev, cfg);
	if (rc != TM_OK) {
		fprintf(stderr, "tm_dev: %s: setup failed: %s\n", dev->name,
			strerror(errno));
		tm_dev_close(dev);
		return rc;
	}
	*out = dev;
	return TM_OK;
}

void tm_dev_close(struct tm_dev *dev)
{
	if (!dev)
		return;
	if (dev->srq)
		dev->verbs->destroy_srq(dev->srq);
	if (dev->send_cq)
		dev->verbs->destroy_cq(dev->send_cq);
	if (dev->tm_cq)
		dev->verbs->destroy_cq(ibv_cq_ex_to_cq(dev->tm_cq));
	if (dev->pd)
		dev->verbs->dealloc_pd(dev->pd);
	if (dev->ctx)
		dev->verbs->close_device(dev->ctx);
	free(dev);
}

int tm_dev_qp_create(struct tm_dev *dev, struct ibv_qp **out)
{
	struct ibv_qp_init_attr init = {
		.send_cq = dev->send_cq,
		.recv_cq = ibv_cq_ex_to_cq(dev->tm_cq),
		.srq = dev->srq,
		.cap = { .max_send_wr = dev->qp_max_send_wr, .max_send_sge = 1,
			 .max_recv_wr = 0, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.port_num = dev->port,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_qp *qp;

	qp = dev->verbs->create_qp(dev->pd, &init);
	if (!qp)
		return TM_ERR_IO;
	if (dev->verbs->modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		dev->verbs->destroy_qp(qp);
		return TM_ERR_IO;
	}
	*out = qp;
	return TM_OK;
}

void tm_dev_qp_addr(struct tm_dev *dev, struct ibv_qp *qp,
		    struct tm_dev_addr *addr)
{
	memset(addr, 0, sizeof(*addr));
	memcpy(addr->gid, dev->gid.raw, sizeof(addr->gid));
	addr->qp_num = qp->qp_num;
	addr->lid = dev->lid;
}

int tm_dev_qp_connect(struct tm_dev *dev, struct ibv_qp *qp,
		      const struct tm_dev_addr *remote)
{
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = dev->mtu ? dev->mtu : IBV_MTU_4096;
	attr.dest_qp_num = remote->qp_num;
	attr.rq_psn = 0;
	attr.max_dest_rd_atomic = 16;
	attr.min_rnr_timer = 12;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.dlid = remote->lid;
	attr.ah_attr.port_num = dev->port;
	attr.ah_attr.grh.hop_limit = 1;
	memcpy(attr.ah_attr.grh.dgid.raw, remote->gid, 16);
	if (dev->verbs->modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV |
				  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return TM_ERR_IO;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7; /* infinite: receiver-not-ready must never fail */
	attr.sq_psn = 0;
	attr.max_rd_atomic = 16;
	if (dev->verbs->modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return TM_ERR_IO;
	return TM_OK;
}

int tm_dev_qp_destroy(struct tm_dev *dev, struct ibv_qp *qp)
{
	return dev->verbs->destroy_qp(qp) ? TM_ERR_IO : TM_OK;
}

int tm_dev_reg(struct tm_dev *dev, void *addr, size_t len, int access,
	       struct ibv_mr **out)
{
	struct ibv_mr *mr;

	mr = dev->verbs->reg_mr(dev->pd, addr, len,
				access | IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return errno == ENOMEM ? TM_ERR_NO_MEMORY : TM_ERR_IO;
	*out = mr;
	return TM_OK;
}

int tm_dev_dereg(struct tm_dev *dev, struct ibv_mr *mr)
{
	return dev->verbs->dereg_mr(mr) ? TM_ERR_IO : TM_OK;
}
