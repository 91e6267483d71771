/*
 * tm_dev_priv.h - what tm_dev.c and tm_dev_pick.c share.
 */
#ifndef TM_DEV_PRIV_H
#define TM_DEV_PRIV_H

#include "dev/tm_dev.h"

/*
 * Opens the device that cfg's mode and provider prov ask for (tm_dev.h,
 * "Provider and mode"), setting dev->verbs and dev->tm; its attributes in
 * attr, its name in devname.  NULL: none.
 */
struct ibv_context *tm_dev_pick_open(struct tm_dev *dev,
				     const struct tm_dev_config *cfg,
				     const char *prov,
				     struct ibv_device_attr_ex *attr,
				     const char **devname);

#endif /* TM_DEV_PRIV_H */
