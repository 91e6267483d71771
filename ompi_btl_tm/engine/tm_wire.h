/*
 * tm_wire.h - what the engine puts on the wire (engine-internal, and the
 * tests that check sequence numbers).  Argument: doc/DESIGN.md, "Wire".
 *
 * Contract: every message starts with the TMH of <infiniband/tm_types.h>
 * (big endian fields); the card reads only opcode, tag and app_ctx.
 *   EAGER     TMH | payload                (payload <= eager_limit)
 *   RNDV      TMH | RVH | struct tm_rndv_md (40 bytes); RVH len is the
 *             length saturated at 2^32 - 1, tm_rndv_md the full length
 *   FIN       the request's TMH (opcode FIN) | RVH, receiver to sender;
 *             TM_APP_FIN_ERR set when the receiver failed the transfer
 *   ACK       TMH(NO_TAG), control TM_CTRL_ACK: a synchronous send matched
 *   KEEPALIVE TMH(NO_TAG), control TM_CTRL_KEEPALIVE, tag 0: ignored on
 *             arrival (only the transport's acknowledgement matters)
 *   CANCEL_REQ TMH(NO_TAG), control TM_CTRL_CANCEL_REQ, seq of the send to
 *             cancel, tag 0; sender to receiver, on the QP the send took
 *   CANCEL_REP TMH(NO_TAG), control TM_CTRL_CANCEL_REP, the same seq, tag
 *             TM_CANCEL_DONE (removed unmatched) or TM_CANCEL_LATE
 * app_ctx: bit 31 TM_APP_SYNC, bit 30 TM_APP_RNDV, bits 29..24 the control
 * type of a NO_TAG message (0 in tagged ones), bits 23..0 the sender's
 * per-peer send sequence, which ACK and FIN name.
 */
#ifndef TM_WIRE_H
#define TM_WIRE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>
#include <infiniband/tm_types.h>

#define TM_APP_SYNC (1u << 31)
#define TM_APP_RNDV (1u << 30)
/* in a FIN only: the receiver failed the transfer, so the send fails too */
#define TM_APP_FIN_ERR (1u << 29)
#define TM_APP_CTRL_SHIFT 24
#define TM_APP_CTRL_MASK (0x3fu << TM_APP_CTRL_SHIFT)
#define TM_APP_SEQ_MASK 0xffffffu

enum tm_ctrl {
	TM_CTRL_ACK = 1,        /* synchronous send matched */
	TM_CTRL_CANCEL_REQ = 2, /* withdraw a send if still unmatched */
	TM_CTRL_CANCEL_REP = 3, /* ... the receiver's answer */
	TM_CTRL_KEEPALIVE = 4,  /* probes the peer; ignored on arrival */
};

/* The outcome a CANCEL_REP carries in its tag. */
enum { TM_CANCEL_LATE = 0, TM_CANCEL_DONE = 1 };

/* Rendezvous metadata after the RVH. */
struct tm_rndv_md {
	uint64_t len;     /* full message length (big endian) */
};

#define TMH_LEN ((uint32_t)sizeof(struct ibv_tmh))
#define RVH_LEN ((uint32_t)sizeof(struct ibv_rvh))
#define RNDV_HDR_LEN (TMH_LEN + RVH_LEN + (uint32_t)sizeof(struct tm_rndv_md))

static inline struct ibv_tmh *tmh_fill(void *p, uint8_t op, uint32_t app,
				       uint64_t tag)
{
	struct ibv_tmh *tmh = p;

	memset(tmh, 0, sizeof(*tmh));
	tmh->opcode = op;
	tmh->app_ctx = htobe32(app);
	tmh->tag = htobe64(tag);
	return tmh;
}

#endif /* TM_WIRE_H */
