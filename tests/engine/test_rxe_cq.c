/*
 * test_rxe_cq.c - the engine on a CQ that breaks when ibv_next_poll()
 * finds it empty: rdma-core's soft-RoCE provider before 55, whose
 * next_poll and end_poll both advance the consumer index, so the next
 * poll returns a slot never written (wr_id 0).  The soft HCA models it
 * (softhca.h, rxe_cq) in the plain mode, as rxe has no tag matching.
 *
 * Checked: the dev layer knows the device by its vendor_id, or by its
 * name where a kernel leaves vendor_id 0 (rxe_cq 2), and polls one
 * completion at a time (cq_poll_max 1), so small messages both ways,
 * expected and unexpected, arrive intact with no error counted; and with
 * the dev layer made to misjudge it (cq_poll_max unlimited), the zeroed
 * completions that then come are counted as errors and dropped, never
 * dereferenced, and the same traffic still arrives intact.  And the RC
 * retry count its QPs get: 6 on rxe, which reads 7 as "retry without
 * end" (a dead peer would never fail anything), 7 elsewhere.
 */
#include <stdint.h>
#include <string.h>
#include "tap.h"
#include "eng_util.h"

#define ROUNDS 20u
#define LEN 4u  /* the size whose first message crashed over rxe */

static struct tm_engine_stats stats(struct eu_world *w, int node)
{
	struct tm_engine_stats st;

	tm_engine_get_stats(w->node[node].eng, &st);
	return st;
}

/* one message from -> to, pre-posted or not; 1 when it arrived intact */
static int one(struct eu_world *w, int from, int to, uint32_t i, int early)
{
	struct eu_node *s = &w->node[from], *d = &w->node[to];
	struct eu_recv r;
	struct eu_send t;
	uint32_t v = 0x5a000000u + i;

	memset(&r, 0, sizeof(r));
	memset(&t, 0, sizeof(t));
	memcpy(s->arena, &v, LEN);
	memset(d->arena + 64, 0, LEN);
	r.r.cb = eu_recv_cb;
	t.s.cb = eu_send_cb;
	if (early)
		tm_engine_irecv(d->eng, &r.r, 1, from, (int)i, d->arena + 64,
				LEN, d->mr);
	if (tm_engine_isend(s->eng, &t.s, s->peer[to], 1, from, (int)i,
			    s->arena, LEN, s->mr, 0) != TM_OK)
		return 0;
	eu_pump(w);
	if (!early)
		tm_engine_irecv(d->eng, &r.r, 1, from, (int)i, d->arena + 64,
				LEN, d->mr);
	eu_pump(w);
	return r.done == 1 && r.r.status == TM_REQ_OK &&
	       r.r.recv_len == LEN && t.done == 1 &&
	       t.s.status == TM_REQ_OK && !memcmp(d->arena + 64, &v, LEN);
}

static uint32_t traffic(struct eu_world *w)
{
	uint32_t i, ok = 0;

	for (i = 0; i < ROUNDS; i++)
		ok += (uint32_t)one(w, (int)(i & 1), (int)(~i & 1), i,
				    (int)(i & 2));
	return ok;
}

/* rxe_cq: the soft HCA's model (1: vendor_id 0xFFFFFF, 2: vendor_id 0
 * and the name "rxe0"); cq_poll_max 0: the dev layer's own judgement */
/* the retry_cnt node 0's QP to node 1 was brought to RTS with */
static int retry_cnt(struct eu_world *w)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;
	struct tm_dev *dev = w->node[0].dev;

	if (dev->verbs->query_qp(w->node[0].qp[1].tx, &a, IBV_QP_RETRY_CNT,
				 &init))
		return -1;
	return a.retry_cnt;
}

static void run_retry(int rxe_cq)
{
	struct eu_world w;
	struct eu_opts o;
	int got, want = rxe_cq ? 6 : 7;

	eu_opts_default(&o);
	o.no_tm = 1;
	o.rxe_cq = rxe_cq;
	o.arena_len = 4096;
	if (eu_world_init(&w, 2, &o))
		tap_bail("cannot open two soft HCA nodes");
	got = retry_cnt(&w);
	tap_check(got == want, "%s: RC retry_cnt %d (want %d)",
		  rxe_cq ? "rxe" : "not rxe", got, want);
	eu_world_fini(&w);
}

static void run(int rxe_cq, uint32_t cq_poll_max)
{
	struct eu_world w;
	struct eu_opts o;
	uint64_t errors;
	uint32_t ok;

	eu_opts_default(&o);
	o.no_tm = 1;
	o.rxe_cq = rxe_cq;
	o.arena_len = 4096;
	o.cq_poll_max = cq_poll_max;
	if (eu_world_init(&w, 2, &o))
		tap_bail("cannot open two soft HCA nodes as old rxe");
	ok = traffic(&w);
	errors = stats(&w, 0).errors + stats(&w, 1).errors;
	if (!cq_poll_max) {
		tap_check(w.node[0].dev->cq_poll_max == 1 &&
			  w.node[1].dev->cq_poll_max == 1,
			  "rxe known by its %s: one completion per poll (cq_poll_max %u)",
			  rxe_cq == 1 ? "vendor_id" : "name (vendor_id 0)",
			  w.node[0].dev->cq_poll_max);
		tap_check(ok == ROUNDS && errors == 0,
			  "%u B messages both ways: %u of %u intact, %llu errors",
			  LEN, ok, ROUNDS, (unsigned long long)errors);
	} else {
		tap_check(ok == ROUNDS && errors > 0,
			  "misjudged device: %llu zeroed completions counted as errors and dropped, %u of %u messages intact",
			  (unsigned long long)errors, ok, ROUNDS);
	}
	eu_world_fini(&w);
}

int main(void)
{
	run(1, 0);
	run(2, 0);
	run(1, UINT32_MAX);
	run_retry(1);
	run_retry(2);
	run_retry(0);
	return tap_done();
}
