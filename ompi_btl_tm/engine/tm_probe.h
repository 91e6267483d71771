/*
 * tm_probe.h - probes: look at the unexpected queue without receiving
 * (tm_engine_probe, msg NULL), or take a message out of it for
 * tm_engine_post_mrecv (tm_engine_probe).  Protocol (tm_proto.h).
 *
 * Contract: a probe takes a stamp (tm_engine.h) after the completions were
 * drained; one naming a peer that died fails (tme_probe_missed: the
 * probing paces its keepalive).  A matched probe is a match: a send cancel
 * that arrives later is late.
 */
#ifndef TM_PROBE_H
#define TM_PROBE_H

#include "engine/tm_proto.h"

/* The entry points only (tm_engine.h). */

#endif /* TM_PROBE_H */
