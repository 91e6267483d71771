/*
 * tm_verbs.h - the one table through which the project reaches verbs calls
 * that are real library functions.
 *
 * Contract
 * --------
 * Everything on the data path (ibv_post_send, ibv_post_srq_recv,
 * ibv_post_srq_ops, ibv_poll_cq, the ibv_cq_ex poll API, ibv_create_srq_ex,
 * ibv_create_cq_ex, ibv_query_device_ex, ibv_query_port) is an inline function
 * in <infiniband/verbs.h> that dispatches through function pointers stored in
 * the context or object.  Those are called directly, whoever the provider is.
 *
 * The verbs that libibverbs implements as library functions dispatch through
 * libibverbs-private state, so a provider that lives in this process (the soft
 * HCA) cannot be reached through them.  They are reached through a
 * struct tm_verbs instead, bound either to libibverbs (tm_verbs_ibv) or to the
 * soft HCA (softhca_verbs(), see softhca/softhca.h).  Objects created through
 * one table must be used with the same table.
 *
 * Every entry has the signature and the return convention of the libibverbs
 * function of the same name (NULL + errno, or an errno-style int).
 */
#ifndef TM_VERBS_H
#define TM_VERBS_H

#include <infiniband/verbs.h>

struct tm_verbs {
	const char *name; /* "verbs" or "soft": for messages */

	struct ibv_device **(*get_device_list)(int *num_devices);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *device);
	struct ibv_context *(*open_device)(struct ibv_device *device);
	int (*close_device)(struct ibv_context *context);
	int (*query_gid)(struct ibv_context *context, uint8_t port_num,
			 int index, union ibv_gid *gid);
	/* ibv_query_gid_ex: the GID and its type (IB, RoCE v1, RoCE v2) */
	int (*query_gid_ex)(struct ibv_context *context, uint32_t port_num,
			    uint32_t gid_index, struct ibv_gid_entry *entry,
			    uint32_t flags);

	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length,
				 int access);
	int (*dereg_mr)(struct ibv_mr *mr);

	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe,
				    void *cq_context,
				    struct ibv_comp_channel *channel,
				    int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd,
				      struct ibv_srq_init_attr *attr);
	int (*destroy_srq)(struct ibv_srq *srq);

	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			int attr_mask, struct ibv_qp_init_attr *init_attr);
	int (*destroy_qp)(struct ibv_qp *qp);
	/* UD address handles (dev/tm_dev_cm.c) */
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
	int (*destroy_ah)(struct ibv_ah *ah);
};

/* Bound to libibverbs and whatever kernel providers it finds. */
extern const struct tm_verbs tm_verbs_ibv;

#endif /* TM_VERBS_H */
