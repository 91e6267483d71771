/*
 * test_noptrace.c - the soft HCA connects to a peer process it has no
 * ptrace right over (Yama ptrace_scope 2, siblings at scope 1, another
 * user namespace): the segments come over the owner's socket, handed
 * only to a process of the same user that holds the owner's GID, not
 * taken from its descriptor table.  A connect that cannot be made fails
 * with an errno that says why.
 *
 * The child moves into a user namespace of its own, which takes away any
 * ptrace right over the parent (pidfd_getfd on the parent fails with
 * EPERM) while it stays the same user (its uid mapped to itself); it connects to the parent's
 * context and sends one eager message, which the parent receives.  Run
 * as root, a second child becomes another user (nobody) and, holding the
 * parent's whole GID, is refused all the same.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "tap.h"
#include "sh_util.h"

#define MD (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)

struct addr {
	union ibv_gid gid;
	uint32_t qpn;
};

/* What the child saw (it prints no TAP). */
struct outcome {
	int isolated;       /* in a user namespace of its own */
	int wrong_key_err;  /* errno of a connect with the GID's key spoilt */
	int connect_err;    /* errno of the real connect */
	int send_ok;
};

static int to_child[2], to_parent[2];

static int put(int fd, const void *p, size_t n)
{
	return write(fd, p, n) == (ssize_t)n ? 0 : -1;
}

static int get(int fd, void *p, size_t n)
{
	return read(fd, p, n) == (ssize_t)n ? 0 : -1;
}

/* The GID with the bits that are its key changed (shm.c, sh_gid_encode):
 * the socket's name (pid and nonce) right, the job's secret wrong. */
static union ibv_gid spoil_key(const union ibv_gid *gid)
{
	union ibv_gid g = *gid;
	uint32_t w[4];

	memcpy(w, g.raw, sizeof(w));
	w[0] = htonl(ntohl(w[0]) ^ 0x5a5au);
	w[3] = htonl(ntohl(w[3]) ^ 0xa5a50000u);
	memcpy(g.raw, w, sizeof(w));
	return g;
}

/* Writes one line to a /proc/self file; 0 or -1. */
static int write_line(const char *path, const char *line)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, line, strlen(line)) == (ssize_t)strlen(line);
	close(fd);
	return ok ? 0 : -1;
}

/*
 * A user namespace of its own that maps this process's uid and gid to
 * themselves: still the same user to the parent, and to itself (without
 * the mapping both would see the other as the overflow uid, which is
 * nobody's same user: test_hostile_handover).
 */
static int own_user_namespace(void)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char line[64];

	if (unshare(CLONE_NEWUSER))
		return 0;
	snprintf(line, sizeof(line), "%u %u 1\n", (unsigned)uid,
		 (unsigned)uid);
	if (write_line("/proc/self/uid_map", line))
		return 0;
	snprintf(line, sizeof(line), "%u %u 1\n", (unsigned)gid,
		 (unsigned)gid);
	return !write_line("/proc/self/setgroups", "deny") &&
	       !write_line("/proc/self/gid_map", line);
}

static struct ibv_qp *side_qp(struct sh_side *s, struct ibv_cq_ex **scq)
{
	*scq = sh_cq_ex(s->ctx, 64);
	return *scq ? sh_qp_create(s, *scq, s->srq, NULL) : NULL;
}

static void child_main(void)
{
	struct outcome out = { 0 };
	struct ibv_cq_ex *scq, *cq2;
	struct ibv_qp *qp, *qp2;
	struct addr me, peer;
	struct sh_side s;
	struct sh_wc wc;
	union ibv_gid bad;
	char msg[64];

	alarm(30);
	out.isolated = own_user_namespace();
	if (sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
		_exit(10);
	qp = side_qp(&s, &scq);
	qp2 = side_qp(&s, &cq2);
	if (!qp || !qp2)
		_exit(11);
	me.gid = s.gid;
	me.qpn = qp->qp_num;
	if (put(to_parent[1], &me, sizeof(me)) ||
	    get(to_child[0], &peer, sizeof(peer)))
		_exit(12);
	bad = spoil_key(&peer.gid);
	out.wrong_key_err = sh_qp_connect(qp2, &bad, peer.qpn);
	out.connect_err = sh_qp_connect(qp, &peer.gid, peer.qpn);
	if (!out.connect_err) {
		uint32_t n = sh_put_tmh(msg, IBV_TMH_EAGER, 0x77, 0x5ec);

		sh_fill(msg + n, 32, 9);
		out.send_ok = !sh_qp_send(&s, qp, msg, n + 32, 1,
					  IBV_SEND_SIGNALED) &&
			      sh_wait(NULL, scq, &wc, 10000) == 1 &&
			      wc.status == IBV_WC_SUCCESS;
	}
	if (put(to_parent[1], &out, sizeof(out)))
		_exit(13);
	_exit(0);
}

/* Another user with the right GID: refused (the owner checks the uid). */
static void other_user(const struct addr *peer)
{
	struct ibv_cq_ex *scq;
	struct ibv_qp *qp;
	struct sh_side s;
	int status = 0, ret;
	pid_t pid;

	if (geteuid()) {
		tap_check(1, "# SKIP another user: not run as root");
		return;
	}
	pid = fork();
	if (!pid) {
		alarm(30);
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(100);
		if (sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
			_exit(101);
		qp = side_qp(&s, &scq);
		if (!qp)
			_exit(102);
		ret = sh_qp_connect(qp, &peer->gid, peer->qpn);
		_exit(ret == EACCES ? 0 : ret ? 1 : 2);
	}
	waitpid(pid, &status, 0);
	tap_check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "a process of another user holding the whole GID: refused "
		  "with EACCES (code %d)", WIFEXITED(status) ?
		  WEXITSTATUS(status) : -1);
}

int main(void)
{
	struct ibv_cq_ex *scq;
	struct outcome out;
	struct addr me, peer;
	struct ibv_qp *qp;
	struct sh_side s;
	struct sh_wc wc;
	char *dst;
	pid_t pid;
	int got, status = 0;

	if (pipe(to_child) || pipe(to_parent))
		tap_bail("pipe");
	pid = fork();
	if (pid < 0)
		tap_bail("fork");
	if (!pid)
		child_main();
	if (sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
		tap_bail("open");
	qp = side_qp(&s, &scq);
	if (!qp)
		tap_bail("qp");
	dst = sh_alloc(&s, 64);
	memset(dst, 0, 64);
	sh_add(&s, 1, 7, dst, 64, 0x5ec, ~0ull, 0, 0, NULL);
	me.gid = s.gid;
	me.qpn = qp->qp_num;
	if (get(to_parent[0], &peer, sizeof(peer)) ||
	    put(to_child[1], &me, sizeof(me)))
		tap_bail("address exchange");
	/* (the child's user namespace leaves this side its ptrace right) */
	if (sh_qp_connect(qp, &peer.gid, peer.qpn))
		tap_bail("connect to the child");
	got = sh_wait(NULL, s.cq, &wc, 15000);
	if (get(to_parent[0], &out, sizeof(out)))
		memset(&out, 0, sizeof(out));
	waitpid(pid, &status, 0);
	other_user(&me);
	if (!out.isolated) {
		for (int i = 0; i < 3; i++)
			tap_check(1, "# SKIP no user namespace for the child");
		return tap_done();
	}
	tap_check(out.connect_err == 0 && out.send_ok,
		  "a peer without ptrace rights over this process connects "
		  "and sends (connect: %s)", strerror(out.connect_err));
	tap_check(got == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 &&
		  wc.wc_flags == MD && sh_check(dst, 32, 9),
		  "its eager message lands in the tagged buffer (%s)",
		  got == 1 ? sh_wc_str(&wc) : "no completion");
	tap_check(out.wrong_key_err == EACCES,
		  "a GID with the right socket name but not the key: "
		  "refused with EACCES, nothing mapped (%s)",
		  strerror(out.wrong_key_err));
	softhca_verbs()->destroy_qp(qp);
	sh_cq_destroy(scq);
	sh_side_close(&s);
	return tap_done();
}
