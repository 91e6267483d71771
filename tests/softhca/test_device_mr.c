/*
 * test_device_mr.c - soft HCA: device list, capabilities, config, port/GID,
 * PDs and MRs (an rkey grants exactly its region).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "tap.h"
#include "sh_util.h"

#define MAXSHM 256

/* Names in /dev/shm. */
static int list_shm(char names[][256], int max)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)) && n < max) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(names[n++], 256, "%.255s", de->d_name);
	}
	closedir(d);
	return n;
}

static int in_list(char names[][256], int n, const char *s)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(names[i], s))
			return 1;
	return 0;
}

/*
 * The context's segments have no name: opening and closing a context
 * leaves /dev/shm as it was, and the descriptor its GID names is the
 * sealed memfd peers map read-only.
 */
static void test_shm_segment(void)
{
	static char before[MAXSHM][256], after[MAXSHM][256], closed[MAXSHM][256];
	int nb, na, nc, i, added = 0, left = 0, fd, seals;
	struct ibv_context *ctx;
	union ibv_gid gid;
	uint32_t w[4];
	char path[64], link[256];
	ssize_t n;

	nb = list_shm(before, MAXSHM);
	ctx = sh_open_ctx();
	na = list_shm(after, MAXSHM);
	if (nb < 0 || na < 0 || !ctx) {
		tap_check(0, "shared-memory segment: /dev/shm readable and context opens");
		return;
	}
	for (i = 0; i < na; i++)
		if (!in_list(before, nb, after[i]) && strstr(after[i], "softtm"))
			added++;
	tap_check(added == 0, "opening a context creates no file in /dev/shm (%d)",
		  added);
	memset(&gid, 0, sizeof(gid));
	sh_v()->query_gid(ctx, 1, 0, &gid);
	memcpy(w, gid.raw, sizeof(w));
	fd = (int)(ntohl(w[2]) & 0xffffu); /* (the high half: key bits) */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	seals = fcntl(fd, F_GET_SEALS);
	tap_check(strstr(link, "memfd:softtm") && seals >= 0 &&
		  (seals & F_SEAL_FUTURE_WRITE) && (seals & F_SEAL_SHRINK),
		  "the GID names a sealed memfd (%s, seals %#x)", link, seals);
	softhca_verbs()->close_device(ctx);
	nc = list_shm(closed, MAXSHM);
	for (i = 0; i < nc; i++)
		if (!in_list(before, nb, closed[i]) && strstr(closed[i], "softtm"))
			left++;
	tap_check(left == 0 && fcntl(fd, F_GET_SEALS) < 0,
		  "closing the context leaves nothing behind (descriptor closed)");
}

static int query_caps(struct ibv_context *ctx, struct ibv_tm_caps *caps)
{
	struct ibv_device_attr_ex at;
	int ret;

	memset(&at, 0, sizeof(at));
	ret = ibv_query_device_ex(ctx, NULL, &at);
	*caps = at.tm_caps;
	return ret;
}

static void test_device(void)
{
	const struct tm_verbs *v = softhca_verbs();
	struct softhca_config def, cfg, bad;
	struct ibv_device **list;
	struct ibv_context *ctx, *ctx2, *ctx3;
	struct ibv_device_attr_ex at;
	struct ibv_port_attr pa;
	struct ibv_tm_caps caps;
	union ibv_gid g1, g2;
	int n = -1, i, found = -1, ret;

	tap_check(v != NULL && v->name && !strcmp(v->name, "soft"),
		  "softhca_verbs() table is named \"soft\"");

	list = v->get_device_list(&n);
	tap_check(list != NULL && n >= 1, "get_device_list returns >= 1 device (n=%d)", n);
	if (!list)
		tap_bail("no device list");
	for (i = 0; i < n; i++)
		if (!strcmp(v->get_device_name(list[i]), SH_DEV_NAME))
			found = i;
	tap_check(found >= 0, "device list contains \"softtm0\"");
	tap_check(list[n] == NULL, "device list is NULL-terminated");
	if (found < 0)
		tap_bail("no softtm0");

	softhca_config_default(&def);
	tap_check(def.max_num_tags == 1023 && def.max_rndv_hdr_size == 64 &&
		  def.max_sge == 1 && def.mtu == 4096 && def.max_ops >= 1000,
		  "config defaults: 1023 tags, 64 B rndv hdr, 1 sge, mtu 4096, max_ops in the thousands (%u)",
		  def.max_ops);
	tap_check(softhca_set_config(&def) == 0, "softhca_set_config(defaults) == 0");

	ctx = v->open_device(list[found]);
	tap_check(ctx != NULL, "open_device(softtm0)");
	if (!ctx)
		tap_bail("open_device failed");
	v->free_device_list(list);

	memset(&at, 0, sizeof(at));
	ret = ibv_query_device_ex(ctx, NULL, &at);
	tap_check(ret == 0, "ibv_query_device_ex returns 0 (%d)", ret);
	tap_check(at.tm_caps.flags & IBV_TM_CAP_RC, "tm_caps.flags has IBV_TM_CAP_RC");
	tap_check(at.tm_caps.max_num_tags == def.max_num_tags &&
		  at.tm_caps.max_ops == def.max_ops &&
		  at.tm_caps.max_rndv_hdr_size == def.max_rndv_hdr_size &&
		  at.tm_caps.max_sge == def.max_sge,
		  "tm_caps equal the default config (tags %u ops %u rndv %u sge %u)",
		  at.tm_caps.max_num_tags, at.tm_caps.max_ops,
		  at.tm_caps.max_rndv_hdr_size, at.tm_caps.max_sge);
	tap_check(at.orig_attr.max_qp >= 1 && at.orig_attr.max_srq_wr >= 1 &&
		  at.orig_attr.max_qp_wr >= 1 && at.orig_attr.max_cqe >= 1,
		  "orig_attr reports usable max_qp/max_qp_wr/max_srq_wr/max_cqe");

	memset(&pa, 0, sizeof(pa));
	ret = ibv_query_port(ctx, 1, &pa);
	tap_check(ret == 0 && pa.state == IBV_PORT_ACTIVE,
		  "ibv_query_port(1): 0 and IBV_PORT_ACTIVE (ret %d state %d)", ret, pa.state);

	memset(&g1, 0, sizeof(g1));
	memset(&g2, 0, sizeof(g2));
	ret = v->query_gid(ctx, 1, 0, &g1);
	tap_check(ret == 0 && !sh_all(g1.raw, 16, 0), "query_gid(ctx,1,0) returns a non-zero GID");

	/* Custom limits apply to contexts opened afterwards. */
	cfg = def;
	cfg.max_num_tags = 7;
	cfg.max_ops = 5;
	cfg.max_rndv_hdr_size = 128;
	cfg.max_sge = 2;
	tap_check(softhca_set_config(&cfg) == 0, "softhca_set_config(custom limits) == 0");
	ctx2 = sh_open_ctx();
	tap_check(ctx2 != NULL, "second context opens");
	if (!ctx2)
		tap_bail("second open failed");
	ret = query_caps(ctx2, &caps);
	tap_check(ret == 0 && caps.max_num_tags == 7 && caps.max_ops == 5 &&
		  caps.max_rndv_hdr_size == 128 && caps.max_sge == 2,
		  "new context reports the configured tm_caps (tags %u ops %u rndv %u sge %u)",
		  caps.max_num_tags, caps.max_ops, caps.max_rndv_hdr_size, caps.max_sge);
	ret = query_caps(ctx, &caps);
	tap_check(ret == 0 && caps.max_num_tags == def.max_num_tags &&
		  caps.max_ops == def.max_ops,
		  "an already open context keeps its tm_caps");
	ret = v->query_gid(ctx2, 1, 0, &g2);
	tap_check(ret == 0 && memcmp(&g1, &g2, sizeof(g1)) != 0,
		  "two contexts of one process have different GIDs");

	/* Bad configs are rejected and change nothing. */
#define BAD(field, val, what)                                               \
	do {                                                                \
		bad = cfg;                                                  \
		bad.field = val;                                            \
		ret = softhca_set_config(&bad);                             \
		tap_check(ret == EINVAL, "softhca_set_config rejects " what \
			  " with EINVAL (got %d)", ret);                    \
	} while (0)
	BAD(max_num_tags, 0, "max_num_tags=0");
	BAD(max_ops, 0, "max_ops=0");
	BAD(max_sge, 0, "max_sge=0");
	BAD(mtu, 0, "mtu=0");
	BAD(ring_depth, 0, "ring_depth=0");
	BAD(max_qp, 0, "max_qp=0");
	BAD(max_rndv_hdr_size, 16, "max_rndv_hdr_size=16 (< TMH+RVH)");
	BAD(max_num_tags, 0xffffffffu, "max_num_tags=UINT32_MAX");
#undef BAD
	ctx3 = sh_open_ctx();
	ret = ctx3 ? query_caps(ctx3, &caps) : -1;
	tap_check(ret == 0 && caps.max_num_tags == 7 && caps.max_ops == 5,
		  "after rejected configs, new contexts still get the last good config");

	/* Environment overrides. */
	setenv("SOFTHCA_MAX_NUM_TAGS", "5", 1);
	setenv("SOFTHCA_MTU", "512", 1);
	setenv("SOFTHCA_SCHED", "random", 1);
	cfg = def;
	ret = softhca_config_from_env(&cfg, NULL, NULL, 0);
	tap_check(ret == 0 && cfg.max_num_tags == 5 && cfg.mtu == 512 &&
		  cfg.sched == SOFTHCA_SCHED_RANDOM && cfg.max_ops == def.max_ops,
		  "softhca_config_from_env reads SOFTHCA_MAX_NUM_TAGS/MTU/SCHED, keeps the rest");
	setenv("SOFTHCA_MAX_OPS", "abc", 1);
	cfg = def;
	ret = softhca_config_from_env(&cfg, NULL, NULL, 0);
	tap_check(ret == EINVAL, "softhca_config_from_env: bad SOFTHCA_MAX_OPS -> EINVAL (%d)", ret);
	unsetenv("SOFTHCA_MAX_OPS");
	setenv("SOFTHCA_SCHED", "sometimes", 1);
	cfg = def;
	ret = softhca_config_from_env(&cfg, NULL, NULL, 0);
	tap_check(ret == EINVAL, "softhca_config_from_env: bad SOFTHCA_SCHED -> EINVAL (%d)", ret);
	unsetenv("SOFTHCA_MAX_NUM_TAGS");
	unsetenv("SOFTHCA_MTU");
	unsetenv("SOFTHCA_SCHED");

	if (ctx3)
		v->close_device(ctx3);
	tap_check(v->close_device(ctx2) == 0, "close_device returns 0");
	v->close_device(ctx);
	softhca_set_config(&def);
}

/* ---- MRs ---------------------------------------------------------------- */

static struct sh_env env;

/* Issues one RDMA read on a fresh pair and returns its completion. */
static int do_read(void *dst, uint32_t len, uint64_t raddr, uint32_t rkey,
		   uint64_t wr_id, struct sh_wc *wc, int fresh)
{
	static int pair = -1;
	int ret;

	if (fresh || pair < 0)
		pair = sh_pair_add(&env);
	if (pair < 0)
		tap_bail("cannot create a QP pair");
	ret = sh_post_read(env.p[pair].sqp, dst, env.a.mr->lkey, len, raddr,
			   rkey, wr_id);
	if (ret)
		return -ret;
	sh_flush(&env);
	return sh_poll(env.p[pair].scq, wc);
}

static void test_mr(void)
{
	const struct tm_verbs *v = softhca_verbs();
	struct softhca_config cfg;
	struct ibv_mr *mr, *mr_ro, *mr_gone;
	struct sh_wc wc;
	char *region, *dst, *r2, *r3;
	uint32_t bad_rkey, gone_rkey;
	int ret;

	sh_config(&cfg);
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_MANUAL, 0))
		tap_bail("sh_env_open failed");

	/* The region lies in the middle of a larger allocation. */
	region = malloc(8192);
	if (!region)
		tap_bail("malloc");
	memset(region, 0x55, 8192);
	sh_fill(region + 1024, 4096, 7);
	mr = v->reg_mr(env.b.pd, region + 1024, 4096,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	tap_check(mr != NULL, "reg_mr with REMOTE_READ succeeds");
	if (!mr)
		tap_bail("reg_mr");
	tap_check(mr->lkey == mr->rkey, "MR lkey == rkey");
	tap_check(mr->addr == region + 1024 && mr->length == 4096,
		  "MR addr/length are the registered region");

	dst = sh_alloc(&env.a, 8192);
	memset(dst, 0xEE, 8192);
	ret = do_read(dst, 4096, (uintptr_t)(region + 1024), mr->rkey, 11, &wc, 1);
	tap_check(ret == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 11 &&
		  wc.opcode == IBV_WC_RDMA_READ,
		  "RDMA_READ of the whole region completes SUCCESS/IBV_WC_RDMA_READ (%s)",
		  sh_wc_str(&wc));
	tap_check(sh_check(dst, 4096, 7) && sh_all(dst + 4096, 4096, 0xEE),
		  "RDMA_READ brings exactly the region's bytes");

	memset(dst, 0xEE, 8192);
	ret = do_read(dst, 50, (uintptr_t)(region + 1024 + 100), mr->rkey, 12, &wc, 0);
	tap_check(ret == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 12 &&
		  !memcmp(dst, region + 1024 + 100, 50) && sh_all(dst + 50, 100, 0xEE),
		  "RDMA_READ of a sub-range inside the region (same QP again)");

	memset(dst, 0xEE, 8192);
	ret = do_read(dst, 1, (uintptr_t)(region + 1024 + 4095), mr->rkey, 13, &wc, 0);
	tap_check(ret == 1 && wc.status == IBV_WC_SUCCESS &&
		  dst[0] == region[1024 + 4095] && (unsigned char)dst[1] == 0xEE,
		  "RDMA_READ of the region's last byte succeeds");

	memset(dst, 0xEE, 8192);
	ret = do_read(dst, 4096, (uintptr_t)(region + 1024 + 1), mr->rkey, 14, &wc, 1);
	tap_check(ret == 1 && wc.status == IBV_WC_REM_ACCESS_ERR && wc.wr_id == 14,
		  "RDMA_READ one byte past the region's end -> IBV_WC_REM_ACCESS_ERR (%s)",
		  sh_wc_str(&wc));
	tap_check(sh_all(dst, 8192, 0xEE), "failed read past the end writes nothing");

	memset(dst, 0xEE, 8192);
	ret = do_read(dst, 16, (uintptr_t)(region + 1024 - 1), mr->rkey, 15, &wc, 1);
	tap_check(ret == 1 && wc.status == IBV_WC_REM_ACCESS_ERR && wc.wr_id == 15 &&
		  sh_all(dst, 8192, 0xEE),
		  "RDMA_READ starting one byte before the region -> REM_ACCESS_ERR, nothing read");

	bad_rkey = mr->rkey + 0x100;
	while (bad_rkey == mr->rkey || bad_rkey == env.b.mr->rkey)
		bad_rkey += 0x100;
	memset(dst, 0xEE, 8192);
	ret = do_read(dst, 64, (uintptr_t)(region + 1024), bad_rkey, 16, &wc, 1);
	tap_check(ret == 1 && wc.status == IBV_WC_REM_ACCESS_ERR && wc.wr_id == 16 &&
		  sh_all(dst, 8192, 0xEE),
		  "RDMA_READ with a wrong rkey -> REM_ACCESS_ERR, nothing read (%s)",
		  sh_wc_str(&wc));

	/* An rkey of the remote context does not cover another address. */
	memset(dst, 0xEE, 8192);
	ret = do_read(dst, 64, (uintptr_t)region, env.b.mr->rkey, 17, &wc, 1);
	tap_check(ret == 1 && wc.status == IBV_WC_REM_ACCESS_ERR && sh_all(dst, 8192, 0xEE),
		  "RDMA_READ of memory outside the named MR (valid rkey) -> REM_ACCESS_ERR");

	/* Access flags given at registration are enforced. */
	r2 = malloc(4096);
	sh_fill(r2, 4096, 8);
	mr_ro = v->reg_mr(env.b.pd, r2, 4096, IBV_ACCESS_LOCAL_WRITE);
	tap_check(mr_ro != NULL, "reg_mr without REMOTE_READ succeeds");
	if (mr_ro) {
		memset(dst, 0xEE, 8192);
		ret = do_read(dst, 64, (uintptr_t)r2, mr_ro->rkey, 18, &wc, 1);
		tap_check(ret == 1 && wc.status == IBV_WC_REM_ACCESS_ERR &&
			  sh_all(dst, 8192, 0xEE),
			  "RDMA_READ of an MR without IBV_ACCESS_REMOTE_READ -> REM_ACCESS_ERR (%s)",
			  sh_wc_str(&wc));
		v->dereg_mr(mr_ro);
	}

	/* A deregistered rkey grants nothing. */
	r3 = malloc(4096);
	sh_fill(r3, 4096, 9);
	mr_gone = v->reg_mr(env.b.pd, r3, 4096,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr_gone)
		tap_bail("reg_mr r3");
	gone_rkey = mr_gone->rkey;
	memset(dst, 0xEE, 8192);
	ret = do_read(dst, 64, (uintptr_t)r3, gone_rkey, 19, &wc, 1);
	tap_check(ret == 1 && wc.status == IBV_WC_SUCCESS && sh_check(dst, 64, 9),
		  "RDMA_READ before dereg succeeds");
	tap_check(v->dereg_mr(mr_gone) == 0, "dereg_mr returns 0");
	memset(dst, 0xEE, 8192);
	ret = do_read(dst, 64, (uintptr_t)r3, gone_rkey, 20, &wc, 1);
	tap_check(ret == 1 && wc.status == IBV_WC_REM_ACCESS_ERR && sh_all(dst, 8192, 0xEE),
		  "RDMA_READ with a deregistered rkey -> REM_ACCESS_ERR, nothing read (%s)",
		  sh_wc_str(&wc));

	/* Unsupported send opcode. */
	{
		int pair = sh_pair_add(&env);
		struct ibv_sge sge = {
			.addr = (uintptr_t)dst, .length = 8, .lkey = env.a.mr->lkey,
		};
		struct ibv_send_wr wr, *bad = NULL;

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 21;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)(region + 1024);
		wr.wr.rdma.rkey = mr->rkey;
		ret = pair < 0 ? -1 : ibv_post_send(env.p[pair].sqp, &wr, &bad);
		tap_check(ret == EINVAL && bad == &wr,
			  "ibv_post_send(IBV_WR_RDMA_WRITE) fails EINVAL with bad_wr set (%d)", ret);
		if (pair >= 0) {
			sh_flush(&env);
			tap_check(sh_poll(env.p[pair].scq, &wc) == 0,
				  "a rejected post produces no completion");
		}
	}

	tap_check(v->dereg_mr(mr) == 0, "dereg_mr of the region returns 0");
	sh_env_close(&env);
	free(region);
	free(r2);
	free(r3);
}

int main(void)
{
	alarm(60);
	test_device();
	test_shm_segment();
	test_mr();
	return tap_done();
}
