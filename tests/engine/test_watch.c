/*
 * test_watch.c - the keepalive's watch on a peer that a posted receive
 * names (tm_engine_irecv_from, every MPI receive with a source): a
 * receive that keeps waiting makes the engine probe its peer; one that
 * completed, on the card's fast path as on the slow one, does not.  (A
 * dead peer failing only the receives naming it: test_peer_fail.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tap.h"
#include "eng_util.h"

static struct eu_world W;

/*
 * A receive naming its peer (tm_engine_irecv_from) that the card matches
 * stops watching that peer, on the fast path as on the slow one: no
 * keepalive goes out for it afterwards.
 */
static void test_named_peer_done(void)
{
	struct timespec nap = { 0, 2 * 1000 * 1000 };
	struct eu_opts o;
	struct eu_recv r;
	struct eu_send s;
	uint64_t ka0;
	int i, k;

	eu_opts_default(&o);
	o.ecfg.eager_limit = 1024;
	o.ecfg.keepalive_ms = 5;
	if (eu_world_init(&W, 2, &o))
		tap_bail("cannot open the soft HCA world");
	memset(&r, 0, sizeof(r));
	r.r.cb = eu_recv_cb;
	tap_check(tm_engine_irecv_from(W.node[0].eng, &r.r, 1, 1, 3, W.node[0].peer[1],
				       W.node[0].arena, 1024, W.node[0].mr) == TM_OK &&
		  eu_node_stats(&W, 0).card_entries == 1,
		  "named peer: the receive is card-held");
	memset(&s, 0, sizeof(s));
	s.s.cb = eu_send_cb;
	eu_fill(W.node[1].arena + 4096, 8, 9);
	tm_engine_isend(W.node[1].eng, &s.s, W.node[1].peer[0], 1, 1, 3,
			W.node[1].arena + 4096, 8, W.node[1].mr, 0);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_OK && r.r.on_card &&
		  eu_check(W.node[0].arena, 8, 9),
		  "named peer: matched on the card and delivered");
	ka0 = eu_node_stats(&W, 0).keepalives_sent;
	/* the keepalive looks every 64th progress call, at most every
	 * keepalive_ms / 4, and probes a receive it has seen waiting for
	 * keepalive_ms: 40 ms of 200 calls every 2 ms would see a leftover */
	for (i = 0; i < 20; i++) {
		nanosleep(&nap, NULL);
		eu_pump(&W);
		for (k = 0; k < 200; k++)
			tm_engine_progress(W.node[0].eng);
	}
	tap_check(eu_node_stats(&W, 0).keepalives_sent == ka0 && r.done == 1,
		  "named peer: no keepalive for it once it completed (%lu)",
		  (unsigned long)(eu_node_stats(&W, 0).keepalives_sent - ka0));
	/* one that keeps waiting (small: held in software) probes it */
	memset(&r, 0, sizeof(r));
	r.r.cb = eu_recv_cb;
	tm_engine_irecv_from(W.node[0].eng, &r.r, 1, 1, 4, W.node[0].peer[1], W.node[0].arena,
			     64, W.node[0].mr);
	for (i = 0; i < 20; i++) {
		nanosleep(&nap, NULL);
		eu_pump(&W);
		for (k = 0; k < 200; k++)
			tm_engine_progress(W.node[0].eng);
	}
	tap_check(eu_node_stats(&W, 0).keepalives_sent > ka0 && !r.done,
		  "named peer: a receive that waits makes it probed (%lu)",
		  (unsigned long)(eu_node_stats(&W, 0).keepalives_sent - ka0));
	tm_engine_cancel_recv(W.node[0].eng, &r.r);
	eu_pump(&W);
	tap_check(r.done == 1 && r.r.status == TM_REQ_CANCELLED,
		  "named peer: ... and cancels");
	eu_world_fini(&W);
}

int main(void)
{
	test_named_peer_done();
	return tap_done();
}
