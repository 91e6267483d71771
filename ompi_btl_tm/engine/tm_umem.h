/*
 * tm_umem.h - the memory unexpected messages take.  Protocol.
 *
 * Contract: an unexpected message is copied out of its plain buffer
 * (tme_msg_alloc) while all copies together stay within
 * cfg.unexpected_mem bytes; past that it keeps its plain buffer ("held"),
 * which goes back to the card only once the message is received or
 * cancelled.  So a sender that runs ahead of its receiver ends up finding
 * no plain buffer and waits at its card, as RNR back-pressure makes it
 * wait on a real card, instead of the receiver copying without bound.
 *
 * Liveness: control messages (ACK, FIN, CANCEL_REQ/REP) and other peers'
 * messages need a plain buffer too.  While messages are held and none of
 * them was received for TM_UMEM_SPILL_NS, progress copies the oldest one
 * that is only queued (over the budget, counted in unexp_spilled) and
 * reposts its buffer, one per TM_UMEM_SPILL_NS: a program that waits for
 * something else than the messages it is flooded with gets it, and
 * memory grows by at most one copy per interval meanwhile.  A message a
 * matched probe takes out of the queue (MPI_Mprobe) is named only by the
 * program's handle, where no spill can reach it: it is copied out as the
 * probe takes it (over the budget too, counted the same way), so a
 * program holding probed messages holds no plain buffer with them.
 *
 * Owns: recv.msg_free and the budget's counters in struct tm_engine.
 */
#ifndef TM_UMEM_H
#define TM_UMEM_H

#include "engine/tm_proto.h"

/* how long held messages may sit unreceived before one is copied out */
#define TM_UMEM_SPILL_NS 1000000ull

/* A copy for an unexpected message of plen payload bytes, or NULL (no
 * memory, or the budget is spent: then the caller holds the buffer). */
struct tm_msg *tme_msg_alloc(struct tm_engine *eng, uint32_t plen);
/* Message m (from msg_pool) keeps plain buffer idx. */
void tme_msg_hold(struct tm_engine *eng, struct tm_msg *m, uint32_t idx);
/* m is done with: its memory, or its plain buffer back to the card. */
void tme_msg_free(struct tm_engine *eng, struct tm_msg *m);
/* The message a matched probe hands out in place of m: m, or its copy
 * when m held a plain buffer (m is then gone; it stays held only when
 * there is no memory for the copy). */
struct tm_msg *tme_msg_take(struct tm_engine *eng, struct tm_msg *m);
/* TM_PEND_HELD's handler (progress): the liveness rule above. */
int tme_umem_spill(struct tm_engine *eng);

#endif /* TM_UMEM_H */
