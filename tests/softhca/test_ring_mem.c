/*
 * test_ring_mem.c - a QP's inbound ring costs memory only for the slots
 * its peer has filled (shm.c, sh_ring_clear).
 *
 * The ring segment is a memfd: its allocated size (st_blocks) is exactly
 * the pages any process has touched.  With the default geometry (MTU 4096,
 * 64 slots: 264 KiB a ring), 15 connected QPs that each carry
 * one small message must hold about a page each, not their whole ring;
 * the memory of a ring that went round comes back when its QP slot is
 * reused, and a new QP on that slot is not fooled by the old one's
 * sequence numbers (a ring cleared by freeing its pages reads all zeros,
 * the first lap's "not arrived").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tap.h"
#include "softhca/sh_util.h"
#include "softhca/softhca_priv.h"

#define BUFSZ 256u
#define LAP   70 /* more than a lap of the default 64 slots */
#define NP    (SH_MAX_PAIRS - 1) /* one more is added later */

/* Bytes of side s's ring segment that are backed by memory. */
static long rings_bytes(struct sh_side *s)
{
	struct stat st;

	if (fstat(to_sh_ctx(s->ctx)->rings_fd, &st))
		sh_die("fstat of the ring segment failed");
	return (long)st.st_blocks * 512;
}

/* n small NO_TAG messages over pair i, each received whole and in order
 * (b's plain buffer holds the seq). */
static int traffic(struct sh_env *e, int i, int n, uint32_t seed)
{
	struct sh_wc wc;
	int ok = 1;

	for (int k = 0; k < n && ok; k++) {
		uint8_t *buf = sh_alloc(&e->b, BUFSZ), m[64];

		memset(buf, 0, BUFSZ);
		sh_post_plain(&e->b, 7000 + (uint64_t)k, buf, BUFSZ);
		sh_fill(m, sizeof(m), seed + (uint32_t)k);
		sh_put_tmh(m, IBV_TMH_NO_TAG, 0, 0);
		ok &= !sh_send_raw(e, i, 0, m, sizeof(m), (uint64_t)k);
		ok &= sh_wait(e, e->b.cq, &wc, 5000) == 1 &&
		      wc.status == IBV_WC_SUCCESS &&
		      wc.wr_id == 7000 + (uint64_t)k &&
		      wc.byte_len == sizeof(m) && !memcmp(buf, m, sizeof(m));
		ok &= sh_wait(e, e->p[i].scq, &wc, 5000) == 1 &&
		      wc.status == IBV_WC_SUCCESS;
	}
	return ok;
}

int main(void)
{
	const struct tm_verbs *v = sh_v();
	struct softhca_config cfg;
	struct sh_env e;
	long page = 4096, base, one, lap, back;
	int ok = 1, i;

	sh_config(&cfg);
	if (sh_env_open(&e, &cfg, SOFTHCA_SCHED_AUTO, NP))
		sh_die("cannot open %d QP pairs", NP);
	base = rings_bytes(&e.b);
	for (i = 0; i < NP; i++)
		ok &= traffic(&e, i, 1, (uint32_t)i * 100);
	one = rings_bytes(&e.b);
	tap_check(ok && base <= (NP + 1) * page &&
		  one <= 2 * (NP + 1) * page,
		  "%d connected QPs hold %ld KiB of ring memory, %ld KiB "
		  "after one message each (a whole ring is %lu KiB)",
		  NP, base / 1024, one / 1024,
		  (unsigned long)to_sh_ctx(e.b.ctx)->lay.ring_stride / 1024);

	ok = traffic(&e, 0, LAP, 1);
	lap = rings_bytes(&e.b);
	tap_check(ok && lap - one >= 32 * page,
		  "a ring that went round holds its slots (%ld KiB more)",
		  (lap - one) / 1024);

	/* the pair's slot is freed and taken by a new pair */
	ok = !v->destroy_qp(e.p[0].rqp) && !v->destroy_qp(e.p[0].sqp);
	e.p[0].rqp = e.p[0].sqp = NULL;
	i = sh_pair_add(&e);
	back = rings_bytes(&e.b);
	tap_check(ok && i >= 0 && e.p[i].rqp->qp_num == SH_QPN_BASE &&
		  lap - back >= 32 * page,
		  "its memory comes back when a new QP takes the slot "
		  "(%ld KiB left)", back / 1024);
	tap_check(i >= 0 && traffic(&e, i, LAP, 5000),
		  "... and the new QP's messages arrive whole and in order "
		  "over more than a lap (the old sequence numbers are gone)");
	sh_env_close(&e);
	return tap_done();
}
