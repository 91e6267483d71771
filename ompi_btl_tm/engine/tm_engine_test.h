/*
 * tm_engine_test.h - hooks for tests and benchmarks only; production
 * callers leave tm_engine_config.test NULL.
 *
 * Contract: the engine copies *cfg->test at tm_engine_create().  Faults
 * break one rule on purpose, so that a test can show it notices; the
 * arrival hook reports each message at its linearisation point (the
 * stamp contract is in tm_engine.h); the fault hook makes one allocation
 * or verbs post fail, to show that the engine never loses work to it
 * (doc/DESIGN.md, "Failures").
 */
#ifndef TM_ENGINE_TEST_H
#define TM_ENGINE_TEST_H

#include "engine/tm_engine.h"
#include "engine/tm_wire.h"

enum tm_fault {
	TM_FAULT_PREFIX = 1 << 0,     /* ignore the prefix rule (at post;
				       * promotion takes the latest first) */
	TM_FAULT_SYNC_AHEAD = 1 << 1, /* report one more unexpected than seen */
	TM_FAULT_SYNC_ORDER = 1 << 2, /* queued ops carry the count at post */
};

/* What arrival_hook reports: one message taking effect at the receiver. */
struct tm_arrival {
	struct tm_env env;
	uint32_t peer;
	uint32_t send_seq;
	uint64_t len;
	uint64_t stamp;
	int on_card;   /* matched by the card */
};

/* Where the fault hook is asked (after tm_engine_create returned). */
enum tm_site {
	TM_SITE_ALLOC_MSG = 1,  /* an unexpected message's copy */
	TM_SITE_ALLOC_TX,       /* a queued send item: + its TX type, below */
	TM_SITE_ALLOC_TX_EAGER = TM_SITE_ALLOC_TX,
	TM_SITE_ALLOC_TX_RNDV,
	TM_SITE_ALLOC_TX_ACK,
	TM_SITE_ALLOC_TX_FIN,
	TM_SITE_ALLOC_TX_READ,
	TM_SITE_ALLOC_TX_KEEPALIVE,
	TM_SITE_POST_SEND,      /* ibv_post_send */
	TM_SITE_POST_OPS,       /* ibv_post_srq_ops */
	TM_SITE_POST_PLAIN,     /* ibv_post_srq_recv */
};

/* A CANCEL_REQ decided at the receiver (tm_cancel.c), at its stamp: the
 * send was withdrawn from the unexpected queue, or had been matched. */
struct tm_withdrawal {
	uint32_t peer;
	uint32_t send_seq;
	int withdrawn;
	uint64_t stamp;
};

struct tm_engine_test {
	unsigned faults;         /* enum tm_fault */
	void (*arrival_hook)(void *arg, const struct tm_arrival *a);
	void (*cancel_hook)(void *arg, const struct tm_withdrawal *w);
	/* 0, or the errno that the call at site returns instead of running
	 * (for an allocation: it returns NULL) */
	int (*fault)(void *arg, enum tm_site site);
	void *hook_arg;
};

#endif /* TM_ENGINE_TEST_H */
