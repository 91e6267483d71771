/*
 * mr.c - memory registration: the rkey table and the RDMA read engine.
 *
 * The rkey table lives in the context's published segment, which peers map
 * read-only, so that a peer can check an rkey before it reads and only the
 * owner can grant anything: a key names one slot and one registration
 * of it (key = generation << 16 | slot + 1), and grants exactly
 * [addr, addr + length) with the access flags given at registration.
 * Reads use process_vm_readv (one copy, no help from the owner) when the
 * kernel allows cross-memory attach to that peer, paced (read pacing,
 * below) so that a verbs call reads a bounded amount.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "softhca_priv.h"

struct sh_mr {
	struct ibv_mr mr;
	uint32_t slot;
};

/* What key grants now (a consistent copy of its slot), or EACCES. */
static int mr_lookup(const struct sh_layout *lay, const struct sh_seg *pub,
		     uint32_t key, struct sh_mr_grant *g)
{
	uint32_t idx = (key & 0xffff) - 1;
	const struct sh_mr_slot *s;

	if (!key || idx >= lay->max_mr)
		return EACCES;
	s = (const struct sh_mr_slot *)((const char *)pub + lay->mr_off) + idx;
	if (atomic_load_explicit(&s->key, memory_order_acquire) != key)
		return EACCES;
	g->base = s->addr;
	g->size = s->length;
	g->access = s->access;
	/* A slot rewritten while we looked has a new key. */
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&s->key, memory_order_relaxed) != key)
		return EACCES;
	g->key = key;
	return 0;
}

static bool grant_covers(const struct sh_mr_grant *g, uint64_t addr,
			 uint64_t len, uint32_t access)
{
	return (g->access & access) == access && addr >= g->base &&
	       len <= g->size && addr - g->base <= g->size - len;
}

int sh_mr_check(const struct sh_layout *lay, const struct sh_seg *pub,
		uint32_t key, uint64_t addr, uint64_t len, uint32_t access)
{
	struct sh_mr_grant g;

	if (mr_lookup(lay, pub, key, &g) || !grant_covers(&g, addr, len, access))
		return EACCES;
	return 0;
}

/*
 * A remembered key forgotten: key 0 (no MR has it) with a grant that
 * covers no byte, so that an SGE naming lkey 0 finds nothing here (the
 * old grant kept under key 0 vouched for it: a receive into a
 * deregistered region succeeded).
 */
static void grant_forget(struct sh_mr_grant *g)
{
	*g = (struct sh_mr_grant){ .key = 0, .base = UINT64_MAX };
}

/*
 * Local keys repeat (an engine sends from and receives into a few MRs), so
 * the last keys found valid are remembered until any MR is deregistered:
 * a key stays valid until its own deregistration, and registrations only
 * add keys.
 */
enum ibv_wc_status sh_local_check(struct sh_context *ctx,
				  const struct ibv_sge *sge, uint32_t n,
				  uint32_t access)
{
	uint32_t gen = atomic_load_explicit(&ctx->mr_dereg,
					    memory_order_acquire);
	struct sh_mr_grant *g;

	if (ctx->lkey_gen != gen) {
		grant_forget(&ctx->lkey_seen[0]);
		grant_forget(&ctx->lkey_seen[1]);
		ctx->lkey_gen = gen;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (!sge[i].length)
			continue;
		g = &ctx->lkey_seen[sge[i].lkey == ctx->lkey_seen[1].key];
		if (sge[i].lkey == g->key &&
		    grant_covers(g, sge[i].addr, sge[i].length, access))
			continue;
		/* replace the older entry */
		g = &ctx->lkey_seen[ctx->lkey_next];
		ctx->lkey_next ^= 1;
		if (mr_lookup(&ctx->lay, ctx->seg, sge[i].lkey, g)) {
			grant_forget(g);
			return IBV_WC_LOC_PROT_ERR;
		}
		if (!grant_covers(g, sge[i].addr, sge[i].length, access))
			return IBV_WC_LOC_PROT_ERR;
	}
	return IBV_WC_SUCCESS;
}

struct ibv_mr *sh_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int acc)
{
	struct sh_context *ctx = to_sh_ctx(pd->context);
	struct sh_mr_slot *s = NULL;
	struct sh_mr *mr;
	uint32_t i, key;

	if (((acc & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(acc & IBV_ACCESS_LOCAL_WRITE)) || (!addr && len)) {
		errno = EINVAL;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return NULL;
	pthread_mutex_lock(&ctx->mr_lock);
	for (i = 0; i < ctx->cfg.max_mr; i++) {
		s = sh_seg_mr(ctx, i);
		if (!atomic_load_explicit(&s->key, memory_order_relaxed))
			break;
	}
	if (i == ctx->cfg.max_mr) {
		pthread_mutex_unlock(&ctx->mr_lock);
		free(mr);
		errno = ENOMEM;
		return NULL;
	}
	key = ((++ctx->mr_gen & 0xffff) << 16) | (i + 1);
	s->addr = (uint64_t)(uintptr_t)addr;
	s->length = len;
	s->access = (uint32_t)acc;
	atomic_store_explicit(&s->key, key, memory_order_release);
	pthread_mutex_unlock(&ctx->mr_lock);

	mr->slot = i;
	mr->mr.context = pd->context;
	mr->mr.pd = pd;
	mr->mr.addr = addr;
	mr->mr.length = len;
	mr->mr.handle = i;
	mr->mr.lkey = key;
	mr->mr.rkey = key;
	return &mr->mr;
}

int sh_dereg_mr(struct ibv_mr *ibmr)
{
	struct sh_mr *mr = sh_container_of(ibmr, struct sh_mr, mr);
	struct sh_context *ctx = to_sh_ctx(ibmr->context);
	struct sh_mr_slot *s = sh_seg_mr(ctx, mr->slot);

	pthread_mutex_lock(&ctx->mr_lock);
	if (atomic_load(&s->key) != ibmr->lkey) {
		pthread_mutex_unlock(&ctx->mr_lock);
		return EINVAL;
	}
	atomic_store_explicit(&s->key, 0, memory_order_release);
	/* after the key: a card that sees the new count re-checks and
	 * finds the slot gone */
	atomic_fetch_add_explicit(&ctx->mr_dereg, 1, memory_order_seq_cst);
	pthread_mutex_unlock(&ctx->mr_lock);
	free(mr);
	return 0;
}

/* Copies len bytes into the SGE list starting at byte off; returns bytes. */
uint32_t sh_scatter(const struct ibv_sge *sge, uint32_t n, uint32_t off,
		    const void *src, uint32_t len)
{
	const uint8_t *p = src;
	uint32_t done = 0;

	for (uint32_t i = 0; i < n && done < len; i++) {
		uint32_t l = sge[i].length, c;

		if (off >= l) {
			off -= l;
			continue;
		}
		c = l - off < len - done ? l - off : len - done;
		memcpy((uint8_t *)(uintptr_t)sge[i].addr + off, p + done, c);
		done += c;
		off = 0;
	}
	return done;
}

uint32_t sh_gather(const struct ibv_sge *sge, uint32_t n, uint32_t off,
		   void *dst, uint32_t len)
{
	uint8_t *p = dst;
	uint32_t done = 0;

	for (uint32_t i = 0; i < n && done < len; i++) {
		uint32_t l = sge[i].length, c;

		if (off >= l) {
			off -= l;
			continue;
		}
		c = l - off < len - done ? l - off : len - done;
		memcpy(p + done, (uint8_t *)(uintptr_t)sge[i].addr + off, c);
		done += c;
		off = 0;
	}
	return done;
}

/*
 * Can we read peer's memory with process_vm_readv?  Probed once per peer by
 * reading the segment header at the address the owner published.
 */
bool sh_peer_cma(struct sh_context *ctx, struct sh_peer *peer)
{
	struct iovec l, r;
	uint64_t magic = 0;
	ssize_t n;

	if (ctx->cfg.force_copy_read)
		return false;
	if (peer->cma >= 0)
		return peer->cma;
	if (peer->gone)
		return false;
	l.iov_base = &magic;
	l.iov_len = sizeof(magic);
	r.iov_base = (void *)(uintptr_t)peer->lay.owner_va;
	r.iov_len = sizeof(magic);
	n = process_vm_readv(peer->pid, &l, 1, &r, 1, 0);
	peer->cma = n == (ssize_t)sizeof(magic) && magic == SH_SEG_MAGIC;
	if (!peer->cma)
		fprintf(stderr,
			"softhca: cross-memory attach to pid %d refused (%s); "
			"RDMA reads from it go through shared memory instead "
			"(see /proc/sys/kernel/yama/ptrace_scope)\n",
			(int)peer->pid, n < 0 ? strerror(errno) : "bad probe");
	return peer->cma;
}

/*
 * One RDMA read by cross-memory attach: len bytes at the peer's va (checked
 * against the peer's rkey table) into dst at byte dst_off.
 */
enum ibv_wc_status sh_remote_read(struct sh_context *ctx,
				  struct sh_peer *peer, uint64_t va,
				  uint32_t rkey, const struct ibv_sge *dst,
				  uint32_t ndst, uint32_t dst_off, uint32_t len)
{
	struct iovec l[SH_MAX_SGE], r;
	uint32_t nl = 0, off = dst_off, want = len;
	ssize_t got;

	if (sh_mr_check(&peer->lay, peer->pub, rkey, va, len,
			IBV_ACCESS_REMOTE_READ))
		return IBV_WC_REM_ACCESS_ERR;
	for (uint32_t i = 0; i < ndst && want; i++) {
		uint32_t c;

		if (off >= dst[i].length) {
			off -= dst[i].length;
			continue;
		}
		c = dst[i].length - off < want ? dst[i].length - off : want;
		l[nl].iov_base = (uint8_t *)(uintptr_t)dst[i].addr + off;
		l[nl].iov_len = c;
		nl++;
		want -= c;
		off = 0;
	}
	if (want)
		return IBV_WC_LOC_LEN_ERR;
	r.iov_base = (void *)(uintptr_t)va;
	r.iov_len = len;
	got = process_vm_readv(peer->pid, l, nl, &r, 1, 0);
	if (got == (ssize_t)len) {
		ctx->cma_reads++;
		return IBV_WC_SUCCESS;
	}
	if (got < 0 && errno == ESRCH)
		return IBV_WC_RETRY_EXC_ERR;
	/* The region was checked, so a fault means it was unmapped under us. */
	return IBV_WC_REM_ACCESS_ERR;
}

/* ---- read pacing ----------------------------------------------------- */

/*
 * A real card reads while the CPU goes on; the soft card reads inside the
 * application's verbs calls, so a long read in the poll an application
 * makes while it posts a batch of sends delays those sends, and the peer
 * (which would read them) waits: in bi-directional streams the two
 * processes then take turns instead of reading at the same time.  So in
 * AUTO a verbs call reads at most SH_READ_CHUNK, a post never reads, and
 * a poll reads only once the posts have stopped for SH_READ_POST_GAP_NS
 * (or reads have waited SH_READ_DEFER_NS).  The clock is read only when
 * there is something to read.
 */
static bool read_now(struct sh_context *ctx)
{
	struct timespec ts;
	uint64_t now;

	if (ctx->read_post)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (ctx->post_seen != ctx->post_seq) {
		ctx->post_seen = ctx->post_seq;
		ctx->post_ns = now;
	}
	if (now - ctx->post_ns < SH_READ_POST_GAP_NS) {
		if (!ctx->defer_ns)
			ctx->defer_ns = now;
		if (now - ctx->defer_ns < SH_READ_DEFER_NS)
			return false;
	}
	ctx->defer_ns = 0;
	return true;
}

/* Bytes this card run may still read (unlimited outside AUTO runs). */
uint32_t sh_read_allow(struct sh_context *ctx)
{
	if (!ctx->read_limited)
		return UINT32_MAX;
	if (!ctx->read_decided) {
		ctx->read_decided = true;
		ctx->read_left = read_now(ctx) ? SH_READ_CHUNK : 0;
	}
	return ctx->read_left;
}

void sh_read_used(struct sh_context *ctx, uint32_t n)
{
	if (ctx->read_limited)
		ctx->read_left = n < ctx->read_left ? ctx->read_left - n : 0;
}
