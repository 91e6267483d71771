/*
 * sh_reach.c - a hostile peer's tools (sh_reach.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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

/*
 * Maps what it can of the segments gid names: the ring segment and the
 * published one (rkey table) read-write, through every way a process of
 * the same user has: pidfd_getfd of the descriptors the GID names.
 */
void reach_victim(const union ibv_gid *gid, struct reach *r)
{
	uint32_t w[4];
	int pidfd, fd, rfd;
	struct stat st;
	void *m;

	memset(r, 0, sizeof(*r));
	r->how = "nothing reachable";
	memcpy(w, gid->raw, sizeof(w));
	pidfd = (int)syscall(SYS_pidfd_open, (pid_t)ntohl(w[1]), 0);
	if (pidfd < 0)
		return;
	fd = (int)syscall(SYS_pidfd_getfd, pidfd, (int)ntohl(w[2]), 0);
	if (fd < 0) {
		r->how = "pidfd_getfd refused";
		close(pidfd);
		return;
	}
	if (!fstat(fd, &st) && st.st_size >= (off_t)sizeof(r->head) &&
	    pread(fd, &r->head, sizeof(r->head), 0) == sizeof(r->head)) {
		r->pub_size = (size_t)st.st_size;
		m = mmap(NULL, r->pub_size, PROT_READ | PROT_WRITE, MAP_SHARED,
			 fd, 0);
		r->pub = m == MAP_FAILED ? NULL : m;
		rfd = (int)syscall(SYS_pidfd_getfd, pidfd, r->head.rings_fd, 0);
		if (rfd >= 0 && !fstat(rfd, &st)) {
			r->rings_size = (size_t)st.st_size;
			m = mmap(NULL, r->rings_size, PROT_READ | PROT_WRITE,
				 MAP_SHARED, rfd, 0);
			r->rings = m == MAP_FAILED ? NULL : m;
		}
		if (rfd >= 0)
			close(rfd);
		r->how = "pidfd_getfd";
	}
	close(fd);
	close(pidfd);
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
