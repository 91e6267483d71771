/*
 * tm_tx.h - the send queues: queued items, send slots, retiring WRs from
 * the send CQ, peer failure (posting a WR and the eager post: tm_sq.h).
 * Transport (tm_transport.h).
 *
 * Contract (argument: doc/DESIGN.md, "Selective signalling"):
 *  - every outgoing item (eager data, rendezvous request, ACK, FIN, read,
 *    keepalive) is a tm_tx queued on its peer in order, or, for an eager
 *    send with nothing queued ahead, posted at once with no tx at all
 *    (tmx_eager_post);
 *  - a send whose header and data fit the QP's max_inline goes inline and
 *    takes no slot; others are copied into a slot;
 *  - a tx for a dead peer is never queued: it is aborted at once;
 *  - WRs are signalled only when something must happen at their
 *    completion, every sig_every-th WR of a QP, and when slots or the send
 *    queue run low; an RC QP completes in order, so a signalled completion
 *    retires every earlier WR of its QP and frees their slots;
 *  - at most sq_limit WRs per QP are outstanding;
 *  - the protocol hears of an item only through its done callback, and of
 *    a peer whose QP failed through tmx_cb.peer_failed (once per peer).
 */
#ifndef TM_TX_H
#define TM_TX_H

#include "engine/tm_sq.h"
#include "engine/tm_transport.h"

/* slots and the send-queue limits; n_slots is set (tm_api.c) */
int tmx_tx_init(struct tm_xport *x, size_t slot_size);
void tmx_tx_cleanup(struct tm_xport *x);
/* A new peer: its send-queue ring, and the signalling bounds. */
int tmx_tx_add_peer(struct tm_xport *x, struct tmx_peer *p);

/* The coarse monotonic clock: keepalive pacing is in milliseconds. */
uint64_t tmx_now_ns(void);

/* A new item of type TX_* for peer (NULL: no memory). */
struct tm_tx *tmx_tx_new(struct tm_xport *x, int type, uint32_t peer);
void tmx_tx_free(struct tm_tx *tx);
/* Queues tx on its peer (a dead peer: aborted at once). */
void tmx_tx_queue(struct tm_xport *x, struct tm_tx *tx);
/* The queued, never-posted EAGER or RNDV item of peer with that key. */
struct tm_tx *tmx_tx_find_send(struct tm_xport *x, uint32_t peer,
				uint64_t key);
/* Takes a queued tx off its queue and frees it (no callback). */
void tmx_tx_withdraw(struct tm_xport *x, struct tm_tx *tx);

/* Queues a signalled keepalive on p unless one is out; 1 if queued. */
int tmx_keepalive(struct tm_xport *x, struct tmx_peer *p, uint64_t now);

/* p's QP failed (or is refused): marks it dead, aborts what is queued,
 * and tells the protocol (peer_failed), once. */
void tmx_peer_fail(struct tm_xport *x, uint32_t peer);

/* p's QPs are not connected yet: what is sent to it waits, in order,
 * until tmx_peer_release (or tmx_peer_fail aborts it). */
void tmx_peer_hold(struct tm_xport *x, struct tmx_peer *p);
void tmx_peer_release(struct tm_xport *x, uint32_t peer);

int tmx_flush_tx(struct tm_xport *x);
int tmx_poll_send(struct tm_xport *x);
int tmx_tx_idle(struct tm_xport *x);

#endif /* TM_TX_H */
