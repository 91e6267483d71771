/*
 * test_cm_grh.c - the connection manager's reading of a datagram's source
 * from its 40-byte GRH area (tm_cm_grh_from), in the two layouts a UD
 * receive holds: a GRH (InfiniBand, RoCE v1 and v2 over IPv6, the soft
 * HCA), and RoCE v2 over IPv4 (rxe and ConnectX on an IPv4 GID: 20
 * undefined bytes, then the IPv4 header; rdma-core's
 * get_grh_header_version reads it so).  On rxe the first layout's reading
 * refused every request, and no connection was ever made across hosts.
 */
#include <string.h>
#include "tap.h"
#include "dev/tm_dev_cm.h"

/* ::ffff:192.168.50.11, a RoCE v2 GID of an IPv4 address */
static const uint8_t v4gid[16] = { [10] = 0xff, [11] = 0xff,
				   192, 168, 50, 11 };
/* fe80::1, an IPv6 (or InfiniBand-style) GID */
static const uint8_t v6gid[16] = { 0xfe, 0x80, [15] = 1 };

/* A RoCE v2 IPv4 receive: garbage, then an IPv4 header from src to dst. */
static void ipv4_area(uint8_t *grh, const uint8_t *src, const uint8_t *dst)
{
	memset(grh, 0xa5, 20); /* undefined */
	memset(grh + 20, 0, 20);
	grh[20] = 0x45;        /* version 4, header length 5 */
	grh[20 + 9] = 17;      /* UDP */
	memcpy(grh + 20 + 12, src + 12, 4);
	memcpy(grh + 20 + 16, dst + 12, 4);
}

/* A GRH: version 6, source and destination GIDs. */
static void grh_area(uint8_t *grh, const uint8_t *src, const uint8_t *dst)
{
	memset(grh, 0, 40);
	grh[0] = 0x60;
	memcpy(grh + 8, src, 16);
	memcpy(grh + 24, dst, 16);
}

int main(void)
{
	uint8_t grh[40], other[16];

	memcpy(other, v4gid, 16);
	other[15] = 12;
	ipv4_area(grh, v4gid, other);
	tap_check(tm_cm_grh_from(grh, v4gid),
		  "RoCE v2 over IPv4: the IPv4 source address names its sender");
	tap_check(!tm_cm_grh_from(grh, other),
		  "RoCE v2 over IPv4: ... and no other (the destination's GID)");
	tap_check(!tm_cm_grh_from(grh, v6gid),
		  "RoCE v2 over IPv4: a GID that is no IPv4-mapped address is refused");
	grh_area(grh, v6gid, v4gid);
	tap_check(tm_cm_grh_from(grh, v6gid) && !tm_cm_grh_from(grh, v4gid),
		  "a GRH: the source GID at byte 8 names its sender, the destination's does not");
	grh_area(grh, v4gid, other);
	tap_check(tm_cm_grh_from(grh, v4gid),
		  "a GRH may carry an IPv4-mapped GID too (RoCE v1, the soft HCA's form)");
	return tap_done();
}
