/*
 * test_cbfree.c - every callback frees its request (tm_engine.h,
 * "Completion": once the callback runs the engine is done with it, and
 * the request may be freed).  Each request here is malloc'd; its callback
 * records the outcome, poisons the memory and frees it.  An engine that
 * touches a request after its callback (e.g. a callback fired while a DEL
 * naming the receive is still outstanding) is a use-after-free: ASan (the
 * --sanitizers build) stops the test there; without ASan the poison makes
 * it misbehave, which the checks may or may not see.
 *
 * Covered, with the card stepped by hand (MANUAL) where the order matters:
 * receives completing by card match (eager, rendezvous, truncated),
 * by claim (the message beat the ADD), by cancel (confirmed, and late: the
 * card matched before the DEL), by software rendezvous (whole and
 * truncated); sends eager, synchronous and rendezvous.
 */
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "eng_util.h"

struct out {
	int done;
	int status;
	int on_card;
	uint64_t msg_len;
};

static struct out outs[64];
static int nouts;

/* The request's first member is the engine's; arg names its record. */
static void recv_free_cb(struct tm_recv *r)
{
	struct out *o = r->arg;

	o->done++;
	o->status = r->status;
	o->on_card = r->on_card;
	o->msg_len = r->msg_len;
	memset(r, 0xdd, sizeof(*r));
	free(r);
}

static void send_free_cb(struct tm_send *s)
{
	struct out *o = s->arg;

	o->done++;
	o->status = s->status;
	memset(s, 0xdd, sizeof(*s));
	free(s);
}

static struct eu_world W;

static struct out *new_out(void)
{
	if (nouts == 64)
		tap_bail("too many requests");
	return &outs[nouts++];
}

static struct out *frecv(int32_t tag, size_t off, size_t len)
{
	struct tm_recv *r = calloc(1, sizeof(*r));
	struct out *o = new_out();

	if (!r)
		tap_bail("out of memory");
	r->cb = recv_free_cb;
	r->arg = o;
	if (tm_engine_irecv(W.node[0].eng, r, 0, 1, tag, W.node[0].arena + off,
			    len, W.node[0].mr) != TM_OK)
		tap_bail("irecv");
	return o;
}

/* tm_engine_cancel_recv needs the request: keep it for the cancels. */
static struct tm_recv *recv_keep(int32_t tag, size_t off, size_t len,
				 struct out **o)
{
	struct tm_recv *r = calloc(1, sizeof(*r));

	if (!r)
		tap_bail("out of memory");
	*o = new_out();
	r->cb = recv_free_cb;
	r->arg = *o;
	if (tm_engine_irecv(W.node[0].eng, r, 0, 1, tag, W.node[0].arena + off,
			    len, W.node[0].mr) != TM_OK)
		tap_bail("irecv");
	return r;
}

static struct out *fsend(int32_t tag, size_t len, unsigned flags)
{
	struct tm_send *s = calloc(1, sizeof(*s));
	struct out *o = new_out();

	if (!s)
		tap_bail("out of memory");
	s->cb = send_free_cb;
	s->arg = o;
	memset(W.node[1].arena, tag & 0xff, len);
	if (tm_engine_isend(W.node[1].eng, s, W.node[1].peer[0], 0, 1, tag,
			    W.node[1].arena, len, W.node[1].mr, flags) != TM_OK)
		tap_bail("isend");
	return o;
}

static struct ibv_context *card(int n)
{
	return W.node[n].dev->ctx;
}

/* Everything the sender has goes onto the wire; nothing is received. */
static void wire(void)
{
	while (softhca_step(card(1), SOFTHCA_WORK_TX, SOFTHCA_ANY_QP))
		;
}

static int ok(const struct out *o, int status)
{
	return o->done == 1 && o->status == status;
}

static void test_card_paths(void)
{
	struct out *r1, *r2, *r3, *s1, *s2, *s3;

	r1 = frecv(1, 0, 4096);
	r2 = frecv(2, 1 << 16, 32768);
	r3 = frecv(3, 2 << 16, 200);
	eu_pump(&W);
	s1 = fsend(1, 100, 0);
	s2 = fsend(2, 20000, 0);
	s3 = fsend(3, 1000, TM_SEND_SYNC);
	eu_pump(&W);
	tap_check(ok(r1, TM_REQ_OK) && r1->on_card && ok(r2, TM_REQ_OK) &&
		  r2->on_card && r2->msg_len == 20000,
		  "card match, eager and rendezvous: freed in the callback");
	tap_check(ok(r3, TM_REQ_TRUNCATED) && r3->on_card,
		  "card match truncated: freed in the callback");
	tap_check(ok(s1, TM_REQ_OK) && ok(s2, TM_REQ_OK) && ok(s3, TM_REQ_OK),
		  "sends eager, rendezvous, synchronous: freed in the callback");
}

/* The message reaches the card before the ADD: software claims it. */
static void test_claim(void)
{
	struct out *r, *s;

	r = frecv(4, 0, 4096);   /* ADD posted, not processed */
	s = fsend(4, 300, 0);
	wire();
	softhca_step(card(0), SOFTHCA_WORK_RX, SOFTHCA_ANY_QP);
	tm_engine_progress(W.node[0].eng); /* claim: DEL decided */
	eu_pump(&W);
	tap_check(ok(r, TM_REQ_OK) && !r->on_card && ok(s, TM_REQ_OK),
		  "claimed receive: completes after its DEL, freed in the callback");
}

static void test_cancel(void)
{
	struct tm_recv *rq;
	struct out *r, *s;

	rq = recv_keep(5, 0, 4096, &r);
	eu_pump(&W);
	tm_engine_cancel_recv(W.node[0].eng, rq);
	eu_pump(&W);
	tap_check(ok(r, TM_REQ_CANCELLED), "cancelled on the card: freed in the callback");

	/* late: the card matches before it processes the DEL, and the
	 * engine sees the match in one poll and the DEL's failure in the
	 * next; the callback must wait for the DEL */
	rq = recv_keep(6, 0, 4096, &r);
	eu_pump(&W);
	s = fsend(6, 100, 0);
	wire();
	tm_engine_cancel_recv(W.node[0].eng, rq); /* DEL posted */
	softhca_step(card(0), SOFTHCA_WORK_RX, SOFTHCA_ANY_QP);
	tm_engine_progress(W.node[0].eng);
	softhca_step(card(0), SOFTHCA_WORK_OP, SOFTHCA_ANY_QP);
	eu_pump(&W);
	tap_check(ok(r, TM_REQ_OK) && r->on_card && ok(s, TM_REQ_OK),
		  "cancel too late (matched first): completes OK once the DEL failed, freed in the callback");
}

static void test_sw_rndv(void)
{
	struct out *r1, *r2, *s1, *s2;

	s1 = fsend(7, 20000, 0);
	s2 = fsend(8, 20000, TM_SEND_SYNC);
	eu_pump(&W);               /* both unexpected */
	r1 = frecv(7, 0, 32768);
	r2 = frecv(8, 1 << 16, 5000);
	eu_pump(&W);
	tap_check(ok(r1, TM_REQ_OK) && r1->msg_len == 20000 && !r1->on_card,
		  "software rendezvous: freed in the callback");
	tap_check(ok(r2, TM_REQ_TRUNCATED) && r2->msg_len == 20000,
		  "software rendezvous truncated: freed in the callback");
	tap_check(ok(s1, TM_REQ_OK) && ok(s2, TM_REQ_OK),
		  "their sends (FIN from software): freed in the callback");
}

int main(void)
{
	struct eu_opts o;
	struct tm_engine_stats st;

	eu_opts_default(&o);
	o.sched = SOFTHCA_SCHED_MANUAL;
	o.ecfg.eager_limit = 1024;
	if (eu_world_init(&W, 2, &o))
		tap_bail("cannot open the soft HCA world");
	test_card_paths();
	test_claim();
	test_cancel();
	test_sw_rndv();
	tm_engine_get_stats(W.node[0].eng, &st);
	tap_check(st.unexp_claimed >= 1 && st.cancel_late >= 1 &&
		  st.cancel_ok >= 1 && st.rndv_sw >= 2 && st.rndv_card >= 1,
		  "the paths were taken (claimed %lu, late cancel %lu, cancel %lu, sw rndv %lu, card rndv %lu)",
		  (unsigned long)st.unexp_claimed,
		  (unsigned long)st.cancel_late, (unsigned long)st.cancel_ok,
		  (unsigned long)st.rndv_sw, (unsigned long)st.rndv_card);
	tap_check(eu_quiet(&W) && st.posted == 0 && st.uq_len == 0,
		  "idle, nothing left posted or queued");
	eu_world_fini(&W);
	return tap_done();
}
