/*
 * test_dev_param.c - the device layer's described settings
 * (dev/tm_dev_param.h): defaults with the environment applied, a bad
 * variable named by its index, refused values named by their index (the
 * later of two soft HCA limits that do not fit together), and settled
 * settings winning over TM_DEV_PROVIDER in tm_dev_open().
 */
#include <stdlib.h>
#include <string.h>

#include "dev/tm_dev.h"
#include "dev/tm_dev_param.h"
#include "softhca/softhca_param.h"
#include "tap.h"

static void clear_env(void)
{
	unsigned i;

	for (i = 0; i < TM_DEV_NPARAMS; i++)
		if (tm_dev_param(i)->env)
			unsetenv(tm_dev_param(i)->env);
}

static int set_params(uint64_t *v, unsigned *bad)
{
	struct tm_dev_config cfg;

	tm_dev_config_default(&cfg);
	*bad = TM_DEV_NPARAMS;
	return tm_dev_config_set_params(&cfg, v, 1, bad);
}

int main(void)
{
	uint64_t v[TM_DEV_NPARAMS], d[TM_DEV_NPARAMS];
	struct tm_dev_config cfg;
	struct tm_dev *dev = NULL;
	unsigned i, bad = TM_DEV_NPARAMS;
	int rc, described = 1;

	for (i = 0; i < TM_DEV_NPARAMS; i++)
		if (!tm_dev_param(i)->name || !tm_dev_param(i)->help ||
		    (!tm_dev_param(i)->env && i != TM_DEV_P_MAX_TAGS &&
		     i != TM_DEV_P_MAX_OPS) ||
		    (tm_dev_param(i)->type == TM_PARAM_ENUM &&
		     !tm_dev_param(i)->names))
			described = 0;
	tap_check(described, "every setting has a name, help, variable (all but max_tags and max_ops; names if an enum)");

	clear_env();
	/* "verbs" is not only tag-matching cards (the MTL's no-TM mode) */
	tap_check(strstr(tm_dev_param(TM_DEV_P_PROVIDER)->help,
			 "verbs (RDMA devices") &&
		  strstr(tm_dev_param(TM_DEV_P_PROVIDER)->help,
			 "else any InfiniBand or RoCE device"),
		  "the provider's help says verbs also opens RDMA devices "
		  "without tag matching");
	rc = tm_dev_param_defaults(d, &bad);
	tap_check(rc == TM_OK, "defaults without environment: ok");
	tap_check(!strcmp(tm_dev_param(TM_DEV_P_PROVIDER)->names[d[TM_DEV_P_PROVIDER]],
			  "auto") && d[TM_DEV_P_RCACHE] == 1,
		  "default provider auto, cache on");

	setenv("SOFTHCA_MTU", "512", 1);
	setenv("TM_DEV_PROVIDER", "soft", 1);
	setenv("SOFTHCA_SCHED", "random", 1);
	rc = tm_dev_param_defaults(v, &bad);
	tap_check(rc == TM_OK && v[TM_DEV_P_SOFT(MTU)] == 512 &&
		  v[TM_DEV_P_SOFT(SCHED)] == 1 &&
		  !strcmp(tm_dev_param(TM_DEV_P_PROVIDER)->names[v[TM_DEV_P_PROVIDER]],
			  "soft"),
		  "environment variables replace the defaults");

	clear_env();
	setenv("SOFTHCA_RING_DEPTH", "lots", 1);
	setenv("SOFTHCA_SEED", "-1", 1);
	rc = tm_dev_param_defaults(v, &bad);
	tap_check(rc == TM_ERR_INVALID && bad == TM_DEV_P_SOFT(RING_DEPTH),
		  "a variable that does not parse is named (first of two)");
	tap_check(v[TM_DEV_P_SOFT(RING_DEPTH)] == d[TM_DEV_P_SOFT(RING_DEPTH)] &&
		  v[TM_DEV_P_SOFT(SEED)] == d[TM_DEV_P_SOFT(SEED)],
		  "... and its setting keeps the default (no negative limit)");
	clear_env();
	setenv("SOFTHCA_MAX_MR", "4294967296", 1);
	rc = tm_dev_param_defaults(v, &bad);
	tap_check(rc == TM_ERR_INVALID && bad == TM_DEV_P_SOFT(MAX_MR),
		  "a 32-bit setting given 2^32 is refused");
	clear_env();

	memcpy(v, d, sizeof(v));
	tap_check(set_params(v, &bad) == TM_OK, "the defaults are accepted");
	v[TM_DEV_P_SOFT(MTU)] = 3;
	tap_check(set_params(v, &bad) == TM_ERR_INVALID &&
		  bad == TM_DEV_P_SOFT(MTU), "MTU 3: refused, named");
	memcpy(v, d, sizeof(v));
	v[TM_DEV_P_SOFT(MAX_RNDV_HDR_SIZE)] = 8192;
	tap_check(set_params(v, &bad) == TM_ERR_INVALID &&
		  bad == TM_DEV_P_SOFT(MAX_RNDV_HDR_SIZE),
		  "rendezvous header above the MTU: the header is named");
	v[TM_DEV_P_SOFT(MTU)] = 8192;
	tap_check(set_params(v, &bad) == TM_OK,
		  "... and accepted with an MTU that holds it");
	memcpy(v, d, sizeof(v));
	v[TM_DEV_P_PROVIDER] = 7;
	tap_check(set_params(v, &bad) == TM_ERR_INVALID &&
		  bad == TM_DEV_P_PROVIDER, "provider index 7: refused, named");
	memcpy(v, d, sizeof(v));
	v[TM_DEV_P_RCACHE] = 2;
	tap_check(set_params(v, &bad) == TM_ERR_INVALID &&
		  bad == TM_DEV_P_RCACHE, "bool 2: refused, named");
	memcpy(v, d, sizeof(v));
	v[TM_DEV_P_MAX_TAGS] = (uint64_t)UINT32_MAX + 1;
	tap_check(set_params(v, &bad) == TM_ERR_INVALID &&
		  bad == TM_DEV_P_MAX_TAGS, "max_tags 2^32: refused, named");

	/* max_tags and max_ops: defaults of the layer, into the config */
	tm_dev_config_default(&cfg);
	tap_check(d[TM_DEV_P_MAX_TAGS] == cfg.max_num_tags &&
		  d[TM_DEV_P_MAX_OPS] == cfg.max_ops,
		  "max_tags and max_ops default to the layer's (%llu, %llu)",
		  (unsigned long long)d[TM_DEV_P_MAX_TAGS],
		  (unsigned long long)d[TM_DEV_P_MAX_OPS]);
	memcpy(v, d, sizeof(v));
	v[TM_DEV_P_MAX_TAGS] = 7;
	v[TM_DEV_P_MAX_OPS] = 9;
	rc = tm_dev_config_set_params(&cfg, v, 1, &bad);
	tap_check(rc == TM_OK && cfg.max_num_tags == 7 && cfg.max_ops == 9,
		  "max_tags 7, max_ops 9 reach the device config");

	/* Settled settings win over TM_DEV_PROVIDER; unsettled ones do not. */
	memcpy(v, d, sizeof(v));
	for (i = 0; tm_dev_param(TM_DEV_P_PROVIDER)->names[i]; i++)
		if (!strcmp(tm_dev_param(TM_DEV_P_PROVIDER)->names[i], "soft"))
			v[TM_DEV_P_PROVIDER] = i;
	tm_dev_config_default(&cfg);
	rc = tm_dev_config_set_params(&cfg, v, 4, &bad);
	setenv("TM_DEV_PROVIDER", "bogus", 1);
	if (rc == TM_OK)
		rc = tm_dev_open(&cfg, &dev);
	tap_check(rc == TM_OK && dev &&
		  !strcmp(tm_dev_provider_name(dev), "soft"),
		  "settled provider soft opens despite TM_DEV_PROVIDER=bogus");
	tm_dev_close(dev);
	tm_dev_config_default(&cfg);
	tap_check(tm_dev_open(&cfg, &dev) == TM_ERR_INVALID,
		  "unsettled: TM_DEV_PROVIDER=bogus is refused");
	clear_env();
	return tap_done();
}
