/*
 * tm_dev_priv.h - what tm_dev.c, tm_dev_pick.c and tm_dev_rcache.c share.
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

/*
 * The registration cache (tm_dev_rcache.c): setup at open notes whether
 * and how big a cache the first tm_dev_mem_get() makes; close destroys it
 * (before the PD: that deregisters what it holds).  Close after a setup
 * only, or on a device that never had one.
 */
void tm_dev_rcache_setup(struct tm_dev *dev, const struct tm_dev_config *cfg,
			 uint32_t dev_max_mr);
void tm_dev_rcache_close(struct tm_dev *dev);

#endif /* TM_DEV_PRIV_H */
