/*
 * tm_param.h - how a layer describes its settings to the caller that
 * publishes them (the MTL makes each one an MCA parameter), so that the
 * caller needs no list of its own: one descriptor per setting, in a table
 * the layer owns (engine/tm_engine_param.h, dev/tm_dev_param.h).
 *
 * Contract
 * --------
 * A setting's value travels as a uint64_t (ENUM: an index into names[];
 * BOOL: 0 or 1).  The layer gives the defaults and judges the values
 * (through its own functions, named in its table's header); a caller reads
 * only the descriptor to publish a setting and to name a refused one.
 *
 * Like tm_status.h this header is shared by every layer and belongs to
 * none: it includes no layer's header.
 */
#ifndef TM_PARAM_H
#define TM_PARAM_H

#include <stdint.h>

enum tm_param_type {
	TM_PARAM_UINT,       /* 32-bit unsigned */
	TM_PARAM_U64,
	TM_PARAM_SIZE,       /* size_t */
	TM_PARAM_BOOL,
	TM_PARAM_ENUM,       /* value: index into names[] */
};

struct tm_param {
	const char *name;          /* short, lower case: "eager_limit" */
	const char *help;          /* one paragraph for users */
	enum tm_param_type type;
	const char *env;           /* variable that replaces the default, or
				    * NULL for none */
	const char *const *names;  /* ENUM only: NULL-terminated */
	int expert;                /* 0: users choose it; 1: tuning/testing */
	/*
	 * The default and the bounds, where the layer owns the values
	 * outright (the engine).  All three 0 where they live below the layer
	 * (the device layer: its provider's defaults, and limits the soft HCA
	 * judges together): the table's header says which.
	 */
	uint64_t def, min, max;
};

/*
 * The value text s stands for, for setting p: 0, or -1 if s is none.
 * One rule for every layer: a BOOL is 1/yes/true or 0/no/false, an ENUM
 * one of its names, a number decimal or 0x hex, never negative (and below
 * 2^32 for a UINT).  Defined in tm_param.c, linked into the soft HCA.
 */
int tm_param_parse(const struct tm_param *p, const char *s, uint64_t *v);
/* What a value of p's type looks like, for an error message. */
const char *tm_param_kind(const struct tm_param *p);

#endif /* TM_PARAM_H */
