/*
 * softhca_ud.h - the UD QP's state in a context and the calls of ud.c
 * (the contract is at the top of ud.c; the mailbox's format and trust
 * rules in softhca_shm.h, struct sh_ud_box).
 */
#ifndef SOFTHCA_UD_H
#define SOFTHCA_UD_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include "softhca_shm.h"

struct sh_qp;
struct sh_cq;

/* In struct sh_context, under its lock. */
struct sh_ud {
	struct sh_qp *qp;            /* the UD QP (one per context), or NULL */
	uint32_t claim;              /* our claims in peers' mailboxes */
	uint32_t posted_seen;        /* our mailbox's posted, last look */
	uint32_t polls;              /* looks skipped since the last scan */
	uint32_t seen[SH_UD_SLOTS];  /* a claimed slot's state ... */
	uint64_t since[SH_UD_SLOTS]; /* ... and since when */
	uint64_t bad, dropped;       /* softhca_stats.ud_bad, ud_dropped */
};

struct ibv_ah *sh_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int sh_destroy_ah(struct ibv_ah *ah);
int sh_ud_post_send(struct sh_qp *qp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad);
/* Delivers what waits in the mailbox to the UD QP's receives (cq: its
 * receive CQ, being polled). */
void sh_ud_pull(struct sh_cq *cq);

#endif /* SOFTHCA_UD_H */
