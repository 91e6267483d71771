/*
 * tm_ops.c - the card's list operations (ADD, DEL, SYNC) and the sync rule.
 *
 * Contract (argument: doc/DESIGN.md, "Sync protocol"):
 *  - every list op carries IBV_OPS_TM_SYNC and the unexpected count as of
 *    the moment it was decided (eng->reported), and ops reach the card in
 *    the order decided: a FIFO (eng->opq) once max_ops are outstanding, and
 *    an ADD only when that FIFO is empty (tme_card_has_room);
 *  - ADDs go unsignalled except every TM_ADD_SIG_EVERY-th and the one that
 *    takes the last op slot; DELs and SYNCs are always signalled; a
 *    signalled completion retires the unsignalled ops before it;
 *  - an explicit SYNC only when a live entry may be inactive (eng->unconf)
 *    and the count moved since the last op, one at a time, or when the
 *    card lags TM_SYNC_LAG_MAX unexpected messages behind.
 * Owns: uq_count/reported/sync_*, op_seq, unconf, ops_*, op_unsig, opq,
 * card_entries.  What a completed op means for its receive is tm_recv.c's
 * (tme_on_op_result).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "engine/tm_engine_priv.h"

/*
 * Selective signalling of ADDs.  Nothing waits for an ADD's completion
 * (the entry's handle is known at post; the receive completes from its
 * match), so ADDs go unsignalled except every TM_ADD_SIG_EVERY-th and the
 * one that would fill the last op slot: the card retires unsignalled ops
 * when a later signalled one is polled, so the op slots always come back.
 * DELs and SYNCs stay signalled: their completions drive claims, cancels
 * and the sync protocol.  The count and order rules are unchanged (every
 * op carries IBV_OPS_TM_SYNC and its count).  An ADD never fails at the
 * card once posted on the soft HCA; should one fail unsignalled (a real
 * card reports errors of unsignalled ops), tme_on_op_cqe puts its receive
 * back in software if it is still posted.
 */
/*
 * A list op the card did not take.  ENOMEM (no op slot or list entry) or
 * EAGAIN pass; anything else means the card's list is in a state the
 * engine no longer knows, so matching cannot go on: the engine stops
 * (tme_engine_fatal).  Returns ret.
 */
static int op_refused(struct tm_engine *eng, int ret)
{
	if (ret != ENOMEM && ret != EAGAIN) {
		eng->st.post_failures++;
		tme_engine_fatal(eng, TM_ERR_IO);
	}
	return ret;
}

/* The card took an op: its place in post order and its op slot. */
static inline void op_account(struct tm_engine *eng, uint32_t count, int sig)
{
	eng->op_seq++;
	eng->ops_out++;
	eng->st.ops_posted++;
	if (sig) {
		struct tm_sig_op *so =
			&eng->op_unsig[eng->op_unsig_head++ % eng->max_ops];

		so->seq = eng->op_seq;
		so->unsig = eng->ops_unsig;
		so->count = count;
		eng->ops_unsig = 0;
		eng->ops_sig_out++;
	} else {
		eng->ops_unsig++;
	}
}

/* A DEL or a SYNC (always signalled); 0 if the card took it. */
static int op_post(struct tm_engine *eng, int type, struct tm_recv *r,
		   uint32_t count)
{
	struct ibv_ops_wr wr, *bad;
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.flags = IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC;
	wr.tm.unexpected_cnt = count;
	wr.wr_id = (uintptr_t)r | (uint64_t)type;
	if (type == WR_DEL) {
		wr.opcode = IBV_WR_TAG_DEL;
		wr.tm.handle = r->handle;
	} else {
		wr.opcode = IBV_WR_TAG_SYNC;
	}
	ret = tme_fault(eng, TM_SITE_POST_OPS);
	if (!ret)
		ret = ibv_post_srq_ops(eng->dev->srq, &wr, &bad);
	if (ret)
		return op_refused(eng, ret);
	if (type == WR_SYNC)
		eng->st.syncs++;
	op_account(eng, count, 1);
	return 0;
}

/*
 * An ADD, the op of every receive posted to the card: its own function,
 * since it is on the path of every such receive.  Every field of the WR
 * is stored once (no memset first); the SGE is the staging buffer or the
 * receive's own.
 */
static int op_post_add(struct tm_engine *eng, struct tm_recv *r,
		       uint32_t count)
{
	struct ibv_ops_wr wr, *bad;
	struct ibv_sge sge;
	int ret, sig = eng->ops_unsig + 1 >= TM_ADD_SIG_EVERY ||
		       eng->ops_out + 1 >= eng->max_ops;

	if (r->stage >= 0) {
		sge.addr = (uintptr_t)eng->stage +
			   (size_t)r->stage * eng->stage_size;
		sge.length = eng->stage_size;
		sge.lkey = eng->stage_mr->lkey;
	} else {
		sge.addr = (uintptr_t)r->buf;
		sge.length = (uint32_t)r->len;
		sge.lkey = r->mr->lkey;
	}
	wr.wr_id = (uintptr_t)r | WR_ADD;
	wr.next = NULL;
	wr.opcode = IBV_WR_TAG_ADD;
	wr.flags = (sig ? IBV_OPS_SIGNALED : 0) | IBV_OPS_TM_SYNC;
	wr.tm.unexpected_cnt = count;
	wr.tm.handle = 0;
	wr.tm.add.recv_wr_id = (uintptr_t)r | WR_RECV;
	wr.tm.add.sg_list = &sge;
	wr.tm.add.num_sge = 1;
	wr.tm.add.tag = r->mq.tag;
	wr.tm.add.mask = r->mq.mask;
	ret = tme_fault(eng, TM_SITE_POST_OPS);
	if (!ret)
		ret = ibv_post_srq_ops(eng->dev->srq, &wr, &bad);
	if (ret)
		return op_refused(eng, ret);
	r->handle = wr.tm.handle;
	op_account(eng, count, sig);
	r->add_seq = eng->op_seq;
	if (!sig)
		r->flags |= RF_ADD_UNSIG;
	return 0;
}

/*
 * Decides a DEL or SYNC now, with the current count; posts it at once if
 * nothing is queued ahead of it and a slot is free, else queues it.  The
 * op keeps the count it was decided with (doc/DESIGN.md, "Sync protocol").
 */
void tme_op_decide(struct tm_engine *eng, int type, struct tm_recv *r)
{
	struct tm_op *op;

	eng->reported = tme_count_now(eng);
	if (r)
		r->ops_pending++;
	if (type == WR_SYNC)
		eng->sync_out = 1;
	if (ucs_list_is_empty(&eng->opq) && eng->ops_out < eng->max_ops &&
	    op_post(eng, type, r, eng->reported) == 0)
		return;
	/* one DEL per receive (RF_DEL_POSTED), one SYNC at a time
	 * (sync_out): each has its place already */
	op = r ? &r->del : &eng->sync_op;
	op->type = type;
	op->r = r;
	op->count = eng->reported;
	ucs_list_add_tail(&eng->opq, &op->link);
	tme_pend(eng, TM_PEND_WORK);
	eng->opq_len++;
	eng->st.ops_queued++;
}

/* A queued DEL that must not be posted: as if it failed (IBV_WC_TM_ERR). */
static void op_dropped(struct tm_engine *eng, struct tm_recv *r)
{
	struct tm_cqe c = { .status = IBV_WC_TM_ERR };

	tme_on_op_result(eng, WR_DEL, r, &c);
}

int tme_flush_ops(struct tm_engine *eng)
{
	struct tm_op *op;
	uint32_t count;
	int n = 0;

	while (!ucs_list_is_empty(&eng->opq) && eng->ops_out < eng->max_ops) {
		op = ucs_list_head(&eng->opq, struct tm_op, link);
		count = (eng->test.faults & TM_FAULT_SYNC_ORDER) ?
			tme_count_now(eng) : op->count;
		if (op->type == WR_DEL && !(op->r->flags & RF_ENTRY_LIVE)) {
			/* The entry was consumed and its final completion
			 * polled while the DEL waited: its handle may already
			 * name another entry.  Drop it as a failed DEL. */
			op_dropped(eng, op->r);
		} else if (op_post(eng, op->type, op->r, count)) {
			break;
		}
		ucs_list_del(&op->link);
		eng->opq_len--;
		n++;
	}
	if (n)
		tme_promo_unstick(eng);
	return n;
}

/*
 * An explicit SYNC only when it can matter (the rule and its argument are
 * in doc/DESIGN.md, "Sync protocol"): the count moved since the last op was
 * decided, and some live entry may be inactive (eng->unconf), and no SYNC
 * is outstanding (its completion re-runs this); or the card's view lags
 * TM_SYNC_LAG_MAX behind.  Runs after tme_promote(): an ADD posted there
 * carries the current count and makes the SYNC needless.
 */
void tme_maybe_sync(struct tm_engine *eng)
{
	if (tme_sync_wanted(eng))
		tme_op_decide(eng, WR_SYNC, NULL);
}

static void unconf_del(struct tm_recv *r)
{
	if (r->flags & RF_UNCONF) {
		r->flags &= ~RF_UNCONF;
		ucs_list_del(&r->card_link);
	}
}

/*
 * A signalled op that carried count was processed when the card's counter
 * stood at uq_count: every unexpected arrival the card decided before it
 * completed before it in the same CQ, and none after.  Equal: the op was
 * in sync and activated every entry added before it, for good.
 */
static void op_seen(struct tm_engine *eng, const struct tm_sig_op *so)
{
	struct tm_recv *h;

	if (so->count != eng->uq_count || so->seq <= eng->sync_seq)
		return;
	eng->sync_seq = so->seq;
	while (!ucs_list_is_empty(&eng->unconf)) {
		h = ucs_list_head(&eng->unconf, struct tm_recv, card_link);
		if (h->add_seq > eng->sync_seq)
			break;
		unconf_del(h);
	}
}

void tme_entry_gone(struct tm_engine *eng, struct tm_recv *r)
{
	if (r->flags & RF_ENTRY_LIVE) {
		r->flags &= ~RF_ENTRY_LIVE;
		eng->card_entries--;
		tme_promo_unstick(eng);
	}
	unconf_del(r);
}

/* Posts r's ADD with the current count; 0 if the card took it. */
int tme_card_add(struct tm_engine *eng, struct tm_recv *r)
{
	eng->reported = tme_count_now(eng);
	if (op_post_add(eng, r, eng->reported))
		return -1;
	if (!(r->flags & RF_ADD_UNSIG))
		r->ops_pending++;
	r->flags |= RF_ENTRY_LIVE | RF_UNCONF;
	ucs_list_add_tail(&eng->unconf, &r->card_link);
	if (++eng->card_entries > eng->card_entries_max)
		eng->card_entries_max = eng->card_entries;
	return 0;
}

/*
 * A list op's completion: op-slot and sync bookkeeping here, then the
 * receive it names moves on (tm_recv.c).
 */
void tme_on_op_cqe(struct tm_engine *eng, int type, struct tm_recv *r,
		   const struct tm_cqe *c)
{
	const struct tm_sig_op *so;

	if (type == WR_ADD && (r->flags & RF_ADD_UNSIG)) {
		/* an unsignalled ADD's error: it retires nothing, and r is
		 * still posted (a failed ADD cannot have matched) unless a
		 * cancel or claim finished it meanwhile */
		if (c->status != IBV_WC_SUCCESS && r->state != R_DONE) {
			r->ops_pending++; /* on_op_result drops one */
			tme_on_op_result(eng, type, r, c);
		}
		return;
	}
	/* a signalled op: it and every unsignalled op before it retired */
	so = &eng->op_unsig[eng->op_unsig_tail++ % eng->max_ops];
	eng->ops_out -= 1 + so->unsig;
	eng->ops_sig_out--;
	tme_promo_unstick(eng);
	if (c->status == IBV_WC_SUCCESS)
		op_seen(eng, so);
	if (type == WR_SYNC) {
		eng->sync_out = 0;
		tme_pend(eng, TM_PEND_WORK); /* the count may have moved */
	}
	tme_on_op_result(eng, type, r, c);
}

