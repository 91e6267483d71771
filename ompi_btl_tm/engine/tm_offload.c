/*
 * tm_offload.c - which receives go to the card, and when.  Contract:
 * tm_offload.h.
 */
#include <stdlib.h>
#include "engine/tm_offload.h"

int tme_offload_init(struct tm_engine *eng)
{
	ucs_list_head_init(&eng->offload.promo_ready);
	eng->offload.swq = kh_init(tm_swq);
	return eng->offload.swq ? TM_OK : TM_ERR_NO_MEMORY;
}

void tme_offload_cleanup(struct tm_engine *eng)
{
	struct tm_swq *q;

	if (!eng->offload.swq)
		return;
	kh_foreach_value(eng->offload.swq, q, free(q));
	kh_destroy(tm_swq, eng->offload.swq);
}

/* Posts r's ADD; 0 if the card took it.  A signalled one names r until
 * its completion (ops_pending). */
static inline __attribute__((always_inline)) int
card_add(struct tm_engine *eng, struct tm_recv *r)
{
	struct tme_recv *q = rp(r);

	if (tmx_card_add(&eng->x, &q->t, q->mq.tag, q->mq.mask, &r->b))
		return -1;
	if (!(q->t.flags & TC_ADD_UNSIG))
		q->ops_pending++;
	return 0;
}

/* ---- software-held FIFOs -------------------------------------------- */

/* The FIFO of context ctx (created on demand when create is set). */
static struct tm_swq *swq_of(struct tme_offload_state *o, uint32_t ctx,
			     int create)
{
	khiter_t it = kh_get(tm_swq, o->swq, ctx);
	struct tm_swq *q;
	int ret;

	if (it != kh_end(o->swq))
		return kh_value(o->swq, it);
	if (!create)
		return NULL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	it = kh_put(tm_swq, o->swq, ctx, &ret);
	if (ret < 0) {
		free(q);
		return NULL;
	}
	ucs_list_head_init(&q->fifo);
	kh_value(o->swq, it) = q;
	return q;
}

/* Keeps q on promo_ready exactly while its head could be promoted. */
static void swq_update(struct tm_engine *eng, struct tm_swq *q)
{
	struct tm_recv *h;
	int ready = 0;

	if (!ucs_list_is_empty(&q->fifo)) {
		h = recv_head(&q->fifo, sw_link);
		ready = !(rp(h)->flags & RF_PINNED);
	}
	if (ready == q->ready)
		return;
	q->ready = ready;
	if (ready) {
		ucs_list_add_tail(&eng->offload.promo_ready, &q->ready_link);
		eng->offload.small_blocks = 0; /* its head may be older */
		tme_pend(eng, TM_PEND_WORK);
	} else
		ucs_list_del(&q->ready_link);
}

/*
 * r becomes software-held: into q in post order.  A new receive is the
 * latest post, so this is O(1) except after a failed ADD (never seen).
 */
static void swq_insert(struct tm_engine *eng, struct tm_swq *q,
		       struct tm_recv *r)
{
	ucs_list_link_t *pos = q->fifo.prev;

	while (pos != &q->fifo &&
	       recv_of_link(pos, sw_link)->post_stamp >
	       r->post_stamp)
		pos = pos->prev;
	ucs_list_insert_after(pos, &rp(r)->sw_link);
	rp(r)->flags |= RF_SWQ;
	swq_update(eng, q);
}

void tme_swq_del(struct tm_engine *eng, struct tm_recv *r)
{
	struct tm_swq *q;

	if (!(rp(r)->flags & RF_SWQ))
		return;
	rp(r)->flags &= ~RF_SWQ;
	ucs_list_del(&rp(r)->sw_link);
	q = swq_of(&eng->offload, tm_tag_ctx(rp(r)->mq.tag), 0);
	if (q)
		swq_update(eng, q);
}

/* Receives past check 1 that no card could take (whatever its state):
 * never promoted. */
static int never_on_card(struct tm_xport *x, struct tm_recv *r)
{
	return r->b.len > x->max_read || !x->ops.n_stage;
}

/* The receive of q to promote: its head (see tme_promote()). */
static struct tm_recv *promo_pick(struct tm_engine *eng, struct tm_swq *q)
{
	struct tm_recv *t = recv_of_link(q->fifo.prev, sw_link);

	/* the fault: the latest first, past earlier ones it may overlap */
	if ((eng->x.test.faults & TM_FAULT_PREFIX) && !(rp(t)->flags & RF_PINNED))
		return t;
	return recv_head(&q->fifo, sw_link);
}

/* Promotes one receive of q; 0 if it went to the card. */
static int promote_one(struct tm_engine *eng, struct tm_swq *q)
{
	struct tm_recv *r = promo_pick(eng, q);

	if (tmx_needs_stage(&eng->x, r->b.len)) {
		if (tmx_stage_get(&eng->x, &rp(r)->t))
			return -1; /* stays ready: a stage frees later */
	} else if (!r->b.mr) {
		/* from the registration cache, like a receive posted to the
		 * card (released with tm_dev_mem_put) */
		if (tm_dev_mem_get(eng->x.dev, r->b.buf, r->b.len,
				   IBV_ACCESS_LOCAL_WRITE, &r->b.mr) != TM_OK) {
			r->b.mr = NULL;
			rp(r)->flags |= RF_PINNED;
			swq_update(eng, q);
			return -1;
		}
		rp(r)->own_mr = 1;
	}
	if (card_add(eng, r)) {
		tmx_stage_put(&eng->x, &rp(r)->t);
		return -1;
	}
	tme_swq_del(eng, r);
	tm_mq_set_held(&eng->mq, &rp(r)->mq, 0); /* cannot fail when clearing */
	tme_rstate(rp(r), R_CARD);
	eng->x.st.promoted++;
	return 0;
}

/* Was a receive below offload_thresh, still held, posted before r? */
static int small_before(struct tm_engine *eng, struct tm_recv *r)
{
	struct tm_mq_recv *s = tm_mq_oldest_held_lazy(&eng->mq);

	return s && s->seq < r->post_stamp;
}

/* q goes to the back of promo_ready: the other contexts' turn. */
static void promo_rotate(struct tme_offload_state *o, struct tm_swq *q)
{
	if (o->promo_ready.prev != &q->ready_link) {
		ucs_list_del(&q->ready_link);
		ucs_list_add_tail(&o->promo_ready, &q->ready_link);
	}
}

/*
 * Hands software-held receives to the card while it has room.  Only FIFO
 * heads are taken (the prefix rule holds for them: see the top of this
 * file), none posted after the oldest held small receive, and contexts
 * take turns so that one long FIFO does not starve the others.
 */
int tme_promote(struct tm_engine *eng)
{
	struct tm_swq *q;
	size_t blocked = 0, nready = 0;
	int n = 0;

	if (eng->x.ops.want_room)
		return 0;
	while (!ucs_list_is_empty(&eng->offload.promo_ready)) {
		if (!tmx_card_has_room(&eng->x)) {
			eng->x.ops.want_room = 1; /* until tmx_room_freed */
			break;
		}
		q = ucs_list_head(&eng->offload.promo_ready, struct tm_swq, ready_link);
		if (small_before(eng, promo_pick(eng, q))) {
			if (!blocked)
				nready = ucs_list_length(&eng->offload.promo_ready);
			if (++blocked >= nready) {
				/* until tme_small_del takes the oldest */
				eng->offload.small_blocks = 1;
				break;
			}
			promo_rotate(&eng->offload, q);
			continue;
		}
		blocked = 0;
		if (promote_one(eng, q)) {
			if (q->ready) {
				/* no stage, or the card refused the ADD */
				eng->x.ops.want_room = 1;
				break;
			}
			continue;      /* pinned now: next context */
		}
		n++;
		if (q->ready)
			promo_rotate(&eng->offload, q);
	}
	return n;
}

/*
 * The card refused r's ADD: software-held again, in place (post order in
 * its bucket and FIFO), and pinned so that it is not offered again.
 */
void tme_recv_back_to_sw(struct tm_engine *eng, struct tm_recv *r)
{
	struct tm_swq *q = swq_of(&eng->offload, tm_tag_ctx(rp(r)->mq.tag), 1);

	if (!q || tm_mq_set_held(&eng->mq, &rp(r)->mq, 1) != TM_OK)
		eng->x.st.errors++;
	tme_rstate(rp(r), R_SW);
	rp(r)->flags |= RF_PINNED;
	tmx_stage_put(&eng->x, &rp(r)->t);
	if (q)
		swq_insert(eng, q, r);
}

/* ---- the offload decision ------------------------------------------ */

/*
 * May r go to the card now?  NULL if so, else the counter of the first
 * reason it may not (one counter per reason, in tm_engine_stats).  The
 * checks, in order (check 1, a tag list, offload on and the buffer at
 * least offload_thresh bytes, is tme_recv_stays_sw: the caller sends the
 * receives it refuses to tme_place_sw, which counts them):
 *   2. prefix rule: no software-held posted receive accepts a message r
 *      accepts, O(1) through the tm_mq counters (sw_conflict);
 *   3. a staging buffer exists (sw_small_buf), and its length is no more
 *      than the card reads in one go (max_read, below 2^32), so that a
 *      rendezvous the card cannot read never fits a card buffer
 *      (sw_long_buf; doc/DESIGN.md, "Long messages");
 *   4. the card list has room (sw_list_full);
 *   5. an op slot is free and no list op is queued ahead (sw_ops_full);
 *   6. a buffer smaller than the largest eager message gets a staging
 *      buffer (sw_no_stage; promoted when one frees); a larger one is
 *      registered: the caller's MR, or one from the dev layer's
 *      registration cache, released with tm_dev_mem_put() when the
 *      request is done (sw_reg_fail).
 * 1, 3 and 6 never change for this receive: it is pinned in software.
 */
static uint64_t *offload_refusal(struct tm_engine *eng, struct tm_recv *r,
				 uint64_t tag, uint64_t mask)
{
	if (!(eng->x.test.faults & TM_FAULT_PREFIX) &&			/* 2 */
	    tm_mq_sw_conflict(&eng->mq, tag, mask))
		return &eng->x.st.sw_conflict;
	if (!eng->x.ops.n_stage)						/* 3 */
		return &eng->x.st.sw_small_buf;
	if (r->b.len > eng->x.max_read)
		return &eng->x.st.sw_long_buf;
	if (eng->x.ops.card_entries >= eng->x.ops.max_entries)			/* 4 */
		return &eng->x.st.sw_list_full;
	if (!ucs_list_is_empty(&eng->x.ops.opq) || eng->x.ops.ops_out >= eng->x.ops.max_ops)
		return &eng->x.st.sw_ops_full;				/* 5 */
	if (tmx_needs_stage(&eng->x, r->b.len)) {					/* 6 */
		if (tmx_stage_get(&eng->x, &rp(r)->t))
			return &eng->x.st.sw_no_stage;
	} else if (!r->b.mr) {
		if (tm_dev_mem_get(eng->x.dev, r->b.buf, r->b.len,
				   IBV_ACCESS_LOCAL_WRITE, &r->b.mr) != TM_OK)
			return &eng->x.st.sw_reg_fail;
		rp(r)->own_mr = 1;
	}
	return NULL;
}

/*
 * Places a new receive that check 1 admits (no unexpected message matched
 * it): on the card if offload_refusal() allows and the ADD is taken, else
 * software-held in its context's FIFO.  Older software-held receives are
 * promoted first.
 */
int tme_recv_place(struct tm_engine *eng, struct tm_recv *r, uint32_t ctx,
		   uint64_t rtag, uint64_t mask)
{
	struct tm_swq *swq;
	uint64_t *why;
	int rc;

	TME_ASSERT(!tme_recv_stays_sw(eng, r));
	rp(r)->mq.tag = rtag;
	rp(r)->mq.mask = mask;
	if (!ucs_list_is_empty(&eng->offload.promo_ready))
		tme_promote(eng); /* older software-held receives first */
	why = offload_refusal(eng, r, rtag, mask);
	if (!why && card_add(eng, r)) {
		tmx_stage_put(&eng->x, &rp(r)->t);
		why = &eng->x.st.sw_list_full;
	}
	/* a software-held receive must be in its FIFO, or a later one of
	 * its context could be promoted past it: no FIFO, no receive */
	swq = why ? swq_of(&eng->offload, ctx, 1) : NULL;
	if (why && !swq) {
		if (rp(r)->own_mr) {
			tm_dev_mem_put(eng->x.dev, r->b.mr);
			rp(r)->own_mr = 0;
			r->b.mr = NULL; /* the caller's input again */
		}
		return TM_ERR_NO_MEMORY;
	}
	if (why)
		(*why)++;
	else
		eng->x.st.recv_to_card++;
	rc = tm_mq_post(&eng->mq, &rp(r)->mq, rtag, mask, r->post_stamp,
			why ? TM_MQ_HELD : TM_MQ_CARD);
	if (rc != TM_OK)
		return rc;
	tme_rstate(rp(r), why ? R_SW : R_CARD);
	if (why) {
		if (never_on_card(&eng->x, r) || why == &eng->x.st.sw_reg_fail)
			rp(r)->flags |= RF_PINNED;
		swq_insert(eng, swq, r);
	}
	return TM_OK;
}
