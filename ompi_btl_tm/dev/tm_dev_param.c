/*
 * tm_dev_param.c - the device layer's settings (see tm_dev_param.h).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "dev/tm_dev_param.h"
#include "softhca/softhca.h"
#include "verbs/tm_verbs.h"

static const char *const provider_names[] = { "auto", "soft", "verbs", NULL };
/* MANUAL is left out on purpose: nothing outside a unit test steps it. */
static const char *const sched_names[] = { "auto", "random", NULL };

const struct tm_param tm_dev_params[TM_DEV_NPARAMS] = {
	[TM_DEV_P_PROVIDER] = {
		"provider",
		"Device provider: auto (a TM-capable libibverbs device if present, else the soft HCA), soft (the built-in soft HCA), verbs (a real TM-capable HCA through libibverbs; fails if none)",
		TM_PARAM_ENUM, "TM_DEV_PROVIDER", provider_names, 0 },
	[TM_DEV_P_RCACHE] = {
		"rcache",
		"Keep registrations of message buffers in a cache (libucs rcache) instead of registering each rendezvous buffer per message",
		TM_PARAM_BOOL, "TM_DEV_RCACHE", NULL, 1 },
	[TM_DEV_P_MAX_TAGS] = {
		"max_tags",
		"Tagged receive entries to use on the card's matching list (0: all the device offers)",
		TM_PARAM_UINT, NULL, NULL, 0 },
	[TM_DEV_P_MAX_OPS] = {
		"max_ops",
		"Outstanding tag-list operations on the card (0: as the hardware allows: 2 per tag + 2, within the device's command-queue limit)",
		TM_PARAM_UINT, NULL, NULL, 0 },
	[TM_DEV_P_SOFT_MTU] = {
		"softhca_mtu",
		"Soft HCA: path MTU in bytes (packet payload size; eager messages above it complete in two steps as on a card)",
		TM_PARAM_UINT, "SOFTHCA_MTU", NULL, 1 },
	[TM_DEV_P_SOFT_RING_DEPTH] = {
		"softhca_ring_depth",
		"Soft HCA: packets per QP inbound ring in shared memory",
		TM_PARAM_UINT, "SOFTHCA_RING_DEPTH", NULL, 1 },
	[TM_DEV_P_SOFT_MAX_NUM_TAGS] = {
		"softhca_max_num_tags",
		"Soft HCA: tagged entries its matching list holds (a ConnectX-5 reports 1023)",
		TM_PARAM_UINT, "SOFTHCA_MAX_NUM_TAGS", NULL, 1 },
	[TM_DEV_P_SOFT_MAX_OPS] = {
		"softhca_max_ops",
		"Soft HCA: outstanding tag-list operations it accepts",
		TM_PARAM_UINT, "SOFTHCA_MAX_OPS", NULL, 1 },
	[TM_DEV_P_SOFT_MAX_RNDV_HDR_SIZE] = {
		"softhca_max_rndv_hdr_size",
		"Soft HCA: largest rendezvous header (TMH + RVH + metadata) in bytes; at most the MTU",
		TM_PARAM_UINT, "SOFTHCA_MAX_RNDV_HDR_SIZE", NULL, 1 },
	[TM_DEV_P_SOFT_MAX_QP] = {
		"softhca_max_qp",
		"Soft HCA: QPs per context; unless set, raised to what the job needs if smaller (two per rank: a QP pair per peer)",
		TM_PARAM_UINT, "SOFTHCA_MAX_QP", NULL, 1 },
	[TM_DEV_P_SOFT_MAX_MR] = {
		"softhca_max_mr",
		"Soft HCA: memory registrations per context",
		TM_PARAM_UINT, "SOFTHCA_MAX_MR", NULL, 1 },
	[TM_DEV_P_SOFT_MAX_WR] = {
		"softhca_max_wr",
		"Soft HCA: work requests per send or receive queue",
		TM_PARAM_UINT, "SOFTHCA_MAX_WR", NULL, 1 },
	[TM_DEV_P_SOFT_SCHED] = {
		"softhca_sched",
		"Soft HCA: how much card work each verbs call does: auto (all that is ready) or random (a random amount, to shake out races)",
		TM_PARAM_ENUM, "SOFTHCA_SCHED", sched_names, 1 },
	[TM_DEV_P_SOFT_SEED] = {
		"softhca_seed",
		"Soft HCA: seed of the random scheduling mode (0: from pid and time)",
		TM_PARAM_U64, "SOFTHCA_SEED", NULL, 1 },
	[TM_DEV_P_SOFT_FORCE_COPY_READ] = {
		"softhca_force_copy_read",
		"Soft HCA: never read a peer's memory with process_vm_readv; always use the read request/response packets (the fallback when the kernel refuses cross-memory attach)",
		TM_PARAM_BOOL, "SOFTHCA_FORCE_COPY_READ", NULL, 1 },
	[TM_DEV_P_SOFT_MAX_MSG_SZ] = {
		"softhca_max_msg_sz",
		"Soft HCA: the port's max_msg_sz, the longest message or RDMA read it does in one go (a ConnectX reports 1 GiB); longer rendezvous transfers are read in pieces",
		TM_PARAM_UINT, "SOFTHCA_MAX_MSG_SZ", NULL, 1 },
	[TM_DEV_P_SOFT_NO_TM] = {
		"softhca_no_tm",
		"Soft HCA: offer no tag matching (its tm_caps read zero, as on an RDMA device without it), so that every message is matched in software over plain RC: the mode of such devices, on one machine",
		TM_PARAM_BOOL, "SOFTHCA_NO_TM", NULL, 1 },
};

/* Where each 32-bit soft HCA limit lives in struct softhca_config. */
static const struct {
	enum tm_dev_param_id id;
	size_t offset;
} soft_u32[] = {
	{ TM_DEV_P_SOFT_MTU, offsetof(struct softhca_config, mtu) },
	{ TM_DEV_P_SOFT_RING_DEPTH, offsetof(struct softhca_config, ring_depth) },
	{ TM_DEV_P_SOFT_MAX_NUM_TAGS,
	  offsetof(struct softhca_config, max_num_tags) },
	{ TM_DEV_P_SOFT_MAX_OPS, offsetof(struct softhca_config, max_ops) },
	{ TM_DEV_P_SOFT_MAX_RNDV_HDR_SIZE,
	  offsetof(struct softhca_config, max_rndv_hdr_size) },
	{ TM_DEV_P_SOFT_MAX_QP, offsetof(struct softhca_config, max_qp) },
	{ TM_DEV_P_SOFT_MAX_MR, offsetof(struct softhca_config, max_mr) },
	{ TM_DEV_P_SOFT_MAX_WR, offsetof(struct softhca_config, max_wr) },
	{ TM_DEV_P_SOFT_MAX_MSG_SZ,
	  offsetof(struct softhca_config, max_msg_sz) },
};
#define N_SOFT_U32 (sizeof(soft_u32) / sizeof(soft_u32[0]))

static uint32_t *soft_field(struct softhca_config *c, size_t i)
{
	return (uint32_t *)((char *)c + soft_u32[i].offset);
}

static int parse_value(const struct tm_param *p, const char *s,
		       uint64_t *v)
{
	unsigned long long n;
	char *end;
	int i;

	if (p->type == TM_PARAM_ENUM) {
		for (i = 0; p->names[i]; i++)
			if (!strcmp(s, p->names[i])) {
				*v = (uint64_t)i;
				return TM_OK;
			}
		return TM_ERR_INVALID;
	}
	if (p->type == TM_PARAM_BOOL) {
		if (!strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "true"))
			*v = 1;
		else if (!strcmp(s, "0") || !strcmp(s, "no") ||
			 !strcmp(s, "false"))
			*v = 0;
		else
			return TM_ERR_INVALID;
		return TM_OK;
	}
	errno = 0;
	n = strtoull(s, &end, 0);
	/* strtoull takes "-1" as a huge number: a limit never is negative */
	if (errno || !*s || *end || strchr(s, '-'))
		return TM_ERR_INVALID;
	if (p->type == TM_PARAM_UINT && n > UINT32_MAX)
		return TM_ERR_INVALID;
	*v = n;
	return TM_OK;
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
	memset(values, 0, sizeof(uint64_t) * TM_DEV_NPARAMS);
	values[TM_DEV_P_PROVIDER] = 0; /* provider_names[0]: "auto" */
	values[TM_DEV_P_RCACHE] = dc.rcache != 0;
	values[TM_DEV_P_MAX_TAGS] = dc.max_num_tags;
	values[TM_DEV_P_MAX_OPS] = dc.max_ops;
	for (i = 0; i < N_SOFT_U32; i++)
		values[soft_u32[i].id] = *soft_field(&sc, i);
	values[TM_DEV_P_SOFT_SCHED] = sc.sched == SOFTHCA_SCHED_RANDOM;
	values[TM_DEV_P_SOFT_SEED] = sc.seed;
	values[TM_DEV_P_SOFT_FORCE_COPY_READ] = sc.force_copy_read != 0;
	values[TM_DEV_P_SOFT_NO_TM] = sc.no_tm != 0;

	for (i = 0; i < TM_DEV_NPARAMS; i++) {
		s = tm_dev_params[i].env ? getenv(tm_dev_params[i].env) : NULL;
		if (!s || !*s)
			continue;
		if (parse_value(&tm_dev_params[i], s, &values[i]) != TM_OK &&
		    rc == TM_OK) {
			rc = TM_ERR_INVALID;
			*bad = i;
		}
	}
	return rc;
}

static void soft_config(struct softhca_config *c, const uint64_t *values,
			size_t n_u32)
{
	size_t i;

	softhca_config_default(c);
	for (i = 0; i < n_u32; i++)
		*soft_field(c, i) = (uint32_t)values[soft_u32[i].id];
	c->sched = values[TM_DEV_P_SOFT_SCHED] ? SOFTHCA_SCHED_RANDOM :
						  SOFTHCA_SCHED_AUTO;
	c->seed = values[TM_DEV_P_SOFT_SEED];
	c->force_copy_read = values[TM_DEV_P_SOFT_FORCE_COPY_READ] != 0;
	c->no_tm = values[TM_DEV_P_SOFT_NO_TM] != 0;
}

/* Enum and bool values are checked here; numbers by their owner. */
static int check_kinds(const uint64_t *values, unsigned *bad)
{
	const struct tm_param *p;
	unsigned i, n;

	for (i = 0; i < TM_DEV_NPARAMS; i++) {
		p = &tm_dev_params[i];
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

int tm_dev_config_set_params(struct tm_dev_config *cfg,
			     const uint64_t values[TM_DEV_NPARAMS],
			     uint32_t min_qp, unsigned *bad)
{
	struct softhca_config c;
	size_t i;
	int rc;

	rc = check_kinds(values, bad);
	if (rc != TM_OK)
		return rc;
	/*
	 * The soft HCA judges its limits as a whole and only says yes or no,
	 * so they are given to it one more at a time: the first refusal
	 * names the culprit (or the later of two that do not fit together).
	 */
	for (i = 1; i <= N_SOFT_U32; i++) {
		soft_config(&c, values, i);
		if (softhca_set_config(&c)) {
			*bad = soft_u32[i - 1].id;
			return TM_ERR_INVALID;
		}
	}
	if (c.max_qp < min_qp) {
		c.max_qp = min_qp;
		if (softhca_set_config(&c)) {
			*bad = TM_DEV_P_SOFT_MAX_QP;
			return TM_ERR_INVALID;
		}
	}
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
