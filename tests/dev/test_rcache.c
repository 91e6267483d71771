/*
 * test_rcache.c - tm_dev_mem_get()/tm_dev_mem_put() and the registration
 * cache behind them, on the soft HCA.
 *
 * What matters most is that a cached MR is never handed out for memory
 * that was unmapped and mapped again at the same address (on a real HCA
 * that MR would still point at the old pages): each invalidation test
 * checks, through dev->mem_st, that the second get registered anew.
 * The cache is made by the first get, not at open (test_lazy).
 */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dev/tm_dev.h"
#include "tap.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define PAGE 4096UL
#define RW IBV_ACCESS_LOCAL_WRITE
#define RO IBV_ACCESS_REMOTE_READ

static struct tm_dev *open_dev(int rcache, uint32_t max_regions)
{
	struct tm_dev_config cfg;
	struct tm_dev *dev;

	tm_dev_config_default(&cfg);
	cfg.provider = "soft";
	cfg.rcache = rcache;
	cfg.rcache_max_regions = max_regions;
	if (tm_dev_open(&cfg, &dev) != TM_OK)
		tap_bail("tm_dev_open(soft) failed");
	return dev;
}

/* Open pipes and epoll sets: what libucs's async thread holds. */
static int event_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char path[300], link[256];
	int n = 0;
	ssize_t r;

	if (!d)
		tap_bail("cannot read /proc/self/fd");
	while ((e = readdir(d))) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		r = readlink(path, link, sizeof(link) - 1);
		if (r <= 0)
			continue;
		link[r] = 0;
		n += !strncmp(link, "pipe:", 5) ||
		     !strcmp(link, "anon_inode:[eventpoll]");
	}
	closedir(d);
	return n;
}

static uint64_t regs(struct tm_dev *dev)
{
	return __atomic_load_n(&dev->mem_st.regs, __ATOMIC_RELAXED);
}

static uint64_t deregs(struct tm_dev *dev)
{
	return __atomic_load_n(&dev->mem_st.deregs, __ATOMIC_RELAXED);
}

/* Merges libucs reported through the merge op (UCX >= 1.18). */
static uint64_t merges(struct tm_dev *dev)
{
	return __atomic_load_n(&dev->mem_st.merges, __ATOMIC_RELAXED);
}

#ifdef HAVE_UCS_RCACHE_OPS_T_MERGE
#define MERGE_OP 1
#else
#define MERGE_OP 0
#endif

static int covers(const struct ibv_mr *mr, const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)mr->addr, b = (uintptr_t)p;

	return b >= a && b + len <= a + mr->length;
}

static void *map(size_t len, void *hint)
{
	void *p = mmap(hint, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		tap_bail("mmap failed");
	return p;
}

/*
 * Regions whose memory was unmapped are released by the cache's next miss
 * (libucs does not deregister inside the unmap hook): a miss on a page of
 * a scratch area that is never unmapped settles earlier tests' unmaps, so
 * that a test's dereg counts are its own.
 */
static void settle(struct tm_dev *dev)
{
	static char *scratch;
	static int next;
	struct ibv_mr *mr;

	if (!scratch)
		scratch = map(512 * PAGE, NULL);
	if (next >= 256)
		tap_bail("settle: scratch area used up");
	if (tm_dev_mem_get(dev, scratch + (size_t)next++ * 2 * PAGE, PAGE, RW,
			   &mr) != TM_OK)
		tap_bail("settle: get failed");
	tm_dev_mem_put(dev, mr);
}

static void test_hit_miss(struct tm_dev *dev)
{
	size_t len = 16 * PAGE;
	char *buf = map(len, NULL);
	struct ibv_mr *a, *b, *c;
	uint64_t r0 = regs(dev), g0 = dev->mem_st.gets;

	tap_check(tm_dev_mem_get(dev, buf, len, RW, &a) == TM_OK &&
		  regs(dev) == r0 + 1 && covers(a, buf, len),
		  "first get registers a region covering the buffer");
	tm_dev_mem_put(dev, a);
	tap_check(deregs(dev) == 0, "put keeps the registration cached");
	tap_check(tm_dev_mem_get(dev, buf, len, RW, &b) == TM_OK &&
		  regs(dev) == r0 + 1 && b == a,
		  "second get of the same buffer is a hit (same MR)");
	tap_check(tm_dev_mem_get(dev, buf + 100, 1000, RW, &c) == TM_OK &&
		  regs(dev) == r0 + 1 && c == a && covers(c, buf + 100, 1000),
		  "a sub-range is a hit");
	tm_dev_mem_put(dev, c);
	tap_check(tm_dev_mem_get(dev, buf + 5, 1, RO, &c) == TM_OK &&
		  regs(dev) == r0 + 1 && c == a,
		  "a read-only request is served by the writable region");
	tap_check((c->lkey == b->lkey) && b->lkey != 0,
		  "the MR view carries the provider's keys");
	tm_dev_mem_put(dev, c);
	tm_dev_mem_put(dev, b);
	tap_check(dev->mem_st.gets == g0 + 4 && dev->mem_st.fails == 0,
		  "gets counted (%llu)",
		  (unsigned long long)dev->mem_st.gets);
	tap_check(tm_dev_mem_get(dev, buf, 0, RW, &c) == TM_ERR_INVALID,
		  "a zero-length get is refused");
	munmap(buf, len);
}

static void test_prot(struct tm_dev *dev)
{
	size_t len = 4 * PAGE;
	char *buf = map(len, NULL);
	struct ibv_mr *a, *b;
	uint64_t r0, d0;

	settle(dev);
	r0 = regs(dev);
	d0 = deregs(dev);
	tap_check(tm_dev_mem_get(dev, buf, len, RO, &a) == TM_OK &&
		  regs(dev) == r0 + 1,
		  "read-only get registers");
	tm_dev_mem_put(dev, a);
	tap_check(tm_dev_mem_get(dev, buf, len, RW, &b) == TM_OK &&
		  regs(dev) == r0 + 2 && deregs(dev) == d0 + 1,
		  "a writable get of it re-registers (the read-only MR goes)");
	tm_dev_mem_put(dev, b);
	tap_check(tm_dev_mem_get(dev, buf, len, RO, &a) == TM_OK &&
		  regs(dev) == r0 + 2 && a == b,
		  "then read-only gets hit the writable region");
	tm_dev_mem_put(dev, a);
	munmap(buf, len);
}

static void test_grow(struct tm_dev *dev)
{
	size_t len = 32 * PAGE;
	char *buf = map(len, NULL);
	struct ibv_mr *small, *big, *again;
	uint64_t r0, d0, m0;

	settle(dev);
	r0 = regs(dev);
	d0 = deregs(dev);
	m0 = merges(dev);

	tap_check(tm_dev_mem_get(dev, buf + PAGE, PAGE, RW, &small) == TM_OK,
		  "grow: small region");
	/* Held while a larger overlapping one is asked for. */
	tap_check(tm_dev_mem_get(dev, buf, len, RW, &big) == TM_OK &&
		  regs(dev) == r0 + 2 && big != small &&
		  covers(big, buf, len),
		  "grow: a larger overlapping buffer gets a merged region");
	tap_check(merges(dev) == m0 + MERGE_OP,
		  "grow: the merge op saw the absorbed region (%s)",
		  MERGE_OP ? "UCX >= 1.18" : "UCX < 1.18: no merge op");
	tap_check(deregs(dev) == d0 && covers(small, buf + PAGE, PAGE),
		  "grow: the smaller region stays registered while held");
	tm_dev_mem_put(dev, small);
	tap_check(deregs(dev) == d0 + 1,
		  "grow: and goes at its last put (it left the cache)");
	tap_check(tm_dev_mem_get(dev, buf + PAGE, PAGE, RW, &again) ==
		  TM_OK && again == big && regs(dev) == r0 + 2,
		  "grow: the small buffer now hits the merged region");
	tm_dev_mem_put(dev, again);
	tm_dev_mem_put(dev, big);
	/* Overlapping at the end: extends the region forwards. */
	tap_check(tm_dev_mem_get(dev, buf + len - PAGE, PAGE, RW, &small) ==
		  TM_OK, "grow: a buffer at the end of the region hits");
	tm_dev_mem_put(dev, small);
	munmap(buf + len - PAGE, PAGE);
	tap_check(tm_dev_mem_get(dev, buf, PAGE, RW, &small) == TM_OK &&
		  regs(dev) == r0 + 3,
		  "grow: unmapping the region's last page invalidates it all");
	tm_dev_mem_put(dev, small);
	munmap(buf, len - PAGE);
}

/* munmap of a cached region, then the same address mapped again. */
static void test_munmap(struct tm_dev *dev)
{
	size_t len = 64 * PAGE;
	char *buf = map(len, NULL), *again;
	struct ibv_mr *a, *b;
	uint64_t r0, d0;
	uint32_t key;

	settle(dev);
	r0 = regs(dev);
	d0 = deregs(dev);

	memset(buf, 1, len);
	if (tm_dev_mem_get(dev, buf, len, RW, &a) != TM_OK)
		tap_bail("get failed");
	key = a->lkey;
	tm_dev_mem_put(dev, a);
	munmap(buf, len);
	again = mmap(buf, len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (again != buf)
		tap_bail("could not map the same address again");
	tap_check(tm_dev_mem_get(dev, again, len, RW, &b) == TM_OK &&
		  regs(dev) == r0 + 2 && b->lkey != key,
		  "munmap + mmap at the same address: a new registration");
	tap_check(deregs(dev) == d0 + 1,
		  "munmap: the stale registration was released");
	tm_dev_mem_put(dev, b);

	/* Unmapped while in use: the holder's MR stays valid until put. */
	d0 = deregs(dev);
	if (tm_dev_mem_get(dev, again, len, RW, &a) != TM_OK)
		tap_bail("get failed");
	munmap(again, len);
	tap_check(deregs(dev) == d0, "munmap while held: not released yet");
	tm_dev_mem_put(dev, a);
	tap_check(deregs(dev) == d0 + 1, "munmap while held: released at put");

	/* Partial unmap of a region invalidates it (its pages changed). */
	buf = map(len, NULL);
	if (tm_dev_mem_get(dev, buf, len, RW, &a) != TM_OK)
		tap_bail("get failed");
	tm_dev_mem_put(dev, a);
	r0 = regs(dev);
	munmap(buf + 10 * PAGE, PAGE);
	map(PAGE, buf + 10 * PAGE); /* likely the same place; either way */
	tap_check(tm_dev_mem_get(dev, buf, 10 * PAGE, RW, &b) == TM_OK &&
		  regs(dev) == r0 + 1,
		  "unmapping one page of a region invalidates the region");
	tm_dev_mem_put(dev, b);
	munmap(buf, len);
}

/*
 * malloc/free of large buffers: glibc serves them with mmap and free()
 * unmaps them (libucm sees it inside libc), then the next malloc usually
 * gets the same address back.  Every such reuse must miss.
 */
static void test_malloc(struct tm_dev *dev)
{
	size_t len = 1 << 20;
	int reused = 0, stale = 0, i, n = 50;
	void *prev = NULL;

	/* A fixed threshold: glibc would otherwise raise it after the
	 * first free() and serve the next buffers from the heap. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	for (i = 0; i < n; i++) {
		char *p = malloc(len);
		struct ibv_mr *mr;
		uint64_t r0 = regs(dev);

		if (!p)
			tap_bail("malloc failed");
		memset(p, i, len);
		if (tm_dev_mem_get(dev, p, len, RW, &mr) != TM_OK)
			tap_bail("get failed");
		if (p == prev) {
			reused++;
			if (regs(dev) != r0 + 1)
				stale++;
		}
		tm_dev_mem_put(dev, mr);
		prev = p;
		free(p);
	}
	tap_check(stale == 0,
		  "malloc/free: no reused address hit a stale MR (%d of %d "
		  "reused)", reused, n);
	if (UNDER_ASAN)
		tap_diag("AddressSanitizer's allocator does not reuse freed "
			 "addresses at once: only the no-stale check applies");
	else
		tap_check(reused > n / 2,
			  "malloc/free: glibc gave the address back (%d of %d)",
			  reused, n);
}

/*
 * Many buffers: more distinct regions than the cache keeps (LRU
 * eviction, no MR exhaustion on the soft HCA), many held at once, and
 * many small buffers inside one registered area.
 */
static void test_many(void)
{
	uint32_t max = 256;
	struct tm_dev *dev = open_dev(1, max);
	int n = 2000, ok = 1, hits = 1, i;
	/* Every other page, so that no two buffers share or touch a page
	 * and regions do not merge. */
	char *area = map((size_t)n * 2 * PAGE, NULL);
	struct ibv_mr **held = calloc((size_t)n, sizeof(*held));
	uint64_t r0;

	if (!held)
		tap_bail("calloc failed");
	for (i = 0; i < n && ok; i++) {
		struct ibv_mr *mr;

		ok = tm_dev_mem_get(dev, area + (size_t)i * 2 * PAGE, PAGE, RW,
				    &mr) == TM_OK;
		if (ok)
			tm_dev_mem_put(dev, mr);
	}
	tap_check(ok && regs(dev) == (uint64_t)n,
		  "many: %d distinct buffers, one registration each", n);
	tap_check(regs(dev) - deregs(dev) <= max + 1,
		  "many: the cache keeps at most ~%u (holds %llu)", max,
		  (unsigned long long)(regs(dev) - deregs(dev)));
	r0 = regs(dev);
	for (i = n - (int)max / 2; i < n; i++) {
		struct ibv_mr *mr;

		if (tm_dev_mem_get(dev, area + (size_t)i * 2 * PAGE, PAGE, RW,
				   &mr) != TM_OK) {
			hits = 0;
			break;
		}
		tm_dev_mem_put(dev, mr);
	}
	tap_check(hits && regs(dev) == r0,
		  "many: the most recently used ones are still cached");
	for (i = 0, ok = 1; i < n && ok; i++)
		ok = tm_dev_mem_get(dev, area + (size_t)i * 2 * PAGE, PAGE,
				    RW, &held[i]) == TM_OK;
	tap_check(ok, "many: %d regions held at once (more than the cache "
		  "keeps: in-use regions are never evicted)", n);
	for (i = 0; i < n; i++)
		if (held[i])
			tm_dev_mem_put(dev, held[i]);
	/* Eviction runs on a miss, not on a put. */
	settle(dev);
	tap_check(regs(dev) - deregs(dev) <= max + 1,
		  "many: back to at most ~%u at the next miss (%llu)", max,
		  (unsigned long long)(regs(dev) - deregs(dev)));
	munmap(area, (size_t)n * 2 * PAGE);
	tm_dev_close(dev);

	/* Small buffers inside one registered area all hit. */
	dev = open_dev(1, 0);
	area = map(256 * PAGE, NULL);
	if (tm_dev_mem_get(dev, area, 256 * PAGE, RW, &held[0]) != TM_OK)
		tap_bail("get failed");
	for (i = 0, ok = 1; i < 1000 && ok; i++) {
		struct ibv_mr *mr;
		size_t off = ((size_t)i * 7919) % (255 * PAGE);

		ok = tm_dev_mem_get(dev, area + off, 64 + (size_t)i, RW,
				    &mr) == TM_OK && mr == held[0];
		if (ok)
			tm_dev_mem_put(dev, mr);
	}
	tap_check(ok && regs(dev) == 1,
		  "many: 1000 small buffers inside one region are hits");
	tm_dev_mem_put(dev, held[0]);
	munmap(area, 256 * PAGE);
	tm_dev_close(dev);
	free(held);
}

/*
 * Threads: unmap events arrive from any thread.  Each worker maps,
 * registers, uses, unmaps and frees its own buffers (so invalidations
 * race with gets, puts, misses and the deregistrations they trigger),
 * while another thread registers and deregisters long-lived MRs, which
 * takes the soft HCA's context lock from outside the cache.
 */
struct worker {
	struct tm_dev *dev;
	int id;
	int failed;
	int stale;
};

static volatile int stop_plain;

static void *worker_run(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < 400; i++) {
		size_t len = (size_t)(1 + (i + w->id) % 16) * PAGE;
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		char *m = malloc(200 * 1024);
		struct ibv_mr *a, *b;

		if (p == MAP_FAILED || !m) {
			w->failed++;
			break;
		}
		p[0] = 1;
		if (tm_dev_mem_get(w->dev, p, len, RW, &a) != TM_OK ||
		    tm_dev_mem_get(w->dev, m, 200 * 1024, RW, &b) != TM_OK) {
			w->failed++;
			break;
		}
		if (!covers(a, p, len) || !covers(b, m, 200 * 1024))
			w->stale++;
		tm_dev_mem_put(w->dev, b);
		free(m);        /* unmap event while a is still held */
		tm_dev_mem_put(w->dev, a);
		munmap(p, len); /* and one for a cached region */
	}
	return NULL;
}

static void *plain_run(void *arg)
{
	struct tm_dev *dev = arg;
	static char buf[PAGE];

	while (!__atomic_load_n(&stop_plain, __ATOMIC_RELAXED)) {
		struct ibv_mr *mr;

		if (tm_dev_reg(dev, buf, sizeof(buf), 0, &mr) == TM_OK)
			tm_dev_dereg(dev, mr);
	}
	return NULL;
}

static void test_threads(void)
{
	struct tm_dev *dev = open_dev(1, 64);
	struct worker w[4];
	pthread_t t[4], plain;
	int failed = 0, stale = 0;

	alarm(120); /* a lock-order deadlock fails the test, not the suite */
	stop_plain = 0;
	if (pthread_create(&plain, NULL, plain_run, dev))
		tap_bail("pthread_create failed");
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ .dev = dev, .id = i };
		if (pthread_create(&t[i], NULL, worker_run, &w[i]))
			tap_bail("pthread_create failed");
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		failed += w[i].failed;
		stale += w[i].stale;
	}
	__atomic_store_n(&stop_plain, 1, __ATOMIC_RELAXED);
	pthread_join(plain, NULL);
	alarm(0);
	tap_check(failed == 0 && stale == 0,
		  "threads: 4 x 400 map/get/free/put/unmap rounds with a "
		  "reg/dereg thread: no failure, no deadlock");
	tap_check(regs(dev) - deregs(dev) <= 64 + 1,
		  "threads: the cache holds at most ~64 regions after (%llu)",
		  (unsigned long long)(regs(dev) - deregs(dev)));
	tm_dev_close(dev);
}

static void test_off(void)
{
	struct tm_dev *dev = open_dev(0, 0);
	char *buf = map(PAGE, NULL);
	struct ibv_mr *a, *b;

	tap_check(!dev->rcache, "rcache = 0: no cache");
	tap_check(tm_dev_mem_get(dev, buf, 100, RW, &a) == TM_OK &&
		  tm_dev_mem_get(dev, buf, 100, RW, &b) == TM_OK &&
		  a != b && regs(dev) == 2 && covers(a, buf, 100),
		  "without the cache every get registers");
	tm_dev_mem_put(dev, a);
	tm_dev_mem_put(dev, b);
	tap_check(deregs(dev) == 2, "and every put deregisters");
	tm_dev_close(dev);
	munmap(buf, PAGE);

	setenv("TM_DEV_RCACHE", "0", 1);
	dev = open_dev(1, 0);
	tap_check(!dev->rcache_want && !dev->rcache,
		  "TM_DEV_RCACHE=0 turns the cache off");
	tm_dev_close(dev);
	setenv("TM_DEV_RCACHE", "1", 1);
	dev = open_dev(0, 0);
	tap_check(dev->rcache_want, "TM_DEV_RCACHE=1 turns it on");
	tm_dev_close(dev);
	unsetenv("TM_DEV_RCACHE");
}

/*
 * The cache and libucs's async thread (its epoll set and two pipes) come
 * with the first get, not with the open: a process that registers nothing
 * per message holds none of them.  Run first, before any other cache.
 */
static void test_lazy(void)
{
	int before = event_fds(), opened, got;
	struct tm_dev *dev = open_dev(1, 0);
	char *buf = map(PAGE, NULL);
	struct ibv_mr *a;

	opened = event_fds();
	tap_check(!dev->rcache && dev->rcache_want && opened == before,
		  "open makes no cache and opens no pipe or epoll set (%d -> %d)",
		  before, opened);
	tap_check(tm_dev_mem_get(dev, buf, 100, RW, &a) == TM_OK &&
		  dev->rcache && regs(dev) == 1 && covers(a, buf, 100),
		  "the first get makes the cache and registers through it");
	got = event_fds();
	tap_check(got > opened, "libucs's async thread came with it (%d -> %d)",
		  opened, got);
	tm_dev_mem_put(dev, a);
	tap_check(deregs(dev) == 0, "the put keeps it cached");
	tm_dev_close(dev);
	tap_check(event_fds() == before, "close gives them back (%d)",
		  event_fds());
	munmap(buf, PAGE);
}

int main(void)
{
	struct tm_dev *dev;

	/* The test decides; a debugging override must not change it. */
	unsetenv("TM_DEV_RCACHE");
	test_lazy();
	dev = open_dev(1, 0);
	settle(dev); /* (the cache is made by the first get) */
	if (!dev->rcache)
		tap_bail("no registration cache (libucm events unavailable?)");
	test_hit_miss(dev);
	test_prot(dev);
	test_grow(dev);
	test_munmap(dev);
	test_malloc(dev);
	tm_dev_close(dev);
	test_many();
	test_threads();
	test_off();
	return tap_done();
}
