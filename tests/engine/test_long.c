/*
 * test_long.c - messages longer than the device reads in one go
 * (doc/DESIGN.md, "Long messages").
 *
 * The soft HCA's max_msg_sz is 64 KiB here, so a 1 MiB rendezvous needs
 * 17 read pieces and a whole-message read is refused by the port: an
 * engine that does not split waits for ever (the pump below stops when
 * nothing moves, and the request is found not done).  Checked, in every
 * path: unexpected, posted first (software-held: too long for the card),
 * a card-held buffer the card hands back (RNDV_INCOMPLETE, truncated), a
 * message exactly max_msg_sz read by the card, probe and mprobe lengths,
 * a message over 4 GiB (64-bit length, saturated RVH; its sender's buffer
 * is a sparse mapping, the receives truncate so only what they read is
 * touched), a request whose metadata disagrees with its RVH (the RVH's
 * length is used, counted malformed), an engine whose eager messages would
 * not fit the port, and a receive that cannot register its buffer failing
 * the send as well.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "tap.h"
#include "eng_util.h"
#include "engine/tm_wire.h"

#define MAXMSG (64u << 10)          /* the soft HCA's max_msg_sz here */
#define MSG ((1u << 20) + 123)      /* 17 pieces */
#define HUGE ((5ull << 30) + 17)    /* over 4 GiB */

static struct eu_world W;

static int recv_post(struct eu_recv *t, int tag, void *buf, size_t len,
		     struct ibv_mr *mr)
{
	memset(t, 0, sizeof(*t));
	t->r.cb = eu_recv_cb;
	return tm_engine_irecv(W.node[1].eng, &t->r, 1, 0, tag, buf, len, mr);
}

/* node 0 -> node 1, from its arena (filled with seed) or from buf */
static int send_post(struct eu_send *t, int tag, const void *buf, size_t len,
		     struct ibv_mr *mr)
{
	memset(t, 0, sizeof(*t));
	t->s.cb = eu_send_cb;
	return tm_engine_isend(W.node[0].eng, &t->s, W.node[0].peer[1], 1, 0,
			       tag, buf, len, mr, 0);
}

static int world(uint32_t max_mr)
{
	struct eu_opts o;

	eu_opts_default(&o);
	o.max_msg_sz = MAXMSG;
	o.max_mr = max_mr;
	o.arena_len = 4u << 20;
	return eu_world_init(&W, 2, &o);
}

static void test_paths(void)
{
	uint8_t *sbuf = W.node[0].arena, *rbuf = W.node[1].arena;
	struct ibv_mr *smr = W.node[0].mr, *rmr = W.node[1].mr;
	struct tm_engine_stats st0, st1;
	struct tm_probe_info info;
	struct eu_send s;
	struct eu_recv r;
	struct tm_msg *m;
	int rc;

	/* unexpected: read in pieces once the receive comes */
	eu_fill(sbuf, MSG, 1);
	send_post(&s, 1, sbuf, MSG, smr);
	eu_pump(&W);
	memset(&info, 0, sizeof(info));
	rc = tm_engine_iprobe(W.node[1].eng, 1, 0, 1, &info);
	tap_check(rc == TM_OK && info.len == MSG,
		  "unexpected 1 MiB rendezvous: probe says %llu",
		  (unsigned long long)info.len);
	memset(rbuf, 0, MSG);
	recv_post(&r, 1, rbuf, MSG, rmr);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_OK &&
		  r.r.recv_len == MSG && r.r.msg_len == MSG &&
		  eu_check(rbuf, MSG, 1),
		  "unexpected: read in %u-byte pieces, all of it (done %d, status %d, %llu bytes)",
		  MAXMSG, r.done, r.r.status,
		  (unsigned long long)r.r.recv_len);
	tap_check(s.done == 1 && s.s.status == TM_REQ_OK,
		  "unexpected: the send completes OK once (done %d)", s.done);

	/* posted first: longer than the card reads, so software-held */
	st1 = eu_node_stats(&W, 1);
	memset(rbuf, 0, MSG);
	recv_post(&r, 2, rbuf, 2u << 20, rmr);
	tap_check(eu_node_stats(&W, 1).sw_long_buf == st1.sw_long_buf + 1 &&
		  eu_node_stats(&W, 1).recv_to_card == st1.recv_to_card,
		  "a 2 MiB receive stays in software (sw_long_buf)");
	eu_fill(sbuf, MSG, 2);
	send_post(&s, 2, sbuf, MSG, smr);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_OK &&
		  r.r.recv_len == MSG && eu_check(rbuf, MSG, 2) &&
		  s.done == 1 && s.s.status == TM_REQ_OK,
		  "posted first: delivered whole, send OK");

	/* a card buffer the message does not fit: handed back, truncated */
	st1 = eu_node_stats(&W, 1);
	memset(rbuf, 0, MSG);
	recv_post(&r, 3, rbuf, 32u << 10, rmr);
	tap_check(eu_node_stats(&W, 1).recv_to_card == st1.recv_to_card + 1,
		  "a 32 KiB receive goes to the card");
	eu_fill(sbuf, MSG, 3);
	send_post(&s, 3, sbuf, MSG, smr);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_TRUNCATED && r.r.on_card &&
		  r.r.recv_len == (32u << 10) && r.r.msg_len == MSG &&
		  eu_check(rbuf, 32u << 10, 3) && rbuf[32u << 10] == 0 &&
		  s.done == 1 && s.s.status == TM_REQ_OK,
		  "card-held 32 KiB receive of 1 MiB: truncated, exactly the buffer, full length known");

	/* exactly max_msg_sz: the card may read it itself */
	st1 = eu_node_stats(&W, 1);
	recv_post(&r, 4, rbuf, MAXMSG, rmr);
	eu_fill(sbuf, MAXMSG, 4);
	send_post(&s, 4, sbuf, MAXMSG, smr);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_OK &&
		  eu_node_stats(&W, 1).rndv_card == st1.rndv_card + 1 &&
		  eu_check(rbuf, MAXMSG, 4) && s.done == 1 &&
		  s.s.status == TM_REQ_OK,
		  "a max_msg_sz rendezvous into a card buffer is read by the card");

	/* mprobe, then a shorter receive */
	eu_fill(sbuf, MSG, 5);
	send_post(&s, 5, sbuf, MSG, smr);
	eu_pump(&W);
	m = NULL;
	rc = tm_engine_improbe(W.node[1].eng, 1, 0, 5, &m, &info);
	tap_check(rc == TM_OK && info.len == MSG, "improbe: length %llu",
		  (unsigned long long)info.len);
	memset(rbuf, 0, MSG);
	memset(&r, 0, sizeof(r));
	r.r.cb = eu_recv_cb;
	tm_engine_imrecv(W.node[1].eng, &r.r, m, rbuf, MSG / 2, rmr);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_TRUNCATED &&
		  r.r.recv_len == MSG / 2 && r.r.msg_len == MSG &&
		  eu_check(rbuf, MSG / 2, 5) && rbuf[MSG / 2] == 0 &&
		  s.done == 1 && s.s.status == TM_REQ_OK,
		  "imrecv into half: truncated in pieces, send OK");
	st0 = eu_node_stats(&W, 0);
	tap_check(eu_quiet(&W) && st0.errors == 0 && eu_node_stats(&W, 1).errors == 0 &&
		  eu_node_stats(&W, 1).malformed == 0, "quiet, no errors");
}

static void test_huge(void)
{
	uint8_t *rbuf = W.node[1].arena;
	struct ibv_mr *rmr = W.node[1].mr, *hmr = NULL;
	struct tm_probe_info info;
	struct eu_send s;
	struct eu_recv r;
	uint8_t *h;
	int rc;

	h = mmap(NULL, HUGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (h == MAP_FAILED ||
	    tm_dev_reg(W.node[0].dev, h, HUGE, IBV_ACCESS_REMOTE_READ,
		       &hmr) != TM_OK) {
		tap_check(0, "map and register %llu bytes",
			  (unsigned long long)HUGE);
		return;
	}
	eu_fill(h, 256u << 10, 6);
	tap_check(send_post(&s, 6, h, HUGE, hmr) == TM_OK,
		  "a send of 5 GiB + 17 is accepted");
	eu_pump(&W);
	memset(&info, 0, sizeof(info));
	rc = tm_engine_iprobe(W.node[1].eng, 1, 0, 6, &info);
	tap_check(rc == TM_OK && info.len == HUGE,
		  "its probe says %llu (all 64 bits)",
		  (unsigned long long)info.len);
	memset(rbuf, 0, 256u << 10);
	recv_post(&r, 6, rbuf, 200u << 10, rmr);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_TRUNCATED &&
		  r.r.recv_len == (200u << 10) && r.r.msg_len == HUGE &&
		  eu_check(rbuf, 200u << 10, 6) && s.done == 1 &&
		  s.s.status == TM_REQ_OK,
		  "unexpected, into 200 KiB: truncated, full length, send OK");

	/* a card-held buffer: the saturated RVH is longer than it */
	recv_post(&r, 7, rbuf, 48u << 10, rmr);
	eu_fill(h, 64u << 10, 7);
	send_post(&s, 7, h, HUGE, hmr);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_TRUNCATED &&
		  r.r.on_card && r.r.recv_len == (48u << 10) &&
		  r.r.msg_len > (48u << 10) && eu_check(rbuf, 48u << 10, 7) &&
		  s.done == 1 && s.s.status == TM_REQ_OK,
		  "card-held 48 KiB receive: handed to software, truncated, send OK");
	tap_check(eu_quiet(&W), "quiet after the huge sends");
	tm_dev_dereg(W.node[0].dev, hmr);
	munmap(h, HUGE);
}

/*
 * A rendezvous request written by hand (node 0's QP, behind its engine's
 * back) whose metadata says 5000 bytes and whose RVH says 100: the length
 * the card would read wins, and the disagreement is counted.
 */
static void test_bad_md(void)
{
	uint8_t *hdr = W.node[0].arena + (3u << 20), *rbuf = W.node[1].arena;
	struct ibv_send_wr wr, *bad;
	struct tm_engine_stats st1 = eu_node_stats(&W, 1), st0 = eu_node_stats(&W, 0);
	struct tm_probe_info info;
	struct tm_rndv_md md = { .len = htobe64(5000) };
	struct ibv_rvh *rvh = (struct ibv_rvh *)(hdr + TMH_LEN);
	struct ibv_sge sge;
	struct eu_recv r;
	int rc;

	eu_fill(W.node[0].arena, 100, 9);
	tmh_fill(hdr, IBV_TMH_RNDV, TM_APP_RNDV | 77, tm_tag_make(1, 0, 9));
	rvh->va = htobe64((uintptr_t)W.node[0].arena);
	rvh->rkey = htobe32(W.node[0].mr->rkey);
	rvh->len = htobe32(100);
	memcpy(hdr + TMH_LEN + RVH_LEN, &md, sizeof(md));
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)hdr;
	sge.length = RNDV_HDR_LEN;
	sge.lkey = W.node[0].mr->lkey;
	wr.wr_id = UINT64_MAX; /* names no engine WR */
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	if (ibv_post_send(W.node[0].qp[1].tx, &wr, &bad)) {
		tap_check(0, "post a hand-made rendezvous request");
		return;
	}
	eu_pump(&W);
	memset(&info, 0, sizeof(info));
	rc = tm_engine_iprobe(W.node[1].eng, 1, 0, 9, &info);
	tap_check(rc == TM_OK && info.len == 100 &&
		  eu_node_stats(&W, 1).malformed == st1.malformed + 1,
		  "metadata 5000, RVH 100: probe says %llu, counted malformed",
		  (unsigned long long)info.len);
	memset(rbuf, 0, 200);
	recv_post(&r, 9, rbuf, 200, W.node[1].mr);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_OK &&
		  r.r.recv_len == 100 && eu_check(rbuf, 100, 9) && rbuf[100] == 0 &&
		  eu_node_stats(&W, 0).fin_unknown == st0.fin_unknown + 1,
		  "... and exactly 100 bytes are read, the FIN names no send");
}

/* The receiver cannot register its buffer: both sides fail. */
static void test_both_fail(void)
{
	struct ibv_mr *extra[16];
	uint8_t *buf = malloc(MSG), pad[64];
	struct eu_send s;
	struct eu_recv r;
	int n = 0;

	/* the receiver's spare registrations, taken */
	while (n < 16 && tm_dev_reg(W.node[1].dev, pad, sizeof(pad), 0,
				    &extra[n]) == TM_OK)
		n++;
	if (!buf || n == 16) {
		tap_check(0, "set-up of the full registration table");
		free(buf);
		return;
	}
	eu_fill(W.node[0].arena, MSG, 8);
	send_post(&s, 8, W.node[0].arena, MSG, W.node[0].mr);
	eu_pump(&W);
	recv_post(&r, 8, buf, MSG, NULL);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_ERROR,
		  "a receive that cannot register its buffer fails (status %d)",
		  r.r.status);
	tap_check(s.done == 1 && s.s.status == TM_REQ_ERROR,
		  "... and its send fails too, told by the FIN (status %d)",
		  s.s.status);
	tap_check(eu_quiet(&W), "quiet afterwards");
	while (n > 0)
		tm_dev_dereg(W.node[1].dev, extra[--n]);
	free(buf);
}

static void test_eager_fits(void)
{
	struct tm_engine_config ec;
	struct tm_dev_config dc;
	struct tm_engine *eng = NULL;
	struct tm_dev *dev = NULL;
	int rc;

	tm_dev_config_default(&dc);
	dc.provider = "soft";
	if (tm_dev_open(&dc, &dev) != TM_OK) {
		tap_check(0, "open a device");
		return;
	}
	tm_engine_config_default(&ec);
	ec.eager_limit = MAXMSG;
	rc = tm_engine_create(dev, &ec, &eng);
	tap_check(rc == TM_ERR_INVALID && !eng,
		  "eager_limit + header over the port's max_msg_sz: refused (%d)",
		  rc);
	if (eng)
		tm_engine_destroy(eng);
	tm_dev_close(dev);
}

int main(void)
{
	if (world(0))
		tap_bail("world set-up");
	test_paths();
	test_huge();
	test_bad_md();
	test_eager_fits();
	eu_world_fini(&W);
	/* few registrations: the test takes the spare ones */
	if (world(8))
		tap_bail("world set-up (8 registrations)");
	test_both_fail();
	eu_world_fini(&W);
	return tap_done();
}
