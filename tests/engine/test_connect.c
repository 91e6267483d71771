/*
 * test_connect.c - connect on first use (dev/tm_dev_cm.h, engine held
 * peers) over the soft HCA's UD QP (softhca/ud.c):
 *   - what is sent before the connection is up waits, and arrives in the
 *     order posted, none overtaken by a later send;
 *   - a simultaneous connect ends in one connection each side;
 *   - a peer that is gone fails its own requests only, with the cause,
 *     after the deadline, on the active side and on the passive side;
 *   - datagrams from an attacker (a context of another "rank") are
 *     refused by reason, lose nothing and break nothing.
 * Nodes are soft-HCA contexts of this process; the dead peer is a child
 * forked before any device opens.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dev/tm_dev.h"
#include "dev/tm_dev_cm.h"
#include "engine/tm_engine.h"
#include "softhca/softhca.h"
#include "verbs/tm_verbs.h"
#include "tests/tap.h"

#define NN 6
#define JOB 42
#define LONG_MS 20000   /* connections that must succeed, however loaded */
#define SHORT_MS 1500   /* the hostile victim's, to see a deadline pass */
#define MSG_MAX 65536
#define ARENA (32 * MSG_MAX)
#define WALL_CAP_S 60   /* a hang is a failure, never a wait */

struct cnode {
	struct tm_dev *dev;
	struct tm_engine *eng;
	struct tm_cm *cm;
	struct tm_dev_pair qp[NN + 1];
	uint32_t peer[NN + 1];
	int state[NN + 1];  /* 0 none, 1 connecting, 2 up, 3 failed */
	int err[NN + 1];
	uint8_t *arena;
	struct ibv_mr *mr;
	int id;
};

static struct cnode N[NN];
/* what each id "published": the address request() checks */
static struct tm_cm_addr published[NN + 1];

struct req {
	struct tm_send s;
	struct tm_recv r;
	int done;
};

static void send_cb(struct tm_send *s)
{
	((struct req *)s->arg)->done++;
}

static void recv_cb(struct tm_recv *r)
{
	((struct req *)r->arg)->done++;
}

static int cm_request(void *arg, uint64_t id, const struct tm_cm_addr *from,
		      struct tm_dev_pair **pair)
{
	struct cnode *n = arg;

	if (id > NN || n->state[id] ||
	    memcmp(from, &published[id], sizeof(*from)))
		return TM_ERR_INVALID;
	if (tm_dev_pair_create(n->dev, &n->qp[id]) ||
	    tm_engine_add_peer_held(n->eng, &n->qp[id], &n->peer[id]))
		return TM_ERR_NO_MEMORY;
	n->state[id] = 1;
	*pair = &n->qp[id];
	return TM_OK;
}

static void cm_done(void *arg, uint64_t id, int status, int err)
{
	struct cnode *n = arg;

	n->err[id] = err;
	if (status == TM_OK) {
		n->state[id] = 2;
		tm_engine_peer_release(n->eng, n->peer[id]);
	} else {
		n->state[id] = 3;
		tm_engine_peer_fail(n->eng, n->peer[id]);
	}
}

static int node_open(struct cnode *n, int id, uint32_t timeout_ms)
{
	struct tm_dev_config dc;
	struct tm_engine_config ec;
	struct tm_cm_config cc = { .my_id = (uint64_t)id, .job = JOB,
				   .retry_ms = 20, .timeout_ms = timeout_ms };
	struct tm_cm_ops ops = { .arg = n, .request = cm_request,
				 .done = cm_done };

	n->id = id;
	tm_dev_config_default(&dc);
	dc.provider = "soft";
	tm_engine_config_default(&ec);
	ec.eager_limit = 1024;
	if (tm_dev_open(&dc, &n->dev) || tm_engine_create(n->dev, &ec, &n->eng))
		return -1;
	n->arena = calloc(1, ARENA);
	if (!n->arena || tm_dev_reg(n->dev, n->arena, ARENA,
				    IBV_ACCESS_REMOTE_READ, &n->mr))
		return -1;
	if (tm_cm_create(n->dev, &cc, &ops, &n->cm))
		return -1;
	tm_cm_get_addr(n->cm, &published[id]);
	return 0;
}

/* n starts connecting to id (the active side). */
static int start(struct cnode *n, int id)
{
	if (tm_dev_pair_create(n->dev, &n->qp[id]) ||
	    tm_engine_add_peer_held(n->eng, &n->qp[id], &n->peer[id]))
		return -1;
	n->state[id] = 1;
	return tm_cm_connect(n->cm, (uint64_t)id, &published[id], &n->qp[id]);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void step(void)
{
	for (int i = 0; i < NN; i++) {
		if (!N[i].dev)
			continue;
		softhca_drain(N[i].dev->ctx);
		tm_cm_progress(N[i].cm);
		tm_engine_progress(N[i].eng);
	}
}

/* Steps until *flag reaches want (or the wall cap: then 0). */
static int pump_until(const int *flag, int want)
{
	double t0 = now_s();

	while (*flag < want) {
		if (now_s() - t0 > WALL_CAP_S)
			return 0;
		step();
	}
	return 1;
}

static struct tm_cm_stats cms(int i)
{
	struct tm_cm_stats st;

	tm_cm_stats_get(N[i].cm, &st);
	return st;
}

static uint8_t *A(int i, int k)
{
	return N[i].arena + (size_t)k * MSG_MAX;
}

/* ---- 1. queued before the connection, in order ------------------------ */

#define NQ 12            /* sent while connecting; one more right after */
static size_t qlen(int k)
{
	return k == 5 ? 40000 : k == 9 ? 2000 : 8; /* rendezvous, eager */
}

static void test_order(void)
{
	static struct req s[NQ + 1], r[NQ + 1];
	int k, all = 0, inorder = 1, sent_ok = 1;
	double t0;

	tap_check(start(&N[0], 1) == TM_OK, "node 0 starts connecting to 1");
	/* node 1 knows nothing of 0 yet: its receives name any source */
	for (k = 0; k <= NQ; k++) {
		r[k].r.cb = recv_cb;
		r[k].r.arg = &r[k];
		tm_engine_irecv(N[1].eng, &r[k].r, 3, TM_ANY_SRC, 7, A(1, k),
				MSG_MAX, N[1].mr);
	}
	for (k = 0; k < NQ; k++) {
		memset(A(0, k), k + 1, qlen(k));
		s[k].s.cb = send_cb;
		s[k].s.arg = &s[k];
		tm_engine_isend(N[0].eng, &s[k].s, N[0].peer[1], 3, 0, 7,
				A(0, k), qlen(k), N[0].mr, 0);
		if (k == NQ / 2) /* the REQ is out; the rest still waits */
			tm_cm_progress(N[0].cm);
	}
	for (k = 0; k < NQ; k++)
		all += s[k].done;
	tap_check(all == 0 && N[0].state[1] == 1,
		  "nothing sent to a peer that is connecting completes (%d)",
		  all);
	/* the connection comes up with node 0's engine not driven: what was
	 * queued is released but not yet posted when the next send comes */
	t0 = now_s();
	while (N[0].state[1] != 2 && now_s() - t0 < WALL_CAP_S) {
		softhca_drain(N[1].dev->ctx);
		tm_cm_progress(N[1].cm);
		tm_engine_progress(N[1].eng);
		tm_cm_progress(N[0].cm);
	}
	memset(A(0, NQ), NQ + 1, qlen(NQ));
	s[NQ].s.cb = send_cb;
	s[NQ].s.arg = &s[NQ];
	tm_engine_isend(N[0].eng, &s[NQ].s, N[0].peer[1], 3, 0, 7, A(0, NQ),
			qlen(NQ), N[0].mr, 0);
	for (k = 0; k <= NQ; k++)
		if (!pump_until(&r[k].done, 1))
			break;
	for (k = 0; k <= NQ; k++) {
		inorder &= r[k].done == 1 && r[k].r.recv_len == qlen(k) &&
			   A(1, k)[0] == k + 1 && A(1, k)[qlen(k) - 1] == k + 1;
		pump_until(&s[k].done, 1);
		sent_ok &= s[k].done == 1 && s[k].s.status == TM_REQ_OK;
	}
	tap_check(N[0].state[1] == 2 && N[1].state[0] == 2,
		  "both ends up: the active one and the one that accepted (%d/%d)",
		  N[0].state[1], N[1].state[0]);
	tap_check(inorder,
		  "%d messages sent before and while connecting, and one sent as it came up, arrive whole, in the order posted (eager and rendezvous)",
		  NQ);
	tap_check(sent_ok, "every send completes OK");
	tap_check(cms(1).accepted == 1 && cms(0).connected == 1 &&
		  cms(1).connected == 1,
		  "one connection each side (accepted %llu, connected %llu/%llu)",
		  (unsigned long long)cms(1).accepted,
		  (unsigned long long)cms(0).connected,
		  (unsigned long long)cms(1).connected);
}

/* ---- 2. simultaneous connect ----------------------------------------- */

static void test_crossing(void)
{
	static struct req s[2], r[2];

	tap_check(start(&N[2], 3) == TM_OK && start(&N[3], 2) == TM_OK,
		  "nodes 2 and 3 start connecting to each other at once");
	for (int i = 0; i < 2; i++) {
		int me = 2 + i, him = 3 - i;

		r[i].r.cb = recv_cb;
		r[i].r.arg = &r[i];
		tm_engine_irecv_from(N[me].eng, &r[i].r, 3, him, 9,
				     N[me].peer[him], A(me, 0), 64, N[me].mr);
		s[i].s.cb = send_cb;
		s[i].s.arg = &s[i];
		memset(A(me, 1), 0x50 + me, 64);
		tm_engine_isend(N[me].eng, &s[i].s, N[me].peer[him], 3, me, 9,
				A(me, 1), 64, N[me].mr, 0);
	}
	pump_until(&r[0].done, 1);
	pump_until(&r[1].done, 1);
	tap_check(N[2].state[3] == 2 && N[3].state[2] == 2,
		  "both ends up (%d/%d)", N[2].state[3], N[3].state[2]);
	tap_check(cms(2).connected == 1 && cms(3).connected == 1 &&
		  cms(2).accepted == 0 && cms(3).accepted == 1,
		  "one connection each side: the lower id's request won (accepted %llu/%llu)",
		  (unsigned long long)cms(2).accepted,
		  (unsigned long long)cms(3).accepted);
	tap_check(cms(2).crossed + cms(3).crossed >= 1,
		  "the crossing was seen and settled (%llu + %llu)",
		  (unsigned long long)cms(2).crossed,
		  (unsigned long long)cms(3).crossed);
	tap_check(r[0].done == 1 && A(2, 0)[0] == 0x53 && r[1].done == 1 &&
		  A(3, 0)[0] == 0x52, "a message each way over the one pair");
}

/* ---- 3. a peer that is gone ------------------------------------------ */

static int dead_pipe[2];
static pid_t dead_pid;

/* Forked first: opens its CM, tells its address, waits to be killed. */
static void fork_dead(void)
{
	struct cnode child;

	if (pipe(dead_pipe))
		tap_bail("pipe");
	dead_pid = fork();
	if (dead_pid)
		return;
	memset(&child, 0, sizeof(child));
	if (node_open(&child, NN, LONG_MS))
		_exit(1);
	if (write(dead_pipe[1], &published[NN], sizeof(published[NN])) !=
	    (ssize_t)sizeof(published[NN]))
		_exit(1);
	pause();
	_exit(0);
}

static void test_dead(void)
{
	static struct req s, r, ok_s, ok_r;
	struct cnode *v = &N[4];
	int st;
	double t0;

	if (read(dead_pipe[0], &published[NN], sizeof(published[NN])) !=
	    (ssize_t)sizeof(published[NN]))
		tap_bail("the child's address");
	kill(dead_pid, SIGKILL);
	waitpid(dead_pid, &st, 0);
	/* node 4 talks to node 1 fine meanwhile */
	tap_check(start(v, 1) == TM_OK && start(v, NN) == TM_OK,
		  "node 4 starts connecting to node 1 and to a process that is gone");
	s.s.cb = ok_s.s.cb = send_cb;
	r.r.cb = ok_r.r.cb = recv_cb;
	s.s.arg = &s;
	r.r.arg = &r;
	ok_s.s.arg = &ok_s;
	ok_r.r.arg = &ok_r;
	tm_engine_isend(v->eng, &s.s, v->peer[NN], 3, 4, 11, A(4, 0), 8,
			v->mr, 0);
	tm_engine_irecv_from(v->eng, &r.r, 3, NN, 11, v->peer[NN], A(4, 1), 8,
			     v->mr);
	tm_engine_irecv(N[1].eng, &ok_r.r, 3, 4, 12, A(1, 20), 8, N[1].mr);
	memset(A(4, 2), 0x44, 8);
	tm_engine_isend(v->eng, &ok_s.s, v->peer[1], 3, 4, 12, A(4, 2), 8,
			v->mr, 0);
	t0 = now_s();
	pump_until(&s.done, 1);
	pump_until(&r.done, 1);
	pump_until(&ok_r.done, 1);
	tap_check(v->state[NN] == 3 && v->err[NN] == ETIMEDOUT,
		  "the connection to the gone process fails: timed out (state %d, %s)",
		  v->state[NN], strerror(v->err[NN]));
	tap_check(s.done == 1 && s.s.status == TM_REQ_ERROR,
		  "the send queued for it fails (status %d)", s.s.status);
	tap_check(r.done == 1 && r.r.status == TM_REQ_ERROR,
		  "the receive naming it fails (status %d)", r.r.status);
	tap_check(ok_r.done == 1 && A(1, 20)[0] == 0x44 && v->state[1] == 2,
		  "node 4's other peer is not affected");
	tap_diag("failed after %.2f s (deadline %u ms)", now_s() - t0,
		 SHORT_MS);
}

/* ---- 4. hostile datagrams -------------------------------------------- */

struct evil {
	struct tm_dev *dev;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	uint8_t buf[512];
	struct tm_cm_addr me;
};

static int evil_open(struct evil *e, const struct tm_cm_addr *to)
{
	const struct tm_verbs *v;
	struct tm_dev_config dc;
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 64,
						.max_recv_wr = 1,
						.max_send_sge = 1,
						.max_recv_sge = 1 } };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qkey = TM_CM_QKEY };
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };

	tm_dev_config_default(&dc);
	dc.provider = "soft";
	if (tm_dev_open(&dc, &e->dev))
		return -1;
	v = e->dev->verbs;
	e->cq = v->create_cq(e->dev->ctx, 128, NULL, NULL, 0);
	qa.send_cq = qa.recv_cq = e->cq;
	e->qp = e->cq ? v->create_qp(e->dev->base_pd, &qa) : NULL;
	if (!e->qp || v->modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					       IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (v->modify_qp(e->qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	if (v->modify_qp(e->qp, &a, IBV_QP_STATE))
		return -1;
	memcpy(aa.grh.dgid.raw, to->gid, 16);
	e->ah = v->create_ah(e->dev->base_pd, &aa);
	if (tm_dev_reg(e->dev, e->buf, sizeof(e->buf), 0, &e->mr) || !e->ah)
		return -1;
	memcpy(e->me.gid, e->dev->gid.raw, 16);
	e->me.lid = e->dev->lid;
	e->me.qpn = e->qp->qp_num;
	return 0;
}

static void evil_close(struct evil *e)
{
	const struct tm_verbs *v = e->dev->verbs;

	tm_dev_dereg(e->dev, e->mr);
	v->destroy_ah(e->ah);
	v->destroy_qp(e->qp);
	v->destroy_cq(e->cq);
	tm_dev_close(e->dev);
}

/* One datagram of len bytes from e->buf to qpn with qkey: post's result. */
static int evil_send(struct evil *e, uint32_t qpn, uint32_t qkey,
		     uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf, .length = len,
			       .lkey = e->mr->lkey };
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND, .sg_list = &sge,
				  .num_sge = 1 }, *bad;
	struct ibv_wc wc[8];

	wr.wr.ud.ah = e->ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	while (ibv_poll_cq(e->cq, 8, wc) > 0)
		;
	return ibv_post_send(e->qp, &wr, &bad);
}

static struct tm_cm_msg *evil_msg(struct evil *e, int type, uint64_t src_id,
				  uint64_t dst_id, uint64_t nonce)
{
	struct tm_cm_msg *m = (void *)e->buf;

	memset(m, 0, sizeof(*m));
	m->magic = TM_CM_MAGIC;
	m->version = TM_CM_VERSION;
	m->type = (uint16_t)type;
	m->job = JOB;
	m->src_id = src_id;
	m->dst_id = dst_id;
	m->src_nonce = nonce;
	m->src = e->me;
	m->pair.rx_qpn = m->pair.tx_qpn = 0x101; /* some pair */
	memcpy(m->pair.gid, e->me.gid, 16);
	return m;
}

/* Sends what evil_msg built to node 4 and steps: did bad[why] go up? */
static int refused(struct evil *e, int why, uint32_t len)
{
	uint64_t before = cms(4).bad[why];

	if (evil_send(e, published[4].qpn, TM_CM_QKEY, len))
		return 0;
	for (int i = 0; i < 20; i++)
		step();
	return cms(4).bad[why] == before + 1;
}

static void test_hostile(void)
{
	struct evil e;
	struct tm_cm_msg *m;
	struct softhca_stats ss0, ss1;
	static struct req s, r;
	uint64_t dup;

	memset(&e, 0, sizeof(e));
	if (evil_open(&e, &published[4]))
		tap_bail("the attacker's context");
	published[5] = e.me; /* id 5 is the attacker's, as far as it goes */
	N[5].dev = NULL;

	evil_msg(&e, TM_CM_REQ, 5, 4, 1);
	tap_check(refused(&e, TM_CM_BAD_SIZE, 10), "a 10-byte datagram: wrong size");
	tap_check(refused(&e, TM_CM_BAD_SIZE, sizeof(*m) + 8),
		  "a datagram 8 bytes too long: wrong size");
	m = evil_msg(&e, TM_CM_REQ, 5, 4, 1);
	m->magic ^= 1;
	tap_check(refused(&e, TM_CM_BAD_HEADER, sizeof(*m)), "bad magic");
	m = evil_msg(&e, 9, 5, 4, 1);
	tap_check(refused(&e, TM_CM_BAD_HEADER, sizeof(*m)), "unknown type");
	m = evil_msg(&e, TM_CM_REQ, 5, 4, 1);
	m->job = JOB + 1;
	tap_check(refused(&e, TM_CM_BAD_JOB, sizeof(*m)), "another job's key");
	evil_msg(&e, TM_CM_REQ, 5, 3, 1);
	tap_check(refused(&e, TM_CM_BAD_JOB, sizeof(*m)), "for another id");
	m = evil_msg(&e, TM_CM_REQ, 0, 4, 1);
	m->src = published[0]; /* node 0's address, from the attacker's GID */
	tap_check(refused(&e, TM_CM_BAD_SOURCE, sizeof(*m)),
		  "claiming node 0's address from another GID");
	evil_msg(&e, TM_CM_REQ, 2, 4, 1); /* id 2 published another address */
	tap_check(refused(&e, TM_CM_BAD_REFUSED, sizeof(*m)) && !N[4].state[2],
		  "claiming to be id 2 from the attacker's own address: refused, no pair made");
	evil_msg(&e, TM_CM_REQ, 1, 4, 1); /* 4-1 is up: not from there */
	tap_check(refused(&e, TM_CM_BAD_STALE, sizeof(*m)),
		  "a request for a connection that exists, from elsewhere");
	m = evil_msg(&e, TM_CM_REP, 5, 4, 1);
	m->dst_nonce = 77;
	tap_check(refused(&e, TM_CM_BAD_STALE, sizeof(*m)),
		  "a reply to nothing, with a guessed nonce");
	evil_msg(&e, TM_CM_RTU, 5, 4, 1);
	tap_check(refused(&e, TM_CM_BAD_STALE, sizeof(*m)), "an RTU for nothing");

	/* id 5 asks as itself: accepted, then replayed, then another nonce */
	evil_msg(&e, TM_CM_REQ, 5, 4, 1);
	evil_send(&e, published[4].qpn, TM_CM_QKEY, sizeof(*m));
	for (int i = 0; i < 20; i++)
		step();
	tap_check(N[4].state[5] == 1 && cms(4).accepted == 1,
		  "a request from id 5 at its own address is accepted (state %d)",
		  N[4].state[5]);
	dup = cms(4).dup;
	evil_send(&e, published[4].qpn, TM_CM_QKEY, sizeof(*m));
	for (int i = 0; i < 20; i++)
		step();
	tap_check(cms(4).dup == dup + 1 && cms(4).accepted == 1,
		  "the same request replayed is answered again, nothing new made");
	evil_msg(&e, TM_CM_REQ, 5, 4, 2);
	tap_check(refused(&e, TM_CM_BAD_STALE, sizeof(*m)),
		  "a request from another instance of id 5 while one is under way");

	/* below the CM: the soft HCA's own checks */
	softhca_query_stats(N[4].dev->ctx, &ss0);
	evil_msg(&e, TM_CM_REQ, 5, 4, 1);
	evil_send(&e, published[4].qpn, TM_CM_QKEY + 1, sizeof(*m));
	evil_send(&e, published[4].qpn + 1, TM_CM_QKEY, sizeof(*m));
	for (int i = 0; i < 20; i++)
		step();
	softhca_query_stats(N[4].dev->ctx, &ss1);
	tap_check(ss1.ud_bad == ss0.ud_bad + 2,
		  "a wrong qkey and a wrong QP number are dropped by the soft HCA (%llu)",
		  (unsigned long long)(ss1.ud_bad - ss0.ud_bad));
	tap_check(evil_send(&e, published[4].qpn, TM_CM_QKEY, 300) == EINVAL,
		  "a UD send longer than 256 bytes is refused at post");

	/* id 5 never finishes: its connection fails at the deadline alone */
	pump_until(&N[4].state[5], 3);
	tap_check(N[4].state[5] == 3 && N[4].err[5] == ETIMEDOUT,
		  "the attacker's half-open connection fails at the deadline (%s)",
		  strerror(N[4].err[5]));
	/* and nothing was lost: node 4 and node 1 still talk */
	s.s.cb = send_cb;
	s.s.arg = &s;
	r.r.cb = recv_cb;
	r.r.arg = &r;
	memset(A(4, 3), 0x66, 8);
	tm_engine_irecv(N[1].eng, &r.r, 3, 4, 13, A(1, 21), 8, N[1].mr);
	tm_engine_isend(N[4].eng, &s.s, N[4].peer[1], 3, 4, 13, A(4, 3), 8,
			N[4].mr, 0);
	pump_until(&r.done, 1);
	tap_check(r.done == 1 && A(1, 21)[0] == 0x66,
		  "node 4 and node 1 still talk after all that");
	tap_diag("last refusal: %s", tm_cm_bad_str(cms(4).last_bad));
	evil_close(&e);
}

int main(void)
{
	struct softhca_config cfg;

	signal(SIGPIPE, SIG_IGN);
	fork_dead(); /* before any device: no threads in the child */
	softhca_config_default(&cfg);
	if (softhca_set_config(&cfg))
		tap_bail("soft HCA config");
	for (int i = 0; i < 4; i++)
		if (node_open(&N[i], i, LONG_MS))
			tap_bail("a node");
	if (node_open(&N[4], 4, SHORT_MS))
		tap_bail("node 4");
	test_order();
	test_crossing();
	test_dead();
	test_hostile();
	for (int i = 0; i < NN; i++) {
		if (!N[i].dev)
			continue;
		tm_cm_destroy(N[i].cm);
		tm_engine_destroy(N[i].eng);
		for (int j = 0; j <= NN; j++)
			tm_dev_pair_destroy(N[i].dev, &N[i].qp[j]);
		tm_dev_dereg(N[i].dev, N[i].mr);
		free(N[i].arena);
		tm_dev_close(N[i].dev);
	}
	return tap_done();
}
