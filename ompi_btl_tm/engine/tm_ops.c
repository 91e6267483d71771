/*
 * tm_ops.c - the card's list operations (ADD, DEL, SYNC), the sync rule,
 * and the staging buffers.  Contract: tm_ops.h.
 * Owns: the ops part of struct tm_xport.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "engine/tm_ops.h"

/* ---- staging buffers ------------------------------------------------ */

/*
 * A card has no tag-aware error for an eager message longer than the
 * tagged buffer it matched (doc/mlx5-rules.md rule 17: the QP goes to
 * error), so only buffers that hold any eager message go to the card.  A
 * smaller receive goes with a staging buffer of that size instead, and its
 * data is copied out at completion; a rendezvous never fits a staging
 * buffer, so the card hands it to software with its headers.
 */
static int stage_setup(struct tm_xport *x)
{
	size_t sz;
	uint32_t i;

	x->ops.stage_size = (uint32_t)x->cfg.eager_limit;
	if (x->ops.stage_size < TMH_LEN + RVH_LEN)
		x->ops.stage_size = TMH_LEN + RVH_LEN;
	/* one per card entry: fewer would keep small receives off a card
	 * with room, and a deep queue of them would push the receive that
	 * matches into software (a staging buffer is eager_limit bytes:
	 * 8 MiB for 1023 entries of 8 KiB) */
	x->ops.n_stage = x->ops.max_entries;
	if (!x->cfg.offload || !x->ops.n_stage)
		return TM_OK;
	sz = (size_t)x->ops.n_stage * x->ops.stage_size;
	x->ops.stage = malloc(sz);
	x->ops.free_stage = malloc(x->ops.n_stage * sizeof(uint32_t));
	if (!x->ops.stage || !x->ops.free_stage)
		return TM_ERR_NO_MEMORY;
	if (tm_dev_reg(x->dev, x->ops.stage, sz, 0, &x->ops.stage_mr))
		return TM_ERR_IO;
	for (i = 0; i < x->ops.n_stage; i++)
		x->ops.free_stage[x->ops.n_free_stage++] =
			x->ops.n_stage - 1 - i;
	return TM_OK;
}

/* max_entries and max_ops are set (tm_api.c, from the device). */
int tmx_ops_init(struct tm_xport *x)
{
	ucs_list_head_init(&x->ops.opq);
	ucs_list_head_init(&x->ops.unconf);
	/* max_ops 0 without a card: calloc(0) may return NULL */
	x->ops.op_unsig = calloc(x->ops.max_ops + 1, sizeof(*x->ops.op_unsig));
	if (!x->ops.op_unsig)
		return TM_ERR_NO_MEMORY;
	tmx_count_rearm(x);
	return stage_setup(x);
}

void tmx_ops_cleanup(struct tm_xport *x)
{
	free(x->ops.op_unsig);
	if (x->ops.stage_mr)
		tm_dev_dereg(x->dev, x->ops.stage_mr);
	free(x->ops.stage);
	free(x->ops.free_stage);
}

/* ---- posting -------------------------------------------------------- */

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
 * card reports errors of unsignalled ops), tmx_on_op_cqe reports it.
 */
/*
 * A list op the card did not take.  ENOMEM (no op slot or list entry) or
 * EAGAIN pass; anything else means the card's list is in a state the
 * engine no longer knows, so matching cannot go on: the engine stops
 * (tmx_fatal).  Returns ret.
 */
static int op_refused(struct tm_xport *x, int ret)
{
	if (ret != ENOMEM && ret != EAGAIN) {
		x->st.post_failures++;
		tmx_fatal(x, TM_ERR_IO);
	}
	return ret;
}

/* The card took an op: its place in post order and its op slot. */
static inline void op_account(struct tm_xport *x, uint32_t count, int sig)
{
	x->ops.op_seq++;
	x->ops.ops_out++;
	x->st.ops_posted++;
	if (sig) {
		struct tm_sig_op *so = &x->ops.op_unsig[x->ops.op_unsig_head++ %
							x->ops.max_ops];

		so->seq = x->ops.op_seq;
		so->unsig = x->ops.ops_unsig;
		so->count = count;
		x->ops.ops_unsig = 0;
		x->ops.ops_sig_out++;
	} else {
		x->ops.ops_unsig++;
	}
}

/* A DEL or a SYNC (always signalled); 0 if the card took it.  The ADDs
 * decided before it go first. */
static int op_post(struct tm_xport *x, int type, struct tm_tctx *t,
		   uint32_t count)
{
	struct ibv_ops_wr wr, *bad;
	int ret;

	tmx_add_flush(x);
	if (x->fatal)
		return EIO;

	memset(&wr, 0, sizeof(wr));
	wr.flags = IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC;
	wr.tm.unexpected_cnt = count;
	wr.wr_id = (uintptr_t)t | (uint64_t)type;
	if (type == WR_DEL) {
		wr.opcode = IBV_WR_TAG_DEL;
		wr.tm.handle = t->handle;
	} else {
		wr.opcode = IBV_WR_TAG_SYNC;
	}
	ret = tmx_fault(x, TM_SITE_POST_OPS);
	if (!ret)
		ret = ibv_post_srq_ops(x->dev->srq, &wr, &bad);
	if (ret)
		return op_refused(x, ret);
	if (type == WR_SYNC)
		x->st.syncs++;
	op_account(x, count, 1);
	return 0;
}

/*
 * An ADD, the op of every receive posted to the card: written into the
 * chain (tmx_add_flush posts it) and accounted as posted at once, so that
 * the op-slot, signalling and order rules see it where it was decided.
 * Every field of the WR is stored once (no memset first); the SGE is the
 * staging buffer or the receive's own.
 */
static void chain_add(struct tm_xport *x, struct tm_tctx *t, uint64_t tag,
		      uint64_t mask, const struct tm_rbuf *b, uint32_t count)
{
	uint32_t i = x->ops.chain_n++;
	struct ibv_ops_wr *wr = &x->ops.chain_wr[i];
	struct ibv_sge *sge = &x->ops.chain_sge[i];
	int sig = x->ops.ops_unsig + 1 >= TM_ADD_SIG_EVERY ||
		  x->ops.ops_out + 1 >= x->ops.max_ops;

	if (t->stage >= 0) {
		sge->addr = (uintptr_t)x->ops.stage +
			    (size_t)t->stage * x->ops.stage_size;
		sge->length = x->ops.stage_size;
		sge->lkey = x->ops.stage_mr->lkey;
	} else {
		sge->addr = (uintptr_t)b->buf;
		sge->length = (uint32_t)b->len;
		sge->lkey = b->mr->lkey;
	}
	wr->wr_id = (uintptr_t)t | WR_ADD;
	wr->next = NULL;
	if (i)
		x->ops.chain_wr[i - 1].next = wr;
	wr->opcode = IBV_WR_TAG_ADD;
	wr->flags = (sig ? IBV_OPS_SIGNALED : 0) | IBV_OPS_TM_SYNC;
	wr->tm.unexpected_cnt = count;
	wr->tm.handle = 0;
	wr->tm.add.recv_wr_id = (uintptr_t)t | WR_RECV;
	wr->tm.add.sg_list = sge;
	wr->tm.add.num_sge = 1;
	wr->tm.add.tag = tag;
	wr->tm.add.mask = mask;
	x->ops.chain_unsig[i] = x->ops.ops_unsig;
	op_account(x, count, sig);
	t->add_seq = x->ops.op_seq;
	if (!sig)
		t->flags |= TC_ADD_UNSIG;
}

static inline struct tm_tctx *chain_tctx(const struct ibv_ops_wr *wr)
{
	return (struct tm_tctx *)(uintptr_t)(wr->wr_id & ~WR_TYPE_MASK);
}

/*
 * The card refused the chain from op k on (ENOMEM or EAGAIN; whatever it
 * took before k stays posted, doc/mlx5-rules.md rule 23): those ops were
 * never posted, so their accounting is taken back, newest first, and
 * their receives hear it from the next work flush, as from a failed ADD
 * completion (tmx_report_add_failures).
 */
static void chain_refused(struct tm_xport *x, uint32_t k)
{
	uint32_t i, n = x->ops.chain_n;
	struct tm_tctx *t;

	for (i = n; i-- > k;) {
		t = chain_tctx(&x->ops.chain_wr[i]);
		if (x->ops.chain_wr[i].flags & IBV_OPS_SIGNALED) {
			x->ops.op_unsig_head--;
			x->ops.ops_sig_out--;
		}
		t->flags |= TC_ADD_FAILED;
		t->fail_next = x->ops.add_failed;
		x->ops.add_failed = t;
	}
	x->ops.ops_unsig = x->ops.chain_unsig[k];
	x->ops.op_seq -= n - k;
	x->ops.ops_out -= n - k;
	x->st.ops_posted -= n - k;
	tmx_pend(x, TM_PEND_WORK);
}

void tmx_add_flush_slow(struct tm_xport *x)
{
	struct ibv_ops_wr *bad = NULL;
	uint32_t i, k, n = x->ops.chain_n;
	int ret;

	if (x->fatal) {
		x->ops.chain_n = 0; /* stopped: no more posts */
		return;
	}
	ret = tmx_fault(x, TM_SITE_POST_OPS);
	if (ret)
		bad = &x->ops.chain_wr[0];
	else
		ret = ibv_post_srq_ops(x->dev->srq, x->ops.chain_wr, &bad);
	k = ret ? (uint32_t)(bad - x->ops.chain_wr) : n;
	if (ret && k >= n)
		k = 0; /* a provider that names no op: none was taken */
	for (i = 0; i < k; i++)
		chain_tctx(&x->ops.chain_wr[i])->handle =
			x->ops.chain_wr[i].tm.handle;
	if (ret) {
		op_refused(x, ret);
		chain_refused(x, k);
	}
	x->ops.chain_n = 0;
}

/*
 * The receives whose chained ADD the card refused, in decided order: each
 * behaves as after a failed ADD completion (software-held from now on),
 * except one whose DEL was decided meanwhile: its entry never reached the
 * card, so the DEL wins, as if it had removed it.
 */
int tmx_report_add_failures(struct tm_xport *x)
{
	struct tm_cqe ok = { .status = IBV_WC_SUCCESS };
	struct tm_cqe failed = { .status = TM_WC_REFUSED };
	struct tm_tctx *t, *rev = NULL;
	int n = 0;

	/* the list was built newest first */
	while ((t = x->ops.add_failed)) {
		x->ops.add_failed = t->fail_next;
		t->fail_next = rev;
		rev = t;
	}
	while ((t = rev)) {
		rev = t->fail_next;
		t->flags &= ~TC_ADD_FAILED;
		if (t->flags & TC_DEL_WANTED) {
			t->flags &= ~TC_DEL_WANTED;
			x->cb->op_done(x->cb_arg, WR_ADD, t, &ok);
			x->cb->op_done(x->cb_arg, WR_DEL, t, &ok);
		} else {
			x->cb->op_done(x->cb_arg, WR_ADD, t, &failed);
		}
		n++;
	}
	return n;
}

void tmx_op_decide(struct tm_xport *x, int type, struct tm_tctx *t)
{
	struct tm_op *op;

	x->ops.reported = tmx_count_now(x);
	if (type == WR_SYNC)
		x->ops.sync_out = 1;
	tmx_add_flush(x);
	if (t && (t->flags & TC_ADD_FAILED)) {
		/* its ADD never reached the card: nothing to delete, and
		 * tmx_report_add_failures says so */
		t->flags |= TC_DEL_WANTED;
		return;
	}
	if (ucs_list_is_empty(&x->ops.opq) && x->ops.ops_out < x->ops.max_ops &&
	    op_post(x, type, t, x->ops.reported) == 0)
		return;
	/* one DEL per receive, one SYNC at a time (sync_out): each has its
	 * place already */
	op = t ? &t->del : &x->ops.sync_op;
	op->type = type;
	op->t = t;
	op->count = x->ops.reported;
	ucs_list_add_tail(&x->ops.opq, &op->link);
	tmx_pend(x, TM_PEND_WORK);
	x->ops.opq_len++;
	x->st.ops_queued++;
}

int tmx_flush_ops(struct tm_xport *x)
{
	struct tm_cqe dropped = { .status = IBV_WC_TM_ERR };
	struct tm_op *op;
	uint32_t count;
	int n = 0;

	while (!ucs_list_is_empty(&x->ops.opq) &&
	       x->ops.ops_out < x->ops.max_ops) {
		op = ucs_list_head(&x->ops.opq, struct tm_op, link);
		count = (x->test.faults & TM_FAULT_SYNC_ORDER) ?
			tmx_count_now(x) : op->count;
		ucs_list_del(&op->link);
		x->ops.opq_len--;
		if (op->type == WR_DEL && !(op->t->flags & TC_ENTRY_LIVE)) {
			/* The entry was consumed and its final completion
			 * polled while the DEL waited: its handle may already
			 * name another entry.  Drop it as a failed DEL. */
			x->cb->op_done(x->cb_arg, WR_DEL, op->t, &dropped);
		} else if (op_post(x, op->type, op->t, count)) {
			ucs_list_add_head(&x->ops.opq, &op->link);
			x->ops.opq_len++;
			break;
		}
		n++;
	}
	if (n)
		tmx_room_freed(x);
	return n;
}

/*
 * An explicit SYNC only when it can matter (the rule and its argument are
 * in doc/DESIGN.md, "Sync protocol"): the count moved since the last op was
 * decided, and some live entry may be inactive (ops.unconf), and no SYNC
 * is outstanding (its completion re-runs this); or the card's view lags
 * TM_SYNC_LAG_MAX behind.  Runs after promotion: an ADD posted there
 * carries the current count and makes the SYNC needless.
 */
void tmx_maybe_sync(struct tm_xport *x)
{
	if (tmx_sync_wanted(x))
		tmx_op_decide(x, WR_SYNC, NULL);
}

/*
 * A signalled op that carried count was processed when the card's counter
 * stood at uq_count: every unexpected arrival the card decided before it
 * completed before it in the same CQ, and none after.  Equal: the op was
 * in sync and activated every entry added before it, for good.
 */
static void op_seen(struct tm_xport *x, const struct tm_sig_op *so)
{
	struct tm_tctx *h;

	if (so->count != x->ops.uq_count || so->seq <= x->ops.sync_seq)
		return;
	x->ops.sync_seq = so->seq;
	while (!ucs_list_is_empty(&x->ops.unconf)) {
		h = ucs_list_head(&x->ops.unconf, struct tm_tctx, card_link);
		if (h->add_seq > x->ops.sync_seq)
			break;
		tmx_unconf_del(h);
	}
}

int tmx_card_add(struct tm_xport *x, struct tm_tctx *t, uint64_t tag,
		 uint64_t mask, const struct tm_rbuf *b)
{
	x->ops.reported = tmx_count_now(x);
	if (x->ops.chain_n >= x->cfg.add_chain) {
		tmx_add_flush(x);
		if (x->fatal || !tmx_card_has_room(x))
			return -1;
	}
	chain_add(x, t, tag, mask, b, x->ops.reported);
	t->flags |= TC_ENTRY_LIVE | TC_UNCONF;
	ucs_list_add_tail(&x->ops.unconf, &t->card_link);
	x->ops.count_wake = 0; /* the count may want a SYNC now */
	if (++x->ops.card_entries > x->ops.card_entries_max)
		x->ops.card_entries_max = x->ops.card_entries;
	if (x->cfg.add_chain == 1) /* no chain: on the card from its post */
		tmx_add_flush(x);
	return 0;
}

/*
 * A list op's completion: op-slot and sync bookkeeping here, then the
 * protocol hears what it means for the receive it names (op_done).
 */
void tmx_on_op_cqe(struct tm_xport *x, int type, struct tm_tctx *t,
		   const struct tm_cqe *c)
{
	const struct tm_sig_op *so;

	if (type == WR_ADD && (t->flags & TC_ADD_UNSIG)) {
		/* an unsignalled ADD's error: it retires nothing */
		if (c->status != IBV_WC_SUCCESS)
			x->cb->op_done(x->cb_arg, type, t, c);
		return;
	}
	/* a signalled op: it and every unsignalled op before it retired */
	so = &x->ops.op_unsig[x->ops.op_unsig_tail++ % x->ops.max_ops];
	x->ops.ops_out -= 1 + so->unsig;
	x->ops.ops_sig_out--;
	tmx_room_freed(x);
	if (c->status == IBV_WC_SUCCESS)
		op_seen(x, so);
	if (type == WR_SYNC) {
		x->ops.sync_out = 0;
		tmx_pend(x, TM_PEND_WORK); /* the count may have moved */
	}
	x->cb->op_done(x->cb_arg, type, t, c);
}
