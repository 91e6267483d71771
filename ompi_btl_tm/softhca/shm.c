/*
 * shm.c - the soft HCA's wire: one shared-memory segment per context.
 *
 * The segment is created with O_EXCL and mode 0600, so only the owner's
 * user can open it, and is unlinked when the context closes.  Segments of
 * processes that died without closing are swept at the next open.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "softhca_priv.h"

#define SH_GID_TAG 0x53544d31u /* "STM1" */

static size_t align_up(size_t v, size_t a)
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

static void seg_name(char *buf, size_t len, uint32_t uid, pid_t pid,
		     uint32_t inst)
{
	snprintf(buf, len, "/softtm.%u.%d.%u", uid, (int)pid, inst);
}

void sh_gid_encode(union ibv_gid *gid, uint32_t uid, pid_t pid, uint32_t inst)
{
	uint32_t w[4] = { htonl(SH_GID_TAG), htonl(uid), htonl((uint32_t)pid),
			  htonl(inst) };

	memcpy(gid->raw, w, sizeof(w));
}

static int gid_decode(const union ibv_gid *gid, uint32_t *uid, pid_t *pid,
		      uint32_t *inst)
{
	uint32_t w[4];

	memcpy(w, gid->raw, sizeof(w));
	if (ntohl(w[0]) != SH_GID_TAG)
		return EINVAL;
	*uid = ntohl(w[1]);
	*pid = (pid_t)ntohl(w[2]);
	*inst = ntohl(w[3]);
	return 0;
}

/* Removes segments this user's dead processes left in /dev/shm. */
static void sweep_stale(uint32_t uid)
{
	char prefix[32], name[300];
	struct dirent *de;
	DIR *d;

	d = opendir("/dev/shm");
	if (!d)
		return;
	snprintf(prefix, sizeof(prefix), "softtm.%u.", uid);
	while ((de = readdir(d))) {
		int pid;

		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		pid = atoi(de->d_name + strlen(prefix));
		if (pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(name, sizeof(name), "/%s", de->d_name);
		shm_unlink(name);
	}
	closedir(d);
}

int sh_seg_create(struct sh_context *ctx)
{
	const struct softhca_config *cfg = &ctx->cfg;
	size_t slot, stride, mr_off, ring_off, size;
	struct sh_seg *seg;
	int fd, err;

	slot = align_up(sizeof(struct sh_pkt) + cfg->mtu, 64);
	stride = align_up(sizeof(struct sh_ring) + slot * cfg->ring_depth,
			  4096);
	mr_off = 4096;
	ring_off = align_up(mr_off + sizeof(struct sh_mr_slot) * cfg->max_mr,
			    4096);
	size = ring_off + stride * cfg->max_qp;

	sweep_stale(getuid());
	seg_name(ctx->seg_name, sizeof(ctx->seg_name), getuid(), getpid(),
		 ctx->instance);
	fd = shm_open(ctx->seg_name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		err = errno;
		fprintf(stderr, "softhca: cannot create %s: %s\n",
			ctx->seg_name, strerror(err));
		return err;
	}
	if (ftruncate(fd, (off_t)size)) {
		err = errno;
		goto fail;
	}
	seg = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (seg == MAP_FAILED) {
		err = errno;
		goto fail;
	}
	close(fd);

	seg->version = SH_SEG_VERSION;
	seg->pid = getpid();
	seg->mtu = cfg->mtu;
	seg->ring_depth = cfg->ring_depth;
	seg->max_qp = cfg->max_qp;
	seg->max_mr = cfg->max_mr;
	seg->owner_va = (uint64_t)(uintptr_t)seg;
	seg->mr_off = mr_off;
	seg->ring_off = ring_off;
	seg->ring_stride = stride;
	seg->slot_size = slot;
	seg->size = size;
	atomic_thread_fence(memory_order_release);
	seg->magic = SH_SEG_MAGIC;
	ctx->seg = seg;
	ctx->seg_size = size;
	return 0;
fail:
	fprintf(stderr, "softhca: cannot size %s to %zu bytes: %s\n",
		ctx->seg_name, size, strerror(err));
	close(fd);
	shm_unlink(ctx->seg_name);
	return err;
}

void sh_seg_destroy(struct sh_context *ctx)
{
	if (!ctx->seg)
		return;
	munmap(ctx->seg, ctx->seg_size);
	shm_unlink(ctx->seg_name);
	ctx->seg = NULL;
}

struct sh_ring *sh_seg_ring(struct sh_seg *seg, uint32_t index)
{
	return (struct sh_ring *)((char *)seg + seg->ring_off +
				  seg->ring_stride * index);
}

struct sh_mr_slot *sh_seg_mr(struct sh_seg *seg, uint32_t index)
{
	return (struct sh_mr_slot *)((char *)seg + seg->mr_off) + index;
}

uint8_t *sh_ring_slot(struct sh_seg *seg, struct sh_ring *ring, uint32_t pos)
{
	return (uint8_t *)(ring + 1) + seg->slot_size * (pos % seg->ring_depth);
}

static int peer_map(struct sh_peer *p, uint32_t uid, pid_t pid, uint32_t inst)
{
	char name[64];
	struct sh_seg head;
	struct stat st;
	void *map;
	int fd;

	seg_name(name, sizeof(name), uid, pid, inst);
	fd = shm_open(name, O_RDWR, 0);
	if (fd < 0)
		return errno;
	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(head)) {
		close(fd);
		return EPROTO;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
		   MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return errno;
	memcpy(&head, map, sizeof(head));
	if (head.magic != SH_SEG_MAGIC || head.version != SH_SEG_VERSION ||
	    head.size != (uint64_t)st.st_size) {
		munmap(map, (size_t)st.st_size);
		return EPROTO;
	}
	p->seg = map;
	p->size = (size_t)st.st_size;
	p->pid = pid;
	return 0;
}

/* Maps the segment of the context that gid names (refcounted per context). */
struct sh_peer *sh_peer_get(struct sh_context *ctx, const union ibv_gid *gid)
{
	uint32_t uid, inst;
	struct sh_peer *p;
	char name[64];
	pid_t pid;
	int err;

	for (p = ctx->peers; p; p = p->next)
		if (!memcmp(&p->gid, gid, sizeof(*gid))) {
			p->refs++;
			return p;
		}
	if (gid_decode(gid, &uid, &pid, &inst)) {
		errno = EINVAL;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	err = peer_map(p, uid, pid, inst);
	if (err) {
		free(p);
		errno = err;
		return NULL;
	}
	snprintf(name, sizeof(name), "/proc/%d/stat", (int)pid);
	p->stat_fd = open(name, O_RDONLY | O_CLOEXEC);
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
	munmap(peer->seg, peer->size);
	if (peer->stat_fd >= 0)
		close(peer->stat_fd);
	free(peer);
}

/*
 * Has the peer's process gone?  A process that exited but was not reaped
 * yet (a zombie) still answers kill(), so look at its state too.
 */
bool sh_peer_dead(struct sh_peer *peer)
{
	char buf[512], *paren;
	ssize_t n;

	if (kill(peer->pid, 0) < 0 && errno == ESRCH)
		return true;
	if (peer->stat_fd < 0)
		return false;
	n = pread(peer->stat_fd, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return errno == ESRCH;
	buf[n] = 0;
	paren = strrchr(buf, ')');
	return paren && (paren[2] == 'Z' || paren[2] == 'X');
}
