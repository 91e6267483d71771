/*
 * tm_card_check.c - for people with a TM-capable card: prints what the
 * device reports for tag matching and what tm_dev makes of it, then runs a
 * two-process self-test over the device in the hardware's QP layout
 * (tm_dev_pair_*): an eager tagged message matched by the card, and a
 * rendezvous the card reads and FINs.  scripts/card-check.sh runs it.
 *
 *   tm_card_check            caps only
 *   tm_card_check --self-test
 *
 * The two tags have buffers of their own, and the receiver checks the
 * eager data only once the sender has seen the FIN (the rendezvous done):
 * the order a loaded machine may give, made the only one.
 *
 * The provider is tm_dev's ("auto": a libibverbs TM device, else the soft
 * HCA; TM_DEV_PROVIDER=verbs|soft forces one).  Exit status: 0 ok, 1 the
 * self-test failed, 2 no TM-capable device.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/tm_types.h>

#include "dev/tm_dev.h"

#define RNDV_LEN (256 * 1024)
#define EAGER_LEN 200
#define TIMEOUT_S 10

static const char *mtu_str(int m)
{
	static const char *s[] = { "?", "256", "512", "1024", "2048", "4096" };

	return m >= 1 && m <= 5 ? s[m] : "?";
}

static void print_caps(const struct tm_dev *d)
{
	struct ibv_device_attr_ex a;

	memset(&a, 0, sizeof(a));
	if (ibv_query_device_ex(d->ctx, NULL, &a)) {
		printf("ibv_query_device_ex failed\n");
		return;
	}
	printf("device        %s\n", d->name);
	printf("tm_caps       max_num_tags %u  max_ops %u  max_rndv_hdr_size %u"
	       "  max_sge %u  flags 0x%x%s\n",
	       a.tm_caps.max_num_tags, a.tm_caps.max_ops,
	       a.tm_caps.max_rndv_hdr_size, a.tm_caps.max_sge,
	       a.tm_caps.flags,
	       (a.tm_caps.flags & IBV_TM_CAP_RC) ? " (RC)" : "");
	printf("device        max_qp_wr %d  max_srq_wr %d  max_cqe %d  "
	       "rd_atom %d/%d  ports %u\n", a.orig_attr.max_qp_wr,
	       a.orig_attr.max_srq_wr, a.orig_attr.max_cqe,
	       a.orig_attr.max_qp_rd_atom, a.orig_attr.max_qp_init_rd_atom,
	       a.orig_attr.phys_port_cnt);
	printf("tm_dev uses   port %u (%s, MTU %s), GID index %d, max_msg_sz "
	       "%u\n", d->port,
	       d->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB",
	       mtu_str(d->mtu), d->gid_index, d->max_msg_sz);
	printf("tm_dev sizes  tags %u  max_ops %u (advertised %u: mlx5's "
	       "command queue allows at most max_qp_wr / 4)  SRQ %u  TM CQ %u"
	       "  send CQ %u\n", d->caps.max_num_tags, d->caps.max_ops,
	       a.tm_caps.max_ops, d->srq_max_wr, d->tm_cq_size,
	       d->send_cq_size);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct wc {
	uint64_t wr_id;
	int status, opcode;
	unsigned flags;
	uint32_t byte_len;
};

/* Completions taken from the TM CQ ahead of their turn (wait_byte). */
static struct wc early[4];
static int nearly;

/* One TM-CQ completion into *w (polling the send CQ too): 1, 0 if none
 * yet, -1 if the poll failed. */
static int poll_tm(struct tm_dev *d, struct wc *w)
{
	struct ibv_wc swc;

	(void)ibv_poll_cq(d->send_cq, 1, &swc);
	switch (tm_dev_start_poll(d->tm_cq)) {
	case TM_OK:
		w->wr_id = d->tm_cq->wr_id;
		w->status = d->tm_cq->status;
		w->opcode = ibv_wc_read_opcode(d->tm_cq);
		w->flags = ibv_wc_read_wc_flags(d->tm_cq);
		w->byte_len = ibv_wc_read_byte_len(d->tm_cq);
		ibv_end_poll(d->tm_cq);
		return 1;
	case TM_ERR_NOT_FOUND:
		return 0;
	default:
		fprintf(stderr, "TM CQ poll failed\n");
		return -1;
	}
}

/* Next TM-CQ completion (an early one first), or -1 on timeout. */
static int next_tm(struct tm_dev *d, struct wc *w)
{
	double t0 = now();
	int r;

	if (nearly) {
		*w = early[0];
		memmove(early, early + 1, --nearly * sizeof(*early));
		return 0;
	}
	while (now() - t0 < TIMEOUT_S) {
		r = poll_tm(d, w);
		if (r)
			return r > 0 ? 0 : -1;
	}
	fprintf(stderr, "timed out waiting for a completion\n");
	return -1;
}

/*
 * A byte from the other process within TIMEOUT_S: 0, else -1.  Polls
 * the TM CQ meanwhile (a soft HCA moves on in its user's polls), keeping
 * what arrives for next_tm.
 */
static int wait_byte(struct tm_dev *d, int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	double t0 = now();
	char b;
	int r;

	while (now() - t0 < TIMEOUT_S) {
		if (poll(&p, 1, 0) == 1)
			return read(fd, &b, 1) == 1 ? 0 : -1;
		if (nearly == (int)(sizeof(early) / sizeof(early[0])))
			continue;
		r = poll_tm(d, &early[nearly]);
		if (r < 0)
			return -1;
		nearly += r;
	}
	return -1;
}

static void fill_tmh(void *p, uint8_t op, uint64_t tag)
{
	struct ibv_tmh *h = p;

	memset(h, 0, sizeof(*h));
	h->opcode = op;
	h->tag = htobe64(tag);
}

static int post_plain(struct tm_dev *d, char *buf, uint32_t len,
		      struct ibv_mr *mr, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = { (uintptr_t)buf, len, mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 1000 + (uint64_t)i,
					  .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_srq_recv(d->srq, &wr, &bad))
			return -1;
	}
	return 0;
}

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); goto out; } while (0)

/* One side of the self-test; fd is a socket to the other process. */
static int side(int fd, int receiver)
{
	struct tm_dev_config cfg;
	struct tm_dev *d = NULL;
	struct tm_dev_pair pair = { 0 };
	struct tm_dev_pair_addr me, peer;
	struct ibv_mr *mr = NULL;
	char *mem = NULL, *plain, *data;
	struct wc w;
	int rc = 1, i;

	tm_dev_config_default(&cfg);
	cfg.rcache = 0;
	if (tm_dev_open(&cfg, &d) != TM_OK)
		return 2;
	mem = calloc(1, 2 * RNDV_LEN + 64 * 1024);
	if (!mem || tm_dev_reg(d, mem, 2 * RNDV_LEN + 64 * 1024,
			       IBV_ACCESS_REMOTE_READ |
			       IBV_ACCESS_REMOTE_WRITE, &mr) != TM_OK)
		FAIL("memory registration failed\n");
	plain = mem;                 /* 33+ plain buffers share it */
	data = mem + 64 * 1024;
	if (post_plain(d, plain, 4096, mr, (int)TM_DEV_MIN_PLAIN))
		FAIL("posting %u plain receives failed\n", TM_DEV_MIN_PLAIN);
	if (tm_dev_pair_create(d, &pair) != TM_OK)
		FAIL("creating the QP pair failed\n");
	tm_dev_pair_addr(d, &pair, &me);
	if (write(fd, &me, sizeof(me)) != sizeof(me) ||
	    read(fd, &peer, sizeof(peer)) != sizeof(peer))
		FAIL("address exchange failed\n");
	if (tm_dev_pair_connect(d, &pair, &peer) != TM_OK)
		FAIL("connecting the QP pair failed\n");

	if (receiver) {
		/* tag 0x1000 (eager) into data, 0x1001 (rendezvous) into
		 * rdata: one buffer each, as a card's user gives them */
		char *rdata = data + RNDV_LEN;
		struct ibv_sge sge = { 0, RNDV_LEN, mr->lkey };
		struct ibv_ops_wr op, *bad;
		char go = 1;

		for (i = 0; i < 2; i++) {
			sge.addr = (uintptr_t)(i ? rdata : data);
			memset(&op, 0, sizeof(op));
			op.wr_id = 1 + (uint64_t)i;
			op.opcode = IBV_WR_TAG_ADD;
			op.flags = IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC;
			op.tm.add.recv_wr_id = 100 + (uint64_t)i;
			op.tm.add.sg_list = &sge;
			op.tm.add.num_sge = 1;
			op.tm.add.tag = 0x1000 + (uint64_t)i;
			op.tm.add.mask = ~0ULL;
			if (ibv_post_srq_ops(d->srq, &op, &bad))
				FAIL("posting a tag failed\n");
			if (next_tm(d, &w) || w.opcode != IBV_WC_TM_ADD ||
			    w.status != IBV_WC_SUCCESS)
				FAIL("tag ADD did not complete\n");
		}
		if (write(fd, &go, 1) != 1)
			FAIL("signal failed\n");
		/* eager: one completion MATCH|DATA_VALID */
		if (next_tm(d, &w) || w.opcode != IBV_WC_TM_RECV ||
		    w.status != IBV_WC_SUCCESS || w.wr_id != 100 ||
		    !(w.flags & IBV_WC_TM_MATCH))
			FAIL("eager: no match (status %d flags 0x%x)\n",
			     w.status, w.flags);
		if (!(w.flags & IBV_WC_TM_DATA_VALID) &&
		    (next_tm(d, &w) || !(w.flags & IBV_WC_TM_DATA_VALID)))
			FAIL("eager: no data completion\n");
		if (wait_byte(d, fd))
			FAIL("eager: the sender saw no FIN\n");
		for (i = 0; i < EAGER_LEN; i++)
			if (data[i] != (char)i)
				FAIL("eager: wrong data at %d\n", i);
		printf("self-test: eager %d B matched by the card\n",
		       EAGER_LEN);
		/* rendezvous: MATCH, then DATA_VALID after the card's read */
		if (next_tm(d, &w) || w.opcode != IBV_WC_TM_RECV ||
		    w.wr_id != 101)
			FAIL("rndv: no match completion\n");
		if (w.status == IBV_WC_TM_RNDV_INCOMPLETE)
			FAIL("rndv: the card handed it to software (no offload "
			     "on this QP?)\n");
		if (!(w.flags & IBV_WC_TM_DATA_VALID) &&
		    (next_tm(d, &w) || w.status != IBV_WC_SUCCESS ||
		     !(w.flags & IBV_WC_TM_DATA_VALID)))
			FAIL("rndv: no data completion\n");
		if (w.byte_len != RNDV_LEN)
			FAIL("rndv: length %u, expected %u\n", w.byte_len,
			     RNDV_LEN);
		for (i = 0; i < RNDV_LEN; i++)
			if (rdata[i] != (char)(i * 7))
				FAIL("rndv: wrong data at %d\n", i);
		printf("self-test: rendezvous %d B read by the card\n",
		       RNDV_LEN);
	} else {
		struct ibv_sge sge = { (uintptr_t)data, 0, mr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;
		char *src = data + 4096;
		struct ibv_rvh *rvh;
		char go;

		if (read(fd, &go, 1) != 1)
			FAIL("signal failed\n");
		fill_tmh(data, IBV_TMH_EAGER, 0x1000);
		for (i = 0; i < EAGER_LEN; i++)
			data[sizeof(struct ibv_tmh) + i] = (char)i;
		sge.length = sizeof(struct ibv_tmh) + EAGER_LEN;
		if (ibv_post_send(pair.tx, &wr, &bad))
			FAIL("eager send failed\n");
		for (i = 0; i < RNDV_LEN; i++)
			src[i] = (char)(i * 7);
		fill_tmh(data + 1024, IBV_TMH_RNDV, 0x1001);
		rvh = (struct ibv_rvh *)(data + 1024 + sizeof(struct ibv_tmh));
		rvh->va = htobe64((uintptr_t)src);
		rvh->rkey = htobe32(mr->rkey);
		rvh->len = htobe32(RNDV_LEN);
		sge.addr = (uintptr_t)(data + 1024);
		sge.length = sizeof(struct ibv_tmh) + sizeof(struct ibv_rvh);
		if (ibv_post_send(pair.tx, &wr, &bad))
			FAIL("rendezvous send failed\n");
		/* the receiver's card FINs to our tx QP: a NO_TAG arrival */
		if (next_tm(d, &w) || w.opcode != IBV_WC_TM_NO_TAG ||
		    (uint8_t)plain[0] != IBV_TMH_FIN)
			FAIL("no FIN from the receiver's card\n");
		printf("self-test: FIN from the receiver's card\n");
		if (write(fd, &go, 1) != 1)
			FAIL("signal failed\n");
	}
	rc = 0;
out:
	if (pair.rx || pair.tx)
		tm_dev_pair_destroy(d, &pair);
	if (mr)
		tm_dev_dereg(d, mr);
	free(mem);
	tm_dev_close(d);
	return rc;
}

int main(int argc, char **argv)
{
	struct tm_dev_config cfg;
	struct tm_dev *d;
	int sv[2], st, rc;
	pid_t pid;

	tm_dev_config_default(&cfg);
	cfg.rcache = 0;
	if (tm_dev_open(&cfg, &d) != TM_OK) {
		printf("no TM-capable device (tag matching needs a ConnectX-5 "
		       "or later with an RC TM capability); nothing to check\n");
		return 2;
	}
	print_caps(d);
	tm_dev_close(d);
	if (argc < 2 || strcmp(argv[1], "--self-test"))
		return 0;
	fflush(stdout);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(sv[0]);
		rc = side(sv[1], 0);
		fflush(stdout);
		_exit(rc);
	}
	close(sv[1]);
	rc = side(sv[0], 1);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		rc = rc ? rc : 1;
	printf("self-test: %s\n", rc ? "FAILED" : "passed");
	return rc;
}
