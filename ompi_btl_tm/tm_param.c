/*
 * tm_param.c - the one rule that turns a setting's text (an environment
 * variable) into its value (see tm_param.h).  Linked into the lowest layer
 * that reads settings, the soft HCA.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "tm_param.h"

static int parse_bool(const char *s, uint64_t *v)
{
	if (!strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "true"))
		*v = 1;
	else if (!strcmp(s, "0") || !strcmp(s, "no") || !strcmp(s, "false"))
		*v = 0;
	else
		return -1;
	return 0;
}

int tm_param_parse(const struct tm_param *p, const char *s, uint64_t *v)
{
	unsigned long long n;
	char *end;
	int i;

	if (p->type == TM_PARAM_BOOL)
		return parse_bool(s, v);
	if (p->type == TM_PARAM_ENUM) {
		for (i = 0; p->names[i]; i++)
			if (!strcmp(s, p->names[i])) {
				*v = (uint64_t)i;
				return 0;
			}
		return -1;
	}
	errno = 0;
	n = strtoull(s, &end, 0);
	/* strtoull takes "-1" as a huge number: a setting never is negative */
	if (errno || !*s || *end || strchr(s, '-'))
		return -1;
	if (p->type == TM_PARAM_UINT && n > UINT32_MAX)
		return -1;
	*v = n;
	return 0;
}

const char *tm_param_kind(const struct tm_param *p)
{
	switch (p->type) {
	case TM_PARAM_BOOL:
		return "a boolean (1, yes, true or 0, no, false)";
	case TM_PARAM_ENUM:
		return "one of the names listed";
	case TM_PARAM_UINT:
		return "a number below 2^32";
	default:
		return "a non-negative number";
	}
}
