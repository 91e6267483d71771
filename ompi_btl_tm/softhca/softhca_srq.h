/*
 * softhca_srq.h - the soft HCA's receive side: plain receive buffers (an
 * SRQ's or a QP's own receive queue), the TM-SRQ with its tag list, its
 * index and its list-op queue, and the calls of srq.c and taglist.c.
 * Included by softhca_priv.h (after SH_MAX_SGE), which the soft HCA's
 * files include; the card's decision on an arrival that uses these is
 * softhca_match.h's.  Guarded like every object by the context's lock
 * (softhca_priv.h, "Locking").
 */
#ifndef SOFTHCA_SRQ_H
#define SOFTHCA_SRQ_H

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <infiniband/tm_types.h>

struct sh_context;
struct sh_cq;

struct sh_rbuf {
	uint64_t wr_id;
	uint32_t num_sge;
	struct ibv_sge sge[SH_MAX_SGE];
};

/* FIFO of plain receive buffers (an SRQ's, or a QP's own RQ). */
struct sh_rq {
	struct sh_rbuf *buf;
	uint32_t cap, first, count;
};

struct sh_tag {
	uint64_t tag, mask;
	uint64_t recv_wr_id;
	uint64_t seq;           /* list order: when the card appended it */
	struct ibv_sge sge[SH_MAX_SGE];
	uint32_t num_sge;
	uint32_t refs;          /* 0: free */
	uint16_t phase;         /* posted_cnt when its ADD was posted */
	int32_t prev, next;     /* list links, -1 at the ends */
	int32_t bprev, bnext;   /* links in its bucket (or the overflow list) */
	int8_t group;           /* its mask group, -1: overflow list */
	bool on_list;
	bool active;
};

/*
 * The card's index of its tag list (taglist.c), so that a match costs the
 * same with 1 or 1023 entries, as on hardware that compares in parallel.
 * Entries are grouped by mask (MPI uses a handful: exact, any source, any
 * tag, both); within a group they hash by tag & mask into buckets kept in
 * list order.  A match takes the earliest active entry over the groups'
 * buckets for the tag; masks beyond SH_MASK_GROUPS go to an overflow list
 * that is scanned.
 */
#define SH_MASK_GROUPS 8
/* Short lists are scanned: hashing costs more than a few compares. */
#define SH_INDEX_FROM 16

struct sh_mask_group {
	uint64_t mask;
	uint32_t entries;
	void *buckets;          /* khash: tag & mask -> struct sh_bucket */
};

struct sh_op {
	uint64_t seq;
	uint64_t wr_id;
	enum ibv_ops_wr_opcode opcode;
	int flags;
	uint32_t unexpected_cnt;
	uint32_t handle;
	uint16_t phase;         /* ADD/DEL: the entry's phase (see sh_srq) */
};

struct sh_srq {
	struct ibv_srq srq;
	struct sh_context *ctx;
	bool tm;
	bool lockfree;               /* counted as such (sh_obj_attach) */
	uint32_t max_wr, max_sge;
	struct sh_cq *cq;            /* TM-SRQ's dedicated CQ */
	struct sh_rq rq;
	int users;                   /* attached QPs */
	/* tag matching */
	uint32_t max_num_tags, max_ops;
	struct sh_tag *tags;
	int32_t free_head;           /* free slots chained through .next */
	int32_t list_head, list_tail;
	uint32_t list_len, list_inactive;
	uint64_t list_seq;
	struct sh_mask_group groups[SH_MASK_GROUPS];
	int32_t over_head, over_tail; /* entries whose mask has no group */
	bool indexed;                 /* the index covers the whole list */
	struct sh_op *ops;           /* FIFO of posted, unprocessed ops */
	uint32_t ops_first, ops_count;
	uint64_t ops_posted, ops_retired;
	/* ibv_post_srq_ops calls that took at least one op (mlx5 rings the
	 * command QP's doorbell once for each), and ADDs taken */
	uint64_t ops_doorbells, adds_posted;
	uint16_t hw_cnt, sw_cnt;
	/*
	 * The count software last reported, as of posting (mlx5's unexp_out,
	 * updated by ADDs with IBV_OPS_TM_SYNC when posted); an ADD records it
	 * as its entry's phase.  SYNC_REQ, as mlx5 sets it (doc/mlx5-rules.md
	 * rule 9): on a signalled ADD/DEL completion when the card's counter
	 * at the op differs from the entry's phase, on an unexpected arrival
	 * when the card is more than 0x3fff ahead of posted_cnt, else never.
	 */
	uint16_t posted_cnt;
	uint64_t matched, unexpected, rnr_waits, card_reads;
	struct sh_srq *next;
};

/* srq.c */
struct ibv_srq *sh_create_srq_ex(struct ibv_context *c,
				 struct ibv_srq_init_attr_ex *attr);
struct ibv_srq *sh_create_srq(struct ibv_pd *pd,
			      struct ibv_srq_init_attr *attr);
int sh_destroy_srq(struct ibv_srq *srq);
int sh_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad);
int sh_post_srq_ops(struct ibv_srq *srq, struct ibv_ops_wr *wr,
		    struct ibv_ops_wr **bad);
int sh_rq_post(struct sh_rq *rq, uint32_t max_wr, uint32_t max_sge,
	       struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
void sh_rq_free(struct sh_rq *rq);
bool sh_srq_op_step(struct sh_srq *srq);

/* taglist.c */
int sh_tl_init(struct sh_srq *srq);
void sh_tl_fini(struct sh_srq *srq);
int sh_tl_insert(struct sh_srq *srq, int32_t h);
void sh_tl_remove(struct sh_srq *srq, int32_t h);
int32_t sh_tl_match_indexed(struct sh_srq *srq, uint64_t tag);

/* A tag slot reference dropped: the last one frees the slot. */
static inline void sh_tag_put(struct sh_srq *srq, int32_t h)
{
	struct sh_tag *t = &srq->tags[h];

	if (--t->refs)
		return;
	t->next = srq->free_head;
	srq->free_head = h;
}

/* A polled completion releases what it held (cq.c, when popped). */
static inline void sh_srq_retire(struct sh_srq *srq, int32_t handle,
				 uint64_t retire_seq)
{
	if (handle >= 0)
		sh_tag_put(srq, handle);
	if (retire_seq > srq->ops_retired)
		srq->ops_retired = retire_seq;
}

#endif /* SOFTHCA_SRQ_H */
