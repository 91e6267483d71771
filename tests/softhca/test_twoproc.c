/*
 * test_twoproc.c - soft HCA across two processes (fork; addresses exchanged
 * over pipes): eager and rendezvous through shared memory and
 * process_vm_readv, the copy-read fallback (force_copy_read), software RDMA
 * reads of the peer, and a dead peer turning pending sends, and a send
 * posted right after its death, into IBV_WC_RETRY_EXC_ERR.
 *
 * The parent is the receiver and prints TAP; the child is the sender and
 * reports back over a pipe.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "sh_util.h"

#define ALL ~0ULL
#define MD (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)
#define RNDV_LEN (1u << 20)
#define BIG_EAGER 20000
#define WAIT_S 15.0

struct info {
	union ibv_gid gid;
	uint32_t qpn;
	uint64_t va;
	uint32_t rkey;
	uint32_t len;
};

struct report {
	int setup_ok;
	int fin_ok;
	int sends_ok;
	char what[160];
};

static int to_child[2], to_parent[2];

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t r = write(fd, c, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Reads n bytes; while waiting, polls cq (keeps the card running). */
static int read_all(int fd, void *p, size_t n, struct ibv_cq_ex *cq, double timeout)
{
	double end = sh_now() + timeout;
	char *c = p;

	while (n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (sh_now() > end)
			return -1;
		if (cq) {
			/* A poll call runs the card (AUTO mode); completions
			 * stay queued for the caller when it looks. */
			struct ibv_poll_cq_attr pa = { .comp_mask = 0 };

			if (ibv_start_poll(cq, &pa) == 0)
				ibv_end_poll(cq);
		}
		if (poll(&pf, 1, cq ? 1 : 100) <= 0)
			continue;
		r = read(fd, c, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

static int ready(int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };

	return poll(&pf, 1, 0) > 0;
}

/* A side and one QP attached to its TM-SRQ, connected after the exchange. */
struct proc {
	struct sh_side s;
	struct ibv_cq_ex *scq;
	struct ibv_qp *qp;
};

static int proc_open(struct proc *p, const struct softhca_config *cfg)
{
	if (softhca_set_config(cfg))
		return -1;
	if (sh_side_open(&p->s, SOFTHCA_SCHED_AUTO, 1))
		return -1;
	p->scq = sh_cq_ex(p->s.ctx, 64);
	if (!p->scq)
		return -1;
	p->qp = sh_qp_create(&p->s, p->scq, p->s.srq, NULL);
	return p->qp ? 0 : -1;
}

static void proc_close(struct proc *p)
{
	if (p->qp)
		softhca_verbs()->destroy_qp(p->qp);
	sh_cq_destroy(p->scq);
	sh_side_close(&p->s);
}

static int wait_wc(struct ibv_cq_ex *cq, struct sh_wc *wc, double timeout)
{
	return sh_wait(NULL, cq, wc, (int)(timeout * 1000));
}

/* ---- child: the sender ---------------------------------------------------- */

static void child_main(const struct softhca_config *cfg, int mode)
{
	struct report rep;
	struct proc p;
	struct info me, peer;
	struct ibv_mr *mr;
	struct sh_wc wc;
	char *data, *eag, *fin, *msg, go;
	int i, n;

	alarm(40);
	memset(&rep, 0, sizeof(rep));
	memset(&p, 0, sizeof(p));
	if (proc_open(&p, cfg))
		_exit(10);
	data = malloc(RNDV_LEN);
	sh_fill(data, RNDV_LEN, 42);
	mr = softhca_verbs()->reg_mr(p.s.pd, data, RNDV_LEN, IBV_ACCESS_REMOTE_READ);
	if (!mr)
		_exit(11);
	memset(&me, 0, sizeof(me));
	me.gid = p.s.gid;
	me.qpn = p.qp->qp_num;
	me.va = (uintptr_t)data;
	me.rkey = mr->rkey;
	me.len = RNDV_LEN;
	if (write_all(to_parent[1], &me, sizeof(me)) ||
	    read_all(to_child[0], &peer, sizeof(peer), NULL, 20))
		_exit(12);
	if (sh_qp_connect(p.qp, &peer.gid, peer.qpn))
		_exit(13);

	if (mode == 1) {
		/* Dead-peer test: report ready, then die without closing. */
		go = 'r';
		write_all(to_parent[1], &go, 1);
		if (read_all(to_child[0], &go, 1, NULL, 20))
			_exit(14);
		if (go == 'x')
			_exit(0);
		/* 'k': wait to be killed, with the card running. */
		for (;;) {
			sh_poll(p.s.cq, &wc);
			usleep(1000);
		}
	}

	fin = sh_alloc(&p.s, 64);
	memset(fin, 0xEE, 64);
	sh_post_plain(&p.s, 77, fin, 64);
	rep.setup_ok = 1;
	if (read_all(to_child[0], &go, 1, NULL, 20))
		_exit(15);

	/* eager 100 B (tag 1), eager 20000 B (tag 2), RNDV 1 MiB (tag 3) */
	eag = malloc(SH_TMH_LEN + BIG_EAGER);
	sh_put_tmh(eag, IBV_TMH_EAGER, 0x101, 1);
	sh_fill(eag + SH_TMH_LEN, 100, 1);
	n = sh_qp_send(&p.s, p.qp, eag, SH_TMH_LEN + 100, 1, IBV_SEND_SIGNALED);
	sh_put_tmh(eag, IBV_TMH_EAGER, 0x102, 2);
	sh_fill(eag + SH_TMH_LEN, BIG_EAGER, 2);
	n |= sh_qp_send(&p.s, p.qp, eag, SH_TMH_LEN + BIG_EAGER, 2, IBV_SEND_SIGNALED);
	msg = malloc(64);
	i = sh_put_tmh(msg, IBV_TMH_RNDV, 0x103, 3);
	i += sh_put_rvh(msg + i, (uintptr_t)data, mr->rkey, RNDV_LEN);
	n |= sh_qp_send(&p.s, p.qp, msg, i, 3, IBV_SEND_SIGNALED);

	/* Three send completions and the FIN. */
	{
		double end = sh_now() + WAIT_S;
		int sends = 0, fins = 0;

		while (sh_now() < end && (sends < 3 || !fins)) {
			if (sh_poll(p.scq, &wc) == 1) {
				if (wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND &&
				    wc.wr_id == (uint64_t)(sends + 1))
					sends++;
				else
					snprintf(rep.what, sizeof(rep.what), "send wc: %s",
						 sh_wc_str(&wc));
			}
			if (sh_poll(p.s.cq, &wc) == 1) {
				struct ibv_tmh tmh;
				struct ibv_rvh rvh;

				memcpy(&tmh, fin, sizeof(tmh));
				memcpy(&rvh, fin + 16, sizeof(rvh));
				fins = wc.opcode == IBV_WC_TM_NO_TAG && wc.wr_id == 77 &&
				       wc.byte_len == 32 && tmh.opcode == IBV_TMH_FIN &&
				       be64toh(tmh.tag) == 3 && be32toh(tmh.app_ctx) == 0x103 &&
				       be64toh(rvh.va) == (uintptr_t)data &&
				       be32toh(rvh.rkey) == mr->rkey &&
				       be32toh(rvh.len) == RNDV_LEN;
				if (!fins)
					snprintf(rep.what, sizeof(rep.what), "fin wc: %s",
						 sh_wc_str(&wc));
				fins = fins ? 1 : -1;
			}
		}
		rep.sends_ok = !n && sends == 3;
		rep.fin_ok = fins == 1;
	}
	write_all(to_parent[1], &rep, sizeof(rep));
	/* Keep the card running (copy reads are served by it) until told. */
	while (!ready(to_child[0])) {
		sh_poll(p.s.cq, &wc);
		sh_poll(p.scq, &wc);
	}
	softhca_verbs()->dereg_mr(mr);
	proc_close(&p);
	_exit(0);
}

static pid_t spawn(const struct softhca_config *cfg, int mode)
{
	pid_t pid;

	if (pipe(to_child) || pipe(to_parent))
		tap_bail("pipe");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		tap_bail("fork");
	if (pid == 0) {
		close(to_child[1]);
		close(to_parent[0]);
		child_main(cfg, mode);
		_exit(99);
	}
	close(to_child[0]);
	close(to_parent[1]);
	return pid;
}

static void unspawn(pid_t pid)
{
	int st;
	double end = sh_now() + 10;

	close(to_child[1]);
	close(to_parent[0]);
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (sh_now() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			break;
		}
		usleep(1000);
	}
}

static int connect_to_child(struct proc *p, struct info *peer)
{
	struct info me;

	if (read_all(to_parent[0], peer, sizeof(*peer), NULL, 20))
		return -1;
	memset(&me, 0, sizeof(me));
	me.gid = p->s.gid;
	me.qpn = p->qp->qp_num;
	if (write_all(to_child[1], &me, sizeof(me)))
		return -1;
	return sh_qp_connect(p->qp, &peer->gid, peer->qpn);
}

/* ---- parent: eager + rendezvous ------------------------------------------ */

static void test_transfer(int copy)
{
	const char *mode = copy ? "copy-read" : "cma";
	struct softhca_config cfg;
	struct softhca_stats st0, st;
	struct report rep;
	struct proc p;
	struct info peer;
	struct sh_wc wc;
	char *t1, *t2, *t3, *rd, go = 'g';
	int dv[4] = { 0 }, mt[4] = { 0 }, bad = 0, n;
	double end;
	pid_t pid;

	sh_config(&cfg);
	/* one QP per side with a send queue: card rendezvous only in the
	 * lenient model (strict shapes: test_mlx5_rules, test_mlx5_replay) */
	cfg.strict = 0;
	cfg.force_copy_read = copy;
	pid = spawn(&cfg, 0);
	memset(&p, 0, sizeof(p));
	if (proc_open(&p, &cfg))
		tap_bail("parent side");
	n = connect_to_child(&p, &peer);
	tap_check(n == 0, "[%s] QPs of two processes connected through GIDs", mode);
	if (n)
		tap_bail("connect");
	t1 = sh_alloc(&p.s, 256 + 64);
	t2 = sh_alloc(&p.s, BIG_EAGER + 64);
	t3 = sh_alloc(&p.s, RNDV_LEN + 64);
	memset(t1, 0xEE, 256 + 64);
	memset(t2, 0xEE, BIG_EAGER + 64);
	memset(t3, 0xEE, RNDV_LEN + 64);
	sh_add(&p.s, 1, 11, t1, 256, 1, ALL, 0, IBV_OPS_TM_SYNC, NULL);
	sh_add(&p.s, 2, 12, t2, BIG_EAGER, 2, ALL, 0, IBV_OPS_TM_SYNC, NULL);
	sh_add(&p.s, 3, 13, t3, RNDV_LEN, 3, ALL, 0, IBV_OPS_TM_SYNC | IBV_OPS_SIGNALED, NULL);
	n = wait_wc(p.s.cq, &wc, WAIT_S);
	if (n != 1 || wc.opcode != IBV_WC_TM_ADD)
		tap_bail("ADDs did not complete");
	st0 = sh_stats(&p.s);
	write_all(to_child[1], &go, 1);

	end = sh_now() + WAIT_S;
	while (sh_now() < end && !(dv[1] && dv[2] && dv[3])) {
		if (sh_poll(p.s.cq, &wc) != 1)
			continue;
		if (wc.opcode == IBV_WC_TM_RECV && wc.status == IBV_WC_SUCCESS &&
		    wc.wr_id >= 11 && wc.wr_id <= 13) {
			int k = (int)wc.wr_id - 10;

			if (wc.wc_flags & IBV_WC_TM_MATCH)
				mt[k]++;
			if (wc.wc_flags & IBV_WC_TM_DATA_VALID)
				dv[k] = wc.byte_len;
		} else {
			tap_diag("[%s] unexpected completion: %s", mode, sh_wc_str(&wc));
			bad++;
		}
	}
	tap_check(dv[1] == 100 && mt[1] == 1 && sh_check(t1, 100, 1) && sh_all(t1 + 100, 220, 0xEE),
		  "[%s] eager 100 B from the other process lands in the tagged buffer", mode);
	tap_check(dv[2] == BIG_EAGER && mt[2] == 1 && sh_check(t2, BIG_EAGER, 2) &&
		  sh_all(t2 + BIG_EAGER, 64, 0xEE),
		  "[%s] eager 20000 B (multi-packet) from the other process", mode);
	tap_check(dv[3] == (int)RNDV_LEN && mt[3] == 1 && sh_check(t3, RNDV_LEN, 42) &&
		  sh_all(t3 + RNDV_LEN, 64, 0xEE),
		  "[%s] rendezvous 1 MiB read from the other process (byte_len %d)", mode, dv[3]);
	tap_check(!bad, "[%s] no other completions on the receiver", mode);
	st = sh_stats(&p.s);
	if (copy)
		tap_check(st.copy_reads > st0.copy_reads && st.cma_reads == st0.cma_reads,
			  "[copy-read] reads went by request/response (copy %llu cma %llu)",
			  (unsigned long long)(st.copy_reads - st0.copy_reads),
			  (unsigned long long)(st.cma_reads - st0.cma_reads));
	else
		tap_check(st.cma_reads > st0.cma_reads ||
			  st.copy_reads > st0.copy_reads,
			  "[cma] the card read the peer (cma %llu, copy %llu)",
			  (unsigned long long)(st.cma_reads - st0.cma_reads),
			  (unsigned long long)(st.copy_reads - st0.copy_reads));
	if (!copy && st.cma_reads == st0.cma_reads)
		tap_diag("[cma] process_vm_readv was not used (kernel refused?)");

	/* Software RDMA read of the child's buffer. */
	rd = sh_alloc(&p.s, 65536 + 64);
	memset(rd, 0xEE, 65536 + 64);
	n = sh_post_read(p.qp, rd, p.s.mr->lkey, 65536, peer.va + 4096, peer.rkey, 55);
	n = n ? -1 : wait_wc(p.scq, &wc, WAIT_S);
	{
		char *ref = malloc(RNDV_LEN);

		sh_fill(ref, RNDV_LEN, 42);
		tap_check(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 55 &&
			  !memcmp(rd, ref + 4096, 65536) && sh_all(rd + 65536, 64, 0xEE),
			  "[%s] software RDMA_READ of the other process's MR (%s)", mode,
			  sh_wc_str(&wc));
		free(ref);
	}
	n = sh_post_read(p.qp, rd, p.s.mr->lkey, 64, peer.va + RNDV_LEN - 32, peer.rkey, 56);
	n = n ? -1 : wait_wc(p.scq, &wc, WAIT_S);
	tap_check(n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR && wc.wr_id == 56,
		  "[%s] RDMA_READ past the other process's MR: REM_ACCESS_ERR (%s)", mode,
		  sh_wc_str(&wc));

	memset(&rep, 0, sizeof(rep));
	n = read_all(to_parent[0], &rep, sizeof(rep), p.s.cq, WAIT_S);
	tap_check(n == 0 && rep.setup_ok && rep.sends_ok,
		  "[%s] sender: its three sends completed SUCCESS in order (%s)", mode, rep.what);
	tap_check(n == 0 && rep.fin_ok,
		  "[%s] sender: FIN arrived (TM_NO_TAG, TMH opcode FIN, tag, RVH copy) %s", mode,
		  rep.what);
	go = 'q';
	write_all(to_child[1], &go, 1);
	unspawn(pid);
	proc_close(&p);
}

/* ---- parent: dead peer ------------------------------------------------------ */

static void test_dead_peer(int how, int delay_ms)
{
	char what[96];
	struct softhca_config cfg;
	struct proc p;
	struct info peer;
	struct sh_wc wc;
	char go, msg[16], *rd;
	int n, st;
	double t0;
	pid_t pid;

	snprintf(what, sizeof(what), "%s%s",
		 how ? "killed (SIGKILL)" : "exited without closing",
		 delay_ms ? ", noticed after 250 ms" : ", WRs run at once");
	sh_config(&cfg);
	pid = spawn(&cfg, 1);
	memset(&p, 0, sizeof(p));
	if (proc_open(&p, &cfg))
		tap_bail("parent side");
	if (connect_to_child(&p, &peer) || read_all(to_parent[0], &go, 1, NULL, 20))
		tap_bail("dead-peer set-up");

	/* Three WRs posted while the peer lives, held back by MANUAL mode. */
	softhca_set_sched(p.s.ctx, SOFTHCA_SCHED_MANUAL, 0);
	sh_put_tmh(msg, IBV_TMH_NO_TAG, 0, 0);
	rd = sh_alloc(&p.s, 64);
	n = sh_qp_send(&p.s, p.qp, msg, 16, 1, IBV_SEND_SIGNALED);
	n |= sh_qp_send(&p.s, p.qp, msg, 16, 2, IBV_SEND_SIGNALED);
	n |= sh_post_read(p.qp, rd, p.s.mr->lkey, 64, peer.va, peer.rkey, 3);
	tap_check(n == 0, "peer alive: two sends and an RDMA_READ posted, not yet moved (%d)", n);
	go = how ? 'k' : 'x';
	write_all(to_child[1], &go, 1);
	if (how) {
		usleep(20000);
		kill(pid, SIGKILL);
	}
	waitpid(pid, &st, 0);
	/* Before a WR the card looks at a peer at most once a clock tick. */
	usleep(delay_ms ? delay_ms * 1000 : 25000);

	/* Back to AUTO: the card runs inside the polls, as in an application. */
	softhca_set_sched(p.s.ctx, SOFTHCA_SCHED_AUTO, 0);
	t0 = sh_now();
	{
		struct sh_wc w[3];
		int k = 0;

		memset(w, 0, sizeof(w));
		while (k < 3 && sh_now() - t0 < WAIT_S) {
			if (sh_poll(p.scq, &w[k]) == 1)
				k++;
			else
				usleep(1000);
		}
		tap_check(k >= 1 && w[0].wr_id == 1 && w[0].status == IBV_WC_RETRY_EXC_ERR,
			  "peer %s: the first pending send completes IBV_WC_RETRY_EXC_ERR (%s)",
			  what, sh_wc_str(&w[0]));
		tap_check(k == 3, "peer %s: all three pending WRs complete within %.0f s (%d, %.2f s)",
			  what, WAIT_S, k, sh_now() - t0);
		tap_check(k == 3 && w[1].wr_id == 2 && w[2].wr_id == 3 &&
			  (w[1].status == IBV_WC_RETRY_EXC_ERR || w[1].status == IBV_WC_WR_FLUSH_ERR) &&
			  (w[2].status == IBV_WC_RETRY_EXC_ERR || w[2].status == IBV_WC_WR_FLUSH_ERR),
			  "peer %s: the second send and the RDMA_READ complete in error, in order "
			  "(%s / %s)", what, sh_wc_str(&w[1]), sh_wc_str(&w[2]));
		if (k == 3 && (w[1].status != IBV_WC_RETRY_EXC_ERR ||
			       w[2].status != IBV_WC_RETRY_EXC_ERR))
			tap_diag("only the first pending WR gets RETRY_EXC_ERR, the rest are flushed "
				 "(as on an RC QP); softhca.h says all pending sends get RETRY_EXC_ERR");
	}
	/* Posting to the QP after the error: refused, or completed in error. */
	n = sh_qp_send(&p.s, p.qp, msg, 16, 4, IBV_SEND_SIGNALED);
	memset(&wc, 0, sizeof(wc));
	if (n == 0) {
		n = wait_wc(p.scq, &wc, 2) == 1 && wc.status != IBV_WC_SUCCESS ? 0 : -1;
		tap_diag("send posted after the error completes %s", sh_wc_str(&wc));
	} else {
		tap_diag("send posted after the error is refused at post: %d", n);
		n = 0;
	}
	tap_check(n == 0, "peer %s: a send posted after the error never succeeds", what);
	unspawn(pid);
	proc_close(&p);
}

/*
 * A send posted right after the peer died, on the post fast path (AUTO, an
 * empty send queue): the card must not take the ring's word for the ack.
 * No wait and no poll between the death and the post, so only a check
 * made at the post itself (the owner's liveness word, no clock) can tell.
 */
static void test_dead_peer_fast(int how)
{
	const char *what = how ? "killed (SIGKILL)" : "exited without closing";
	struct softhca_config cfg;
	struct proc p;
	struct info peer;
	struct sh_wc wc;
	char go, msg[16];
	int n, st;
	pid_t pid;

	sh_config(&cfg);
	pid = spawn(&cfg, 1);
	memset(&p, 0, sizeof(p));
	if (proc_open(&p, &cfg))
		tap_bail("parent side");
	if (connect_to_child(&p, &peer) || read_all(to_parent[0], &go, 1, NULL, 20))
		tap_bail("dead-peer set-up");
	sh_put_tmh(msg, IBV_TMH_NO_TAG, 0, 0);
	memset(&wc, 0, sizeof(wc));
	n = sh_qp_send(&p.s, p.qp, msg, 16, 1, IBV_SEND_SIGNALED);
	n = n ? n : wait_wc(p.scq, &wc, WAIT_S) - 1;
	tap_check(n == 0 && wc.wr_id == 1 && wc.status == IBV_WC_SUCCESS,
		  "fast path: a send to the live peer succeeds (%s)", sh_wc_str(&wc));
	go = how ? 'k' : 'x';
	write_all(to_child[1], &go, 1);
	if (how)
		kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	memset(&wc, 0, sizeof(wc));
	n = sh_qp_send(&p.s, p.qp, msg, 16, 2, IBV_SEND_SIGNALED);
	n = n ? n : wait_wc(p.scq, &wc, WAIT_S) - 1;
	tap_check(n == 0 && wc.wr_id == 2 && wc.status == IBV_WC_RETRY_EXC_ERR,
		  "fast path: peer %s, a send posted at once completes "
		  "IBV_WC_RETRY_EXC_ERR, never success (%d, %s)", what, n,
		  sh_wc_str(&wc));
	unspawn(pid);
	proc_close(&p);
}

/* Sends posted while the peer lives but cannot take them, then it dies. */
static void test_dead_peer_pending(void)
{
	struct softhca_config cfg;
	struct proc p;
	struct info peer;
	struct sh_wc wc;
	char go, msg[16];
	int n, i, st, done = 0, ok = 1, last_retry = 0;
	pid_t pid;

	sh_config(&cfg);
	cfg.ring_depth = 2;
	pid = spawn(&cfg, 1);
	memset(&p, 0, sizeof(p));
	if (proc_open(&p, &cfg))
		tap_bail("parent side");
	if (connect_to_child(&p, &peer) || read_all(to_parent[0], &go, 1, NULL, 20))
		tap_bail("dead-peer set-up");
	go = 'k';
	write_all(to_child[1], &go, 1);
	sh_put_tmh(msg, IBV_TMH_EAGER, 0, 0x77); /* unexpected; child has no buffers */
	for (i = 0; i < 6; i++)
		if (sh_qp_send(&p.s, p.qp, msg, 16, 10 + i, IBV_SEND_SIGNALED))
			tap_bail("send");
	/* Let the cards run for a while: the peer cannot take them all. */
	for (i = 0; i < 50; i++) {
		if (sh_poll(p.scq, &wc) == 1) {
			done++;
			tap_diag("before the kill: %s", sh_wc_str(&wc));
		}
		usleep(2000);
	}
	tap_check(done < 6, "receiver not ready with ring_depth 2: sends stay pending (%d done)",
		  done);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	while (done < 6) {
		n = wait_wc(p.scq, &wc, WAIT_S);
		if (n != 1)
			break;
		done++;
		tap_diag("after the kill: %s", sh_wc_str(&wc));
		ok &= wc.wr_id == (uint64_t)(10 + done - 1);
		ok &= wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_SUCCESS ||
		      wc.status == IBV_WC_WR_FLUSH_ERR;
		if (wc.status == IBV_WC_RETRY_EXC_ERR)
			last_retry++;
	}
	tap_check(done == 6 && ok && last_retry >= 1,
		  "after the peer is killed every pending send completes in order, in error "
		  "(RETRY_EXC_ERR first) (%d done, %d RETRY_EXC_ERR)", done, last_retry);
	unspawn(pid);
	proc_close(&p);
}

int main(void)
{
	alarm(60);
	signal(SIGPIPE, SIG_IGN);
	test_transfer(0);
	test_transfer(1);
	test_dead_peer(0, 0);
	test_dead_peer(1, 0);
	test_dead_peer(0, 250);
	test_dead_peer(1, 250);
	test_dead_peer_pending();
	test_dead_peer_fast(0);
	test_dead_peer_fast(1);
	return tap_done();
}
