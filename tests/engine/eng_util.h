/*
 * eng_util.h - shared set-up for the engine tests: N soft-HCA nodes (one
 * context, TM-SRQ and engine each), fully connected by RC QPs, with a
 * registered arena per node; pumping and stepping helpers.
 */
#ifndef ENG_UTIL_H
#define ENG_UTIL_H

#include <stdint.h>
#include "dev/tm_dev.h"
#include "engine/tm_engine.h"
#include "softhca/softhca.h"

#define EU_MAXN 8

struct eu_node {
	struct tm_dev *dev;
	struct tm_engine *eng;
	struct tm_dev_pair qp[EU_MAXN];
	uint32_t peer[EU_MAXN];   /* engine peer id of node j */
	uint8_t *arena;
	size_t arena_len;
	struct ibv_mr *mr;
};

struct eu_world {
	int n;
	struct eu_node node[EU_MAXN];
};

/* Limits 0 = soft HCA default.  sched applies to every context. */
struct eu_opts {
	uint32_t max_num_tags;
	uint32_t max_ops;
	uint32_t mtu;
	uint32_t max_msg_sz;  /* the port's: longest read at once */
	uint32_t max_mr;
	enum softhca_sched sched;
	uint64_t seed;
	size_t arena_len;
	int no_tm;            /* the soft HCA offers no tag matching: every
			       * device opens in the plain mode (tm_dev.h) */
	int rxe_cq;           /* the soft HCA's CQ as rdma-core's old rxe
			       * (softhca.h) */
	uint32_t cq_poll_max; /* nonzero: overrides what tm_dev_open() set
			       * (a device the dev layer misjudged) */
	struct tm_engine_config ecfg;
};

/* Requests that count their completions (a test checks exactly once). */
struct eu_recv {
	struct tm_recv r;
	int done;
};

struct eu_send {
	struct tm_send s;
	int done;
};

void eu_recv_cb(struct tm_recv *r);
void eu_send_cb(struct tm_send *s);

void eu_opts_default(struct eu_opts *o);
int eu_world_init(struct eu_world *w, int n, const struct eu_opts *o);
void eu_world_fini(struct eu_world *w);

/*
 * Test data: byte i of a buffer filled with seed is seed + 7i + i/64Ki
 * (the last term so that a piece of a long transfer landing 64 KiB off
 * does not match); eu_check says whether p holds it.
 */
void eu_fill(uint8_t *p, size_t n, uint8_t seed);
int eu_check(const uint8_t *p, size_t n, uint8_t seed);
/* A snapshot of an engine's statistics (of node i's). */
struct tm_engine_stats eu_stats(struct tm_engine *eng);
struct tm_engine_stats eu_node_stats(struct eu_world *w, int i);

/* Runs card work and engine progress everywhere until nothing moves. */
void eu_pump(struct eu_world *w);
/* Engine progress only (no card work), every node. */
void eu_progress(struct eu_world *w);
/* All engines idle (every send slot back) and every card drained. */
int eu_quiet(struct eu_world *w);

#endif
