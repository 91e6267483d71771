/*
 * tm_rx.h - the receive side of the transport: the plain SRQ buffers
 * (unexpected and control messages), peers' QP numbers, and the TM-CQ
 * batch that hands each completion to its owner.  Transport
 * (tm_transport.h); the top of it.
 *
 * Contract: a drain processes every completion already in both CQs: list
 * ops go to tm_ops.c, send WRs to tm_tx.c, and the rest up through the
 * callbacks (tmx_cb): a card-held receive's completion (recv), a message
 * in a plain buffer (unexpected, control), a peer whose QP failed
 * (peer_failed).  Completions are copied out of the CQ first, so a
 * callback may post.  A plain buffer is reposted after its callback,
 * unless unexpected() kept it (then tmx_post_plain, later); reposts go
 * to the SRQ in chains of up to PLAIN_BATCH_MAX, while at least half the
 * buffers (and 33) are posted.  A drain posts the chained ADDs first
 * (tm_ops.h): the card gets them before it looks at arrivals.
 */
#ifndef TM_RX_H
#define TM_RX_H

#include "dev/tm_dev.h"
#include "engine/tm_ops.h"
#include "engine/tm_transport.h"
#include "engine/tm_tx.h"

/* plain buffers of plain.size bytes (set by the caller), posted */
int tmx_rx_init(struct tm_xport *x);
void tmx_rx_cleanup(struct tm_xport *x);

int tmx_add_peer(struct tm_xport *x, const struct tm_dev_pair *qps,
		 uint32_t *peer);

/* (Re)posts plain buffer idx; a refusal stops the engine (tmx_fatal). */
void tmx_post_plain(struct tm_xport *x, uint32_t idx);

int tmx_drain_from(struct tm_xport *x, int rc, int want_send);

/*
 * Processes every completion already in both CQs; returns how many.
 * Inline up to the first poll: an empty TM CQ with no reason to look at
 * the send CQ (the common idle case) costs no call frame.
 */
static inline int tmx_drain(struct tm_xport *x)
{
	int rc, want_send;

	tmx_add_flush(x);
	if (x->in_batch)
		return 0; /* the batch's caller takes what arrived */
	rc = tm_dev_start_poll(x->dev->tm_cq);
	want_send = tmx_want_poll_send(x);
	if (rc == TM_ERR_NOT_FOUND && !want_send)
		return 0;
	return tmx_drain_from(x, rc, want_send);
}

#endif /* TM_RX_H */
