/*
 * fork_util.h - one engine per process, for the tests where a peer dies
 * (test_peer_fail, test_recv_fail): nodes forked before any device is
 * opened, QP addresses and one-byte commands over socketpairs.
 */
#ifndef FORK_UTIL_H
#define FORK_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "engine/tm_engine.h"

#define FU_MAXP 3
#define FU_KA_MS 20      /* keepalive threshold in these tests */

struct pnode {
	struct tm_dev *dev;
	struct tm_engine *eng;
	struct tm_dev_pair qp[FU_MAXP];
	uint32_t peer[FU_MAXP];
	int sock[FU_MAXP];
	uint8_t *arena;
	struct ibv_mr *mr;
};

double now_s(void);
/* Soft HCA device, engine (eager 1 KiB, keepalive FU_KA_MS), an arena of
 * arena bytes registered for remote reads.  0 or -1. */
int node_open(struct pnode *nd, size_t arena);
/* The offload_thresh node_open gives the engine (0, every receive on the
 * card, unless a test sets it first). */
extern size_t fu_offload_thresh;
void node_close(struct pnode *nd);
/* Both sides: make a QP pair, swap addresses over fd, connect, add the
 * peer in slot. */
int link_peer(struct pnode *nd, int slot, int fd);
/* Progresses eng until a byte arrives on fd (returned) or EOF (-1). */
int wait_byte(struct tm_engine *eng, int fd);
/* Forks child(arg, fd) (which must not return) and links it to slot. */
pid_t spawn(struct pnode *nd, int slot, void (*child)(int arg, int fd),
	    int arg);
/* The child's exit: its exit code, or 128 + the signal that ended it. */
int reap(pid_t pid);
/* SIGALRM handler: a hang is the failure these tests are about. */
void on_alarm(int sig);

#endif
