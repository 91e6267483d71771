/*
 * test_soft_config.c - the soft HCA's settings are read once, by one rule,
 * and reported through the caller (softhca/softhca_param.h,
 * dev/tm_dev_param.h):
 *  - "yes" and "no" mean the same to the soft HCA and to the device layer
 *    (once read as 0 by atoi in the soft HCA);
 *  - a bad variable fails the open with a sentence naming it, given to the
 *    caller through tm_dev_open_why(), and nothing on stderr;
 *  - a config a caller set (the MTL's, from its parameters) is what a
 *    context gets, whatever the environment says later (the soft HCA once
 *    re-read TM_SOFTHCA_STRICT and SOFTHCA_SINGLE_THREADED at each open).
 * The soft HCA's config is process-wide and read at the first open, so
 * each case that opens runs in a child of its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dev/tm_dev.h"
#include "dev/tm_dev_param.h"
#include "softhca/softhca.h"
#include "softhca/softhca_param.h"
#include "softhca/sh_util.h"
#include "tap.h"

static char detail[512];

static void unset_all(void)
{
	unsigned i;

	for (i = 0; i < TM_DEV_NPARAMS; i++)
		if (tm_dev_param(i)->env)
			unsetenv(tm_dev_param(i)->env);
}

/* Runs fn in a child; its return value (0: the case holds) and the
 * detail it wrote come back through a pipe. */
static int in_child(int (*fn)(void))
{
	int fd[2], rc = -1, st;
	ssize_t n;
	pid_t pid;

	detail[0] = '\0';
	if (pipe(fd))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(fd[0]);
		rc = fn();
		if (write(fd[1], &rc, sizeof(rc)) != sizeof(rc) ||
		    write(fd[1], detail, strlen(detail) + 1) < 0)
			_exit(2);
		_exit(0);
	}
	close(fd[1]);
	if (pid < 0 || read(fd[0], &rc, sizeof(rc)) != sizeof(rc))
		rc = -1;
	n = read(fd[0], detail, sizeof(detail) - 1);
	detail[n > 0 ? n : 0] = '\0';
	close(fd[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	return rc;
}

/* ---- one rule for "yes" ------------------------------------------------ */

static void test_bool_words(void)
{
	static const char *const word[] = { "yes", "true", "1", "no", "false",
					    "0" };
	uint64_t v[TM_DEV_NPARAMS];
	struct softhca_config c;
	unsigned i, w, bad, wrong = 0, nbool = 0;
	const struct tm_param *p;

	for (i = 0; i < SOFTHCA_NSETTINGS; i++) {
		p = softhca_param(i);
		if (p->type != TM_PARAM_BOOL)
			continue;
		nbool++;
		for (w = 0; w < 6; w++) {
			unset_all();
			setenv(p->env, word[w], 1);
			softhca_config_default(&c);
			if (softhca_config_from_env(&c, NULL, NULL, 0) ||
			    softhca_param_get(&c, i) != (w < 3) ||
			    tm_dev_param_defaults(v, &bad) != TM_OK ||
			    v[TM_DEV_P_SOFT0 + i] != (w < 3)) {
				if (!wrong++)
					snprintf(detail, sizeof(detail),
						 "%s=%s", p->env, word[w]);
			}
		}
	}
	unset_all();
	tap_check(nbool >= 4 && !wrong,
		  "each of the %u boolean settings reads yes/true/1 as 1 and "
		  "no/false/0 as 0 in the soft HCA and the device layer (%u "
		  "wrong%s%s)", nbool, wrong, wrong ? ", first " : "",
		  wrong ? detail : "");
}

/* SOFTHCA_NO_TM=yes: the context opened from the environment offers no
 * tag matching. */
static int no_tm_yes(void)
{
	struct ibv_device_attr_ex a;
	struct ibv_context *ctx;
	int rc;

	setenv("SOFTHCA_NO_TM", "yes", 1);
	ctx = sh_open_ctx();
	if (!ctx) {
		snprintf(detail, sizeof(detail), "open failed (%d)", errno);
		return 1;
	}
	memset(&a, 0, sizeof(a));
	rc = ibv_query_device_ex(ctx, NULL, &a);
	snprintf(detail, sizeof(detail), "max_num_tags %u",
		 a.tm_caps.max_num_tags);
	sh_v()->close_device(ctx);
	return rc || a.tm_caps.max_num_tags != 0;
}

/* ---- a bad value: refused, named, through the caller ------------------- */

static const char *bad_var, *bad_val;

static int open_with_bad_var(void)
{
	struct tm_dev_config cfg;
	struct tm_dev *dev = NULL;
	char err[256] = "";
	const char *why;
	FILE *f = tmpfile();
	ssize_t n;
	int rc;

	setenv(bad_var, bad_val, 1);
	if (!f || dup2(fileno(f), 2) < 0)
		return 2;
	tm_dev_config_default(&cfg);
	cfg.provider = "soft";
	rc = tm_dev_open(&cfg, &dev);
	why = tm_dev_open_why();
	n = pread(fileno(f), err, sizeof(err) - 1, 0);
	err[n > 0 ? n : 0] = '\0';
	snprintf(detail, sizeof(detail), "open %d, why \"%s\", stderr \"%s\"",
		 rc, why ? why : "", err);
	if (rc == TM_OK)
		tm_dev_close(dev);
	return rc == TM_OK || !why || !strstr(why, bad_var) ||
	       !strstr(why, bad_val) || err[0];
}

static void check_bad(const char *var, const char *val, const char *what)
{
	unset_all();
	bad_var = var;
	bad_val = val;
	tap_check(in_child(open_with_bad_var) == 0,
		  "%s=%s (%s): the open fails, tm_dev_open_why() names the "
		  "variable and its value, nothing on stderr (%s)", var, val,
		  what, detail);
}

static void test_check_names(void)
{
	struct softhca_config c;
	char why[200] = "";
	unsigned bad = SOFTHCA_NSETTINGS;

	softhca_config_default(&c);
	c.max_rndv_hdr_size = 128;
	c.mtu = 64;
	tap_check(softhca_config_check(&c, &bad, why, sizeof(why)) == EINVAL &&
		  bad == SOFTHCA_S_MAX_RNDV_HDR_SIZE &&
		  strstr(why, "SOFTHCA_MAX_RNDV_HDR_SIZE") &&
		  softhca_set_config(&c) == EINVAL,
		  "a header larger than the MTU: refused, the header named (%s)",
		  why);
}

/* ---- a caller's config is not overridden -------------------------------- */

/* The config is strict (set by the caller, or by the device layer from
 * values[]); TM_SOFTHCA_STRICT=0 in the environment must not loosen it: a
 * TM-SRQ with 32 plain buffers stays refused (mlx5 rule 5). */
static int strict_held(void)
{
	struct ibv_srq_init_attr_ex sa;
	struct ibv_context *ctx;
	struct ibv_cq_ex *cq;
	struct ibv_srq *srq;
	struct ibv_pd *pd;
	int refused;

	setenv("TM_SOFTHCA_STRICT", "0", 1);
	setenv("SOFTHCA_SINGLE_THREADED", "1", 1);
	ctx = sh_open_ctx();
	pd = ctx ? sh_v()->alloc_pd(ctx) : NULL;
	cq = ctx ? sh_cq_ex(ctx, 64) : NULL;
	if (!pd || !cq) {
		snprintf(detail, sizeof(detail), "set-up failed");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 32;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = pd;
	sa.cq = ibv_cq_ex_to_cq(cq);
	sa.tm_cap.max_num_tags = 16;
	sa.tm_cap.max_ops = 8;
	srq = ibv_create_srq_ex(ctx, &sa);
	refused = !srq;
	snprintf(detail, sizeof(detail), "TM-SRQ of 32 %s",
		 refused ? "refused" : "created");
	if (srq)
		sh_v()->destroy_srq(srq);
	sh_cq_destroy(cq);
	sh_v()->dealloc_pd(pd);
	sh_v()->close_device(ctx);
	return !refused;
}

static int set_then_env(void)
{
	struct softhca_config c;

	softhca_config_default(&c); /* strict, locked */
	if (softhca_set_config(&c))
		return 2;
	return strict_held();
}

static int params_then_env(void)
{
	uint64_t v[TM_DEV_NPARAMS];
	struct tm_dev_config cfg;
	unsigned bad;

	if (tm_dev_param_defaults(v, &bad) != TM_OK)
		return 2;
	v[TM_DEV_P_SOFT(STRICT)] = 1;
	tm_dev_config_default(&cfg);
	if (tm_dev_config_set_params(&cfg, v, 0, &bad) != TM_OK)
		return 2;
	return strict_held();
}

int main(void)
{
	unset_all();
	test_bool_words();
	tap_check(in_child(no_tm_yes) == 0,
		  "SOFTHCA_NO_TM=yes: a context opened from the environment "
		  "offers no tag matching (%s)", detail);
	check_bad("SOFTHCA_SINGLE_THREADED", "maybe", "not a boolean");
	check_bad("TM_SOFTHCA_STRICT", "on", "not a boolean");
	check_bad("SOFTHCA_MTU", "lots", "not a number");
	check_bad("SOFTHCA_MTU", "32", "below its bound, 64");
	check_bad("SOFTHCA_SCHED", "sometimes", "no such mode");
	test_check_names();
	unset_all();
	tap_check(in_child(set_then_env) == 0,
		  "a config set by the caller is kept: TM_SOFTHCA_STRICT=0 "
		  "later does not loosen it (%s)", detail);
	unset_all();
	tap_check(in_child(params_then_env) == 0,
		  "settings given to the device layer are kept: "
		  "TM_SOFTHCA_STRICT=0 later does not loosen them (%s)",
		  detail);
	return tap_done();
}
