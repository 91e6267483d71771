/*
 * tm_dev_param.c - the device layer's settings (see tm_dev_param.h): its
 * own four, then the soft HCA's table as it stands.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "dev/tm_dev_param.h"
#include "softhca/softhca.h"
#include "softhca/softhca_param.h"
#include "verbs/tm_verbs.h"

_Static_assert(TM_DEV_SOFT_NPARAMS == SOFTHCA_NSETTINGS,
	       "tm_dev_param.h counts the soft HCA's settings: update it");
_Static_assert(TM_DEV_P_SOFT_MAX_QP == TM_DEV_P_SOFT(MAX_QP),
	       "tm_dev_param.h: TM_DEV_P_SOFT_MAX_QP");

static const char *const provider_names[] = { "auto", "soft", "verbs", NULL };

static const struct tm_param dev_params[TM_DEV_P_SOFT0] = {
	[TM_DEV_P_PROVIDER] = {
		"provider",
		"Device provider: auto (a tag-matching card when every rank has one; else the built-in soft HCA when the job is on one node; else an RDMA device without tag matching, every message matched in software), soft (the soft HCA only: one node), verbs (RDMA devices through libibverbs only: a tag-matching card when every rank has one, else any InfiniBand or RoCE device with an active port, without tag matching)",
		TM_PARAM_ENUM, "TM_DEV_PROVIDER", provider_names, 0, 0, 0, 0 },
	[TM_DEV_P_RCACHE] = {
		"rcache",
		"Keep registrations of message buffers in a cache (libucs rcache) instead of registering each rendezvous buffer per message",
		TM_PARAM_BOOL, "TM_DEV_RCACHE", NULL, 1, 0, 0, 0 },
	[TM_DEV_P_MAX_TAGS] = {
		"max_tags",
		"Tagged receive entries to use on the card's matching list (0: all the device offers)",
		TM_PARAM_UINT, NULL, NULL, 0, 0, 0, 0 },
	[TM_DEV_P_MAX_OPS] = {
		"max_ops",
		"Outstanding tag-list operations on the card (0: as the hardware allows: 2 per tag + 2, within the device's command-queue limit)",
		TM_PARAM_UINT, NULL, NULL, 0, 0, 0, 0 },
};

const struct tm_param *tm_dev_param(unsigned i)
{
	if (i < TM_DEV_P_SOFT0)
		return &dev_params[i];
	return i < TM_DEV_NPARAMS ? softhca_param(i - TM_DEV_P_SOFT0) : NULL;
}

int tm_dev_param_defaults(uint64_t values[TM_DEV_NPARAMS], unsigned *bad)
{
	struct softhca_config sc;
	struct tm_dev_config dc;
	int rc = TM_OK;
	const char *s;
	unsigned i;

	softhca_config_default(&sc);
	tm_dev_config_default(&dc);
	values[TM_DEV_P_PROVIDER] = 0; /* provider_names[0]: "auto" */
	values[TM_DEV_P_RCACHE] = dc.rcache != 0;
	values[TM_DEV_P_MAX_TAGS] = dc.max_num_tags;
	values[TM_DEV_P_MAX_OPS] = dc.max_ops;
	for (i = 0; i < SOFTHCA_NSETTINGS; i++)
		values[TM_DEV_P_SOFT0 + i] = softhca_param_get(&sc, i);

	for (i = 0; i < TM_DEV_NPARAMS; i++) {
		s = tm_dev_param(i)->env ? getenv(tm_dev_param(i)->env) : NULL;
		if (!s || !*s)
			continue;
		if (tm_param_parse(tm_dev_param(i), s, &values[i]) &&
		    rc == TM_OK) {
			rc = TM_ERR_INVALID;
			*bad = i;
		}
	}
	return rc;
}

/* Enum and bool values are checked here; the soft HCA's numbers by it. */
static int check_kinds(const uint64_t *values, unsigned *bad)
{
	const struct tm_param *p;
	unsigned i, n;

	for (i = 0; i < TM_DEV_NPARAMS; i++) {
		p = tm_dev_param(i);
		if (p->type == TM_PARAM_UINT && values[i] > UINT32_MAX)
			goto bad;
		if (p->type == TM_PARAM_BOOL && values[i] > 1)
			goto bad;
		if (p->type == TM_PARAM_ENUM) {
			for (n = 0; p->names[n]; n++)
				;
			if (values[i] >= n)
				goto bad;
		}
		continue;
bad:
		*bad = i;
		return TM_ERR_INVALID;
	}
	return TM_OK;
}

static int soft_set(const struct softhca_config *c, unsigned *bad)
{
	unsigned sbad = 0;

	if (softhca_config_check(c, &sbad, NULL, 0)) {
		*bad = TM_DEV_P_SOFT0 + sbad;
		return TM_ERR_INVALID;
	}
	return softhca_set_config(c) ? TM_ERR_INVALID : TM_OK;
}

int tm_dev_config_set_params(struct tm_dev_config *cfg,
			     const uint64_t values[TM_DEV_NPARAMS],
			     uint32_t min_qp, unsigned *bad)
{
	struct softhca_config c;
	unsigned i;
	int rc;

	rc = check_kinds(values, bad);
	if (rc != TM_OK)
		return rc;
	softhca_config_default(&c);
	for (i = 0; i < SOFTHCA_NSETTINGS; i++)
		softhca_param_set(&c, i, values[TM_DEV_P_SOFT0 + i]);
	rc = soft_set(&c, bad);
	if (rc == TM_OK && c.max_qp < min_qp) {
		c.max_qp = min_qp;
		rc = soft_set(&c, bad);
	}
	if (rc != TM_OK)
		return rc;
	cfg->provider = provider_names[values[TM_DEV_P_PROVIDER]];
	cfg->rcache = (int)values[TM_DEV_P_RCACHE];
	cfg->max_num_tags = (uint32_t)values[TM_DEV_P_MAX_TAGS];
	cfg->max_ops = (uint32_t)values[TM_DEV_P_MAX_OPS];
	cfg->settled = 1;
	return TM_OK;
}

const char *tm_dev_provider_name(const struct tm_dev *dev)
{
	return dev->verbs->name;
}
