/*
 * tm_engine.c - the engine's settings: their defaults and bounds
 * (tm_engine.h).  The engine itself: tm_api.c and the modules it names.
 */
#include <string.h>
#include "engine/tm_engine.h"
#include "engine/tm_wire.h"

#define TM_KEEPALIVE_MS_DEFAULT 1000

_Static_assert(TMH_LEN == 16, "TM_ENGINE_EAGER_LIMIT_MAX counts a 16-byte TMH");

void tm_engine_config_default(struct tm_engine_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->eager_limit = 8192;
	cfg->n_plain = 256;
	cfg->n_send_slots = 256;
	cfg->offload = 1;
	cfg->keepalive_ms = TM_KEEPALIVE_MS_DEFAULT;
}

int tm_engine_config_check(const struct tm_engine_config *cfg,
			   enum tm_engine_setting *bad)
{
	enum tm_engine_setting b = TM_SETTING_NONE;

	if (cfg->eager_limit > TM_ENGINE_EAGER_LIMIT_MAX)
		b = TM_SETTING_EAGER_LIMIT;
	else if (cfg->n_plain < TM_ENGINE_N_PLAIN_MIN ||
		 cfg->n_plain > TM_ENGINE_N_PLAIN_MAX)
		b = TM_SETTING_N_PLAIN;
	else if (cfg->n_send_slots < TM_ENGINE_N_SEND_SLOTS_MIN ||
		 cfg->n_send_slots > TM_ENGINE_N_SEND_SLOTS_MAX)
		b = TM_SETTING_N_SEND_SLOTS;
	else if (cfg->keepalive_ms > TM_KEEPALIVE_MAX_MS)
		b = TM_SETTING_KEEPALIVE_MS;
	if (bad)
		*bad = b;
	return b == TM_SETTING_NONE ? TM_OK : TM_ERR_INVALID;
}
