/*
 * engine_pingpong.c - the cost of one message through engine + soft HCA,
 * without MPI and without a second process.
 *
 * Two nodes (two soft HCA contexts with an engine each) in one process
 * ping-pong a message of each size: node 0 posts a receive, node 1 sends,
 * both progress until both requests completed, then the other way.  The
 * receive is posted before the send, so the card matches it (the expected
 * path).  Printed: nanoseconds per one-way message.  Run it under
 * `valgrind --tool=callgrind` for instruction counts that do not depend on
 * the machine's noise: the count per message is total / (2 * iters).
 *
 *   bench/engine_pingpong [-n ITERS] [-s SIZE,...] [-S] [-N] [-d DEPTH]
 *
 * -S: no receive goes to the card (the engine's offload switch off), so
 * every message arrives unexpected at the card and is matched in software:
 * the cost of the path UCX takes below its TM threshold.  -N: a device
 * without tag matching (the soft HCA's no_tm; tm_dev.h, "Provider and
 * mode"): a plain SRQ, every message matched in software, the path of
 * RDMA devices without tag matching.  -d D: D receives
 * that never match stay posted on each node (see park()).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tests/engine/eng_util.h"

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* One message from node `from` to node `to`; returns 0 on success. */
static int one_way(struct eu_world *w, int from, int to, uint8_t *sbuf,
		   uint8_t *rbuf, size_t len)
{
	struct eu_node *a = &w->node[from], *b = &w->node[to];
	/* naming its sender's peer, as the MTL posts a receive with a
	 * source (the peer watch is part of the path) */
	struct eu_recv fr = {
		.r = { .cb = eu_recv_cb, .buf = rbuf, .len = len,
		       .from = b->peer[from] },
	};
	struct eu_send fs = {
		.s = { .cb = eu_send_cb, .buf = sbuf, .len = len,
		       .tag = tm_tag_make(1, (uint32_t)from, 7),
		       .peer = a->peer[to] },
	};
	int rc;

	/* the narrow entries, as the MTL calls them: the envelope packed
	 * into the request, a send done at post told by TM_DONE */
	tm_tag_recv(1, from, 7, &fr.r.tag, &fr.r.mask);
	if (tm_engine_post_recv(b->eng, &fr.r))
		return -1;
	rc = tm_engine_post_send(a->eng, &fs.s);
	if (rc < 0)
		return -1;
	if (rc == TM_DONE)
		fs.done = 1;
	while (!fr.done || !fs.done) {
		tm_engine_progress(b->eng);
		tm_engine_progress(a->eng);
	}
	return fr.r.status == TM_REQ_OK ? 0 : -1;
}

/*
 * -d D: each node keeps D receives posted from its peer with a tag nobody
 * sends (the depth benchmark's "posted" kind); past the card's list size
 * they and the ping-pong receives wait in software.
 */
static struct eu_recv *park(struct eu_world *w, long depth)
{
	static uint8_t never[8];
	struct eu_recv *p = calloc((size_t)(2 * depth + 1), sizeof(*p));

	for (long i = 0; p && i < 2 * depth; i++) {
		int n = (int)(i & 1);

		p[i].r.cb = eu_recv_cb;
		if (tm_engine_irecv(w->node[n].eng, &p[i].r, 1, !n, 99, never,
				    sizeof(never), NULL)) {
			free(p);
			return NULL;
		}
	}
	return p;
}

static int run_size(struct eu_world *w, size_t len, long iters)
{
	uint8_t *s = calloc(1, len + 1), *r = calloc(1, len + 1);
	double t0, t1;
	long i;

	if (!s || !r)
		return -1;
	for (i = 0; i < 100; i++) /* warm up: caches, khash buckets */
		if (one_way(w, 0, 1, s, r, len) || one_way(w, 1, 0, s, r, len))
			return -1;
	t0 = now_ns();
	for (i = 0; i < iters; i++)
		if (one_way(w, 0, 1, s, r, len) || one_way(w, 1, 0, s, r, len))
			return -1;
	t1 = now_ns();
	printf("bench=engine_pingpong size=%zu ns_per_msg=%.1f iters=%ld\n",
	       len, (t1 - t0) / (2.0 * iters), iters);
	free(s);
	free(r);
	return 0;
}

int main(int argc, char **argv)
{
	const char *sizes = "8,1024,65536";
	struct eu_world w;
	struct eu_opts o;
	long iters = 20000;
	char *list, *tok;
	int c, sw = 0, notm = 0, card = 0;
	long depth = 0;

	while ((c = getopt(argc, argv, "n:s:SNCd:")) != -1) {
		if (c == 'n')
			iters = atol(optarg);
		else if (c == 's')
			sizes = optarg;
		else if (c == 'S')
			sw = 1;
		else if (c == 'N')
			notm = 1;
		else if (c == 'C')
			card = 1;
		else if (c == 'd')
			depth = atol(optarg);
		else {
			fprintf(stderr,
				"usage: %s [-n ITERS] [-s SIZE,...] [-S] [-N] [-C] [-d DEPTH]\n",
				argv[0]);
			return 2;
		}
	}
	eu_opts_default(&o);
	/* the engine's settings, as MPI runs it (eu_opts_default keeps every
	 * receive on the card for the tests); -C: the card path, -S: offload
	 * off */
	tm_engine_config_default(&o.ecfg);
	if (card)
		o.ecfg.offload_thresh = 0;
	o.ecfg.offload = !sw;
	o.no_tm = notm;
	o.sched = SOFTHCA_SCHED_AUTO;
	if (eu_world_init(&w, 2, &o)) {
		fprintf(stderr, "engine_pingpong: set-up failed\n");
		return 1;
	}
	if (depth > 0 && !park(&w, depth)) {
		fprintf(stderr, "engine_pingpong: cannot post %ld receives\n",
			depth);
		return 1;
	}
	list = strdup(sizes);
	for (tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
		if (run_size(&w, strtoul(tok, NULL, 0), iters)) {
			fprintf(stderr, "engine_pingpong: size %s failed\n",
				tok);
			return 1;
		}
	free(list);
	for (c = 0; c < 2; c++) {
		struct tm_engine_stats st;

		tm_engine_get_stats(w.node[c].eng, &st);
		printf("# node %d: receives %llu, to the card %llu, matched by "
		       "the card %llu, unexpected %llu, list ops %llu\n", c,
		       (unsigned long long)st.recv_posted,
		       (unsigned long long)st.recv_to_card,
		       (unsigned long long)st.card_matched,
		       (unsigned long long)st.unexpected,
		       (unsigned long long)st.ops_posted);
	}
	eu_world_fini(&w);
	return 0;
}
