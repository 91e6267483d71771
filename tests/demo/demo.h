/*
 * demo.h - what the parts of softhca_demo share: one process's verbs
 * objects (struct proc), a completion as read from the CQ_ex, the message
 * table both sides follow, and the helpers each side calls.
 *
 *   softhca_demo.c   the message table, fork of sender and receiver, main
 *   demo_setup.c     device, PD, MR arena, CQ_ex, TM-SRQ, RC QP; the QP
 *                    brought to RTS against the peer's; teardown
 *   demo_io.c        printing, payload pattern, the pipes to the peer,
 *                    polling completions, list ops and their completion
 *   demo_sender.c    the sender: the messages, their completions, the FIN
 *   demo_receiver.c  the receiver: tagged entries, every completion
 *                    checked against the table, TAG_SYNC, the verdict
 *
 * Contract: a helper that cannot go on (a verbs call refused, the peer
 * gone, a time limit passed) prints FATAL and exits the process with
 * status 1; a check that fails prints FAIL and counts in p->errors, and
 * the side ends with status 1 if any did.  Every line a process prints
 * starts "[who pid]".
 */
#ifndef DEMO_H
#define DEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <infiniband/tm_types.h>

#include "verbs/tm_verbs.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define NUM_PLAIN	8
#define PLAIN_SIZE	8192
#define ARENA_SIZE	(1 << 20)
#define TIMEOUT_SEC	20

/* wr_id spaces */
#define WRID_TAGGED	0x1000
#define WRID_PLAIN	0x2000
#define WRID_OP		0x3000
#define WRID_SEND	0x4000

#define TAG_7_ANY	(7ULL << 32)
#define MASK_HI		0xffffffff00000000ULL

struct proc {
	const char *who;
	const struct tm_verbs *sv;
	struct ibv_device **devs;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq_ex *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;	/* the arena: plain and tagged buffers, sends */
	uint8_t *arena;
	size_t arena_used;
	uint8_t *plain[NUM_PLAIN];
	int rfd, wfd;		/* pipe ends to the peer */
	int errors;
};

/* One completion, as read from the CQ_ex. */
struct cqe {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	unsigned int flags;
	uint32_t byte_len;
	uint32_t qp_num;
	struct ibv_wc_tm_info tm;
};

/* The messages, as the sender sends them (the table: softhca_demo.c). */
enum msg_kind { MSG_EAGER, MSG_NO_TAG, MSG_RNDV };

struct msg {
	enum msg_kind kind;
	uint64_t tag;
	uint32_t len;
	int entry;		/* tagged entry expected to match, or -1 */
};

#define NUM_MSGS	6
extern const struct msg msgs[];

/* demo_io.c */
void say(struct proc *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define fail(p, ...)					\
	do {						\
		say(p, "FAIL: " __VA_ARGS__);		\
		(p)->errors++;				\
	} while (0)

void die(struct proc *p, const char *what, int err)
	__attribute__((noreturn));
double now(void);
void fill(uint8_t *buf, unsigned int msg, size_t len);
/* Returns the offset of the first bad byte, or len. */
size_t check(const uint8_t *buf, unsigned int msg, size_t len);
const char *opcode_str(enum ibv_wc_opcode op);

void pipe_write(struct proc *p, const void *buf, size_t len);
void pipe_read(struct proc *p, void *buf, size_t len);
/* Non-blocking: 1 and the token if the peer sent one. */
int pipe_try_token(struct proc *p, char *tok);

/* Polls up to max completions into out[] (each printed); how many. */
int poll_cqes(struct proc *p, struct cqe *out, int max);
/* FATAL once TIMEOUT_SEC have passed since start. */
void check_timeout(struct proc *p, double start, const char *what);
void post_op(struct proc *p, struct ibv_ops_wr *wr, const char *what);
/* Waits for the completion of the signalled list op wr_id. */
void wait_op(struct proc *p, uint64_t wr_id, enum ibv_wc_opcode op);
/* Polls until the peer's token comes; any completion meanwhile fails. */
void drain_until_token(struct proc *p, const char *what);

/* demo_setup.c */
uint8_t *arena_alloc(struct proc *p, size_t len);
void post_plain(struct proc *p, int i);
/* The verbs objects, plain buffers posted.  sends: the QP gets a send
 * queue; the receiver's has none, which is what makes it the card's
 * rendezvous QP (doc/mlx5-rules.md rule 10): on a QP with a send queue a
 * ConnectX-model card hands a matched RNDV to software instead. */
void setup(struct proc *p, bool sends);
void connect_qp(struct proc *p);
void teardown(struct proc *p);

/* demo_sender.c, demo_receiver.c: a side's exit status */
int sender(struct proc *p);
int receiver(struct proc *p);

#endif
