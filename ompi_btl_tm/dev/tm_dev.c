/*
 * tm_dev.c - provider choice, TM-SRQ, RC QPs, MRs (see tm_dev.h); the
 * registration cache is tm_dev_rcache.c.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "dev/tm_dev.h"
#include "dev/tm_dev_priv.h"
#include "softhca/softhca.h"
#include "verbs/tm_verbs.h"


void tm_dev_config_default(struct tm_dev_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->provider = "auto";
	cfg->srq_max_wr = 1024;
	cfg->qp_max_send_wr = 256;
	cfg->cq_size = 4096;
	cfg->rcache = 1;
}

static uint32_t clamp_cap(uint32_t want, uint32_t cap)
{
	return (want == 0 || want > cap) ? cap : want;
}

static int create_queues(struct tm_dev *dev, int concurrent)
{
	struct ibv_cq_init_attr_ex cq_attr = {
		.cqe = dev->tm_cq_size,
		.wc_flags = IBV_WC_EX_WITH_TM_INFO | IBV_WC_EX_WITH_BYTE_LEN |
			    IBV_WC_EX_WITH_QP_NUM,
	};
	struct ibv_srq_init_attr_ex srq_attr = {
		.attr = { .max_wr = dev->srq_max_wr, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM,
		.srq_type = IBV_SRQT_TM,
	};
	struct ibv_cq_init_attr_ex send_attr = {
		.cqe = dev->send_cq_size,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_srq_init_attr plain_attr = {
		.attr = { .max_wr = dev->srq_max_wr, .max_sge = 1 },
	};
	struct ibv_cq_ex *send_cq;

	if (!dev->tm) /* no TM_INFO: a device without tag matching may refuse it */
		cq_attr.wc_flags &= ~(uint64_t)IBV_WC_EX_WITH_TM_INFO;
	dev->base_pd = dev->verbs->alloc_pd(dev->ctx);
	if (!dev->base_pd)
		return TM_ERR_IO;
	dev->pd = dev->base_pd;
	if (!concurrent) {
		struct ibv_td_init_attr td_attr = { 0 };
		struct ibv_parent_domain_init_attr pd_attr = {
			.pd = dev->base_pd,
		};

		/*
		 * Locks only cost speed: a provider without thread domains
		 * (EOPNOTSUPP), or one out of what a TD takes (mlx5 gives
		 * it a UAR of its own), gets locked objects instead.
		 */
		dev->td = ibv_alloc_td(dev->ctx, &td_attr);
		pd_attr.td = dev->td;
		if (dev->td)
			dev->pd = ibv_alloc_parent_domain(dev->ctx, &pd_attr);
		if (dev->td && !dev->pd) {
			ibv_dealloc_td(dev->td);
			dev->td = NULL;
			dev->pd = dev->base_pd;
		}
		if (dev->td) {
			cq_attr.comp_mask = send_attr.comp_mask =
				IBV_CQ_INIT_ATTR_MASK_FLAGS |
				IBV_CQ_INIT_ATTR_MASK_PD;
			cq_attr.flags = send_attr.flags =
				IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
			cq_attr.parent_domain = send_attr.parent_domain =
				dev->pd;
		}
	}
	dev->tm_cq = ibv_create_cq_ex(dev->ctx, &cq_attr);
	if (!dev->tm_cq)
		return TM_ERR_IO;
	send_cq = ibv_create_cq_ex(dev->ctx, &send_attr);
	if (!send_cq)
		return TM_ERR_IO;
	dev->send_cq = ibv_cq_ex_to_cq(send_cq);
	srq_attr.pd = dev->pd;
	srq_attr.cq = ibv_cq_ex_to_cq(dev->tm_cq);
	srq_attr.tm_cap.max_num_tags = dev->caps.max_num_tags;
	srq_attr.tm_cap.max_ops = dev->caps.max_ops;
	if (dev->tm)
		dev->srq = ibv_create_srq_ex(dev->ctx, &srq_attr);
	else
		dev->srq = dev->verbs->create_srq(dev->pd, &plain_attr);
	if (!dev->srq)
		return TM_ERR_IO;
	return TM_OK;
}

static uint32_t pow2_floor(uint32_t x)
{
	uint32_t p = 1;

	if (!x)
		return 0;
	while (p <= x / 2)
		p <<= 1;
	return p;
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static uint32_t clamp_int(int v)
{
	return v > 0 ? (uint32_t)v : 0;
}

/*
 * Sizes of everything tm_dev_open() creates, from the config and the
 * device's caps (tm_dev.h "Sizes"; doc/mlx5-rules.md rules 2, 4-6, 19).
 * Returns a message for what the device cannot do, or NULL.
 */
static const char *size_queues(struct tm_dev *dev,
			       const struct tm_dev_config *cfg,
			       const struct ibv_device_attr_ex *attr)
{
	const struct ibv_device_attr *a = &attr->orig_attr;
	uint32_t hw_ops, want, max_cqe = clamp_int(a->max_cqe);
	uint64_t tm_cqe, send_cqe;

	if (dev->tm) {
		dev->caps.max_num_tags = clamp_cap(cfg->max_num_tags,
						   attr->tm_caps.max_num_tags);
		/* mlx5's command queue: 4 send blocks per op, power-of-two
		 * sized, within max_qp_wr (== the card's max_send_wqebb)
		 * blocks */
		hw_ops = min_u32(attr->tm_caps.max_ops,
				 pow2_floor(clamp_int(a->max_qp_wr) / 4));
		want = cfg->max_ops ? cfg->max_ops :
		       2 * dev->caps.max_num_tags + 2;
		dev->caps.max_ops = min_u32(want, hw_ops);
		if (!dev->caps.max_num_tags || !dev->caps.max_ops)
			return "no room for a tag list or its operations";
	}
	/* the plain mode keeps the engine's floor too: one buffer per
	 * plain WQE it posts (TM_ENGINE_N_PLAIN_MIN) */
	dev->srq_max_wr = cfg->srq_max_wr > TM_DEV_MIN_PLAIN ?
			  cfg->srq_max_wr : TM_DEV_MIN_PLAIN;
	if (dev->srq_max_wr > clamp_int(a->max_srq_wr))
		dev->srq_max_wr = clamp_int(a->max_srq_wr);
	if (dev->srq_max_wr < TM_DEV_MIN_PLAIN)
		return "the SRQ cannot hold 33 plain WQEs";
	/* a completion per plain WQE, 3 per tag (ADD, match, data), one per
	 * op, and a SYNC per 2^14 unexpected messages (UCX's sizing) */
	tm_cqe = (uint64_t)dev->srq_max_wr + 3ull * dev->caps.max_num_tags +
		 dev->caps.max_ops + dev->srq_max_wr / (1u << 14) + 1;
	if (tm_cqe < cfg->cq_size)
		tm_cqe = cfg->cq_size;
	send_cqe = (uint64_t)cfg->max_peers * cfg->qp_max_send_wr;
	if (send_cqe < cfg->cq_size)
		send_cqe = cfg->cq_size;
	if (max_cqe) {
		tm_cqe = tm_cqe > max_cqe ? max_cqe : tm_cqe;
		send_cqe = send_cqe > max_cqe ? max_cqe : send_cqe;
	}
	dev->tm_cq_size = (uint32_t)tm_cqe;
	dev->send_cq_size = (uint32_t)(send_cqe ? send_cqe : 1);
	dev->max_rd_atomic = (uint8_t)min_u32(16, clamp_int(a->max_qp_init_rd_atom));
	dev->max_dest_rd_atomic = (uint8_t)min_u32(16, clamp_int(a->max_qp_rd_atom));
	return NULL;
}

/* ---- port and GID, chosen at open ------------------------------------ */

static int gid_is_zero(const union ibv_gid *g)
{
	static const uint8_t zero[16];

	return !memcmp(g->raw, zero, sizeof(zero));
}

static int gid_is_ipv4(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(g->raw, prefix, sizeof(prefix));
}

static int gid_is_link_local(const union ibv_gid *g)
{
	return g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80;
}

/*
 * Rank of a GID for RoCE, lower is better, -1 unusable: v2 before v1
 * (v1 is not routable), and within a version IPv4, then global IPv6,
 * then link-local IPv6.
 */
static int roce_rank(const struct ibv_gid_entry *e)
{
	int base;

	if (gid_is_zero(&e->gid))
		return -1;
	if (e->gid_type == IBV_GID_TYPE_ROCE_V2)
		base = 0;
	else if (e->gid_type == IBV_GID_TYPE_ROCE_V1)
		base = 3;
	else
		return -1;
	if (gid_is_ipv4(&e->gid))
		return base;
	return base + (gid_is_link_local(&e->gid) ? 2 : 1);
}

static int select_roce_gid(struct tm_dev *dev, int tbl_len)
{
	struct ibv_gid_entry e, best;
	int i, r, best_rank = -1;

	if (!dev->verbs->query_gid_ex)
		return TM_ERR_UNSUPPORTED;
	for (i = 0; i < tbl_len; i++) {
		/* empty slots fail (ENODATA) or read as zero */
		if (dev->verbs->query_gid_ex(dev->ctx, dev->port, (uint32_t)i,
					     &e, 0))
			continue;
		r = roce_rank(&e);
		if (r >= 0 && (best_rank < 0 || r < best_rank)) {
			best_rank = r;
			best = e;
		}
	}
	if (best_rank < 0)
		return TM_ERR_NOT_FOUND;
	dev->gid_index = (int)best.gid_index;
	dev->gid = best.gid;
	return TM_OK;
}

/* The first active port; its MTU, LID, size limits and GID. */
static int select_port(struct tm_dev *dev, const struct ibv_device_attr_ex *a)
{
	struct ibv_port_attr pattr;
	int p, nports = a->orig_attr.phys_port_cnt;

	for (p = 1; p <= nports && p <= 255; p++) {
		memset(&pattr, 0, sizeof(pattr));
		if (!ibv_query_port(dev->ctx, (uint8_t)p, &pattr) &&
		    pattr.state == IBV_PORT_ACTIVE)
			break;
	}
	if (p > nports || p > 255)
		return TM_ERR_NO_DEVICE;
	dev->port = (uint8_t)p;
	dev->link_layer = pattr.link_layer;
	dev->lid = pattr.lid;
	dev->mtu = pattr.active_mtu;
	dev->max_msg_sz = pattr.max_msg_sz;
	if (dev->link_layer == IBV_LINK_LAYER_ETHERNET)
		return select_roce_gid(dev, pattr.gid_tbl_len);
	dev->gid_index = 0;
	if (dev->verbs->query_gid(dev->ctx, dev->port, 0, &dev->gid))
		return TM_ERR_IO;
	return TM_OK;
}

/* ---- open and close ---------------------------------------------------- */

static __thread const char *open_why;

int tm_dev_is_rxe(const char *name, uint32_t vendor_id)
{
	if (vendor_id == TM_DEV_RXE_VENDOR_ID)
		return 1;
	return vendor_id == 0 && name && !strncmp(name, "rxe", 3);
}

const char *tm_dev_open_why(void)
{
	return open_why;
}

int tm_dev_open(const struct tm_dev_config *cfg, struct tm_dev **out)
{
	struct ibv_device_attr_ex attr;
	const char *prov = cfg->provider ? cfg->provider : "auto";
	const char *devname = "?", *why;
	struct tm_dev *dev;
	int rc, err;

	if (!cfg->settled && getenv("TM_DEV_PROVIDER"))
		prov = getenv("TM_DEV_PROVIDER");
	if (strcmp(prov, "auto") && strcmp(prov, "soft") &&
	    strcmp(prov, "verbs"))
		return TM_ERR_INVALID;
	open_why = NULL;
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return TM_ERR_NO_MEMORY;
	dev->ctx = tm_dev_pick_open(dev, cfg, prov, &attr, &devname);
	if (!dev->ctx) {
		/* a soft HCA variable it refused is the likelier story */
		open_why = strcmp(prov, "verbs") ? softhca_open_why() : NULL;
		if (!open_why)
			open_why = cfg->tm == TM_DEV_TM_ON ?
				   "no device with tag matching (IBV_TM_CAP_RC)" :
				   "no RC-capable device with an active port";
		free(dev);
		return TM_ERR_NO_DEVICE;
	}
	snprintf(dev->name, sizeof(dev->name), "%s:%s", dev->verbs->name,
		 devname);
	if (dev->tm) {
		dev->caps.max_rndv_hdr_size = attr.tm_caps.max_rndv_hdr_size;
		dev->caps.max_sge = attr.tm_caps.max_sge;
	}
	dev->qp_max_send_wr = cfg->qp_max_send_wr;
	dev->rxe = tm_dev_is_rxe(devname, attr.orig_attr.vendor_id);
	dev->cq_poll_max = dev->rxe ? 1 : UINT32_MAX;
	why = size_queues(dev, cfg, &attr);
	if (why) {
		open_why = why;
		tm_dev_close(dev);
		return TM_ERR_UNSUPPORTED;
	}
	rc = select_port(dev, &attr);
	if (rc != TM_OK) {
		open_why = rc == TM_ERR_NO_DEVICE ? "no active port" :
			   "no usable GID (RoCE v2/v1) on the port";
		tm_dev_close(dev);
		return rc;
	}
	rc = create_queues(dev, cfg->concurrent);
	if (rc != TM_OK) {
		/* the caller reports the verbs call's errno, not close's */
		err = errno;
		tm_dev_close(dev);
		errno = err;
		return rc;
	}
	tm_dev_rcache_setup(dev, cfg, (uint32_t)attr.orig_attr.max_mr);
	*out = dev;
	return TM_OK;
}

void tm_dev_close(struct tm_dev *dev)
{
	if (!dev)
		return;
	/* Before the PD: destroying the cache deregisters what it holds. */
	tm_dev_rcache_close(dev);
	if (dev->srq)
		dev->verbs->destroy_srq(dev->srq);
	if (dev->send_cq)
		dev->verbs->destroy_cq(dev->send_cq);
	if (dev->tm_cq)
		dev->verbs->destroy_cq(ibv_cq_ex_to_cq(dev->tm_cq));
	if (dev->pd && dev->pd != dev->base_pd)
		dev->verbs->dealloc_pd(dev->pd);
	if (dev->base_pd)
		dev->verbs->dealloc_pd(dev->base_pd);
	if (dev->td)
		ibv_dealloc_td(dev->td);
	if (dev->ctx)
		dev->verbs->close_device(dev->ctx);
	free(dev);
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
