/*
 * softhca_handover.h - how a peer process gets a context's segments
 * (handover.c).  The owner listens on a UNIX socket whose name only its
 * GID tells (pid and 26 random bits), and hands the segments to a
 * process of the same user that presents the GID's 48-bit key; the peer
 * sends its key only to the process the GID names, running as its user.
 * No ptrace right is needed.  Used by shm.c only.
 *
 * "Same user" is the same effective uid, except the overflow uid outside
 * the initial user namespace: that is what a process whose user
 * namespace maps no uid sees for itself and for everyone else.
 */
#ifndef SOFTHCA_HANDOVER_H
#define SOFTHCA_HANDOVER_H

#include "softhca_priv.h"

#define SH_NONCE_BITS 26
#define SH_KEY_BITS 48

/* A peer's GID, decoded (shm.c). */
struct sh_gid {
	pid_t pid;
	int fd;             /* the published segment's, in its process */
	uint32_t nonce;     /* names the socket with the pid */
	uint64_t key;       /* what the owner wants to see */
};

/*
 * The owner's side, in the open's order (shm.c): draw the key and the
 * nonce and listen (before the segments' headers are written: the nonce
 * goes in them), then start the thread that answers.  sh_serve_bind
 * fails (ENOSYS, ...) when getrandom cannot give the random bits; a
 * socket that cannot be bound is said on stderr and leaves the context
 * reachable from its own process only.  sh_serve_stop undoes either.
 */
int sh_serve_bind(struct sh_context *ctx);
int sh_serve_start(struct sh_context *ctx);
void sh_serve_stop(struct sh_context *ctx);
/*
 * The peer's side: the two descriptors (published segment, rings) of the
 * context g names.  0, or ECONNREFUSED (nobody listens under that name,
 * or the owner went away without answering), EACCES (the listener is not
 * g's process of this user, or the owner refused: another user, or not
 * the key), ETIMEDOUT, EPROTO (a wrong answer).
 */
int sh_peer_fetch(const struct sh_gid *g, int *pfd, int *rfd);

#endif /* SOFTHCA_HANDOVER_H */
