/*
 * test_hostile_packets.c - the soft HCA against a peer that writes
 * malformed packets into a QP's inbound ring: each is dropped and counted
 * as a bad packet, the QP goes to error, nothing is written, the card does
 * bounded work and goes on serving a new QP.
 *
 * White box (sh_reach.h).  Each case runs in a child, so a crash is a
 * failed check rather than a lost test program.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "sh_util.h"
#include "sh_reach.h"

enum bad_kind {
	BAD_HUGE_LEN,       /* len 96 MiB in one slot */
	BAD_MSG_LEN,        /* LAST packet that does not end its message */
	BAD_OPCODE,         /* kind the protocol does not have */
	BAD_CONTINUATION,   /* middle packet of no message */
	BAD_HEAD_JUMP,      /* seq a million packets ahead of the tail */
	BAD_READ_RESP,      /* response at an offset no read asked for */
	BAD_FIRST_LONG,     /* first (not last) packet past its message */
	BAD_ONE_IN_MESSAGE, /* a one-packet message inside another one */
	BAD_COUNT
};

static const char *bad_name[BAD_COUNT] = {
	"packet length 96 MiB",
	"last packet short of its message length",
	"unknown packet kind 77",
	"continuation packet with no message started",
	"slot seq claiming a position 10^6 packets ahead",
	"read response for bytes never asked",
	"first packet (not last) longer than its whole message",
	"one-packet message while another message is under way",
};

/* In a child: 0 when the victim survived, counted, failed the QP, did
 * bounded work, and still works for a new connection.  polled: the
 * packet is taken by an AUTO poll (a poll's ring pass, sched.c: the step
 * inline, handed the seq the pass read) instead of the full drain. */
static int bad_packet_child(enum bad_kind kind, bool polled)
{
	struct softhca_config cfg;
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr init;
	struct softhca_stats st;
	struct sh_pkt h;
	struct sh_env e;
	struct reach r;
	struct sh_wc wc;
	uint8_t payload[64] = { 0 };
	char *buf;
	int ret, pair, rc = 0;

	sh_config(&cfg);
	if (sh_env_open(&e, &cfg, SOFTHCA_SCHED_MANUAL, 1))
		return 100;
	buf = sh_alloc(&e.b, 4096);
	memset(buf, 0, 4096);
	sh_post_plain(&e.b, 1, buf, 4096);
	sh_flush(&e);
	reach_victim(&e.b.gid, &r);
	if (!r.rings)
		return 101;
	memset(&h, 0, sizeof(h));
	h.kind = SH_PKT_SEND;
	h.flags = SH_PKT_FIRST | SH_PKT_LAST;
	h.src_qpn = e.p[0].sqp->qp_num;
	sh_put_tmh(payload, IBV_TMH_NO_TAG, 0, 0);
	switch (kind) {
	case BAD_HUGE_LEN:
		h.len = h.msg_len = 96u << 20;
		break;
	case BAD_MSG_LEN:
		h.len = 32;
		h.msg_len = 96u << 20;
		break;
	case BAD_OPCODE:
		h.kind = 77;
		h.len = h.msg_len = 32;
		break;
	case BAD_CONTINUATION:
		h.flags = SH_PKT_LAST;
		h.len = 32;
		h.msg_len = 64;
		break;
	case BAD_HEAD_JUMP:
		break;
	case BAD_READ_RESP:
		h.kind = SH_PKT_READ_RESP;
		h.flags = SH_PKT_LAST;
		h.len = 64;
		h.msg_len = 1u << 20;
		h.va = 1u << 30;
		break;
	case BAD_FIRST_LONG:
		/* a card that took it would write past msg_len and wait
		 * for the rest of a message that can never end, its
		 * completion slot held and the CQ stuck behind it */
		h.flags = SH_PKT_FIRST;
		h.len = 64;
		h.msg_len = 32;
		break;
	case BAD_ONE_IN_MESSAGE:
		/* the first of two packets (zeros: it writes nothing that
		 * shows), then a whole message in the next slot, below:
		 * the card's one-packet rule must still ask that no message
		 * is under way */
		h.flags = SH_PKT_FIRST;
		h.len = 32;
		h.msg_len = 64;
		break;
	case BAD_COUNT:
		break;
	}
	/* BAD_HEAD_JUMP: a good header in a slot whose seq claims a
	 * position a million packets on */
	if (kind == BAD_HEAD_JUMP)
		h.len = h.msg_len = 32;
	forge(&r, e.p[0].rqp->qp_num, &h, payload, sizeof(payload),
	      kind == BAD_HEAD_JUMP ? 1000000u : 0);
	if (kind == BAD_ONE_IN_MESSAGE) {
		struct sh_ring *ring = reach_ring(&r, e.p[0].rqp->qp_num);
		uint32_t pos = atomic_load(&ring->tail) + 1;
		struct sh_pkt *next = (struct sh_pkt *)((uint8_t *)(ring + 1) +
			r.head.slot_size * (pos % r.head.ring_depth));

		memcpy((uint8_t *)next + sizeof(next->seq),
		       (const uint8_t *)&h + sizeof(h.seq),
		       sizeof(h) - sizeof(h.seq));
		next->flags = SH_PKT_FIRST | SH_PKT_LAST;
		next->msg_len = 32;
		memcpy(next->data, payload, sizeof(payload));
		atomic_store(&next->seq, pos + 1);
	}
	if (kind == BAD_HEAD_JUMP) {
		/* and every other slot forged too: a card that took a forged
		 * seq and left it would find it again a lap on, forever */
		struct sh_ring *ring = reach_ring(&r, e.p[0].rqp->qp_num);

		for (uint32_t i = 1; i < r.head.ring_depth; i++)
			atomic_store(&((struct sh_pkt *)((uint8_t *)(ring + 1) +
				r.head.slot_size * i))->seq, 0xdead0000u + i);
	}
	if (polled) {
		softhca_set_sched(e.b.ctx, SOFTHCA_SCHED_AUTO, 0);
		for (int i = 0; i < 4; i++)
			if (sh_poll(e.b.cq, &wc) < 0)
				rc |= 64;
	}
	/* A card that believed the ring would work through a million slots. */
	if (sh_flush(&e) > 100)
		rc |= 16;
	st = sh_stats(&e.b);
	if (!st.bad_packets)
		rc |= 1;
	ret = sh_v()->query_qp(e.p[0].rqp, &at, IBV_QP_STATE, &init);
	if (ret || at.qp_state != IBV_QPS_ERR)
		rc |= 2;
	if (!sh_all(buf, 4096, 0))
		rc |= 32; /* a dropped packet writes nothing */
	/* (the first packet took the plain buffer; the QP's flush gave it
	 * back, empty) */
	if (kind == BAD_ONE_IN_MESSAGE)
		sh_post_plain(&e.b, 1, buf, 4096);
	/* The victim's card goes on serving its other connections. */
	pair = sh_pair_add(&e);
	if (pair < 0)
		return rc | 4;
	sh_cq_discard(e.b.cq);
	sh_send_tm(&e, pair, IBV_TMH_NO_TAG, 0, 0, "after", 6, 3);
	ret = sh_wait(&e, e.b.cq, &wc, 5000);
	/* (the plain buffer the bad packet did not take receives it) */
	if (ret != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != 1 ||
	    strcmp(buf + SH_TMH_LEN, "after")) {
		fprintf(stderr, "new QP: %d %s\n", ret,
			ret == 1 ? sh_wc_str(&wc) : "none");
		rc |= 8;
	}
	reach_drop(&r);
	sh_env_close(&e);
	return rc;
}

/* kind, and whether a poll takes it (BAD_COUNT and above) */
static int bad_packet_entry(int k)
{
	return bad_packet_child((enum bad_kind)(k % BAD_COUNT), k >= BAD_COUNT);
}

int main(void)
{
	for (int i = 0; i < 2 * BAD_COUNT; i++) {
		char what[224];
		int rc = run_child(bad_packet_entry, i);

		snprintf(what, sizeof(what), "%s%s: no crash, dropped and "
			 "counted, nothing written, the QP in error, the card "
			 "still serves a new QP", bad_name[i % BAD_COUNT],
			 i >= BAD_COUNT ? " (taken by an AUTO poll)" : "");
		if (rc < 0)
			tap_check(0, "%s: victim killed by signal %d (%s)",
				  what, -rc, strsignal(-rc));
		else
			tap_check(rc == 0, "%s (code %d)", what, rc);
	}
	return tap_done();
}
