/*
 * eng_util.c - see eng_util.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "eng_util.h"

void eu_opts_default(struct eu_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->sched = SOFTHCA_SCHED_AUTO;
	o->arena_len = 1 << 20;
	tm_engine_config_default(&o->ecfg);
	/* these tests are about what the card does: every receive it can
	 * take goes to it (tests that want the threshold set it) */
	o->ecfg.offload_thresh = 0;
}

static int node_open(struct eu_node *nd, const struct eu_opts *o)
{
	struct tm_dev_config dc;

	tm_dev_config_default(&dc);
	dc.provider = "soft";
	dc.max_num_tags = o->max_num_tags;
	dc.max_ops = o->max_ops;
	dc.tm = o->no_tm ? TM_DEV_TM_OFF : TM_DEV_TM_ON;
	if (tm_dev_open(&dc, &nd->dev) != TM_OK)
		return -1;
	softhca_set_sched(nd->dev->ctx, o->sched, o->seed);
	if (o->cq_poll_max)
		nd->dev->cq_poll_max = o->cq_poll_max;
	if (tm_engine_create(nd->dev, &o->ecfg, &nd->eng) != TM_OK)
		return -1;
	nd->arena_len = o->arena_len;
	nd->arena = calloc(1, nd->arena_len);
	if (!nd->arena)
		return -1;
	return tm_dev_reg(nd->dev, nd->arena, nd->arena_len,
			  IBV_ACCESS_REMOTE_READ, &nd->mr) == TM_OK ? 0 : -1;
}

int eu_world_init(struct eu_world *w, int n, const struct eu_opts *o)
{
	struct softhca_config cfg;
	struct tm_dev_pair_addr a;
	int i, j;

	memset(w, 0, sizeof(*w));
	softhca_config_default(&cfg);
	if (o->max_num_tags)
		cfg.max_num_tags = o->max_num_tags;
	if (o->max_ops)
		cfg.max_ops = o->max_ops;
	if (o->mtu)
		cfg.mtu = o->mtu;
	if (o->max_msg_sz)
		cfg.max_msg_sz = o->max_msg_sz;
	if (o->max_mr)
		cfg.max_mr = o->max_mr;
	cfg.sched = o->sched;
	cfg.seed = o->seed;
	cfg.no_tm = o->no_tm;
	cfg.rxe_cq = o->rxe_cq;
	if (softhca_set_config(&cfg))
		return -1;
	w->n = n;
	for (i = 0; i < n; i++)
		if (node_open(&w->node[i], o))
			return -1;
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++)
			if (i != j && tm_dev_pair_create(w->node[i].dev,
							 &w->node[i].qp[j]))
				return -1;
	for (i = 0; i < n; i++)
		for (j = 0; j < n; j++) {
			if (i == j)
				continue;
			tm_dev_pair_addr(w->node[j].dev, &w->node[j].qp[i],
					 &a);
			if (tm_dev_pair_connect(w->node[i].dev,
						&w->node[i].qp[j], &a))
				return -1;
			if (tm_engine_add_peer(w->node[i].eng, &w->node[i].qp[j],
					       &w->node[i].peer[j]))
				return -1;
		}
	return 0;
}

void eu_world_fini(struct eu_world *w)
{
	int i, j;

	for (i = 0; i < w->n; i++) {
		struct eu_node *nd = &w->node[i];

		tm_engine_destroy(nd->eng);
		for (j = 0; j < w->n; j++)
			tm_dev_pair_destroy(nd->dev, &nd->qp[j]);
		if (nd->mr)
			tm_dev_dereg(nd->dev, nd->mr);
		free(nd->arena);
		tm_dev_close(nd->dev);
	}
	memset(w, 0, sizeof(*w));
}

void eu_progress(struct eu_world *w)
{
	int i;

	for (i = 0; i < w->n; i++)
		tm_engine_progress(w->node[i].eng);
}

void eu_pump(struct eu_world *w)
{
	int i, moved, idle = 0;

	/* stop when nothing moved for a while (quiet, or stuck: the caller
	 * checks eu_quiet) */
	while (idle < 50) {
		moved = 0;
		/* progress first: it posts the ADDs chained since the
		 * last call before the card looks at arrivals, as in an
		 * MPI process, where the card runs inside its verbs calls */
		for (i = 0; i < w->n; i++) {
			moved += tm_engine_progress(w->node[i].eng);
			moved += softhca_drain(w->node[i].dev->ctx);
		}
		idle = moved ? 0 : idle + 1;
		if (!moved && eu_quiet(w))
			break;
	}
}

int eu_quiet(struct eu_world *w)
{
	int i;

	/* idle, and every send slot back: a retired WR gave its slot back */
	for (i = 0; i < w->n; i++)
		if (!tm_engine_idle(w->node[i].eng) ||
		    eu_node_stats(w, i).send_slots_busy)
			return 0;
	return 1;
}

void eu_recv_cb(struct tm_recv *r)
{
	((struct eu_recv *)r)->done++;
}

void eu_send_cb(struct tm_send *s)
{
	((struct eu_send *)s)->done++;
}

static uint8_t pattern(size_t i, uint8_t seed)
{
	return (uint8_t)(seed + i * 7 + (i >> 16));
}

void eu_fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(i, seed);
}

int eu_check(const uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pattern(i, seed))
			return 0;
	return 1;
}

struct tm_engine_stats eu_stats(struct tm_engine *eng)
{
	struct tm_engine_stats st;

	tm_engine_get_stats(eng, &st);
	return st;
}

struct tm_engine_stats eu_node_stats(struct eu_world *w, int i)
{
	return eu_stats(w->node[i].eng);
}
