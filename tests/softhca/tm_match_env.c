/*
 * tm_match_env.c - test_tm_match's set-up and steps (tm_match.h).
 */
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "tm_match.h"

struct sh_env env;
static uint32_t sw_cnt; /* unexpected messages software has seen */
static uint64_t next_id = 1;

void open_env_mode(uint32_t max_sge, int npairs, int strict)
{
	struct softhca_config cfg;

	sh_config(&cfg);
	cfg.strict = strict;
	cfg.mtu = MTU;
	if (max_sge)
		cfg.max_sge = max_sge;
	if (sh_env_open(&env, &cfg, SOFTHCA_SCHED_MANUAL, npairs))
		tap_bail("sh_env_open failed");
	sw_cnt = 0;
}

void open_env(uint32_t max_sge, int npairs)
{
	open_env_mode(max_sge, npairs, 1);
}

/* ADD (signalled, in sync), processed and its completion consumed. */
uint32_t add(uint64_t tag, uint64_t mask, void *buf, uint32_t len,
	     uint64_t recv_wr_id)
{
	struct sh_wc wc;
	uint32_t h;

	if (sh_add(&env.b, 0xadd0000 + next_id++, recv_wr_id, buf, len, tag, mask,
		   sw_cnt, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC, &h))
		tap_bail("ADD failed");
	while (sh_step_op(&env.b))
		;
	if (sh_poll(env.b.cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS ||
	    wc.opcode != IBV_WC_TM_ADD)
		sh_die("ADD did not complete: %s", sh_wc_str(&wc));
	return h;
}

/* Software has handled one more unexpected message: report it. */
void resync(void)
{
	struct sh_wc wc;

	sw_cnt++;
	if (sh_sync(&env.b, 0x5c, sw_cnt, IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC))
		tap_bail("SYNC failed");
	while (sh_step_op(&env.b))
		;
	if (sh_poll(env.b.cq, &wc) != 1 || wc.opcode != IBV_WC_TM_SYNC ||
	    (wc.wc_flags & IBV_WC_TM_SYNC_REQ))
		sh_die("SYNC did not complete in sync: %s", sh_wc_str(&wc));
}

char *plain(uint64_t wr_id, uint32_t len)
{
	char *b = sh_alloc(&env.b, len);

	memset(b, 0xEE, len);
	if (sh_post_plain(&env.b, wr_id, b, len))
		tap_bail("post plain");
	return b;
}

char *guarded(uint32_t len)
{
	char *b = sh_alloc(&env.b, len + 64);

	memset(b, 0xEE, len + 64);
	return b;
}

void eager(int pair, uint64_t tag, uint32_t app, uint32_t len, uint32_t seed)
{
	char *p = malloc(len ? len : 1);

	sh_fill(p, len, seed);
	if (sh_send_tm(&env, pair, IBV_TMH_EAGER, tag, app, p, len, next_id++))
		tap_bail("send failed");
	free(p);
}

int is_unexpected(const struct sh_wc *wc)
{
	return wc->status == IBV_WC_SUCCESS && wc->opcode == IBV_WC_TM_RECV &&
	       !(wc->wc_flags & MD);
}
