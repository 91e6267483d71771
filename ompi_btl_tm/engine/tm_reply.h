/*
 * tm_reply.h - what a receiver sends back: a receive's ACK (synchronous
 * sends) and FIN (rendezvous), a CANCEL_REP, each owed when there is no
 * memory for it, and the software rendezvous read that ends in the FIN.
 * Protocol (tm_proto.h).
 *
 * Contract: a reply that cannot be sent now is owed (the receive does not
 * complete: ops_pending) and retried from every engine call, so a sender
 * never waits for a reply that was dropped; a FIN goes whatever the read's
 * outcome, flagged TM_APP_FIN_ERR when the receive failed (doc/DESIGN.md,
 * "Long messages").  CANCEL_REPs go in the order decided; more than
 * TM_CANCEL_OWED_MAX owed stops the engine (loud: the sender would
 * otherwise wait for good).  Owns: struct tme_reply_state (eng->reply),
 * the tme_recv rd_* fields.
 */
#ifndef TM_REPLY_H
#define TM_REPLY_H

#include "engine/tm_proto.h"

void tme_reply_init(struct tm_engine *eng);

/* Sends r's ACK or FIN (TX_ACK, TX_FIN), or owes it. */
void tme_recv_reply(struct tm_engine *eng, struct tm_recv *r, int type);
/* Sends the owed replies, oldest first, until memory runs short again. */
int tme_reply_pay_owed(struct tm_engine *eng);
/* A bare control header (TM_CTRL_*) for peer; TM_ERR_NO_MEMORY: none. */
int tme_queue_ctrl(struct tm_engine *eng, uint32_t peer, uint32_t ctrl,
		   uint32_t seq, uint64_t tag);
/* The answer to peer's CANCEL_REQ (seq): TM_CANCEL_DONE or _LATE. */
void tme_reply_cancel_rep(struct tm_engine *eng, uint32_t peer, uint32_t seq,
			  uint64_t outcome);
int tme_reply_pay_reps(struct tm_engine *eng);
static inline int tme_reply_owes_rep(const struct tme_reply_state *rs)
{
	return rs->rep_head != rs->rep_tail;
}
/* Marks r's FIN as that of a failed transfer (TM_APP_FIN_ERR). */
void tme_fin_failed(struct tm_recv *r);
/* r's hdr holds the request's TMH+RVH: reads min(msg_len, buffer), FINs,
 * and finishes r. */
void tme_sw_rndv_start(struct tm_engine *eng, struct tm_recv *r,
		       uint64_t msg_len);

#endif /* TM_REPLY_H */
