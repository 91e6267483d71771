/*
 * test_recv_fail.c - a receive naming a peer fails in bounded time when
 * that peer dies (tm_engine_irecv_from), and nothing else does.
 *
 * Processes as in test_peer_fail.c: each node forked before any device is
 * opened, QP addresses and one-byte commands over socketpairs, the dying
 * child SIGKILLs itself, every process under alarm().  Child A (source 1)
 * sends one eager message and then dies on command; child B (source 2)
 * sends one eager message on command.  The parent posts, before A dies: a
 * card-held and a software-held receive naming A, an MPI_ANY_SOURCE one,
 * and one from source 1 with no peer named.  Checked: the two naming A
 * fail (TM_REQ_ERROR) within a second through the keepalive (20 ms), the
 * card-held one after its DEL; a receive naming A posted after the death
 * fails at once, but one that A's message, arrived before the death,
 * matches is delivered; the unnamed one keeps waiting and cancels
 * normally; the any-source one gets B's message; each completes once.
 * Probes: child C (source 3) is like A but nothing but probes names it:
 * before its death they find nothing (TM_ERR_NOT_FOUND); a probe loop for
 * a message C never sent ends in TM_ERR_PEER_DEAD within a second (the
 * probes' own keepalive found the death), so does a matched probe, and
 * the message C sent before dying is still found.
 * First, in the parent alone: keepalive_ms is bounded (TM_KEEPALIVE_MAX_MS
 * accepted, one more refused), so no configuration waits for ever.
 */
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

#define KA_MS FU_KA_MS

static void say(int fd, uint8_t b)
{
	if (write(fd, &b, 1) != 1)
		tap_bail("a child is gone too early");
}

/* src 1 and 3: one eager (tag 5) at once, die on 'k'; src 2: one (tag
 * 12) on 'g', exit on the next byte */
static void child_main(int src, int fd)
{
	static struct pnode nd;
	struct eu_send s;

	alarm(20);
	if (node_open(&nd, 1 << 16) || link_peer(&nd, 0, fd))
		_exit(80);
	memset(&s, 0, sizeof(s));
	s.s.cb = eu_send_cb;
	memset(nd.arena, src, 100);
	if (src == 2 && wait_byte(nd.eng, fd) != 'g')
		_exit(81);
	tm_engine_isend(nd.eng, &s.s, nd.peer[0], 1, src, src != 2 ? 5 : 12,
			nd.arena, 100, nd.mr, 0);
	while (!s.done)
		tm_engine_progress(nd.eng);
	wait_byte(nd.eng, fd);
	if (src != 2)
		kill(getpid(), SIGKILL);
	_exit(s.s.status == TM_REQ_OK ? 0 : 82);
}

static void post(struct pnode *nd, struct eu_recv *t, int src, int tag,
		 int slot, size_t off, size_t len)
{
	memset(t, 0, sizeof(*t));
	t->r.cb = eu_recv_cb;
	if (tm_engine_irecv_from(nd->eng, &t->r, 1, src, tag,
				 slot < 0 ? TM_PEER_ANY : nd->peer[slot],
				 nd->arena + off, len, nd->mr) != TM_OK)
		tap_bail("irecv_from refused");
}

static void test_keepalive_bound(void)
{
	struct tm_engine_config ec;
	struct tm_dev_config dc;
	struct tm_engine *eng = NULL;
	struct tm_dev *dev;
	enum tm_engine_setting bad = TM_SETTING_NONE;
	int over, at, chk;

	tm_dev_config_default(&dc);
	dc.provider = "soft";
	if (tm_dev_open(&dc, &dev) != TM_OK)
		tap_bail("cannot open the soft HCA");
	tm_engine_config_default(&ec);
	ec.eager_limit = 1024;
	ec.keepalive_ms = TM_KEEPALIVE_MAX_MS + 1;
	chk = tm_engine_config_check(&ec, &bad);
	over = tm_engine_create(dev, &ec, &eng);
	ec.keepalive_ms = TM_KEEPALIVE_MAX_MS;
	at = tm_engine_create(dev, &ec, &eng);
	tap_check(chk == TM_ERR_INVALID && bad == TM_SETTING_KEEPALIVE_MS &&
		  over == TM_ERR_INVALID && at == TM_OK,
		  "keepalive_ms %u refused, named (%d, %d), %u accepted (%d)",
		  TM_KEEPALIVE_MAX_MS + 1, over, bad, TM_KEEPALIVE_MAX_MS, at);
	if (at == TM_OK)
		tm_engine_destroy(eng);
	tm_dev_close(dev);
}

int main(void)
{
	static struct pnode nd;
	struct eu_recv rc, rs, ra, rn, late, early;
	struct tm_engine_stats s0, st;
	struct softhca_config hc;
	struct tm_probe_info info;
	struct tm_msg *m;
	double t0, dt;
	int prc;
	pid_t pa, pb, pc;

	signal(SIGPIPE, SIG_IGN);
	signal(SIGALRM, on_alarm);
	alarm(15);
	/* a 4 KiB port, so that a receive longer than that stays in
	 * software; the children inherit it */
	softhca_config_default(&hc);
	hc.max_msg_sz = 4096;
	if (softhca_set_config(&hc))
		tap_bail("softhca_set_config");
	test_keepalive_bound();
	if (node_open(&nd, 1 << 16))
		tap_bail("cannot open the soft HCA");
	pa = spawn(&nd, 0, child_main, 1);
	pb = spawn(&nd, 1, child_main, 2);
	pc = spawn(&nd, 2, child_main, 3);
	while (eu_stats(nd.eng).unexpected < 2) /* A's and C's eager messages */
		tm_engine_progress(nd.eng);

	tap_check(tm_engine_iprobe_from(nd.eng, 1, 3, 9, nd.peer[2], &info) ==
		  TM_ERR_NOT_FOUND, "a probe naming live C finds nothing");
	s0 = eu_stats(nd.eng);
	say(nd.sock[2], 'k');
	t0 = now_s();
	do {
		prc = tm_engine_iprobe_from(nd.eng, 1, 3, 9, nd.peer[2], &info);
	} while (prc == TM_ERR_NOT_FOUND && now_s() - t0 < 5);
	tap_check(prc == TM_ERR_PEER_DEAD && now_s() - t0 < 1.0 &&
		  eu_stats(nd.eng).keepalives_sent > s0.keepalives_sent,
		  "a probe loop naming C ends in TM_ERR_PEER_DEAD (%d) after %.3f s, through a keepalive",
		  prc, now_s() - t0);
	m = NULL;
	prc = tm_engine_improbe_from(nd.eng, 1, 3, 9, nd.peer[2], &m, &info);
	tap_check(prc == TM_ERR_PEER_DEAD && !m,
		  "so does a matched probe (%d)", prc);
	prc = tm_engine_iprobe_from(nd.eng, 1, 3, 5, nd.peer[2], &info);
	tap_check(prc == TM_OK && info.len == 100,
		  "a probe for what C sent before dying finds it (%d)", prc);

	s0 = eu_stats(nd.eng);
	post(&nd, &rc, 1, 1, 0, 0, 200);      /* card-held, names A */
	st = eu_stats(nd.eng);
	post(&nd, &rs, 1, 2, 0, 8192, 8192);  /* too long: software-held */
	post(&nd, &ra, TM_ANY_SRC, 12, -1, 2000, 200);
	post(&nd, &rn, 1, 3, -1, 3000, 200);  /* no peer named */
	tap_check(st.recv_to_card == s0.recv_to_card + 1 &&
		  eu_stats(nd.eng).sw_long_buf == s0.sw_long_buf + 1,
		  "receives naming A: one on the card, one held in software");
	tap_check(tm_engine_irecv_from(nd.eng, &late.r, 1, TM_ANY_SRC, 1,
				       nd.peer[0], nd.arena, 8, nd.mr) ==
		  TM_ERR_RANGE && tm_engine_irecv_from(nd.eng, &late.r, 1, 1,
		  1, 7, nd.arena, 8, nd.mr) == TM_ERR_RANGE,
		  "a peer with an any-source receive, or no such peer: TM_ERR_RANGE");

	s0 = eu_stats(nd.eng);
	say(nd.sock[0], 'k');
	t0 = now_s();
	while ((!rc.done || !rs.done) && now_s() - t0 < 5)
		tm_engine_progress(nd.eng);
	dt = now_s() - t0;
	st = eu_stats(nd.eng);
	tap_check(rc.done == 1 && rc.r.status == TM_REQ_ERROR &&
		  rs.done == 1 && rs.r.status == TM_REQ_ERROR && dt < 1.0,
		  "A died: both receives naming it fail (card-held %d, software-held %d) in %.3f s",
		  rc.r.status, rs.r.status, dt);
	tap_check(st.keepalives_sent > s0.keepalives_sent &&
		  st.peer_failures == 2 &&
		  st.card_entries + 1 == s0.card_entries,
		  "found by a keepalive (%lu sent), A dead once (C before it), its card entry deleted (%u -> %u)",
		  (unsigned long)st.keepalives_sent, s0.card_entries,
		  st.card_entries);
	tap_check(!rn.done && !ra.done,
		  "receives naming no peer keep waiting");

	post(&nd, &early, 1, 5, 0, 4000, 200);
	tap_check(early.done == 1 && early.r.status == TM_REQ_OK &&
		  early.r.msg_len == 100 && nd.arena[4000] == 1,
		  "a message A sent before dying still matches a receive naming it");
	post(&nd, &late, 1, 6, 0, 5000, 200);
	tap_check(late.done == 1 && late.r.status == TM_REQ_ERROR,
		  "a receive naming A posted after its death fails at once");

	say(nd.sock[1], 'g');
	while (!ra.done && now_s() - t0 < 5)
		tm_engine_progress(nd.eng);
	tap_check(ra.done == 1 && ra.r.status == TM_REQ_OK &&
		  ra.r.env.src == 2 && nd.arena[2000] == 2,
		  "the any-source receive gets the survivor's message");
	tm_engine_cancel_recv(nd.eng, &rn.r);
	while (!rn.done && now_s() - t0 < 5)
		tm_engine_progress(nd.eng);
	tap_check(rn.done == 1 && rn.r.status == TM_REQ_CANCELLED,
		  "the unnamed receive cancels normally");
	while (!tm_engine_idle(nd.eng) && now_s() - t0 < 5)
		tm_engine_progress(nd.eng);
	tm_engine_progress(nd.eng);
	tap_check(rc.done == 1 && rs.done == 1 && ra.done == 1 &&
		  rn.done == 1 && early.done == 1 && late.done == 1 &&
		  tm_engine_idle(nd.eng), "each request completed once; idle");
	say(nd.sock[1], 'q');
	tap_check(reap(pa) == 128 + SIGKILL && reap(pc) == 128 + SIGKILL &&
		  reap(pb) == 0, "A and C were killed, B exited cleanly");
	tm_engine_destroy(nd.eng);
	for (int i = 0; i < 3; i++)
		tm_dev_pair_destroy(nd.dev, &nd.qp[i]);
	tm_dev_dereg(nd.dev, nd.mr);
	tm_dev_close(nd.dev);
	return tap_done();
}
