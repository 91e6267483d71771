/*
 * tm_dev_cm.c - the connection manager (tm_dev_cm.h): REQ, REP and RTU
 * over one UD QP, in the manner of Open MPI's openib UDCM, addressed by
 * GID so that RoCE works as well as InfiniBand and the soft HCA.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <ucs/datastruct/khash.h>
#include <ucs/datastruct/list.h>

#include "dev/tm_dev_cm.h"
#include "verbs/tm_verbs.h"

#define CM_NRECV 32
#define CM_NSEND 16
#define CM_GRH 40
#define CM_BUF 512           /* per buffer: GRH + message, with room */
#define CM_RETRY_MAX_MS 1000
#define CM_HOP_LIMIT 64
#define CM_MAGIC TM_CM_MAGIC
#define CM_VERSION TM_CM_VERSION
#define CM_QKEY TM_CM_QKEY
#define MSG_REQ TM_CM_REQ
#define MSG_REP TM_CM_REP
#define MSG_RTU TM_CM_RTU
#define cm_msg tm_cm_msg

enum rec_state {
	REC_ACTIVE,      /* REQ sent, waiting for the REP */
	REC_PASSIVE,     /* REP sent, waiting for the RTU */
	REC_UP,
	REC_FAILED,
};

struct cm_rec {
	uint64_t id;
	int state;
	bool was_active;             /* UP: we sent the REQ that won */
	struct tm_dev_pair *pair;
	struct tm_cm_addr peer;      /* its CM */
	struct ibv_ah *ah;
	uint64_t peer_nonce;
	struct tm_dev_pair_addr remote;
	uint64_t deadline_ns, next_ns;
	uint32_t wait_ms;
	ucs_list_link_t link;        /* on cm->pending while ACTIVE/PASSIVE */
};

KHASH_MAP_INIT_INT64(cm_recs, struct cm_rec *)

struct tm_cm {
	struct tm_dev *dev;
	struct tm_cm_config cfg;
	struct tm_cm_ops ops;
	uint64_t nonce;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *bufs;               /* CM_NRECV receive, then CM_NSEND send */
	bool send_busy[CM_NSEND];
	khash_t(cm_recs) recs;
	ucs_list_link_t pending;
	uint32_t npending;
	struct tm_cm_stats st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *tm_cm_bad_str(int bad)
{
	static const char *const s[TM_CM_NBAD] = {
		[TM_CM_BAD_SIZE] = "a datagram of the wrong size",
		[TM_CM_BAD_HEADER] = "a datagram with a bad header",
		[TM_CM_BAD_JOB] = "a datagram of another job or for another id",
		[TM_CM_BAD_SOURCE] = "a datagram whose GID is not its sender's",
		[TM_CM_BAD_REFUSED] = "a request from an id that is not at that address",
		[TM_CM_BAD_STALE] = "a datagram that fits no connection (replayed or stale)",
		[TM_CM_BAD_RECV] = "a receive that failed",
	};

	return bad >= 0 && bad < TM_CM_NBAD ? s[bad] : "nothing";
}

static void bad(struct tm_cm *cm, int why)
{
	cm->st.bad[why]++;
	cm->st.last_bad = why;
}

static uint8_t *rbuf(struct tm_cm *cm, uint32_t i)
{
	return cm->bufs + (size_t)i * CM_BUF;
}

static uint8_t *sbuf(struct tm_cm *cm, uint32_t i)
{
	return cm->bufs + (size_t)(CM_NRECV + i) * CM_BUF;
}

static int post_recv(struct tm_cm *cm, uint32_t i)
{
	struct ibv_sge sge = { .addr = (uintptr_t)rbuf(cm, i),
			       .length = CM_BUF, .lkey = cm->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *badwr;

	return ibv_post_recv(cm->qp, &wr, &badwr) ? TM_ERR_IO : TM_OK;
}

static int qp_up(struct tm_cm *cm)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
				 .port_num = cm->dev->port,
				 .qkey = CM_QKEY };
	const struct tm_verbs *v = cm->dev->verbs;

	if (v->modify_qp(cm->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					     IBV_QP_PORT | IBV_QP_QKEY))
		return TM_ERR_IO;
	a.qp_state = IBV_QPS_RTR;
	if (v->modify_qp(cm->qp, &a, IBV_QP_STATE))
		return TM_ERR_IO;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (v->modify_qp(cm->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return TM_ERR_IO;
	for (uint32_t i = 0; i < CM_NRECV; i++)
		if (post_recv(cm, i))
			return TM_ERR_IO;
	return TM_OK;
}

static int cm_open(struct tm_cm *cm)
{
	const struct tm_verbs *v = cm->dev->verbs;
	struct ibv_cq_init_attr_ex ca = {
		.cqe = CM_NRECV + CM_NSEND,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = CM_NSEND, .max_recv_wr = CM_NRECV,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD,
	};
	struct ibv_cq_ex *cq;

	if (cm->dev->td) { /* on the device's thread domain, as its CQs */
		ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS |
			       IBV_CQ_INIT_ATTR_MASK_PD;
		ca.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
		ca.parent_domain = cm->dev->pd;
	}
	cq = ibv_create_cq_ex(cm->dev->ctx, &ca);
	if (!cq)
		return TM_ERR_IO;
	cm->cq = ibv_cq_ex_to_cq(cq);
	cm->bufs = aligned_alloc(4096, (size_t)(CM_NRECV + CM_NSEND) * CM_BUF);
	if (!cm->bufs)
		return TM_ERR_NO_MEMORY;
	if (tm_dev_reg(cm->dev, cm->bufs, (size_t)(CM_NRECV + CM_NSEND) * CM_BUF,
		       IBV_ACCESS_LOCAL_WRITE, &cm->mr))
		return TM_ERR_IO;
	qa.send_cq = qa.recv_cq = cm->cq;
	cm->qp = v->create_qp(cm->dev->pd, &qa);
	if (!cm->qp)
		return TM_ERR_IO;
	return qp_up(cm);
}

int tm_cm_create(struct tm_dev *dev, const struct tm_cm_config *cfg,
		 const struct tm_cm_ops *ops, struct tm_cm **out)
{
	struct tm_cm *cm = calloc(1, sizeof(*cm));
	int rc;

	if (!cm)
		return TM_ERR_NO_MEMORY;
	cm->dev = dev;
	cm->cfg = *cfg;
	if (!cm->cfg.retry_ms)
		cm->cfg.retry_ms = 100;
	if (!cm->cfg.timeout_ms)
		cm->cfg.timeout_ms = 60000;
	cm->ops = *ops;
	cm->st.last_bad = -1;
	kh_init_inplace(cm_recs, &cm->recs);
	ucs_list_head_init(&cm->pending);
	if (getrandom(&cm->nonce, sizeof(cm->nonce), 0) !=
	    (ssize_t)sizeof(cm->nonce))
		cm->nonce = now_ns() ^ (uint64_t)(uintptr_t)cm;
	rc = cm_open(cm);
	if (rc != TM_OK) {
		tm_cm_destroy(cm);
		return rc;
	}
	*out = cm;
	return TM_OK;
}

void tm_cm_destroy(struct tm_cm *cm)
{
	const struct tm_verbs *v;
	struct cm_rec *r;

	if (!cm)
		return;
	v = cm->dev->verbs;
	kh_foreach_value(&cm->recs, r, {
		if (r->ah)
			v->destroy_ah(r->ah);
		free(r);
	});
	kh_destroy_inplace(cm_recs, &cm->recs);
	if (cm->qp)
		v->destroy_qp(cm->qp);
	if (cm->mr)
		tm_dev_dereg(cm->dev, cm->mr);
	if (cm->cq)
		v->destroy_cq(cm->cq);
	free(cm->bufs);
	free(cm);
}

void tm_cm_get_addr(const struct tm_cm *cm, struct tm_cm_addr *a)
{
	memset(a, 0, sizeof(*a));
	memcpy(a->gid, cm->dev->gid.raw, sizeof(a->gid));
	a->lid = cm->dev->lid;
	a->qpn = cm->qp->qp_num;
}

uint32_t tm_cm_pending(const struct tm_cm *cm)
{
	return cm->npending;
}

void tm_cm_stats_get(const struct tm_cm *cm, struct tm_cm_stats *st)
{
	*st = cm->st;
}

/* ---- records ---------------------------------------------------------- */

static struct cm_rec *rec_find(struct tm_cm *cm, uint64_t id)
{
	khiter_t k = kh_get(cm_recs, &cm->recs, id);

	return k == kh_end(&cm->recs) ? NULL : kh_value(&cm->recs, k);
}

static struct cm_rec *rec_new(struct tm_cm *cm, uint64_t id,
			      const struct tm_cm_addr *peer,
			      struct tm_dev_pair *pair)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = cm->dev->port };
	struct cm_rec *r = calloc(1, sizeof(*r));
	khiter_t k;
	int ret;

	if (!r)
		return NULL;
	aa.dlid = peer->lid;
	memcpy(aa.grh.dgid.raw, peer->gid, 16);
	aa.grh.sgid_index = (uint8_t)cm->dev->gid_index;
	aa.grh.hop_limit = CM_HOP_LIMIT;
	r->ah = cm->dev->verbs->create_ah(cm->dev->pd, &aa);
	k = r->ah ? kh_put(cm_recs, &cm->recs, id, &ret) : kh_end(&cm->recs);
	if (!r->ah || ret < 0) {
		if (r->ah)
			cm->dev->verbs->destroy_ah(r->ah);
		free(r);
		return NULL;
	}
	kh_value(&cm->recs, k) = r;
	r->id = id;
	r->peer = *peer;
	r->pair = pair;
	return r;
}

/* The record starts waiting (ACTIVE or PASSIVE), with its deadline. */
static void rec_wait(struct tm_cm *cm, struct cm_rec *r, int state)
{
	uint64_t now = now_ns();

	if (r->state != REC_ACTIVE && r->state != REC_PASSIVE) {
		ucs_list_add_tail(&cm->pending, &r->link);
		cm->npending++;
		r->deadline_ns = now + cm->cfg.timeout_ms * 1000000ull;
	}
	r->state = state;
	r->wait_ms = cm->cfg.retry_ms;
	r->next_ns = now + r->wait_ms * 1000000ull;
}

/* Waiting ends: up or failed; the caller is told. */
static void rec_end(struct tm_cm *cm, struct cm_rec *r, int status, int err)
{
	if (r->state == REC_ACTIVE || r->state == REC_PASSIVE) {
		ucs_list_del(&r->link);
		cm->npending--;
	}
	r->was_active = r->state == REC_ACTIVE;
	r->state = status == TM_OK ? REC_UP : REC_FAILED;
	if (status == TM_OK)
		cm->st.connected++;
	else
		cm->st.failed++;
	cm->ops.done(cm->ops.arg, r->id, status, err);
}

/* ---- datagrams -------------------------------------------------------- */

static void send_msg(struct tm_cm *cm, struct cm_rec *r, int type)
{
	struct cm_msg *m;
	struct ibv_sge sge;
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND, .num_sge = 1,
				  .sg_list = &sge,
				  .send_flags = IBV_SEND_SIGNALED }, *badwr;
	uint32_t i;

	for (i = 0; i < CM_NSEND && cm->send_busy[i]; i++)
		;
	if (i == CM_NSEND) { /* lost, as a datagram may be: resent later */
		cm->st.send_fail++;
		return;
	}
	m = (struct cm_msg *)sbuf(cm, i);
	memset(m, 0, sizeof(*m));
	m->magic = CM_MAGIC;
	m->version = CM_VERSION;
	m->type = (uint16_t)type;
	m->job = cm->cfg.job;
	m->src_id = cm->cfg.my_id;
	m->dst_id = r->id;
	m->src_nonce = cm->nonce;
	m->dst_nonce = type == MSG_REQ ? 0 : r->peer_nonce;
	tm_cm_get_addr(cm, &m->src);
	if (type != MSG_RTU)
		tm_dev_pair_addr(cm->dev, r->pair, &m->pair);
	sge.addr = (uintptr_t)m;
	sge.length = sizeof(*m);
	sge.lkey = cm->mr->lkey;
	wr.wr_id = CM_NRECV + i;
	wr.wr.ud.ah = r->ah;
	wr.wr.ud.remote_qpn = r->peer.qpn;
	wr.wr.ud.remote_qkey = CM_QKEY;
	if (ibv_post_send(cm->qp, &wr, &badwr)) {
		cm->st.send_fail++;
		return;
	}
	cm->send_busy[i] = true;
	cm->st.sent++;
}

static int connect_pair(struct tm_cm *cm, struct cm_rec *r,
			const struct cm_msg *m)
{
	r->remote = m->pair;
	r->peer_nonce = m->src_nonce;
	errno = 0;
	if (tm_dev_pair_connect(cm->dev, r->pair, &m->pair) == TM_OK)
		return 0;
	rec_end(cm, r, TM_ERR_IO, errno ? errno : EIO);
	return -1;
}

/* As the passive side: connect and answer. */
static void accept_req(struct tm_cm *cm, struct cm_rec *r,
		       const struct cm_msg *m)
{
	if (connect_pair(cm, r, m))
		return;
	cm->st.accepted++;
	rec_wait(cm, r, REC_PASSIVE);
	send_msg(cm, r, MSG_REP);
}

static bool same_addr(const struct tm_cm_addr *a, const struct tm_cm_addr *b)
{
	return !memcmp(a->gid, b->gid, 16) && a->qpn == b->qpn &&
	       a->lid == b->lid;
}

static bool same_pair(const struct tm_dev_pair_addr *a,
		      const struct tm_dev_pair_addr *b)
{
	return a->rx_qpn == b->rx_qpn && a->tx_qpn == b->tx_qpn &&
	       !memcmp(a->gid, b->gid, 16);
}

static void on_req(struct tm_cm *cm, const struct cm_msg *m)
{
	struct cm_rec *r = rec_find(cm, m->src_id);
	struct tm_dev_pair *pair = NULL;

	if (!r) {
		if (cm->ops.request(cm->ops.arg, m->src_id, &m->src, &pair) !=
			    TM_OK || !pair) {
			bad(cm, TM_CM_BAD_REFUSED);
			return;
		}
		r = rec_new(cm, m->src_id, &m->src, pair);
		if (r) {
			r->state = REC_FAILED; /* (not waiting yet) */
			accept_req(cm, r, m);
		}
		return;
	}
	if (!same_addr(&r->peer, &m->src)) {
		bad(cm, TM_CM_BAD_STALE);
		return;
	}
	if (r->state == REC_ACTIVE) {
		/* both asked: the lower id's request wins */
		cm->st.crossed++;
		if (cm->cfg.my_id > m->src_id)
			accept_req(cm, r, m);
		return;
	}
	if (r->peer_nonce == m->src_nonce && same_pair(&r->remote, &m->pair) &&
	    (r->state == REC_PASSIVE || (r->state == REC_UP && !r->was_active))) {
		cm->st.dup++; /* our REP was lost */
		send_msg(cm, r, MSG_REP);
	} else if (r->state == REC_UP && r->was_active &&
		   r->peer_nonce == m->src_nonce) {
		cm->st.dup++; /* the losing side's request of a crossing */
	} else {
		bad(cm, TM_CM_BAD_STALE);
	}
}

static void on_rep(struct tm_cm *cm, const struct cm_msg *m)
{
	struct cm_rec *r = rec_find(cm, m->src_id);

	if (!r || m->dst_nonce != cm->nonce || !same_addr(&r->peer, &m->src)) {
		bad(cm, TM_CM_BAD_STALE);
	} else if (r->state == REC_ACTIVE) {
		if (connect_pair(cm, r, m))
			return;
		send_msg(cm, r, MSG_RTU);
		rec_end(cm, r, TM_OK, 0);
	} else if (r->state == REC_UP && r->was_active &&
		   r->peer_nonce == m->src_nonce &&
		   same_pair(&r->remote, &m->pair)) {
		cm->st.dup++; /* our RTU was lost */
		send_msg(cm, r, MSG_RTU);
	} else {
		bad(cm, TM_CM_BAD_STALE);
	}
}

static void on_rtu(struct tm_cm *cm, const struct cm_msg *m)
{
	struct cm_rec *r = rec_find(cm, m->src_id);

	if (!r || m->dst_nonce != cm->nonce || r->peer_nonce != m->src_nonce ||
	    !same_addr(&r->peer, &m->src))
		bad(cm, TM_CM_BAD_STALE);
	else if (r->state == REC_PASSIVE)
		rec_end(cm, r, TM_OK, 0);
	else if (r->state == REC_UP)
		cm->st.dup++;
	else
		bad(cm, TM_CM_BAD_STALE);
}

/*
 * Did the datagram come from gid, by its 40-byte GRH area?  On RoCE v2
 * over IPv4 that area holds 20 undefined bytes and then the IPv4 header,
 * whose source address (at byte 12 of it) is the sender's GID's
 * IPv4-mapped tail; otherwise it is a GRH, with the source GID at byte 8
 * (rdma-core libibverbs/verbs.c, get_grh_header_version, as
 * ibv_init_ah_from_wc reads it).
 */
bool tm_cm_grh_from(const uint8_t *grh, const uint8_t *gid)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };

	if ((grh[0] >> 4) != 6 && (grh[20] >> 4) == 4)
		return !memcmp(gid, v4mapped, sizeof(v4mapped)) &&
		       !memcmp(grh + 20 + 12, gid + 12, 4);
	return !memcmp(grh + 8, gid, 16);
}

/* One received datagram: checked, then handled by type. */
static void on_recv(struct tm_cm *cm, const struct ibv_wc *wc)
{
	const uint8_t *b = rbuf(cm, (uint32_t)wc->wr_id);
	struct cm_msg m;

	if (wc->status != IBV_WC_SUCCESS) {
		bad(cm, TM_CM_BAD_RECV);
		return;
	}
	cm->st.received++;
	if (wc->byte_len != CM_GRH + sizeof(m)) {
		bad(cm, TM_CM_BAD_SIZE);
		return;
	}
	memcpy(&m, b + CM_GRH, sizeof(m));
	if (m.magic != CM_MAGIC || m.version != CM_VERSION ||
	    m.type < MSG_REQ || m.type > MSG_RTU) {
		bad(cm, TM_CM_BAD_HEADER);
	} else if (m.job != cm->cfg.job || m.dst_id != cm->cfg.my_id ||
		   m.src_id == cm->cfg.my_id) {
		bad(cm, TM_CM_BAD_JOB);
	} else if ((wc->wc_flags & IBV_WC_GRH) && !tm_cm_grh_from(b, m.src.gid)) {
		bad(cm, TM_CM_BAD_SOURCE);
	} else if (m.type == MSG_REQ) {
		on_req(cm, &m);
	} else if (m.type == MSG_REP) {
		on_rep(cm, &m);
	} else {
		on_rtu(cm, &m);
	}
}

int tm_cm_connect(struct tm_cm *cm, uint64_t id, const struct tm_cm_addr *addr,
		  struct tm_dev_pair *pair)
{
	struct cm_rec *r;

	if (id == cm->cfg.my_id || rec_find(cm, id))
		return TM_ERR_INVALID;
	r = rec_new(cm, id, addr, pair);
	if (!r)
		return TM_ERR_NO_MEMORY;
	r->state = REC_FAILED; /* (not waiting yet) */
	rec_wait(cm, r, REC_ACTIVE);
	send_msg(cm, r, MSG_REQ);
	return TM_OK;
}

/* Resends what is due, fails what is late. */
static void run_timers(struct tm_cm *cm)
{
	struct cm_rec *r, *t;
	uint64_t now = now_ns();

	ucs_list_for_each_safe(r, t, &cm->pending, link) {
		if (now >= r->deadline_ns) {
			rec_end(cm, r, TM_ERR_IO, ETIMEDOUT);
		} else if (now >= r->next_ns) {
			cm->st.resent++;
			send_msg(cm, r, r->state == REC_ACTIVE ? MSG_REQ
							      : MSG_REP);
			if (r->wait_ms < CM_RETRY_MAX_MS)
				r->wait_ms *= 2;
			r->next_ns = now + r->wait_ms * 1000000ull;
		}
	}
}

int tm_cm_progress(struct tm_cm *cm)
{
	struct ibv_wc wc[8];
	int n, i, done = 0;

	while ((n = ibv_poll_cq(cm->cq, 8, wc)) > 0) {
		for (i = 0; i < n; i++) {
			if (wc[i].wr_id >= CM_NRECV) {
				cm->send_busy[wc[i].wr_id - CM_NRECV] = false;
				continue;
			}
			on_recv(cm, &wc[i]);
			if (post_recv(cm, (uint32_t)wc[i].wr_id))
				return TM_ERR_IO;
		}
		done += n;
	}
	if (n < 0)
		return TM_ERR_IO;
	if (cm->npending)
		run_timers(cm);
	return done;
}
