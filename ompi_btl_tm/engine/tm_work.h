/*
 * tm_work.h - the deferred work every entry point moves on: queued list
 * ops, promotions, the unexpected count, owed replies, queued sends.
 * Protocol (tm_proto.h), above tm_offload and tm_reply.
 *
 * Contract: every public entry point ends with tme_call_end(): queued
 * work moves on (in the order below: an ADD posted by promotion carries
 * the count, so the SYNC comes after it), then callbacks run, never from
 * inside CQ polling.  TM_PEND_WORK is cleared only here, after looking at
 * what is really queued.
 */
#ifndef TM_WORK_H
#define TM_WORK_H

#include "engine/tm_proto.h"

int tme_flush_work_slow(struct tm_engine *eng);

/* Inline: every entry point calls it, and usually there is nothing to
 * do, which one load tells. */
static inline int tme_flush_work(struct tm_engine *eng)
{
	if (!(eng->x.pending & TM_PEND_WORK))
		return 0;
	return tme_flush_work_slow(eng);
}

/* The end of every entry point that did something. */
static inline void tme_call_end(struct tm_engine *eng)
{
	tme_flush_work(eng);
	tme_fire_done(eng);
}

#endif /* TM_WORK_H */
