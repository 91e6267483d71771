/*
 * device.c - the soft HCA device: configuration, the device list, contexts,
 * device and port queries, PDs, and the library-verbs table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "softhca_param.h"
#include "softhca_priv.h"
#include "softhca_sched.h"

static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static struct softhca_config config;
static bool config_set;
static uint32_t next_instance;

static struct ibv_device sh_device = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = "softtm0",
	.dev_name = "softtm0",
};

/* ---- configuration (the table: softhca_param.c) ---------------------- */

/* Why this thread's last context open found no usable config. */
static __thread char open_why[200];

const char *softhca_open_why(void)
{
	return open_why[0] ? open_why : NULL;
}

int softhca_set_config(const struct softhca_config *cfg)
{
	int err = softhca_config_check(cfg, NULL, NULL, 0);

	if (err)
		return err;
	pthread_mutex_lock(&config_lock);
	config = *cfg;
	config_set = true;
	pthread_mutex_unlock(&config_lock);
	return 0;
}

/* The config a new context gets: the one set, else defaults + env (read
 * once: the environment never overrides a config that was set). */
static int config_snapshot(struct softhca_config *cfg)
{
	int err = 0;

	open_why[0] = '\0';
	pthread_mutex_lock(&config_lock);
	if (!config_set) {
		softhca_config_default(&config);
		err = softhca_config_from_env(&config, NULL, open_why,
					      sizeof(open_why));
		config_set = !err;
	}
	*cfg = config;
	pthread_mutex_unlock(&config_lock);
	return err;
}

/* ---- device list ----------------------------------------------------- */

static struct ibv_device **sh_get_device_list(int *num)
{
	struct ibv_device **list = calloc(2, sizeof(*list));

	if (!list)
		return NULL;
	list[0] = &sh_device;
	if (num)
		*num = 1;
	return list;
}

static void sh_free_device_list(struct ibv_device **list)
{
	free(list);
}

static const char *sh_get_device_name(struct ibv_device *dev)
{
	return config.rxe_cq == 2 ? "rxe0" : dev->name;
}

/* ---- queries --------------------------------------------------------- */

static int sh_query_device_ex(struct ibv_context *c,
			      const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t size)
{
	const struct softhca_config *cfg = &to_sh_ctx(c)->cfg;
	struct ibv_device_attr *a = &attr->orig_attr;

	if ((input && input->comp_mask) || size < sizeof(*attr))
		return EINVAL;
	memset(attr, 0, size);
	snprintf(a->fw_ver, sizeof(a->fw_ver), "softhca-1");
	a->vendor_id = cfg->rxe_cq == 1 ? 0xFFFFFFu : 0x0; /* the kernel rxe's */
	a->max_mr_size = UINT64_MAX;
	a->page_size_cap = 4096;
	a->max_qp = (int)cfg->max_qp;
	a->max_qp_wr = (int)cfg->max_wr;
	a->max_sge = SH_MAX_SGE;
	a->max_cq = 1 << 16;
	a->max_cqe = (int)SH_MAX_CQE;
	a->max_mr = (int)cfg->max_mr;
	a->max_pd = 1 << 16;
	a->max_qp_rd_atom = (int)SH_MAX_RD_ATOM;
	a->max_qp_init_rd_atom = (int)SH_MAX_RD_ATOM;
	a->max_srq = 1 << 10;
	a->max_srq_wr = (int)cfg->max_wr;
	a->max_srq_sge = SH_MAX_SGE;
	a->phys_port_cnt = 1;
	if (cfg->no_tm)
		return 0; /* tm_caps stay zero, as on a card without TM */
	attr->tm_caps.max_rndv_hdr_size = cfg->max_rndv_hdr_size;
	attr->tm_caps.max_num_tags = cfg->max_num_tags;
	attr->tm_caps.flags = IBV_TM_CAP_RC;
	attr->tm_caps.max_ops = cfg->max_ops;
	attr->tm_caps.max_sge = cfg->max_sge;
	return 0;
}

uint32_t sh_sq_wqe_size(uint32_t max_sge, uint32_t max_inline)
{
	uint32_t size = SH_WQE_OVERHEAD + 16u * max_sge;
	uint32_t inl = max_inline ? SH_WQE_OVERHEAD +
				    ((4u + max_inline + 15u) & ~15u) : 0;

	if (max_inline > SH_MAX_WQE || max_sge > SH_MAX_WQE / 16)
		return 0;
	if (inl > size)
		size = inl;
	if (size > SH_MAX_WQE)
		return 0;
	return (size + SH_WQEBB - 1) & ~(SH_WQEBB - 1);
}

uint64_t sh_sq_wqebbs(uint32_t max_wr, uint32_t max_sge, uint32_t max_inline)
{
	uint32_t size = sh_sq_wqe_size(max_sge, max_inline);
	uint64_t bytes, pow2 = 1;

	if (!size)
		return 0;
	bytes = (uint64_t)max_wr * size;
	while (pow2 < bytes)
		pow2 <<= 1;
	return pow2 / SH_WQEBB;
}

static enum ibv_mtu mtu_enum(uint32_t mtu)
{
	if (mtu >= 4096)
		return IBV_MTU_4096;
	if (mtu >= 2048)
		return IBV_MTU_2048;
	if (mtu >= 1024)
		return IBV_MTU_1024;
	if (mtu >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

static int sh_query_port(struct ibv_context *c, uint8_t port,
			 struct ibv_port_attr *attr, size_t len)
{
	if (port != 1)
		return EINVAL;
	memset(attr, 0, len < sizeof(*attr) ? len : sizeof(*attr));
	attr->state = to_sh_ctx(c)->cfg.port_down ? IBV_PORT_DOWN :
						    IBV_PORT_ACTIVE;
	attr->max_mtu = attr->active_mtu = mtu_enum(to_sh_ctx(c)->cfg.mtu);
	attr->gid_tbl_len = 1;
	attr->pkey_tbl_len = 1;
	attr->lid = 1;
	attr->max_msg_sz = to_sh_ctx(c)->cfg.max_msg_sz;
	attr->active_width = 4;   /* 4x */
	attr->active_speed = 32;  /* EDR */
	attr->phys_state = attr->state == IBV_PORT_DOWN ? 2 /* Polling */ :
							  5 /* LinkUp */;
	attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
	return 0;
}

static int sh_query_gid(struct ibv_context *c, uint8_t port, int index,
			union ibv_gid *gid)
{
	struct sh_context *ctx = to_sh_ctx(c);

	if (port != 1 || index != 0)
		return EINVAL;
	sh_gid_encode(gid, getpid(), ctx->pub_fd, ctx->nonce, ctx->key);
	return 0;
}

/* An InfiniBand port: one GID, of type IB. */
static int sh_query_gid_ex(struct ibv_context *c, uint32_t port,
			   uint32_t index, struct ibv_gid_entry *entry,
			   uint32_t flags)
{
	int err;

	if (flags || port > UINT8_MAX || index > INT32_MAX)
		return EINVAL;
	memset(entry, 0, sizeof(*entry));
	err = sh_query_gid(c, (uint8_t)port, (int)index, &entry->gid);
	if (err)
		return err;
	entry->gid_index = index;
	entry->port_num = port;
	entry->gid_type = IBV_GID_TYPE_IB;
	return 0;
}

/* ---- PDs, thread domains, parent domains ---------------------------- */

static struct sh_pd *to_sh_pd(struct ibv_pd *pd)
{
	return sh_container_of(pd, struct sh_pd, pd);
}

static struct ibv_pd *sh_alloc_pd(struct ibv_context *c)
{
	struct sh_pd *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return NULL;
	pd->pd.context = c;
	return &pd->pd;
}

/* A PD that parent domains still name, or a TD they hold: EBUSY. */
static int sh_dealloc_pd(struct ibv_pd *ibpd)
{
	struct sh_pd *pd = to_sh_pd(ibpd);
	struct sh_context *ctx = to_sh_ctx(ibpd->context);

	pthread_mutex_lock(&ctx->lock);
	if (pd->refs) {
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY;
	}
	if (pd->parent)
		pd->parent->refs--;
	if (pd->td)
		pd->td->refs--;
	pthread_mutex_unlock(&ctx->lock);
	free(pd);
	return 0;
}

static struct ibv_td *sh_alloc_td(struct ibv_context *c,
				  struct ibv_td_init_attr *attr)
{
	struct sh_td *td;

	if (attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	td = calloc(1, sizeof(*td));
	if (!td) {
		errno = ENOMEM;
		return NULL;
	}
	td->td.context = c;
	return &td->td;
}

static int sh_dealloc_td(struct ibv_td *ibtd)
{
	struct sh_td *td = sh_container_of(ibtd, struct sh_td, td);
	struct sh_context *ctx = to_sh_ctx(ibtd->context);

	pthread_mutex_lock(&ctx->lock);
	if (td->refs) {
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY;
	}
	pthread_mutex_unlock(&ctx->lock);
	free(td);
	return 0;
}

/* What mlx5 accepts: a PD of this context (not itself a parent domain),
 * an optional TD, and no allocator or other extension we do not have. */
static struct ibv_pd *sh_alloc_parent_domain(struct ibv_context *c,
				struct ibv_parent_domain_init_attr *attr)
{
	struct sh_context *ctx = to_sh_ctx(c);
	struct sh_pd *pd;

	if (!attr->pd || attr->pd->context != c || attr->comp_mask ||
	    to_sh_pd(attr->pd)->parent ||
	    (attr->td && attr->td->context != c)) {
		errno = attr->comp_mask ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->pd.context = c;
	pd->pd.handle = attr->pd->handle;
	pd->parent = to_sh_pd(attr->pd);
	pd->td = attr->td ? sh_container_of(attr->td, struct sh_td, td)
			  : NULL;
	pthread_mutex_lock(&ctx->lock);
	pd->parent->refs++;
	if (pd->td)
		pd->td->refs++;
	pthread_mutex_unlock(&ctx->lock);
	return &pd->pd;
}

static void set_locking(struct sh_context *ctx)
{
	bool locking = !ctx->cfg.single_threaded &&
		       (ctx->locked_objs || !ctx->td_objs);

	if (locking == ctx->locking)
		return;
	ctx->locking = locking;
	/* (the CQs' poll calls follow: softhca_cq.h) */
	for (struct sh_cq *cq = ctx->cqs; cq; cq = cq->next)
		sh_cq_pick_poll(cq);
}

bool sh_obj_attach(struct sh_context *ctx, struct ibv_pd *pd, int cq_flags)
{
	struct sh_td *td = pd ? to_sh_pd(pd)->td : NULL;
	bool lockfree;

	if (ctx->cfg.single_threaded)
		return true;
	/*
	 * The card serves every object of the context, so one locked object
	 * (or objects on two TDs, which two threads may drive at once)
	 * makes the whole context lock.
	 */
	lockfree = td && (!ctx->td || ctx->td == td) &&
		   (cq_flags < 0 ||
		    (cq_flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED));
	if (lockfree) {
		ctx->td = td;
		ctx->td_objs++;
	} else {
		ctx->locked_objs++;
	}
	set_locking(ctx);
	return lockfree;
}

void sh_obj_detach(struct sh_context *ctx, bool lockfree)
{
	if (ctx->cfg.single_threaded)
		return;
	if (!lockfree)
		ctx->locked_objs--;
	else if (!--ctx->td_objs)
		ctx->td = NULL;
	set_locking(ctx);
}

/* ---- contexts -------------------------------------------------------- */

static void ctx_free(struct sh_context *ctx)
{
	while (ctx->peers) {
		ctx->peers->refs = 1; /* no QP is left to hold a reference */
		sh_peer_put(ctx, ctx->peers);
	}
	sh_seg_destroy(ctx);
	pthread_mutex_destroy(&ctx->lock);
	pthread_mutex_destroy(&ctx->mr_lock);
	free(ctx->qps);
	free(ctx);
}

static void ctx_bind_ops(struct sh_context *ctx)
{
	struct verbs_context *v = &ctx->vctx;

	v->sz = sizeof(*v);
	v->context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	v->context.ops.poll_cq = sh_poll_cq;
	v->context.ops.req_notify_cq = sh_req_notify_cq;
	v->context.ops.post_srq_recv = sh_post_srq_recv;
	v->context.ops.post_send = sh_post_send;
	v->context.ops.post_recv = sh_post_recv;
	v->query_port = sh_query_port;
	v->query_device_ex = sh_query_device_ex;
	v->create_cq_ex = sh_create_cq_ex;
	v->create_srq_ex = sh_create_srq_ex;
	v->post_srq_ops = sh_post_srq_ops;
	v->alloc_td = sh_alloc_td;
	v->dealloc_td = sh_dealloc_td;
	v->alloc_parent_domain = sh_alloc_parent_domain;
	/* the card's entry: posts and polls ring it (sh_doorbell) */
	ctx->doorbell = sh_sched_doorbell;
}

static struct ibv_context *sh_open_device(struct ibv_device *dev)
{
	struct sh_context *ctx;
	int err;

	if (dev != &sh_device) {
		errno = ENODEV;
		return NULL;
	}
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return NULL;
	err = config_snapshot(&ctx->cfg);
	if (err)
		goto fail;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->mr_lock, NULL);
	set_locking(ctx);
	pthread_mutex_lock(&config_lock);
	ctx->instance = next_instance++;
	pthread_mutex_unlock(&config_lock);
	ctx->qps = calloc(ctx->cfg.max_qp, sizeof(*ctx->qps));
	if (!ctx->qps) {
		err = ENOMEM;
		goto fail;
	}
	err = sh_seg_create(ctx);
	if (err)
		goto fail;
	ctx->sched = ctx->cfg.sched;
	ctx->rng = ctx->cfg.seed ? ctx->cfg.seed
				 : ((uint64_t)getpid() << 32) ^
					   (uint64_t)time(NULL) ^ ctx->instance;
	if (!ctx->rng)
		ctx->rng = 1;
	ctx_bind_ops(ctx);
	ctx->vctx.context.device = dev;
	ctx->vctx.context.cmd_fd = -1;
	ctx->vctx.context.async_fd = -1;
	ctx->vctx.context.num_comp_vectors = 1;
	pthread_mutex_init(&ctx->vctx.context.mutex, NULL);
	return &ctx->vctx.context;
fail:
	free(ctx->qps);
	free(ctx);
	errno = err;
	return NULL;
}

static int sh_close_device(struct ibv_context *c)
{
	struct sh_context *ctx = to_sh_ctx(c);

	pthread_mutex_lock(&ctx->lock);
	for (uint32_t i = 0; i < ctx->qp_hwm; i++)
		if (ctx->qps[i]) {
			pthread_mutex_unlock(&ctx->lock);
			return EBUSY;
		}
	if (ctx->srqs || ctx->cqs) {
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY;
	}
	pthread_mutex_unlock(&ctx->lock);
	ctx_free(ctx);
	return 0;
}

static const struct tm_verbs softhca_table = {
	.name = "soft",
	.get_device_list = sh_get_device_list,
	.free_device_list = sh_free_device_list,
	.get_device_name = sh_get_device_name,
	.open_device = sh_open_device,
	.close_device = sh_close_device,
	.query_gid = sh_query_gid,
	.query_gid_ex = sh_query_gid_ex,
	.alloc_pd = sh_alloc_pd,
	.dealloc_pd = sh_dealloc_pd,
	.reg_mr = sh_reg_mr,
	.dereg_mr = sh_dereg_mr,
	.create_cq = sh_create_cq,
	.destroy_cq = sh_destroy_cq,
	.create_srq = sh_create_srq,
	.destroy_srq = sh_destroy_srq,
	.create_qp = sh_create_qp,
	.modify_qp = sh_modify_qp,
	.create_ah = sh_create_ah,
	.destroy_ah = sh_destroy_ah,
	.query_qp = sh_query_qp,
	.destroy_qp = sh_destroy_qp,
};

const struct tm_verbs *softhca_verbs(void)
{
	return &softhca_table;
}
