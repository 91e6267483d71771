/*
 * test_hostile_handover.c - another local user against the segment
 * handover (handover.c): it cannot stop a connect, take a context's
 * socket name, receive a peer's key, hand over segments of its own, or
 * open the segments through /proc; a silent peer of the owner's user holds
 * up nobody; a process in a user namespace without
 * a uid mapping is nobody's same user; and a context whose key cannot be
 * drawn from getrandom does not open.
 *
 * The attackers are forked children that drop to user nobody with
 * setresuid (no exec: they run wherever the checkout lives, a 0700
 * directory included), so those checks need root and are skipped
 * otherwise.  Every verdict is what a connect returned or what an
 * attacker received, never a time.  The attackers aim at this test's
 * own processes only (other jobs may share the machine).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "sh_util.h"
#include "softhca/softhca_priv.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#define NOBODY 65534
#define NAME_MAX_LEN 108
#define IDLE_PER_NAME 80        /* more than the old listen backlog */
#define SQUAT_NAMES 1024        /* every value the old 10-bit salt took */

static int put(int fd, const void *p, size_t n)
{
	return write(fd, p, n) == (ssize_t)n ? 0 : -1;
}

static int get(int fd, void *p, size_t n)
{
	return read(fd, p, n) == (ssize_t)n ? 0 : -1;
}

static int drop_to(uid_t uid)
{
	return setgroups(0, NULL) || setresgid(uid, uid, uid) ||
	       setresuid(uid, uid, uid) ? -1 : 0;
}

static pid_t fork_or_bail(void)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		tap_bail("fork");
	if (!pid)
		alarm(60);
	return pid;
}

static int reap(pid_t pid)
{
	int status = 0;

	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

/*
 * The abstract socket names of pid's contexts, as anyone reads them in
 * /proc/net/unix ("@softhca.<pid>." and the rest); how many (at most max).
 */
static int names_of(pid_t pid, char (*names)[NAME_MAX_LEN], int max)
{
	char line[512], prefix[64];
	FILE *f = fopen("/proc/net/unix", "r");
	int n = 0;

	if (!f)
		return 0;
	snprintf(prefix, sizeof(prefix), "@softhca.%d.", (int)pid);
	while (n < max && fgets(line, sizeof(line), f)) {
		char *p = strstr(line, prefix);

		if (!p)
			continue;
		p[strcspn(p, " \n")] = 0;
		snprintf(names[n], NAME_MAX_LEN, "%s", p + 1);
		/* (a listener and its accepted sockets share the name) */
		for (int i = 0; i < n; i++)
			if (!strcmp(names[i], names[n])) {
				n--;
				break;
			}
		n++;
	}
	fclose(f);
	return n;
}

static socklen_t abstract(struct sockaddr_un *a, const char *name)
{
	size_t n = strnlen(name, sizeof(a->sun_path) - 1);

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path + 1, name, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* A fresh side's first QP connected to gid: 0 or the connect's errno. */
static int connect_to(const union ibv_gid *gid)
{
	struct ibv_cq_ex *scq;
	struct ibv_qp *qp;
	struct sh_side s;
	int ret;

	if (sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
		return 250;
	scq = sh_cq_ex(s.ctx, 16);
	qp = scq ? sh_qp_create(&s, scq, s.srq, NULL) : NULL;
	if (!qp)
		return 251;
	ret = sh_qp_connect(qp, gid, SH_QPN_BASE);
	sh_v()->destroy_qp(qp);
	sh_cq_destroy(scq);
	sh_side_close(&s);
	return ret;
}

/* connect_to in a forked child of this user: its result. */
static int connect_in_child(const union ibv_gid *gid)
{
	pid_t pid = fork_or_bail();

	if (!pid)
		_exit(connect_to(gid));
	return reap(pid);
}

static void skip(int n, const char *why)
{
	for (int i = 0; i < n; i++)
		tap_check(1, "# SKIP %s", why);
}

/* ---- 2. idle connections of another user ---------------------------- */

/*
 * As nobody: IDLE_PER_NAME connections to each of owner's sockets, which
 * send nothing and stay open until the parent closes the pipe.
 */
static void idle_attacker(pid_t owner, int ready, int hold)
{
	char names[8][NAME_MAX_LEN];
	struct sockaddr_un a;
	int n, made = 0;

	if (drop_to(NOBODY))
		_exit(100);
	n = names_of(owner, names, 8);
	for (int i = 0; i < n; i++)
		for (int k = 0; k < IDLE_PER_NAME; k++) {
			socklen_t l = abstract(&a, names[i]);
			int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

			if (s >= 0 && !connect(s, (struct sockaddr *)&a, l))
				made++;
		}
	put(ready, &made, sizeof(made));
	(void)get(hold, &n, 1); /* until the parent closes it */
	_exit(0);
}

static void test_idle_clients(void)
{
	union ibv_gid gid;
	struct sh_side s;
	int ready[2], hold[2], made = 0, ret;
	pid_t att;

	if (sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
		tap_bail("open");
	gid = s.gid;
	if (pipe(ready) || pipe(hold))
		tap_bail("pipe");
	att = fork_or_bail();
	if (!att) {
		close(hold[1]);
		idle_attacker(getppid(), ready[1], hold[0]);
	}
	close(ready[1]);
	close(hold[0]);
	if (get(ready[0], &made, sizeof(made)))
		made = -1;
	ret = connect_in_child(&gid);
	close(hold[1]);
	reap(att);
	close(ready[0]);
	tap_check(made > 0, "user nobody holds %d idle connections to the "
		  "owner's socket", made);
	tap_check(ret == 0, "a peer of the owner's user connects all the same "
		  "(%s)", ret ? strerror(ret) : "connected");
	sh_side_close(&s);
}

/* ---- 2. a peer of the owner's user that sends no key ---------------- */

/*
 * A connection of this user that never sends its key holds one of the
 * owner's few waiting places only for a deadline: then it is told to ask
 * again ('T', handover.c) and dropped, while a real peer connects.
 */
static void test_silent_peer(void)
{
	char names[2][NAME_MAX_LEN], got = 0;
	struct timeval tv = { .tv_sec = 20 };
	struct sockaddr_un a;
	struct sh_side s;
	int c, ret = -1;
	ssize_t r = -1;

	if (sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
		tap_bail("open");
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c >= 0 && names_of(getpid(), names, 2) == 1 &&
	    !setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) &&
	    !connect(c, (struct sockaddr *)&a, abstract(&a, names[0]))) {
		ret = connect_in_child(&s.gid);
		r = recv(c, &got, 1, 0);
	}
	if (c >= 0)
		close(c);
	sh_side_close(&s);
	tap_check(ret == 0, "a peer connects while a connection of its user "
		  "sends no key (%s)", ret > 0 ? strerror(ret) : ret ?
		  "no silent connection" : "connected");
	tap_check(r == 1 && got == 'T', "the silent one is told to ask again "
		  "once its deadline passes (%zd byte, '%c')", r,
		  got ? got : '-');
}

/* ---- 2. the names of a coming context, squatted --------------------- */

/*
 * The victim opens a context (its name shows what a name looks like),
 * closes it and waits; the attacker binds every name that differs from
 * it in its last field's SQUAT_NAMES first values; the victim opens
 * again and a peer connects.
 */
static void squat_attacker(const char *seen, int ready)
{
	char name[NAME_MAX_LEN + 16], base[NAME_MAX_LEN];
	struct rlimit rl = { SQUAT_NAMES + 64, SQUAT_NAMES + 64 };
	struct sockaddr_un a;
	char *dot;
	int bound = 0;

	snprintf(base, sizeof(base), "%s", seen);
	dot = strrchr(base, '.');
	if (!dot || setrlimit(RLIMIT_NOFILE, &rl) || drop_to(NOBODY))
		_exit(100);
	dot[1] = 0;
	for (unsigned v = 0; v < SQUAT_NAMES; v++) {
		int s = socket(AF_UNIX, SOCK_STREAM, 0);
		socklen_t l;

		snprintf(name, sizeof(name), "%s%u", base, v);
		l = abstract(&a, name);
		if (s >= 0 && !bind(s, (struct sockaddr *)&a, l) &&
		    !listen(s, 1))
			bound++;
	}
	put(ready, &bound, sizeof(bound));
	pause();
	_exit(0);
}

static void test_squat(void)
{
	char names[4][NAME_MAX_LEN];
	int to_v[2], from_v[2], ready[2], bound = 0, ret = -1, n = 0;
	union ibv_gid gid;
	struct sh_side s;
	pid_t v, att = -1;
	char go = 1;

	if (pipe(to_v) || pipe(from_v) || pipe(ready))
		tap_bail("pipe");
	v = fork_or_bail();
	if (!v) {
		close(ready[1]);
		if (sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
			_exit(100);
		n = names_of(getpid(), names, 4);
		put(from_v[1], &n, sizeof(n));
		put(from_v[1], names[0], NAME_MAX_LEN);
		sh_side_close(&s);
		if (get(to_v[0], &go, 1) ||
		    sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
			_exit(101);
		put(from_v[1], &s.gid, sizeof(s.gid));
		(void)get(to_v[0], &go, 1); /* until the peer is done */
		sh_side_close(&s);
		_exit(0);
	}
	if (get(from_v[0], &n, sizeof(n)) ||
	    get(from_v[0], names[0], NAME_MAX_LEN) || n != 1) {
		tap_check(0, "the victim's context shows one socket name (%d)",
			  n);
		kill(v, SIGKILL);
		reap(v);
		return;
	}
	att = fork_or_bail();
	if (!att)
		squat_attacker(names[0], ready[1]);
	close(ready[1]);
	if (get(ready[0], &bound, sizeof(bound)))
		bound = -1;
	if (!put(to_v[1], &go, 1) && !get(from_v[0], &gid, sizeof(gid)))
		ret = connect_in_child(&gid);
	put(to_v[1], &go, 1);
	reap(v);
	kill(att, SIGKILL);
	reap(att);
	tap_check(bound == SQUAT_NAMES, "user nobody holds %d names like the "
		  "victim's last one (@%s)", bound, names[0]);
	tap_check(ret == 0, "the victim's next context is reachable all the "
		  "same (%s)", ret > 0 ? strerror(ret) : "connected");
	close(to_v[0]), close(to_v[1]), close(from_v[0]), close(from_v[1]);
	close(ready[0]);
}

/* ---- 3. a freed name taken over ------------------------------------- */

struct copy {
	void *pub, *rings;
	size_t pub_size, rings_size;
};

static int sealed_copy(const void *src, size_t n, int seals)
{
	int fd = memfd_create("softtm-forged", MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, (off_t)n) ||
	    pwrite(fd, src, n, 0) != (ssize_t)n ||
	    fcntl(fd, F_ADD_SEALS, seals))
		return -1;
	return fd;
}

/*
 * As uid: listens under the victim's freed name, hands whoever asks the
 * victim's segments as it copied them (they pass every check the header
 * and rings get), and tells the parent how many bytes it received first.
 */
static void impostor(uid_t uid, const char *name, const struct copy *c,
		     int ready, int report)
{
	int fds[2], s, conn, got = 0;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(fds))];
	} u;
	char ok = 'S', key[64];
	struct iovec iov = { .iov_base = &ok, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct pollfd pf;
	struct sockaddr_un a;
	socklen_t l = abstract(&a, name);
	struct cmsghdr *h;
	ssize_t r;

	if (uid != geteuid() && drop_to(uid))
		_exit(100);
	fds[0] = sealed_copy(c->pub, c->pub_size, F_SEAL_SHRINK |
			     F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL);
	fds[1] = sealed_copy(c->rings, c->rings_size,
			     F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fds[0] < 0 || fds[1] < 0 || s < 0 ||
	    bind(s, (struct sockaddr *)&a, l) || listen(s, 4))
		_exit(101);
	put(ready, &got, sizeof(got));
	conn = accept(s, NULL, NULL);
	if (conn < 0)
		_exit(102);
	/* whatever the peer sends before it sees an answer */
	pf = (struct pollfd){ .fd = conn, .events = POLLIN };
	while (poll(&pf, 1, 1000) == 1 &&
	       (r = recv(conn, key + got, sizeof(key) - (size_t)got,
			 MSG_DONTWAIT)) > 0)
		got += (int)r;
	memset(&u, 0, sizeof(u));
	h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(h), fds, sizeof(fds));
	(void)sendmsg(conn, &m, MSG_NOSIGNAL);
	put(report, &got, sizeof(got));
	/* (open until the peer has read the answer) */
	(void)recv(conn, &ok, 1, 0);
	_exit(0);
}

/*
 * The victim (this user) opens a context, copies its segments, closes it
 * and lives on; the impostor (uid) takes the freed name; a peer that holds
 * the victim's GID connects.
 */
static void test_impostor(uid_t uid, const char *who)
{
	int to_v[2], from_v[2], ready[2], report[2];
	int got = -1, ret = -1, x;
	union ibv_gid gid;
	pid_t v;
	char go = 1;

	if (pipe(to_v) || pipe(from_v) || pipe(ready) || pipe(report))
		tap_bail("pipe");
	v = fork_or_bail();
	if (!v) {
		char names[2][NAME_MAX_LEN];
		struct sh_context *sc;
		struct sh_side s;
		struct copy c;
		pid_t imp;

		if (sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1) ||
		    names_of(getpid(), names, 2) != 1)
			_exit(100);
		sc = to_sh_ctx(s.ctx);
		c.pub_size = sc->lay.pub_size;
		c.rings_size = sc->lay.rings_size;
		c.pub = malloc(c.pub_size);
		c.rings = malloc(c.rings_size);
		if (!c.pub || !c.rings)
			_exit(101);
		memcpy(c.pub, sc->seg, c.pub_size);
		memcpy(c.rings, sc->rings, c.rings_size);
		gid = s.gid;
		sh_side_close(&s);
		imp = fork_or_bail();
		if (!imp)
			impostor(uid, names[0], &c, ready[1], report[1]);
		close(ready[1]);
		close(report[1]);
		put(from_v[1], &gid, sizeof(gid));
		(void)get(to_v[0], &go, 1);
		kill(imp, SIGKILL);
		reap(imp);
		_exit(0);
	}
	close(ready[1]);
	close(report[1]);
	if (!get(from_v[0], &gid, sizeof(gid)) &&
	    !get(ready[0], &x, sizeof(x))) {
		ret = connect_in_child(&gid);
		/* (the impostor reports once it has answered) */
		if (get(report[0], &got, sizeof(got)))
			got = 0;
	}
	put(to_v[1], &go, 1);
	reap(v);
	tap_check(got == 0, "%s listening under a closed context's name "
		  "receives nothing from a peer (%d bytes)", who, got);
	tap_check(ret == EACCES, "and the peer's connect is refused with "
		  "EACCES, its segments not taken (%s)",
		  ret > 0 ? strerror(ret) : ret ? "no connect" : "connected");
	close(to_v[0]), close(to_v[1]), close(from_v[0]), close(from_v[1]);
	close(ready[0]), close(report[0]);
}

/* ---- 4. the /proc route --------------------------------------------- */

/* 1 if this process opens owner's descriptor fd through /proc or a pidfd */
static int opens_fd(pid_t owner, int fd)
{
	char path[64];
	int pidfd, got;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)owner, fd);
	got = open(path, O_RDONLY | O_CLOEXEC);
	if (got >= 0)
		return 1;
	pidfd = (int)syscall(SYS_pidfd_open, owner, 0);
	if (pidfd < 0)
		return 0;
	got = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	close(pidfd);
	return got >= 0;
}

/* As uid (made dumpable again, as an exec'd program is), opens a context
 * and tells the parent its segment's descriptor. */
static void proc_owner(uid_t uid, int out, int hold)
{
	struct sh_side s;
	int fd;

	if (drop_to(uid) || prctl(PR_SET_DUMPABLE, 1) ||
	    sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
		_exit(100);
	fd = to_sh_ctx(s.ctx)->pub_fd;
	put(out, &fd, sizeof(fd));
	(void)get(hold, &fd, 1);
	_exit(0);
}

static int opens_as(uid_t uid, pid_t owner, int fd)
{
	pid_t pid = fork_or_bail();

	if (!pid)
		_exit(drop_to(uid) ? 100 : opens_fd(owner, fd));
	return reap(pid);
}

static void test_proc_route(void)
{
	int out[2], hold[2], fd = -1, other, same;
	pid_t owner;

	if (pipe(out) || pipe(hold))
		tap_bail("pipe");
	owner = fork_or_bail();
	if (!owner) {
		close(hold[1]);
		proc_owner(NOBODY - 1, out[1], hold[0]);
	}
	close(hold[0]);
	if (get(out[0], &fd, sizeof(fd)))
		fd = -1;
	other = fd < 0 ? -1 : opens_as(NOBODY, owner, fd);
	same = fd < 0 ? -1 : opens_as(NOBODY - 1, owner, fd);
	close(hold[1]);
	reap(owner);
	close(out[0]), close(out[1]);
	tap_check(other == 0, "another user cannot open a context's segment "
		  "through /proc/PID/fd or pidfd_getfd (%d)", other);
	tap_check(same == 1, "the trust boundary: another process of the "
		  "owner's user can (ptrace read access, as the README says) "
		  "(%d)", same);
}

/* ---- 4. a user namespace without a uid mapping ---------------------- */

/* In a user namespace of its own, unmapped: opens a context, connects to
 * parent_gid, and offers its own GID to the parent. */
static void unmapped_child(const union ibv_gid *parent_gid, int out,
			   int hold)
{
	struct sh_side s;
	int isolated = unshare(CLONE_NEWUSER) == 0, ret = -1;

	if (sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
		_exit(100);
	if (isolated)
		ret = connect_to(parent_gid);
	put(out, &isolated, sizeof(isolated));
	put(out, &ret, sizeof(ret));
	put(out, &s.gid, sizeof(s.gid));
	(void)get(hold, &ret, 1);
	_exit(0);
}

static void test_unmapped(void)
{
	int out[2], hold[2], isolated = 0, as_peer = -1, as_owner = -1;
	union ibv_gid gid, cgid;
	struct sh_side s;
	pid_t pid;

	if (sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
		tap_bail("open");
	gid = s.gid;
	if (pipe(out) || pipe(hold))
		tap_bail("pipe");
	pid = fork_or_bail();
	if (!pid) {
		close(hold[1]);
		unmapped_child(&gid, out[1], hold[0]);
	}
	close(hold[0]);
	if (!get(out[0], &isolated, sizeof(isolated)) &&
	    !get(out[0], &as_peer, sizeof(as_peer)) &&
	    !get(out[0], &cgid, sizeof(cgid)) && isolated)
		as_owner = connect_to(&cgid);
	close(hold[1]);
	reap(pid);
	close(out[0]), close(out[1]);
	sh_side_close(&s);
	if (!isolated)
		return skip(2, "no user namespace for the child");
	tap_check(as_peer == EACCES, "a peer in a user namespace without a uid "
		  "mapping does not take its owner's overflow uid for its "
		  "own: EACCES (%s)", as_peer > 0 ? strerror(as_peer)
						  : "connected");
	tap_check(as_owner == EACCES, "an owner in such a namespace refuses "
		  "every peer: EACCES (%s)", as_owner > 0 ? strerror(as_owner)
							 : "connected");
}

/* ---- 4. no getrandom ------------------------------------------------ */

/* getrandom(2) fails with ENOSYS from here on (an old or filtered kernel). */
static int deny_getrandom(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getrandom, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]),
				   .filter = f };

	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	       prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) ? -1 : 0;
}

static void test_no_getrandom(void)
{
	pid_t pid = fork_or_bail();
	int rc;

	if (!pid) {
		struct sh_side s;

		if (deny_getrandom())
			_exit(100);
		_exit(sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1) ? 0 : 1);
	}
	rc = reap(pid);
	if (rc == 100)
		return skip(1, "no seccomp filter");
	tap_check(rc == 0, "without getrandom a context does not open: no key "
		  "from the clock (code %d)", rc);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_unmapped();
	test_no_getrandom();
	test_silent_peer();
	if (geteuid()) {
		skip(10, "another user: not run as root");
		return tap_done();
	}
	test_idle_clients();
	test_squat();
	test_impostor(NOBODY, "user nobody");
	test_impostor(0, "a process of this user but not the owner's pid");
	test_proc_route();
	return tap_done();
}
