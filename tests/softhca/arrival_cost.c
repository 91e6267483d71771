/*
 * arrival_cost.c - what one arrival costs the soft HCA as the number of
 * connected QPs grows: P QP pairs between two contexts of this process,
 * then messages sent round-robin over the pairs, each taken by the
 * receiver's next poll.  Not a test (never timed, never in TESTS): run
 * by bench/arrival.sh under callgrind, which counts arrivals() with N and
 * with 2N messages, so that set-up cancels.
 *
 *   arrival_cost PAIRS N
 *
 * One message: an 8 B NO_TAG send on a, the poll on b that takes it, the
 * poll of its send completion on a and a plain buffer posted again on b.
 * Exits non-zero when a poll does not take its message at once.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "sh_util.h"

static struct sh_env env;
static size_t mark_a;
static void *bufs[8];   /* posted in turn: taken in turn */

/* (not inlined, not cloned: callgrind counts it by name) */
__attribute__((noinline, noclone)) int arrivals(int n);
__attribute__((noinline, noclone)) int arrivals(int n)
{
	int late = 0;

	for (int k = 0; k < n; k++) {
		int pair = k % env.npairs;
		uint32_t v = (uint32_t)k;
		struct sh_wc wc;

		sh_mem_reset(&env.a, mark_a);
		if (sh_send_tm(&env, pair, IBV_TMH_NO_TAG, 0, 0, &v,
			       sizeof(v), (uint64_t)k))
			sh_die("send %d", k);
		late += sh_poll(env.b.cq, &wc) != 1 ||
			wc.status != IBV_WC_SUCCESS;
		while (sh_poll(env.p[pair].scq, &wc) != 1)
			late++;
		if (sh_post_plain(&env.b, 100, bufs[k % 8], 64))
			sh_die("plain %d", k);
	}
	return late;
}

int main(int argc, char **argv)
{
	struct softhca_config cfg;
	int pairs, n, late;

	if (argc != 3 || (pairs = atoi(argv[1])) < 1 ||
	    pairs > SH_MAX_PAIRS || (n = atoi(argv[2])) < 1) {
		fprintf(stderr, "usage: arrival_cost PAIRS(1-%d) N\n",
			SH_MAX_PAIRS);
		return 2;
	}
	unsetenv("SOFTHCA_SINGLE_THREADED");
	sh_config(&cfg);
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_AUTO, pairs))
		sh_die("sh_env_open");
	mark_a = sh_mem_mark(&env.a);
	for (int i = 0; i < 8; i++)
		if (!(bufs[i] = sh_alloc(&env.b, 64)) ||
		    sh_post_plain(&env.b, 100, bufs[i], 64))
			sh_die("plain");
	/* (the first polls run the cards, which then have nothing left) */
	for (int i = 0; i < 4; i++)
		sh_cq_discard(env.b.cq);
	late = arrivals(n);
	late += arrivals(2 * n); /* (n a multiple of 8: same buffers) */
	sh_env_close(&env);
	if (late) {
		fprintf(stderr, "arrival_cost: %d polls found nothing\n",
			late);
		return 1;
	}
	return 0;
}
