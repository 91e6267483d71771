/*
 * fork_util.c - forked engine nodes for the peer-death tests (contract in
 * fork_util.h).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tap.h"
#include "fork_util.h"

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t fu_offload_thresh;

int node_open(struct pnode *nd, size_t arena)
{
	struct tm_dev_config dc;
	struct tm_engine_config ec;

	memset(nd, 0, sizeof(*nd));
	tm_dev_config_default(&dc);
	dc.provider = "soft";
	/* No registration cache: it starts UCX's async thread, and a fork()
	 * that catches that thread starting (allocating) leaves the child
	 * with the allocator's lock held for good under ASan, whose locks
	 * are not reset at fork; the child then hangs in its first malloc.
	 * These tests are about peers dying, not about the cache. */
	dc.rcache = 0;
	tm_engine_config_default(&ec);
	ec.eager_limit = 1024;
	ec.keepalive_ms = FU_KA_MS;
	ec.offload_thresh = fu_offload_thresh; /* 0: card-held, as before */
	if (tm_dev_open(&dc, &nd->dev) != TM_OK ||
	    tm_engine_create(nd->dev, &ec, &nd->eng) != TM_OK)
		return -1;
	nd->arena = calloc(1, arena);
	if (!nd->arena)
		return -1;
	return tm_dev_reg(nd->dev, nd->arena, arena, IBV_ACCESS_REMOTE_READ,
			  &nd->mr) == TM_OK ? 0 : -1;
}

void node_close(struct pnode *nd)
{
	tm_engine_destroy(nd->eng);
	for (int i = 0; i < FU_MAXP; i++)
		tm_dev_pair_destroy(nd->dev, &nd->qp[i]);
	if (nd->mr)
		tm_dev_dereg(nd->dev, nd->mr);
	free(nd->arena);
	tm_dev_close(nd->dev);
}

static int xfer(int fd, void *p, size_t n, int out)
{
	ssize_t k = out ? write(fd, p, n) : read(fd, p, n);

	return k == (ssize_t)n ? 0 : -1;
}

int link_peer(struct pnode *nd, int slot, int fd)
{
	struct tm_dev_pair_addr mine, theirs;

	nd->sock[slot] = fd;
	if (tm_dev_pair_create(nd->dev, &nd->qp[slot]))
		return -1;
	tm_dev_pair_addr(nd->dev, &nd->qp[slot], &mine);
	if (xfer(fd, &mine, sizeof(mine), 1) ||
	    xfer(fd, &theirs, sizeof(theirs), 0) ||
	    tm_dev_pair_connect(nd->dev, &nd->qp[slot], &theirs) ||
	    tm_engine_add_peer(nd->eng, &nd->qp[slot], &nd->peer[slot]))
		return -1;
	return 0;
}

int wait_byte(struct tm_engine *eng, int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	uint8_t b;

	for (;;) {
		tm_engine_progress(eng);
		if (poll(&pf, 1, 1) > 0)
			return read(fd, &b, 1) == 1 ? b : -1;
	}
}

pid_t spawn(struct pnode *nd, int slot, void (*child)(int arg, int fd),
	    int arg)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		tap_bail("socketpair");
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		tap_bail("fork");
	if (pid == 0) {
		close(sv[0]);
		child(arg, sv[1]);
		_exit(99);
	}
	close(sv[1]);
	if (link_peer(nd, slot, sv[0]))
		tap_bail("cannot connect to the child");
	return pid;
}

int reap(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void on_alarm(int sig)
{
	static const char msg[] = "Bail out! timed out: a request never completed\n";

	(void)sig;
	if (write(1, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(1);
}
