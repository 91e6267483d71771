/*
 * test_settings.c - the settings tables a caller publishes (tm_param.h):
 * the engine's (engine/tm_engine_param.h) on its own, and the two tables
 * together as the MTL registers them, in one namespace.
 *
 * Engine: every entry is described (name, help, a default within its
 * bounds); tm_engine_config_default() writes the table's defaults; a value
 * one past either bound of each setting is refused by
 * tm_engine_config_check() and named through its out-parameter, as is a
 * value too wide for its field, while the bounds themselves pass; and a few
 * bounds are pinned by number, so that the table cannot drift from what
 * the engine needs (a tag-matching card wants 33 plain buffers, a dead peer
 * must be found within a minute, an eager message is one 1 GiB verbs
 * message with its 16-byte header).
 * Both tables: no two settings share a name (the MTL makes each one the
 * MCA parameter mtl_tm_<name>).
 */
#include <stdlib.h>
#include <string.h>

#include "dev/tm_dev_param.h"
#include "engine/tm_engine.h"
#include "engine/tm_engine_param.h"
#include "tap.h"

/* The largest value a setting of this type can carry. */
static uint64_t type_max(const struct tm_param *d)
{
	switch (d->type) {
	case TM_PARAM_UINT: return UINT32_MAX;
	case TM_PARAM_BOOL: return 1;
	case TM_PARAM_SIZE: return SIZE_MAX;
	default: return UINT64_MAX;
	}
}

/* Does setting i at value v come back refused and named? */
static int refused(unsigned i, uint64_t v)
{
	struct tm_engine_config c;
	enum tm_engine_setting bad = TM_SETTING_NONE;

	tm_engine_config_default(&c);
	tm_engine_param_set(&c, i, v);
	return tm_engine_config_check(&c, &bad) == TM_ERR_INVALID &&
	       bad == (enum tm_engine_setting)i;
}

static int accepted(unsigned i, uint64_t v)
{
	struct tm_engine_config c;
	enum tm_engine_setting bad = TM_SETTING_EAGER_LIMIT;

	tm_engine_config_default(&c);
	tm_engine_param_set(&c, i, v);
	return tm_engine_config_check(&c, &bad) == TM_OK &&
	       bad == TM_SETTING_NONE && tm_engine_param_get(&c, i) == v;
}

static void engine_table(void)
{
	struct tm_engine_config c;
	const struct tm_param *d;
	unsigned i;

	tm_engine_config_default(&c);
	for (i = 0; i < TM_ENGINE_NPARAMS; i++) {
		d = tm_engine_param(i);
		tap_check(d && d->name && d->help && !d->env &&
			  d->min <= d->def && d->def <= d->max &&
			  d->max <= type_max(d),
			  "engine setting %u (%s): described, default %llu within %llu..%llu",
			  i, d && d->name ? d->name : "?",
			  d ? (unsigned long long)d->def : 0,
			  d ? (unsigned long long)d->min : 0,
			  d ? (unsigned long long)d->max : 0);
		if (!d)
			continue;
		tap_check(tm_engine_param_get(&c, i) == d->def,
			  "%s: tm_engine_config_default writes the table's default",
			  d->name);
		tap_check(accepted(i, d->min) && accepted(i, d->max),
			  "%s: its bounds %llu and %llu are accepted", d->name,
			  (unsigned long long)d->min,
			  (unsigned long long)d->max);
		if (d->max < type_max(d))
			tap_check(refused(i, d->max + 1),
				  "%s: %llu (one above its bound) is refused and named",
				  d->name, (unsigned long long)d->max + 1);
		if (d->min > 0)
			tap_check(refused(i, d->min - 1),
				  "%s: %llu (one below its bound) is refused and named",
				  d->name, (unsigned long long)d->min - 1);
	}
	tap_check(tm_engine_param(TM_ENGINE_NPARAMS) == NULL,
		  "no setting past the table");
}

/* Numbers the engine depends on, whatever the table says. */
static void engine_bounds(void)
{
	struct tm_engine_config c;
	enum tm_engine_setting bad;

	tap_check(refused(TM_SETTING_N_PLAIN, 32) &&
		  accepted(TM_SETTING_N_PLAIN, 33),
		  "plain_buffers: 32 refused, 33 (a card's minimum) accepted");
	tap_check(refused(TM_SETTING_N_SEND_SLOTS, 0),
		  "send_slots 0 is refused and named");
	tap_check(refused(TM_SETTING_KEEPALIVE_MS, 60001) &&
		  accepted(TM_SETTING_KEEPALIVE_MS, 0),
		  "keepalive_ms: 60001 refused, 0 (the default) accepted");
	tap_check(refused(TM_SETTING_EAGER_LIMIT, (1u << 30) - 15) &&
		  accepted(TM_SETTING_EAGER_LIMIT, (1u << 30) - 16),
		  "eager_limit: 1 GiB - 16 accepted, one more refused");
	tap_check(refused(TM_SETTING_N_PLAIN, (1ull << 32) + 40),
		  "plain_buffers 2^32 + 40 (wider than its field) is refused, not wrapped to 40");
	tm_engine_config_default(&c);
	c.n_plain = 0;
	c.keepalive_ms = 70000;
	tap_check(tm_engine_config_check(&c, &bad) == TM_ERR_INVALID &&
		  bad == TM_SETTING_N_PLAIN,
		  "two bad settings: the first of the table is named");
	tap_check(tm_engine_config_check(&c, NULL) == TM_ERR_INVALID,
		  "the out-parameter may be NULL");
}

/* The MTL registers both tables as mtl_tm_<name>: no name twice. */
static void one_namespace(void)
{
	const char *names[TM_ENGINE_NPARAMS + TM_DEV_NPARAMS];
	unsigned i, j, n = 0;
	int unique = 1;

	for (i = 0; i < TM_ENGINE_NPARAMS; i++)
		names[n++] = tm_engine_param(i)->name;
	for (i = 0; i < TM_DEV_NPARAMS; i++)
		names[n++] = tm_dev_param(i)->name;
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			if (!strcmp(names[i], names[j])) {
				unique = 0;
				tap_diag("%s twice", names[i]);
			}
	tap_check(unique, "the %u settings of both tables have distinct names",
		  n);
}

int main(void)
{
	engine_table();
	engine_bounds();
	one_namespace();
	return tap_done();
}
