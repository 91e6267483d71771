/*
 * sh_reach.c - a hostile peer's tools (sh_reach.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "sh_util.h"
#include "sh_reach.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

void reach_drop(struct reach *r)
{
	if (r->rings)
		munmap(r->rings, r->rings_size);
	if (r->pub)
		munmap(r->pub, r->pub_size);
	memset(r, 0, sizeof(*r));
}

/* The GID's fields as the soft HCA lays them out (shm.c, sh_gid_encode). */
static void gid_fields(const union ibv_gid *gid, pid_t *pid, int *fd,
		       uint32_t *nonce, uint64_t *key)
{
	uint32_t w[4];

	memcpy(w, gid->raw, sizeof(w));
	for (int i = 0; i < 4; i++)
		w[i] = ntohl(w[i]);
	*pid = (pid_t)(w[1] & 0x3fffffu);
	*nonce = (w[2] >> 16) << 10 | w[1] >> 22;
	*fd = (int)(w[2] & 0xffffu);
	*key = (uint64_t)(w[0] & 0xffffu) << 32 | w[3];
}

/* pidfd_getfd: needs a ptrace right over the owner */
static int by_pidfd(pid_t pid, int fd, int *pfd, int *rfd)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct sh_seg head;

	*pfd = *rfd = -1;
	if (pidfd < 0)
		return -1;
	*pfd = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	if (*pfd >= 0 && pread(*pfd, &head, sizeof(head), 0) ==
				 (ssize_t)sizeof(head))
		*rfd = (int)syscall(SYS_pidfd_getfd, pidfd, head.rings_fd, 0);
	close(pidfd);
	return *pfd >= 0 ? 0 : -1;
}

/* the owner's socket, as a peer asks it (handover.c) */
static int by_socket(pid_t pid, uint32_t nonce, uint64_t key, int *pfd,
		     int *rfd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(2 * sizeof(int))];
	} u;
	char ok = 0;
	struct iovec iov = { .iov_base = &ok, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct cmsghdr *h;
	int s, n, fds[2], rc = -1;

	n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1,
		     "softhca.%d.%u", (int)pid, nonce);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	memset(&u, 0, sizeof(u));
	if (!connect(s, (struct sockaddr *)&a,
		     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				 (size_t)n)) &&
	    send(s, &key, sizeof(key), MSG_NOSIGNAL) == (ssize_t)sizeof(key) &&
	    recvmsg(s, &m, MSG_CMSG_CLOEXEC) == 1 &&
	    (h = CMSG_FIRSTHDR(&m)) && h->cmsg_type == SCM_RIGHTS &&
	    h->cmsg_len == CMSG_LEN(sizeof(fds))) {
		memcpy(fds, CMSG_DATA(h), sizeof(fds));
		*pfd = fds[0];
		*rfd = fds[1];
		rc = 0;
	}
	close(s);
	return rc;
}

void reach_victim(const union ibv_gid *gid, struct reach *r)
{
	uint64_t key;
	uint32_t nonce;
	int fd, pfd, rfd;
	struct stat st;
	pid_t pid;
	void *m;

	memset(r, 0, sizeof(*r));
	gid_fields(gid, &pid, &fd, &nonce, &key);
	if (!by_pidfd(pid, fd, &pfd, &rfd)) {
		r->how = "pidfd_getfd";
	} else if (!by_socket(pid, nonce, key, &pfd, &rfd)) {
		r->how = "the owner's socket";
	} else {
		r->how = "pidfd_getfd and the owner's socket refused";
		return;
	}
	if (!fstat(pfd, &st) && st.st_size >= (off_t)sizeof(r->head) &&
	    pread(pfd, &r->head, sizeof(r->head), 0) == sizeof(r->head)) {
		r->pub_size = (size_t)st.st_size;
		m = mmap(NULL, r->pub_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			 pfd, 0);
		r->pub = m == MAP_FAILED ? NULL : m;
		if (rfd >= 0 && !fstat(rfd, &st)) {
			r->rings_size = (size_t)st.st_size;
			m = mmap(NULL, r->rings_size, PROT_READ | PROT_WRITE,
				 MAP_SHARED, rfd, 0);
			r->rings = m == MAP_FAILED ? NULL : m;
		}
	}
	if (rfd >= 0)
		close(rfd);
	close(pfd);
}

struct sh_ring *reach_ring(struct reach *r, uint32_t qpn)
{
	return (struct sh_ring *)(r->rings + SH_RINGS_OFF +
				  r->head.ring_stride * (qpn - SH_QPN_BASE));
}

struct sh_mr_slot *reach_mr(struct reach *r, uint32_t i)
{
	return (struct sh_mr_slot *)(r->pub + r->head.mr_off) + i;
}

/*
 * Writes one packet where the consumer looks next (its published tail)
 * and marks it arrived with seq = position + 1 + skew: a producer that
 * lies about the position when skew is not 0.
 */
void forge(struct reach *r, uint32_t qpn, const struct sh_pkt *hdr,
	   const void *data, uint32_t n, uint32_t skew)
{
	struct sh_ring *ring = reach_ring(r, qpn);
	uint32_t pos = atomic_load(&ring->tail);
	struct sh_pkt *slot = (struct sh_pkt *)((uint8_t *)(ring + 1) +
		r->head.slot_size * (pos % r->head.ring_depth));

	memcpy((uint8_t *)slot + sizeof(slot->seq),
	       (const uint8_t *)hdr + sizeof(hdr->seq),
	       sizeof(*hdr) - sizeof(hdr->seq));
	memcpy(slot->data, data, n);
	atomic_store(&slot->seq, pos + 1 + skew);
}

int run_child(int (*fn)(int), int arg)
{
	pid_t pid = fork();
	int status = 0;

	if (pid < 0)
		sh_die("fork: %s", strerror(errno));
	if (!pid) {
		alarm(30); /* a card that never stops fails, not hangs */
		_exit(fn(arg));
	}
	waitpid(pid, &status, 0);
	return WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
}
