/*
 * sh_reach.h - what a hostile peer does to a rank, for the hostile-peer
 * tests: reach the segments a GID names (as any process of the same user
 * can try), forge packets into a QP's inbound ring, and run a case in a
 * child so that a crash is a failed check, not a lost test program.
 *
 * White box: the attacker knows the wire format (softhca_priv.h), as a
 * real one would.
 */
#ifndef SH_REACH_H
#define SH_REACH_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "softhca/softhca_priv.h"

struct reach {
	uint8_t *rings;         /* writable, or NULL */
	size_t rings_size;
	uint8_t *pub;           /* writable, or NULL */
	size_t pub_size;
	struct sh_seg head;     /* the victim's header as read */
	const char *how;
};

/*
 * Maps what it can of the segments gid names: the ring segment and the
 * published one (rkey table) read-write, through every way a process of
 * the same user has: pidfd_getfd of the descriptors the GID names (with
 * a ptrace right over the owner), else the owner's socket, presenting
 * the key the GID carries.  r->how says what happened.
 */
void reach_victim(const union ibv_gid *gid, struct reach *r);
void reach_drop(struct reach *r);
struct sh_ring *reach_ring(struct reach *r, uint32_t qpn);
struct sh_mr_slot *reach_mr(struct reach *r, uint32_t i);

/*
 * Writes one packet where the consumer looks next (its published tail)
 * and marks it arrived with seq = position + 1 + skew: a producer that
 * lies about the position when skew is not 0.
 */
void forge(struct reach *r, uint32_t qpn, const struct sh_pkt *hdr,
	   const void *data, uint32_t n, uint32_t skew);

/*
 * fn(arg) in a child, under a 30 s alarm (a card that never stops fails,
 * not hangs): its exit code, or -signal when it was killed.
 */
int run_child(int (*fn)(int), int arg);

#endif /* SH_REACH_H */
