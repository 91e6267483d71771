/*
 * ud.c - the soft HCA's UD QP: what a connection manager needs to reach
 * a peer named by a GID before any RC QP joins them (dev/tm_dev_cm.h).
 *
 * One UD QP per context.  A send goes, at once and in the calling verb,
 * to the mailbox of the context its address handle's GID names
 * (softhca_shm.h, struct sh_ud_box), reached through the same handover
 * as an RC connection (handover.c: same user, the GID's key), so another
 * user's process cannot write there at all; it completes IBV_WC_SUCCESS
 * whether or not the datagram arrives (unreliable, as UD is: an
 * unreachable GID, a full mailbox or a receiver with no receive posted
 * loses it, counted in softhca_stats.ud_dropped).  Receives are taken
 * from the mailbox when the UD QP's receive CQ is polled with ibv_poll_cq
 * (a UD QP only a connection manager polls now and then costs the data
 * path nothing): each lands in the next posted receive as a 40-byte GRH
 * (the sender's GID at bytes 8-23, ours at 24-39) and the payload, with
 * IBV_WC_GRH and src_qp set.  Everything in a slot is peer-written and
 * checked (size, QP number, qkey, state); what fails is dropped and
 * counted in softhca_stats.ud_bad.  The sender's GID is what the sender
 * says: a same-user process that holds our key can claim any; a
 * connection manager checks it against what the job published.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "softhca_priv.h"
#include "softhca_sched.h"

#define SH_UD_STALE_NS (1000ull * 1000 * 1000)
/* a mailbox whose posted word did not move is scanned anyway this often
 * (polls), for claims that were never finished */
#define SH_UD_SCAN_EVERY 1024u
#define SH_GRH_LEN 40u

struct sh_ah {
	struct ibv_ah ah;
	union ibv_gid dgid;
};

struct ibv_ah *sh_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sh_ah *a;

	if (!attr->is_global || attr->port_num > 1) {
		errno = EINVAL;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->ah.context = pd->context;
	a->ah.pd = pd;
	a->dgid = attr->grh.dgid;
	return &a->ah;
}

int sh_destroy_ah(struct ibv_ah *ah)
{
	free(sh_container_of(ah, struct sh_ah, ah));
	return 0;
}

static struct sh_ud_box *box_at(const struct sh_layout *l, void *rings)
{
	return (struct sh_ud_box *)((uint8_t *)rings + l->ud_off);
}

static void own_gid(struct sh_context *ctx, union ibv_gid *gid)
{
	sh_gid_encode(gid, getpid(), ctx->pub_fd, ctx->nonce, ctx->key);
}

/* Leaves len bytes in box for dst_qpn; false if no slot was free. */
static bool box_put(struct sh_context *ctx, struct sh_ud_box *box,
		    const struct ibv_send_wr *wr, uint32_t len)
{
	uint32_t claim = (++ctx->ud.claim & 0x3fffffffu) ?: ++ctx->ud.claim;
	uint32_t mine = claim << 2 | SH_UD_CLAIMED;
	union ibv_gid gid;

	for (uint32_t i = 0; i < SH_UD_SLOTS; i++) {
		struct sh_ud_slot *s = &box->slot[(claim + i) % SH_UD_SLOTS];
		uint32_t free_state = SH_UD_FREE;

		if (!atomic_compare_exchange_strong(&s->state, &free_state,
						    mine))
			continue;
		own_gid(ctx, &gid);
		s->len = len;
		s->src_qpn = ctx->ud.qp ? ctx->ud.qp->qp.qp_num : 0;
		s->dst_qpn = wr->wr.ud.remote_qpn;
		s->qkey = wr->wr.ud.remote_qkey;
		memcpy(s->sgid, gid.raw, sizeof(s->sgid));
		sh_gather(wr->sg_list, (uint32_t)wr->num_sge, 0, s->data, len);
		/* the owner freed a claim it thought stale: ours is lost */
		if (atomic_compare_exchange_strong(&s->state, &mine,
						   claim << 2 | SH_UD_READY))
			atomic_fetch_add(&box->posted, 1);
		return true;
	}
	return false;
}

/* One datagram to the context dgid names (ctx locked). */
static void ud_send_one(struct sh_qp *qp, const struct ibv_send_wr *wr,
			uint32_t len)
{
	struct sh_context *ctx = qp->ctx;
	struct sh_ah *ah = sh_container_of(wr->wr.ud.ah, struct sh_ah, ah);
	union ibv_gid me;
	struct sh_peer *peer;
	bool put;

	own_gid(ctx, &me);
	if (!memcmp(me.raw, ah->dgid.raw, sizeof(me.raw))) {
		put = box_put(ctx, box_at(&ctx->lay, ctx->rings), wr, len);
	} else {
		peer = sh_peer_get(ctx, &ah->dgid);
		put = peer && !peer->gone &&
		      box_put(ctx, box_at(&peer->lay, peer->rings), wr, len);
		sh_peer_put(ctx, peer);
	}
	if (!put)
		ctx->ud.dropped++;
}

int sh_ud_post_send(struct sh_qp *qp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad)
{
	struct sh_context *ctx = qp->ctx;
	struct sh_cqe cqe;
	uint32_t len;
	int err = 0;

	sh_lock(ctx);
	for (; wr; wr = wr->next) {
		len = wr->num_sge >= 0 && (uint32_t)wr->num_sge <= SH_MAX_SGE
			      ? sge_total(wr->sg_list, (uint32_t)wr->num_sge)
			      : UINT32_MAX;
		if (qp->qp.state != IBV_QPS_RTS || wr->opcode != IBV_WR_SEND ||
		    !wr->wr.ud.ah || len > SH_UD_PAYLOAD)
			err = EINVAL;
		else if ((uint32_t)wr->num_sge > qp->max_send_sge)
			err = ENOMEM;
		if (err) {
			*bad = wr;
			break;
		}
		memset(&cqe, 0, sizeof(cqe));
		cqe.status = IBV_WC_SUCCESS;
		if (!(wr->send_flags & IBV_SEND_INLINE) &&
		    sh_local_check(ctx, wr->sg_list, (uint32_t)wr->num_sge, 0))
			cqe.status = IBV_WC_LOC_PROT_ERR;
		else
			ud_send_one(qp, wr, len);
		if (cqe.status != IBV_WC_SUCCESS || qp->sq_sig_all ||
		    (wr->send_flags & IBV_SEND_SIGNALED)) {
			cqe.wr_id = wr->wr_id;
			cqe.opcode = IBV_WC_SEND;
			cqe.qp_num = qp->qp.qp_num;
			cqe.release_handle = -1;
			cqe.ready = true;
			sh_cq_push(qp->scq, &cqe);
		}
	}
	sh_unlock(ctx);
	return err;
}

/* A copied slot into the QP's next receive: the GRH, then the payload. */
static void ud_deliver(struct sh_qp *qp, const struct sh_ud_slot *s)
{
	struct sh_context *ctx = qp->ctx;
	struct sh_rbuf *b;
	uint8_t grh[SH_GRH_LEN] = { 0x60 }; /* IPv6 version, as a GRH */
	union ibv_gid me;
	struct sh_cqe cqe;
	uint32_t room;

	if (!qp->rq.count) {
		ctx->ud.dropped++;
		return;
	}
	b = &qp->rq.buf[qp->rq.first];
	qp->rq.first = (qp->rq.first + 1) % qp->rq.cap;
	qp->rq.count--;
	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = b->wr_id;
	cqe.opcode = IBV_WC_RECV;
	cqe.qp_num = qp->qp.qp_num;
	cqe.src_qp = s->src_qpn;
	cqe.wc_flags = IBV_WC_GRH;
	cqe.release_handle = -1;
	cqe.ready = true;
	cqe.byte_len = SH_GRH_LEN + s->len;
	room = sge_total(b->sge, b->num_sge);
	if (sh_local_check(ctx, b->sge, b->num_sge, IBV_ACCESS_LOCAL_WRITE)) {
		cqe.status = IBV_WC_LOC_PROT_ERR;
	} else if (room < cqe.byte_len) {
		cqe.status = IBV_WC_LOC_LEN_ERR;
	} else {
		own_gid(ctx, &me);
		memcpy(grh + 8, s->sgid, 16);
		memcpy(grh + 24, me.raw, 16);
		sh_scatter(b->sge, b->num_sge, 0, grh, SH_GRH_LEN);
		sh_scatter(b->sge, b->num_sge, SH_GRH_LEN, s->data, s->len);
	}
	sh_cq_push(qp->rcq, &cqe);
}

/* Slot i of our mailbox: taken, freed, or left for its writer. */
static void ud_visit(struct sh_qp *qp, struct sh_ud_slot *slot, uint32_t i,
		     uint64_t *now)
{
	struct sh_context *ctx = qp->ctx;
	uint32_t st = atomic_load_explicit(&slot->state, memory_order_acquire);
	struct sh_ud_slot copy;

	switch (st & 3u) {
	case SH_UD_FREE:
		if (st) { /* a free slot with a claim in it: forged */
			atomic_compare_exchange_strong(&slot->state, &st, 0);
			ctx->ud.bad++;
		}
		return;
	case SH_UD_READY:
		memcpy(&copy, slot, sizeof(copy));
		if (!atomic_compare_exchange_strong(&slot->state, &st, 0))
			return; /* changed under us: its writer's or a liar's */
		if (copy.len > SH_UD_PAYLOAD ||
		    copy.dst_qpn != qp->qp.qp_num || copy.qkey != qp->qkey) {
			ctx->ud.bad++;
			return;
		}
		ud_deliver(qp, &copy);
		return;
	case SH_UD_CLAIMED:
		if (!*now)
			*now = sh_now_ns();
		if (ctx->ud.seen[i] != st) {
			ctx->ud.seen[i] = st;
			ctx->ud.since[i] = *now;
		} else if (*now - ctx->ud.since[i] > SH_UD_STALE_NS &&
			   atomic_compare_exchange_strong(&slot->state, &st, 0)) {
			ctx->ud.seen[i] = 0;
			ctx->ud.dropped++;
		}
		return;
	default: /* no writer leaves 3 */
		atomic_compare_exchange_strong(&slot->state, &st, 0);
		ctx->ud.bad++;
	}
}

void sh_ud_pull(struct sh_cq *cq)
{
	struct sh_context *ctx = cq->ctx;
	struct sh_qp *qp = cq->ud;
	struct sh_ud_box *box;
	uint64_t now = 0;
	uint32_t posted;

	if (!qp || (qp->qp.state != IBV_QPS_RTR &&
		    qp->qp.state != IBV_QPS_RTS))
		return;
	box = box_at(&ctx->lay, ctx->rings);
	posted = atomic_load_explicit(&box->posted, memory_order_acquire);
	if (posted == ctx->ud.posted_seen &&
	    ++ctx->ud.polls < SH_UD_SCAN_EVERY)
		return;
	ctx->ud.posted_seen = posted;
	ctx->ud.polls = 0;
	for (uint32_t i = 0; i < SH_UD_SLOTS; i++)
		ud_visit(qp, &box->slot[i], i, &now);
}
