/*
 * tm_cancel.h - MPI_Cancel of sends: a request/reply exchange with the
 * receiver, who alone knows whether the message was matched.
 *
 * Contract (argument: doc/DESIGN.md, "Send cancel"):
 *  - a send still queued on its peer (never posted) is withdrawn here,
 *    at once: nothing of it reached the wire;
 *  - a send whose FIN/ACK came was matched: too late, nothing is asked;
 *  - otherwise the sender posts a CANCEL_REQ naming (its QP, seq) behind
 *    the send on the same QP.  RC delivers in order, so the receiver has
 *    processed the message's arrival before the REQ: the message is either
 *    still in the unexpected queue (removed, never delivered: DONE), or was
 *    matched by the card, by a software receive, by a claim whose DEL is
 *    outstanding, or by a matched probe (LATE: it is delivered);
 *  - the sender keeps the send waiting until the CANCEL_REP (a pending
 *    send) or re-arms it (an eager send that had completed when posted),
 *    so the receiver may still read a rendezvous buffer meanwhile; the
 *    keepalive covers the wait, and a peer that dies fails the send
 *    TM_REQ_ERROR: one outcome on each side;
 *  - a REP the receiver cannot allocate is owed (tm_reply.c) and sent
 *    from every engine call, in order.
 * Protocol (tm_proto.h), above tm_send and tm_recv.
 * Owns: tme_send.cflags S_CANCEL_*, the scancel_* statistics.
 */
#ifndef TM_CANCEL_H
#define TM_CANCEL_H

#include "engine/tm_proto.h"

/* A CANCEL_REQ / CANCEL_REP arrived from peer (app: its app_ctx). */
void tme_on_cancel_req(struct tm_engine *eng, uint32_t peer, uint32_t app);
void tme_on_cancel_rep(struct tm_engine *eng, uint32_t peer, uint32_t app,
		       uint64_t tag);

#endif /* TM_CANCEL_H */
