/*
 * taglist.c - the card's index of its tag list: mask groups of hashed
 * buckets (see struct sh_mask_group in softhca_priv.h).
 *
 * The index is built when the list reaches SH_INDEX_FROM entries and
 * dropped when it empties; below that, matching scans the list.
 *
 * The list itself (order, activity) stays in srq.c; this file only answers
 * "the first active entry, in list order, whose tag & mask accept tag"
 * without walking the list.  Within a bucket every entry accepts the same
 * tags, so its first active entry is the group's answer; the earliest of
 * the groups' answers (by seq) is the list's.
 */
#include <errno.h>
#include <ucs/datastruct/khash.h>

#include "softhca_priv.h"

struct sh_bucket {
	int32_t head, tail;
};

KHASH_MAP_INIT_INT64(sh_bkt, struct sh_bucket)

static khash_t(sh_bkt) *buckets(struct sh_mask_group *g)
{
	return g->buckets;
}

int sh_tl_init(struct sh_srq *srq)
{
	for (int i = 0; i < SH_MASK_GROUPS; i++) {
		srq->groups[i].buckets = kh_init(sh_bkt);
		if (!srq->groups[i].buckets)
			return ENOMEM;
	}
	srq->over_head = srq->over_tail = -1;
	return 0;
}

void sh_tl_fini(struct sh_srq *srq)
{
	for (int i = 0; i < SH_MASK_GROUPS; i++)
		if (srq->groups[i].buckets)
			kh_destroy(sh_bkt, buckets(&srq->groups[i]));
}

/* The group for mask: its own, else a free one, else -1 (overflow). */
static int group_for(struct sh_srq *srq, uint64_t mask)
{
	int free_group = -1;

	for (int i = 0; i < SH_MASK_GROUPS; i++) {
		struct sh_mask_group *g = &srq->groups[i];

		if (g->entries && g->mask == mask)
			return i;
		if (!g->entries && free_group < 0)
			free_group = i;
	}
	if (free_group >= 0)
		srq->groups[free_group].mask = mask;
	return free_group;
}

/* Appends h at the tail of a chain (head/tail indexes, bprev/bnext). */
static void chain_append(struct sh_srq *srq, int32_t *head, int32_t *tail,
			 int32_t h)
{
	struct sh_tag *t = &srq->tags[h];

	t->bprev = *tail;
	t->bnext = -1;
	if (*tail >= 0)
		srq->tags[*tail].bnext = h;
	else
		*head = h;
	*tail = h;
}

static void chain_remove(struct sh_srq *srq, int32_t *head, int32_t *tail,
			 int32_t h)
{
	struct sh_tag *t = &srq->tags[h];

	if (t->bprev >= 0)
		srq->tags[t->bprev].bnext = t->bnext;
	else
		*head = t->bnext;
	if (t->bnext >= 0)
		srq->tags[t->bnext].bprev = t->bprev;
	else
		*tail = t->bprev;
}

static int index_entry(struct sh_srq *srq, int32_t h)
{
	struct sh_tag *t = &srq->tags[h];
	struct sh_mask_group *g;
	khiter_t it;
	int ret;

	t->group = (int8_t)group_for(srq, t->mask);
	if (t->group < 0) {
		chain_append(srq, &srq->over_head, &srq->over_tail, h);
		return 0;
	}
	g = &srq->groups[t->group];
	it = kh_put(sh_bkt, buckets(g), t->tag & t->mask, &ret);
	if (ret < 0) {
		/* No memory for a bucket: still correct, just scanned. */
		t->group = -1;
		chain_append(srq, &srq->over_head, &srq->over_tail, h);
		return ENOMEM;
	}
	if (ret)
		kh_value(buckets(g), it) = (struct sh_bucket){ -1, -1 };
	chain_append(srq, &kh_value(buckets(g), it).head,
		     &kh_value(buckets(g), it).tail, h);
	g->entries++;
	return 0;
}

/*
 * Entry h was just appended to the list (srq->list_len counts it); index it,
 * or the whole list if it has just grown long enough.
 */
int sh_tl_insert(struct sh_srq *srq, int32_t h)
{
	int err = 0;

	srq->tags[h].seq = srq->list_seq++;
	if (srq->indexed)
		return index_entry(srq, h);
	if (srq->list_len < SH_INDEX_FROM)
		return 0;
	for (int32_t i = srq->list_head; i >= 0; i = srq->tags[i].next)
		err |= index_entry(srq, i);
	srq->indexed = true;
	return err;
}

/* Entry h is leaving the list (already unlinked from it). */
void sh_tl_remove(struct sh_srq *srq, int32_t h)
{
	struct sh_tag *t = &srq->tags[h];
	struct sh_mask_group *g;
	struct sh_bucket *b;
	khiter_t it;

	if (!srq->indexed)
		return;
	if (!srq->list_len)
		srq->indexed = false; /* every bucket empties with this one */
	if (t->group < 0) {
		chain_remove(srq, &srq->over_head, &srq->over_tail, h);
		return;
	}
	g = &srq->groups[t->group];
	it = kh_get(sh_bkt, buckets(g), t->tag & t->mask);
	b = &kh_value(buckets(g), it);
	chain_remove(srq, &b->head, &b->tail, h);
	if (b->head < 0)
		kh_del(sh_bkt, buckets(g), it);
	g->entries--;
}

/* The first active entry of a chain that accepts tag, or -1. */
static int32_t chain_first(struct sh_srq *srq, int32_t h, uint64_t tag,
			   bool check_tag)
{
	for (; h >= 0; h = srq->tags[h].bnext) {
		struct sh_tag *t = &srq->tags[h];

		if (t->active && (!check_tag || !((t->tag ^ tag) & t->mask)))
			return h;
	}
	return -1;
}

static int32_t earlier(struct sh_srq *srq, int32_t a, int32_t b)
{
	if (a < 0)
		return b;
	if (b < 0)
		return a;
	return srq->tags[a].seq < srq->tags[b].seq ? a : b;
}

/* sh_tl_match of an indexed list (a short one is scanned inline) */
int32_t sh_tl_match_indexed(struct sh_srq *srq, uint64_t tag)
{
	int32_t best = chain_first(srq, srq->over_head, tag, true);

	for (int i = 0; i < SH_MASK_GROUPS; i++) {
		struct sh_mask_group *g = &srq->groups[i];
		khiter_t it;

		if (!g->entries)
			continue;
		it = kh_get(sh_bkt, buckets(g), tag & g->mask);
		if (it == kh_end(buckets(g)))
			continue;
		best = earlier(srq, best,
			       chain_first(srq, kh_value(buckets(g), it).head,
					   tag, false));
	}
	return best;
}
