/*
 * tm_probe.h - probes: look at the unexpected queue without receiving
 * (tm_engine_iprobe*), or take a message out of it for tm_engine_imrecv
 * (tm_engine_improbe*).  Protocol (tm_proto.h).
 *
 * Contract: a probe takes a stamp (tm_engine.h) after the completions were
 * drained; one naming a peer that died fails (tme_probe_missed: the
 * probing paces its keepalive).  A matched probe is a match: a send cancel
 * that arrives later is late.
 */
#ifndef TM_PROBE_H
#define TM_PROBE_H

#include "engine/tm_proto.h"

/* msg NULL: a peek; else the message, out of the queue.  TM_OK,
 * TM_ERR_NOT_FOUND or TM_ERR_PEER_DEAD. */
int tme_probe(struct tm_engine *eng, uint32_t ctx, int32_t src, int32_t tag,
	      uint32_t peer, struct tm_msg **msg, struct tm_probe_info *info);

#endif /* TM_PROBE_H */
