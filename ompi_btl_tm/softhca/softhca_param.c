/*
 * softhca_param.c - the soft HCA's settings table (see softhca_param.h):
 * each setting declared once, in SOFTHCA_SETTINGS.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "softhca.h"
#include "softhca_param.h"
#include "softhca_priv.h"

/* MANUAL is left out of the names on purpose: nothing outside a unit test
 * steps the card (a unit test sets it in the config; the bounds allow it). */
static const char *const softhca_sched_names[] = { "auto", "random", NULL };
_Static_assert(SOFTHCA_SCHED_MANUAL == 2, "SCHED's bounds name MANUAL");
_Static_assert(SH_MAX_SGE == 16, "MAX_SGE's bound is SH_MAX_SGE");

struct setting {
	struct tm_param d;
	size_t offset, size;
};

#define NAMES_UINT(f) NULL
#define NAMES_U64(f) NULL
#define NAMES_BOOL(f) NULL
#define NAMES_ENUM(f) softhca_##f##_names

#define SETTING(id, f, type, env, def, min, max, expert, help) \
	[SOFTHCA_S_##id] = { \
		{ "softhca_" #f, help, TM_PARAM_##type, env, \
		  NAMES_##type(f), expert, def, min, max }, \
		offsetof(struct softhca_config, f), \
		sizeof(((struct softhca_config *)0)->f) },

static const struct setting settings[SOFTHCA_NSETTINGS] = {
	SOFTHCA_SETTINGS(SETTING)
};

const struct tm_param *softhca_param(unsigned i)
{
	return i < SOFTHCA_NSETTINGS ? &settings[i].d : NULL;
}

/* A 4-byte field is a uint32_t, or an int flag or enum holding a small
 * value: both store that value the same way. */
uint64_t softhca_param_get(const struct softhca_config *cfg, unsigned i)
{
	const char *p = (const char *)cfg + settings[i].offset;
	uint32_t u32;
	uint64_t u64;

	if (settings[i].size == sizeof(uint64_t)) {
		memcpy(&u64, p, sizeof(u64));
		return u64;
	}
	memcpy(&u32, p, sizeof(u32));
	return u32;
}

void softhca_param_set(struct softhca_config *cfg, unsigned i, uint64_t v)
{
	char *p = (char *)cfg + settings[i].offset;
	uint32_t u32;

	if (settings[i].size == sizeof(uint64_t)) {
		memcpy(p, &v, sizeof(v));
		return;
	}
	u32 = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	memcpy(p, &u32, sizeof(u32));
}

_Static_assert(sizeof(enum softhca_sched) == sizeof(uint32_t) &&
	       sizeof(int) == sizeof(uint32_t),
	       "every small setting is a 4-byte field");

void softhca_config_default(struct softhca_config *cfg)
{
	unsigned i;

	memset(cfg, 0, sizeof(*cfg));
	for (i = 0; i < SOFTHCA_NSETTINGS; i++)
		softhca_param_set(cfg, i, settings[i].d.def);
}

static int refuse(unsigned i, unsigned *bad, char *why, size_t len,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int refuse(unsigned i, unsigned *bad, char *why, size_t len,
		  const char *fmt, ...)
{
	va_list ap;

	if (bad)
		*bad = i;
	if (why && len) {
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	return EINVAL;
}

int softhca_config_check(const struct softhca_config *cfg, unsigned *bad,
			 char *why, size_t len)
{
	const struct tm_param *d;
	uint64_t v;
	unsigned i;

	for (i = 0; i < SOFTHCA_NSETTINGS; i++) {
		d = &settings[i].d;
		v = softhca_param_get(cfg, i);
		if (v < d->min || v > d->max)
			return refuse(i, bad, why, len,
				      "soft HCA: %s (%s) = %" PRIu64 " is out "
				      "of range [%" PRIu64 ", %" PRIu64 "]",
				      d->name, d->env, v, d->min, d->max);
	}
	if (cfg->max_rndv_hdr_size > cfg->mtu)
		return refuse(SOFTHCA_S_MAX_RNDV_HDR_SIZE, bad, why, len,
			      "soft HCA: softhca_max_rndv_hdr_size "
			      "(SOFTHCA_MAX_RNDV_HDR_SIZE) = %u exceeds the "
			      "MTU, softhca_mtu = %u",
			      cfg->max_rndv_hdr_size, cfg->mtu);
	return 0;
}

static void allowed(const struct tm_param *d, char *buf, size_t len)
{
	size_t n = 0;
	int i;

	if (d->type != TM_PARAM_ENUM) {
		snprintf(buf, len, "%s", tm_param_kind(d));
		return;
	}
	buf[0] = '\0';
	for (i = 0; d->names[i] && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s",
				      i ? (d->names[i + 1] ? ", " : " or ") :
					  "", d->names[i]);
}

int softhca_config_from_env(struct softhca_config *cfg, unsigned *bad,
			    char *why, size_t len)
{
	const struct tm_param *d;
	char kind[80];
	const char *s;
	uint64_t v;
	unsigned i;

	for (i = 0; i < SOFTHCA_NSETTINGS; i++) {
		d = &settings[i].d;
		s = getenv(d->env);
		if (!s || !*s)
			continue;
		if (tm_param_parse(d, s, &v)) {
			allowed(d, kind, sizeof(kind));
			return refuse(i, bad, why, len,
				      "soft HCA: %s=\"%s\" is not %s", d->env,
				      s, kind);
		}
		softhca_param_set(cfg, i, v);
	}
	return softhca_config_check(cfg, bad, why, len);
}
