/*
 * engine_match.c - cost of one software match in the engine's queues
 * (tm_match.h) against posted-queue and unexpected-queue depth 0..8192.
 * Not a test: prints a table.
 *
 * posted:     D receives wait (distinct tags, a quarter of them wildcards
 *             of another context); one match = post a receive + an arrival
 *             that finds and removes it.
 * unexpected: D messages wait (distinct tags); one match = an arrival
 *             queued + a receive that finds and removes it.
 * same-key:   D receives wait with the very tag the arrival has; the
 *             arrival takes the oldest (head), then a new one is posted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "engine/tm_match.h"

#define ITERS 200000

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static uint64_t seq;

static void fill_posted(struct tm_mq *mq, struct tm_mq_recv *r, int depth)
{
	uint64_t tag, mask;
	int i;

	for (i = 0; i < depth; i++) {
		if (i % 4 == 3)
			tm_tag_recv(2, TM_ANY_SRC, i, &tag, &mask);
		else
			tm_tag_recv(1, (uint32_t)i % 64, 100000 + i, &tag, &mask);
		tm_mq_post(mq, &r[i], tag, mask, seq++, i % 8 == 0);
	}
}

static double bench_posted(int depth)
{
	struct tm_mq mq;
	struct tm_mq_recv *r = calloc((size_t)depth + 1, sizeof(*r));
	struct tm_mq_recv x, *f;
	uint64_t tag, mask, mtag = tm_tag_make(1, 3, 7);
	double t0, t1;
	int i;

	tm_mq_init(&mq);
	fill_posted(&mq, r, depth);
	tm_tag_recv(1, 3, 7, &tag, &mask);
	t0 = now_ns();
	for (i = 0; i < ITERS; i++) {
		tm_mq_post(&mq, &x, tag, mask, seq++, 0);
		f = tm_mq_find_recv(&mq, mtag);
		if (f != &x)
			abort();
		tm_mq_recv_remove(&mq, f);
	}
	t1 = now_ns();
	tm_mq_fini(&mq);
	free(r);
	return (t1 - t0) / ITERS;
}

static double bench_unexpected(int depth)
{
	struct tm_mq mq;
	struct tm_mq_msg *m = calloc((size_t)depth + 1, sizeof(*m));
	struct tm_mq_msg x, *f;
	uint64_t tag, mask;
	double t0, t1;
	int i;

	tm_mq_init(&mq);
	for (i = 0; i < depth; i++)
		tm_mq_msg_add(&mq, &m[i], tm_tag_make(1, (uint32_t)i % 64,
						       100000 + i), seq++);
	tm_tag_recv(1, TM_ANY_SRC, 7, &tag, &mask);
	t0 = now_ns();
	for (i = 0; i < ITERS; i++) {
		tm_mq_msg_add(&mq, &x, tm_tag_make(1, 3, 7), seq++);
		f = tm_mq_find_msg(&mq, tag, mask);
		if (f != &x)
			abort();
		tm_mq_msg_remove(&mq, f);
	}
	t1 = now_ns();
	tm_mq_fini(&mq);
	free(m);
	return (t1 - t0) / ITERS;
}

static double bench_same_key(int depth)
{
	struct tm_mq mq;
	struct tm_mq_recv *r = calloc((size_t)depth + 1, sizeof(*r));
	struct tm_mq_recv *f;
	uint64_t tag, mask, mtag = tm_tag_make(1, 3, 7);
	double t0, t1;
	int i;

	tm_mq_init(&mq);
	tm_tag_recv(1, 3, 7, &tag, &mask);
	for (i = 0; i <= depth; i++)
		tm_mq_post(&mq, &r[i], tag, mask, seq++, 0);
	t0 = now_ns();
	for (i = 0; i < ITERS; i++) {
		f = tm_mq_find_recv(&mq, mtag);
		tm_mq_recv_remove(&mq, f);
		tm_mq_post(&mq, f, tag, mask, seq++, 0);
	}
	t1 = now_ns();
	tm_mq_fini(&mq);
	free(r);
	return (t1 - t0) / ITERS;
}

static double min3(double a, double b, double c)
{
	double m = a < b ? a : b;

	return m < c ? m : c;
}

int main(void)
{
	static const int depths[] = { 0, 1, 8, 64, 512, 1024, 2048, 4096,
				      8192 };
	double p0 = 0, u0 = 0, p, u, s;
	size_t i;

	printf("# engine match cost (ns per match), %d iterations each\n",
	       ITERS);
	printf("%6s %12s %12s %12s\n", "depth", "posted", "unexpected",
	       "same-key");
	for (i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
		/* best of 3: the machine is shared */
		p = min3(bench_posted(depths[i]), bench_posted(depths[i]),
			 bench_posted(depths[i]));
		u = min3(bench_unexpected(depths[i]),
			 bench_unexpected(depths[i]),
			 bench_unexpected(depths[i]));
		s = min3(bench_same_key(depths[i]), bench_same_key(depths[i]),
			 bench_same_key(depths[i]));
		if (i == 0) {
			p0 = p;
			u0 = u;
		}
		printf("%6d %12.1f %12.1f %12.1f\n", depths[i], p, u, s);
		if (depths[i] == 4096)
			printf("# depth 4096 / depth 0: posted %.2fx, unexpected %.2fx (goal <= 2x)\n",
			       p / p0, u / u0);
	}
	return 0;
}
