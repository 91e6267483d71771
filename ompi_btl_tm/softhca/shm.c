/*
 * shm.c - the soft HCA's wire: two anonymous shared-memory segments per
 * context (softhca_priv.h has the layout).
 *
 * The segments are memfds: no file exists to guess, collide with or leave
 * behind, and the memory goes when the last process mapping it does, kill
 * -9 included.  A peer process gets them from the owner over a socket
 * (handover.c), as a process of the same user that holds the owner's GID
 * (no ptrace right needed); two contexts of one process share the
 * descriptors directly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/futex.h>

#include "softhca_priv.h"
#include "softhca_handover.h"

#define SH_GID_TAG 0x5354u /* "ST" */
/* how long a connect waits for a peer that stopped answering to exit */
#define SH_EXIT_WAIT_MS 200

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* Peers may map the published segment read-only, and nobody may resize. */
#define SH_PUB_SEALS   (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | \
			F_SEAL_SEAL)
/* A peer that truncated the rings would crash the owner with SIGBUS. */
#define SH_RINGS_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
/* Sanity bound on a peer's segment (the config limits stay far below). */
#define SH_SEG_MAX     (1ull << 40)

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/*
 * The card's clock only paces liveness checks (milliseconds), so the
 * coarse clock will do: it costs a few cycles where the precise one costs
 * a visible share of a small-message round trip.
 */
uint64_t sh_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The geometry for these limits; EINVAL outside the config's ranges. */
int sh_layout_compute(struct sh_layout *l, uint32_t mtu, uint32_t ring_depth,
		      uint32_t max_qp, uint32_t max_mr)
{
	if (mtu < 64 || mtu > (1u << 20) || ring_depth < 2 ||
	    ring_depth > 65536 || !max_qp || max_qp > 65536 || !max_mr ||
	    max_mr > 65535)
		return EINVAL;
	memset(l, 0, sizeof(*l));
	l->mtu = mtu;
	l->ring_depth = ring_depth;
	l->max_qp = max_qp;
	l->max_mr = max_mr;
	l->slot_size = align_up(sizeof(struct sh_pkt) + mtu, 64);
	l->ring_stride = align_up(sizeof(struct sh_ring) +
				  l->slot_size * ring_depth, 4096);
	l->mr_off = 4096;
	l->pub_size = align_up(l->mr_off + sizeof(struct sh_mr_slot) * max_mr,
			       4096);
	l->ud_off = SH_RINGS_OFF + l->ring_stride * max_qp;
	l->rings_size = l->ud_off + align_up(sizeof(struct sh_ud_box), 4096);
	return 0;
}

/*
 * The GID: "ST" and the key's top 16 bits; the nonce's low 10 bits and
 * the pid (below 2^22, the kernel's pid_max bound); the nonce's high 16
 * bits and the published segment's descriptor (below 2^16, for contexts
 * of the same process); the key's low 32 bits.  The pid and the nonce
 * name the owner's socket (handover.c), the key is what a peer shows it.
 */
void sh_gid_encode(union ibv_gid *gid, pid_t pid, int fd, uint32_t nonce,
		   uint64_t key)
{
	uint32_t w[4] = { htonl(SH_GID_TAG << 16 |
				(uint32_t)(key >> 32 & 0xffffu)),
			  htonl((nonce & 0x3ffu) << 22 | (uint32_t)pid),
			  htonl((nonce >> 10 & 0xffffu) << 16 | (uint32_t)fd),
			  htonl((uint32_t)key) };

	memcpy(gid->raw, w, sizeof(w));
}

static int gid_decode(const union ibv_gid *gid, struct sh_gid *f)
{
	uint32_t w[4];

	memcpy(w, gid->raw, sizeof(w));
	for (int i = 0; i < 4; i++)
		w[i] = ntohl(w[i]);
	if (w[0] >> 16 != SH_GID_TAG || !(w[1] & 0x3fffffu))
		return EINVAL;
	f->pid = (pid_t)(w[1] & 0x3fffffu);
	f->fd = (int)(w[2] & 0xffffu);
	f->nonce = (w[2] >> 16) << 10 | w[1] >> 22;
	f->key = (uint64_t)(w[0] & 0xffffu) << 32 | w[3];
	return 0;
}

static int memfd_sized(const char *name, uint64_t size, void **map)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING), err;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size))
		goto fail;
	*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED)
		goto fail;
	return fd;
fail:
	err = errno;
	close(fd);
	return -err;
}

int sh_seg_create(struct sh_context *ctx)
{
	const struct softhca_config *cfg = &ctx->cfg;
	struct sh_layout *l = &ctx->lay;
	void *pub = NULL, *rings = NULL;
	struct sh_seg *seg;
	int err;

	ctx->pub_fd = ctx->rings_fd = ctx->srv_fd = -1;
	err = sh_layout_compute(l, cfg->mtu, cfg->ring_depth, cfg->max_qp,
				cfg->max_mr);
	if (err)
		return err;
	ctx->rxw = calloc(l->max_qp, sizeof(*ctx->rxw));
	ctx->rxw_qp = calloc(l->max_qp, sizeof(*ctx->rxw_qp));
	if (!ctx->rxw || !ctx->rxw_qp) {
		err = ENOMEM;
		goto fail;
	}
	/* the nonce, which the headers carry, comes with the socket */
	err = sh_serve_bind(ctx);
	if (err)
		goto fail;
	ctx->pub_fd = memfd_sized("softtm-pub", l->pub_size, &pub);
	if (ctx->pub_fd < 0) {
		err = -ctx->pub_fd;
		goto fail;
	}
	if (ctx->pub_fd > 0xffff) {
		err = EMFILE; /* the GID has 16 bits for it */
		goto fail;
	}
	ctx->rings_fd = memfd_sized("softtm-rings", l->rings_size, &rings);
	if (ctx->rings_fd < 0) {
		err = -ctx->rings_fd;
		goto fail;
	}
	l->owner_va = (uint64_t)(uintptr_t)pub;
	seg = pub;
	seg->version = SH_SEG_VERSION;
	seg->pid = getpid();
	seg->mtu = l->mtu;
	seg->ring_depth = l->ring_depth;
	seg->max_qp = l->max_qp;
	seg->max_mr = l->max_mr;
	seg->owner_va = l->owner_va;
	seg->mr_off = l->mr_off;
	seg->size = l->pub_size;
	seg->ring_stride = l->ring_stride;
	seg->slot_size = l->slot_size;
	seg->rings_size = l->rings_size;
	seg->rings_fd = ctx->rings_fd;
	seg->nonce = ctx->nonce;
	ctx->rings = rings;
	ctx->rings->magic = SH_RINGS_MAGIC;
	ctx->rings->nonce = ctx->nonce;
	atomic_thread_fence(memory_order_release);
	seg->magic = SH_SEG_MAGIC;
	if (fcntl(ctx->pub_fd, F_ADD_SEALS, SH_PUB_SEALS) ||
	    fcntl(ctx->rings_fd, F_ADD_SEALS, SH_RINGS_SEALS)) {
		err = errno;
		goto fail;
	}
	ctx->seg = seg; /* (the handover thread takes seg->alive) */
	err = sh_serve_start(ctx);
	if (err)
		goto fail;
	return 0;
fail:
	sh_serve_stop(ctx);
	ctx->seg = NULL;
	if (pub)
		munmap(pub, l->pub_size);
	if (rings)
		munmap(rings, l->rings_size);
	if (ctx->pub_fd >= 0)
		close(ctx->pub_fd);
	if (ctx->rings_fd >= 0)
		close(ctx->rings_fd);
	ctx->pub_fd = ctx->rings_fd = -1;
	ctx->rings = NULL;
	free(ctx->rxw);
	free(ctx->rxw_qp);
	ctx->rxw = NULL;
	ctx->rxw_qp = NULL;
	return err;
}

void sh_seg_destroy(struct sh_context *ctx)
{
	if (!ctx->seg)
		return;
	sh_serve_stop(ctx);
	munmap(ctx->seg, ctx->lay.pub_size);
	munmap(ctx->rings, ctx->lay.rings_size);
	close(ctx->pub_fd);
	close(ctx->rings_fd);
	free(ctx->rxw);
	free(ctx->rxw_qp);
	ctx->rxw = NULL;
	ctx->rxw_qp = NULL;
	ctx->seg = NULL;
	ctx->rings = NULL;
}

struct sh_ring *sh_ring_at(const struct sh_layout *l, void *rings,
			   uint32_t index)
{
	return (struct sh_ring *)((char *)rings + SH_RINGS_OFF +
				  l->ring_stride * index);
}

struct sh_mr_slot *sh_seg_mr(struct sh_context *ctx, uint32_t index)
{
	return (struct sh_mr_slot *)((char *)ctx->seg + ctx->lay.mr_off) +
	       index;
}

uint8_t *sh_ring_slot(const struct sh_layout *l, struct sh_ring *ring,
		      uint32_t pos)
{
	return (uint8_t *)(ring + 1) + l->slot_size * (pos % l->ring_depth);
}

/*
 * Readies ring index of this context for positions that restart at 0 (a
 * new or reset QP).  A ready slot holds seq = position + 1; one not filled
 * yet holds the seq of a lap before (position + 1 - depth), or, in the
 * ring's first lap, 0 (ingress.c, qp->in_step).  So a cleared ring is all
 * zeros, and clearing it gives its pages back rather than writing each
 * slot: a ring costs memory only for the slots a peer has filled (a QP
 * that carries one small message holds a page or two, not depth pages).
 * Zeros also wipe whatever a previous owner of the slot left, whose seqs
 * a new consumer could take for its own.  The page holding the ring's
 * header is written, not freed.
 */
void sh_ring_clear(struct sh_context *ctx, uint32_t index)
{
	const struct sh_layout *l = &ctx->lay;
	struct sh_ring *ring = sh_ring_at(l, ctx->rings, index);
	uint64_t off = SH_RINGS_OFF + l->ring_stride * index;
	uint32_t i;

	for (i = 0; i < l->ring_depth; i++) {
		struct sh_pkt *slot = (struct sh_pkt *)sh_ring_slot(l, ring, i);

		if ((uint8_t *)slot - (uint8_t *)ring >= 4096)
			break;
		atomic_store_explicit(&slot->seq, 0, memory_order_relaxed);
	}
	if (i < l->ring_depth &&
	    fallocate(ctx->rings_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)(off + 4096), (off_t)(l->ring_stride - 4096)))
		for (; i < l->ring_depth; i++) /* no hole punching: write */
			atomic_store_explicit(
				&((struct sh_pkt *)sh_ring_slot(l, ring, i))->seq,
				0, memory_order_relaxed);
	atomic_store_explicit(&ring->tail, 0, memory_order_release);
}

/* fd's segment if it is a memfd sealed with at least seals, else -1. */
static int sealed_size(int fd, int seals, uint64_t *size)
{
	struct stat st;
	int have = fcntl(fd, F_GET_SEALS);

	if (have < 0 || (have & seals) != seals || fstat(fd, &st) ||
	    !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    (uint64_t)st.st_size > SH_SEG_MAX)
		return -1;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* The header as published, checked against the geometry it implies. */
static int header_check(const struct sh_seg *h, pid_t pid, uint32_t nonce,
			uint64_t size, struct sh_layout *l)
{
	if (h->magic != SH_SEG_MAGIC || h->version != SH_SEG_VERSION ||
	    h->pid != pid || h->nonce != nonce || h->rings_fd < 0 ||
	    sh_layout_compute(l, h->mtu, h->ring_depth, h->max_qp, h->max_mr))
		return EPROTO;
	if (h->mr_off != l->mr_off || h->size != l->pub_size ||
	    h->size != size || h->ring_stride != l->ring_stride ||
	    h->slot_size != l->slot_size || h->rings_size != l->rings_size ||
	    l->rings_size > SH_SEG_MAX)
		return EPROTO;
	l->owner_va = h->owner_va;
	return 0;
}

/* Has the process behind pidfd exited (zombie included) within ms? */
static bool pidfd_exited(int pidfd, int ms)
{
	struct pollfd pf = { .fd = pidfd, .events = POLLIN };

	return poll(&pf, 1, ms) == 1 && (pf.revents & POLLIN);
}

/*
 * The two descriptors of the context g names: from the owner's socket, or
 * (our own process) a dup.  0, ESRCH if the process has exited, or why not.
 */
static int peer_fds(const struct sh_gid *g, int *pfd, int *rfd)
{
	const struct sh_seg *h;
	uint64_t size;
	int pidfd, err;
	void *m;

	if (g->pid != getpid()) {
		err = sh_peer_fetch(g, pfd, rfd);
		if (!err || err != ECONNREFUSED)
			return err;
		/*
		 * Nobody answers: gone (a zombie included; a process that is
		 * exiting closes its sockets first, so give it a moment), or
		 * unreachable.
		 */
		pidfd = (int)syscall(SYS_pidfd_open, g->pid, 0);
		if (pidfd < 0)
			return errno == ESRCH ? ESRCH : ECONNREFUSED;
		err = pidfd_exited(pidfd, SH_EXIT_WAIT_MS) ? ESRCH
							    : ECONNREFUSED;
		close(pidfd);
		return err;
	}
	*pfd = fcntl(g->fd, F_DUPFD_CLOEXEC, 0);
	if (*pfd < 0)
		return errno == EBADF ? ECONNREFUSED : errno;
	/* the rings' descriptor, as the header gives it (checked later) */
	if (sealed_size(*pfd, SH_PUB_SEALS, &size) || size < sizeof(*h)) {
		close(*pfd);
		return EPROTO;
	}
	m = mmap(NULL, sizeof(*h), PROT_READ, MAP_SHARED, *pfd, 0);
	if (m == MAP_FAILED) {
		err = errno == EACCES || errno == ENODEV ? EPROTO : errno;
		close(*pfd);
		return err;
	}
	h = m;
	*rfd = fcntl(h->rings_fd, F_DUPFD_CLOEXEC, 0);
	err = *rfd < 0 ? (errno == EBADF ? EPROTO : errno) : 0;
	munmap(m, sizeof(*h));
	if (err)
		close(*pfd);
	return err;
}

/*
 * The word of the owner's liveness mutex as it reads while the owner
 * lives (its holder's TID), or 0: no usable mutex there (not taken, or
 * the owner already dead), so liveness is checked the slow way.
 */
static uint32_t alive_word(const struct sh_seg *pub)
{
#ifdef __GLIBC__
	/* glibc: a robust mutex's lock word, first, holds the holder's TID */
	_Static_assert(offsetof(pthread_mutex_t, __data.__lock) == 0,
		       "the robust mutex word leads pthread_mutex_t");
	uint32_t w = atomic_load_explicit(&pub->alive.word,
					  memory_order_acquire);

	w &= ~(uint32_t)FUTEX_WAITERS;
	return w & ~(uint32_t)FUTEX_TID_MASK ? 0 : w;
#else
	(void)pub;
	return 0;
#endif
}

/* 0, ESRCH if the process has exited, or why the segments are unusable. */
static int peer_map(struct sh_peer *p, const struct sh_gid *g)
{
	int pfd = -1, rfd = -1, err;
	const struct sh_rings *rh;
	void *pub = MAP_FAILED, *rings = MAP_FAILED;
	struct sh_seg head;
	uint64_t size, rsize;

	err = peer_fds(g, &pfd, &rfd);
	if (err)
		return err;
	err = EPROTO;
	if (sealed_size(pfd, SH_PUB_SEALS, &size) || size < sizeof(head))
		goto out;
	pub = mmap(NULL, size, PROT_READ, MAP_SHARED, pfd, 0);
	if (pub == MAP_FAILED) {
		err = errno;
		goto out;
	}
	/* The owner can still write its header: look at one copy only. */
	memcpy(&head, pub, sizeof(head));
	atomic_thread_fence(memory_order_acquire);
	err = header_check(&head, g->pid, g->nonce, size, &p->lay);
	if (err)
		goto out;
	err = EPROTO;
	if (sealed_size(rfd, SH_RINGS_SEALS, &rsize) ||
	    rsize != p->lay.rings_size)
		goto out;
	rings = mmap(NULL, rsize, PROT_READ | PROT_WRITE, MAP_SHARED, rfd, 0);
	if (rings == MAP_FAILED) {
		err = errno;
		goto out;
	}
	rh = rings;
	if (rh->magic != SH_RINGS_MAGIC || rh->nonce != g->nonce)
		goto out;
	p->pub = pub;
	p->rings = rings;
	p->pid = g->pid;
	p->rx_armed = &p->pub->rx_armed;
	p->rx_hint = &((struct sh_rings *)p->rings)->rx_hint;
	if (g->pid == getpid()) {
		atomic_init(&p->self_word, 1);
		p->alive = &p->self_word;
		p->alive_word = 1;
	} else {
		p->alive = &p->pub->alive.word;
		p->alive_word = alive_word(p->pub);
	}
	err = 0;
out:
	if (err) {
		if (pub != MAP_FAILED)
			munmap(pub, size);
		if (rings != MAP_FAILED)
			munmap(rings, rsize);
	}
	close(rfd);
	close(pfd);
	return err;
}

/*
 * The start time of process pid (field 22 of /proc/<pid>/stat, clock ticks
 * since boot) and, if state, its state letter; 0 if it cannot be read
 * (state 'X' when the process is gone, NUL otherwise).  Read and closed at
 * once: a rank keeps no descriptor per peer.
 */
static uint64_t proc_start(pid_t pid, char *state)
{
	char name[64], buf[512], *p;
	unsigned long long start;
	ssize_t n;
	int fd, i;

	if (state)
		*state = 0;
	snprintf(name, sizeof(name), "/proc/%d/stat", (int)pid);
	fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (state && errno == ENOENT)
			*state = 'X';
		return 0;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0 && state && errno == ESRCH)
		*state = 'X';
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	/* the name, in parentheses, may hold anything: the last ')' ends it */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return 0;
	if (state)
		*state = p[2];
	/* fields 3 (state) to 21 precede the start time */
	for (i = 3, p += 2; i < 22 && p; i++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p || sscanf(p, "%llu", &start) != 1)
		return 0;
	return (uint64_t)start;
}

/* Why a connect failed, in words (once per failed connect). */
static void peer_why(const struct sh_gid *g, int err)
{
	const char *why;

	switch (err) {
	case ECONNREFUSED:
		why = "no soft HCA of it answers (it closed its device, or "
		      "runs in another network namespace)";
		break;
	case EACCES:
		why = "refused: another user (or a user namespace that maps "
		      "no uid), another process under its socket's name, or "
		      "an address not from the job";
		break;
	case ETIMEDOUT:
		why = "it did not answer";
		break;
	case EPROTO:
		why = "its segment is not one a peer may trust";
		break;
	default:
		why = strerror(err);
		break;
	}
	fprintf(stderr, "softhca: cannot connect to the soft HCA of pid %d: "
		"%s\n", (int)g->pid, why);
}

/* Maps the segments of the context gid names (refcounted per context). */
struct sh_peer *sh_peer_get(struct sh_context *ctx, const union ibv_gid *gid)
{
	struct sh_gid g;
	struct sh_peer *p;
	int err;

	for (p = ctx->peers; p; p = p->next)
		if (!memcmp(&p->gid, gid, sizeof(*gid))) {
			p->refs++;
			return p;
		}
	if (gid_decode(gid, &g)) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	err = peer_map(p, &g);
	if (err == ESRCH) {
		static const _Atomic uint32_t never;

		p->rx_armed = &never; /* (a gone peer's ring takes nothing) */
		p->gone = true;
		p->pid = g.pid;
		p->lay = ctx->lay;
		atomic_store(&p->gone_ring.closed, 1);
	} else if (err) {
		peer_why(&g, err);
		free(p);
		errno = err;
		return NULL;
	}
	p->start_time = proc_start(g.pid, NULL);
	p->gid = *gid;
	p->refs = 1;
	p->cma = -1;
	p->next = ctx->peers;
	ctx->peers = p;
	return p;
}

void sh_peer_put(struct sh_context *ctx, struct sh_peer *peer)
{
	struct sh_peer **pp;

	if (!peer || --peer->refs)
		return;
	for (pp = &ctx->peers; *pp; pp = &(*pp)->next)
		if (*pp == peer) {
			*pp = peer->next;
			break;
		}
	if (!peer->gone) {
		munmap((void *)peer->pub, peer->lay.pub_size);
		munmap(peer->rings, peer->lay.rings_size);
	}
	free(peer);
}

/*
 * Has the peer's process gone?  Its liveness word is marked by the kernel
 * when it dies (before it is a zombie), and a reaped process fails kill();
 * while the word reads as at connect that is all that is looked at, so a
 * check costs one syscall and no descriptor is kept per peer.  A word
 * that tells nothing (none usable, or the owner let go of it closing its
 * context) sends the check to /proc/<pid>/stat: a zombie (which still
 * answers kill()), or another process under a reused pid.
 */
bool sh_peer_dead(struct sh_peer *peer)
{
	uint32_t w = peer->alive_word ?
		     atomic_load_explicit(peer->alive, memory_order_relaxed) : 0;
	uint64_t start;
	char state;

	if (peer->gone || (w & FUTEX_OWNER_DIED))
		return true;
	if (kill(peer->pid, 0) < 0 && errno == ESRCH)
		return true;
	if (peer->alive_word && w == peer->alive_word)
		return false;
	start = proc_start(peer->pid, &state);
	if (state == 'Z' || state == 'X')
		return true;
	/* (unreadable: alive, as far as can be told) */
	return start && peer->start_time && start != peer->start_time;
}
