/*
 * softhca_shm.h - what soft HCAs share: the two segments a context
 * publishes, its rings and the packets in them.
 *
 * A context owns two anonymous segments (memfds), handed by the owner to
 * peers of the same user that present its GID's key (handover.c), so
 * nothing has a name in a file system, nothing outlives the processes
 * mapping it, and only a process given the GID can reach them:
 *   published: [sh_seg header][rkey table: max_mr x sh_mr_slot]
 *     sealed against new writable mappings once built, so a peer maps it
 *     read-only and only the owner writes the table that authorises reads;
 *   rings:     [sh_rings][max_qp x (sh_ring + ring_depth slots)][sh_ud_box]
 *     a QP's inbound packets land in the ring of its own slot; its peer
 *     maps this segment read-write and produces into that ring.
 * Each ring has exactly one producer (the peer QP, under the peer context's
 * lock) and one consumer (this context's card).  Nothing a peer can write
 * is trusted: the peer's header is copied and checked once at map time
 * (struct sh_layout), ring positions are kept privately (a slot's seq word
 * only says whether the packet the consumer expects is there), and every
 * packet header is copied out of its slot and checked before use.
 */
#ifndef SOFTHCA_SHM_H
#define SOFTHCA_SHM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define SH_SEG_MAGIC     0x534f46544d484341ull /* "SOFTMHCA" */
#define SH_SEG_VERSION   5u
#define SH_RINGS_MAGIC   0x534f46544d52494eull /* "SOFTMRIN" */
#define SH_RINGS_OFF     4096u   /* first ring in the ring segment */
/* Largest packet payload length and message a packet may announce. */
#define SH_MAX_MSG       (1u << 31)
#define SH_MAX_MTU       (1u << 20)   /* sh_layout_compute refuses more */

/* ---- shared memory: packets, rings, the segment ---------------------- */

enum sh_pkt_kind {
	SH_PKT_SEND = 1,
	SH_PKT_READ_REQ,
	SH_PKT_READ_RESP,
};

enum sh_pkt_flags {
	SH_PKT_FIRST = 1 << 0,
	SH_PKT_LAST  = 1 << 1,
};

/*
 * One ring slot: this header, then up to mtu bytes of payload.  The header
 * is 40 bytes so that it, a 16-byte TMH and 8 bytes of payload share one
 * cache line.  seq is the slot's ready mark: the producer writes the rest
 * of the slot, then stores seq = position + 1 with release; the consumer
 * polls the seq of its next slot (no shared head, no doorbell), so a small
 * message costs the receiver one line.  Until then the slot holds the seq
 * of a lap before (position + 1 - ring_depth), or 0 in the ring's first
 * lap (a cleared ring is all zeros and costs no memory until used, see
 * sh_ring_clear); any third value was forged, and is a bad packet.  The fields only READ
 * packets use come last.
 */
struct sh_pkt {
	_Atomic uint32_t seq;
	uint16_t kind;
	uint16_t flags;
	uint32_t len;       /* payload bytes in this packet */
	uint32_t msg_len;   /* SEND: whole message; READ: bytes asked */
	uint32_t src_qpn;
	union {
		uint32_t rkey;      /* READ_REQ */
		uint32_t status;    /* READ_RESP: enum ibv_wc_status */
	};
	uint64_t req_id;    /* READ_REQ/RESP: requester's read id */
	uint64_t va;        /* READ_REQ: remote address; RESP: offset */
	uint8_t data[];
};
_Static_assert(sizeof(struct sh_pkt) == 40, "sh_pkt: one line with TMH + 8 B");

/*
 * A ring's shared words.  tail is the consumer's to publish (the producer
 * reads it only when its private copy says the ring is full); epoch and
 * closed are read by the producer before each WR, so they live on a line
 * the consumer does not write per packet.
 */
struct sh_ring {
	_Atomic uint32_t tail;  /* packets consumed */
	uint8_t pad0[60];
	_Atomic uint32_t epoch; /* bumped when the owning QP slot is reused */
	_Atomic uint32_t closed;/* the owning QP is gone or in error */
	uint8_t pad1[56];
};

struct sh_mr_slot {
	_Atomic uint32_t key;   /* 0: free */
	uint32_t access;
	uint64_t addr;
	uint64_t length;
	uint64_t pad;
};

/* The published segment's header; the rkey table follows at mr_off. */
struct sh_seg {
	uint64_t magic;
	uint32_t version;
	int32_t pid;
	uint32_t mtu;
	uint32_t ring_depth;
	uint32_t max_qp;
	uint32_t max_mr;
	uint64_t owner_va;      /* this header's address in the owner: CMA probe */
	uint64_t mr_off;
	uint64_t size;          /* of the published segment */
	uint64_t ring_stride;
	uint64_t slot_size;
	uint64_t rings_size;    /* of the ring segment */
	int32_t rings_fd;       /* the ring segment's descriptor in the owner */
	uint32_t nonce;         /* also in the GID: this is the segment meant */
	/*
	 * Held by the owner's handover thread from before it answers a peer
	 * until the context closes: a robust, process-shared mutex, so when
	 * the owner dies the kernel marks its word (glibc keeps the holder's
	 * TID there; the kernel sets FUTEX_OWNER_DIED and clears the TID).
	 * A peer reads the word to tell that the owner still lives without a
	 * syscall or a clock read.  Zero (an owner that never took it) or any
	 * word that changes while the owner lives is not believed again
	 * (egress.c, peer_alive).
	 */
	union {
		pthread_mutex_t m;
		_Atomic uint32_t word;
		uint8_t pad[56];
	} alive;
	/*
	 * 1 while the owner watches so many rings that an idle poll reads
	 * its one arrival hint (sh_rings.rx_hint) instead of every ring: a
	 * producer then sets that hint after each packet it publishes.
	 */
	_Atomic uint32_t rx_armed;
	uint32_t pad2;
};

/*
 * The ring segment's header, the page before the first ring.  rx_hint and
 * rx_bits are any producer's to set while sh_seg.rx_armed says so: after a
 * packet's seq, the bit of its ring (sh_rx_bit), then the hint.  The owner
 * clears the hint, then takes the words of bits, and looks at only the
 * rings they name, so an arrival costs the same however many rings are
 * watched.  Being peer-written they are only ever a reason to look, never
 * a reason not to: the owner looks at every ring at least every
 * SH_RX_SCAN_EVERY idle polls and card runs whatever they say, so a peer
 * that clears them delays others' packets by that much at most.
 */
#define SH_RX_BIT_WORDS  ((SH_RINGS_OFF - 64u) / 8u)
#define SH_RX_BITS       (SH_RX_BIT_WORDS * 64u)
struct sh_rings {
	uint64_t magic;
	uint32_t nonce;
	_Atomic uint32_t rx_hint;
	uint8_t pad[48];
	_Atomic uint64_t rx_bits[SH_RX_BIT_WORDS];
};
_Static_assert(sizeof(struct sh_rings) == SH_RINGS_OFF,
	       "sh_rings: the page before the first ring");

/* The arrival bit of ring i: its own, the last one for every ring past it. */
static inline uint32_t sh_rx_bit(uint32_t i)
{
	return i < SH_RX_BITS ? i : SH_RX_BITS - 1;
}

/*
 * The datagram mailbox (ud.c), after the last ring: where any peer of the
 * context leaves a UD message for its UD QP.  Many writers, one reader, no
 * order: a writer claims a free slot by compare-and-swap (state 0 -> its
 * claim), fills it and marks it ready (claim -> ready), then bumps posted;
 * the owner takes ready slots and frees them.  All of it is peer-written:
 * the owner copies a slot out and checks it before use, frees a slot
 * claimed and never marked ready after SH_UD_STALE_NS, and frees any
 * state no writer should leave (a bad datagram, counted).  A full mailbox
 * drops the datagram, as a UD QP with no receive posted does.
 */
#define SH_UD_SLOTS      64u
#define SH_UD_PAYLOAD    256u    /* the longest UD message */
#define SH_UD_FREE       0u
#define SH_UD_CLAIMED    1u      /* state: claim << 2 | CLAIMED / READY */
#define SH_UD_READY      2u

struct sh_ud_slot {
	_Atomic uint32_t state;
	uint32_t len;           /* payload bytes */
	uint32_t src_qpn;
	uint32_t dst_qpn;
	uint32_t qkey;
	uint32_t pad;
	uint8_t sgid[16];       /* the sender's GID, as it says */
	uint8_t pad2[24];
	uint8_t data[SH_UD_PAYLOAD];
};
_Static_assert(sizeof(struct sh_ud_slot) == 64 + SH_UD_PAYLOAD,
	       "sh_ud_slot: a 64-byte header");

struct sh_ud_box {
	_Atomic uint32_t posted; /* datagrams marked ready: a reason to look */
	uint8_t pad[60];
	struct sh_ud_slot slot[SH_UD_SLOTS];
};

/* A segment's geometry: computed (own) or copied and checked (peer's). */
struct sh_layout {
	uint32_t mtu, ring_depth, max_qp, max_mr;
	uint64_t slot_size, ring_stride;
	uint64_t pub_size, rings_size, mr_off;
	uint64_t ud_off;        /* the mailbox in the ring segment */
	uint64_t owner_va;
};

#endif /* SOFTHCA_SHM_H */
