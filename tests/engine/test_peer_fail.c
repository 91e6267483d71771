/*
 * test_peer_fail.c - a dead peer becomes an error in bounded time, never a
 * silent hang (tm_engine.h, "Dead peers").
 *
 * Each node is a process of its own (the soft HCA tells a dead peer by its
 * pid), forked before any device is opened; the parent connects to each
 * child over a socketpair (QP addresses, then one-byte commands).  A child
 * that is to die SIGKILLs itself, so nothing of it says goodbye: the
 * parent learns only from its own QP.  Every process runs under alarm():
 * a hang fails the test instead of stalling it.
 *
 * Checked: a rendezvous send and a synchronous eager send whose request
 * reached the receiver fail (TM_REQ_ERROR) once the receiver dies, through
 * the keepalive; sends to a receiver that died before anything arrived fail
 * (also a burst that overflows the send queue; an eager standard send
 * posted before the engine processed the death completes as buffered, OK
 * or not, and only a send queue of them can be);
 * later sends fail at once;
 * an unexpected rendezvous from a dead sender fails its receive while an
 * eager message from it is still delivered; another peer keeps working in
 * both directions; tm_engine_idle() is 0 while a send waits for its reply
 * and 1 once everything failed; every request completes exactly once; a
 * live receiver that is slow gets keepalives and ignores them.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tap.h"
#include "eng_util.h"
#include "fork_util.h"

#define KA_MS FU_KA_MS    /* keepalive threshold in these tests */
#define BIG (1u << 20)    /* a rendezvous send */
#define MAXP FU_MAXP


/* ---- set-up: one device and engine per process ----------------------- */

static void say(int fd, uint8_t b)
{
	if (write(fd, &b, 1) != 1)
		_exit(90);
}

/* ---- children -------------------------------------------------------- */

enum child_kind {
	C_DIE_AFTER_ARRIVAL, /* progress until a tagged message arrived */
	C_DIE_AT_ONCE,       /* die right after connecting */
	C_SEND_THEN_DIE,     /* send a rendezvous and an eager, then die */
	C_LIVE,              /* receive, answer, exit cleanly */
	C_DIE_MID_EAGER,     /* die after the first packet of an eager */
	C_SEND_ONE,          /* on 'g' send one eager, exit on the next byte */
};

static void child_live(struct pnode *nd)
{
	struct eu_recv r1, r2;
	struct eu_send s1, s2;
	int ok;

	memset(&r1, 0, sizeof(r1));
	memset(&r2, 0, sizeof(r2));
	memset(&s1, 0, sizeof(s1));
	memset(&s2, 0, sizeof(s2));
	r1.r.cb = r2.r.cb = eu_recv_cb;
	s1.s.cb = s2.s.cb = eu_send_cb;
	tm_engine_irecv(nd->eng, &r1.r, 1, 0, 1, nd->arena, BIG, nd->mr);
	tm_engine_irecv(nd->eng, &r2.r, 1, 0, 2, nd->arena + BIG, 64, nd->mr);
	while (!r1.done || !r2.done)
		tm_engine_progress(nd->eng);
	ok = r1.r.status == TM_REQ_OK && eu_check(nd->arena, BIG, 1) &&
	     r2.r.status == TM_REQ_OK && eu_check(nd->arena + BIG, 64, 2);
	if (wait_byte(nd->eng, nd->sock[0]) != 'g')
		_exit(91);
	eu_fill(nd->arena + 2 * BIG, 200000, 3);
	eu_fill(nd->arena + 3 * BIG, 100, 4);
	tm_engine_isend(nd->eng, &s1.s, nd->peer[0], 1, 1, 3,
			nd->arena + 2 * BIG, 200000, nd->mr, 0);
	tm_engine_isend(nd->eng, &s2.s, nd->peer[0], 1, 1, 4,
			nd->arena + 3 * BIG, 100, nd->mr, TM_SEND_SYNC);
	while (!s1.done || !s2.done)
		tm_engine_progress(nd->eng);
	ok = ok && s1.s.status == TM_REQ_OK && s2.s.status == TM_REQ_OK;
	/* serve until the parent is done (it may still need our FINs) */
	wait_byte(nd->eng, nd->sock[0]);
	node_close(nd);
	_exit(ok ? 0 : 92);
}

static void child_send_then_die(struct pnode *nd)
{
	struct eu_send s1, s2;

	memset(&s1, 0, sizeof(s1));
	memset(&s2, 0, sizeof(s2));
	s2.s.cb = eu_send_cb;
	eu_fill(nd->arena, BIG, 5);
	eu_fill(nd->arena + BIG, 100, 6);
	tm_engine_isend(nd->eng, &s1.s, nd->peer[0], 1, 1, 7, nd->arena, BIG,
			nd->mr, 0);
	tm_engine_isend(nd->eng, &s2.s, nd->peer[0], 1, 1, 8, nd->arena + BIG,
			100, nd->mr, 0);
	/* the eager one's completion says both are in the parent's ring */
	while (!s2.done)
		tm_engine_progress(nd->eng);
	kill(getpid(), SIGKILL);
}

/*
 * The first of the 4 packets (MTU 256) of an eager message reaches the
 * parent's ring; once its card has decided it (unexpected), we die.
 */
static void child_die_mid_eager(struct pnode *nd)
{
	struct eu_send s;
	uint8_t b;

	memset(&s, 0, sizeof(s));
	s.s.cb = eu_send_cb;
	softhca_set_sched(nd->dev->ctx, SOFTHCA_SCHED_MANUAL, 0);
	eu_fill(nd->arena, 1000, 11);
	if (tm_engine_isend(nd->eng, &s.s, nd->peer[0], 1, 1, 11, nd->arena,
			    1000, nd->mr, 0) != TM_OK ||
	    softhca_step(nd->dev->ctx, SOFTHCA_WORK_TX, SOFTHCA_ANY_QP) != 1)
		_exit(93);
	say(nd->sock[0], 'h');
	if (read(nd->sock[0], &b, 1) != 1)
		_exit(94);
	kill(getpid(), SIGKILL);
}

static void child_send_one(struct pnode *nd)
{
	struct eu_send s;

	memset(&s, 0, sizeof(s));
	s.s.cb = eu_send_cb;
	if (wait_byte(nd->eng, nd->sock[0]) != 'g')
		_exit(95);
	eu_fill(nd->arena, 100, 12);
	tm_engine_isend(nd->eng, &s.s, nd->peer[0], 1, 1, 12, nd->arena, 100,
			nd->mr, 0);
	while (!s.done)
		tm_engine_progress(nd->eng);
	wait_byte(nd->eng, nd->sock[0]);
	node_close(nd);
	_exit(s.s.status == TM_REQ_OK ? 0 : 96);
}

static void child_main(int kind, int fd)
{
	struct pnode nd;

	alarm(20);
	if (node_open(&nd, 4 * BIG) || link_peer(&nd, 0, fd))
		_exit(80);
	switch (kind) {
	case C_DIE_AFTER_ARRIVAL:
		while (eu_stats(nd.eng).unexpected < 1)
			tm_engine_progress(nd.eng);
		kill(getpid(), SIGKILL);
		break;
	case C_DIE_AT_ONCE:
		kill(getpid(), SIGKILL);
		break;
	case C_SEND_THEN_DIE:
		child_send_then_die(&nd);
		break;
	case C_LIVE:
		child_live(&nd);
		break;
	case C_DIE_MID_EAGER:
		child_die_mid_eager(&nd);
		break;
	case C_SEND_ONE:
		child_send_one(&nd);
		break;
	}
	_exit(81);
}

static void parent_open(struct pnode *nd)
{
	alarm(10);
	if (node_open(nd, 4 * BIG))
		tap_bail("cannot open the soft HCA");
}

static void parent_close(struct pnode *nd)
{
	for (int i = 0; i < MAXP; i++)
		if (nd->sock[i] > 0)
			close(nd->sock[i]);
	node_close(nd);
	alarm(0);
}

static int isend(struct pnode *nd, struct eu_send *t, int slot, int tag,
		 size_t off, size_t len, unsigned flags)
{
	memset(t, 0, sizeof(*t));
	t->s.cb = eu_send_cb;
	eu_fill(nd->arena + off, len, (uint8_t)tag);
	return tm_engine_isend(nd->eng, &t->s, nd->peer[slot], 1, 0, tag,
			       nd->arena + off, len, nd->mr, flags);
}

/*
 * Progresses until t completes; returns seconds taken.  *honest stays 1
 * unless tm_engine_idle() said 1 while t was still outstanding.
 */
static double wait_send(struct pnode *nd, struct eu_send *t, int *honest)
{
	double t0 = now_s();

	while (!t->done) {
		if (tm_engine_idle(nd->eng))
			*honest = 0;
		tm_engine_progress(nd->eng);
	}
	return now_s() - t0;
}

/* ---- tests ------------------------------------------------------------ */

/*
 * Nothing waits on the dead peer but one unsignalled eager WR (its send
 * completed at post): progress alone, with no idle check, finds the error
 * completion that WR gets (the send CQ is looked at now and then even
 * with no signalled WR out) and marks the peer dead.
 */
static void test_unsignalled_error(void)
{
	struct eu_send e;
	struct pnode nd;
	double t0;
	uint8_t b;
	pid_t pid;

	parent_open(&nd);
	pid = spawn(&nd, 0, child_main, C_DIE_AT_ONCE);
	if (read(nd.sock[0], &b, 1) != 0)
		tap_bail("child said something");
	usleep(5000); /* past the soft HCA's 1 ms liveness cache */
	isend(&nd, &e, 0, 1, 0, 8, 0);
	t0 = now_s();
	while (eu_stats(nd.eng).peer_failures == 0 && now_s() - t0 < 5)
		tm_engine_progress(nd.eng);
	tap_check(e.done == 1 && eu_stats(nd.eng).peer_failures == 1,
		  "an error on an unsignalled send WR is found by progress "
		  "alone (%.3f s)", now_s() - t0);
	reap(pid);
	parent_close(&nd);
}

/* The receiver dies after the request (rendezvous or sync) arrived. */
static void test_dies_after_arrival(int sync)
{
	const char *what = sync ? "synchronous 64 B send" : "1 MiB rendezvous send";
	struct tm_engine_stats st;
	struct pnode nd;
	struct eu_send s, later;
	int honest = 1, code;
	double dt;
	pid_t pid;

	parent_open(&nd);
	pid = spawn(&nd, 0, child_main, C_DIE_AFTER_ARRIVAL);
	isend(&nd, &s, 0, 1, 0, sync ? 64 : BIG, sync ? TM_SEND_SYNC : 0);
	dt = wait_send(&nd, &s, &honest);
	st = eu_stats(nd.eng);
	tap_check(s.done == 1 && s.s.status == TM_REQ_ERROR,
		  "receiver died after the request arrived: %s fails (%.3f s)",
		  what, dt);
	tap_check(st.keepalives_sent >= 1 && st.peer_failures == 1,
		  "%s: found by a keepalive (%lu sent), peer marked dead once",
		  what, (unsigned long)st.keepalives_sent);
	tap_check(honest && tm_engine_idle(nd.eng),
		  "%s: not idle while it waited, idle after it failed", what);
	isend(&nd, &later, 0, 2, 0, 100, 0);
	tap_check(later.done == 1 && later.s.status == TM_REQ_ERROR,
		  "%s: a later send to the dead peer fails at once", what);
	tm_engine_progress(nd.eng);
	tap_check(s.done == 1 && later.done == 1,
		  "%s: each request completed exactly once", what);
	code = reap(pid);
	tap_check(code == 128 + SIGKILL, "%s: the child died as planned (%d)",
		  what, code);
	parent_close(&nd);
}

/*
 * Send cancel while the receiver dies (it dies once the message arrived;
 * the REQ follows): one outcome, cancelled (the REP made it) or failed,
 * in bounded time, the callback once more for an eager send that had
 * completed, once for a pending rendezvous.
 */
static void test_cancel_dead(int rndv)
{
	const char *what = rndv ? "cancel of a rendezvous send" :
			   "cancel of a completed eager send";
	struct pnode nd;
	struct eu_send s;
	int honest = 1, want = rndv ? 1 : 2, rc;
	double t0;
	pid_t pid;

	parent_open(&nd);
	pid = spawn(&nd, 0, child_main, C_DIE_AFTER_ARRIVAL);
	isend(&nd, &s, 0, 1, 0, rndv ? BIG : 100, 0);
	rc = tm_engine_cancel_send(nd.eng, &s.s);
	t0 = now_s();
	while (rc == TM_OK && s.done < want && now_s() - t0 < 5)
		tm_engine_progress(nd.eng);
	wait_send(&nd, &s, &honest);
	tm_engine_progress(nd.eng);
	tap_check((rc == TM_OK && s.done == want &&
		   (s.s.status == TM_REQ_CANCELLED ||
		    s.s.status == TM_REQ_ERROR)) ||
		  (rc == TM_ERR_NOT_FOUND && s.done == 1),
		  "receiver dies: %s ends once, cancelled or failed (rc %d, done %d, status %d, %.3f s)",
		  what, rc, s.done, s.s.status, now_s() - t0);
	t0 = now_s(); /* unsignalled WRs left: idle posts a keepalive */
	while (!tm_engine_idle(nd.eng) && now_s() - t0 < 5)
		tm_engine_progress(nd.eng);
	tap_check(tm_engine_idle(nd.eng) && s.done == want,
		  "receiver dies: %s: idle within %.3f s, no second outcome",
		  what, now_s() - t0);
	reap(pid);
	parent_close(&nd);
}

/* The receiver is gone before anything was sent: every kind fails. */
static void test_dies_before(void)
{
	enum { NB = 300 };
	static struct eu_send burst[NB];
	struct eu_send e, y, r;
	struct eu_recv dr;
	struct pnode nd;
	uint8_t b;
	int i, once = 1, err = 1, honest = 1, n_ok = 0;
	pid_t pid;

	fu_offload_thresh = 1024; /* this node only sends, but the last */
	parent_open(&nd);
	fu_offload_thresh = 0;
	pid = spawn(&nd, 0, child_main, C_DIE_AT_ONCE);
	/* EOF: the child is dead (a zombie until reaped) */
	if (read(nd.sock[0], &b, 1) != 0)
		tap_bail("child said something");
	usleep(5000); /* past the soft HCA's 1 ms liveness cache */
	isend(&nd, &e, 0, 1, 0, 100, 0);
	isend(&nd, &y, 0, 2, 200, 64, TM_SEND_SYNC);
	isend(&nd, &r, 0, 3, BIG, BIG, 0);
	for (i = 0; i < NB; i++) /* more than the send queue takes */
		isend(&nd, &burst[i], 0, 4, 2 * BIG + 64 * (size_t)i, 64, 0);
	wait_send(&nd, &r, &honest);
	for (i = 0; i < NB; i++)
		wait_send(&nd, &burst[i], &honest);
	wait_send(&nd, &e, &honest);
	wait_send(&nd, &y, &honest);
	tm_engine_progress(nd.eng);
	for (i = 0; i < NB; i++) {
		once &= burst[i].done == 1;
		err &= burst[i].s.status == TM_REQ_ERROR ||
		       burst[i].s.status == TM_REQ_OK;
		n_ok += burst[i].s.status == TM_REQ_OK;
	}
	/* an eager standard send completes once its data is in a send slot
	 * (a buffered copy, as ob1's eager sends): posted before the engine
	 * learned of the death, it may complete OK */
	tap_check((e.s.status == TM_REQ_ERROR || e.s.status == TM_REQ_OK) &&
		  y.s.status == TM_REQ_ERROR && r.s.status == TM_REQ_ERROR,
		  "receiver dead before anything arrived: sync and rendezvous sends fail (eager: buffered)");
	/* An eager send does not look at the CQs unless its send queue is
	 * full, so the burst's first sends may go out (buffered, OK) before
	 * the engine learns of the death; at most a send queue of them (the
	 * engine's sq_limit is half the QP's); every send that waited for
	 * room fails. */
	tap_check(err && once && e.done == 1 && y.done == 1 && r.done == 1 &&
		  n_ok <= (int)nd.dev->qp_max_send_wr / 2,
		  "a burst of %d sends: each completes once; those queued "
		  "behind the full send queue fail (%d buffered OK)", NB, n_ok);
	tap_check(honest && tm_engine_idle(nd.eng) &&
		  eu_stats(nd.eng).peer_failures == 1,
		  "idle afterwards, one peer failure");
	/* a receive naming the dead peer, posted now (64 B, below this
	 * node's offload_thresh: the post's fast path would take it), fails
	 * within its post: nothing can come */
	memset(&dr, 0, sizeof(dr));
	dr.r.cb = eu_recv_cb;
	tap_check(tm_engine_irecv_from(nd.eng, &dr.r, 1, 0, 9, nd.peer[0],
				       nd.arena, 64, nd.mr) == TM_OK &&
		  dr.done == 1 && dr.r.status == TM_REQ_ERROR &&
		  tm_engine_idle(nd.eng),
		  "a receive naming the dead peer fails within its post");
	reap(pid);
	parent_close(&nd);
}

/* A sender dies after its messages arrived unexpected. */
static void test_sender_dies(void)
{
	struct eu_recv rr, re;
	struct pnode nd;
	uint8_t b;
	pid_t pid;

	parent_open(&nd);
	pid = spawn(&nd, 0, child_main, C_SEND_THEN_DIE);
	while (eu_stats(nd.eng).unexpected < 2)
		tm_engine_progress(nd.eng);
	if (read(nd.sock[0], &b, 1) != 0)
		tap_bail("child said something");
	usleep(5000);
	memset(&rr, 0, sizeof(rr));
	memset(&re, 0, sizeof(re));
	rr.r.cb = re.r.cb = eu_recv_cb;
	tm_engine_irecv(nd.eng, &rr.r, 1, 1, 7, nd.arena, BIG, nd.mr);
	while (!rr.done)
		tm_engine_progress(nd.eng);
	tap_check(rr.done == 1 && rr.r.status == TM_REQ_ERROR,
		  "unexpected rendezvous from a dead sender: the receive fails");
	tm_engine_irecv(nd.eng, &re.r, 1, 1, 8, nd.arena + BIG, 200, nd.mr);
	while (!re.done)
		tm_engine_progress(nd.eng);
	tap_check(re.r.status == TM_REQ_OK && re.r.msg_len == 100 &&
		  eu_check(nd.arena + BIG, 100, 6),
		  "an eager message that arrived whole before it died is still delivered");
	tm_engine_progress(nd.eng);
	tap_check(rr.done == 1 && re.done == 1 && tm_engine_idle(nd.eng),
		  "each receive completed once; idle");
	reap(pid);
	parent_close(&nd);
}

/*
 * A sender dies in the middle of an unexpected multi-packet eager message:
 * the card counted it unexpected at its first packet, and the engine must
 * count it too, or every later ADD carries a count one short, is inactive
 * on the card, and nothing is ever matched there again (results stay
 * right: software claims each message).  So after the failure a receive
 * from another peer, posted before its message, is matched on the card.
 */
static void test_dies_mid_message(void)
{
	struct softhca_config cfg;
	struct softhca_stats hs;
	struct tm_engine_stats st;
	struct eu_recv r;
	struct pnode nd;
	double t0;
	pid_t pa, pb;

	/* peers share one MTU; the children inherit this config */
	softhca_config_default(&cfg);
	cfg.mtu = 256;
	if (softhca_set_config(&cfg))
		tap_bail("softhca_set_config");
	parent_open(&nd);
	pa = spawn(&nd, 0, child_main, C_DIE_MID_EAGER);
	pb = spawn(&nd, 1, child_main, C_SEND_ONE);
	if (wait_byte(nd.eng, nd.sock[0]) != 'h')
		tap_bail("mid-message child failed");
	do {
		tm_engine_progress(nd.eng);
		softhca_query_stats(nd.dev->ctx, &hs);
	} while (hs.unexpected < 1);
	say(nd.sock[0], 'k');
	t0 = now_s();
	while (eu_stats(nd.eng).peer_failures < 1 && now_s() - t0 < 5)
		tm_engine_progress(nd.eng);
	st = eu_stats(nd.eng);
	softhca_query_stats(nd.dev->ctx, &hs);
	tap_check(st.peer_failures == 1 && reap(pa) == 128 + SIGKILL,
		  "sender killed mid-message: its peer is marked dead");
	tap_check(hs.unexpected == 1 && st.unexpected == hs.unexpected &&
		  st.uq_len == 0,
		  "the engine counts the broken message the card counted (engine %lu, card %lu), and queues nothing",
		  (unsigned long)st.unexpected, (unsigned long)hs.unexpected);
	memset(&r, 0, sizeof(r));
	r.r.cb = eu_recv_cb;
	tm_engine_irecv(nd.eng, &r.r, 1, 1, 12, nd.arena, 200, nd.mr);
	tm_engine_progress(nd.eng);
	say(nd.sock[1], 'g');
	while (!r.done)
		tm_engine_progress(nd.eng);
	softhca_query_stats(nd.dev->ctx, &hs);
	tap_check(r.r.status == TM_REQ_OK && r.r.msg_len == 100 &&
		  eu_check(nd.arena, 100, 12) && r.r.on_card,
		  "afterwards a pre-posted receive from another peer is matched on the card (on_card %d, card count %u, engine reported %u)",
		  r.r.on_card, hs.hw_unexpected_cnt, hs.sw_unexpected_cnt);
	say(nd.sock[1], 'q');
	tap_check(reap(pb) == 0, "the other peer finished cleanly");
	parent_close(&nd);
	softhca_config_default(&cfg);
	softhca_set_config(&cfg);
}

/* Peer A dies holding a rendezvous request; peer B keeps working. */
static void test_other_peer(void)
{
	struct eu_send sa, sb1, sb2;
	struct eu_recv r3, r4, ra;
	struct pnode nd;
	int honest = 1, code;
	pid_t pa, pb;

	parent_open(&nd);
	pa = spawn(&nd, 0, child_main, C_DIE_AFTER_ARRIVAL);
	pb = spawn(&nd, 1, child_main, C_LIVE);
	/* receives naming each peer, posted before A dies: a small one from
	 * A (held in software), a large one from B (on the card) */
	memset(&r3, 0, sizeof(r3));
	memset(&ra, 0, sizeof(ra));
	r3.r.cb = ra.r.cb = eu_recv_cb;
	tm_engine_irecv_from(nd.eng, &ra.r, 1, 0, 9, nd.peer[0],
			     nd.arena + 3 * BIG + 300000 + 256, 64, nd.mr);
	tm_engine_irecv_from(nd.eng, &r3.r, 1, 1, 3, nd.peer[1],
			     nd.arena + 3 * BIG, 300000, nd.mr);
	isend(&nd, &sa, 0, 1, 0, BIG, 0);
	isend(&nd, &sb1, 1, 1, BIG, BIG, 0);
	isend(&nd, &sb2, 1, 2, 2 * BIG, 64, TM_SEND_SYNC);
	wait_send(&nd, &sa, &honest);
	tap_check(sa.s.status == TM_REQ_ERROR && eu_stats(nd.eng).peer_failures == 1,
		  "two peers: the dead one's rendezvous send fails");
	while (!ra.done)
		tm_engine_progress(nd.eng);
	tap_check(ra.r.status == TM_REQ_ERROR && !r3.done,
		  "two peers: a receive naming the dead one fails, one naming the live one stays posted");
	wait_send(&nd, &sb1, &honest);
	wait_send(&nd, &sb2, &honest);
	tap_check(sb1.s.status == TM_REQ_OK && sb2.s.status == TM_REQ_OK,
		  "two peers: rendezvous and sync sends to the live one succeed");
	memset(&r4, 0, sizeof(r4));
	r4.r.cb = eu_recv_cb;
	tm_engine_irecv(nd.eng, &r4.r, 1, TM_ANY_SRC, TM_ANY_TAG,
			nd.arena + 3 * BIG + 300000, 200, nd.mr);
	say(nd.sock[1], 'g'); /* after the failure: B sends to us now */
	while (!r3.done || !r4.done)
		tm_engine_progress(nd.eng);
	tap_check(r3.r.status == TM_REQ_OK && r3.r.msg_len == 200000 &&
		  eu_check(nd.arena + 3 * BIG, 200000, 3) &&
		  r4.r.status == TM_REQ_OK && r4.r.env.src == 1 &&
		  eu_check(nd.arena + 3 * BIG + 300000, 100, 4),
		  "two peers: after the failure the live peer's rendezvous and sync messages arrive (the first into a receive posted before it)");
	while (!tm_engine_idle(nd.eng))
		tm_engine_progress(nd.eng);
	say(nd.sock[1], 'q');
	code = reap(pb);
	tap_check(code == 0, "two peers: the live peer saw all its data right and exited cleanly (%d)",
		  code);
	tap_check(sa.done == 1 && sb1.done == 1 && sb2.done == 1 &&
		  r3.done == 1 && r4.done == 1 && ra.done == 1 &&
		  eu_stats(nd.eng).peer_failures == 1,
		  "two peers: every request completed exactly once");
	reap(pa);
	parent_close(&nd);
}

/* In one process: a slow but live receiver gets keepalives and ignores them. */
static void test_slow_receiver(void)
{
	struct eu_world w;
	struct eu_opts o;
	struct tm_engine_stats s0, s1;
	struct eu_send sr, sy;
	struct eu_recv rr, ry;
	struct tm_engine *e0, *e1;
	double t0;
	int idle_while_waiting = 0, n;

	alarm(10);
	eu_opts_default(&o);
	o.arena_len = 4 * BIG;
	o.ecfg.eager_limit = 1024;
	o.ecfg.keepalive_ms = 5;
	if (eu_world_init(&w, 2, &o))
		tap_bail("cannot open the soft HCA world");
	e0 = w.node[0].eng;
	e1 = w.node[1].eng;
	memset(&sr, 0, sizeof(sr));
	memset(&sy, 0, sizeof(sy));
	sr.s.cb = sy.s.cb = eu_send_cb;
	eu_fill(w.node[1].arena, BIG, 9);
	tm_engine_isend(e1, &sr.s, w.node[1].peer[0], 2, 1, 5,
			w.node[1].arena, BIG, w.node[1].mr, 0);
	tm_engine_isend(e1, &sy.s, w.node[1].peer[0], 2, 1, 6,
			w.node[1].arena + BIG, 10, w.node[1].mr, TM_SEND_SYNC);
	/* The keepalive is looked for every 64th progress call, so the wait
	 * is counted in pumps too: a loaded machine makes fewer in 60 ms. */
	for (t0 = now_s(), n = 0; now_s() - t0 < 0.06 || n < 256; n++) {
		eu_pump(&w);
		idle_while_waiting |= tm_engine_idle(e1);
		usleep(1000);
	}
	s0 = eu_stats(e0);
	s1 = eu_stats(e1);
	tap_check(!sr.done && !sy.done && !idle_while_waiting,
		  "slow receiver: sends keep waiting, the sender is never idle");
	tap_check(s1.keepalives_sent >= 2 && s0.keepalives_recv >= 1 &&
		  s0.malformed == 0 && s1.peer_failures == 0 && !s1.sends_failed,
		  "slow receiver: keepalives go out (%lu) and are ignored (%lu)",
		  (unsigned long)s1.keepalives_sent,
		  (unsigned long)s0.keepalives_recv);
	memset(&rr, 0, sizeof(rr));
	memset(&ry, 0, sizeof(ry));
	rr.r.cb = ry.r.cb = eu_recv_cb;
	tm_engine_irecv(e0, &rr.r, 2, 1, 5, w.node[0].arena, BIG, w.node[0].mr);
	tm_engine_irecv(e0, &ry.r, 2, 1, 6, w.node[0].arena + BIG, 64,
			w.node[0].mr);
	eu_pump(&w);
	tap_check(sr.done == 1 && sy.done == 1 && sr.s.status == TM_REQ_OK &&
		  sy.s.status == TM_REQ_OK && rr.r.status == TM_REQ_OK &&
		  eu_check(w.node[0].arena, BIG, 9) && eu_quiet(&w),
		  "slow receiver: both sends complete normally once it receives");
	eu_world_fini(&w);
	alarm(0);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	test_dies_after_arrival(0);
	test_dies_after_arrival(1);
	test_dies_before();
	test_unsignalled_error();
	test_cancel_dead(0);
	test_cancel_dead(1);
	test_sender_dies();
	test_other_peer();
	test_slow_receiver();
	test_dies_mid_message();
	return tap_done();
}
