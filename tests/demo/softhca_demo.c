/*
 * softhca_demo.c - two processes exchange tagged messages through the soft
 * HCA, using only rdma-core verbs (and the library-verbs table).
 *
 * The parent forks a sender and a receiver.  Each opens the soft HCA,
 * creates a PD, a CQ_ex, a TM-SRQ and an RC QP attached to it, and posts a
 * few plain SRQ buffers.  They swap {GID, QP number} over pipes and bring
 * their QPs to RTS.  The receiver adds tagged buffers to its TM list; the
 * sender then sends:
 *
 *   0  EAGER tag 0x100, 100 B          matches entry A (one completion)
 *   1  EAGER tag 0x999, 200 B          matches nothing: unexpected
 *   2  NO_TAG, 50 B                    plain buffer, never matched
 *   3  EAGER tag 7:42, 64 B            matches entry B (tag 7:*, masked)
 *   4  EAGER tag 0x101, 10000 B        entry C, longer than the MTU
 *   5  RNDV  tag 0x102, 50000 B        entry D: the card RDMA-reads the
 *                                      sender's buffer and sends FIN
 *
 * Both sides print every completion and check payload bytes; the receiver
 * answers the unexpected message with a TAG_SYNC.  Exit status 0 when
 * everything arrived as the TM-SRQ model says.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include <infiniband/verbs.h>
#include <infiniband/tm_types.h>

#include "verbs/tm_verbs.h"
#include "softhca/softhca.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define NUM_PLAIN	8
#define PLAIN_SIZE	8192
#define ARENA_SIZE	(1 << 20)
#define TIMEOUT_SEC	20

/* wr_id spaces */
#define WRID_TAGGED	0x1000
#define WRID_PLAIN	0x2000
#define WRID_OP		0x3000
#define WRID_SEND	0x4000

#define TAG_7_ANY	(7ULL << 32)
#define MASK_HI		0xffffffff00000000ULL

struct conn_info {
	union ibv_gid gid;
	uint32_t qp_num;
};

struct proc {
	const char *who;
	const struct tm_verbs *sv;
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq_ex *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;	/* the arena: plain and tagged buffers, sends */
	uint8_t *arena;
	size_t arena_used;
	uint8_t *plain[NUM_PLAIN];
	int rfd, wfd;		/* pipe ends to the peer */
	int errors;
};

/* One completion, as read from the CQ_ex. */
struct cqe {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	unsigned int flags;
	uint32_t byte_len;
	uint32_t qp_num;
	struct ibv_wc_tm_info tm;
};

/* The messages, as the sender sends them. */
enum msg_kind { MSG_EAGER, MSG_NO_TAG, MSG_RNDV };

struct msg {
	enum msg_kind kind;
	uint64_t tag;
	uint32_t len;
	int entry;		/* tagged entry expected to match, or -1 */
};

static const struct msg msgs[] = {
	{ MSG_EAGER, 0x100, 100, 0 },
	{ MSG_EAGER, 0x999, 200, -1 },
	{ MSG_NO_TAG, 0, 50, -1 },
	{ MSG_EAGER, TAG_7_ANY | 42, 64, 1 },
	{ MSG_EAGER, 0x101, 10000, 2 },
	{ MSG_RNDV, 0x102, 50000, 3 },
};

/* The receiver's tagged buffers. */
struct entry {
	uint64_t tag;
	uint64_t mask;
	uint32_t size;
	int msg;		/* message expected to land here */
	uint8_t *buf;
	uint32_t handle;
	unsigned int seen;	/* union of wc flags */
	uint32_t data_len;
	bool done;
};

static struct entry entries[] = {
	{ .tag = 0x100, .mask = ~0ULL, .size = 256, .msg = 0 },
	{ .tag = TAG_7_ANY, .mask = MASK_HI, .size = 256, .msg = 3 },
	{ .tag = 0x101, .mask = ~0ULL, .size = 16384, .msg = 4 },
	{ .tag = 0x102, .mask = ~0ULL, .size = 65536, .msg = 5 },
};

static void say(struct proc *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void say(struct proc *p, const char *fmt, ...)
{
	va_list ap;

	printf("[%s %d] ", p->who, (int)getpid());
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

#define fail(p, ...)					\
	do {						\
		say(p, "FAIL: " __VA_ARGS__);		\
		(p)->errors++;				\
	} while (0)

static void die(struct proc *p, const char *what, int err)
{
	say(p, "FATAL: %s: %s", what, strerror(err));
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint8_t pattern(unsigned int msg, size_t i)
{
	return (uint8_t)(msg * 31 + i * 7 + 1);
}

static void fill(uint8_t *buf, unsigned int msg, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = pattern(msg, i);
}

/* Returns the offset of the first bad byte, or len. */
static size_t check(const uint8_t *buf, unsigned int msg, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (buf[i] != pattern(msg, i))
			break;
	return i;
}

static const char *opcode_str(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND:		return "SEND";
	case IBV_WC_RDMA_READ:		return "RDMA_READ";
	case IBV_WC_RECV:		return "RECV";
	case IBV_WC_TM_ADD:		return "TM_ADD";
	case IBV_WC_TM_DEL:		return "TM_DEL";
	case IBV_WC_TM_SYNC:		return "TM_SYNC";
	case IBV_WC_TM_RECV:		return "TM_RECV";
	case IBV_WC_TM_NO_TAG:		return "TM_NO_TAG";
	default:			return "?";
	}
}

static void flags_str(unsigned int f, char *s, size_t n)
{
	snprintf(s, n, "%s%s%s%s",
		 f & IBV_WC_TM_MATCH ? " MATCH" : "",
		 f & IBV_WC_TM_DATA_VALID ? " DATA_VALID" : "",
		 f & IBV_WC_TM_SYNC_REQ ? " SYNC_REQ" : "",
		 f & ~(unsigned int)(IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID |
				     IBV_WC_TM_SYNC_REQ) ? " other" : "");
	if (!s[0])
		snprintf(s, n, " -");
}

static void print_cqe(struct proc *p, const struct cqe *c)
{
	char fl[64];

	flags_str(c->flags, fl, sizeof(fl));
	say(p, "cqe wr_id 0x%04llx %-9s status %s flags%s tag 0x%llx priv %u bytes %u qp %u",
	    (unsigned long long)c->wr_id, opcode_str(c->opcode),
	    ibv_wc_status_str(c->status), fl,
	    (unsigned long long)c->tm.tag, c->tm.priv, c->byte_len,
	    c->qp_num);
}

/* ---- pipes -------------------------------------------------------------- */

static void pipe_write(struct proc *p, const void *buf, size_t len)
{
	const uint8_t *b = buf;

	while (len) {
		ssize_t n = write(p->wfd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die(p, "write to peer", n < 0 ? errno : EPIPE);
		b += n;
		len -= n;
	}
}

static void pipe_read(struct proc *p, void *buf, size_t len)
{
	uint8_t *b = buf;

	while (len) {
		ssize_t n = read(p->rfd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die(p, "read from peer", n < 0 ? errno : EPIPE);
		b += n;
		len -= n;
	}
}

/* Non-blocking: 1 and the token if the peer sent one. */
static int pipe_try_token(struct proc *p, char *tok)
{
	struct pollfd pfd = { .fd = p->rfd, .events = POLLIN };

	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	pipe_read(p, tok, 1);
	return 1;
}

/* ---- setup -------------------------------------------------------------- */

static uint8_t *arena_alloc(struct proc *p, size_t len)
{
	uint8_t *b = p->arena + p->arena_used;

	len = (len + 63) & ~(size_t)63;
	if (p->arena_used + len > ARENA_SIZE)
		die(p, "arena", ENOMEM);
	p->arena_used += len;
	return b;
}

static void post_plain(struct proc *p, int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)p->plain[i],
		.length = PLAIN_SIZE,
		.lkey = p->mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = WRID_PLAIN + i,
		.sg_list = &sge,
		.num_sge = 1,
	}, *bad;
	int ret;

	ret = ibv_post_srq_recv(p->srq, &wr, &bad);
	if (ret)
		die(p, "ibv_post_srq_recv", ret);
}

static void setup(struct proc *p)
{
	struct softhca_config cfg;
	char why[200];
	struct ibv_device_attr_ex dattr;
	struct ibv_cq_init_attr_ex cattr = {
		.cqe = 256,
		.wc_flags = IBV_WC_EX_WITH_TM_INFO | IBV_WC_EX_WITH_BYTE_LEN |
			    IBV_WC_EX_WITH_QP_NUM,
	};
	struct ibv_srq_init_attr_ex sattr;
	struct ibv_qp_init_attr qattr;
	int n, i, ret;

	softhca_config_default(&cfg);
	ret = softhca_config_from_env(&cfg, NULL, why, sizeof(why));
	if (ret)
		die(p, why, ret);
	ret = softhca_set_config(&cfg);
	if (ret)
		die(p, "softhca_set_config", ret);

	p->sv = softhca_verbs();
	if (!p->sv)
		die(p, "softhca_verbs", ENODEV);
	p->devs = p->sv->get_device_list(&n);
	if (!p->devs || n < 1)
		die(p, "get_device_list", p->devs ? ENODEV : errno);
	p->ctx = p->sv->open_device(p->devs[0]);
	if (!p->ctx)
		die(p, "open_device", errno);

	memset(&dattr, 0, sizeof(dattr));
	ret = ibv_query_device_ex(p->ctx, NULL, &dattr);
	if (ret)
		die(p, "ibv_query_device_ex", ret);
	say(p, "device %s (%s verbs): tm_caps flags 0x%x max_num_tags %u max_ops %u max_rndv_hdr_size %u max_sge %u",
	    p->sv->get_device_name(p->devs[0]), p->sv->name,
	    dattr.tm_caps.flags, dattr.tm_caps.max_num_tags,
	    dattr.tm_caps.max_ops, dattr.tm_caps.max_rndv_hdr_size,
	    dattr.tm_caps.max_sge);
	if (!(dattr.tm_caps.flags & IBV_TM_CAP_RC))
		die(p, "device lacks IBV_TM_CAP_RC", EOPNOTSUPP);

	p->pd = p->sv->alloc_pd(p->ctx);
	if (!p->pd)
		die(p, "alloc_pd", errno);

	if (posix_memalign((void **)&p->arena, 4096, ARENA_SIZE))
		die(p, "posix_memalign", ENOMEM);
	memset(p->arena, 0, ARENA_SIZE);
	p->mr = p->sv->reg_mr(p->pd, p->arena, ARENA_SIZE,
			      IBV_ACCESS_LOCAL_WRITE);
	if (!p->mr)
		die(p, "reg_mr", errno);

	p->cq = ibv_create_cq_ex(p->ctx, &cattr);
	if (!p->cq)
		die(p, "ibv_create_cq_ex", errno);

	memset(&sattr, 0, sizeof(sattr));
	sattr.attr.max_wr = 64;
	sattr.attr.max_sge = 1;
	sattr.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			  IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sattr.srq_type = IBV_SRQT_TM;
	sattr.pd = p->pd;
	sattr.cq = ibv_cq_ex_to_cq(p->cq);
	sattr.tm_cap.max_num_tags = 32;
	sattr.tm_cap.max_ops = 16;
	p->srq = ibv_create_srq_ex(p->ctx, &sattr);
	if (!p->srq)
		die(p, "ibv_create_srq_ex(IBV_SRQT_TM)", errno);

	memset(&qattr, 0, sizeof(qattr));
	qattr.send_cq = ibv_cq_ex_to_cq(p->cq);
	qattr.recv_cq = ibv_cq_ex_to_cq(p->cq);
	qattr.srq = p->srq;
	qattr.qp_type = IBV_QPT_RC;
	qattr.cap.max_send_wr = 64;
	qattr.cap.max_send_sge = 1;
	p->qp = p->sv->create_qp(p->pd, &qattr);
	if (!p->qp)
		die(p, "create_qp", errno);

	for (i = 0; i < NUM_PLAIN; i++) {
		p->plain[i] = arena_alloc(p, PLAIN_SIZE);
		post_plain(p, i);
	}
	say(p, "PD, CQ_ex, TM-SRQ, RC QP %u ready; %d plain buffers posted",
	    p->qp->qp_num, NUM_PLAIN);
}

static void connect_qp(struct proc *p)
{
	struct conn_info me, peer;
	struct ibv_qp_attr a;
	int ret;

	memset(&me, 0, sizeof(me));
	ret = p->sv->query_gid(p->ctx, 1, 0, &me.gid);
	if (ret)
		die(p, "query_gid", ret);
	me.qp_num = p->qp->qp_num;
	pipe_write(p, &me, sizeof(me));
	pipe_read(p, &peer, sizeof(peer));
	say(p, "peer qp %u gid %016llx:%016llx", peer.qp_num,
	    (unsigned long long)be64toh(peer.gid.global.subnet_prefix),
	    (unsigned long long)be64toh(peer.gid.global.interface_id));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
	ret = p->sv->modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (ret)
		die(p, "modify_qp INIT", ret);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = peer.qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer.gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	ret = p->sv->modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_AV |
			       IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			       IBV_QP_MIN_RNR_TIMER);
	if (ret)
		die(p, "modify_qp RTR", ret);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	ret = p->sv->modify_qp(p->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (ret)
		die(p, "modify_qp RTS", ret);
	say(p, "QP %u -> RTS, connected to qp %u", p->qp->qp_num, peer.qp_num);
}

static void teardown(struct proc *p)
{
	int ret;

	if ((ret = p->sv->destroy_qp(p->qp)))
		fail(p, "destroy_qp: %s", strerror(ret));
	if ((ret = p->sv->destroy_srq(p->srq)))
		fail(p, "destroy_srq: %s", strerror(ret));
	if ((ret = p->sv->destroy_cq(ibv_cq_ex_to_cq(p->cq))))
		fail(p, "destroy_cq: %s", strerror(ret));
	if ((ret = p->sv->dereg_mr(p->mr)))
		fail(p, "dereg_mr: %s", strerror(ret));
	if ((ret = p->sv->dealloc_pd(p->pd)))
		fail(p, "dealloc_pd: %s", strerror(ret));
	if ((ret = p->sv->close_device(p->ctx)))
		fail(p, "close_device: %s", strerror(ret));
	p->sv->free_device_list(p->devs);
	free(p->arena);
}

/* ---- completions -------------------------------------------------------- */

/* Polls up to max completions into out[]; returns how many. */
static int poll_cqes(struct proc *p, struct cqe *out, int max)
{
	struct ibv_poll_cq_attr pa = { 0 };
	int n = 0, ret;

	ret = ibv_start_poll(p->cq, &pa);
	if (ret == ENOENT)
		return 0;
	if (ret)
		die(p, "ibv_start_poll", ret);
	do {
		struct cqe *c = &out[n++];

		memset(c, 0, sizeof(*c));
		c->wr_id = p->cq->wr_id;
		c->status = p->cq->status;
		c->opcode = ibv_wc_read_opcode(p->cq);
		c->flags = ibv_wc_read_wc_flags(p->cq);
		c->byte_len = ibv_wc_read_byte_len(p->cq);
		c->qp_num = ibv_wc_read_qp_num(p->cq);
		ibv_wc_read_tm_info(p->cq, &c->tm);
		print_cqe(p, c);
		if (n == max)
			break;
		ret = ibv_next_poll(p->cq);
	} while (ret == 0);
	if (ret && ret != ENOENT)
		die(p, "ibv_next_poll", ret);
	ibv_end_poll(p->cq);
	return n;
}

static void check_timeout(struct proc *p, double start, const char *what)
{
	if (now() - start > TIMEOUT_SEC) {
		say(p, "FATAL: timed out after %d s waiting for %s",
		    TIMEOUT_SEC, what);
		exit(1);
	}
}

static void post_op(struct proc *p, struct ibv_ops_wr *wr, const char *what)
{
	struct ibv_ops_wr *bad;
	int ret;

	ret = ibv_post_srq_ops(p->srq, wr, &bad);
	if (ret)
		die(p, what, ret);
}

/* Waits for the completion of the signalled list op wr_id. */
static void wait_op(struct proc *p, uint64_t wr_id, enum ibv_wc_opcode op)
{
	double start = now();
	struct cqe c[16];
	bool got = false;
	int i, n;

	while (!got) {
		n = poll_cqes(p, c, ARRAY_SIZE(c));
		for (i = 0; i < n; i++) {
			if (c[i].wr_id != wr_id) {
				fail(p, "unexpected completion wr_id 0x%llx while waiting for op 0x%llx",
				     (unsigned long long)c[i].wr_id,
				     (unsigned long long)wr_id);
				continue;
			}
			got = true;
			if (c[i].opcode != op || c[i].status != IBV_WC_SUCCESS)
				fail(p, "op 0x%llx: %s %s, wanted %s SUCCESS",
				     (unsigned long long)wr_id,
				     opcode_str(c[i].opcode),
				     ibv_wc_status_str(c[i].status),
				     opcode_str(op));
		}
		check_timeout(p, start, opcode_str(op));
	}
}

/* ---- sender ------------------------------------------------------------- */

static int sender(struct proc *p)
{
	struct ibv_mr *rndv_mr = NULL;
	uint8_t *rndv_buf = NULL;
	unsigned int rndv = 0;
	struct cqe c[16];
	unsigned int sends_done = 0;
	bool fin = false;
	double start;
	unsigned int m;
	char tok;
	int i, n, ret;

	setup(p);
	connect_qp(p);

	/* The rendezvous source: its own MR, readable by the peer only. */
	for (m = 0; m < ARRAY_SIZE(msgs); m++) {
		if (msgs[m].kind != MSG_RNDV)
			continue;
		if (posix_memalign((void **)&rndv_buf, 4096, msgs[m].len))
			die(p, "posix_memalign", ENOMEM);
		fill(rndv_buf, m, msgs[m].len);
		rndv_mr = p->sv->reg_mr(p->pd, rndv_buf, msgs[m].len,
					IBV_ACCESS_REMOTE_READ);
		if (!rndv_mr)
			die(p, "reg_mr(rendezvous buffer)", errno);
		rndv = m;
		break;
	}

	pipe_read(p, &tok, 1);
	if (tok != 'R')
		die(p, "peer not ready", EPROTO);
	say(p, "receiver is ready: sending %zu messages", ARRAY_SIZE(msgs));

	for (m = 0; m < ARRAY_SIZE(msgs); m++) {
		const struct msg *mg = &msgs[m];
		struct ibv_tmh *tmh;
		struct ibv_rvh *rvh;
		uint8_t *buf;
		uint32_t len = sizeof(*tmh);
		struct ibv_sge sge;
		struct ibv_send_wr wr, *bad;

		buf = arena_alloc(p, sizeof(*tmh) + sizeof(*rvh) + mg->len);
		tmh = (struct ibv_tmh *)buf;
		memset(tmh, 0, sizeof(*tmh));
		tmh->app_ctx = htobe32(m);
		tmh->tag = htobe64(mg->tag);
		switch (mg->kind) {
		case MSG_EAGER:
		case MSG_NO_TAG:
			tmh->opcode = mg->kind == MSG_EAGER ? IBV_TMH_EAGER :
							      IBV_TMH_NO_TAG;
			fill(buf + len, m, mg->len);
			len += mg->len;
			break;
		case MSG_RNDV:
			tmh->opcode = IBV_TMH_RNDV;
			rvh = (struct ibv_rvh *)(buf + len);
			rvh->va = htobe64((uintptr_t)rndv_buf);
			rvh->rkey = htobe32(rndv_mr->rkey);
			rvh->len = htobe32(mg->len);
			len += sizeof(*rvh);
			break;
		}

		sge.addr = (uintptr_t)buf;
		sge.length = len;
		sge.lkey = p->mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = WRID_SEND + m;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		ret = ibv_post_send(p->qp, &wr, &bad);
		if (ret)
			die(p, "ibv_post_send", ret);
		say(p, "sent msg %u: %s tag 0x%llx, %u bytes on the wire",
		    m, mg->kind == MSG_EAGER ? "EAGER" :
		       mg->kind == MSG_RNDV ? "RNDV" : "NO_TAG",
		    (unsigned long long)mg->tag, len);
	}

	/* Send completions, and the FIN that ends the rendezvous. */
	start = now();
	while (sends_done < ARRAY_SIZE(msgs) || (rndv_buf && !fin)) {
		n = poll_cqes(p, c, ARRAY_SIZE(c));
		for (i = 0; i < n; i++) {
			struct cqe *e = &c[i];

			if (e->status != IBV_WC_SUCCESS) {
				fail(p, "wr_id 0x%llx: %s",
				     (unsigned long long)e->wr_id,
				     ibv_wc_status_str(e->status));
				if (e->wr_id >= WRID_SEND)
					sends_done++;
				continue;
			}
			if (e->wr_id >= WRID_SEND) {
				if (e->opcode != IBV_WC_SEND)
					fail(p, "send completion with opcode %s",
					     opcode_str(e->opcode));
				sends_done++;
			} else if (e->wr_id >= WRID_PLAIN &&
				   e->wr_id < WRID_PLAIN + NUM_PLAIN) {
				int b = e->wr_id - WRID_PLAIN;
				struct ibv_tmh *t = (void *)p->plain[b];
				struct ibv_rvh *r = (void *)(t + 1);

				if (e->opcode != IBV_WC_TM_NO_TAG ||
				    e->byte_len < sizeof(*t) + sizeof(*r) ||
				    t->opcode != IBV_TMH_FIN) {
					fail(p, "plain buffer %d: not a FIN", b);
				} else if (be64toh(t->tag) != msgs[rndv].tag ||
					   be64toh(r->va) != (uintptr_t)rndv_buf ||
					   be32toh(r->len) != msgs[rndv].len) {
					fail(p, "FIN names tag 0x%llx va 0x%llx len %u",
					     (unsigned long long)be64toh(t->tag),
					     (unsigned long long)be64toh(r->va),
					     be32toh(r->len));
				} else {
					say(p, "FIN for tag 0x%llx (msg %u): rendezvous buffer may be reused",
					    (unsigned long long)be64toh(t->tag),
					    be32toh(t->app_ctx));
				}
				fin = true;
				post_plain(p, b);
			} else {
				fail(p, "stray completion wr_id 0x%llx",
				     (unsigned long long)e->wr_id);
			}
		}
		check_timeout(p, start, "send completions and FIN");
	}

	/* Keep our card running until the receiver has seen everything. */
	tok = 'D';
	pipe_write(p, &tok, 1);
	start = now();
	while (!pipe_try_token(p, &tok)) {
		n = poll_cqes(p, c, ARRAY_SIZE(c));
		for (i = 0; i < n; i++)
			fail(p, "extra completion wr_id 0x%llx",
			     (unsigned long long)c[i].wr_id);
		check_timeout(p, start, "the receiver to finish");
		usleep(100);
	}

	if (rndv_mr && (ret = p->sv->dereg_mr(rndv_mr)))
		fail(p, "dereg_mr: %s", strerror(ret));
	free(rndv_buf);
	teardown(p);
	say(p, "%s", p->errors ? "FAILED" : "done");
	return p->errors ? 1 : 0;
}

/* ---- receiver ----------------------------------------------------------- */

static void add_entries(struct proc *p)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(entries); i++) {
		struct entry *e = &entries[i];
		struct ibv_sge sge;
		struct ibv_ops_wr wr;

		e->buf = arena_alloc(p, e->size);
		sge.addr = (uintptr_t)e->buf;
		sge.length = e->size;
		sge.lkey = p->mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = WRID_OP + i;
		wr.opcode = IBV_WR_TAG_ADD;
		wr.flags = IBV_OPS_TM_SYNC | IBV_OPS_SIGNALED;
		wr.tm.unexpected_cnt = 0;
		wr.tm.add.recv_wr_id = WRID_TAGGED + i;
		wr.tm.add.sg_list = &sge;
		wr.tm.add.num_sge = 1;
		wr.tm.add.tag = e->tag;
		wr.tm.add.mask = e->mask;
		post_op(p, &wr, "ibv_post_srq_ops(TAG_ADD)");
		e->handle = wr.tm.handle;
		wait_op(p, wr.wr_id, IBV_WC_TM_ADD);
		say(p, "TAG_ADD entry %u: tag 0x%llx mask 0x%llx, %u bytes, handle %u",
		    i, (unsigned long long)e->tag,
		    (unsigned long long)e->mask, e->size, e->handle);
	}
}

static int first_seen[ARRAY_SIZE(msgs)];
static int arrivals;

static void arrived(unsigned int m)
{
	if (!first_seen[m])
		first_seen[m] = ++arrivals;
}

static void tagged_cqe(struct proc *p, const struct cqe *c)
{
	unsigned int i = c->wr_id - WRID_TAGGED;
	struct entry *e = &entries[i];
	const struct msg *mg = &msgs[e->msg];
	size_t bad;

	if (c->opcode != IBV_WC_TM_RECV) {
		fail(p, "entry %u: opcode %s, wanted TM_RECV", i,
		     opcode_str(c->opcode));
		return;
	}
	if (c->status != IBV_WC_SUCCESS) {
		fail(p, "entry %u: status %s", i, ibv_wc_status_str(c->status));
		e->done = true;
		return;
	}
	if (c->flags & IBV_WC_TM_MATCH) {
		if (e->seen & IBV_WC_TM_MATCH)
			fail(p, "entry %u matched twice", i);
		if (c->tm.tag != mg->tag || c->tm.priv != (uint32_t)e->msg)
			fail(p, "entry %u: tm_info tag 0x%llx priv %u, wanted 0x%llx %d",
			     i, (unsigned long long)c->tm.tag, c->tm.priv,
			     (unsigned long long)mg->tag, e->msg);
		arrived(e->msg);
	}
	if (c->flags & IBV_WC_TM_DATA_VALID) {
		if (!((e->seen | c->flags) & IBV_WC_TM_MATCH))
			fail(p, "entry %u: DATA_VALID before MATCH", i);
		if (c->byte_len != mg->len)
			fail(p, "entry %u: %u bytes, wanted %u", i,
			     c->byte_len, mg->len);
		bad = check(e->buf, e->msg, mg->len);
		if (bad != mg->len)
			fail(p, "entry %u: payload differs at byte %zu", i, bad);
		else
			say(p, "msg %d: %u bytes in tagged entry %u, payload ok (%s)",
			    e->msg, mg->len, i,
			    (e->seen & IBV_WC_TM_MATCH) ?
			    "MATCH then DATA_VALID" : "one completion");
		e->done = true;
	}
	e->seen |= c->flags;
}

/* Returns 1 if it was the unexpected message (software now holds it). */
static int plain_cqe(struct proc *p, const struct cqe *c)
{
	int b = c->wr_id - WRID_PLAIN;
	const struct ibv_tmh *t = (const void *)p->plain[b];
	unsigned int m;
	size_t bad;
	int unexp = 0;

	if (c->status != IBV_WC_SUCCESS) {
		fail(p, "plain buffer %d: status %s", b,
		     ibv_wc_status_str(c->status));
		goto repost;
	}
	if (c->byte_len < sizeof(*t)) {
		fail(p, "plain buffer %d: %u bytes, no TMH", b, c->byte_len);
		goto repost;
	}
	m = be32toh(t->app_ctx);
	if (m >= ARRAY_SIZE(msgs)) {
		fail(p, "plain buffer %d: app_ctx %u", b, m);
		goto repost;
	}
	if (c->opcode == IBV_WC_TM_NO_TAG) {
		if (msgs[m].kind != MSG_NO_TAG || t->opcode != IBV_TMH_NO_TAG)
			fail(p, "TM_NO_TAG completion for msg %u", m);
	} else if (c->opcode == IBV_WC_TM_RECV || c->opcode == IBV_WC_RECV) {
		/* Unexpected: the whole message, TMH included. */
		if (c->flags & (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID))
			fail(p, "unexpected arrival with MATCH/DATA_VALID");
		if (msgs[m].kind != MSG_EAGER || msgs[m].entry >= 0 ||
		    t->opcode != IBV_TMH_EAGER ||
		    be64toh(t->tag) != msgs[m].tag)
			fail(p, "msg %u arrived unexpected", m);
		else
			unexp = 1;
		arrived(m);
	} else {
		fail(p, "plain buffer %d: opcode %s", b, opcode_str(c->opcode));
		goto repost;
	}
	if (c->byte_len != sizeof(*t) + msgs[m].len) {
		fail(p, "msg %u: %u bytes in plain buffer, wanted %zu", m,
		     c->byte_len, sizeof(*t) + msgs[m].len);
	} else {
		bad = check((const uint8_t *)(t + 1), m, msgs[m].len);
		if (bad != msgs[m].len)
			fail(p, "msg %u: payload differs at byte %zu", m, bad);
		else
			say(p, "msg %u: %s tag 0x%llx, %u bytes in plain buffer %d, payload ok",
			    m, unexp ? "unexpected" : "NO_TAG",
			    (unsigned long long)be64toh(t->tag), msgs[m].len,
			    b);
	}
repost:
	post_plain(p, b);
	return unexp;
}

static int receiver(struct proc *p)
{
	struct cqe c[16];
	unsigned int i, m, entries_done;
	int plain_done = 0, plain_want = 0, sw_unexpected = 0, synced = 0;
	int sync_pending = 0;
	double start;
	char tok;
	int n, k;

	setup(p);
	connect_qp(p);
	add_entries(p);
	for (m = 0; m < ARRAY_SIZE(msgs); m++)
		if (msgs[m].entry < 0)
			plain_want++;

	tok = 'R';
	pipe_write(p, &tok, 1);

	start = now();
	for (;;) {
		for (entries_done = 0, i = 0; i < ARRAY_SIZE(entries); i++)
			entries_done += entries[i].done;
		if (entries_done == ARRAY_SIZE(entries) &&
		    plain_done == plain_want && synced == sw_unexpected &&
		    !sync_pending)
			break;

		n = poll_cqes(p, c, ARRAY_SIZE(c));
		for (k = 0; k < n; k++) {
			const struct cqe *e = &c[k];

			if (e->wr_id >= WRID_TAGGED &&
			    e->wr_id < WRID_TAGGED + ARRAY_SIZE(entries)) {
				tagged_cqe(p, e);
			} else if (e->wr_id >= WRID_PLAIN &&
				   e->wr_id < WRID_PLAIN + NUM_PLAIN) {
				sw_unexpected += plain_cqe(p, e);
				plain_done++;
			} else if (e->wr_id == WRID_OP + 100) {
				if (e->opcode != IBV_WC_TM_SYNC ||
				    e->status != IBV_WC_SUCCESS)
					fail(p, "TAG_SYNC: %s %s",
					     opcode_str(e->opcode),
					     ibv_wc_status_str(e->status));
				sync_pending = 0;
			} else {
				fail(p, "stray completion wr_id 0x%llx",
				     (unsigned long long)e->wr_id);
			}
		}

		/* Software has handled the unexpected message: tell the card. */
		if (sw_unexpected > synced && !sync_pending) {
			struct ibv_ops_wr wr;

			memset(&wr, 0, sizeof(wr));
			wr.wr_id = WRID_OP + 100;
			wr.opcode = IBV_WR_TAG_SYNC;
			wr.flags = IBV_OPS_TM_SYNC | IBV_OPS_SIGNALED;
			wr.tm.unexpected_cnt = sw_unexpected;
			post_op(p, &wr, "ibv_post_srq_ops(TAG_SYNC)");
			say(p, "TAG_SYNC unexpected_cnt %d", sw_unexpected);
			synced = sw_unexpected;
			sync_pending = 1;
		}
		check_timeout(p, start, "the messages");
	}

	/* Matches and unexpected arrivals come in the order they were sent. */
	for (m = 0, k = 0; m < ARRAY_SIZE(msgs); m++) {
		if (msgs[m].kind == MSG_NO_TAG)
			continue;
		if (first_seen[m] <= k)
			fail(p, "msg %u: not seen, or decided out of order", m);
		k = first_seen[m];
	}
	for (i = 0; i < ARRAY_SIZE(entries); i++) {
		unsigned int want = IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID;

		if ((entries[i].seen & want) != want)
			fail(p, "entry %u: flags 0x%x, wanted MATCH and DATA_VALID",
			     i, entries[i].seen);
	}

	{
		struct softhca_stats st;

		if (softhca_query_stats(p->ctx, &st) == 0)
			say(p, "card: %llu matched, %llu unexpected, %llu receiver-not-ready waits, %llu rendezvous reads (%llu process_vm_readv, %llu copy), unexpected count hw %u sw %u",
			    (unsigned long long)st.matched,
			    (unsigned long long)st.unexpected,
			    (unsigned long long)st.rnr_waits,
			    (unsigned long long)st.card_reads,
			    (unsigned long long)st.cma_reads,
			    (unsigned long long)st.copy_reads,
			    st.hw_unexpected_cnt, st.sw_unexpected_cnt);
	}

	/* The sender is done when it has its FIN; then we can go. */
	start = now();
	while (!pipe_try_token(p, &tok)) {
		n = poll_cqes(p, c, ARRAY_SIZE(c));
		for (k = 0; k < n; k++)
			fail(p, "extra completion wr_id 0x%llx",
			     (unsigned long long)c[k].wr_id);
		check_timeout(p, start, "the sender to finish");
		usleep(100);
	}
	tok = 'B';
	pipe_write(p, &tok, 1);

	teardown(p);
	say(p, "%s", p->errors ? "FAILED" : "done");
	return p->errors ? 1 : 0;
}

/* ---- main --------------------------------------------------------------- */

static pid_t spawn(int (*fn)(struct proc *), const char *who, int rfd,
		   int wfd, const int close_fds[2])
{
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		struct proc p = { .who = who, .rfd = rfd, .wfd = wfd };

		close(close_fds[0]);
		close(close_fds[1]);
		alarm(2 * TIMEOUT_SEC + 10);
		exit(fn(&p));
	}
	return pid;
}

int main(void)
{
	int s2r[2], r2s[2];
	pid_t pids[2];
	int status, failed = 0, i;
	const char *names[2] = { "sender", "receiver" };

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	if (pipe(s2r) || pipe(r2s)) {
		perror("pipe");
		return 1;
	}
	{
		const int close_s[2] = { s2r[0], r2s[1] };
		const int close_r[2] = { r2s[0], s2r[1] };

		pids[0] = spawn(sender, names[0], r2s[0], s2r[1], close_s);
		pids[1] = spawn(receiver, names[1], s2r[0], r2s[1], close_r);
	}
	close(s2r[0]);
	close(s2r[1]);
	close(r2s[0]);
	close(r2s[1]);

	for (i = 0; i < 2; i++) {
		if (waitpid(pids[i], &status, 0) < 0) {
			perror("waitpid");
			return 1;
		}
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			continue;
		failed++;
		if (WIFSIGNALED(status))
			printf("%s killed by signal %d\n", names[i],
			       WTERMSIG(status));
		else
			printf("%s exited with status %d\n", names[i],
			       WEXITSTATUS(status));
	}
	printf("softhca_demo: %s\n", failed ? "FAILED" : "OK");
	return failed ? 1 : 0;
}
