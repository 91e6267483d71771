/*
 * handover.c - how a peer process gets a context's two segments without
 * any ptrace right over it, and nobody else does.
 *
 * Each context listens on a UNIX socket of the abstract namespace named
 * "softhca.<pid>.<nonce>": the nonce is 26 random bits that travel only
 * in the GID (through the job's address exchange), so nobody can tell or
 * take the name of a context before it is bound.  A thread of the owner
 * hands the two memfds over (SCM_RIGHTS) to a process of the same user
 * (SO_PEERCRED, checked as soon as it is accepted: anyone else is turned
 * away before a byte is read) that presents the GID's 48-bit key.  It
 * keeps a few such peers at once, each with a short deadline for its
 * key, so no peer can hold it.  A peer checks, before it sends the key,
 * that the listener is the process the GID names and runs as its own
 * user: a name freed by a closed context and bound by another process
 * gets nothing.  The thread only answers: it touches no object of the
 * context but the two descriptors and the key, fixed for its life.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "softhca_priv.h"
#include "softhca_handover.h"

/* how long a peer waits for the owner's answer */
#define SH_SOCK_WAIT_S 5
/* how long the owner waits for an accepted peer's key, and how many it
 * waits for at once (more wait in the listen backlog) */
#define SH_KEY_WAIT_MS 2000
#define SH_SERVE_SLOTS 8
/* a peer whose key came too late is told to ask again, this many times */
#define SH_FETCH_TRIES 3
#define SH_SERVE_STACK (256u * 1024)
#define SH_BIND_TRIES 64

/* the owner's one-byte answers */
#define ANS_SEGMENTS 'S' /* with the two descriptors */
#define ANS_REFUSED 'R'  /* another user, or not the key */
#define ANS_AGAIN 'T'    /* the key came too late: ask again */

static socklen_t sock_name(struct sockaddr_un *a, pid_t pid, uint32_t nonce)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* abstract namespace: sun_path[0] stays 0, no file behind it */
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "softhca.%d.%u", (int)pid, nonce);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

/* n random bytes from getrandom, or its errno: never from a clock. */
static int draw(void *p, size_t n)
{
	ssize_t r;

	do
		r = getrandom(p, n, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno;
	return r == (ssize_t)n ? 0 : EIO;
}

/* A small /proc file's text (NUL-terminated), or -1. */
static int read_text(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return -1;
	r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	return 0;
}

/* Does this process's user namespace map every uid (the initial one)? */
static bool initial_userns(void)
{
	unsigned long in, out, len;
	char buf[256];
	int end = 0;

	if (read_text("/proc/self/uid_map", buf, sizeof(buf)) ||
	    sscanf(buf, "%lu %lu %lu %n", &in, &out, &len, &end) != 3)
		return false;
	return in == 0 && out == 0 && len == 4294967295ul && !buf[end];
}

/*
 * Is uid (from SO_PEERCRED, as this process's user namespace shows it)
 * this process's user?  The overflow uid is everyone a namespace does not
 * map, this process included when its own uid is unmapped: it counts only
 * in the initial namespace, which maps every uid.
 */
static bool same_user(uid_t uid)
{
	/* (a sysctl nobody changes under a running job: read once) */
	static _Atomic int64_t overflow = -1;
	int64_t o = atomic_load_explicit(&overflow, memory_order_relaxed);
	char buf[32];

	if (uid != geteuid())
		return false;
	if (o < 0) {
		o = read_text("/proc/sys/kernel/overflowuid", buf, sizeof(buf))
			    ? 65534 : (int64_t)strtoul(buf, NULL, 10);
		atomic_store_explicit(&overflow, o, memory_order_relaxed);
	}
	return uid != (uid_t)o || initial_userns();
}

/* The credentials of the socket's other end: 0, or EACCES. */
static int peer_cred(int s, struct ucred *cr)
{
	socklen_t cl = sizeof(*cr);

	return getsockopt(s, SOL_SOCKET, SO_PEERCRED, cr, &cl) ||
	       cl != sizeof(*cr) ? EACCES : 0;
}

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- the owner's thread ------------------------------------------- */

/* An accepted peer of the owner's user, whose key is on its way. */
struct waiting {
	int fd;            /* -1: a free slot */
	unsigned have;     /* bytes of the key read */
	uint64_t key;
	int64_t until_ms;
};

static void answer(int c, char what)
{
	(void)send(c, &what, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The segments, to a peer that showed the key. */
static void hand_over(struct sh_context *ctx, int c)
{
	int fds[2] = { ctx->pub_fd, ctx->rings_fd };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(fds))];
	} u;
	char ok = ANS_SEGMENTS;
	struct iovec iov = { .iov_base = &ok, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *h;

	memset(&u, 0, sizeof(u));
	h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(h), fds, sizeof(fds));
	(void)sendmsg(c, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void slot_close(struct waiting *w)
{
	close(w->fd);
	w->fd = -1;
}

/* More of a waiting peer's key; the answer once it is whole. */
static void read_key(struct sh_context *ctx, struct waiting *w)
{
	ssize_t r = recv(w->fd, (char *)&w->key + w->have,
			 sizeof(w->key) - w->have, MSG_DONTWAIT);

	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		slot_close(w);
		return;
	}
	w->have += (unsigned)r;
	if (w->have < sizeof(w->key))
		return;
	if (w->key == ctx->key)
		hand_over(ctx, w->fd);
	else
		answer(w->fd, ANS_REFUSED);
	slot_close(w);
}

/* Takes what the listen backlog holds, while a slot is free: another
 * user's peer is refused at once, before it is read from. */
static void accept_some(struct sh_context *ctx, struct waiting *w)
{
	for (int i = 0; i < SH_SERVE_SLOTS; i++) {
		struct ucred cr;
		int c;

		if (w[i].fd >= 0)
			continue;
		c = accept4(ctx->srv_fd, NULL, NULL,
			    SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (c < 0) {
			/* out of descriptors (the backlog stays readable):
			 * a pause, not a spin, until the process frees some */
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				(void)poll(NULL, 0, 10);
			return;
		}
		if (peer_cred(c, &cr) || !same_user(cr.uid)) {
			answer(c, ANS_REFUSED);
			close(c);
			i--; /* (the slot is still free) */
			continue;
		}
		w[i] = (struct waiting){ .fd = c,
					 .until_ms = now_ms() + SH_KEY_WAIT_MS };
		read_key(ctx, &w[i]); /* (often there already) */
	}
}

/* The poll timeout: until the first waiting peer's deadline. */
static int next_deadline(const struct waiting *w)
{
	int64_t now = now_ms(), first = -1;

	for (int i = 0; i < SH_SERVE_SLOTS; i++)
		if (w[i].fd >= 0 && (first < 0 || w[i].until_ms < first))
			first = w[i].until_ms;
	if (first < 0)
		return -1;
	return first <= now ? 0 : (int)(first - now);
}

static void expire(struct waiting *w)
{
	int64_t now = now_ms();

	for (int i = 0; i < SH_SERVE_SLOTS; i++)
		if (w[i].fd >= 0 && w[i].until_ms <= now) {
			answer(w[i].fd, ANS_AGAIN);
			slot_close(&w[i]);
		}
}

/*
 * One round: stop, new peers (while a slot is free), keys.  false: stop.
 * The stop is the listening socket shut down (sh_serve_stop), which the
 * poll reports as a hang-up whatever it asked for: no descriptor of its
 * own, and no peer can cause it (a peer never holds the listener).
 */
static bool serve_round(struct sh_context *ctx, struct waiting *w)
{
	struct pollfd pf[1 + SH_SERVE_SLOTS];
	int at[SH_SERVE_SLOTS], n = 1;
	bool room = false;

	for (int i = 0; i < SH_SERVE_SLOTS; i++) {
		if (w[i].fd < 0) {
			room = true;
			continue;
		}
		at[n - 1] = i;
		pf[n++] = (struct pollfd){ .fd = w[i].fd, .events = POLLIN };
	}
	/* (a full house leaves newcomers in the backlog for a moment) */
	pf[0] = (struct pollfd){ .fd = ctx->srv_fd,
				 .events = room ? POLLIN : 0 };
	if (poll(pf, (nfds_t)n, next_deadline(w)) < 0 && errno != EINTR)
		return false;
	if (pf[0].revents & (POLLHUP | POLLERR | POLLNVAL))
		return false;
	for (int k = 1; k < n; k++)
		if (pf[k].revents)
			read_key(ctx, &w[at[k - 1]]);
	if (pf[0].revents & POLLIN)
		accept_some(ctx, w);
	expire(w);
	return true;
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
	struct waiting w[SH_SERVE_SLOTS];
	bool held = !pthread_mutex_lock(&ctx->seg->alive.m);

	sem_post(&st->running); /* st is the opener's: gone after this */
	for (int i = 0; i < SH_SERVE_SLOTS; i++)
		w[i].fd = -1;
	while (serve_round(ctx, w))
		;
	for (int i = 0; i < SH_SERVE_SLOTS; i++)
		if (w[i].fd >= 0)
			slot_close(&w[i]);
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
 * The key and the nonce, and the socket bound under the nonce's name
 * (another nonce while the name is taken: a squatter, or a rare draw
 * that a process of the same pid in another PID namespace made).
 */
int sh_serve_bind(struct sh_context *ctx)
{
	const uint32_t nonce_mask = (1u << SH_NONCE_BITS) - 1;
	struct sockaddr_un a;
	int err, tries = 0;
	socklen_t n;

	ctx->srv_fd = -1;
	ctx->srv_pid = 0;
	err = draw(&ctx->key, sizeof(ctx->key));
	if (err)
		return err;
	ctx->key &= (1ull << SH_KEY_BITS) - 1;
	/* (non-blocking: the thread accepts until the backlog is empty) */
	ctx->srv_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
			     0);
	if (ctx->srv_fd < 0)
		return errno;
	do {
		do {
			err = draw(&ctx->nonce, sizeof(ctx->nonce));
			ctx->nonce &= nonce_mask;
		} while (!err && !ctx->nonce);
		if (err)
			goto fail;
		n = sock_name(&a, getpid(), ctx->nonce);
		err = bind(ctx->srv_fd, (struct sockaddr *)&a, n) ? errno : 0;
	} while (err == EADDRINUSE && ++tries < SH_BIND_TRIES);
	if (err || listen(ctx->srv_fd, 64)) {
		fprintf(stderr, "softhca: cannot listen as @%s (%s): other "
			"processes cannot connect to this one\n",
			a.sun_path + 1, strerror(err ? err : errno));
		close(ctx->srv_fd);
		ctx->srv_fd = -1;
	}
	return 0;
fail:
	close(ctx->srv_fd);
	ctx->srv_fd = -1;
	return err;
}

/* Starts the thread (signals blocked in it: they are the application's). */
int sh_serve_start(struct sh_context *ctx)
{
	struct serve_start st = { .ctx = ctx };
	pthread_attr_t attr;
	sigset_t all, old;
	int err;

	if (ctx->srv_fd < 0)
		return 0;
	err = alive_init(ctx);
	if (err)
		goto fail;
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
	if (err)
		goto fail;
	ctx->srv_pid = getpid();
	return 0;
fail:
	close(ctx->srv_fd);
	ctx->srv_fd = -1;
	return err;
}

/*
 * (a process forked with the context has the socket, not the thread: it
 * only closes its copy, for a shutdown would stop the parent's thread)
 */
void sh_serve_stop(struct sh_context *ctx)
{
	if (ctx->srv_fd < 0)
		return;
	if (!ctx->srv_pid) { /* bound, the thread not started */
		close(ctx->srv_fd);
		ctx->srv_fd = -1;
		return;
	}
	if (ctx->srv_pid == getpid()) {
		/* wakes the thread's poll (a hang-up), and refuses new peers */
		if (shutdown(ctx->srv_fd, SHUT_RDWR))
			abort(); /* the thread would outlive the context */
		pthread_join(ctx->srv_thread, NULL);
		pthread_mutex_destroy(&ctx->seg->alive.m);
	}
	close(ctx->srv_fd);
	ctx->srv_fd = -1;
}

static void sock_timeouts(int s)
{
	struct timeval tv = { .tv_sec = SH_SOCK_WAIT_S };

	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* The owner's answer: its descriptors, or why not (sh_peer_fetch). */
static int take_answer(int s, int *pfd, int *rfd)
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
	struct cmsghdr *h;
	ssize_t r;

	memset(&u, 0, sizeof(u));
	r = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
	if (r < 0)
		return errno == EAGAIN ? ETIMEDOUT
		       : errno == ECONNRESET ? ECONNREFUSED : errno;
	h = CMSG_FIRSTHDR(&m);
	if (r != 1 || ok != ANS_SEGMENTS || !h ||
	    h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS ||
	    h->cmsg_len != CMSG_LEN(sizeof(fds))) {
		/* (a descriptor that came with a wrong answer is closed) */
		if (h && h->cmsg_type == SCM_RIGHTS) {
			size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			memcpy(fds, CMSG_DATA(h),
			       (k > 2 ? 2 : k) * sizeof(int));
			for (size_t i = 0; i < k && i < 2; i++)
				close(fds[i]);
		}
		return r == 0 ? ECONNREFUSED
		       : r == 1 && ok == ANS_REFUSED ? EACCES
		       : r == 1 && ok == ANS_AGAIN ? EAGAIN : EPROTO;
	}
	memcpy(fds, CMSG_DATA(h), sizeof(fds));
	*pfd = fds[0];
	*rfd = fds[1];
	return 0;
}

/* One connection to the owner: its process and user first, then the key. */
static int fetch_once(const struct sh_gid *g, int *pfd, int *rfd)
{
	struct sockaddr_un a;
	socklen_t n = sock_name(&a, g->pid, g->nonce);
	struct ucred cr;
	int s, err;

	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return errno;
	sock_timeouts(s);
	if (connect(s, (struct sockaddr *)&a, n)) {
		err = errno == ENOENT ? ECONNREFUSED : errno;
		goto out;
	}
	/* (the listener's credentials, as of its listen()) */
	err = peer_cred(s, &cr);
	if (!err && (cr.pid != g->pid || !same_user(cr.uid)))
		err = EACCES;
	if (err)
		goto out;
	/* (an owner that refused this user at once has closed already: its
	 * answer waits to be read all the same; one that closed without a
	 * word went away, its process exiting or its context closed) */
	if (send(s, &g->key, sizeof(g->key), MSG_NOSIGNAL) !=
		    (ssize_t)sizeof(g->key) &&
	    errno != EPIPE && errno != ECONNRESET) {
		err = errno;
		goto out;
	}
	err = take_answer(s, pfd, rfd);
out:
	close(s);
	return err;
}

/*
 * The peer side: the two descriptors from the owner's thread.  A key that
 * reached the owner after its deadline (this process stalled on a loaded
 * machine) is sent again on a new connection, a few times.
 */
int sh_peer_fetch(const struct sh_gid *g, int *pfd, int *rfd)
{
	int err, tries = 0;

	do
		err = fetch_once(g, pfd, rfd);
	while (err == EAGAIN && ++tries < SH_FETCH_TRIES);
	return err == EAGAIN ? ETIMEDOUT : err;
}
