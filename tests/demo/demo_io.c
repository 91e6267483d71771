/*
 * demo_io.c - softhca_demo's printing, payload pattern, pipes to the peer
 * and completion helpers (contract: demo.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "demo.h"

void say(struct proc *p, const char *fmt, ...)
{
	va_list ap;

	printf("[%s %d] ", p->who, (int)getpid());
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

void die(struct proc *p, const char *what, int err)
{
	say(p, "FATAL: %s: %s", what, strerror(err));
	exit(1);
}

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint8_t pattern(unsigned int msg, size_t i)
{
	return (uint8_t)(msg * 31 + i * 7 + 1);
}

void fill(uint8_t *buf, unsigned int msg, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = pattern(msg, i);
}

/* Returns the offset of the first bad byte, or len. */
size_t check(const uint8_t *buf, unsigned int msg, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (buf[i] != pattern(msg, i))
			break;
	return i;
}

const char *opcode_str(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND:		return "SEND";
	case IBV_WC_RDMA_READ:		return "RDMA_READ";
	case IBV_WC_RECV:		return "RECV";
	case IBV_WC_TM_ADD:		return "TM_ADD";
	case IBV_WC_TM_DEL:		return "TM_DEL";
	case IBV_WC_TM_SYNC:		return "TM_SYNC";
	case IBV_WC_TM_RECV:		return "TM_RECV";
	case IBV_WC_TM_NO_TAG:		return "TM_NO_TAG";
	default:			return "?";
	}
}

static void flags_str(unsigned int f, char *s, size_t n)
{
	snprintf(s, n, "%s%s%s%s",
		 f & IBV_WC_TM_MATCH ? " MATCH" : "",
		 f & IBV_WC_TM_DATA_VALID ? " DATA_VALID" : "",
		 f & IBV_WC_TM_SYNC_REQ ? " SYNC_REQ" : "",
		 f & ~(unsigned int)(IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID |
				     IBV_WC_TM_SYNC_REQ) ? " other" : "");
	if (!s[0])
		snprintf(s, n, " -");
}

static void print_cqe(struct proc *p, const struct cqe *c)
{
	char fl[64];

	flags_str(c->flags, fl, sizeof(fl));
	say(p, "cqe wr_id 0x%04llx %-9s status %s flags%s tag 0x%llx priv %u bytes %u qp %u",
	    (unsigned long long)c->wr_id, opcode_str(c->opcode),
	    ibv_wc_status_str(c->status), fl,
	    (unsigned long long)c->tm.tag, c->tm.priv, c->byte_len,
	    c->qp_num);
}

/* ---- pipes -------------------------------------------------------------- */

void pipe_write(struct proc *p, const void *buf, size_t len)
{
	const uint8_t *b = buf;

	while (len) {
		ssize_t n = write(p->wfd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die(p, "write to peer", n < 0 ? errno : EPIPE);
		b += n;
		len -= n;
	}
}

void pipe_read(struct proc *p, void *buf, size_t len)
{
	uint8_t *b = buf;

	while (len) {
		ssize_t n = read(p->rfd, b, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die(p, "read from peer", n < 0 ? errno : EPIPE);
		b += n;
		len -= n;
	}
}

/* Non-blocking: 1 and the token if the peer sent one. */
int pipe_try_token(struct proc *p, char *tok)
{
	struct pollfd pfd = { .fd = p->rfd, .events = POLLIN };

	if (poll(&pfd, 1, 0) <= 0)
		return 0;
	pipe_read(p, tok, 1);
	return 1;
}

/* ---- completions -------------------------------------------------------- */

/* Polls up to max completions into out[]; returns how many. */
int poll_cqes(struct proc *p, struct cqe *out, int max)
{
	struct ibv_poll_cq_attr pa = { 0 };
	int n = 0, ret;

	ret = ibv_start_poll(p->cq, &pa);
	if (ret == ENOENT)
		return 0;
	if (ret)
		die(p, "ibv_start_poll", ret);
	do {
		struct cqe *c = &out[n++];

		memset(c, 0, sizeof(*c));
		c->wr_id = p->cq->wr_id;
		c->status = p->cq->status;
		c->opcode = ibv_wc_read_opcode(p->cq);
		c->flags = ibv_wc_read_wc_flags(p->cq);
		c->byte_len = ibv_wc_read_byte_len(p->cq);
		c->qp_num = ibv_wc_read_qp_num(p->cq);
		ibv_wc_read_tm_info(p->cq, &c->tm);
		print_cqe(p, c);
		if (n == max)
			break;
		ret = ibv_next_poll(p->cq);
	} while (ret == 0);
	if (ret && ret != ENOENT)
		die(p, "ibv_next_poll", ret);
	ibv_end_poll(p->cq);
	return n;
}

void check_timeout(struct proc *p, double start, const char *what)
{
	if (now() - start > TIMEOUT_SEC) {
		say(p, "FATAL: timed out after %d s waiting for %s",
		    TIMEOUT_SEC, what);
		exit(1);
	}
}

void post_op(struct proc *p, struct ibv_ops_wr *wr, const char *what)
{
	struct ibv_ops_wr *bad;
	int ret;

	ret = ibv_post_srq_ops(p->srq, wr, &bad);
	if (ret)
		die(p, what, ret);
}

/* Waits for the completion of the signalled list op wr_id. */
void wait_op(struct proc *p, uint64_t wr_id, enum ibv_wc_opcode op)
{
	double start = now();
	struct cqe c[16];
	bool got = false;
	int i, n;

	while (!got) {
		n = poll_cqes(p, c, ARRAY_SIZE(c));
		for (i = 0; i < n; i++) {
			if (c[i].wr_id != wr_id) {
				fail(p, "unexpected completion wr_id 0x%llx while waiting for op 0x%llx",
				     (unsigned long long)c[i].wr_id,
				     (unsigned long long)wr_id);
				continue;
			}
			got = true;
			if (c[i].opcode != op || c[i].status != IBV_WC_SUCCESS)
				fail(p, "op 0x%llx: %s %s, wanted %s SUCCESS",
				     (unsigned long long)wr_id,
				     opcode_str(c[i].opcode),
				     ibv_wc_status_str(c[i].status),
				     opcode_str(op));
		}
		check_timeout(p, start, opcode_str(op));
	}
}

/* Keeps this side's card running until the peer says it is done. */
void drain_until_token(struct proc *p, const char *what)
{
	double start = now();
	struct cqe c[16];
	char tok;
	int i, n;

	while (!pipe_try_token(p, &tok)) {
		n = poll_cqes(p, c, ARRAY_SIZE(c));
		for (i = 0; i < n; i++)
			fail(p, "extra completion wr_id 0x%llx",
			     (unsigned long long)c[i].wr_id);
		check_timeout(p, start, what);
		usleep(100);
	}
}
