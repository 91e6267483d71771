/*
 * tm_dev_param.h - the device layer's settings, described so that a caller
 * can publish them in its own configuration system (the MTL makes each one
 * an MCA parameter) without knowing which provider they belong to.
 *
 * Contract
 * --------
 * tm_dev_param(i), i < TM_DEV_NPARAMS, describes setting i (tm_param.h):
 * first the layer's own (the provider choice, the registration cache
 * switch, how much of the card's list to use: max_tags, max_ops, any
 * value, clamped to what the device offers), then every setting of the
 * soft HCA's table, the same descriptors (softhca/softhca_param.h: setting
 * s of that table is TM_DEV_P_SOFT(s)), so that a setting the soft HCA
 * gains reaches the caller with no edit here.  A value is a uint64_t
 * (ENUM: an index into names[]; BOOL: 0/1).  The layer's own settings
 * declare no default or bounds (def, min, max are 0; their defaults are
 * tm_dev_config_default's); the soft HCA's carry theirs.
 *
 * tm_dev_param_defaults() gives the value each setting has when nothing is
 * configured: the default, replaced by the setting's environment variable
 * when that is set, parsed by the rule every layer uses (tm_param_parse).
 * A caller that lets its users override these passes the result on
 * through tm_dev_config_set_params(), after which the environment is not
 * read again, by this layer or the soft HCA: what the caller decided wins.
 *
 * A caller that never calls tm_dev_config_set_params() gets the old
 * behaviour: tm_dev_open() reads TM_DEV_PROVIDER and TM_DEV_RCACHE, the soft
 * HCA reads its variables itself (and tm_dev_open_why() says which one it
 * refused).  max_tags and max_ops have no environment variable (env NULL).
 *
 * Nothing here prints; a refused value comes back as TM_ERR_INVALID with
 * the index of the setting, for the caller to name in its own words.
 */
#ifndef TM_DEV_PARAM_H
#define TM_DEV_PARAM_H

#include <stdint.h>
#include "tm_param.h"
#include "dev/tm_dev.h"

/*
 * Indices of the settings: the order callers see them in.  The soft HCA's
 * table is counted here (its header stays out of the MTL's reach:
 * tests/mtl/test_layers.sh); tm_dev_param.c checks the count, so a setting
 * added to that table names this line at compile time if it is not bumped.
 */
#define TM_DEV_SOFT_NPARAMS 17
enum tm_dev_param_id {
	TM_DEV_P_PROVIDER,
	TM_DEV_P_RCACHE,
	TM_DEV_P_MAX_TAGS,
	TM_DEV_P_MAX_OPS,
	TM_DEV_P_SOFT0,  /* the soft HCA's table from here */
	TM_DEV_NPARAMS = TM_DEV_P_SOFT0 + TM_DEV_SOFT_NPARAMS
};

/* The index of the soft HCA's setting SOFTHCA_S_<s> (softhca_param.h):
 * TM_DEV_P_SOFT(MTU); for code that may include that header. */
#define TM_DEV_P_SOFT(s) (TM_DEV_P_SOFT0 + SOFTHCA_S_##s)
/* The one the MTL names (it raises the QP limit to what a job needs). */
#define TM_DEV_P_SOFT_MAX_QP (TM_DEV_P_SOFT0 + 5)

const struct tm_param *tm_dev_param(unsigned i);

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
 * of range (a rendezvous header larger than the MTU: the header's).
 */
int tm_dev_config_set_params(struct tm_dev_config *cfg,
			     const uint64_t values[TM_DEV_NPARAMS],
			     uint32_t min_qp, unsigned *bad);

/* The provider an open device uses: "verbs" or "soft". */
const char *tm_dev_provider_name(const struct tm_dev *dev);

#endif /* TM_DEV_PARAM_H */
