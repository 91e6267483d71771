/*
 * test_match.c - unit tests of the software matching queues (tm_match.h):
 * post order across the four kinds of receive, wildcards, ANY_TAG never
 * taking a negative tag, removal, the counters, and the O(1) prefix check
 * (tm_mq_sw_conflict) against a brute-force one over random queues.
 */
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "tm_status.h"
#include "engine/tm_match.h"

#define NR 64
#define NM 64

static uint64_t rng_state = 88172645463325252ULL;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

struct rv {
	struct tm_mq_recv q;
	int posted;
	int held;
};

struct mg {
	struct tm_mq_msg q;
	int queued;
};

static struct tm_mq_recv *post(struct tm_mq *mq, struct rv *r, uint32_t ctx,
			       int32_t src, int32_t tag, uint64_t seq, int held)
{
	uint64_t t, m;

	tm_tag_recv(ctx, src, tag, &t, &m);
	if (tm_mq_post(mq, &r->q, t, m, seq, held) != TM_OK)
		tap_bail("tm_mq_post failed");
	r->posted = 1;
	r->held = held;
	return &r->q;
}

static void add_msg(struct tm_mq *mq, struct mg *m, uint32_t ctx,
		    uint32_t src, int32_t tag, uint64_t seq)
{
	if (tm_mq_msg_add(mq, &m->q, tm_tag_make(ctx, src, tag), seq) != TM_OK)
		tap_bail("tm_mq_msg_add failed");
	m->queued = 1;
}

static struct tm_mq_msg *find_msg(struct tm_mq *mq, uint32_t ctx,
				  int32_t src, int32_t tag)
{
	uint64_t t, m;

	tm_tag_recv(ctx, src, tag, &t, &m);
	return tm_mq_find_msg(mq, t, m);
}

static int conflict(struct tm_mq *mq, uint32_t ctx, int32_t src, int32_t tag)
{
	uint64_t t, m;

	tm_tag_recv(ctx, src, tag, &t, &m);
	return tm_mq_sw_conflict(mq, t, m);
}

static void test_post_order(void)
{
	struct tm_mq mq;
	struct rv r[6];
	uint64_t m12 = tm_tag_make(1, 1, 2);

	memset(r, 0, sizeof(r));
	tm_mq_init(&mq);
	post(&mq, &r[0], 1, 1, 2, 10, 0);
	post(&mq, &r[1], 1, 1, 2, 11, 0);
	post(&mq, &r[2], 1, TM_ANY_SRC, 2, 12, 0);
	tap_check(tm_mq_find_recv(&mq, m12) == &r[0].q,
		  "same envelope: the first posted takes the message");
	tm_mq_recv_remove(&mq, &r[0].q);
	tap_check(tm_mq_find_recv(&mq, m12) == &r[1].q,
		  "after removal the next in post order");
	tm_mq_recv_remove(&mq, &r[1].q);
	tap_check(tm_mq_find_recv(&mq, m12) == &r[2].q,
		  "then the later wildcard");
	/* receives of all four kinds in their buckets (a message the FIFO's
	 * first refuses indexes them): the earliest posted wins, whatever
	 * its kind (sequence numbers rise with post order: the contract) */
	post(&mq, &r[5], 1, TM_ANY_SRC, TM_ANY_TAG, 13, 0);
	post(&mq, &r[4], 1, 1, TM_ANY_TAG, 14, 0);
	post(&mq, &r[3], 1, 1, 2, 15, 0);
	tap_check(tm_mq_find_recv(&mq, tm_tag_make(1, 1, 3)) == &r[5].q &&
		  mq.nbucketed == 4,
		  "a message the FIFO's first refuses: the buckets answer");
	tap_check(tm_mq_find_recv(&mq, m12) == &r[2].q,
		  "the lowest sequence among all four kinds wins (ANY_SRC, 12)");
	tm_mq_recv_remove(&mq, &r[2].q);
	tap_check(tm_mq_find_recv(&mq, m12) == &r[5].q,
		  "... then ANY/ANY (13) before ANY_TAG (14) and exact (15)");
	tm_mq_recv_remove(&mq, &r[5].q);
	tap_check(tm_mq_find_recv(&mq, m12) == &r[4].q,
		  "... then ANY_TAG (14) before exact (15)");
	tap_check(tm_mq_find_recv(&mq, tm_tag_make(2, 1, 2)) == NULL,
		  "another context matches none of them");
	tap_check(tm_mq_find_recv(&mq, tm_tag_make(1, 3, 5)) == NULL,
		  "a message no receive accepts finds none");
	tap_check(mq.nrecvs == 2, "nrecvs counts posted receives (%lu)",
		  (unsigned long)mq.nrecvs);
	tm_mq_recv_remove(&mq, &r[3].q);
	tm_mq_recv_remove(&mq, &r[4].q);
	tap_check(mq.nrecvs == 0 && !tm_mq_find_recv(&mq, m12),
		  "all removed: empty");
	tm_mq_fini(&mq);
}

/* The lazy FIFO's first receive answers an arrival only while no
 * receive is in a bucket (those are older); else the buckets decide. */
static void test_lazy_head(void)
{
	uint64_t m5 = tm_tag_make(1, 1, 5), m7 = tm_tag_make(1, 1, 7);
	struct tm_mq mq;
	struct rv r[4];

	memset(r, 0, sizeof(r));
	tm_mq_init(&mq);
	post(&mq, &r[0], 1, 1, 5, 1, 0);
	post(&mq, &r[1], 1, 1, 7, 2, 0);
	tap_check(tm_mq_find_recv(&mq, m5) == &r[0].q && !mq.nbucketed,
		  "all lazy: the first receive takes its message, no bucket");
	tap_check(tm_mq_find_recv(&mq, m7) == &r[1].q,
		  "all lazy: a message the first refuses finds the later one");
	tm_mq_recv_remove(&mq, &r[0].q);
	tm_mq_recv_remove(&mq, &r[1].q);
	/* an older wildcard in a bucket, a younger exact one lazy */
	post(&mq, &r[2], 1, 1, TM_ANY_TAG, 3, 0);
	post(&mq, &r[3], 1, 9, 9, 4, 0);
	tap_check(tm_mq_find_recv(&mq, tm_tag_make(1, 9, 9)) == &r[3].q &&
		  mq.nbucketed == 2,
		  "an arrival the first refuses indexes the FIFO");
	post(&mq, &r[0], 1, 1, 5, 5, 0);
	tap_check(tm_mq_find_recv(&mq, m5) == &r[2].q,
		  "a bucketed earlier receive beats the FIFO's first that accepts");
	tm_mq_recv_remove(&mq, &r[0].q);
	tm_mq_recv_remove(&mq, &r[2].q);
	tm_mq_recv_remove(&mq, &r[3].q);
	tap_check(!mq.nrecvs && !mq.nbucketed, "all removed: nothing bucketed");
	tm_mq_fini(&mq);
}

static void test_negative_tags(void)
{
	struct tm_mq mq;
	struct rv r[3];
	struct mg m[2];

	memset(r, 0, sizeof(r));
	memset(m, 0, sizeof(m));
	tm_mq_init(&mq);
	post(&mq, &r[0], 1, 4, TM_ANY_TAG, 1, 0);
	post(&mq, &r[1], 1, TM_ANY_SRC, TM_ANY_TAG, 2, 0);
	tap_check(!tm_mq_find_recv(&mq, tm_tag_make(1, 4, -3)),
		  "ANY_TAG receives never take a negative tag");
	tap_check(tm_mq_find_recv(&mq, tm_tag_make(1, 4, 0x7fffffff)) ==
			  &r[0].q, "ANY_TAG takes the largest positive tag");
	post(&mq, &r[2], 1, TM_ANY_SRC, -3, 3, 0);
	tap_check(tm_mq_find_recv(&mq, tm_tag_make(1, 4, -3)) == &r[2].q,
		  "a negative tag is taken by its exact receive only");
	add_msg(&mq, &m[0], 1, 4, -3, 10);
	add_msg(&mq, &m[1], 1, 4, 6, 11);
	tap_check(find_msg(&mq, 1, 4, TM_ANY_TAG) == &m[1].q &&
			  find_msg(&mq, 1, TM_ANY_SRC, TM_ANY_TAG) == &m[1].q,
		  "an unexpected negative tag is invisible to ANY_TAG");
	tap_check(find_msg(&mq, 1, TM_ANY_SRC, -3) == &m[0].q,
		  "... and found by its own tag");
	tm_mq_msg_remove(&mq, &m[0].q);
	tm_mq_msg_remove(&mq, &m[1].q);
	for (int i = 0; i < 3; i++)
		tm_mq_recv_remove(&mq, &r[i].q);
	tap_check(mq.nmsgs == 0 && mq.nrecvs == 0, "counters back to 0");
	tm_mq_fini(&mq);
}

static void test_unexpected_order(void)
{
	struct tm_mq mq;
	struct mg m[4];

	memset(m, 0, sizeof(m));
	tm_mq_init(&mq);
	add_msg(&mq, &m[0], 1, 1, 1, 10);
	add_msg(&mq, &m[1], 1, 2, 1, 11);
	add_msg(&mq, &m[2], 1, 1, 2, 12);
	add_msg(&mq, &m[3], 2, 1, 1, 13);
	tap_check(mq.nmsgs == 4, "nmsgs counts queued messages");
	tap_check(find_msg(&mq, 1, TM_ANY_SRC, 1) == &m[0].q &&
			  find_msg(&mq, 1, 1, TM_ANY_TAG) == &m[0].q &&
			  find_msg(&mq, 1, TM_ANY_SRC, TM_ANY_TAG) == &m[0].q,
		  "every wildcard finds the earliest arrival first");
	tm_mq_msg_remove(&mq, &m[0].q);
	tap_check(find_msg(&mq, 1, TM_ANY_SRC, 1) == &m[1].q &&
			  find_msg(&mq, 1, 1, TM_ANY_TAG) == &m[2].q &&
			  find_msg(&mq, 1, TM_ANY_SRC, TM_ANY_TAG) == &m[1].q,
		  "after removal: the next acceptable one for each");
	tap_check(find_msg(&mq, 2, TM_ANY_SRC, TM_ANY_TAG) == &m[3].q &&
			  !find_msg(&mq, 3, TM_ANY_SRC, TM_ANY_TAG),
		  "contexts are separate");
	tap_check(!find_msg(&mq, 1, 2, 2), "no message for (src 2, tag 2)");
	tm_mq_msg_remove(&mq, &m[1].q);
	tm_mq_msg_remove(&mq, &m[2].q);
	tm_mq_msg_remove(&mq, &m[3].q);
	tm_mq_fini(&mq);
}

static void test_conflict_cases(void)
{
	struct tm_mq mq;
	struct rv r[3];

	memset(r, 0, sizeof(r));
	tm_mq_init(&mq);
	post(&mq, &r[0], 1, 1, 1, 1, 0);
	tap_check(!conflict(&mq, 1, 1, 1) && mq.nsw_held == 0,
		  "a card-held receive is no conflict");
	tm_mq_set_held(&mq, &r[0].q, 1);
	tap_check(mq.nsw_held == 1, "set_held counts it");
	tap_check(conflict(&mq, 1, 1, 1) && conflict(&mq, 1, TM_ANY_SRC, 1) &&
			  conflict(&mq, 1, 1, TM_ANY_TAG) &&
			  conflict(&mq, 1, TM_ANY_SRC, TM_ANY_TAG),
		  "held (1,1): same envelope and every covering wildcard conflict");
	tap_check(!conflict(&mq, 1, 2, 1) && !conflict(&mq, 1, 1, 2) &&
			  !conflict(&mq, 2, 1, 1) &&
			  !conflict(&mq, 1, 2, TM_ANY_TAG) &&
			  !conflict(&mq, 1, TM_ANY_SRC, 2),
		  "held (1,1): disjoint receives do not");
	post(&mq, &r[1], 1, TM_ANY_SRC, 5, 2, 1);
	tap_check(conflict(&mq, 1, 7, 5) && conflict(&mq, 1, 7, TM_ANY_TAG) &&
			  !conflict(&mq, 1, 7, 6),
		  "held (ANY_SRC,5): (7,5) and (7,ANY) conflict, (7,6) not");
	post(&mq, &r[2], 1, 9, TM_ANY_TAG, 3, 1);
	tap_check(conflict(&mq, 1, 9, 3) && conflict(&mq, 1, TM_ANY_SRC, 3) &&
			  !conflict(&mq, 1, 8, 3),
		  "held (9,ANY): (9,3) and (ANY,3) conflict, (8,3) not");
	tm_mq_recv_remove(&mq, &r[1].q);
	tm_mq_recv_remove(&mq, &r[2].q);
	tap_check(!conflict(&mq, 1, 7, 5) && !conflict(&mq, 1, 9, 3),
		  "removal takes a held receive out of the check");
	tm_mq_set_held(&mq, &r[0].q, 0);
	tap_check(!conflict(&mq, 1, 1, 1) && mq.nsw_held == 0,
		  "set_held(0): no conflict, count 0");
	tap_check(tm_mq_find_recv(&mq, tm_tag_make(1, 1, 1)) == &r[0].q,
		  "set_held keeps the receive posted");
	tm_mq_recv_remove(&mq, &r[0].q);
	tm_mq_fini(&mq);
}

/* Receives posted held lazily: mq->held_lazy in post order while held,
 * counted or not, so that its head is the oldest (the engine's small
 * list); counting takes the uncounted tail; set_held(0) takes one out. */
static void test_held_lazy(void)
{
	struct tm_mq mq;
	struct rv r[5];

	memset(r, 0, sizeof(r));
	tm_mq_init(&mq);
	post(&mq, &r[0], 1, 1, 10, 1, TM_MQ_HELD_LAZY);
	post(&mq, &r[1], 1, 1, 11, 2, TM_MQ_HELD_LAZY);
	post(&mq, &r[2], 1, 1, 12, 3, TM_MQ_CARD);
	tap_check(tm_mq_oldest_held_lazy(&mq) == &r[0].q && mq.nsw_held == 2,
		  "held lazily: the oldest is the first posted, both held");
	tap_check(conflict(&mq, 1, 1, 11) && r[0].q.sw_held && r[1].q.sw_held &&
			  !r[0].q.uncounted && !r[1].q.uncounted,
		  "the first conflict check counts both");
	post(&mq, &r[3], 1, 1, 13, 4, TM_MQ_HELD_LAZY);
	tap_check(r[3].q.uncounted && conflict(&mq, 1, 1, 13) &&
			  !r[3].q.uncounted && r[3].q.sw_held &&
			  mq.nsw_held == 3,
		  "one posted after the count is counted at the next check");
	tm_mq_set_held(&mq, &r[0].q, 0);
	tap_check(tm_mq_oldest_held_lazy(&mq) == &r[1].q &&
			  !conflict(&mq, 1, 1, 10) && mq.nsw_held == 2,
		  "set_held(0) on a counted one: off the list, no conflict");
	tm_mq_recv_remove(&mq, &r[1].q);
	tap_check(tm_mq_oldest_held_lazy(&mq) == &r[3].q && mq.nsw_held == 1,
		  "removal: the next oldest");
	post(&mq, &r[4], 1, 1, 14, 5, TM_MQ_HELD_LAZY);
	tm_mq_set_held(&mq, &r[4].q, 0);
	tap_check(tm_mq_oldest_held_lazy(&mq) == &r[3].q &&
			  mq.nsw_held == 1 && !conflict(&mq, 1, 1, 14),
		  "set_held(0) on an uncounted one: off the list, uncounted");
	tm_mq_recv_remove(&mq, &r[3].q);
	tap_check(!tm_mq_oldest_held_lazy(&mq) && mq.nsw_held == 0,
		  "none held lazily: no oldest, none held");
	for (int i = 0; i < 5; i++)
		if (i != 1 && i != 3)
			tm_mq_recv_remove(&mq, &r[i].q);
	tap_check(mq.nrecvs == 0, "all removed");
	tm_mq_fini(&mq);
}

/* ---- random queues against brute force --------------------------------- */

static void rand_env(uint32_t *ctx, int32_t *src, int32_t *tag, int wild)
{
	static const int32_t tags[] = { 0, 1, 2, -3 };

	*ctx = (uint32_t)(rng() % 2);
	*src = wild && rng() % 3 == 0 ? TM_ANY_SRC : (int32_t)(rng() % 3);
	*tag = wild && rng() % 3 == 0 ? TM_ANY_TAG : tags[rng() % 4];
}

static int overlap(uint64_t t1, uint64_t m1, uint64_t t2, uint64_t m2)
{
	return ((t1 ^ t2) & m1 & m2) == 0;
}

/* Does tm_mq_count_ctx miss or add anything of context ctx? */
static int ctx_count_wrong(struct tm_mq *mq, const struct rv *r,
			   const struct mg *m, uint32_t ctx)
{
	uint64_t nr = 0, nm = 0, gr, gm;
	int k;

	for (k = 0; k < NR; k++)
		nr += r[k].posted && tm_tag_ctx(r[k].q.tag) == ctx;
	for (k = 0; k < NM; k++)
		nm += m[k].queued && tm_tag_ctx(m[k].q.tag) == ctx;
	tm_mq_count_ctx(mq, ctx, &gr, &gm);
	return gr != nr || gm != nm;
}

static void test_random(void)
{
	static struct rv r[NR];
	static struct mg m[NM];
	struct tm_mq mq;
	uint64_t seq = 1, t, k;
	int step, i, bad_recv = 0, bad_msg = 0, bad_cf = 0, bad_cnt = 0;
	int bad_ctx = 0;
	uint32_t ctx;
	int32_t src, tag;

	memset(r, 0, sizeof(r));
	memset(m, 0, sizeof(m));
	tm_mq_init(&mq);
	for (step = 0; step < 200000; step++) {
		int x = (int)(rng() % 8);
		uint64_t nr = 0, nm = 0, nh = 0;

		i = (int)(rng() % NR);
		rand_env(&ctx, &src, &tag, x < 6);
		switch (x) {
		case 0: case 1: /* post or remove a receive */
			if (r[i].posted) {
				tm_mq_recv_remove(&mq, &r[i].q);
				r[i].posted = 0;
			} else {
				post(&mq, &r[i], ctx, src, tag, seq++,
				     (int)(rng() % 2));
			}
			break;
		case 2: /* flip held */
			if (r[i].posted) {
				r[i].held = !r[i].held;
				tm_mq_set_held(&mq, &r[i].q, r[i].held);
			}
			break;
		case 3: { /* the earliest message a receive accepts */
			struct tm_mq_msg *got, *want = NULL;
			uint64_t mk;

			tm_tag_recv(ctx, src, tag, &t, &mk);
			got = tm_mq_find_msg(&mq, t, mk);
			for (k = 0; k < NM; k++)
				if (m[k].queued &&
				    tm_tag_accepts(t, mk, m[k].q.tag) &&
				    (!want || m[k].q.seq < want->seq))
					want = &m[k].q;
			bad_msg += got != want;
			break;
		}
		case 4: { /* the prefix check */
			uint64_t mk;
			int want = 0, negtag = 0, got;

			tm_tag_recv(ctx, src, tag, &t, &mk);
			for (k = 0; k < NR; k++)
				if (r[k].posted && r[k].held &&
				    overlap(t, mk, r[k].q.tag, r[k].q.mask)) {
					want = 1;
				}
			for (k = 0; k < NR; k++)
				if (r[k].posted && r[k].held &&
				    (tm_tag_user(r[k].q.tag) < 0 ||
				     (tag != TM_ANY_TAG && tag < 0)))
					negtag = 1;
			got = tm_mq_sw_conflict(&mq, t, mk);
			/* conservative only where negative tags are around */
			bad_cf += want ? !got : (got && !negtag);
			break;
		}
		default: { /* an arrival: match a receive, else queue it */
			struct tm_mq_recv *got, *want = NULL;
			uint64_t mt;

			rand_env(&ctx, &src, &tag, 0);
			mt = tm_tag_make(ctx, (uint32_t)src, tag);
			got = tm_mq_find_recv(&mq, mt);
			for (k = 0; k < NR; k++)
				if (r[k].posted &&
				    tm_tag_accepts(r[k].q.tag, r[k].q.mask, mt) &&
				    (!want || r[k].q.seq < want->seq))
					want = &r[k].q;
			bad_recv += got != want;
			if (got) {
				struct rv *h = (struct rv *)got;

				tm_mq_recv_remove(&mq, got);
				h->posted = 0;
			} else {
				i = (int)(rng() % NM);
				if (m[i].queued)
					tm_mq_msg_remove(&mq, &m[i].q);
				add_msg(&mq, &m[i], ctx, (uint32_t)src, tag,
					seq++);
			}
			break;
		}
		}
		for (k = 0; k < NR; k++) {
			nr += r[k].posted;
			nh += r[k].posted && r[k].held;
		}
		for (k = 0; k < NM; k++)
			nm += m[k].queued;
		bad_cnt += nr != mq.nrecvs || nm != mq.nmsgs ||
			   nh != mq.nsw_held;
		if (step % 16 == 0)
			bad_ctx += ctx_count_wrong(&mq, r, m, ctx);
	}
	tap_check(!bad_recv, "random: arrivals take the earliest accepting receive (%d wrong)",
		  bad_recv);
	tap_check(!bad_msg, "random: receives take the earliest accepting message (%d wrong)",
		  bad_msg);
	tap_check(!bad_cf, "random: the O(1) prefix check agrees with brute force (%d wrong)",
		  bad_cf);
	tap_check(!bad_cnt, "random: nrecvs, nmsgs, nsw_held right (%d wrong)",
		  bad_cnt);
	tap_check(!bad_ctx, "random: tm_mq_count_ctx agrees with brute force (%d wrong)",
		  bad_ctx);
	for (k = 0; k < NR; k++)
		if (r[k].posted)
			tm_mq_recv_remove(&mq, &r[k].q);
	for (k = 0; k < NM; k++)
		if (m[k].queued)
			tm_mq_msg_remove(&mq, &m[k].q);
	tm_mq_fini(&mq);
}

/*
 * The sweep frees empty buckets while one of them is the last looked up
 * (the one-entry cache per kind): posting that key again must not use the
 * freed bucket, which the next new keys take from the free list.
 */
#define NSWEEP 3000
static void test_sweep_cache(void)
{
	static struct rv r[NSWEEP];
	struct tm_mq mq;
	struct rv keep, other;
	uint64_t t, m;
	int i, lost = 0;

	if (tm_mq_init(&mq) != TM_OK)
		tap_bail("tm_mq_init failed");
	/* distinct keys come and go until the removal of key 7 sweeps
	 * (nempty starts again from 0): its bucket is the one cached.  A
	 * lookup indexes the lazily posted receive (a bucket per key), as
	 * it is not the only one posted (the only one is never indexed:
	 * "other", of another context, stays posted meanwhile). */
	post(&mq, &other, 2, 1, 1, 0, 0);
	for (i = 0; i < 5000; i++) {
		post(&mq, &r[0], 1, 1, i < 1024 ? 10000 + i : 7, (uint64_t)i,
		     0);
		(void)tm_mq_find_recv(&mq, 0);
		tm_mq_recv_remove(&mq, &r[0].q);
		if (!mq.nempty)
			break;
	}
	tap_check(i >= 1024 && i < 5000,
		  "removals sweep once empties outnumber entries by 1024 "
		  "(at removal %d)", i + 1);
	tm_mq_recv_remove(&mq, &other.q);
	/* the same key again, then enough new keys to use every free
	 * bucket */
	post(&mq, &keep, 1, 1, 7, 6000, 0);
	for (i = 0; i < NSWEEP; i++)
		post(&mq, &r[i], 1, 1, 20000 + i, 7000 + (uint64_t)i, 0);
	(void)tm_mq_find_recv(&mq, 0); /* indexes key 7 first, then the rest */
	tm_tag_recv(1, 1, 7, &t, &m);
	for (i = 0; i < NSWEEP; i++)
		lost += tm_mq_find_recv(&mq, tm_tag_make(1, 1, 20000 + i)) !=
			&r[i].q;
	tap_check(tm_mq_find_recv(&mq, t) == &keep.q && !lost &&
		  mq.nrecvs == NSWEEP + 1,
		  "a key cached across a sweep, then %d new keys: every "
		  "receive still found (%d lost)", NSWEEP, lost);
	for (i = 0; i < NSWEEP; i++)
		tm_mq_recv_remove(&mq, &r[i].q);
	tm_mq_recv_remove(&mq, &keep.q);
	tm_mq_fini(&mq);
}

int main(void)
{
	test_post_order();
	test_lazy_head();
	test_negative_tags();
	test_unexpected_order();
	test_conflict_cases();
	test_held_lazy();
	test_random();
	test_sweep_cache();
	return tap_done();
}
