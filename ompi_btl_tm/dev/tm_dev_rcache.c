/*
 * tm_dev_rcache.c - the registration cache of tm_dev_mem_get()/put()
 * (tm_dev.h, "Registration cache"): libucs's rcache, made at the first get.
 *
 * libucs's registration cache API differs between UCX releases; configure
 * finds which (config.h): the alignment is a creation parameter before
 * 1.17 and an argument of ucs_rcache_get from 1.17 on, and 1.18 calls a
 * merge op that must be there.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>
#include "dev/tm_dev.h"
#include "dev/tm_dev_priv.h"
#include "verbs/tm_verbs.h"

/*
 * A cached registration: libucs's region (first: the rcache allocates
 * region_struct_size bytes and hands us a pointer to the start), the
 * provider's MR, and the copy of it that tm_dev_mem_get() returns, so that
 * tm_dev_mem_put() finds the region from the MR alone and callers keep
 * storing one struct ibv_mr pointer as they did with tm_dev_reg().
 */
struct tm_dev_region {
	ucs_rcache_region_t super;
	struct ibv_mr *mr;
	struct ibv_mr view;
};

/* Unused regions the cache keeps by default (see tm_dev_config). */
#define RCACHE_MAX_REGIONS 1024
/*
 * Memory unmapped while still registered (the region was cached, or in
 * use) is deregistered by the next cache miss; past this much, libucs's
 * async thread does it, so that a real HCA does not keep freed memory
 * pinned for long in a process that has stopped missing.
 */
#define RCACHE_MAX_UNRELEASED (64UL << 20)

/*
 * Whole pages: what a real HCA pins anyway, and neighbouring small buffers
 * then share one region instead of one MR each.  Set by rcache_create.
 */
static size_t rcache_align = 4096;

/* regs/deregs: exact, and rare once the cache is warm. */
static void st_add(uint64_t *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/*
 * gets/fails: on every message, so no locked instruction (a hit costs
 * several already, inside libucs); concurrent callers may lose a count.
 */
static void st_inc(uint64_t *counter)
{
	__atomic_store_n(counter, __atomic_load_n(counter, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
}

/* The verbs access a region of protection prot is registered with. */
static int prot_access(int prot)
{
	if (prot & PROT_WRITE)
		return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ;
	return IBV_ACCESS_REMOTE_READ;
}

/* The protection a request needs: the rcache keys regions by it. */
static int access_prot(int access)
{
	if (access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		      IBV_ACCESS_REMOTE_ATOMIC))
		return PROT_READ | PROT_WRITE;
	return PROT_READ;
}

/*
 * Called by libucs with its page-table lock held for writing: registers
 * the whole aligned region (which may be the merge of overlapping ones).
 * Must not print (HIDE_ERRORS or not): a failure is returned to
 * tm_dev_mem_get(), which reports it.
 */
static ucs_status_t rcache_mem_reg(void *context, ucs_rcache_t *rcache,
				   void *arg, ucs_rcache_region_t *super,
				   uint16_t flags)
{
	struct tm_dev_region *reg = (struct tm_dev_region *)super;
	struct tm_dev *dev = context;
	struct ibv_mr *mr;

	(void)rcache;
	(void)arg;
	(void)flags;
	mr = dev->verbs->reg_mr(dev->pd, (void *)super->super.start,
				super->super.end - super->super.start,
				prot_access(super->prot));
	if (!mr)
		return errno == ENOMEM ? UCS_ERR_NO_MEMORY : UCS_ERR_IO_ERROR;
	reg->mr = mr;
	reg->view = *mr;
	st_add(&dev->mem_st.regs);
	return UCS_OK;
}

/*
 * Called with the page-table lock held for writing, from the thread that
 * dropped the last reference, from the next cache miss (for regions whose
 * memory was unmapped: libucs never deregisters inside the unmap hook
 * itself), from libucs's async thread, or at fork.  The provider's
 * dereg_mr is thread-safe; the soft HCA's takes its context lock, which
 * it never holds while calling into the cache, and the unmap hook only
 * try-locks the page table, so no lock order can invert here.
 */
static void rcache_mem_dereg(void *context, ucs_rcache_t *rcache,
			     ucs_rcache_region_t *super)
{
	struct tm_dev_region *reg = (struct tm_dev_region *)super;
	struct tm_dev *dev = context;

	(void)rcache;
	if (!reg->mr)
		return;
	dev->verbs->dereg_mr(reg->mr);
	reg->mr = NULL;
	st_add(&dev->mem_st.deregs);
}

#ifdef HAVE_UCS_RCACHE_OPS_T_MERGE
/*
 * Called for each cached region a new one absorbs (libucs unions the
 * ranges and protections and invalidates the old region).  Nothing of ours
 * carries over: the new region gets its own MR from rcache_mem_reg, and
 * the old one keeps its MR until its last holder puts it.  Counted.
 */
static void rcache_merge(void *context, ucs_rcache_t *rcache, void *arg,
			 ucs_rcache_region_t *super)
{
	struct tm_dev *dev = context;

	(void)rcache;
	(void)arg;
	(void)super;
	st_add(&dev->mem_st.merges);
}
#endif

static void rcache_dump_region(void *context, ucs_rcache_t *rcache,
			       ucs_rcache_region_t *super, char *buf,
			       size_t max)
{
	struct tm_dev_region *reg = (struct tm_dev_region *)super;

	(void)context;
	(void)rcache;
	if (reg->mr)
		snprintf(buf, max, "lkey 0x%x rkey 0x%x", reg->mr->lkey,
			 reg->mr->rkey);
	else
		snprintf(buf, max, "unregistered");
}

static const ucs_rcache_ops_t rcache_ops = {
	.mem_reg = rcache_mem_reg,
	.mem_dereg = rcache_mem_dereg,
#ifdef HAVE_UCS_RCACHE_OPS_T_MERGE
	/* called unchecked: without it every merge is a NULL call */
	.merge = rcache_merge,
#endif
	.dump_region = rcache_dump_region,
};

static int rcache_wanted(const struct tm_dev_config *cfg)
{
	const char *env = cfg->settled ? NULL : getenv("TM_DEV_RCACHE");

	if (env && *env)
		return strcmp(env, "0") != 0;
	return cfg->rcache;
}

/* The cache's size for this device, kept until it is made. */
static unsigned long rcache_regions(const struct tm_dev_config *cfg,
				    uint32_t dev_max_mr)
{
	unsigned long max_regions = cfg->rcache_max_regions ?
				    cfg->rcache_max_regions :
				    RCACHE_MAX_REGIONS;

	/* Leave MRs for regions in use and for tm_dev_reg() users. */
	if (dev_max_mr >= 2 && max_regions > dev_max_mr / 2)
		max_regions = dev_max_mr / 2;
	return max_regions;
}

/*
 * Without the cache tm_dev_mem_get() still works (it registers per call),
 * so a failure here is a note, not an error.  The usual one: libucm could
 * not hook munmap & co. (UCX_MEM_EVENTS=no, or a hook mode that does not
 * work in this process); caching without those events would hand out
 * stale registrations, so then there is no cache.
 */
static void rcache_create(struct tm_dev *dev)
{
	ucs_rcache_params_t p;
	long page = sysconf(_SC_PAGESIZE);
	char name[96];
	ucs_status_t st;
	ucs_rcache_t *rc;

	memset(&p, 0, sizeof(p));
	p.region_struct_size = sizeof(struct tm_dev_region);
	if (page > 0)
		rcache_align = (size_t)page;
#ifdef HAVE_UCS_RCACHE_PARAMS_T_ALIGNMENT
	p.alignment = rcache_align;
	p.max_alignment = rcache_align;
#endif
	p.ucm_events = UCM_EVENT_VM_UNMAPPED;
	p.ucm_event_priority = 1000;
	p.ops = &rcache_ops;
	p.context = dev;
	/*
	 * Drop every unused region before fork(): a registered page shared
	 * with other data can be hidden from (or copied into) the child.
	 */
	p.flags = UCS_RCACHE_FLAG_PURGE_ON_FORK;
	p.max_regions = dev->rcache_regions;
	p.max_size = SIZE_MAX;
	p.max_unreleased = RCACHE_MAX_UNRELEASED;
	snprintf(name, sizeof(name), "tm_dev:%s", dev->name);
	st = ucs_rcache_create(&p, name, NULL, &rc);
	if (st != UCS_OK)
		dev->rcache_off = ucs_status_string(st);
	else
		__atomic_store_n(&dev->rcache, rc, __ATOMIC_RELEASE);
}

/*
 * The cache, made by the first tm_dev_mem_get() that wants one: libucs
 * starts its async thread with it (an epoll set and two pipes: five
 * descriptors and a thread), which a process that never registers memory
 * per message (small messages only) then does not pay.  Until the first
 * get there is nothing to cache or to invalidate.
 */
static ucs_rcache_t *rcache_of(struct tm_dev *dev)
{
	ucs_rcache_t *rc = __atomic_load_n(&dev->rcache, __ATOMIC_ACQUIRE);

	if (rc || !__atomic_load_n(&dev->rcache_want, __ATOMIC_ACQUIRE))
		return rc;
	pthread_mutex_lock(&dev->rcache_lock);
	if (dev->rcache_want) {
		rcache_create(dev);
		__atomic_store_n(&dev->rcache_want, 0, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&dev->rcache_lock);
	return dev->rcache;
}

int tm_dev_mem_get(struct tm_dev *dev, void *addr, size_t len, int access,
		   struct ibv_mr **mr)
{
	int prot = access_prot(access);
	ucs_rcache_region_t *super;
	ucs_rcache_t *cache;
	ucs_status_t st;
	int rc;

	if (!len) {
		st_inc(&dev->mem_st.fails);
		return TM_ERR_INVALID;
	}
	cache = rcache_of(dev);
	if (!cache) {
		rc = tm_dev_reg(dev, addr, len, prot_access(prot), mr);
		if (rc != TM_OK) {
			st_inc(&dev->mem_st.fails);
			return rc;
		}
		st_inc(&dev->mem_st.gets);
		st_add(&dev->mem_st.regs);
		return TM_OK;
	}
#ifdef HAVE_UCS_RCACHE_GET_ALIGNMENT
	st = ucs_rcache_get(cache, addr, len, rcache_align, prot, NULL,
			    &super);
#else
	st = ucs_rcache_get(cache, addr, len, prot, NULL, &super);
#endif
	if (st != UCS_OK) {
		st_inc(&dev->mem_st.fails);
		return st == UCS_ERR_NO_MEMORY ? TM_ERR_NO_MEMORY : TM_ERR_IO;
	}
	st_inc(&dev->mem_st.gets);
	*mr = &((struct tm_dev_region *)super)->view;
	return TM_OK;
}

void tm_dev_mem_put(struct tm_dev *dev, struct ibv_mr *mr)
{
	/* (a put follows its get: the cache, if any, is made by then) */
	ucs_rcache_t *cache = __atomic_load_n(&dev->rcache, __ATOMIC_ACQUIRE);
	struct tm_dev_region *reg;

	if (!cache) {
		if (tm_dev_dereg(dev, mr) == TM_OK)
			st_add(&dev->mem_st.deregs);
		return;
	}
	reg = (struct tm_dev_region *)((char *)mr -
				       offsetof(struct tm_dev_region, view));
	ucs_rcache_region_put(cache, &reg->super);
}

void tm_dev_rcache_setup(struct tm_dev *dev, const struct tm_dev_config *cfg,
			 uint32_t dev_max_mr)
{
	pthread_mutex_init(&dev->rcache_lock, NULL);
	dev->rcache_regions = rcache_regions(cfg, dev_max_mr);
	dev->rcache_want = rcache_wanted(cfg);
	dev->rcache_setup = 1;
}

void tm_dev_rcache_close(struct tm_dev *dev)
{
	if (!dev->rcache_setup)
		return;
	if (dev->rcache)
		ucs_rcache_destroy(dev->rcache);
	pthread_mutex_destroy(&dev->rcache_lock);
}
