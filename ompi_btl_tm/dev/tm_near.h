/*
 * tm_near.h - which TM-capable HCA to use when a node has several: the
 * one nearest to the CPUs this process is bound to (hwloc).
 *
 * Contract
 * --------
 * tm_near_pick() is the rule, on plain cpusets so it can be tested without
 * hardware: the first device whose local CPUs include every CPU of the
 * binding, else the first one that shares a CPU with it, else device 0.
 * tm_near_device() applies it to real libibverbs devices: their local CPUs
 * come from sysfs through hwloc_ibv_get_device_cpuset(), the binding from
 * hwloc_get_cpubind(); if hwloc cannot tell (no topology, no binding) it
 * returns 0, the first device, as before.
 */
#ifndef TM_NEAR_H
#define TM_NEAR_H

#include <hwloc.h>
#include <infiniband/verbs.h>

int tm_near_pick(int n, const hwloc_const_cpuset_t *local,
		 hwloc_const_cpuset_t bound);

int tm_near_device(int n, struct ibv_device *const *devs);

#endif /* TM_NEAR_H */
