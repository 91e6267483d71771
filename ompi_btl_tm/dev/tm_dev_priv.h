/*
 * tm_dev_priv.h - what tm_dev.c and tm_dev_qp.c share.
 */
#ifndef TM_DEV_PRIV_H
#define TM_DEV_PRIV_H

#include "dev/tm_dev.h"

struct tm_verbs;

/* Picks the first active port and the GID to use on it (tm_dev.h). */
int tm_dev_select_port(struct tm_dev *dev,
		       const struct ibv_device_attr_ex *attr);

/* Opens the device of table v offering every TM_DEV_HAS_* bit of need
 * (tm_dev_pick.c), its attributes in attr, its name in devname. */
struct ibv_context *tm_dev_pick(const struct tm_verbs *v, int need,
				struct ibv_device_attr_ex *attr,
				const char **devname);

#endif /* TM_DEV_PRIV_H */
