/*
 * sh_util.h - shared helpers for the soft HCA unit tests.
 *
 * Everything here goes through the public verbs API: the inline verbs of
 * <infiniband/verbs.h> and the library verbs of softhca_verbs().  Nothing
 * looks inside the soft HCA.
 *
 * The usual set-up (struct sh_env) is two contexts in one process:
 *   side a ("sender"):   PD, TM-SRQ + its CQ, one registered arena
 *   side b ("receiver"): the same
 * and N RC QP pairs, p[i].sqp on a connected to p[i].rqp on b, both QPs
 * attached to their side's TM-SRQ (so a FIN sent to the sender arrives at
 * a's TM-SRQ as IBV_WC_TM_NO_TAG).  Each QP has its own send CQ.
 */
#ifndef SH_UTIL_H
#define SH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <infiniband/tm_types.h>
#include "softhca/softhca.h"

#define SH_MAX_PAIRS 64
#define SH_DEV_NAME "softtm0"
#define SH_TMH_LEN ((uint32_t)sizeof(struct ibv_tmh))
#define SH_RVH_LEN ((uint32_t)sizeof(struct ibv_rvh))

/* One completion, read with the extended poll API. */
struct sh_wc {
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	unsigned int wc_flags;
	uint64_t wr_id;
	uint32_t byte_len;
	uint64_t tag;  /* ibv_wc_read_tm_info, TM_RECV / TM_NO_TAG only */
	uint32_t priv;
	uint32_t qp_num;
};

struct sh_side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq_ex *cq;  /* the TM-SRQ's CQ (list ops and receives) */
	struct ibv_srq *srq;   /* the TM-SRQ (NULL if not created) */
	union ibv_gid gid;
	struct ibv_device_attr_ex attr;
	char *mem;             /* registered arena (mr covers it) */
	size_t mem_size, mem_used;
	struct ibv_mr *mr;
};

struct sh_pair {
	struct ibv_qp *sqp;     /* on side a */
	struct ibv_qp *rqp;     /* on side b */
	struct ibv_cq_ex *scq;  /* send CQ of sqp */
	struct ibv_cq_ex *rcq;  /* send CQ of rqp */
};

struct sh_env {
	struct sh_side a, b;
	int npairs;
	struct sh_pair p[SH_MAX_PAIRS];
};

const struct tm_verbs *sh_v(void);

/* Prints "Bail out!" with the reason and exits. */
void sh_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Default config with the given overrides applied by the caller. */
void sh_config(struct softhca_config *cfg);

/* Finds "softtm0" and opens it; NULL on failure. */
struct ibv_context *sh_open_ctx(void);

/* Side: context + PD + CQ_ex + arena (+ TM-SRQ if with_srq). 0 or errno. */
int sh_side_open(struct sh_side *s, enum softhca_sched sched, int with_srq);
void sh_side_close(struct sh_side *s);

/* A CQ_ex with byte_len, qp_num and tm_info; NULL on failure. */
struct ibv_cq_ex *sh_cq_ex(struct ibv_context *ctx, int cqe);
void sh_cq_destroy(struct ibv_cq_ex *cq);

/*
 * RC QP on side s: send CQ scq; receives to the side's TM-SRQ (srq != NULL)
 * or to its own receive queue completing on rcq.
 */
struct ibv_qp *sh_qp_create(struct sh_side *s, struct ibv_cq_ex *scq,
			    struct ibv_srq *srq, struct ibv_cq_ex *rcq);
/* INIT -> RTR -> RTS towards (gid, qpn). 0 or errno. */
int sh_qp_connect(struct ibv_qp *qp, const union ibv_gid *gid, uint32_t qpn);

/* Both sides, npairs QP pairs, config applied first. 0 or errno. */
int sh_env_open(struct sh_env *e, const struct softhca_config *cfg,
		enum softhca_sched sched, int npairs);
/* One more pair; its index, or -1. */
int sh_pair_add(struct sh_env *e);
void sh_env_close(struct sh_env *e);

/* Arena allocation (64-byte aligned, never freed; sh_mem_reset rewinds). */
void *sh_alloc(struct sh_side *s, size_t len);
size_t sh_mem_mark(struct sh_side *s);
void sh_mem_reset(struct sh_side *s, size_t mark);

/* Plain buffer on the side's TM-SRQ (buf inside the arena). */
int sh_post_plain(struct sh_side *s, uint64_t wr_id, void *buf, uint32_t len);

/* List ops.  flags: IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC. */
int sh_add(struct sh_side *s, uint64_t wr_id, uint64_t recv_wr_id, void *buf,
	   uint32_t len, uint64_t tag, uint64_t mask, uint32_t cnt, int flags,
	   uint32_t *handle);
int sh_del(struct sh_side *s, uint64_t wr_id, uint32_t handle, uint32_t cnt,
	   int flags);
int sh_sync(struct sh_side *s, uint64_t wr_id, uint32_t cnt, int flags);

/* Writes a TMH (big-endian fields) at dst; returns its length. */
uint32_t sh_put_tmh(void *dst, uint8_t op, uint32_t app_ctx, uint64_t tag);
uint32_t sh_put_rvh(void *dst, uint64_t va, uint32_t rkey, uint32_t len);

/*
 * Sends: the message is copied into the sending side's arena and posted as
 * IBV_WR_SEND (signalled) on p[pair].sqp (from_b == 0) or p[pair].rqp.
 */
int sh_send_raw(struct sh_env *e, int pair, int from_b, const void *msg,
		uint32_t len, uint64_t wr_id);
int sh_send_tm(struct sh_env *e, int pair, uint8_t op, uint64_t tag,
	       uint32_t app_ctx, const void *payload, uint32_t len,
	       uint64_t wr_id);
int sh_send_rndv(struct sh_env *e, int pair, uint64_t tag, uint32_t app_ctx,
		 uint64_t va, uint32_t rkey, uint32_t len, const void *meta,
		 uint32_t metalen, uint64_t wr_id);
/* Same, on a bare QP and arena side (two-process tests). */
int sh_qp_send(struct sh_side *s, struct ibv_qp *qp, const void *msg,
	       uint32_t len, uint64_t wr_id, int send_flags);

/* IBV_WR_RDMA_READ of len bytes from (raddr, rkey) into dst (lkey). */
int sh_post_read(struct ibv_qp *qp, void *dst, uint32_t lkey, uint32_t len,
		 uint64_t raddr, uint32_t rkey, uint64_t wr_id);

/* One completion: 1 read, 0 empty; <0 -errno on poll error. */
int sh_poll(struct ibv_cq_ex *cq, struct sh_wc *wc);
/* Everything available, up to max; returns the count. */
int sh_poll_all(struct ibv_cq_ex *cq, struct sh_wc *wc, int max);
/* Number of completions discarded. */
int sh_cq_discard(struct ibv_cq_ex *cq);

/*
 * MANUAL-mode stepping: one packet of p[pair].sqp moved to b and processed
 * by b's card (1 if both steps did work); one list op on side s.
 */
int sh_step_msg(struct sh_env *e, int pair);
int sh_step_op(struct sh_side *s);

/* Runs both cards until neither has work; returns units done. */
int sh_flush(struct sh_env *e);
/* Polls cq (flushing e if non-NULL) until a completion or timeout. */
int sh_wait(struct sh_env *e, struct ibv_cq_ex *cq, struct sh_wc *wc,
	    int timeout_ms);

/* Deterministic byte pattern. */
void sh_fill(void *p, size_t n, uint32_t seed);
int sh_check(const void *p, size_t n, uint32_t seed);
/* 1 if all n bytes equal c. */
int sh_all(const void *p, size_t n, unsigned char c);

/* Stats of side s (dies on failure). */
struct softhca_stats sh_stats(struct sh_side *s);

/* Printable wc, for diagnostics. */
const char *sh_wc_str(const struct sh_wc *wc);

double sh_now(void);

#endif /* SH_UTIL_H */
