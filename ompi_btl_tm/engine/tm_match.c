/*
 * tm_match.c - posted-receive and unexpected-message queues (tm_match.h).
 *
 * Hash tables are libucs khash (header only): one table per kind, keyed by
 * the wire tag with the kind's wildcard bits cleared.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <ucs/datastruct/khash.h>
#include "tm_status.h"
#include "engine/tm_match.h"

struct tm_mq_bucket {
	ucs_list_link_t recvs; /* posted receives of this kind and key */
	ucs_list_link_t msgs;  /* unexpected messages under this key */
	uint64_t key;
	uint8_t kind;
	/* software-held receives: of this very kind and key ... */
	uint32_t sw_own;
	/* ... of more specific kinds under this key (EXACT under ANYSRC or
	 * ANYTAG, anything under ANYANY) ... */
	uint32_t sw_sub;
	/* ... and, in ANYANY buckets, ANYSRC / ANYTAG ones of the context */
	uint32_t sw_anysrc;
	uint32_t sw_anytag;
	struct tm_mq_bucket *next_free;
};

KHASH_MAP_INIT_INT64(tm_mqb, struct tm_mq_bucket *)

static const uint64_t kind_keymask[TM_MQ_NKINDS] = {
	[TM_MQ_EXACT] = ~0ULL,
	[TM_MQ_ANYSRC] = TM_MASK_CTX | TM_MASK_TAG,
	[TM_MQ_ANYTAG] = TM_MASK_CTX | TM_MASK_SRC,
	[TM_MQ_ANYANY] = TM_MASK_CTX,
};

static khash_t(tm_mqb) *table(struct tm_mq *mq, int kind)
{
	return mq->table[kind];
}

static int kind_of(uint64_t mask)
{
	return tm_mq_kind(mask);
}

int tm_mq_init(struct tm_mq *mq)
{
	int k;

	mq->free_buckets = NULL;
	mq->nrecvs = mq->nmsgs = mq->nsw_held = mq->nempty = 0;
	memset(mq->nindexed, 0, sizeof(mq->nindexed));
	mq->nbucketed = 0;
	ucs_list_head_init(&mq->lazy);
	ucs_list_head_init(&mq->held_lazy);
	for (k = 0; k < TM_MQ_NKINDS; k++) {
		mq->last[k] = NULL;
		mq->table[k] = kh_init(tm_mqb);
		if (!mq->table[k])
			return TM_ERR_NO_MEMORY;
	}
	return TM_OK;
}

void tm_mq_fini(struct tm_mq *mq)
{
	struct tm_mq_bucket *b;
	int k;

	for (k = 0; k < TM_MQ_NKINDS; k++) {
		if (!mq->table[k])
			continue;
		kh_foreach_value(table(mq, k), b, free(b));
		kh_destroy(tm_mqb, table(mq, k));
		mq->table[k] = NULL;
	}
	while ((b = mq->free_buckets)) {
		mq->free_buckets = b->next_free;
		free(b);
	}
}

static struct tm_mq_bucket *bucket_find(struct tm_mq *mq, int kind,
					uint64_t key)
{
	struct tm_mq_bucket *b = mq->last[kind];
	khiter_t it;

	if (b && b->key == key)
		return b;
	it = kh_get(tm_mqb, table(mq, kind), key);
	if (it == kh_end(table(mq, kind)))
		return NULL;
	b = kh_value(table(mq, kind), it);
	mq->last[kind] = b;
	return b;
}

static struct tm_mq_bucket *bucket_get(struct tm_mq *mq, int kind,
				       uint64_t key)
{
	struct tm_mq_bucket *b = mq->last[kind];
	khiter_t it;
	int ret;

	if (b && b->key == key)
		return b;
	it = kh_put(tm_mqb, table(mq, kind), key, &ret);
	if (ret < 0)
		return NULL;
	if (ret == 0) {
		b = kh_value(table(mq, kind), it);
		mq->last[kind] = b;
		return b;
	}
	b = mq->free_buckets;
	if (b)
		mq->free_buckets = b->next_free;
	else
		b = malloc(sizeof(*b));
	if (!b) {
		kh_del(tm_mqb, table(mq, kind), it);
		return NULL;
	}
	ucs_list_head_init(&b->recvs);
	ucs_list_head_init(&b->msgs);
	b->key = key;
	b->kind = kind;
	b->sw_own = b->sw_sub = b->sw_anysrc = b->sw_anytag = 0;
	kh_value(table(mq, kind), it) = b;
	mq->last[kind] = b;
	return b;
}

static int bucket_empty(struct tm_mq_bucket *b)
{
	return ucs_list_is_empty(&b->recvs) && ucs_list_is_empty(&b->msgs) &&
	       !b->sw_own && !b->sw_sub && !b->sw_anysrc && !b->sw_anytag;
}

/* Deletes every empty bucket: O(table), run when empties outnumber. */
static void sweep(struct tm_mq *mq)
{
	struct tm_mq_bucket *b;
	khiter_t it;
	int k;

	for (k = 0; k < TM_MQ_NKINDS; k++) {
		mq->last[k] = NULL;
		for (it = kh_begin(table(mq, k)); it != kh_end(table(mq, k));
		     it++) {
			if (!kh_exist(table(mq, k), it))
				continue;
			b = kh_value(table(mq, k), it);
			if (!bucket_empty(b))
				continue;
			kh_del(tm_mqb, table(mq, k), it);
			b->next_free = mq->free_buckets;
			mq->free_buckets = b;
		}
	}
	mq->nempty = 0;
}

/*
 * Called when b may have become empty.  Empty buckets stay in the table
 * (a key that comes and goes costs no hash insert/delete, whose tombstones
 * would force periodic rehashing); they are swept in bulk once there are
 * more of them than entries, so memory stays proportional to the queues.
 */
static void bucket_put(struct tm_mq *mq, struct tm_mq_bucket *b)
{
	if (!b || !bucket_empty(b))
		return;
	if (++mq->nempty > 1024 + mq->nrecvs + mq->nmsgs)
		sweep(mq);
}

/*
 * r (in its bucket own) becomes software-held: counted in own and in the
 * wider buckets its messages could also match through, which it keeps in
 * r->acct.  Buckets are created as needed.
 */
static int sw_add(struct tm_mq *mq, struct tm_mq_recv *r,
		  struct tm_mq_bucket *own)
{
	struct tm_mq_bucket *up1 = NULL, *up2 = NULL, *ctxb = NULL;
	uint64_t tag = r->tag;
	int kind = r->kind;

	if (kind == TM_MQ_EXACT) {
		up1 = bucket_get(mq, TM_MQ_ANYSRC,
				 tag & kind_keymask[TM_MQ_ANYSRC]);
		up2 = bucket_get(mq, TM_MQ_ANYTAG,
				 tag & kind_keymask[TM_MQ_ANYTAG]);
		if (!up1 || !up2)
			return TM_ERR_NO_MEMORY;
	}
	if (kind != TM_MQ_ANYANY) {
		ctxb = bucket_get(mq, TM_MQ_ANYANY, tag & TM_MASK_CTX);
		if (!ctxb)
			return TM_ERR_NO_MEMORY;
	}
	own->sw_own++;
	if (up1)
		up1->sw_sub++;
	if (up2)
		up2->sw_sub++;
	if (ctxb) {
		ctxb->sw_sub++;
		ctxb->sw_anysrc += kind == TM_MQ_ANYSRC;
		ctxb->sw_anytag += kind == TM_MQ_ANYTAG;
	}
	r->acct[0] = up1;
	r->acct[1] = up2;
	r->acct[2] = ctxb;
	mq->nsw_held++;
	return TM_OK;
}

/* Undoes sw_add (own is released by the caller, after unlinking). */
static void sw_sub(struct tm_mq *mq, struct tm_mq_recv *r,
		   struct tm_mq_bucket *own)
{
	struct tm_mq_bucket *ctxb = r->acct[2];

	own->sw_own--;
	if (r->acct[0])
		r->acct[0]->sw_sub--;
	if (r->acct[1])
		r->acct[1]->sw_sub--;
	if (ctxb) {
		ctxb->sw_sub--;
		ctxb->sw_anysrc -= r->kind == TM_MQ_ANYSRC;
		ctxb->sw_anytag -= r->kind == TM_MQ_ANYTAG;
	}
	mq->nsw_held--;
	bucket_put(mq, r->acct[0]);
	bucket_put(mq, r->acct[1]);
	bucket_put(mq, ctxb);
	r->acct[0] = r->acct[1] = r->acct[2] = NULL;
}

/* Puts every lazily posted receive in its bucket, oldest first; stops at
 * the first bucket it cannot allocate. */
static int lazy_index(struct tm_mq *mq)
{
	struct tm_mq_recv *r;
	struct tm_mq_bucket *b;

	while (!ucs_list_is_empty(&mq->lazy)) {
		r = ucs_list_head(&mq->lazy, struct tm_mq_recv, link);
		r->kind = (uint8_t)kind_of(r->mask);
		b = bucket_get(mq, r->kind, r->tag & kind_keymask[r->kind]);
		if (!b)
			return TM_ERR_NO_MEMORY;
		ucs_list_del(&r->link);
		r->bucket = b;
		ucs_list_add_tail(&b->recvs, &r->link);
		mq->nindexed[r->kind]++;
		mq->nbucketed++;
	}
	return TM_OK;
}

/* tm_mq_post of a software-held receive (the inline part is in the
 * header): every lazy receive goes to its bucket first, in post order. */
int tm_mq_post_held(struct tm_mq *mq, struct tm_mq_recv *r, uint64_t tag,
		    uint64_t mask, uint64_t seq)
{
	int kind = kind_of(mask);
	struct tm_mq_bucket *b;

	r->tag = tag & mask;
	r->mask = mask;
	r->seq = seq;
	r->kind = kind;
	r->sw_held = 0;
	r->uncounted = r->lazy_held = 0;
	if (lazy_index(mq) != TM_OK)
		return TM_ERR_NO_MEMORY;
	b = bucket_get(mq, kind, r->tag & kind_keymask[kind]);
	if (!b)
		return TM_ERR_NO_MEMORY;
	if (sw_add(mq, r, b) != TM_OK) {
		bucket_put(mq, b);
		return TM_ERR_NO_MEMORY;
	}
	r->sw_held = 1;
	r->bucket = b;
	ucs_list_add_tail(&b->recvs, &r->link);
	mq->nindexed[kind]++;
	mq->nbucketed++;
	mq->nrecvs++;
	return TM_OK;
}

/* tm_mq_recv_remove of a receive in a bucket (the header has the rest). */
void tm_mq_recv_remove_indexed(struct tm_mq *mq, struct tm_mq_recv *r)
{
	ucs_list_del(&r->link);
	if (r->sw_held) {
		sw_sub(mq, r, r->bucket);
		r->sw_held = 0;
	}
	bucket_put(mq, r->bucket);
	r->bucket = NULL;
	mq->nindexed[r->kind]--;
	mq->nbucketed--;
	mq->nrecvs--;
}

/* Are some lazily held receives uncounted?  They are held_lazy's tail. */
static int any_uncounted(struct tm_mq *mq)
{
	return !ucs_list_is_empty(&mq->held_lazy) &&
	       ucs_list_tail(&mq->held_lazy, struct tm_mq_recv, ulink)->uncounted;
}

/* Counts every lazily held receive (each in its bucket first), oldest
 * first; stops at the first bucket it cannot allocate, so that the ones
 * left uncounted are still held_lazy's tail. */
static int count_uncounted(struct tm_mq *mq)
{
	ucs_list_link_t *at = &mq->held_lazy;
	struct tm_mq_recv *r;

	if (lazy_index(mq) != TM_OK)
		return TM_ERR_NO_MEMORY;
	while (at->prev != &mq->held_lazy &&
	       ucs_container_of(at->prev, struct tm_mq_recv, ulink)->uncounted)
		at = at->prev;
	for (; at != &mq->held_lazy; at = at->next) {
		r = ucs_container_of(at, struct tm_mq_recv, ulink);
		if (sw_add(mq, r, r->bucket) != TM_OK)
			return TM_ERR_NO_MEMORY;
		mq->nsw_held--; /* sw_add counted it once more */
		r->uncounted = 0;
		r->sw_held = 1;
	}
	return TM_OK;
}

int tm_mq_set_held(struct tm_mq *mq, struct tm_mq_recv *r, int held)
{
	held = !!held;
	if (r->uncounted && !held) {
		tm_mq_lazy_leave(mq, r);
		return TM_OK;
	}
	if (!held && r->lazy_held) { /* counted: no longer held lazily */
		r->lazy_held = 0;
		ucs_list_del(&r->ulink);
	}
	if (held == (r->sw_held || r->uncounted))
		return TM_OK;
	/* a held receive is in its bucket, in post order with the rest */
	if (!r->bucket && lazy_index(mq) != TM_OK)
		return TM_ERR_NO_MEMORY;
	if (!held)
		sw_sub(mq, r, r->bucket);
	else if (sw_add(mq, r, r->bucket) != TM_OK)
		return TM_ERR_NO_MEMORY;
	r->sw_held = (uint8_t)held;
	return TM_OK;
}

static struct tm_mq_recv *head_recv(struct tm_mq *mq, int kind, uint64_t key)
{
	struct tm_mq_bucket *b;

	if (!mq->nindexed[kind])
		return NULL;
	b = bucket_find(mq, kind, key);

	if (!b || ucs_list_is_empty(&b->recvs))
		return NULL;
	return ucs_list_head(&b->recvs, struct tm_mq_recv, link);
}

static struct tm_mq_recv *earlier(struct tm_mq_recv *a, struct tm_mq_recv *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return a->seq < b->seq ? a : b;
}

struct tm_mq_recv *tm_mq_find_recv_slow(struct tm_mq *mq, uint64_t mtag)
{
	struct tm_mq_recv *best, *q;

	if (lazy_index(mq) != TM_OK) {
		/* out of memory for a bucket: the FIFO's first acceptor
		 * (the FIFO is in post order) competes with the buckets */
		best = NULL;
		ucs_list_for_each(q, &mq->lazy, link) {
			if (tm_tag_accepts(q->tag, q->mask, mtag)) {
				best = q;
				break;
			}
		}
	} else {
		best = NULL;
	}
	best = earlier(best, head_recv(mq, TM_MQ_EXACT, mtag));
	best = earlier(best, head_recv(mq, TM_MQ_ANYSRC,
				       mtag & kind_keymask[TM_MQ_ANYSRC]));
	if (!(mtag & TM_MASK_TAG_SIGN)) {
		best = earlier(best, head_recv(mq, TM_MQ_ANYTAG,
					       mtag & kind_keymask[TM_MQ_ANYTAG]));
		best = earlier(best, head_recv(mq, TM_MQ_ANYANY,
					       mtag & TM_MASK_CTX));
	}
	return best;
}

int tm_mq_msg_add(struct tm_mq *mq, struct tm_mq_msg *m, uint64_t tag,
		  uint64_t seq)
{
	int k, nk = (tag & TM_MASK_TAG_SIGN) ? 2 : TM_MQ_NKINDS;

	m->tag = tag;
	m->seq = seq;
	for (k = 0; k < TM_MQ_NKINDS; k++)
		m->bucket[k] = NULL;
	for (k = 0; k < nk; k++) {
		m->bucket[k] = bucket_get(mq, k, tag & kind_keymask[k]);
		if (!m->bucket[k])
			goto fail;
	}
	for (k = 0; k < nk; k++)
		ucs_list_add_tail(&m->bucket[k]->msgs, &m->link[k]);
	mq->nmsgs++;
	return TM_OK;
fail:
	for (k = 0; k < nk; k++)
		bucket_put(mq, m->bucket[k]);
	return TM_ERR_NO_MEMORY;
}

void tm_mq_msg_remove(struct tm_mq *mq, struct tm_mq_msg *m)
{
	int k;

	for (k = 0; k < TM_MQ_NKINDS; k++) {
		if (!m->bucket[k])
			continue;
		ucs_list_del(&m->link[k]);
		bucket_put(mq, m->bucket[k]);
		m->bucket[k] = NULL;
	}
	mq->nmsgs--;
}

void tm_mq_msg_move(struct tm_mq *mq, struct tm_mq_msg *from,
		    struct tm_mq_msg *to)
{
	int k;

	(void)mq;
	for (k = 0; k < TM_MQ_NKINDS; k++) {
		to->bucket[k] = from->bucket[k];
		if (from->bucket[k])
			ucs_list_replace(&from->link[k], &to->link[k]);
		from->bucket[k] = NULL;
	}
	to->seq = from->seq;
	to->tag = from->tag;
}

struct tm_mq_msg *tm_mq_find_msg_slow(struct tm_mq *mq, uint64_t tag,
				      uint64_t mask)
{
	int kind = kind_of(mask);
	struct tm_mq_bucket *b;

	if (!mq->nmsgs)
		return NULL;
	b = bucket_find(mq, kind, tag & mask & kind_keymask[kind]);
	if (!b || ucs_list_is_empty(&b->msgs))
		return NULL;
	/* link[kind] is b->msgs.next: step back to the message */
	return (struct tm_mq_msg *)((char *)b->msgs.next -
				    offsetof(struct tm_mq_msg, link) -
				    kind * sizeof(ucs_list_link_t));
}

static uint32_t sw_count(struct tm_mq *mq, int kind, uint64_t key,
			 int what)
{
	struct tm_mq_bucket *b = bucket_find(mq, kind, key);

	if (!b)
		return 0;
	switch (what) {
	case 0: return b->sw_own;
	case 1: return b->sw_own + b->sw_sub;
	case 2: return b->sw_anysrc;
	default: return b->sw_anytag;
	}
}

int tm_mq_sw_conflict_slow(struct tm_mq *mq, uint64_t tag, uint64_t mask)
{
	int kind = kind_of(mask);
	uint64_t t = tag & mask, ctx = t & TM_MASK_CTX;
	int neg = !!(t & TM_MASK_TAG_SIGN) && kind != TM_MQ_ANYTAG &&
		  kind != TM_MQ_ANYANY;

	if (!mq->nsw_held)
		return 0;
	if (any_uncounted(mq) && count_uncounted(mq) != TM_OK)
		return 1; /* no memory to count: conservative */
	switch (kind) {
	case TM_MQ_EXACT:
		return sw_count(mq, TM_MQ_EXACT, t, 0) ||
		       sw_count(mq, TM_MQ_ANYSRC, t & kind_keymask[1], 0) ||
		       (!neg && (sw_count(mq, TM_MQ_ANYTAG,
					  t & kind_keymask[2], 0) ||
				 sw_count(mq, TM_MQ_ANYANY, ctx, 0)));
	case TM_MQ_ANYSRC:
		return sw_count(mq, TM_MQ_ANYSRC, t, 1) ||
		       (!neg && (sw_count(mq, TM_MQ_ANYANY, ctx, 3) ||
				 sw_count(mq, TM_MQ_ANYANY, ctx, 0)));
	case TM_MQ_ANYTAG:
		return sw_count(mq, TM_MQ_ANYTAG, t, 1) ||
		       sw_count(mq, TM_MQ_ANYANY, ctx, 2) ||
		       sw_count(mq, TM_MQ_ANYANY, ctx, 0);
	default:
		return sw_count(mq, TM_MQ_ANYANY, ctx, 1);
	}
}

void tm_mq_for_each_recv(struct tm_mq *mq,
			 void (*fn)(struct tm_mq_recv *r, void *arg),
			 void *arg)
{
	struct tm_mq_bucket *b;
	struct tm_mq_recv *r;
	int k;

	ucs_list_for_each(r, &mq->lazy, link)
		fn(r, arg);
	for (k = 0; k < TM_MQ_NKINDS; k++) {
		if (!mq->nindexed[k])
			continue;
		kh_foreach_value(table(mq, k), b, {
			ucs_list_for_each(r, &b->recvs, link)
				fn(r, arg);
		});
	}
}

/*
 * Walks every bucket: O(queues + tables), for tools (MPI_T), never on the
 * data path.  A message is in exactly one EXACT bucket, a receive in one
 * bucket of its kind or in the lazy FIFO.
 */
void tm_mq_count_ctx(struct tm_mq *mq, uint32_t ctx, uint64_t *nrecvs,
		     uint64_t *nmsgs)
{
	struct tm_mq_bucket *b;
	struct tm_mq_recv *r;
	struct tm_mq_msg *m;
	int k;

	*nrecvs = *nmsgs = 0;
	ucs_list_for_each(r, &mq->lazy, link)
		*nrecvs += tm_tag_ctx(r->tag) == ctx;
	for (k = 0; k < TM_MQ_NKINDS; k++) {
		kh_foreach_value(table(mq, k), b, {
			if (tm_tag_ctx(b->key) != ctx)
				continue;
			ucs_list_for_each(r, &b->recvs, link)
				(*nrecvs)++;
			if (k != TM_MQ_EXACT)
				continue;
			ucs_list_for_each(m, &b->msgs, link[TM_MQ_EXACT])
				(*nmsgs)++;
		});
	}
}
