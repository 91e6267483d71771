/*
 * tm_dev.c - provider choice, TM-SRQ, RC QPs, MRs (see tm_dev.h).
 *
 * libucs's registration cache API differs between UCX releases; configure
 * finds which (config.h): the alignment is a creation parameter before
 * 1.17 and an argument of ucs_rcache_get from 1.17 on, and 1.18 calls a
 * merge op that must be there.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>
#include "dev/tm_dev.h"
#include "dev/tm_dev_priv.h"
#include "softhca/softhca.h"
#include "verbs/tm_verbs.h"

/*
 * A cached registration: libucs's region (first: the rcache allocates
 * region_struct_size bytes and hands us a pointer to the start), the
 * provider's MR, and the copy of it that tm_dev_mem_get() returns, so that
 * tm_dev_mem_put() finds the region from the MR alone and callers keep
 * storing one struct ibv_mr pointer as they did with tm_dev_reg().
 */
struct tm_dev_region {
	ucs_rcache_region_t super;
	struct ibv_mr *mr;
	struct ibv_mr view;
};

/* Unused regions the cache keeps by default (see tm_dev_config). */
#define RCACHE_MAX_REGIONS 1024
/*
 * Memory unmapped while still registered (the region was cached, or in
 * use) is deregistered by the next cache miss; past this much, libucs's
 * async thread does it, so that a real HCA does not keep freed memory
 * pinned for long in a process that has stopped missing.
 */
#define RCACHE_MAX_UNRELEASED (64UL << 20)

/*
 * Whole pages: what a real HCA pins anyway, and neighbouring small buffers
 * then share one region instead of one MR each.  Set by rcache_create.
 */
static size_t rcache_align = 4096;

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

/* ---- registration cache (see tm_dev.h) -------------------------------- */

/* regs/deregs: exact, and rare once the cache is warm. */
static void st_add(uint64_t *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/*
 * gets/fails: on every message, so no locked instruction (a hit costs
 * several already, inside libucs); concurrent callers may lose a count.
 */
static void st_inc(uint64_t *counter)
{
	__atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
}

/* The verbs access a region of protection prot is registered with. */
static int prot_access(int prot)
{
	if (prot & PROT_WRITE)
		return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ;
	return IBV_ACCESS_REMOTE_READ;
}

/* The protection a request needs: the rcache keys regions by it. */
static int access_prot(int access)
{
	if (access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		      IBV_ACCESS_REMOTE_ATOMIC))
		return PROT_READ | PROT_WRITE;
	return PROT_READ;
}

/*
 * Called by libucs with its page-table lock held for writing: registers
 * the whole aligned region (which may be the merge of overlapping ones).
 * Must not print (HIDE_ERRORS or not): a failure is returned to
 * tm_dev_mem_get(), which reports it.
 */
static ucs_status_t rcache_mem_reg(void *context, ucs_rcache_t *rcache,
				   void *arg, ucs_rcache_region_t *super,
				   uint16_t flags)
{
	struct tm_dev_region *reg = (struct tm_dev_region *)super;
	struct tm_dev *dev = context;
	struct ibv_mr *mr;

	(void)rcache;
	(void)arg;
	(void)flags;
	mr = dev->verbs->reg_mr(dev->pd, (void *)super->super.start,
				super->super.end - super->super.start,
				prot_access(super->prot));
	if (!mr)
		return errno == ENOMEM ? UCS_ERR_NO_MEMORY : UCS_ERR_IO_ERROR;
	reg->mr = mr;
	reg->view = *mr;
	st_add(&dev->mem_st.regs);
	return UCS_OK;
}

/*
 * Called with the page-table lock held for writing, from the thread that
 * dropped the last reference, from the next cache miss (for regions whose
 * memory was unmapped: libucs never deregisters inside the unmap hook
 * itself), from libucs's async thread, or at fork.  The provider's
 * dereg_mr is thread-safe; the soft HCA's takes its context lock, which
 * it never holds while calling into the cache, and the unmap hook only
 * try-locks the page table, so no lock order can invert here.
 */
static void rcache_mem_dereg(void *context, ucs_rcache_t *rcache,
			     ucs_rcache_region_t *super)
{
	struct tm_dev_region *reg = (struct tm_dev_region *)super;
	struct tm_dev *dev = context;

	(void)rcache;
	if (!reg->mr)
		return;
	dev->verbs->dereg_mr(reg->mr);
	reg->mr = NULL;
	st_add(&dev->mem_st.deregs);
}

#ifdef HAVE_UCS_RCACHE_OPS_T_MERGE
/*
 * Called for each cached region a new one absorbs (libucs unions the
 * ranges and protections and invalidates the old region).  Nothing of ours
 * carries over: the new region gets its own MR from rcache_mem_reg, and
 * the old one keeps its MR until its last holder puts it.  Counted.
 */
static void rcache_merge(void *context, ucs_rcache_t *rcache, void *arg,
			 ucs_rcache_region_t *super)
{
	struct tm_dev *dev = context;

	(void)rcache;
	(void)arg;
	(void)super;
	st_add(&dev->mem_st.merges);
}
#endif

static void rcache_dump_region(void *context, ucs_rcache_t *rcache,
			       ucs_rcache_region_t *super, char *buf,
			       size_t max)
{
	struct tm_dev_region *reg = (struct tm_dev_region *)super;

	(void)context;
	(void)rcache;
	if (reg->mr)
		snprintf(buf, max, "lkey 0x%x rkey 0x%x", reg->mr->lkey,
			 reg->mr->rkey);
	else
		snprintf(buf, max, "unregistered");
}

static const ucs_rcache_ops_t rcache_ops = {
	.mem_reg = rcache_mem_reg,
	.mem_dereg = rcache_mem_dereg,
#ifdef HAVE_UCS_RCACHE_OPS_T_MERGE
	/* called unchecked: without it every merge is a NULL call */
	.merge = rcache_merge,
#endif
	.dump_region = rcache_dump_region,
};

static int rcache_wanted(const struct tm_dev_config *cfg)
{
	const char *env = cfg->settled ? NULL : getenv("TM_DEV_RCACHE");

	if (env && *env)
		return strcmp(env, "0") != 0;
	return cfg->rcache;
}

/*
 * Without the cache tm_dev_mem_get() still works (it registers per call),
 * so a failure here is a note, not an error.  The usual one: libucm could
 * not hook munmap & co. (UCX_MEM_EVENTS=no, or a hook mode that does not
 * work in this process); caching without those events would hand out
 * stale registrations, so then there is no cache.
 */
static void rcache_create(struct tm_dev *dev, const struct tm_dev_config *cfg,
			  uint32_t dev_max_mr)
{
	ucs_rcache_params_t p;
	unsigned long max_regions = cfg->rcache_max_regions ?
				    cfg->rcache_max_regions :
				    RCACHE_MAX_REGIONS;
	long page = sysconf(_SC_PAGESIZE);
	char name[96];
	ucs_status_t st;

	/* Leave MRs for regions in use and for tm_dev_reg() users. */
	if (dev_max_mr >= 2 && max_regions > dev_max_mr / 2)
		max_regions = dev_max_mr / 2;
	memset(&p, 0, sizeof(p));
	p.region_struct_size = sizeof(struct tm_dev_region);
	if (page > 0)
		rcache_align = (size_t)page;
#ifdef HAVE_UCS_RCACHE_PARAMS_T_ALIGNMENT
	p.alignment = rcache_align;
	p.max_alignment = rcache_align;
#endif
	p.ucm_events = UCM_EVENT_VM_UNMAPPED;
	p.ucm_event_priority = 1000;
	p.ops = &rcache_ops;
	p.context = dev;
	/*
	 * Drop every unused region before fork(): a registered page shared
	 * with other data can be hidden from (or copied into) the child.
	 */
	p.flags = UCS_RCACHE_FLAG_PURGE_ON_FORK;
	p.max_regions = max_regions;
	p.max_size = SIZE_MAX;
	p.max_unreleased = RCACHE_MAX_UNRELEASED;
	snprintf(name, sizeof(name), "tm_dev:%s", dev->name);
	st = ucs_rcache_create(&p, name, NULL, &dev->rcache);
	if (st != UCS_OK) {
		dev->rcache = NULL;
		dev->rcache_off = ucs_status_string(st);
	}
}

int tm_dev_mem_get(struct tm_dev *dev, void *addr, size_t len, int access,
		   struct ibv_mr **mr)
{
	int prot = access_prot(access);
	ucs_rcache_region_t *super;
	ucs_status_t st;
	int rc;

	if (!len) {
		st_inc(&dev->mem_st.fails);
		return TM_ERR_INVALID;
	}
	if (!dev->rcache) {
		rc = tm_dev_reg(dev, addr, len, prot_access(prot), mr);
		if (rc != TM_OK) {
			st_inc(&dev->mem_st.fails);
			return rc;
		}
		st_inc(&dev->mem_st.gets);
		st_add(&dev->mem_st.regs);
		return TM_OK;
	}
#ifdef HAVE_UCS_RCACHE_GET_ALIGNMENT
	st = ucs_rcache_get(dev->rcache, addr, len, rcache_align, prot, NULL,
			    &super);
#else
	st = ucs_rcache_get(dev->rcache, addr, len, prot, NULL, &super);
#endif
	if (st != UCS_OK) {
		st_inc(&dev->mem_st.fails);
		return st == UCS_ERR_NO_MEMORY ? TM_ERR_NO_MEMORY : TM_ERR_IO;
	}
	st_inc(&dev->mem_st.gets);
	*mr = &((struct tm_dev_region *)super)->view;
	return TM_OK;
}

void tm_dev_mem_put(struct tm_dev *dev, struct ibv_mr *mr)
{
	struct tm_dev_region *reg;

	if (!dev->rcache) {
		if (tm_dev_dereg(dev, mr) == TM_OK)
			st_add(&dev->mem_st.deregs);
		return;
	}
	reg = (struct tm_dev_region *)((char *)mr -
				       offsetof(struct tm_dev_region, view));
	ucs_rcache_region_put(dev->rcache, &reg->super);
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
	if (rcache_wanted(cfg))
		rcache_create(dev, cfg, (uint32_t)attr.orig_attr.max_mr);
	*out = dev;
	return TM_OK;
}

void tm_dev_close(struct tm_dev *dev)
{
	if (!dev)
		return;
	/* Before the PD: destroying the cache deregisters what it holds. */
	if (dev->rcache)
		ucs_rcache_destroy(dev->rcache);
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
