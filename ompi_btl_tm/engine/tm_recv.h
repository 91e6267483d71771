/*
 * tm_recv.h - the receive state machine (states: tm_proto.h).  Protocol.
 *
 * Contract:
 *  - a new receive first takes the earliest matching unexpected message;
 *    otherwise tm_offload.c places it (card or software-held);
 *  - an unexpected arrival takes the earliest posted receive that accepts
 *    it; a card-held one is claimed: a DEL is decided, and the message is
 *    delivered when the DEL's completion confirms the card let go of the
 *    entry (the "claim race", doc/DESIGN.md "Sync protocol");
 *  - a cancel of a card-held receive is a DEL too; it completes
 *    TM_REQ_CANCELLED if the DEL succeeded, normally if a message won;
 *  - a rendezvous the card could not finish (or one matched in software)
 *    is read by software and answered with a FIN, whatever the outcome
 *    (tm_reply.c);
 *  - a receive completes (callback queued) once finished and nothing
 *    naming it is still pending (ops_pending).
 * The transport's news of a receive comes through tm_api.c's callbacks:
 * tme_on_recv_cqe (the card matched / delivered), tme_on_op_result (a
 * list op naming it completed), tme_on_unexpected (a message no card
 * entry took).
 * Owns: struct tme_recv_state (eng->recv) (unexpected messages), the
 * clock, tme_recv's fields not owned by tm_offload.c or tm_reply.c.
 */
#ifndef TM_RECV_H
#define TM_RECV_H

#include "engine/tm_proto.h"

int tme_recv_init(struct tm_engine *eng);
void tme_recv_cleanup(struct tm_engine *eng);

/* tmx_cb.recv itself (arg: the engine), registered by tm_api.c. */
void tme_on_recv_cqe(void *eng, struct tm_tctx *t, const struct tm_cqe *c);
void tme_on_op_result(struct tm_engine *eng, int type, struct tm_recv *r,
		      const struct tm_cqe *c);
int tme_on_unexpected(struct tm_engine *eng, uint8_t *buf, uint32_t idx,
		      const struct tm_cqe *c);
/* peer died: the receives naming it fail (card-held: after their DEL). */
void tme_recv_peer_dead(struct tm_engine *eng, uint32_t peer);

#endif /* TM_RECV_H */
