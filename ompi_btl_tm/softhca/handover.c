/*
 * handover.c - how a peer process gets a context's two segments without
 * any ptrace right over it.
 *
 * Each context listens on a UNIX socket of the abstract namespace named
 * after its pid, the published segment's descriptor and a salt that
 * keeps jobs in separate PID namespaces apart ("softhca.<pid>.<fd>.<salt>",
 * all three in its GID), and a thread of the owner
 * hands the two memfds over (SCM_RIGHTS) to a process that runs as the
 * same user (SO_PEERCRED) and presents the key the GID carries: 64
 * random bits (the GID's key and nonce), which travel only through the
 * job's address exchange.  The socket's name is public (/proc/net/unix),
 * its key is not, so a process that was not given the GID gets nothing.
 * The thread only answers: it touches no object of the context but the
 * two descriptors and the key, fixed for the context's life.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "softhca_priv.h"
#include "softhca_handover.h"

/* how long a peer waits for the owner's answer, and the owner for a peer */
#define SH_SOCK_WAIT_S 5
#define SH_SERVE_STACK (256u * 1024)

static socklen_t sock_name(struct sockaddr_un *a, pid_t pid, int fd,
			   uint32_t salt)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* abstract namespace: sun_path[0] stays 0, no file behind it */
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "softhca.%d.%d.%u", (int)pid, fd, salt);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

static uint64_t ctx_secret(const struct sh_context *ctx)
{
	return (uint64_t)ctx->key << 32 | ctx->nonce;
}

static void sock_timeouts(int s)
{
	struct timeval tv = { .tv_sec = SH_SOCK_WAIT_S };

	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/*
 * One peer: same user and the key, or it gets nothing but a refusal ('R'),
 * so that it can tell a refusal from an owner that went away.
 */
static void serve_one(struct sh_context *ctx, int c)
{
	int fds[2] = { ctx->pub_fd, ctx->rings_fd };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(fds))];
	} u;
	char ok = 'S';
	struct iovec iov = { .iov_base = &ok, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	uint64_t secret = 0;
	struct cmsghdr *h;
	ssize_t got;

	sock_timeouts(c);
	/* (the key is read whoever asks: a socket closed with unread data
	 * resets, and the refusal would not arrive) */
	got = recv(c, &secret, sizeof(secret), MSG_WAITALL);
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) ||
	    cr.uid != geteuid() || got != (ssize_t)sizeof(secret) ||
	    secret != ctx_secret(ctx)) {
		ok = 'R';
		(void)send(c, &ok, 1, MSG_NOSIGNAL);
		return;
	}
	memset(&u, 0, sizeof(u));
	h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(h), fds, sizeof(fds));
	(void)sendmsg(c, &m, MSG_NOSIGNAL);
}

/* What the opener hands its thread (on the opener's stack). */
struct serve_start {
	struct sh_context *ctx;
	sem_t running;
};

/*
 * The owner's thread: answers peers until the context closes, holding the
 * segment's liveness mutex all along (softhca_shm.h, sh_seg.alive): taken
 * before the first answer, so every peer that maps the segment finds it
 * held.
 */
static void *serve_main(void *arg)
{
	struct serve_start *st = arg;
	struct sh_context *ctx = st->ctx;
	struct pollfd pf[2] = { { .fd = ctx->srv_fd, .events = POLLIN },
				{ .fd = ctx->srv_stop[0], .events = POLLIN } };
	bool held = !pthread_mutex_lock(&ctx->seg->alive.m);

	sem_post(&st->running); /* st is the opener's: gone after this */

	for (;;) {
		int c;

		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[1].revents)
			break;
		if (!(pf[0].revents & POLLIN))
			continue;
		c = accept4(ctx->srv_fd, NULL, NULL, SOCK_CLOEXEC);
		if (c >= 0) {
			serve_one(ctx, c);
			close(c);
		}
	}
	if (held)
		pthread_mutex_unlock(&ctx->seg->alive.m);
	return NULL;
}

/* The liveness mutex: robust (the kernel marks it when the holder dies)
 * and process-shared (peers read its word). */
static int alive_init(struct sh_context *ctx)
{
	pthread_mutexattr_t ma;
	int err;

	pthread_mutexattr_init(&ma);
	err = pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	if (!err)
		err = pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
	if (!err)
		err = pthread_mutex_init(&ctx->seg->alive.m, &ma);
	pthread_mutexattr_destroy(&ma);
	return err;
}

/*
 * Listens and starts the thread (signals blocked in it: they are the
 * application's).  A name already taken (a process of the same pid in
 * another PID namespace, sharing this network namespace) leaves the
 * context reachable from its own process only, and says so.
 */
int sh_serve_start(struct sh_context *ctx)
{
	struct serve_start st = { .ctx = ctx };
	struct sockaddr_un a;
	pthread_attr_t attr;
	sigset_t all, old;
	uint32_t base = 0;
	socklen_t n;
	int err, tries = 0;

	ctx->srv_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (ctx->srv_fd < 0)
		return errno;
	/* a name in use: a process with our pid and descriptor in another
	 * PID namespace on this network namespace; another salt */
	/* (public, like the whole name: not drawn from the key) */
	if (getrandom(&base, sizeof(base), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(base))
		base = (uint32_t)getpid() * 0x9e3779b9u;
	do {
		ctx->srv_salt = (base + (uint32_t)tries * 0x9e37u) & 0x3ffu;
		n = sock_name(&a, getpid(), ctx->pub_fd, ctx->srv_salt);
		err = bind(ctx->srv_fd, (struct sockaddr *)&a, n) ? errno : 0;
	} while (err == EADDRINUSE && ++tries < 64);
	if (err || listen(ctx->srv_fd, 64)) {
		err = err ? err : errno;
		fprintf(stderr, "softhca: cannot listen as @%s (%s): other "
			"processes cannot connect to this one\n",
			a.sun_path + 1, strerror(err));
		close(ctx->srv_fd);
		ctx->srv_fd = -1;
		return 0;
	}
	err = alive_init(ctx);
	if (err)
		goto fail;
	if (pipe2(ctx->srv_stop, O_CLOEXEC)) {
		err = errno;
		goto fail;
	}
	/* a small stack: it only answers (opened per context, so its cost
	 * shows in programs that open many) */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, SH_SERVE_STACK);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	sem_init(&st.running, 0, 0);
	err = pthread_create(&ctx->srv_thread, &attr, serve_main, &st);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	/* The open returns once the thread runs and holds the liveness
	 * mutex: no peer ever finds it unheld, and a fork() right after the
	 * open cannot catch the thread in its start-up allocations, whose
	 * allocator locks the child would inherit held (ASan's are not
	 * released at fork: a forked child hung in its first malloc). */
	while (!err && sem_wait(&st.running) && errno == EINTR)
		;
	sem_destroy(&st.running);
	if (err) {
		close(ctx->srv_stop[0]);
		close(ctx->srv_stop[1]);
		goto fail;
	}
	ctx->srv_pid = getpid();
	return 0;
fail:
	close(ctx->srv_fd);
	ctx->srv_fd = -1;
	return err;
}

/* (a process forked with the context has the sockets, not the thread) */
void sh_serve_stop(struct sh_context *ctx)
{
	char b = 0;

	if (ctx->srv_fd < 0)
		return;
	if (ctx->srv_pid == getpid()) {
		if (write(ctx->srv_stop[1], &b, 1) != 1)
			abort(); /* the thread would outlive the context */
		pthread_join(ctx->srv_thread, NULL);
		pthread_mutex_destroy(&ctx->seg->alive.m);
	}
	close(ctx->srv_stop[0]);
	close(ctx->srv_stop[1]);
	close(ctx->srv_fd);
	ctx->srv_fd = -1;
}

/*
 * The peer side: the two descriptors from the owner's thread.  0, or
 * ECONNREFUSED (nobody listens under that name), EACCES (the owner
 * refused: another user, or not the key), ETIMEDOUT, another errno.
 */
int sh_peer_fetch(const struct sh_gid *g, int *pfd, int *rfd)
{
	int fds[2];
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(fds))];
	} u;
	char ok = 0;
	struct iovec iov = { .iov_base = &ok, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct sockaddr_un a;
	socklen_t n = sock_name(&a, g->pid, g->fd, g->salt);
	struct cmsghdr *h;
	int s, err = 0;
	ssize_t r;

	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return errno;
	sock_timeouts(s);
	if (connect(s, (struct sockaddr *)&a, n)) {
		err = errno == ENOENT ? ECONNREFUSED : errno;
		goto out;
	}
	/* (an owner that closed without a word went away: its process
	 * is exiting, or its context closed) */
	if (send(s, &g->secret, sizeof(g->secret), MSG_NOSIGNAL) !=
	    (ssize_t)sizeof(g->secret)) {
		err = errno == EPIPE || errno == ECONNRESET ? ECONNREFUSED
							    : errno;
		goto out;
	}
	memset(&u, 0, sizeof(u));
	r = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
	if (r < 0) {
		err = errno == EAGAIN ? ETIMEDOUT
		      : errno == ECONNRESET ? ECONNREFUSED : errno;
		goto out;
	}
	h = CMSG_FIRSTHDR(&m);
	if (r != 1 || ok != 'S' || !h || h->cmsg_level != SOL_SOCKET ||
	    h->cmsg_type != SCM_RIGHTS ||
	    h->cmsg_len != CMSG_LEN(sizeof(fds))) {
		/* (a descriptor that came with a wrong answer is closed) */
		if (h && h->cmsg_type == SCM_RIGHTS) {
			size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			memcpy(fds, CMSG_DATA(h),
			       (k > 2 ? 2 : k) * sizeof(int));
			for (size_t i = 0; i < k && i < 2; i++)
				close(fds[i]);
		}
		err = r == 0 ? ECONNREFUSED : r == 1 && ok == 'R' ? EACCES
						    : EPROTO;
		goto out;
	}
	memcpy(fds, CMSG_DATA(h), sizeof(fds));
	*pfd = fds[0];
	*rfd = fds[1];
out:
	close(s);
	return err;
}
