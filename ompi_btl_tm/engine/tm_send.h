/*
 * tm_send.h - send requests, the replies they wait for, and the
 * keepalive.  Protocol (tm_proto.h).
 *
 * Contract (argument: doc/DESIGN.md, "Sends" and "Dead peers"):
 *  - an eager send is posted at once when nothing is queued ahead
 *    (tmx_eager_post), else queued on its peer; a rendezvous or
 *    synchronous send also waits for its FIN/ACK, findable by (peer, seq);
 *  - a send that waited keepalive_ms for its reply, or a receive or probe
 *    naming a peer that long, makes the engine post a signalled KEEPALIVE
 *    on that peer's QP (at most one per keepalive_ms per peer, looked at
 *    from tm_engine_progress) so that a dead peer fails something;
 *  - when a peer dies (tmx_cb.peer_failed, tm_api.c), every send waiting
 *    on it completes TM_REQ_ERROR (tme_send_peer_dead); what was queued
 *    for it the transport aborted already.
 * Owns: struct tme_send_state (eng->send), the protocol's peers (their
 * waitq and probe pacing), tme_send's fields but cflags.
 */
#ifndef TM_SEND_H
#define TM_SEND_H

#include "engine/tm_proto.h"

int tme_send_init(struct tm_engine *eng);
void tme_send_cleanup(struct tm_engine *eng);
/* The protocol's side of transport peer id (just added). */
int tme_send_add_peer(struct tm_engine *eng, uint32_t id);


/* s waits for its FIN/ACK (or CANCEL_REP) from now on / no longer. */
int tme_wait_reply_start(struct tm_engine *eng, struct tm_send *s);
void tme_wait_reply_end(struct tm_engine *eng, struct tm_send *s);
/* A send waiting for a reply, or queued and not yet posted; or NULL. */
struct tm_send *tme_find_send(struct tm_engine *eng, uint32_t peer,
			      uint32_t seq);
/* s's queued, never-posted item is withdrawn: s completes with status. */
int tme_send_withdraw(struct tm_engine *eng, struct tm_send *s, int status);

/* An ACK or FIN (opcode) naming a send of ours arrived from peer. */
void tme_send_on_reply(struct tm_engine *eng, uint32_t peer, uint32_t app,
		       int opcode);
/* peer died: the sends waiting on it fail. */
void tme_send_peer_dead(struct tm_engine *eng, uint32_t peer);

void tme_keepalive_scan(struct tm_engine *eng);
/* Progress calls per scan: waits are in milliseconds, calls in
 * microseconds while anything waits. */
#define TM_KA_SCAN_CALLS 64
/* From tm_engine_progress while TM_PEND_WAIT: every TM_KA_SCAN_CALLS-th
 * call scans (the scan clears the bit when nothing waits). */
static inline void tme_keepalive_tick(struct tm_engine *eng)
{
	if (eng->send.ka_calls)
		eng->send.ka_calls--;
	else
		tme_keepalive_scan(eng);
}
/* A probe naming peer found nothing: TM_ERR_NOT_FOUND, or
 * TM_ERR_PEER_DEAD; paces the keepalive. */
int tme_probe_missed(struct tm_engine *eng, uint32_t peer);

#endif /* TM_SEND_H */
