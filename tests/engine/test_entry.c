/*
 * test_entry.c - the engine's narrow entry points (tm_engine.h): a request
 * carries its inputs, the envelope packed by the caller, so an entry
 * point refuses what the packing cannot make, and a send done at post
 * says so (TM_DONE) instead of calling back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tap.h"
#include "eng_util.h"

static struct eu_world W;

static void open_world(void)
{
	struct eu_opts o;

	eu_opts_default(&o);
	o.ecfg.eager_limit = 1024;
	if (eu_world_init(&W, 2, &o))
		tap_bail("cannot open the soft HCA world");
}

/* A receive of node 1 with (tag, mask) as given, from no named peer. */
static int post_raw(struct eu_recv *t, uint64_t tag, uint64_t mask)
{
	memset(t, 0, sizeof(*t));
	t->r.cb = eu_recv_cb;
	t->r.buf = W.node[1].arena;
	t->r.len = 64;
	t->r.mr = W.node[1].mr;
	t->r.tag = tag;
	t->r.mask = mask;
	t->r.from = TM_PEER_ANY;
	return tm_engine_post_recv(W.node[1].eng, &t->r);
}

static struct tm_probe_info probe_in(uint64_t tag, uint64_t mask)
{
	struct tm_probe_info pi;

	memset(&pi, 0, sizeof(pi));
	pi.tag = tag;
	pi.mask = mask;
	pi.from = TM_PEER_ANY;
	return pi;
}

/* Each (tag, mask) tm_tag_recv cannot make is refused, and nothing of it
 * stays posted; each it makes is taken. */
static void test_bad_envelope(void)
{
	static const struct {
		uint64_t tag, mask;
		const char *what;
	} bad[] = {
		{ 0, TM_MASK_SRC | TM_MASK_TAG, "no context bits in the mask" },
		{ 0, TM_MASK_CTX | (1ull << 40) | TM_MASK_TAG,
		  "part of the source bits" },
		{ 0, TM_MASK_CTX | TM_MASK_SRC | 0xffff, "part of the tag bits" },
		{ 0, TM_MASK_CTX | TM_MASK_SRC, "no tag bits, not even the sign" },
		{ 5, TM_MASK_CTX | TM_MASK_SRC | TM_MASK_TAG_SIGN,
		  "tag bits outside the mask" },
		{ TM_MASK_TAG_SIGN, TM_MASK_CTX | TM_MASK_TAG_SIGN,
		  "any tag with the sign bit set" },
	};
	uint64_t tag, mask, posted0 = eu_node_stats(&W, 1).recv_posted;
	struct tm_probe_info pi;
	struct eu_recv t;
	unsigned i;
	int ok = 1, rc;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rc = post_raw(&t, bad[i].tag, bad[i].mask);
		if (rc != TM_ERR_RANGE) {
			tap_diag("%s: %d", bad[i].what, rc);
			ok = 0;
		}
		pi = probe_in(bad[i].tag, bad[i].mask);
		rc = tm_engine_probe(W.node[1].eng, &pi, NULL);
		if (rc != TM_ERR_RANGE) {
			tap_diag("probe, %s: %d", bad[i].what, rc);
			ok = 0;
		}
	}
	if (!tap_check(ok && eu_node_stats(&W, 1).recv_posted == posted0,
		       "a (tag, mask) tm_tag_recv cannot make: TM_ERR_RANGE, nothing posted"))
		tap_bail("malformed receives were posted: what follows would hang on them");
	tm_tag_recv(3, TM_ANY_SRC, TM_ANY_TAG, &tag, &mask);
	rc = post_raw(&t, tag, mask);
	tap_check(rc == TM_OK &&
		  eu_node_stats(&W, 1).recv_posted == posted0 + 1,
		  "a packed any-source any-tag receive is taken");
	tm_engine_cancel_recv(W.node[1].eng, &t.r);
	eu_pump(&W);
	tap_check(t.done == 1 && t.r.status == TM_REQ_CANCELLED,
		  "... and cancelled");
	t.r.from = W.node[1].peer[0];
	rc = tm_engine_post_recv(W.node[1].eng, &t.r);
	tap_check(rc == TM_ERR_RANGE,
		  "a named peer for an any-source receive: TM_ERR_RANGE");
}

/* Node 0 sends len bytes to node 1 with flags; rc of the post. */
static int send_raw(struct eu_send *t, size_t len, unsigned flags)
{
	memset(t, 0, sizeof(*t));
	t->s.cb = eu_send_cb;
	t->s.buf = W.node[0].arena;
	t->s.len = len;
	t->s.mr = W.node[0].mr;
	t->s.tag = tm_tag_make(2, 0, 9);
	t->s.peer = W.node[0].peer[1];
	t->s.flags = flags;
	return tm_engine_post_send(W.node[0].eng, &t->s);
}

static void recv_on_1(struct eu_recv *t)
{
	uint64_t tag, mask;

	tm_tag_recv(2, 0, 9, &tag, &mask);
	if (post_raw(t, tag, mask) != TM_OK)
		tap_bail("cannot post a receive");
}

/* An eager standard send with nothing else pending is done at post: no
 * callback, ever; the others complete through their callback. */
static void test_done_at_post(void)
{
	struct eu_send s;
	struct eu_recv r;
	int rc;

	eu_pump(&W);
	recv_on_1(&r);
	eu_fill(W.node[0].arena, 8, 0x41);
	rc = send_raw(&s, 8, 0);
	tap_check(rc == TM_DONE && s.s.status == TM_REQ_OK && s.done == 0,
		  "eager standard send: TM_DONE, status OK, no callback in the call (rc %d, cb %d)",
		  rc, s.done);
	eu_pump(&W);
	tap_check(s.done == 0 && r.done == 1 && r.r.recv_len == 8 &&
		  eu_check(W.node[1].arena, 8, 0x41),
		  "... nor later; the message arrives whole");

	recv_on_1(&r);
	rc = send_raw(&s, 8, TM_SEND_SYNC);
	tap_check(rc == TM_OK && s.done == 0,
		  "synchronous send: TM_OK, pending (rc %d)", rc);
	eu_pump(&W);
	tap_check(s.done == 1 && s.s.status == TM_REQ_OK && r.done == 1,
		  "... its callback runs once its ACK came");

	recv_on_1(&r);
	rc = send_raw(&s, 4096, 0);
	tap_check(rc == TM_OK && s.done == 0,
		  "rendezvous send: TM_OK, pending (rc %d)", rc);
	eu_pump(&W);
	tap_check(s.done == 1 && s.s.status == TM_REQ_OK && r.done == 1 &&
		  r.r.status == TM_REQ_TRUNCATED,
		  "... its callback runs once its FIN came (the 64-byte receive truncated)");

	/* the wrapper keeps the callback of the older form */
	recv_on_1(&r);
	memset(&s, 0, sizeof(s));
	s.s.cb = eu_send_cb;
	rc = tm_engine_isend(W.node[0].eng, &s.s, W.node[0].peer[1], 2, 0, 9,
			     W.node[0].arena, 8, W.node[0].mr, 0);
	tap_check(rc == TM_OK && s.done == 1,
		  "tm_engine_isend: TM_OK and the callback in the call, as before");
	eu_pump(&W);
	tap_check(s.done == 1 && r.done == 1, "... once");
	s.s.peer = 77;
	rc = tm_engine_post_send(W.node[0].eng, &s.s);
	tap_check(rc == TM_ERR_RANGE, "a send to no such peer: TM_ERR_RANGE");
	rc = tm_engine_isend(W.node[0].eng, &s.s, W.node[0].peer[1],
			     TM_MAX_CTX + 1, 0, 9, W.node[0].arena, 8,
			     W.node[0].mr, 0);
	tap_check(rc == TM_ERR_RANGE,
		  "tm_engine_isend: a context id past the tag layout: TM_ERR_RANGE");
}

static struct ibv_mr *mr_at_cb;

static void own_cb(struct tm_recv *r)
{
	mr_at_cb = r->mr;
	eu_recv_cb(r);
}

/* A receive given no registration: the engine keeps its own in mr while
 * the receive is posted, and the input is given back (NULL) before the
 * callback; buf and len are never written.  Case 0: posted first, the
 * card reads the rendezvous into it; case 1: posted after the request
 * came, software reads it. */
static void test_own_registration(void)
{
	static const char *what[] = {
		"a card-held receive (the card reads the rendezvous)",
		"a receive posted after its request (a software rendezvous read)",
	};
	struct tm_engine_stats st0, st1;
	struct eu_send s;
	struct eu_recv r;
	uint64_t tag, mask;
	int ok;

	for (int i = 0; i < 2; i++) {
		eu_pump(&W);
		st0 = eu_node_stats(&W, 1);
		tm_tag_recv(2, 0, 9, &tag, &mask);
		memset(&r, 0, sizeof(r));
		r.r.cb = own_cb;
		r.r.buf = W.node[1].arena;
		r.r.len = 16384;
		r.r.mr = NULL;
		r.r.tag = tag;
		r.r.mask = mask;
		r.r.from = TM_PEER_ANY;
		mr_at_cb = (struct ibv_mr *)&r; /* anything but NULL */
		eu_fill(W.node[0].arena, 4096, 0x52 + i);
		if (i) {
			send_raw(&s, 4096, 0);
			eu_pump(&W);
		}
		if (tm_engine_post_recv(W.node[1].eng, &r.r) != TM_OK)
			tap_bail("cannot post a receive");
		if (!i)
			send_raw(&s, 4096, 0);
		eu_pump(&W);
		st1 = eu_node_stats(&W, 1);
		ok = i ? st1.rndv_sw > st0.rndv_sw :
			 st1.rndv_card > st0.rndv_card;
		tap_check(ok && r.done == 1 && r.r.status == TM_REQ_OK &&
				  r.r.recv_len == 4096 &&
				  eu_check(W.node[1].arena, 4096, 0x52 + i) &&
				  !mr_at_cb && !r.r.mr &&
				  r.r.buf == W.node[1].arena && r.r.len == 16384,
			  "%s with no registration: data in place, mr NULL again in its callback, buf and len as given",
			  what[i]);
	}
}

int main(void)
{
	open_world();
	test_bad_envelope();
	test_done_at_post();
	test_own_registration();
	tap_check(eu_quiet(&W), "nothing left in flight");
	eu_world_fini(&W);
	return tap_done();
}
