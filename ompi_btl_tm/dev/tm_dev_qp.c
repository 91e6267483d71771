/*
 * tm_dev_qp.c - RC QPs and their connection (see tm_dev.h; the rules and
 * their sources are in doc/mlx5-rules.md).  The port and GID they use are
 * chosen when the device opens (tm_dev.c).
 */
#include <errno.h>
#include <string.h>
#include "dev/tm_dev.h"
#include "verbs/tm_verbs.h"

/* RoCE v2 packets are routed: a hop limit of 1 would stop at the first
 * router.  On InfiniBand the GRH is not needed inside a subnet. */
#define ROCE_HOP_LIMIT 64

/*
 * Reliability, as UCX's RC transports set it (UCX_RC_TIMEOUT 1 s,
 * UCX_RC_RETRY_COUNT 7, UCX_RC_RNR_RETRY_COUNT 7, UCX_RC_RNR_TIMEOUT
 * 1 ms): an ACK timeout of 4.096 us * 2^18 = 1.07 s, retried 7 times, so
 * a peer that is gone (or a link down that long) fails the WR with
 * IBV_WC_RETRY_EXC_ERR after about 8 s, and a link that comes back
 * sooner loses nothing; receiver-not-ready retried without end (7), as
 * a full SRQ only means a busy peer, 1.28 ms apart (the IB code 14:
 * the first step at or above UCX's 1 ms).
 *
 * The kernel's rxe reads a retry_cnt of 7 as "retry without end", like
 * rnr_retry (its completer never counts 7 down): a peer whose process
 * died, whose QP is gone and whose kernel drops what comes for it, was
 * then retried forever and nothing waiting on it ever failed.  On rxe
 * the count is 6, the most it honours, about 7 s.
 */
#define RC_TIMEOUT 18
#define RC_RETRY_CNT 7
#define RC_RETRY_CNT_RXE 6
#define RC_RNR_RETRY 7
#define RC_MIN_RNR_TIMER 14

/*
 * The send queue's shape.  Two SGEs, so that an inline send gathers its
 * header and payload where they lie; inline data up to what the smallest
 * WQE holds anyway: on mlx5 a 1- or 2-SGE RC WQE is 256 bytes (192 of
 * control segments, rule 2), and inline data fills the rest less a 4-byte
 * inline header, 60 bytes (rule 11).  Asking for more would make every WQE
 * of the queue 512 bytes for the sake of a few message sizes.
 */
#define TX_SEND_SGE 2
#define TX_INLINE_WANT 60

static int qp_try(struct tm_dev *dev, uint32_t max_send_wr, uint32_t sge,
		  uint32_t inl, struct ibv_qp **out, uint32_t *got_inline)
{
	struct ibv_qp_init_attr init = {
		.send_cq = dev->send_cq,
		.recv_cq = ibv_cq_ex_to_cq(dev->tm_cq),
		.srq = dev->srq,
		.cap = { .max_send_wr = max_send_wr,
			 .max_send_sge = max_send_wr ? sge : 0,
			 .max_inline_data = max_send_wr ? inl : 0 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.port_num = dev->port,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_qp *qp;

	qp = dev->verbs->create_qp(dev->pd, &init);
	if (!qp)
		return TM_ERR_IO;
	if (dev->verbs->modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		dev->verbs->destroy_qp(qp);
		return TM_ERR_IO;
	}
	*out = qp;
	/* the provider writes back what the QP really takes (mlx5: the WQE
	 * less its control segments, possibly more than asked) */
	*got_inline = max_send_wr ? init.cap.max_inline_data : 0;
	return TM_OK;
}

/* A device that refuses inline data or the second SGE gets a plain
 * 1-SGE send queue: inline sends are an optimisation, never a need. */
static int qp_create(struct tm_dev *dev, uint32_t max_send_wr,
		     struct ibv_qp **out, uint32_t *got_inline)
{
	if (max_send_wr && qp_try(dev, max_send_wr, TX_SEND_SGE,
				  TX_INLINE_WANT, out, got_inline) == TM_OK)
		return TM_OK;
	return qp_try(dev, max_send_wr, 1, 0, out, got_inline);
}

int tm_dev_qp_create(struct tm_dev *dev, struct ibv_qp **out)
{
	uint32_t inl;

	return qp_create(dev, dev->qp_max_send_wr, out, &inl);
}

void tm_dev_qp_addr(struct tm_dev *dev, struct ibv_qp *qp,
		    struct tm_dev_addr *addr)
{
	memset(addr, 0, sizeof(*addr));
	memcpy(addr->gid, dev->gid.raw, sizeof(addr->gid));
	addr->qp_num = qp->qp_num;
	addr->lid = dev->lid;
	addr->mtu = (uint8_t)dev->mtu;
}

static enum ibv_mtu path_mtu(const struct tm_dev *dev, uint8_t remote)
{
	enum ibv_mtu local = dev->mtu ? dev->mtu : IBV_MTU_4096;

	if (remote >= IBV_MTU_256 && remote <= IBV_MTU_4096 &&
	    (enum ibv_mtu)remote < local)
		return (enum ibv_mtu)remote;
	return local;
}

static int connect_qp(struct tm_dev *dev, struct ibv_qp *qp,
		      const uint8_t *gid, uint16_t lid, uint32_t qpn,
		      uint8_t mtu)
{
	int roce = dev->link_layer == IBV_LINK_LAYER_ETHERNET;
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = path_mtu(dev, mtu);
	attr.dest_qp_num = qpn;
	attr.rq_psn = 0;
	attr.max_dest_rd_atomic = dev->max_dest_rd_atomic;
	attr.min_rnr_timer = RC_MIN_RNR_TIMER;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.dlid = roce ? 0 : lid;
	attr.ah_attr.port_num = dev->port;
	attr.ah_attr.grh.sgid_index = (uint8_t)dev->gid_index;
	attr.ah_attr.grh.hop_limit = roce ? ROCE_HOP_LIMIT : 1;
	memcpy(attr.ah_attr.grh.dgid.raw, gid, 16);
	if (dev->verbs->modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV |
				  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return TM_ERR_IO;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = RC_TIMEOUT;
	attr.retry_cnt = dev->rxe ? RC_RETRY_CNT_RXE : RC_RETRY_CNT;
	attr.rnr_retry = RC_RNR_RETRY;
	attr.sq_psn = 0;
	attr.max_rd_atomic = dev->max_rd_atomic;
	if (dev->verbs->modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return TM_ERR_IO;
	return TM_OK;
}

int tm_dev_qp_connect(struct tm_dev *dev, struct ibv_qp *qp,
		      const struct tm_dev_addr *remote)
{
	return connect_qp(dev, qp, remote->gid, remote->lid, remote->qp_num,
			  remote->mtu);
}

int tm_dev_qp_destroy(struct tm_dev *dev, struct ibv_qp *qp)
{
	return dev->verbs->destroy_qp(qp) ? TM_ERR_IO : TM_OK;
}

int tm_dev_pair_create(struct tm_dev *dev, struct tm_dev_pair *pair)
{
	uint32_t none;
	int rc;

	pair->rx = pair->tx = NULL;
	pair->tx_max_inline = 0;
	/* the plain mode has no card reads to give a QP of their own */
	rc = dev->tm ? qp_create(dev, 0, &pair->rx, &none) : TM_OK;
	if (rc == TM_OK)
		rc = qp_create(dev, dev->qp_max_send_wr, &pair->tx,
			       &pair->tx_max_inline);
	if (rc != TM_OK)
		tm_dev_pair_destroy(dev, pair);
	return rc;
}

void tm_dev_pair_addr(struct tm_dev *dev, const struct tm_dev_pair *pair,
		      struct tm_dev_pair_addr *addr)
{
	memset(addr, 0, sizeof(*addr));
	memcpy(addr->gid, dev->gid.raw, sizeof(addr->gid));
	addr->rx_qpn = pair->rx ? pair->rx->qp_num : pair->tx->qp_num;
	addr->tx_qpn = pair->tx->qp_num;
	addr->lid = dev->lid;
	addr->mtu = (uint8_t)dev->mtu;
}

int tm_dev_pair_connect(struct tm_dev *dev, struct tm_dev_pair *pair,
			const struct tm_dev_pair_addr *remote)
{
	int rc;

	rc = connect_qp(dev, pair->tx, remote->gid, remote->lid,
			remote->rx_qpn, remote->mtu);
	if (rc == TM_OK && pair->rx)
		rc = connect_qp(dev, pair->rx, remote->gid, remote->lid,
				remote->tx_qpn, remote->mtu);
	return rc;
}

int tm_dev_pair_destroy(struct tm_dev *dev, struct tm_dev_pair *pair)
{
	int rc = TM_OK;

	if (pair->tx && dev->verbs->destroy_qp(pair->tx))
		rc = TM_ERR_IO;
	if (pair->rx && dev->verbs->destroy_qp(pair->rx))
		rc = TM_ERR_IO;
	pair->rx = pair->tx = NULL;
	return rc;
}
