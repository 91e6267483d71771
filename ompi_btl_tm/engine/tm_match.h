/*
 * tm_match.h - the 64-bit tag layout and the software matching queues
 * (posted receives and unexpected messages) of the matching engine.
 *
 * Contract
 * --------
 * Tag layout (the wire tag in the TMH and the card's tag/mask):
 *
 *    63        50 49             32 31                    0
 *   +------------+-----------------+-----------------------+
 *   | context id |   source rank   |  user tag (int32)     |
 *   |  14 bits   |     18 bits     |  32 bits, two's compl.|
 *   +------------+-----------------+-----------------------+
 *
 * A receive is (tag, mask): the context bits are always in the mask;
 * TM_ANY_SRC clears the source bits; TM_ANY_TAG clears the tag bits except
 * the sign bit, and the receive's tag has the sign bit clear, so ANY_TAG
 * never matches a negative (Open MPI internal) tag.  A message is accepted
 * iff ((rtag ^ mtag) & mask) == 0, the same test the card applies.
 *
 * Queues (struct tm_mq): every receive is indexed under one of four kinds
 * by what its mask keeps: EXACT (ctx,src,tag), ANYSRC (ctx,tag), ANYTAG
 * (ctx,src), ANYANY (ctx); each kind is a hash table (libucs khash) of
 * buckets, each bucket a FIFO list.  Every unexpected message is indexed
 * under all four keys it could be wanted by (ANYTAG/ANYANY only if its tag
 * is non-negative).  Every entry carries a sequence number from the
 * caller's clock:
 *  - an arrival takes the lowest-sequence head among the (up to) four
 *    buckets of posted receives that can accept it: O(1);
 *  - a new receive takes the head of the one bucket of messages keyed by
 *    its own kind: O(1) (all messages in that list are acceptable to it, in
 *    arrival order).
 * Removal is O(1) (doubly linked lists); empty buckets are swept in bulk
 * (amortised O(1)) once they outnumber the queued entries.
 *
 * Sequence numbers rise with post order (a receive's is above every
 * receive's posted before it): the FIFOs below rely on it.
 *
 * Lazy indexing: a receive posted not software-held waits in one FIFO
 * (mq->lazy) and is put in its bucket only when something needs the
 * buckets of receives: an arrival that the FIFO's first receive does not
 * answer (tm_mq_find_recv), a software-held post, or tm_mq_set_held.  All
 * of them index every waiting receive first, in post order, so each
 * bucket stays in post order, and every receive in a bucket is older
 * than every one in the FIFO.  While no receive is in a bucket, the
 * FIFO's first receive is the earliest posted, so an arrival it accepts
 * hashes nothing: a receive the card matches, or one matched by an
 * arrival in post order (a window of receives for one sender and tag),
 * is never hashed.  If a
 * bucket cannot be allocated the receive stays in the FIFO, which
 * tm_mq_find_recv also searches.
 *
 * Prefix rule support: a receive can be marked "software-held"; counters in
 * the buckets track, per key, how many software-held receives of each kind
 * lie at or under it, so tm_mq_sw_conflict() answers in O(1) whether a
 * software-held receive could accept a message that (tag, mask) accepts
 * (conservative for negative tags: it may say yes where no message could
 * match both, never no where one could).  A receive posted TM_MQ_HELD_LAZY
 * is software-held but counted only when a conflict is first asked about
 * (amortised O(1): once per receive): it waits in the lazy FIFO like one
 * the card holds, so a program that posts only such receives (small ones,
 * below the offload threshold) never hashes or counts one.  Every receive
 * posted TM_MQ_HELD_LAZY stays on mq->held_lazy, in post order, while it
 * is held, counted or not (tm_mq_oldest_held_lazy: its caller orders
 * other work after the oldest): counting takes them all at once, so the
 * uncounted ones are always the list's tail.
 *
 * Nothing here allocates per operation except buckets (cached).
 */
#ifndef TM_MATCH_H
#define TM_MATCH_H

#include <stdint.h>
#ifdef TM_DEBUG
#undef NDEBUG
#include <assert.h>
#endif
#include <ucs/datastruct/list.h>
#include "tm_status.h"

#define TM_ANY_SRC (-1)
#define TM_ANY_TAG (-1)

#define TM_CTX_BITS 14
#define TM_SRC_BITS 18
#define TM_CTX_SHIFT 50
#define TM_SRC_SHIFT 32
#define TM_MAX_CTX ((1u << TM_CTX_BITS) - 1)
#define TM_MAX_SRC ((1u << TM_SRC_BITS) - 1)
#define TM_MASK_CTX ((uint64_t)TM_MAX_CTX << TM_CTX_SHIFT)
#define TM_MASK_SRC ((uint64_t)TM_MAX_SRC << TM_SRC_SHIFT)
#define TM_MASK_TAG 0xffffffffULL
#define TM_MASK_TAG_SIGN 0x80000000ULL

static inline uint64_t tm_tag_make(uint32_t ctx, uint32_t src, int32_t tag)
{
	return ((uint64_t)ctx << TM_CTX_SHIFT) |
	       ((uint64_t)src << TM_SRC_SHIFT) | (uint32_t)tag;
}

/* Receive tag/mask; src/tag may be TM_ANY_SRC / TM_ANY_TAG. */
static inline void tm_tag_recv(uint32_t ctx, int32_t src, int32_t tag,
			       uint64_t *rtag, uint64_t *mask)
{
	*mask = TM_MASK_CTX;
	*rtag = (uint64_t)ctx << TM_CTX_SHIFT;
	if (src != TM_ANY_SRC) {
		*mask |= TM_MASK_SRC;
		*rtag |= (uint64_t)(uint32_t)src << TM_SRC_SHIFT;
	}
	if (tag != TM_ANY_TAG) {
		*mask |= TM_MASK_TAG;
		*rtag |= (uint32_t)tag;
	} else {
		*mask |= TM_MASK_TAG_SIGN; /* tag bits 0: sign clear */
	}
}

/*
 * Is (rtag, mask) one tm_tag_recv() makes?  The queues index a receive
 * by what its mask keeps, so an entry point refuses any other.
 */
static inline int tm_tag_recv_ok(uint64_t rtag, uint64_t mask)
{
	uint64_t src = mask & TM_MASK_SRC, tag = mask & TM_MASK_TAG;

	/* the common one (no wildcard) in one test: it keeps every bit */
	_Static_assert((TM_MASK_CTX | TM_MASK_SRC | TM_MASK_TAG) == UINT64_MAX,
		       "context, source and tag fill the tag");
	if (mask == UINT64_MAX)
		return 1;
	return (mask & ~(TM_MASK_SRC | TM_MASK_TAG)) == TM_MASK_CTX &&
	       (src == 0 || src == TM_MASK_SRC) &&
	       (tag == TM_MASK_TAG ||
		(tag == TM_MASK_TAG_SIGN && !(rtag & TM_MASK_TAG_SIGN))) &&
	       (rtag & ~mask) == 0;
}

static inline int tm_tag_accepts(uint64_t rtag, uint64_t mask, uint64_t mtag)
{
	return ((rtag ^ mtag) & mask) == 0;
}

static inline uint32_t tm_tag_ctx(uint64_t t)
{
	return (uint32_t)(t >> TM_CTX_SHIFT) & TM_MAX_CTX;
}

static inline uint32_t tm_tag_src(uint64_t t)
{
	return (uint32_t)(t >> TM_SRC_SHIFT) & TM_MAX_SRC;
}

static inline int32_t tm_tag_user(uint64_t t)
{
	return (int32_t)(uint32_t)(t & TM_MASK_TAG);
}

enum tm_mq_kind {
	TM_MQ_EXACT = 0,
	TM_MQ_ANYSRC = 1,
	TM_MQ_ANYTAG = 2,
	TM_MQ_ANYANY = 3,
	TM_MQ_NKINDS = 4,
};

struct tm_mq_bucket;

/* A posted receive as the queues see it; embedded in the engine's. */
struct tm_mq_recv {
	ucs_list_link_t link;        /* in its bucket, or in mq->lazy */
	struct tm_mq_bucket *bucket; /* NULL: in mq->lazy */
	uint64_t seq;
	uint64_t tag;
	uint64_t mask;
	uint8_t kind;                /* tm_mq_kind(mask), once in a bucket */
	uint8_t sw_held;
	uint8_t uncounted; /* held lazily, not counted yet */
	uint8_t lazy_held; /* posted TM_MQ_HELD_LAZY, still held: on
			    * mq->held_lazy */
	/* while sw_held: the wider buckets whose counters it adds to (a
	 * counted bucket is never swept), so release needs no lookups */
	struct tm_mq_bucket *acct[3];
	ucs_list_link_t ulink;       /* on mq->held_lazy */
};

/* An unexpected message as the queues see it; embedded in the engine's. */
struct tm_mq_msg {
	ucs_list_link_t link[TM_MQ_NKINDS];
	struct tm_mq_bucket *bucket[TM_MQ_NKINDS];
	uint64_t seq;
	uint64_t tag;
};

struct tm_mq {
	void *table[TM_MQ_NKINDS]; /* khash_t(tm_mqb) * */
	/* the bucket of each kind looked up last: a program that keeps
	 * posting the same (ctx, src, tag) hashes once (cleared by the
	 * sweep, the only place buckets leave a table) */
	struct tm_mq_bucket *last[TM_MQ_NKINDS];
	ucs_list_link_t lazy; /* posted receives not yet in a bucket */
	struct tm_mq_bucket *free_buckets;
	ucs_list_link_t held_lazy; /* posted held lazily, in post order;
				    * the uncounted ones are its tail */
	uint64_t nrecvs;
	uint64_t nmsgs;
	uint64_t nsw_held;  /* held and counted, plus held lazily */
	uint64_t nempty;  /* bucket_put calls since the last sweep */
	/* receives in buckets, per kind: an arrival skips the lookup of a
	 * kind nobody posts (most programs post no wildcards) */
	uint32_t nindexed[TM_MQ_NKINDS];
	uint32_t nbucketed; /* their sum: 0 while every receive is lazy */
};

int tm_mq_init(struct tm_mq *mq);
void tm_mq_fini(struct tm_mq *mq);

/* The kind of a receive with this mask. */
static inline int tm_mq_kind(uint64_t mask)
{
	int k = 0;

	if (!(mask & TM_MASK_SRC))
		k |= TM_MQ_ANYSRC;
	if ((mask & TM_MASK_TAG) != TM_MASK_TAG)
		k |= TM_MQ_ANYTAG;
	return k;
}

int tm_mq_post_held(struct tm_mq *mq, struct tm_mq_recv *r, uint64_t tag,
		    uint64_t mask, uint64_t seq);
void tm_mq_recv_remove_indexed(struct tm_mq *mq, struct tm_mq_recv *r);

/* How tm_mq_post holds a receive. */
enum {
	TM_MQ_CARD = 0,      /* not software-held */
	TM_MQ_HELD = 1,      /* software-held, counted now */
	TM_MQ_HELD_LAZY = 2, /* software-held, counted when first asked */
};

/*
 * Adds r (tag/mask/seq set by this call) to the posted queue, held as
 * `how` says.  Inline for a receive not counted now: it joins the lazy
 * FIFO (cannot fail).
 */
static inline int tm_mq_post(struct tm_mq *mq, struct tm_mq_recv *r,
			     uint64_t tag, uint64_t mask, uint64_t seq,
			     int how)
{
	if (how == TM_MQ_HELD)
		return tm_mq_post_held(mq, r, tag, mask, seq);
	r->tag = tag & mask;
	r->mask = mask;
	r->seq = seq;
	r->sw_held = 0; /* its kind: when it joins a bucket (lazy_index) */
	r->uncounted = r->lazy_held = how == TM_MQ_HELD_LAZY;
	if (r->lazy_held) {
		ucs_list_add_tail(&mq->held_lazy, &r->ulink);
		mq->nsw_held++;
	}
	r->bucket = NULL;
	ucs_list_add_tail(&mq->lazy, &r->link);
	mq->nrecvs++;
	return TM_OK;
}

/* A lazily held receive leaves mq->held_lazy (uncounted: it is counted
 * no more; counted, its bucket's counters go with it). */
static inline void tm_mq_lazy_leave(struct tm_mq *mq, struct tm_mq_recv *r)
{
	if (r->lazy_held) {
		r->lazy_held = 0;
		ucs_list_del(&r->ulink);
		if (r->uncounted) {
			r->uncounted = 0;
			mq->nsw_held--;
		}
	}
}

/* The earliest receive posted held lazily and still held, or NULL. */
static inline struct tm_mq_recv *tm_mq_oldest_held_lazy(struct tm_mq *mq)
{
	return ucs_list_is_empty(&mq->held_lazy) ? NULL :
	       ucs_list_head(&mq->held_lazy, struct tm_mq_recv, ulink);
}

/* Removes a posted receive in no bucket (still in the lazy FIFO). */
static inline void tm_mq_recv_remove_lazy(struct tm_mq *mq,
					  struct tm_mq_recv *r)
{
#ifdef TM_DEBUG
	assert(!r->bucket); /* a bucketed one: tm_mq_recv_remove */
	assert(r->uncounted == r->lazy_held); /* counting buckets first */
#endif
	if (r->lazy_held) { /* tm_mq_lazy_leave: uncounted, in no bucket */
		r->lazy_held = r->uncounted = 0;
		ucs_list_del(&r->ulink);
		mq->nsw_held--;
	}
	ucs_list_del(&r->link);
	mq->nrecvs--;
}

/* Removes a posted receive; inline while it is still in the lazy FIFO. */
static inline void tm_mq_recv_remove(struct tm_mq *mq, struct tm_mq_recv *r)
{
	if (!r->bucket) {
		tm_mq_recv_remove_lazy(mq, r);
		return;
	}
	tm_mq_lazy_leave(mq, r);
	tm_mq_recv_remove_indexed(mq, r);
}

/*
 * Marks a posted receive software-held or not, in place: it keeps its
 * position (post order) in its bucket.  Fails only to allocate a bucket
 * when marking held.
 */
int tm_mq_set_held(struct tm_mq *mq, struct tm_mq_recv *r, int held);

struct tm_mq_recv *tm_mq_find_recv_slow(struct tm_mq *mq, uint64_t mtag);

/*
 * The earliest posted receive accepting mtag, or NULL; not removed.
 * Inline while no receive is in a bucket and the lazy FIFO's first one
 * accepts mtag: the FIFO is in post order, so that one is the earliest
 * (arrivals in the order of their receives, window after window, never
 * hash one); or it is the only one and does not.
 */
static inline struct tm_mq_recv *tm_mq_find_recv(struct tm_mq *mq,
						 uint64_t mtag)
{
	struct tm_mq_recv *q;

	if (!mq->nrecvs)
		return NULL;
	if (!mq->nbucketed) {
		q = ucs_list_head(&mq->lazy, struct tm_mq_recv, link);
		if (tm_tag_accepts(q->tag, q->mask, mtag))
			return q;
		if (mq->nrecvs == 1)
			return NULL;
	}
	return tm_mq_find_recv_slow(mq, mtag);
}

int tm_mq_msg_add(struct tm_mq *mq, struct tm_mq_msg *m, uint64_t tag,
		  uint64_t seq);
void tm_mq_msg_remove(struct tm_mq *mq, struct tm_mq_msg *m);
/* to takes from's place in every queue (from is left unlinked). */
void tm_mq_msg_move(struct tm_mq *mq, struct tm_mq_msg *from,
		    struct tm_mq_msg *to);

/* The earliest unexpected message (tag, mask) accepts, or NULL. */
struct tm_mq_msg *tm_mq_find_msg_slow(struct tm_mq *mq, uint64_t tag,
				      uint64_t mask);

/* Inline: an empty unexpected queue (the common case) is a test. */
static inline struct tm_mq_msg *tm_mq_find_msg(struct tm_mq *mq,
					       uint64_t tag, uint64_t mask)
{
	return mq->nmsgs ? tm_mq_find_msg_slow(mq, tag, mask) : NULL;
}

/* Could a software-held posted receive accept a message (tag,mask) does? */
int tm_mq_sw_conflict_slow(struct tm_mq *mq, uint64_t tag, uint64_t mask);

/* Inline: with no receive held in software (the common case) a test. */
static inline int tm_mq_sw_conflict(struct tm_mq *mq, uint64_t tag,
				    uint64_t mask)
{
	return mq->nsw_held && tm_mq_sw_conflict_slow(mq, tag, mask);
}

/* Calls fn on every posted receive, in no particular order; fn must not
 * change the queues (for the keepalive scan and a dead peer: not O(1)). */
void tm_mq_for_each_recv(struct tm_mq *mq,
			 void (*fn)(struct tm_mq_recv *r, void *arg),
			 void *arg);

/*
 * The posted receives and unexpected messages of context ctx, counted by
 * walking the queues (for tools: not O(1)).
 */
void tm_mq_count_ctx(struct tm_mq *mq, uint32_t ctx, uint64_t *nrecvs,
		     uint64_t *nmsgs);

#endif /* TM_MATCH_H */
