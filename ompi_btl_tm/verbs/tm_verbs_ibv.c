/*
 * tm_verbs_ibv.c - struct tm_verbs bound to libibverbs.
 *
 * ibv_reg_mr is a macro in verbs.h (it passes the access flags on to
 * __ibv_reg_mr, which may pick another entry point for some of them), so
 * the table cannot take its address: ibv_reg_mr_fn is the one wrapper.
 * Every other entry is the libibverbs function itself.  (ibv_query_port is
 * a macro too, but it is one of the inline verbs the project calls
 * directly, see tm_verbs.h, so it has no entry.)
 */
#include "tm_verbs.h"

static struct ibv_mr *ibv_reg_mr_fn(struct ibv_pd *pd, void *addr,
				    size_t length, int access)
{
	return ibv_reg_mr(pd, addr, length, access);
}

static int ibv_query_gid_ex_fn(struct ibv_context *ctx, uint32_t port,
			       uint32_t index, struct ibv_gid_entry *entry,
			       uint32_t flags)
{
	return ibv_query_gid_ex(ctx, port, index, entry, flags);
}

const struct tm_verbs tm_verbs_ibv = {
	.name = "verbs",
	.get_device_list = ibv_get_device_list,
	.free_device_list = ibv_free_device_list,
	.get_device_name = ibv_get_device_name,
	.open_device = ibv_open_device,
	.close_device = ibv_close_device,
	.query_gid = ibv_query_gid,
	.query_gid_ex = ibv_query_gid_ex_fn,
	.alloc_pd = ibv_alloc_pd,
	.dealloc_pd = ibv_dealloc_pd,
	.reg_mr = ibv_reg_mr_fn,
	.dereg_mr = ibv_dereg_mr,
	.create_cq = ibv_create_cq,
	.destroy_cq = ibv_destroy_cq,
	.create_srq = ibv_create_srq,
	.destroy_srq = ibv_destroy_srq,
	.create_qp = ibv_create_qp,
	.modify_qp = ibv_modify_qp,
	.query_qp = ibv_query_qp,
	.destroy_qp = ibv_destroy_qp,
	.create_ah = ibv_create_ah,
	.destroy_ah = ibv_destroy_ah,
};
