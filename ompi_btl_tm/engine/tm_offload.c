/*
 * tm_offload.c - which receives go to the card, and when.
 *
 * Contract (argument: doc/DESIGN.md, "Offload policy" and "Promotion"):
 *  - a new receive goes to the card only if offload_refusal() finds no
 *    reason against it (the numbered checklist below); otherwise it is
 *    software-held, counted once under its reason;
 *  - each context keeps its software-held receives in a FIFO in post
 *    order; only the head of a FIFO is ever promoted, while the card has
 *    room (tme_card_has_room), from every engine call and before a new
 *    receive is placed: the head is the earliest software-held receive of
 *    its context and receives of other contexts accept none of its
 *    messages, so the prefix rule holds for it with no check;
 *  - a receive that can never go (offload off, small buffer, no
 *    registration, or its ADD failed) is pinned: it stays at the head and
 *    holds back the rest of its context until it matches or is cancelled.
 * Owns: swq, promo_ready, the RF_SWQ and RF_PINNED flags.
 */
#include <stdlib.h>
#include "engine/tm_engine_priv.h"

/* ---- staging buffers ------------------------------------------------ */

/*
 * A card has no tag-aware error for an eager message longer than the
 * tagged buffer it matched (doc/mlx5-rules.md rule 17: the QP goes to
 * error), so only buffers that hold any eager message go to the card.  A
 * smaller receive goes with a staging buffer of that size instead, and its
 * data is copied out at completion; a rendezvous never fits a staging
 * buffer, so the card hands it to software with its headers.
 */

int tme_stage_setup(struct tm_engine *eng)
{
	size_t sz;
	uint32_t i;

	eng->stage_size = (uint32_t)eng->cfg.eager_limit;
	if (eng->stage_size < TMH_LEN + RVH_LEN)
		eng->stage_size = TMH_LEN + RVH_LEN;
	/* one per card entry: fewer would keep small receives off a card
	 * with room, and a deep queue of them would push the receive that
	 * matches into software (a staging buffer is eager_limit bytes:
	 * 8 MiB for 1023 entries of 8 KiB) */
	eng->n_stage = eng->max_entries;
	if (!eng->cfg.offload || !eng->n_stage)
		return TM_OK;
	sz = (size_t)eng->n_stage * eng->stage_size;
	eng->stage = malloc(sz);
	eng->free_stage = malloc(eng->n_stage * sizeof(uint32_t));
	if (!eng->stage || !eng->free_stage)
		return TM_ERR_NO_MEMORY;
	if (tm_dev_reg(eng->dev, eng->stage, sz, 0, &eng->stage_mr))
		return TM_ERR_IO;
	for (i = 0; i < eng->n_stage; i++)
		eng->free_stage[eng->n_free_stage++] = eng->n_stage - 1 - i;
	return TM_OK;
}

void tme_stage_cleanup(struct tm_engine *eng)
{
	if (eng->stage_mr)
		tm_dev_dereg(eng->dev, eng->stage_mr);
	free(eng->stage);
	free(eng->free_stage);
}

static int needs_stage(const struct tm_engine *eng, const struct tm_recv *r)
{
	return r->len < eng->stage_size;
}

static int stage_get(struct tm_engine *eng, struct tm_recv *r)
{
	if (!eng->n_free_stage)
		return -1;
	r->stage = (int32_t)eng->free_stage[--eng->n_free_stage];
	return 0;
}

/* ---- software-held FIFOs -------------------------------------------- */

/* The FIFO of context ctx (created on demand when create is set). */
static struct tm_swq *swq_of(struct tm_engine *eng, uint32_t ctx, int create)
{
	khiter_t it = kh_get(tm_swq, eng->swq, ctx);
	struct tm_swq *q;
	int ret;

	if (it != kh_end(eng->swq))
		return kh_value(eng->swq, it);
	if (!create)
		return NULL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	it = kh_put(tm_swq, eng->swq, ctx, &ret);
	if (ret < 0) {
		free(q);
		return NULL;
	}
	ucs_list_head_init(&q->fifo);
	kh_value(eng->swq, it) = q;
	return q;
}

/* Keeps q on promo_ready exactly while its head could be promoted. */
static void swq_update(struct tm_engine *eng, struct tm_swq *q)
{
	struct tm_recv *h;
	int ready = 0;

	if (!ucs_list_is_empty(&q->fifo)) {
		h = ucs_list_head(&q->fifo, struct tm_recv, sw_link);
		ready = !(h->flags & RF_PINNED);
	}
	if (ready == q->ready)
		return;
	q->ready = ready;
	if (ready) {
		ucs_list_add_tail(&eng->promo_ready, &q->ready_link);
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
	       ucs_container_of(pos, struct tm_recv, sw_link)->post_stamp >
	       r->post_stamp)
		pos = pos->prev;
	ucs_list_insert_after(pos, &r->sw_link);
	r->flags |= RF_SWQ;
	swq_update(eng, q);
}

void tme_swq_del(struct tm_engine *eng, struct tm_recv *r)
{
	struct tm_swq *q;

	if (!(r->flags & RF_SWQ))
		return;
	r->flags &= ~RF_SWQ;
	ucs_list_del(&r->sw_link);
	q = swq_of(eng, tm_tag_ctx(r->mq.tag), 0);
	if (q)
		swq_update(eng, q);
}

/* Receives no card could take (whatever its state): never promoted. */
static int never_on_card(struct tm_engine *eng, const struct tm_recv *r)
{
	return !eng->cfg.offload || r->len > eng->max_read || !eng->n_stage;
}

/* The receive of q to promote: its head (see tme_promote()). */
static struct tm_recv *promo_pick(struct tm_engine *eng, struct tm_swq *q)
{
	struct tm_recv *t = ucs_list_tail(&q->fifo, struct tm_recv, sw_link);

	/* the fault: the latest first, past earlier ones it may overlap */
	if ((eng->test.faults & TM_FAULT_PREFIX) && !(t->flags & RF_PINNED))
		return t;
	return ucs_list_head(&q->fifo, struct tm_recv, sw_link);
}

/* Promotes one receive of q; 0 if it went to the card. */
static int promote_one(struct tm_engine *eng, struct tm_swq *q)
{
	struct tm_recv *r = promo_pick(eng, q);

	if (needs_stage(eng, r)) {
		if (stage_get(eng, r))
			return -1; /* stays ready: a stage frees later */
	} else if (!r->mr) {
		/* from the registration cache, like a receive posted to the
		 * card (released with tm_dev_mem_put) */
		if (tm_dev_mem_get(eng->dev, r->buf, r->len,
				   IBV_ACCESS_LOCAL_WRITE, &r->mr) != TM_OK) {
			r->mr = NULL;
			r->flags |= RF_PINNED;
			swq_update(eng, q);
			return -1;
		}
		r->own_mr = 1;
	}
	if (tme_card_add(eng, r)) {
		tme_stage_put(eng, r);
		return -1;
	}
	tme_swq_del(eng, r);
	tm_mq_set_held(&eng->mq, &r->mq, 0); /* cannot fail when clearing */
	r->state = R_CARD;
	eng->st.promoted++;
	return 0;
}

/*
 * Hands software-held receives to the card while it has room.  Only FIFO
 * heads are taken (the prefix rule holds for them: see the top of this file), and
 * contexts take turns so that one long FIFO does not starve the others.
 */
int tme_promote(struct tm_engine *eng)
{
	struct tm_swq *q;
	int n = 0;

	if (eng->promo_stuck)
		return 0;
	while (!ucs_list_is_empty(&eng->promo_ready)) {
		if (!tme_card_has_room(eng)) {
			eng->promo_stuck = 1; /* until tme_promo_unstick */
			break;
		}
		q = ucs_list_head(&eng->promo_ready, struct tm_swq, ready_link);
		if (promote_one(eng, q)) {
			if (q->ready) {
				/* no stage, or the card refused the ADD */
				eng->promo_stuck = 1;
				break;
			}
			continue;      /* pinned now: next context */
		}
		n++;
		if (q->ready && eng->promo_ready.prev != &q->ready_link) {
			ucs_list_del(&q->ready_link);
			ucs_list_add_tail(&eng->promo_ready, &q->ready_link);
		}
	}
	return n;
}

/*
 * The card refused r's ADD: software-held again, in place (post order in
 * its bucket and FIFO), and pinned so that it is not offered again.
 */
void tme_recv_back_to_sw(struct tm_engine *eng, struct tm_recv *r)
{
	struct tm_swq *q = swq_of(eng, tm_tag_ctx(r->mq.tag), 1);

	if (!q || tm_mq_set_held(&eng->mq, &r->mq, 1) != TM_OK)
		eng->st.errors++;
	r->state = R_SW;
	r->flags |= RF_PINNED;
	tme_stage_put(eng, r);
	if (q)
		swq_insert(eng, q, r);
}

/* ---- the offload decision ------------------------------------------ */

/*
 * May r go to the card now?  NULL if so, else the counter of the first
 * reason it may not (one counter per reason, in tm_engine_stats).  The
 * checks, in order:
 *   1. offload is on (sw_no_offload);
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
	if (!eng->cfg.offload)						/* 1 */
		return &eng->st.sw_no_offload;
	if (!(eng->test.faults & TM_FAULT_PREFIX) &&			/* 2 */
	    tm_mq_sw_conflict(&eng->mq, tag, mask))
		return &eng->st.sw_conflict;
	if (!eng->n_stage)						/* 3 */
		return &eng->st.sw_small_buf;
	if (r->len > eng->max_read)
		return &eng->st.sw_long_buf;
	if (eng->card_entries >= eng->max_entries)			/* 4 */
		return &eng->st.sw_list_full;
	if (!ucs_list_is_empty(&eng->opq) || eng->ops_out >= eng->max_ops)
		return &eng->st.sw_ops_full;				/* 5 */
	if (needs_stage(eng, r)) {					/* 6 */
		if (stage_get(eng, r))
			return &eng->st.sw_no_stage;
	} else if (!r->mr) {
		if (tm_dev_mem_get(eng->dev, r->buf, r->len,
				   IBV_ACCESS_LOCAL_WRITE, &r->mr) != TM_OK)
			return &eng->st.sw_reg_fail;
		r->own_mr = 1;
	}
	return NULL;
}

/*
 * Places a new receive (no unexpected message matched it): on the card
 * if offload_refusal() allows and the ADD is taken, else software-held in
 * its context's FIFO.  Older software-held receives are promoted first.
 */
int tme_recv_place(struct tm_engine *eng, struct tm_recv *r, uint32_t ctx,
		   uint64_t rtag, uint64_t mask)
{
	struct tm_swq *swq;
	uint64_t *why;
	int rc;

	r->mq.tag = rtag;
	r->mq.mask = mask;
	if (!ucs_list_is_empty(&eng->promo_ready))
		tme_promote(eng); /* older software-held receives first */
	why = offload_refusal(eng, r, rtag, mask);
	if (!why && tme_card_add(eng, r)) {
		tme_stage_put(eng, r);
		why = &eng->st.sw_list_full;
	}
	/* a software-held receive must be in its FIFO, or a later one of
	 * its context could be promoted past it: no FIFO, no receive */
	swq = why ? swq_of(eng, ctx, 1) : NULL;
	if (why && !swq) {
		if (r->own_mr)
			tm_dev_mem_put(eng->dev, r->mr);
		return TM_ERR_NO_MEMORY;
	}
	if (why)
		(*why)++;
	else
		eng->st.recv_to_card++;
	rc = tm_mq_post(&eng->mq, &r->mq, rtag, mask, r->post_stamp, !!why);
	if (rc != TM_OK)
		return rc;
	r->state = why ? R_SW : R_CARD;
	if (why) {
		if (never_on_card(eng, r) || why == &eng->st.sw_reg_fail)
			r->flags |= RF_PINNED;
		swq_insert(eng, swq, r);
	}
	return TM_OK;
}
