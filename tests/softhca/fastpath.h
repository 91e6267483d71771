/*
 * fastpath.h - what the parts of test_fastpath share: one soft HCA set-up
 * at a time (env: two contexts and their QP pairs, opened and closed by
 * each test), and the tests of the other part.
 *
 *   test_fastpath.c   main; list ops run at post time, a send behind a
 *                     full ring, the one-packet matched path with its
 *                     lkey cases, two-SGE sends
 *   fastpath_plain.c  the one-packet path into plain buffers, the SRQ's
 *                     FIFO wrapping, a chain with a refused WR
 */
#ifndef FASTPATH_H
#define FASTPATH_H

#include "sh_util.h"

extern struct sh_env env;

void test_plain_one(void);
void test_plain_wrap(void);
void test_plain_wrap_chain(void);
void test_plain_refused(void);

#endif /* FASTPATH_H */
