/*
 * softhca_demo.c - two processes exchange tagged messages through the soft
 * HCA, using only rdma-core verbs (and the library-verbs table).
 *
 * The parent forks a sender and a receiver.  Each opens the soft HCA,
 * creates a PD, a CQ_ex, a TM-SRQ and an RC QP attached to it, and posts a
 * few plain SRQ buffers; the receiver's QP has no send queue, which makes
 * it the card's rendezvous QP (doc/mlx5-rules.md rule 10).  They swap {GID, QP number} over pipes and bring
 * their QPs to RTS.  The receiver adds tagged buffers to its TM list; the
 * sender then sends:
 *
 *   0  EAGER tag 0x100, 100 B          matches entry A (one completion)
 *   1  EAGER tag 0x999, 200 B          matches nothing: unexpected
 *   2  NO_TAG, 50 B                    plain buffer, never matched
 *   3  EAGER tag 7:42, 64 B            matches entry B (tag 7:*, masked)
 *   4  EAGER tag 0x101, 10000 B        entry C, longer than the MTU
 *   5  RNDV  tag 0x102, 50000 B        entry D: the card RDMA-reads the
 *                                      sender's buffer and sends FIN
 *
 * Both sides print every completion and check payload bytes; the receiver
 * answers the unexpected message with a TAG_SYNC.  Exit status 0 when
 * everything arrived as the TM-SRQ model says.
 *
 * This file holds the message table and main; the parts: demo.h.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>

#include "demo.h"

const struct msg msgs[] = {
	{ MSG_EAGER, 0x100, 100, 0 },
	{ MSG_EAGER, 0x999, 200, -1 },
	{ MSG_NO_TAG, 0, 50, -1 },
	{ MSG_EAGER, TAG_7_ANY | 42, 64, 1 },
	{ MSG_EAGER, 0x101, 10000, 2 },
	{ MSG_RNDV, 0x102, 50000, 3 },
};
_Static_assert(ARRAY_SIZE(msgs) == NUM_MSGS, "NUM_MSGS is the table's size");

static pid_t spawn(int (*fn)(struct proc *), const char *who, int rfd,
		   int wfd, const int close_fds[2])
{
	pid_t pid = fork();

	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		struct proc p = { .who = who, .rfd = rfd, .wfd = wfd };

		close(close_fds[0]);
		close(close_fds[1]);
		alarm(2 * TIMEOUT_SEC + 10);
		exit(fn(&p));
	}
	return pid;
}

int main(void)
{
	int s2r[2], r2s[2];
	pid_t pids[2];
	int status, failed = 0, i;
	const char *names[2] = { "sender", "receiver" };

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	if (pipe(s2r) || pipe(r2s)) {
		perror("pipe");
		return 1;
	}
	{
		const int close_s[2] = { s2r[0], r2s[1] };
		const int close_r[2] = { r2s[0], s2r[1] };

		pids[0] = spawn(sender, names[0], r2s[0], s2r[1], close_s);
		pids[1] = spawn(receiver, names[1], s2r[0], r2s[1], close_r);
	}
	close(s2r[0]);
	close(s2r[1]);
	close(r2s[0]);
	close(r2s[1]);

	for (i = 0; i < 2; i++) {
		if (waitpid(pids[i], &status, 0) < 0) {
			perror("waitpid");
			return 1;
		}
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			continue;
		failed++;
		if (WIFSIGNALED(status))
			printf("%s killed by signal %d\n", names[i],
			       WTERMSIG(status));
		else
			printf("%s exited with status %d\n", names[i],
			       WEXITSTATUS(status));
	}
	printf("softhca_demo: %s\n", failed ? "FAILED" : "OK");
	return failed ? 1 : 0;
}
