/*
 * test_near.c - the nearest-HCA rule (dev/tm_near.h) on synthetic cpusets:
 * no hardware needed, one behaviour per TAP line.
 */
#include <hwloc.h>

#include "tap.h"
#include "dev/tm_near.h"

/* A cpuset from a list of CPU ranges "a-b,c" (hwloc's list syntax). */
static hwloc_bitmap_t set(const char *list)
{
	hwloc_bitmap_t b = hwloc_bitmap_alloc();

	if (!b || hwloc_bitmap_list_sscanf(b, list))
		tap_bail("cannot build a cpuset");
	return b;
}

static int pick(const char *bound, const char *a, const char *b)
{
	hwloc_const_cpuset_t local[2];
	hwloc_bitmap_t sb = set(bound), la = set(a), lb = set(b);
	int r;

	local[0] = la;
	local[1] = lb;
	r = tm_near_pick(2, local, sb);
	hwloc_bitmap_free(sb);
	hwloc_bitmap_free(la);
	hwloc_bitmap_free(lb);
	return r;
}

int main(void)
{
	hwloc_const_cpuset_t one[1];
	hwloc_bitmap_t s0 = set("0-3"), b0 = set("5");

	tap_check(pick("2-3", "0-1", "2-5") == 1,
		  "the device whose CPUs hold the whole binding wins");
	tap_check(pick("2-3", "0-3", "2-5") == 0,
		  "of two that hold the binding, the first");
	tap_check(pick("1-2", "0-1", "2-3") == 0,
		  "no device holds it: the first that shares a CPU");
	tap_check(pick("1-5", "6-7", "4-5") == 1,
		  "sharing beats not sharing");
	tap_check(pick("6", "0-1", "2-3") == 0,
		  "nothing near: device 0, as without hwloc");
	tap_check(pick("0-7", "0-3", "4-7") == 0,
		  "an unbound process (all CPUs): device 0");
	one[0] = s0;
	tap_check(tm_near_pick(1, one, b0) == 0, "a single device is used");
	tap_check(tm_near_device(1, NULL) == 0,
		  "tm_near_device with one device asks nothing of it");
	hwloc_bitmap_free(s0);
	hwloc_bitmap_free(b0);
	return tap_done();
}
