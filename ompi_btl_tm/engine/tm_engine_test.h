/*
 * tm_engine_test.h - hooks for tests and benchmarks only; production
 * callers leave tm_engine_config.test NULL.
 *
 * Contract: the engine copies *cfg->test at tm_engine_create().  Faults
 * break one rule on purpose, so that a test can show it notices; the
 * arrival hook reports each message at its linearisation point (the
 * stamp contract is in tm_engine.h).
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

struct tm_engine_test {
	unsigned faults;         /* enum tm_fault */
	void (*arrival_hook)(void *arg, const struct tm_arrival *a);
	void *hook_arg;
};

#endif /* TM_ENGINE_TEST_H */
