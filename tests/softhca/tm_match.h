/*
 * tm_match.h - what the parts of test_tm_match share: one soft HCA set-up
 * at a time (two contexts, MTU 256, MANUAL scheduling), the software
 * unexpected count it reports in SYNCs, and the steps each test is made
 * of; a step that cannot be taken bails out of the whole program.
 *
 *   test_tm_match.c   main; messages that match a tagged entry
 *   tm_match_unexp.c  unexpected, NO_TAG, FIN and malformed messages,
 *                     receiver-not-ready, the order of completions
 *   tm_match_env.c    the steps below
 */
#ifndef TM_MATCH_H
#define TM_MATCH_H

#include <stdint.h>
#include "sh_util.h"

#define ALL ~0ULL
#define MTU 256
#define MD (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID)
#define TMF (IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID | IBV_WC_TM_SYNC_REQ)

extern struct sh_env env;

/* env opened: max_sge (0: the default), npairs QP pairs, strict or the
 * lenient model; the software count starts at 0 */
void open_env_mode(uint32_t max_sge, int npairs, int strict);
void open_env(uint32_t max_sge, int npairs);      /* strict */
/* ADD (signalled, in sync), processed and its completion consumed;
 * returns the entry's handle */
uint32_t add(uint64_t tag, uint64_t mask, void *buf, uint32_t len,
	     uint64_t recv_wr_id);
/* Software has handled one more unexpected message: SYNC, processed. */
void resync(void);
/* A plain buffer of len bytes of 0xEE, posted as wr_id. */
char *plain(uint64_t wr_id, uint32_t len);
/* len bytes of 0xEE and 64 more as a guard, not posted. */
char *guarded(uint32_t len);
/* An eager message on pair: len bytes of sh_fill(seed), TMH tag/app. */
void eager(int pair, uint64_t tag, uint32_t app, uint32_t len, uint32_t seed);
/* A successful TM_RECV that neither matched nor carries data. */
int is_unexpected(const struct sh_wc *wc);

/* tm_match_unexp.c */
void test_unexpected_notag_malformed(void);
void test_unexpected_multi(void);
void test_rnr(void);
void test_decision_order(void);

#endif
