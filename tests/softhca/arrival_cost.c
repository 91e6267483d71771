/*
 * arrival_cost.c - what one arrival costs the soft HCA as the number of
 * connected QPs grows: P QP pairs between two contexts of this process,
 * then messages sent round-robin over the pairs, each taken by the
 * receiver's next poll.  Not a test (never timed, never in TESTS): run
 * by bench/arrival.sh under callgrind, which counts arrivals() (the
 * whole cycle) or take() (the arrival alone) with N and with 2N messages,
 * so that set-up cancels.
 *
 *   arrival_cost PAIRS N [KIND]
 *
 * One message: an 8 B send on a, the poll on b that takes it (take()),
 * the poll of its send completion on a and the receive side's buffer given
 * back on b.  KIND says which arrival (issue 26 item 5 compares them):
 *   notag  (default) a NO_TAG message into a plain buffer of the TM-SRQ,
 *          the plain buffer posted again;
 *   unexp  a tagged EAGER message no entry accepts: unexpected at the
 *          card, into a plain buffer (a receive kept in software), the
 *          plain buffer posted again;
 *   card   a tagged EAGER message matched by the card: the ADD posted
 *          before the send (every 64th signalled, its completion taken
 *          before the send, outside take()), the tagged buffer reused.
 * Exits non-zero when a poll does not take its message at once, or takes
 * it with another shape than KIND's.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sh_util.h"

static struct sh_env env;
static size_t mark_a;
static void *bufs[8];   /* posted in turn: taken in turn */
static enum { K_NOTAG, K_UNEXP, K_CARD } kind;

/* The poll on b that takes the arrival (not inlined, not cloned:
 * callgrind counts it by name). */
__attribute__((noinline, noclone)) int take(struct sh_wc *wc);
__attribute__((noinline, noclone)) int take(struct sh_wc *wc)
{
	return sh_poll(env.b.cq, wc);
}

/* Did take() find message k in the shape its kind gives? */
static int wrong(int k, const struct sh_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS)
		return 1;
	switch (kind) {
	case K_NOTAG:
		return wc->opcode != IBV_WC_TM_NO_TAG || wc->wr_id != 100;
	case K_UNEXP:
		return wc->opcode != IBV_WC_TM_RECV || wc->wr_id != 100 ||
		       (wc->wc_flags & IBV_WC_TM_MATCH);
	case K_CARD:
		return wc->opcode != IBV_WC_TM_RECV ||
		       wc->wr_id != 200 + (uint64_t)k ||
		       (wc->wc_flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)) !=
			       (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID) ||
		       wc->byte_len != sizeof(uint32_t);
	}
	return 1;
}

/* (not inlined, not cloned: callgrind counts it by name) */
__attribute__((noinline, noclone)) int arrivals(int n);
__attribute__((noinline, noclone)) int arrivals(int n)
{
	int late = 0;

	for (int k = 0; k < n; k++) {
		int pair = k % env.npairs;
		uint32_t v = (uint32_t)k;
		struct sh_wc wc;

		if (kind == K_CARD) {
			/* every 64th signalled, as the engine does: the
			 * command queue's slots come back */
			if (sh_add(&env.b, 1, 200 + (uint64_t)k, bufs[k % 8],
				   64, 7, ~0ull, 0,
				   k % 64 ? 0 : IBV_OPS_SIGNALED, NULL))
				sh_die("add %d", k);
			if (!(k % 64) &&
			    (sh_poll(env.b.cq, &wc) != 1 ||
			     wc.opcode != IBV_WC_TM_ADD))
				sh_die("add %d: no completion", k);
		}
		sh_mem_reset(&env.a, mark_a);
		if (sh_send_tm(&env, pair, kind == K_NOTAG ? IBV_TMH_NO_TAG
							   : IBV_TMH_EAGER,
			       7, 0, &v, sizeof(v), (uint64_t)k))
			sh_die("send %d", k);
		late += take(&wc) != 1 || wrong(k, &wc);
		while (sh_poll(env.p[pair].scq, &wc) != 1)
			late++;
		if (kind != K_CARD &&
		    sh_post_plain(&env.b, 100, bufs[k % 8], 64))
			sh_die("plain %d", k);
	}
	return late;
}

int main(int argc, char **argv)
{
	struct softhca_config cfg;
	int pairs, n, late;

	if (argc < 3 || argc > 4 || (pairs = atoi(argv[1])) < 1 ||
	    pairs > SH_MAX_PAIRS || (n = atoi(argv[2])) < 1 ||
	    (argc == 4 && strcmp(argv[3], "notag") &&
	     strcmp(argv[3], "unexp") && strcmp(argv[3], "card"))) {
		fprintf(stderr, "usage: arrival_cost PAIRS(1-%d) N "
			"[notag|unexp|card]\n", SH_MAX_PAIRS);
		return 2;
	}
	if (argc == 4)
		kind = !strcmp(argv[3], "card") ? K_CARD :
		       !strcmp(argv[3], "unexp") ? K_UNEXP : K_NOTAG;
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
