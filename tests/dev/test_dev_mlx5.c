/*
 * test_dev_mlx5.c - the device layer on a simulated ConnectX (mlx5) device:
 * a recording binding of struct tm_verbs that wraps the soft HCA, reports
 * a ConnectX-like device (caps of ibv_devinfo -v, two ports of which the
 * second is the active one, an InfiniBand or a RoCE v2 GID table), records
 * every attribute tm_dev passes to create_cq_ex / create_srq_ex /
 * create_qp / modify_qp, and forwards the calls to the soft HCA (port,
 * GID index and GID translated back), so that the QPs really connect.
 * The rows of doc/mlx5-rules.md this pins are named in each TAP line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/tm_types.h>

#include "tap.h"
#include "dev/tm_dev.h"
#include "softhca/softhca.h"

#define SIM_PORT 2
#define MAXREC 64
#define MAXCTX 64

enum sim { SIM_IB, SIM_ROCE, SIM_ROCE_NO_GID, SIM_NO_PORT };

/* The simulated device's numbers (ConnectX-5, rd_atomic lowered so the
 * bound shows). */
#define SIM_MAX_QP_WR 32768
#define SIM_TM_MAX_OPS 32768
#define SIM_TM_TAGS 127
#define SIM_RD_ATOM 8
#define SIM_INIT_RD_ATOM 4
#define SIM_MAX_CQE ((1 << 22) - 1)

struct simctx {
	struct ibv_context *ctx;
	int k;                    /* names its fake GIDs */
	enum ibv_mtu mtu;
	struct verbs_context orig; /* the soft HCA's entries */
};

struct qp_rec {
	struct ibv_qp *qp;
	struct ibv_qp_init_attr init;
};

struct mod_rec {
	struct ibv_qp *qp;
	struct ibv_qp_attr attr;
	int mask;
};

static enum sim sim;
static struct simctx ctxs[MAXCTX];
static int nctx, next_k;
static enum ibv_mtu next_mtu = IBV_MTU_4096;
static struct ibv_cq_init_attr_ex cq_rec[MAXREC];
static int ncq;
static struct ibv_srq_init_attr_ex srq_rec[MAXREC];
static int nsrq;
static struct qp_rec qp_rec[MAXREC];
static int nqp;
static struct mod_rec mod_rec[MAXREC];
static int nmod;

static void rec_reset(void)
{
	ncq = nsrq = nqp = nmod = 0;
}

static struct simctx *sim_of(struct ibv_context *c)
{
	for (int i = 0; i < nctx; i++)
		if (ctxs[i].ctx == c)
			return &ctxs[i];
	tap_bail("context not opened through the recording binding");
}

static const struct tm_verbs *soft(void)
{
	return softhca_verbs();
}

/* ---- the simulated device -------------------------------------------- */

static void fake_gid(int k, int index, union ibv_gid *g, uint32_t *type)
{
	memset(g, 0, sizeof(*g));
	if (sim == SIM_IB || sim == SIM_ROCE_NO_GID) {
		g->raw[0] = 0xfe;
		g->raw[1] = 0x80;
		g->raw[15] = (uint8_t)k;
		*type = sim == SIM_IB ? IBV_GID_TYPE_IB : IBV_GID_TYPE_IB;
		return;
	}
	/* RoCE: 0 v1 link-local, 1 v2 link-local, 2 v1 IPv4, 3 v2 IPv4 */
	if (index < 2) {
		g->raw[0] = 0xfe;
		g->raw[1] = 0x80;
		g->raw[15] = (uint8_t)k;
	} else {
		g->raw[10] = g->raw[11] = 0xff;
		g->raw[12] = 10;
		g->raw[15] = (uint8_t)k;
	}
	*type = (index & 1) ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
}

static int sim_query_device_ex(struct ibv_context *c,
			       const struct ibv_query_device_ex_input *in,
			       struct ibv_device_attr_ex *a, size_t size)
{
	int ret = sim_of(c)->orig.query_device_ex(c, in, a, size);

	if (ret)
		return ret;
	a->orig_attr.max_qp_wr = SIM_MAX_QP_WR;
	a->orig_attr.max_srq_wr = SIM_MAX_QP_WR - 1;
	a->orig_attr.max_cqe = SIM_MAX_CQE;
	a->orig_attr.max_qp_rd_atom = SIM_RD_ATOM;
	a->orig_attr.max_qp_init_rd_atom = SIM_INIT_RD_ATOM;
	a->orig_attr.phys_port_cnt = 2;
	a->tm_caps.max_ops = SIM_TM_MAX_OPS;
	a->tm_caps.max_num_tags = SIM_TM_TAGS;
	a->tm_caps.max_rndv_hdr_size = 64;
	a->tm_caps.max_sge = 1;
	a->tm_caps.flags = IBV_TM_CAP_RC;
	return 0;
}

static int sim_query_port(struct ibv_context *c, uint8_t port,
			  struct ibv_port_attr *pa, size_t len)
{
	struct simctx *s = sim_of(c);
	int ret = s->orig.query_port(c, 1, pa, len);

	if (ret || port < 1 || port > 2)
		return ret ? ret : EINVAL;
	pa->state = port == SIM_PORT && sim != SIM_NO_PORT ? IBV_PORT_ACTIVE
							   : IBV_PORT_DOWN;
	pa->active_mtu = s->mtu;
	pa->max_msg_sz = 1u << 30;
	if (sim == SIM_IB) {
		pa->link_layer = IBV_LINK_LAYER_INFINIBAND;
		pa->lid = (uint16_t)(0x10 + s->k);
		pa->gid_tbl_len = 1;
	} else {
		pa->link_layer = IBV_LINK_LAYER_ETHERNET;
		pa->lid = 0;
		pa->gid_tbl_len = 4;
	}
	return 0;
}

static int rec_query_gid(struct ibv_context *c, uint8_t port, int index,
			 union ibv_gid *gid)
{
	uint32_t type;

	if (port != SIM_PORT || index < 0 || index >= (sim == SIM_IB ? 1 : 4))
		return EINVAL;
	fake_gid(sim_of(c)->k, index, gid, &type);
	return 0;
}

static int rec_query_gid_ex(struct ibv_context *c, uint32_t port,
			    uint32_t index, struct ibv_gid_entry *e,
			    uint32_t flags)
{
	if (flags || port != SIM_PORT || index >= (sim == SIM_IB ? 1u : 4u))
		return EINVAL;
	memset(e, 0, sizeof(*e));
	fake_gid(sim_of(c)->k, (int)index, &e->gid, &e->gid_type);
	e->gid_index = index;
	e->port_num = port;
	return 0;
}

/* ---- recording wrappers ------------------------------------------------ */

static struct ibv_cq_ex *rec_create_cq_ex(struct ibv_context *c,
					  struct ibv_cq_init_attr_ex *a)
{
	if (ncq < MAXREC)
		cq_rec[ncq++] = *a;
	return sim_of(c)->orig.create_cq_ex(c, a);
}

static struct ibv_srq *rec_create_srq_ex(struct ibv_context *c,
					 struct ibv_srq_init_attr_ex *a)
{
	if (nsrq < MAXREC)
		srq_rec[nsrq++] = *a;
	return sim_of(c)->orig.create_srq_ex(c, a);
}

static struct ibv_qp *rec_create_qp(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *a)
{
	struct ibv_qp_init_attr copy = *a;
	struct ibv_qp *qp = soft()->create_qp(pd, a);

	if (qp && nqp < MAXREC) {
		qp_rec[nqp].qp = qp;
		qp_rec[nqp++].init = copy;
	}
	return qp;
}

/* The real GID of the context a fake GID names. */
static void real_gid(const union ibv_gid *fake, union ibv_gid *real)
{
	for (int i = 0; i < nctx; i++) {
		if (ctxs[i].ctx && ctxs[i].k == fake->raw[15]) {
			if (soft()->query_gid(ctxs[i].ctx, 1, 0, real))
				tap_bail("soft query_gid");
			return;
		}
	}
	tap_bail("modify_qp names a GID no simulated context has");
}

static int rec_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct ibv_qp_attr fwd = *a;

	if (nmod < MAXREC) {
		mod_rec[nmod].qp = qp;
		mod_rec[nmod].attr = *a;
		mod_rec[nmod++].mask = mask;
	}
	if (mask & IBV_QP_PORT)
		fwd.port_num = 1;
	if (mask & IBV_QP_AV) {
		fwd.ah_attr.port_num = 1;
		fwd.ah_attr.grh.sgid_index = 0;
		real_gid(&a->ah_attr.grh.dgid, &fwd.ah_attr.grh.dgid);
	}
	return soft()->modify_qp(qp, &fwd, mask);
}

static struct ibv_context *rec_open_device(struct ibv_device *d)
{
	struct ibv_context *c = soft()->open_device(d);
	struct verbs_context *v;
	struct simctx *s;

	if (!c)
		return NULL;
	if (nctx == MAXCTX)
		tap_bail("too many contexts");
	s = &ctxs[nctx++];
	v = verbs_get_ctx(c);
	s->ctx = c;
	s->k = ++next_k;
	s->mtu = next_mtu;
	s->orig = *v;
	v->query_device_ex = sim_query_device_ex;
	v->query_port = sim_query_port;
	v->create_cq_ex = rec_create_cq_ex;
	v->create_srq_ex = rec_create_srq_ex;
	return c;
}

static int rec_close_device(struct ibv_context *c)
{
	struct simctx *s = sim_of(c);
	struct verbs_context *v = verbs_get_ctx(c);

	*v = s->orig;
	s->ctx = NULL;
	return soft()->close_device(c);
}

static struct tm_verbs rec_verbs;

static void rec_init(void)
{
	rec_verbs = *soft();
	rec_verbs.name = "rec";
	rec_verbs.open_device = rec_open_device;
	rec_verbs.close_device = rec_close_device;
	rec_verbs.query_gid = rec_query_gid;
	rec_verbs.query_gid_ex = rec_query_gid_ex;
	rec_verbs.create_qp = rec_create_qp;
	rec_verbs.modify_qp = rec_modify_qp;
}

/* ---- helpers ---------------------------------------------------------- */

static void dev_cfg(struct tm_dev_config *cfg)
{
	tm_dev_config_default(cfg);
	cfg->verbs = &rec_verbs;
	cfg->rcache = 0;
	cfg->srq_max_wr = 16;    /* below the hardware's 33 */
	cfg->cq_size = 64;       /* small floor: the computed sizes show */
	cfg->qp_max_send_wr = 128;
	cfg->max_peers = 4;
}

static int open_dev(enum ibv_mtu mtu, const struct tm_dev_config *cfg,
		    struct tm_dev **out)
{
	next_mtu = mtu;
	return tm_dev_open(cfg, out);
}

static const struct qp_rec *qp_init_of(const struct ibv_qp *qp)
{
	for (int i = 0; i < nqp; i++)
		if (qp_rec[i].qp == qp)
			return &qp_rec[i];
	return NULL;
}

static const struct mod_rec *mod_of(const struct ibv_qp *qp,
				    enum ibv_qp_state st)
{
	for (int i = nmod - 1; i >= 0; i--)
		if (mod_rec[i].qp == qp && mod_rec[i].attr.qp_state == st)
			return &mod_rec[i];
	return NULL;
}

static const char *simname(void)
{
	return sim == SIM_IB ? "IB" : "RoCE v2";
}

/* Sends a NO_TAG message on a's tx; it must arrive on b's rx QP. */
static int roundtrip(struct tm_dev *a, struct tm_dev_pair *pa,
		     struct tm_dev *b, struct tm_dev_pair *pb)
{
	struct ibv_mr *smr, *rmr;
	char sbuf[64], rbuf[64];
	struct ibv_sge sge = { (uintptr_t)sbuf, 32, 0 };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND }, *bad;
	struct ibv_sge rsge = { (uintptr_t)rbuf, sizeof(rbuf), 0 };
	struct ibv_recv_wr rwr = { .wr_id = 9, .sg_list = &rsge,
				   .num_sge = 1 }, *rbad;
	int ok = 0, i;

	if (tm_dev_reg(a, sbuf, sizeof(sbuf), 0, &smr) ||
	    tm_dev_reg(b, rbuf, sizeof(rbuf), 0, &rmr))
		return 0;
	memset(sbuf, 0, sizeof(sbuf));
	sbuf[0] = IBV_TMH_NO_TAG;
	sge.lkey = smr->lkey;
	rsge.lkey = rmr->lkey;
	if (!ibv_post_srq_recv(b->srq, &rwr, &rbad) &&
	    !ibv_post_send(pa->tx, &wr, &bad)) {
		for (i = 0; i < 100000 && !ok; i++) {
			struct ibv_wc wc;

			(void)ibv_poll_cq(a->send_cq, 1, &wc);
			if (tm_dev_start_poll(b->tm_cq) == TM_OK) {
				ok = b->tm_cq->wr_id == 9 &&
				     b->tm_cq->status == IBV_WC_SUCCESS &&
				     ibv_wc_read_opcode(b->tm_cq) ==
					     IBV_WC_TM_NO_TAG &&
				     ibv_wc_read_qp_num(b->tm_cq) ==
					     pb->rx->qp_num ? 1 : -1;
				ibv_end_poll(b->tm_cq);
			}
		}
	}
	tm_dev_dereg(a, smr);
	tm_dev_dereg(b, rmr);
	return ok == 1;
}

static int start_poll_eio(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *at)
{
	(void)cq;
	(void)at;
	return EIO;
}

/* ---- the checks -------------------------------------------------------- */

static void test_layout(enum sim which)
{
	struct tm_dev_config cfg;
	struct tm_dev *a = NULL, *b = NULL;
	struct tm_dev_pair pa, pb;
	struct tm_dev_pair_addr aa, ab;
	const struct ibv_srq_init_attr_ex *srq;
	const struct qp_rec *rx, *tx;
	const struct mod_rec *m;
	enum ibv_mtu want_mtu;
	int rc;

	sim = which;
	rec_reset();
	dev_cfg(&cfg);
	/* a's MTU below b's on both link layers: the path MTU must be the
	 * smaller one on each side (rule 19) */
	rc = open_dev(which == SIM_IB ? IBV_MTU_2048 : IBV_MTU_1024, &cfg, &a);
	if (rc == TM_OK)
		rc = open_dev(IBV_MTU_4096, &cfg, &b);
	if (rc != TM_OK)
		tap_bail("tm_dev_open on the simulated device");
	want_mtu = which == SIM_IB ? IBV_MTU_2048 : IBV_MTU_1024;

	tap_check(a->port == SIM_PORT,
		  "%s rule 19: the port is the device's active one (%u), not 1",
		  simname(), a->port);
	if (which == SIM_IB)
		tap_check(a->gid_index == 0 && a->gid.raw[0] == 0xfe,
			  "IB rule 18: GID index 0 (%d)", a->gid_index);
	else
		tap_check(a->gid_index == 3 && a->gid.raw[11] == 0xff &&
			  a->gid.raw[12] == 10,
			  "RoCE rule 18: the RoCE v2 IPv4 GID (index 3), not index 0 "
			  "(%d)", a->gid_index);

	srq = nsrq ? &srq_rec[0] : NULL;
	tap_check(srq && srq->srq_type == IBV_SRQT_TM &&
		  srq->tm_cap.max_num_tags == SIM_TM_TAGS &&
		  srq->tm_cap.max_ops == 2 * SIM_TM_TAGS + 2,
		  "%s rules 2/6: TM-SRQ max_ops = 2 * tags + 2 = %u, well under "
		  "the advertised %u (asked %u)", simname(), 2 * SIM_TM_TAGS + 2,
		  SIM_TM_MAX_OPS, srq ? srq->tm_cap.max_ops : 0);
	tap_check(srq && srq->attr.max_wr >= TM_DEV_MIN_PLAIN,
		  "%s rule 5: the TM-SRQ holds >= 33 plain WQEs though 16 were "
		  "asked (%u)", simname(), srq ? srq->attr.max_wr : 0);
	tap_check(ncq >= 1 && (cq_rec[0].wc_flags & IBV_WC_EX_WITH_TM_INFO) &&
		  cq_rec[0].cqe == a->srq_max_wr + 3 * SIM_TM_TAGS +
				   (2 * SIM_TM_TAGS + 2) + 1 &&
		  a->send_cq_size == 4 * 128,
		  "%s rule 6: TM CQ = plain + 3 x tags + ops + 1 (%u), send CQ = "
		  "peers x send WRs (%u)", simname(), ncq ? cq_rec[0].cqe : 0,
		  a->send_cq_size);

	rec_reset();
	if (tm_dev_pair_create(a, &pa) || tm_dev_pair_create(b, &pb))
		tap_bail("pair create");
	rx = qp_init_of(pa.rx);
	tx = qp_init_of(pa.tx);
	tap_check(rx && rx->init.cap.max_send_wr == 0 &&
		  rx->init.srq == a->srq && rx->init.qp_type == IBV_QPT_RC,
		  "%s rule 10: rx QP on the TM-SRQ with no send queue "
		  "(max_send_wr %u)", simname(), rx ? rx->init.cap.max_send_wr : 99);
	tap_check(tx && tx->init.cap.max_send_wr == 128 &&
		  tx->init.srq == a->srq,
		  "%s rule 10: tx QP with the send queue, also on the TM-SRQ "
		  "(the peer card's FINs land there)", simname());
	m = mod_of(pa.rx, IBV_QPS_INIT);
	tap_check(m && (m->mask & IBV_QP_PORT) && m->attr.port_num == SIM_PORT,
		  "%s rule 19: INIT on port %d", simname(), SIM_PORT);

	tm_dev_pair_addr(a, &pa, &aa);
	tm_dev_pair_addr(b, &pb, &ab);
	tap_check(aa.rx_qpn == pa.rx->qp_num && aa.tx_qpn == pa.tx->qp_num &&
		  aa.mtu == (uint8_t)a->mtu &&
		  !memcmp(aa.gid, a->gid.raw, 16),
		  "%s rule 10: the address carries both QP numbers, the GID and "
		  "the MTU", simname());
	if (tm_dev_pair_connect(a, &pa, &ab) || tm_dev_pair_connect(b, &pb, &aa))
		tap_bail("pair connect");
	m = mod_of(pa.tx, IBV_QPS_RTR);
	tap_check(m && m->attr.dest_qp_num == pb.rx->qp_num &&
		  mod_of(pa.rx, IBV_QPS_RTR) &&
		  mod_of(pa.rx, IBV_QPS_RTR)->attr.dest_qp_num == pb.tx->qp_num,
		  "%s rule 10: tx connects to the peer's rx, rx to the peer's tx",
		  simname());
	tap_check(m && m->attr.path_mtu == want_mtu &&
		  mod_of(pb.tx, IBV_QPS_RTR) &&
		  mod_of(pb.tx, IBV_QPS_RTR)->attr.path_mtu == want_mtu,
		  "%s rule 19: path MTU = min(local, remote) on both sides (%d)",
		  simname(), m ? (int)m->attr.path_mtu : -1);
	tap_check(m && m->attr.max_dest_rd_atomic == SIM_RD_ATOM &&
		  mod_of(pa.tx, IBV_QPS_RTS) &&
		  mod_of(pa.tx, IBV_QPS_RTS)->attr.max_rd_atomic ==
			  SIM_INIT_RD_ATOM,
		  "%s rule 19: rd_atomic bounded by the caps (%d/%d)", simname(),
		  SIM_RD_ATOM, SIM_INIT_RD_ATOM);
	if (which == SIM_IB)
		tap_check(m && m->attr.ah_attr.port_num == SIM_PORT &&
			  m->attr.ah_attr.dlid == ab.lid &&
			  m->attr.ah_attr.grh.sgid_index == 0,
			  "IB rule 18/19: AV on port 2, the peer's LID, sgid 0");
	else
		tap_check(m && m->attr.ah_attr.port_num == SIM_PORT &&
			  m->attr.ah_attr.is_global &&
			  m->attr.ah_attr.grh.sgid_index == 3 &&
			  m->attr.ah_attr.grh.hop_limit > 1 &&
			  m->attr.ah_attr.dlid == 0 &&
			  !memcmp(m->attr.ah_attr.grh.dgid.raw, ab.gid, 16),
			  "RoCE rule 18: AV global, sgid_index 3, hop limit > 1, "
			  "dgid = the peer's v2 GID");
	tap_check(roundtrip(a, &pa, b, &pb),
		  "%s: a message on a's tx arrives on b's rx QP", simname());
	tm_dev_pair_destroy(a, &pa);
	tm_dev_pair_destroy(b, &pb);
	tm_dev_close(a);
	tm_dev_close(b);
}

static void test_explicit_ops_clamped(void)
{
	struct tm_dev_config cfg;
	struct tm_dev *d = NULL;

	sim = SIM_IB;
	rec_reset();
	dev_cfg(&cfg);
	cfg.max_ops = SIM_TM_MAX_OPS;
	if (open_dev(IBV_MTU_4096, &cfg, &d) != TM_OK)
		tap_bail("open");
	tap_check(nsrq && srq_rec[0].tm_cap.max_ops == SIM_MAX_QP_WR / 4,
		  "rule 2: max_ops = the advertised max is clamped to "
		  "max_qp_wr / 4 (%u)", nsrq ? srq_rec[0].tm_cap.max_ops : 0);
	tm_dev_close(d);
}

static void test_failures(void)
{
	struct tm_dev_config cfg;
	struct tm_dev *d = NULL;
	struct ibv_cq_ex *cq;
	int rc;

	dev_cfg(&cfg);
	sim = SIM_ROCE_NO_GID;
	rc = open_dev(IBV_MTU_4096, &cfg, &d);
	tap_check(rc == TM_ERR_NOT_FOUND,
		  "rule 18: RoCE port without a RoCE GID: clear error (%d)", rc);
	sim = SIM_NO_PORT;
	rc = open_dev(IBV_MTU_4096, &cfg, &d);
	tap_check(rc == TM_ERR_NO_DEVICE, "rule 19: no active port: error (%d)",
		  rc);

	sim = SIM_IB;
	if (open_dev(IBV_MTU_4096, &cfg, &d) != TM_OK)
		tap_bail("open");
	cq = d->tm_cq;
	rc = tm_dev_start_poll(cq);
	tap_check(rc == TM_ERR_NOT_FOUND,
		  "rule 20: start_poll on an empty CQ (ENOENT) is 'empty' (%d)", rc);
	{
		int (*orig)(struct ibv_cq_ex *, struct ibv_poll_cq_attr *) =
			cq->start_poll;

		cq->start_poll = start_poll_eio;
		rc = tm_dev_start_poll(cq);
		cq->start_poll = orig;
	}
	tap_check(rc == TM_ERR_IO,
		  "rule 20: start_poll returning EIO is an error, not 'empty' (%d)",
		  rc);
	tap_check(d->max_msg_sz == 1u << 30,
		  "rule 21: the port's max_msg_sz is exposed (%u)", d->max_msg_sz);
	tm_dev_close(d);
}

int main(void)
{
	rec_init();
	test_layout(SIM_IB);
	test_layout(SIM_ROCE);
	test_explicit_ops_clamped();
	test_failures();
	return tap_done();
}
