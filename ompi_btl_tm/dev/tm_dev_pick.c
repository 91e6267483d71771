/*
 * tm_dev_pick.c - which device tm_dev_open() opens and in which mode, and
 * what a node offers (tm_dev_survey): tm_dev.h, "Provider and mode".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dev/tm_dev.h"
#include "dev/tm_dev_priv.h"
#include "dev/tm_near.h"
#include "softhca/softhca.h"
#include "verbs/tm_verbs.h"

/* Does the device tag-match RC messages (and offer a list to do it)? */
static int attr_has_tm(const struct ibv_device_attr_ex *a)
{
	return (a->tm_caps.flags & IBV_TM_CAP_RC) && a->tm_caps.max_num_tags &&
	       a->tm_caps.max_ops;
}

/* Is one of the device's ports active?  A card without a cable (every
 * port down) carries nothing, with or without tag matching. */
static int ctx_port_active(struct ibv_context *ctx,
			   const struct ibv_device_attr_ex *a)
{
	struct ibv_port_attr pattr;
	int p;

	for (p = 1; p <= a->orig_attr.phys_port_cnt && p <= 255; p++) {
		memset(&pattr, 0, sizeof(pattr));
		if (!ibv_query_port(ctx, (uint8_t)p, &pattr) &&
		    pattr.state == IBV_PORT_ACTIVE)
			return 1;
	}
	return 0;
}

/* Can the device carry the plain mode: reliable connections (InfiniBand
 * or RoCE transport: not EFA, usNIC, iWARP) and an SRQ. */
static int dev_has_rc(struct ibv_device *d, const struct ibv_device_attr_ex *a)
{
	return d->transport_type == IBV_TRANSPORT_IB && a->orig_attr.max_srq > 0;
}

/* What device d offers: TM_DEV_HAS_TM and/or TM_DEV_HAS_RC, 0 if it
 * cannot be opened or has no active port. */
static int dev_offers(const struct tm_verbs *v, struct ibv_device *d)
{
	struct ibv_device_attr_ex attr;
	struct ibv_context *ctx = v->open_device(d);
	int has = 0;

	if (!ctx)
		return 0;
	memset(&attr, 0, sizeof(attr));
	if (!ibv_query_device_ex(ctx, NULL, &attr) &&
	    ctx_port_active(ctx, &attr)) {
		if (attr_has_tm(&attr))
			has |= TM_DEV_HAS_TM;
		if (dev_has_rc(d, &attr))
			has |= TM_DEV_HAS_RC;
	}
	v->close_device(ctx);
	return has;
}

/*
 * Opens the device of table v that offers what `need` says
 * (TM_DEV_HAS_TM or TM_DEV_HAS_RC); with several, the one nearest to this
 * process (tm_near.h: only libibverbs devices have a place in the
 * machine's topology).  attr: the device's, queried again on the context
 * returned.
 */
static struct ibv_context *tm_dev_pick(const struct tm_verbs *v, int need,
				       struct ibv_device_attr_ex *attr,
				       const char **devname)
{
	struct ibv_device **list, **cand;
	struct ibv_context *ctx = NULL;
	int i, n = 0, nc = 0, pick;

	list = v->get_device_list(&n);
	if (!list)
		return NULL;
	cand = calloc((size_t)n + 1, sizeof(*cand));
	for (i = 0; i < n && cand; i++)
		if ((dev_offers(v, list[i]) & need) == need)
			cand[nc++] = list[i];
	if (nc) {
		pick = v == &tm_verbs_ibv ? tm_near_device(nc, cand) : 0;
		ctx = v->open_device(cand[pick]);
		memset(attr, 0, sizeof(*attr));
		if (ctx && ibv_query_device_ex(ctx, NULL, attr)) {
			v->close_device(ctx);
			ctx = NULL;
		}
		if (ctx)
			*devname = v->get_device_name(cand[pick]);
	}
	free(cand);
	v->free_device_list(list);
	return ctx;
}

/*
 * Table v's device for cfg->tm ("Provider and mode"); dev->tm says which
 * mode it got.  A plain device is tried only where tag matching is not
 * required, and for "auto" only on the soft HCA.
 */
static struct ibv_context *open_in(struct tm_dev *dev, const struct tm_verbs *v,
				   int tm, int plain_ok,
				   struct ibv_device_attr_ex *attr,
				   const char **devname)
{
	struct ibv_context *ctx = NULL;

	dev->verbs = v;
	dev->tm = 0;
	if (tm != TM_DEV_TM_OFF)
		ctx = tm_dev_pick(v, TM_DEV_HAS_TM, attr, devname);
	if (ctx) {
		dev->tm = 1;
		return ctx;
	}
	if (tm == TM_DEV_TM_ON || !plain_ok)
		return NULL;
	return tm_dev_pick(v, TM_DEV_HAS_RC, attr, devname);
}

struct ibv_context *tm_dev_pick_open(struct tm_dev *dev,
				     const struct tm_dev_config *cfg,
				     const char *prov,
				     struct ibv_device_attr_ex *attr,
				     const char **devname)
{
	struct ibv_context *ctx = NULL;
	int any = strcmp(prov, "auto") != 0;

	if (cfg->verbs)
		return open_in(dev, cfg->verbs, cfg->tm, 1, attr, devname);
	if (strcmp(prov, "soft"))
		ctx = open_in(dev, &tm_verbs_ibv, cfg->tm, any, attr, devname);
	if (!ctx && strcmp(prov, "verbs"))
		ctx = open_in(dev, softhca_verbs(), cfg->tm, 1, attr, devname);
	return ctx;
}

/* The best of table v: a TM device's name if there is one, else a plain
 * RC device's; returns the TM_DEV_HAS_* of that device. */
static int survey_table(const struct tm_verbs *v, char *name, size_t len)
{
	struct ibv_device **list;
	int i, n = 0, has, best = 0;

	list = v->get_device_list(&n);
	if (!list)
		return 0;
	for (i = 0; i < n; i++) {
		has = dev_offers(v, list[i]);
		if (has > best) {
			best = has;
			snprintf(name, len, "%s", v->get_device_name(list[i]));
		}
	}
	v->free_device_list(list);
	return best;
}

void tm_dev_survey_with(struct tm_dev_survey *s, const struct tm_verbs *card)
{
	memset(s, 0, sizeof(*s));
	s->verbs = survey_table(card, s->verbs_name, sizeof(s->verbs_name));
	s->soft = survey_table(softhca_verbs(), s->soft_name,
			       sizeof(s->soft_name));
}

void tm_dev_survey(struct tm_dev_survey *s)
{
	tm_dev_survey_with(s, &tm_verbs_ibv);
}

int tm_dev_card_present(char *name, size_t len)
{
	struct tm_dev_survey s;

	tm_dev_survey(&s);
	if (!(s.verbs & TM_DEV_HAS_TM))
		return 0;
	snprintf(name, len, "%s", s.verbs_name);
	return 1;
}
