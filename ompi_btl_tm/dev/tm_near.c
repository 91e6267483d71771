/*
 * tm_near.c - the HCA nearest to this process (see tm_near.h).
 */
#include <stdlib.h>
#include <hwloc/openfabrics-verbs.h>

#include "dev/tm_near.h"

int tm_near_pick(int n, const hwloc_const_cpuset_t *local,
		 hwloc_const_cpuset_t bound)
{
	int i, sharing = -1;

	for (i = 0; i < n; i++) {
		if (hwloc_bitmap_isincluded(bound, local[i]))
			return i;
		if (sharing < 0 && hwloc_bitmap_intersects(bound, local[i]))
			sharing = i;
	}
	return sharing < 0 ? 0 : sharing;
}

int tm_near_device(int n, struct ibv_device *const *devs)
{
	hwloc_cpuset_t *local = NULL, bound = NULL;
	hwloc_topology_t topo;
	int i, pick = 0;

	if (n < 2 || hwloc_topology_init(&topo))
		return 0;
	if (hwloc_topology_load(topo))
		goto out;
	bound = hwloc_bitmap_alloc();
	local = calloc((size_t)n, sizeof(*local));
	if (!bound || !local ||
	    hwloc_get_cpubind(topo, bound, HWLOC_CPUBIND_PROCESS))
		goto out;
	for (i = 0; i < n; i++) {
		local[i] = hwloc_bitmap_alloc();
		if (!local[i] ||
		    hwloc_ibv_get_device_cpuset(topo, devs[i], local[i]))
			goto out;
	}
	pick = tm_near_pick(n, (const hwloc_const_cpuset_t *)local, bound);
out:
	for (i = 0; local && i < n; i++)
		hwloc_bitmap_free(local[i]);
	free(local);
	hwloc_bitmap_free(bound);
	hwloc_topology_destroy(topo);
	return pick;
}
