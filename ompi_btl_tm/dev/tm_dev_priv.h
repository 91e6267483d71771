/*
 * tm_dev_priv.h - what tm_dev.c and tm_dev_qp.c share.
 */
#ifndef TM_DEV_PRIV_H
#define TM_DEV_PRIV_H

#include "dev/tm_dev.h"

/* Picks the first active port and the GID to use on it (tm_dev.h). */
int tm_dev_select_port(struct tm_dev *dev,
		       const struct ibv_device_attr_ex *attr);

#endif /* TM_DEV_PRIV_H */
