/*
 * test_hostile.c - the soft HCA against peers and processes it must not
 * trust: an unrelated process of the same user (without ptrace rights over
 * the rank, nor the key its GID carries: it knows only what /proc shows)
 * trying to inject a packet or grant itself an rkey, a peer
 * whose segment header is corrupt or changes after connect, a peer gone
 * before the connect, and a region deregistered while a copy read of it
 * is being served.  Malformed packets are test_hostile_packets.c's.
 *
 * White box (sh_reach.h).  Cases that could crash the victim run in a
 * child, so a crash is a failed check rather than a lost test program.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "tap.h"
#include "sh_util.h"
#include "sh_reach.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

static void child_check(const char *what, int (*fn)(int), int arg)
{
	int rc = run_child(fn, arg);

	if (rc < 0)
		tap_check(0, "%s: victim killed by signal %d (%s)", what, -rc,
			  strsignal(-rc));
	else
		tap_check(rc == 0, "%s (code %d)", what, rc);
}

/* ---- an unrelated process ------------------------------------------- */

struct hostile_job {
	union ibv_gid gid;
	uint32_t qpn;           /* victim QP to inject into */
	uint32_t from_qpn;
};

struct hostile_report {
	int rings_writable;
	int pub_writable;
	int injected;
	int rkey_granted;
	char how[64];
};

#define FORGED "FORGED-BY-ANOTHER-JOB"
#define FORGED_KEY 0xbeef0000u

static int hostile_req[2], hostile_rep[2];
static pid_t hostile_pid = -1;
static int hostile_isolated;

/*
 * The unrelated process: forked before any context exists (so it maps
 * nothing of the victim's) and moved into its own user namespace, which
 * takes away any ptrace right over the victim while it stays the same
 * user for file permissions.  It does what such a process can: find the
 * victim's segments, write a packet into a ring, grant an rkey.
 */
static void hostile_main(void)
{
	struct hostile_report rep;
	struct hostile_job job;
	struct reach r;

	memset(&rep, 0, sizeof(rep));
	if (read(hostile_req[0], &job, sizeof(job)) != sizeof(job))
		_exit(1);
	reach_victim(&job.gid, &r);
	snprintf(rep.how, sizeof(rep.how), "%s", r.how);
	rep.rings_writable = r.rings != NULL;
	rep.pub_writable = r.pub != NULL;
	if (r.rings) {
		struct sh_pkt h;
		uint8_t msg[64];
		uint32_t n = sh_put_tmh(msg, IBV_TMH_NO_TAG, 0, 0);

		memcpy(msg + n, FORGED, sizeof(FORGED));
		n += sizeof(FORGED);
		memset(&h, 0, sizeof(h));
		h.kind = SH_PKT_SEND;
		h.flags = SH_PKT_FIRST | SH_PKT_LAST;
		h.len = h.msg_len = n;
		h.src_qpn = job.from_qpn;
		forge(&r, job.qpn, &h, msg, n, 0);
		rep.injected = 1;
	}
	if (r.pub) {
		uint32_t last = r.head.max_mr - 1;
		struct sh_mr_slot *s = reach_mr(&r, last);

		s->addr = 0;
		s->length = UINT64_MAX;
		s->access = IBV_ACCESS_REMOTE_READ;
		atomic_store(&s->key, FORGED_KEY | (last + 1));
		rep.rkey_granted = 1;
	}
	reach_drop(&r);
	if (write(hostile_rep[1], &rep, sizeof(rep)) != sizeof(rep))
		_exit(1);
	_exit(0);
}

static void hostile_start(void)
{
	int isolated[2];

	if (pipe(hostile_req) || pipe(hostile_rep) || pipe(isolated))
		sh_die("pipe: %s", strerror(errno));
	hostile_pid = fork();
	if (hostile_pid < 0)
		sh_die("fork: %s", strerror(errno));
	if (!hostile_pid) {
		char ok = unshare(CLONE_NEWUSER) == 0;

		if (write(isolated[1], &ok, 1) != 1 || !ok)
			_exit(1);
		hostile_main();
	}
	{
		char ok = 0;

		if (read(isolated[0], &ok, 1) != 1)
			ok = 0;
		hostile_isolated = ok;
	}
	close(isolated[0]);
	close(isolated[1]);
}

static void test_unrelated_process(void)
{
	struct softhca_config cfg;
	struct hostile_report rep;
	struct hostile_job job;
	struct sh_env e;
	struct sh_wc wc;
	char *buf, *dst, *secret;
	int got_forged = 0, n, ret;

	if (!hostile_isolated) {
		for (n = 0; n < 3; n++)
			tap_check(1, "# SKIP unrelated process: no user namespace");
		return;
	}
	sh_config(&cfg);
	ret = sh_env_open(&e, &cfg, SOFTHCA_SCHED_MANUAL, 1);
	if (ret)
		sh_die("sh_env_open: %s", strerror(ret));
	buf = sh_alloc(&e.b, 256);
	memset(buf, 0, 256);
	sh_post_plain(&e.b, 7, buf, 256);
	sh_flush(&e);
	/* what anyone may learn (the pid, the descriptor: /proc, the
	 * socket's name), not the key the job's address exchange carries */
	job.gid = e.b.gid;
	job.gid.raw[2] ^= 0x5a;
	job.gid.raw[8] ^= 0xa5;
	job.qpn = e.p[0].rqp->qp_num;
	job.from_qpn = e.p[0].sqp->qp_num;
	if (write(hostile_req[1], &job, sizeof(job)) != sizeof(job) ||
	    read(hostile_rep[0], &rep, sizeof(rep)) != sizeof(rep))
		sh_die("hostile process did not answer");
	waitpid(hostile_pid, NULL, 0);
	tap_check(!rep.rings_writable && !rep.pub_writable,
		  "a process of the same user without ptrace rights or the "
		  "GID's key maps no segment of a rank writable (%s)",
		  rep.how);

	for (n = 0; n < 100; n++) {
		sh_flush(&e);
		while (sh_poll(e.b.cq, &wc) == 1)
			if (wc.wr_id == 7 && wc.status == IBV_WC_SUCCESS)
				got_forged = 1;
	}
	got_forged |= memmem(buf, 256, FORGED, sizeof(FORGED)) != NULL;
	tap_check(!got_forged,
		  "a packet forged by an unrelated process is not delivered "
		  "(injected: %d)", rep.injected);

	/* The forged grant, if it landed, would let a read take secret. */
	secret = malloc(64);
	memset(secret, 'S', 64);
	dst = sh_alloc(&e.a, 64);
	memset(dst, 0, 64);
	sh_post_read(e.p[0].sqp, dst, e.a.mr->lkey, 64,
		     (uintptr_t)secret, FORGED_KEY | cfg.max_mr, 9);
	ret = sh_wait(&e, e.p[0].scq, &wc, 5000);
	tap_check(ret == 1 && wc.status == IBV_WC_REM_ACCESS_ERR &&
		  !memchr(dst, 'S', 64),
		  "an rkey an unrelated process wrote into a rank's table grants "
		  "nothing (granted: %d; %s)", rep.rkey_granted,
		  ret == 1 ? sh_wc_str(&wc) : "no completion");
	free(secret);
	sh_env_close(&e);
}

/* ---- the rkey table: nobody but its owner writes it ------------------ */

static void test_rkey_table_readonly(void)
{
	struct ibv_context *ctx = sh_open_ctx();
	union ibv_gid gid;
	struct reach r;
	uint32_t w[4];
	int pidfd, fd, wr_err = 0, trunc_err = 0;
	char byte = 1;

	if (!ctx)
		sh_die("open");
	sh_v()->query_gid(ctx, 1, 0, &gid);
	/* Even this process, which may ptrace itself, gets it read-only. */
	reach_victim(&gid, &r);
	memcpy(w, gid.raw, sizeof(w));
	pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	fd = pidfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pidfd,
					   (int)(ntohl(w[2]) & 0xffffu), 0);
	if (fd >= 0) {
		if (pwrite(fd, &byte, 1, 4096) < 0)
			wr_err = errno;
		if (ftruncate(fd, 0) < 0)
			trunc_err = errno;
		close(fd);
	}
	if (pidfd >= 0)
		close(pidfd);
	tap_check(r.rings && !r.pub && fd >= 0 && wr_err == EPERM &&
		  trunc_err == EPERM,
		  "a peer maps the rings read-write but the rkey table only "
		  "read-only (write: %s, truncate: %s)", strerror(wr_err),
		  strerror(trunc_err));
	reach_drop(&r);
	sh_v()->close_device(ctx);
}

/* ---- a peer's segment header ----------------------------------------- */

enum bad_header {
	HDR_RING_DEPTH_0,
	HDR_MTU_HUGE,
	HDR_SIZE_MISMATCH,
	HDR_UNSEALED,
	HDR_COUNT
};

static const char *hdr_name[HDR_COUNT] = {
	"ring_depth 0",
	"mtu 2^31",
	"header size not the segment's",
	"segment not sealed (a third party could rewrite the table)",
};

/*
 * A fabricated peer: a copy of a real context's published segment with
 * one field spoiled, in a memfd of this process that a GID names.
 */
static int bad_header_child(int which)
{
	struct ibv_context *ctx = sh_open_ctx();
	struct sh_context *sc;
	union ibv_gid gid;
	struct sh_env e;
	struct sh_seg *h;
	uint8_t *copy;
	int fd, ret, seals;

	if (!ctx || sh_env_open(&e, NULL, SOFTHCA_SCHED_AUTO, 0))
		return 100;
	sc = to_sh_ctx(ctx);
	fd = memfd_create("fake", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)sc->lay.pub_size))
		return 101;
	copy = mmap(NULL, sc->lay.pub_size, PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, 0);
	if (copy == MAP_FAILED)
		return 102;
	memcpy(copy, sc->seg, sc->lay.pub_size);
	h = (struct sh_seg *)copy;
	seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE;
	switch (which) {
	case HDR_RING_DEPTH_0:
		h->ring_depth = 0;
		break;
	case HDR_MTU_HUGE:
		h->mtu = 1u << 31;
		break;
	case HDR_SIZE_MISMATCH:
		h->size = sc->lay.pub_size * 2;
		break;
	case HDR_UNSEALED:
		seals = 0;
		break;
	}
	if (seals && fcntl(fd, F_ADD_SEALS, seals))
		return 103;
	sh_gid_encode(&gid, getpid(), fd, h->nonce, 0x4d32u);
	{
		struct ibv_cq_ex *cq = sh_cq_ex(e.a.ctx, 16);
		struct ibv_qp *qp = sh_qp_create(&e.a, cq, e.a.srq, NULL);
		char *msg = sh_alloc(&e.a, 64);

		ret = sh_qp_connect(qp, &gid, SH_QPN_BASE);
		if (!ret) {
			/* Connected to it anyway: the send must not crash. */
			sh_qp_send(&e.a, qp, msg, 64, 1, IBV_SEND_SIGNALED);
			softhca_drain(e.a.ctx);
			return 1;
		}
	}
	return ret == EPROTO ? 0 : 2;
}

static void test_peer_header_changes(void)
{
	const uint32_t len = 5 * 4096 + 100;
	struct sh_env e;
	struct sh_wc wc;
	char *buf, *msg;
	int ret;

	if (sh_env_open(&e, NULL, SOFTHCA_SCHED_AUTO, 1))
		sh_die("env");
	buf = sh_alloc(&e.b, len + SH_TMH_LEN);
	sh_post_plain(&e.b, 1, buf, len + SH_TMH_LEN);
	msg = malloc(len);
	sh_fill(msg, len, 77);
	/* The owner rewrites its published geometry after the connect. */
	to_sh_ctx(e.b.ctx)->seg->ring_depth = 0;
	to_sh_ctx(e.b.ctx)->seg->mtu = 1u << 31;
	to_sh_ctx(e.b.ctx)->seg->slot_size = 1u << 31;
	sh_send_tm(&e, 0, IBV_TMH_NO_TAG, 0, 0, msg, len, 5);
	ret = sh_wait(&e, e.b.cq, &wc, 5000);
	free(msg);
	tap_check(ret == 1 && wc.status == IBV_WC_SUCCESS &&
		  sh_check(buf + SH_TMH_LEN, len, 77),
		  "a peer header rewritten after connect changes nothing: the "
		  "geometry was copied and checked once");
	sh_env_close(&e);
}

/* ---- a peer that exited before the connect ---------------------------- */

/*
 * The connect succeeds (as on a card) and the QP fails at its first use:
 * here a rendezvous that arrives on it (forged into its ring) makes the
 * card start a copy read towards the exited peer, which must fail the QP,
 * not write a request to a ring that does not exist.
 */
static int gone_peer_child(int unused)
{
	struct softhca_config cfg;
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr init;
	union ibv_gid gid;
	struct ibv_cq_ex *cq;
	struct ibv_qp *qp;
	struct sh_env e;
	struct reach r;
	struct sh_pkt h;
	uint8_t msg[SH_TMH_LEN + SH_RVH_LEN + 8] = { 0 };
	uint32_t w[4], handle;
	pid_t pid;
	char *buf;

	(void)unused;
	pid = fork();
	if (!pid)
		_exit(0);
	waitpid(pid, NULL, 0);
	sh_config(&cfg);
	cfg.force_copy_read = 1;
	if (sh_env_open(&e, &cfg, SOFTHCA_SCHED_MANUAL, 0))
		return 100;
	w[0] = htonl(0x53544d32u);
	w[1] = htonl((uint32_t)pid);
	w[2] = htonl(3);
	w[3] = htonl(1);
	memcpy(gid.raw, w, sizeof(w));
	cq = sh_cq_ex(e.b.ctx, 16);
	/* no send queue: the card's rendezvous QP (mlx5 rule 10), so the
	 * card itself starts the read towards the exited peer */
	memset(&init, 0, sizeof(init));
	init.send_cq = init.recv_cq = ibv_cq_ex_to_cq(cq);
	init.srq = e.b.srq;
	init.qp_type = IBV_QPT_RC;
	qp = cq ? sh_v()->create_qp(e.b.pd, &init) : NULL;
	if (!qp || sh_qp_connect(qp, &gid, SH_QPN_BASE))
		return 1;
	buf = sh_alloc(&e.b, 4096);
	sh_add(&e.b, 1, 2, buf, 4096, 5, ~0ull, 0,
	       IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC, &handle);
	softhca_drain(e.b.ctx);
	reach_victim(&e.b.gid, &r);
	if (!r.rings)
		return 101;
	sh_put_tmh(msg, IBV_TMH_RNDV, 0, 5);
	sh_put_rvh(msg + SH_TMH_LEN, 0x10000, 0x10001, 100);
	memset(&h, 0, sizeof(h));
	h.kind = SH_PKT_SEND;
	h.flags = SH_PKT_FIRST | SH_PKT_LAST;
	h.len = h.msg_len = sizeof(msg);
	forge(&r, qp->qp_num, &h, msg, sizeof(msg), 0);
	softhca_drain(e.b.ctx);
	softhca_drain(e.b.ctx);
	if (sh_v()->query_qp(qp, &at, IBV_QP_STATE, &init) ||
	    at.qp_state != IBV_QPS_ERR)
		return 2;
	return 0;
}

/* ---- a region deregistered while a copy read of it is served ---------- */

static void test_read_revalidated(void)
{
	struct softhca_config cfg;
	const uint32_t len = 1u << 20, mtu = 4096;
	struct ibv_mr *mr;
	struct sh_env e;
	struct sh_wc wc;
	char *src, *dst;
	int i, ret;

	sh_config(&cfg);
	cfg.force_copy_read = 1;
	cfg.mtu = mtu;
	if (sh_env_open(&e, &cfg, SOFTHCA_SCHED_MANUAL, 1))
		sh_die("env");
	src = aligned_alloc(4096, len);
	memset(src, 'R', len);
	mr = sh_v()->reg_mr(e.b.pd, src, len, IBV_ACCESS_REMOTE_READ);
	dst = sh_alloc(&e.a, len);
	memset(dst, 0, len);
	sh_post_read(e.p[0].sqp, dst, e.a.mr->lkey, len, (uintptr_t)src,
		     mr->rkey, 4);
	/* request out, taken, and the first 4 chunks answered */
	softhca_step(e.a.ctx, SOFTHCA_WORK_TX, e.p[0].sqp->qp_num);
	softhca_step(e.b.ctx, SOFTHCA_WORK_RX, e.p[0].rqp->qp_num);
	for (i = 0; i < 4; i++)
		softhca_step(e.b.ctx, SOFTHCA_WORK_TX, e.p[0].rqp->qp_num);
	sh_v()->dereg_mr(mr);
	memset(src, 'X', len); /* what the application put there since */
	ret = sh_wait(&e, e.p[0].scq, &wc, 5000);
	tap_check(ret == 1 && wc.status == IBV_WC_REM_ACCESS_ERR &&
		  !memchr(dst, 'X', len),
		  "a copy read checks the rkey per chunk: deregistered after 4 "
		  "chunks, the read fails and nothing after is copied (%s)",
		  ret == 1 ? sh_wc_str(&wc) : "no completion");
	sh_env_close(&e);
	free(src);
}

int main(void)
{
	int i;

	hostile_start();
	test_unrelated_process();
	test_rkey_table_readonly();
	for (i = 0; i < HDR_COUNT; i++) {
		char what[128];

		snprintf(what, sizeof(what), "peer header with %s: connect "
			 "refused with EPROTO", hdr_name[i]);
		child_check(what, bad_header_child, i);
	}
	child_check("a peer that exited before the connect: the connect "
		    "succeeds, the first use fails the QP without a crash",
		    gone_peer_child, 0);
	test_peer_header_changes();
	test_read_revalidated();
	return tap_done();
}
