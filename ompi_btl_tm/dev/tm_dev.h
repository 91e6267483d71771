/*
 * tm_dev.h - the one device code path: a TM-capable verbs device, its
 * TM-SRQ, and RC QPs attached to it.
 *
 * Contract
 * --------
 * tm_dev_open() picks a provider through struct tm_verbs (verbs/tm_verbs.h):
 *   "auto"  (default): the first libibverbs device whose tm_caps.flags has
 *           IBV_TM_CAP_RC, else the soft HCA;
 *   "soft"  / "verbs": forced.  The environment variable TM_DEV_PROVIDER
 *           overrides cfg->provider when set.
 * It opens the context, a PD, one extended CQ for the TM-SRQ (created with
 * IBV_WC_EX_WITH_TM_INFO | BYTE_LEN | QP_NUM), one plain CQ for sends and
 * RDMA reads, and the TM-SRQ (IBV_SRQT_TM) with the requested list size and
 * op limit clamped to the device's tm_caps (which are copied to dev->caps,
 * with the clamped values).
 *
 * Everything after that is plain verbs: the engine posts to dev->srq,
 * polls dev->tm_cq / dev->send_cq and posts sends on the QPs with the inline
 * data-path verbs of <infiniband/verbs.h>; only the library verbs (QP
 * create/modify/destroy, MR reg/dereg, close) go through dev->verbs.
 *
 * QPs: tm_dev_qp_create() makes an RC QP attached to the TM-SRQ, in INIT.
 * Its address (struct tm_dev_addr: gid, lid, qp_num) is exchanged out of
 * band; tm_dev_qp_connect() moves it to RTR and RTS towards the peer.
 *
 * All functions return enum tm_status (tm_status.h); nothing here prints
 * except tm_dev_open() failures, which say why on stderr.
 */
#ifndef TM_DEV_H
#define TM_DEV_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include "dev/tm_status.h"
#include "verbs/tm_verbs.h"

struct tm_dev_config {
	const char *provider;  /* "auto", "soft", "verbs"; NULL = "auto" */
	uint32_t max_num_tags; /* 0: the device maximum */
	uint32_t max_ops;      /* 0: the device maximum */
	uint32_t srq_max_wr;   /* plain buffers the TM-SRQ can hold */
	uint32_t qp_max_send_wr;
	uint32_t cq_size;
};

struct tm_dev_caps {
	uint32_t max_num_tags;
	uint32_t max_ops;
	uint32_t max_rndv_hdr_size;
	uint32_t max_sge;
};

struct tm_dev {
	const struct tm_verbs *verbs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq_ex *tm_cq;  /* TM-SRQ: list ops and receives */
	struct ibv_cq *send_cq;   /* sends and software RDMA reads */
	struct ibv_srq *srq;      /* the TM-SRQ */
	struct tm_dev_caps caps;
	uint8_t port;
	uint16_t lid;
	enum ibv_mtu mtu;
	union ibv_gid gid;
	uint32_t qp_max_send_wr;
	char name[64];            /* provider:device, for messages */
};

struct tm_dev_addr {
	uint8_t gid[16];
	uint32_t qp_num;
	uint16_t lid;
	uint16_t pad;
};

void tm_dev_config_default(struct tm_dev_config *cfg);
int tm_dev_open(const struct tm_dev_config *cfg, struct tm_dev **out);
void tm_dev_close(struct tm_dev *dev);

int tm_dev_qp_create(struct tm_dev *dev, struct ibv_qp **out);
void tm_dev_qp_addr(struct tm_dev *dev, struct ibv_qp *qp,
		    struct tm_dev_addr *addr);
int tm_dev_qp_connect(struct tm_dev *dev, struct ibv_qp *qp,
		      const struct tm_dev_addr *remote);
int tm_dev_qp_destroy(struct tm_dev *dev, struct ibv_qp *qp);

/* access: IBV_ACCESS_* flags; LOCAL_WRITE is always added. */
int tm_dev_reg(struct tm_dev *dev, void *addr, size_t len, int access,
	       struct ibv_mr **out);
int tm_dev_dereg(struct tm_dev *dev, struct ibv_mr *mr);

#endif /* TM_DEV_H */
