/*
 * softhca_handover.h - how a peer process gets a context's segments
 * (handover.c): the owner serves them on a socket named by its GID to a
 * process of the same user that presents the GID's key; no ptrace right
 * is needed.  Used by shm.c only.
 */
#ifndef SOFTHCA_HANDOVER_H
#define SOFTHCA_HANDOVER_H

#include "softhca_priv.h"

/* A peer's GID, decoded (shm.c). */
struct sh_gid {
	pid_t pid;
	int fd;
	uint32_t salt;      /* makes the socket's name with pid and fd */
	uint32_t nonce;
	uint64_t secret;    /* key << 32 | nonce */
};

/* the owner's side: started and stopped with its segments (shm.c) */
int sh_serve_start(struct sh_context *ctx);
void sh_serve_stop(struct sh_context *ctx);
/*
 * The peer's side: the two descriptors (published segment, rings) of the
 * context g names.  0, or ECONNREFUSED (nobody listens under that name,
 * or the owner went away without answering), EACCES (the owner refused:
 * another user, or not the key), ETIMEDOUT, EPROTO (a wrong answer).
 */
int sh_peer_fetch(const struct sh_gid *g, int *pfd, int *rfd);

#endif /* SOFTHCA_HANDOVER_H */
