/*
 * tm_dev_param.h - the device layer's settings, described so that a caller
 * can publish them in its own configuration system (the MTL makes each one
 * an MCA parameter) without knowing which provider they belong to.
 *
 * Contract
 * --------
 * tm_dev_params[TM_DEV_NPARAMS] describes every setting (tm_param.h): the
 * provider choice, the registration cache switch, how much of the card's
 * list to use (max_tags, max_ops: any value, clamped to what the device
 * offers), and the soft HCA's limits.  A setting's value is a uint64_t
 * (ENUM: an index into names[]; BOOL: 0/1).  The table declares no default
 * or bounds (def, min, max are 0): the defaults are the layer's
 * (tm_dev_config_default) and the soft HCA's (softhca_config_default), and
 * the soft HCA judges its limits itself, as a whole.
 *
 * tm_dev_param_defaults() gives the value each setting has when nothing is
 * configured: the layer's default, replaced by the setting's environment
 * variable when that is set.  A caller that lets its users override these
 * passes the result on through tm_dev_config_set_params(), after which the
 * environment is not read again: what the caller decided wins.
 *
 * A caller that never calls tm_dev_config_set_params() gets the old
 * behaviour: tm_dev_open() reads TM_DEV_PROVIDER and TM_DEV_RCACHE, the soft
 * HCA reads its SOFTHCA_* variables itself.  max_tags and max_ops have no
 * environment variable (env NULL).
 *
 * Nothing here prints; a refused value comes back as TM_ERR_INVALID with
 * the index of the setting, for the caller to name in its own words.
 */
#ifndef TM_DEV_PARAM_H
#define TM_DEV_PARAM_H

#include <stdint.h>
#include "tm_param.h"
#include "dev/tm_dev.h"

/* Indices into tm_dev_params[]: the order callers see the settings in. */
enum tm_dev_param_id {
	TM_DEV_P_PROVIDER,
	TM_DEV_P_RCACHE,
	TM_DEV_P_MAX_TAGS,
	TM_DEV_P_MAX_OPS,
	/* Soft HCA: the MTU before the header size, so that a header that
	 * does not fit the MTU is blamed on the header
	 * (tm_dev_config_set_params judges them in this order). */
	TM_DEV_P_SOFT_MTU,
	TM_DEV_P_SOFT_RING_DEPTH,
	TM_DEV_P_SOFT_MAX_NUM_TAGS,
	TM_DEV_P_SOFT_MAX_OPS,
	TM_DEV_P_SOFT_MAX_RNDV_HDR_SIZE,
	TM_DEV_P_SOFT_MAX_QP,
	TM_DEV_P_SOFT_MAX_MR,
	TM_DEV_P_SOFT_MAX_WR,
	TM_DEV_P_SOFT_SCHED,
	TM_DEV_P_SOFT_SEED,
	TM_DEV_P_SOFT_FORCE_COPY_READ,
	TM_DEV_P_SOFT_MAX_MSG_SZ,
	TM_DEV_P_SOFT_NO_TM,
	TM_DEV_NPARAMS
};

extern const struct tm_param tm_dev_params[TM_DEV_NPARAMS];

/*
 * Fills values[] with the defaults, environment applied.  A variable that
 * does not parse (or names no enum value) leaves that setting at the
 * layer's default and makes the call return TM_ERR_INVALID with the first
 * such index in *bad; the other values are still filled.
 */
int tm_dev_param_defaults(uint64_t values[TM_DEV_NPARAMS], unsigned *bad);

/*
 * Takes values[] as the final settings for tm_dev_open(cfg): cfg's
 * provider, rcache, max_num_tags and max_ops come from them (and the environment is no longer
 * consulted), and the soft HCA gets its limits for contexts opened from
 * now on, with its QP limit raised to min_qp if smaller.  TM_ERR_INVALID,
 * with the index of the first refused setting in *bad, if a value is out
 * of range; a soft HCA limit is judged together with the ones before it.
 */
int tm_dev_config_set_params(struct tm_dev_config *cfg,
			     const uint64_t values[TM_DEV_NPARAMS],
			     uint32_t min_qp, unsigned *bad);

/* The provider an open device uses: "verbs" or "soft". */
const char *tm_dev_provider_name(const struct tm_dev *dev);

#endif /* TM_DEV_PARAM_H */
