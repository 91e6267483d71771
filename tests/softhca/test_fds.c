/*
 * test_fds.c - the descriptors a soft HCA context holds: a fixed three
 * (the listening socket of its handover and its two memfds), whatever
 * number of peer processes it talks to (issue 24: descriptors per rank).
 *
 * K child processes each open a context and make a QP; the parent opens
 * its own, then connects a QP to each child in turn and sends it a
 * message.  After the open, and after each peer, the parent's descriptor
 * table is read: the open must add exactly those three (a stop pipe, a
 * third segment, anything else fails), and no peer may add one (a peer's
 * segment descriptors kept after mapping, or a /proc file per peer for
 * its liveness, fail).  Closing gives all three back.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "sh_util.h"

#define K 4
#define MAX_FDS 256

struct addr {
	union ibv_gid gid;
	uint32_t qpn;
	int index;
};

/* The process's descriptors and what each names, sorted by number. */
struct fdtab {
	int n;
	int fd[MAX_FDS];
	char what[MAX_FDS][96];
};

static void fd_read(struct fdtab *t)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char path[300];
	ssize_t r;

	if (!d)
		sh_die("cannot read /proc/self/fd: %s", strerror(errno));
	t->n = 0;
	while ((e = readdir(d)) && t->n < MAX_FDS) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] == '.' || fd == dirfd(d))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		r = readlink(path, t->what[t->n], sizeof(t->what[0]) - 1);
		t->what[t->n][r > 0 ? r : 0] = 0;
		t->fd[t->n++] = fd;
	}
	closedir(d);
}

static int fd_has(const struct fdtab *t, int fd)
{
	for (int i = 0; i < t->n; i++)
		if (t->fd[i] == fd)
			return 1;
	return 0;
}

/* The descriptors of now that were not in before, as "fd:what ...". */
static int fd_new(const struct fdtab *before, const struct fdtab *now,
		  char *buf, size_t len, int *socks, int *pub, int *rings)
{
	size_t at = 0;
	int n = 0;

	buf[0] = 0;
	*socks = *pub = *rings = 0;
	for (int i = 0; i < now->n; i++) {
		const char *w = now->what[i];

		if (fd_has(before, now->fd[i]))
			continue;
		n++;
		*socks += !strncmp(w, "socket:", 7);
		*pub += !strncmp(w, "/memfd:softtm-pub", 17);
		*rings += !strncmp(w, "/memfd:softtm-rings", 19);
		if (at < len)
			at += (size_t)snprintf(buf + at, len - at, " %d:%s",
					       now->fd[i], w);
	}
	return n;
}

static int to_parent[2], to_child[2];

/* A peer: a context and a QP, its address to the parent, then it waits
 * until the parent is done (its end of to_child closed). */
static void child_main(int index)
{
	struct ibv_cq_ex *scq;
	struct ibv_qp *qp;
	struct sh_side s;
	struct addr me;
	char b;

	alarm(60);
	close(to_parent[0]);
	close(to_child[1]);
	if (sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
		_exit(10);
	scq = sh_cq_ex(s.ctx, 64);
	qp = scq ? sh_qp_create(&s, scq, s.srq, NULL) : NULL;
	if (!qp)
		_exit(11);
	me.gid = s.gid;
	me.qpn = qp->qp_num;
	me.index = index;
	if (write(to_parent[1], &me, sizeof(me)) != (ssize_t)sizeof(me))
		_exit(12);
	while (read(to_child[0], &b, 1) > 0)
		;
	_exit(0);
}

int main(void)
{
	struct addr peer[K];
	struct ibv_cq_ex *scq[K];
	struct ibv_qp *qp[K];
	struct fdtab base, t;
	struct sh_side s;
	char list[1024], msg[64];
	int socks, pub, rings, n, same = 1, sent = 1;
	pid_t pid[K];

	if (pipe(to_parent) || pipe(to_child))
		sh_die("pipe: %s", strerror(errno));
	for (int i = 0; i < K; i++) {
		pid[i] = fork();
		if (pid[i] < 0)
			sh_die("fork: %s", strerror(errno));
		if (!pid[i])
			child_main(i);
	}
	close(to_parent[1]);
	close(to_child[0]);
	for (int i = 0; i < K; i++) {
		struct addr a;

		if (read(to_parent[0], &a, sizeof(a)) != (ssize_t)sizeof(a) ||
		    a.index < 0 || a.index >= K)
			sh_die("a child did not answer");
		peer[a.index] = a;
	}

	fd_read(&base);
	if (sh_side_open(&s, SOFTHCA_SCHED_AUTO, 1))
		sh_die("cannot open the soft HCA");
	fd_read(&t);
	n = fd_new(&base, &t, list, sizeof(list), &socks, &pub, &rings);
	tap_check(n == 3 && socks == 1 && pub == 1 && rings == 1,
		  "a context holds three descriptors: its handover socket and "
		  "its two segments (%d:%s)", n, list);

	for (int k = 0; k < K; k++) {
		struct sh_wc wc;
		uint32_t len = sh_put_tmh(msg, IBV_TMH_EAGER, 1, 0x100u + (unsigned)k);

		scq[k] = sh_cq_ex(s.ctx, 64);
		qp[k] = scq[k] ? sh_qp_create(&s, scq[k], s.srq, NULL) : NULL;
		if (!qp[k] || sh_qp_connect(qp[k], &peer[k].gid, peer[k].qpn))
			sh_die("cannot connect to peer %d", k);
		sh_fill(msg + len, 16, (uint32_t)k);
		sent &= !sh_qp_send(&s, qp[k], msg, len + 16, 1,
				    IBV_SEND_SIGNALED) &&
			sh_wait(NULL, scq[k], &wc, 10000) == 1 &&
			wc.status == IBV_WC_SUCCESS;
		fd_read(&t);
		n = fd_new(&base, &t, list, sizeof(list), &socks, &pub, &rings);
		if (n != 3) {
			same = 0;
			tap_check(0, "after %d peers the context holds %d "
				  "descriptors, not 3:%s", k + 1, n, list);
		}
	}
	tap_check(sent, "a message went to each of the %d peer processes", K);
	tap_check(same, "talking to 1 to %d peers adds no descriptor", K);

	/* a peer that dies is still noticed without a descriptor of its own */
	kill(pid[0], SIGKILL);
	waitpid(pid[0], NULL, 0);
	{
		struct sh_wc wc = { 0 };
		uint32_t len = sh_put_tmh(msg, IBV_TMH_EAGER, 1, 0x200);
		int r = sh_qp_send(&s, qp[0], msg, len, 2, IBV_SEND_SIGNALED);
		int got = r ? 0 : sh_wait(NULL, scq[0], &wc, 10000);

		tap_check(got == 1 && wc.wr_id == 2 &&
			  wc.status == IBV_WC_RETRY_EXC_ERR,
			  "a send to the killed peer fails, as RC's retries "
			  "running out (%s)", r ? strerror(r) : sh_wc_str(&wc));
	}

	for (int k = 0; k < K; k++) {
		sh_v()->destroy_qp(qp[k]);
		sh_cq_destroy(scq[k]);
	}
	sh_side_close(&s);
	fd_read(&t);
	n = fd_new(&base, &t, list, sizeof(list), &socks, &pub, &rings);
	tap_check(n == 0 && t.n == base.n,
		  "closing gives them back (%d left:%s)", n, list);

	close(to_child[1]);
	for (int i = 1; i < K; i++)
		waitpid(pid[i], NULL, 0);
	return tap_done();
}
