/*
 * tm_engine_param.h - the matching engine's settings, described once each
 * (tm_param.h): name, help, default, bounds, and where the value lives in
 * struct tm_engine_config.
 *
 * Contract
 * --------
 * tm_engine_param(i), i < TM_ENGINE_NPARAMS, describes setting i; the
 * indices are enum tm_engine_setting.  tm_engine_config_default() writes
 * every default of the table, tm_engine_param_get()/_set() read and write
 * setting i of a config by its index (a caller that publishes the settings
 * needs no field names), and tm_engine_config_check() judges a config
 * against the table's bounds, naming the first setting outside them.
 * tm_engine_create() refuses such a config with TM_ERR_INVALID.  Nothing
 * here prints or reads the environment.
 *
 * Adding a setting: a field in struct tm_engine_config (tm_engine.h), an
 * index below, an entry in tm_engine_param.c; a caller that publishes the
 * table (the MTL) picks it up by itself, and mtl_tm(7) documents it (a
 * test compares the page with what the component registers).
 */
#ifndef TM_ENGINE_PARAM_H
#define TM_ENGINE_PARAM_H

#include <stdint.h>
#include "tm_param.h"

struct tm_engine_config;

/* keepalive_ms 0 means this; the table's default too */
#define TM_KEEPALIVE_MS_DEFAULT 1000u
/* offload_thresh's default: bench/README.md, "The offload threshold" */
#define TM_OFFLOAD_THRESH_DEFAULT 8192u
/* ADDs decided before the next progress call go to the card as one
 * chain (one ibv_post_srq_ops, one doorbell) of at most add_chain, at
 * most this many (the chain's arrays; also add_chain's default) */
#define TM_ADD_CHAIN_MAX 64u
/* unexpected_mem's default: 8 MiB */
#define TM_UNEXPECTED_MEM_DEFAULT ((uint64_t)8 << 20)

/* Indices into the table: the order callers see the settings in. */
enum tm_engine_setting {
	TM_SETTING_EAGER_LIMIT,
	TM_SETTING_N_PLAIN,
	TM_SETTING_N_SEND_SLOTS,
	TM_SETTING_OFFLOAD,
	TM_SETTING_OFFLOAD_THRESH,
	TM_SETTING_ADD_CHAIN,
	TM_SETTING_KEEPALIVE_MS,
	TM_SETTING_UNEXPECTED_MEM,
	TM_ENGINE_NPARAMS,
	TM_SETTING_NONE = TM_ENGINE_NPARAMS, /* all settings in bounds */
};

const struct tm_param *tm_engine_param(unsigned i);

void tm_engine_config_default(struct tm_engine_config *cfg);
uint64_t tm_engine_param_get(const struct tm_engine_config *cfg, unsigned i);
/* Stores v (a BOOL as 0/1; a value too wide for a 32-bit field as
 * UINT32_MAX, which tm_engine_config_check then names as out of bounds). */
void tm_engine_param_set(struct tm_engine_config *cfg, unsigned i, uint64_t v);
/* TM_OK, or TM_ERR_INVALID with *bad (if bad is not NULL) the first
 * setting out of its bounds (TM_SETTING_NONE when all are in). */
int tm_engine_config_check(const struct tm_engine_config *cfg,
			   enum tm_engine_setting *bad);

#endif /* TM_ENGINE_PARAM_H */
