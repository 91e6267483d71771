/*
 * fuzz_ingress.c - libFuzzer target over the soft HCA's packet ingress.
 *
 * The input plays a peer with write access to a rank's ring segment (the
 * strongest position a peer has): it writes arbitrary packet headers and
 * payloads into the victim QP's inbound ring, forges slot sequence words
 * and the ring's published tail (which the victim's own producer reads), and
 * mixes in what legitimate traffic does (tagged receives posted, plain
 * buffers, real sends, a copy read the victim waits on), and it offers a
 * spoiled copy of a published segment header for the victim to connect
 * to.  The victim's card runs between steps.  Anything but a clean return
 * (a crash, a sanitizer report, a leak, a hang, a receive state the card
 * must never keep: check_rx) is a finding.
 *
 * Input: a sequence of records, each an opcode byte and its operands.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "softhca/sh_util.h"
#include "softhca/softhca_priv.h"

enum {
	OP_PACKET,      /* u8 len of header bytes, header, u16 payload len,
			 * payload, u8 bit 0: stamp the due seq over the header's */
	OP_RING,        /* u8 which, u32 value: bit 0 set, the ring's tail;
			 * else the seq of slot which >> 1 */
	OP_ADD,         /* u64 tag, u8 mask kind */
	OP_PLAIN,       /* post a plain buffer */
	OP_DRAIN,
	OP_SEND,        /* u8 TMH opcode, u16 len: a real send from the peer */
	OP_READ,        /* u16 len: the victim reads from the peer (copy read) */
	OP_HEADER,      /* u8 off, u8 n, bytes: spoilt peer header, connect */
	OP_COUNT
};

/*
 * Receive buffers larger than the whole ring segment: a length the card
 * failed to bound then reads past the mapping and faults, instead of
 * quietly copying a neighbouring slot.
 */
#define BUF (256u * 1024)

struct in {
	const uint8_t *p;
	size_t n;
};

static int take(struct in *in, void *dst, size_t n)
{
	if (in->n < n) {
		memset(dst, 0, n);
		in->n = 0;
		return 0;
	}
	memcpy(dst, in->p, n);
	in->p += n;
	in->n -= n;
	return 1;
}

static struct softhca_config cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	sh_config(&cfg);
	cfg.mtu = 256;
	cfg.ring_depth = 8;
	cfg.max_qp = 4;
	cfg.max_mr = 16;
	cfg.max_num_tags = 16;
	cfg.max_ops = 64;
	cfg.max_wr = 64;
	cfg.force_copy_read = 1;
	if (softhca_set_config(&cfg))
		abort();
	return 0;
}

/* The ring the victim's QP receives into, as the peer maps it. */
static struct sh_ring *victim_ring(struct sh_env *e)
{
	struct sh_context *b = to_sh_ctx(e->b.ctx);

	return sh_ring_at(&b->lay, b->rings, e->p[0].rqp->qp_num - SH_QPN_BASE);
}

/*
 * A packet where the victim looks next (its published tail): header bytes
 * (the seq word first, so a short header keeps the slot's own), payload,
 * and, if asked, the seq the victim expects stamped last.
 */
static void op_packet(struct sh_env *e, struct in *in)
{
	struct sh_context *b = to_sh_ctx(e->b.ctx);
	struct sh_ring *ring = victim_ring(e);
	uint32_t pos = atomic_load(&ring->tail);
	struct sh_pkt *slot = (struct sh_pkt *)sh_ring_slot(&b->lay, ring, pos);
	uint8_t hdr[sizeof(struct sh_pkt)], hn = 0, stamp = 0;
	uint32_t seq;
	uint16_t pn = 0;

	take(in, &hn, 1);
	hn = hn % (sizeof(struct sh_pkt) + 1);
	memcpy(hdr, slot, sizeof(hdr));
	memset(hdr + sizeof(slot->seq), 0, sizeof(hdr) - sizeof(slot->seq));
	take(in, hdr, hn);
	memcpy(&seq, hdr, sizeof(seq));
	memcpy((uint8_t *)slot + sizeof(slot->seq), hdr + sizeof(seq),
	       sizeof(hdr) - sizeof(seq));
	take(in, &pn, 2);
	pn = pn % (b->lay.mtu + 1);
	take(in, slot->data, pn);
	take(in, &stamp, 1);
	atomic_store(&slot->seq, stamp & 1 ? pos + 1 : seq);
}

static void op_ring(struct sh_env *e, struct in *in)
{
	struct sh_context *b = to_sh_ctx(e->b.ctx);
	struct sh_ring *ring = victim_ring(e);
	uint32_t value = 0;
	uint8_t which = 0;

	take(in, &which, 1);
	take(in, &value, 4);
	if (which & 1)
		atomic_store(&ring->tail, value);
	else
		atomic_store(&((struct sh_pkt *)sh_ring_slot(
				       &b->lay, ring, which >> 1u))->seq, value);
}

/* A spoilt copy of the peer's published header; the victim connects. */
static void op_header(struct sh_env *e, struct in *in)
{
	struct sh_context *a = to_sh_ctx(e->a.ctx);
	struct ibv_cq_ex *cq;
	struct ibv_qp *qp;
	union ibv_gid gid;
	uint8_t off = 0, n = 0;
	uint32_t w[4];
	uint8_t *copy;
	int fd;

	take(in, &off, 1);
	take(in, &n, 1);
	off %= sizeof(struct sh_seg);
	n %= sizeof(struct sh_seg) - off + 1;
	fd = memfd_create("fuzz", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return;
	if (ftruncate(fd, (off_t)a->lay.pub_size))
		goto out;
	copy = mmap(NULL, a->lay.pub_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		    fd, 0);
	if (copy == MAP_FAILED)
		goto out;
	memcpy(copy, a->seg, a->lay.pub_size);
	take(in, copy + off, n);
	fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
				   F_SEAL_FUTURE_WRITE);
	sh_gid_encode(&gid, getpid(), fd, ((struct sh_seg *)copy)->nonce, 0x4d32u);
	cq = sh_cq_ex(e->b.ctx, 16);
	qp = cq ? sh_qp_create(&e->b, cq, e->b.srq, NULL) : NULL;
	if (qp && !sh_qp_connect(qp, &gid, SH_QPN_BASE)) {
		char *msg = sh_alloc(&e->b, 64);

		sh_qp_send(&e->b, qp, msg, 64, 1, IBV_SEND_SIGNALED);
		softhca_drain(e->b.ctx);
	}
	if (qp)
		sh_v()->destroy_qp(qp);
	if (cq) {
		sh_cq_discard(cq);
		sh_cq_destroy(cq);
	}
	munmap(copy, a->lay.pub_size);
out:
	close(fd);
}

/*
 * What the card may never leave behind, whatever arrived: a message under
 * way that has taken more bytes than it holds (it could never end, and
 * its completion would hold up the CQ for good).
 */
static void check_rx(struct sh_env *e)
{
	const struct sh_rx *rx = &to_sh_qp(e->p[0].rqp)->rx;

	if (rx->dest != SH_RX_IDLE &&
	    (rx->off > rx->msg_len || rx->written > rx->msg_len))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	struct sh_env e;
	int steps = 0;

	if (sh_env_open(&e, NULL, SOFTHCA_SCHED_MANUAL, 1))
		abort();
	while (in.n && steps++ < 256) {
		uint8_t op = 0;
		uint64_t tag = 0;
		uint16_t len = 0;
		uint8_t b8 = 0;
		uint32_t handle;
		void *buf;

		take(&in, &op, 1);
		switch (op % OP_COUNT) {
		case OP_PACKET:
			op_packet(&e, &in);
			break;
		case OP_RING:
			op_ring(&e, &in);
			break;
		case OP_ADD:
			take(&in, &tag, 8);
			take(&in, &b8, 1);
			buf = sh_alloc(&e.b, BUF);
			sh_add(&e.b, 1, 2, buf, BUF, tag,
			       b8 & 1 ? ~0ull : 0xffffffffull, 0,
			       IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC, &handle);
			break;
		case OP_PLAIN:
			sh_post_plain(&e.b, 3, sh_alloc(&e.b, BUF), BUF);
			break;
		case OP_DRAIN:
			sh_flush(&e);
			break;
		case OP_SEND:
			take(&in, &b8, 1);
			take(&in, &len, 2);
			len %= 2048;
			buf = sh_alloc(&e.a, len + SH_TMH_LEN);
			sh_put_tmh(buf, b8 % 5, 0, 7);
			sh_send_raw(&e, 0, 0, buf, len + SH_TMH_LEN, 4);
			softhca_drain(e.a.ctx);
			break;
		case OP_READ:
			take(&in, &len, 2);
			buf = sh_alloc(&e.b, len);
			sh_post_read(e.p[0].rqp, buf, e.b.mr->lkey, len,
				     (uintptr_t)e.a.mem, e.a.mr->rkey, 5);
			softhca_drain(e.b.ctx);
			break;
		case OP_HEADER:
			op_header(&e, &in);
			break;
		}
		softhca_drain(e.b.ctx);
		check_rx(&e);
	}
	sh_flush(&e);
	sh_cq_discard(e.b.cq);
	sh_cq_discard(e.a.cq);
	sh_cq_discard(e.p[0].scq);
	sh_cq_discard(e.p[0].rcq);
	sh_env_close(&e);
	return 0;
}
