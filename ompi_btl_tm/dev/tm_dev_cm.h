/*
 * tm_dev_cm.h - the connection manager: two processes agree on the QP
 * numbers of an RC pair (tm_dev.h, tm_dev_pair_*) over one UD QP each,
 * so that a pair is made only when a peer is first used.
 *
 * Contract
 * --------
 * Each process has one CM on its device; its address (struct tm_cm_addr:
 * GID, LID, UD QP number, 24 bytes) is all a peer needs, whatever the
 * job's size.  Peers are named by a 64-bit id the caller chooses (the MPI
 * layer: job id and rank), the same on both sides and unique among all
 * that may connect; cfg.job is a key both sides share (the MPI layer:
 * the user's), so that a datagram of another kind is refused.
 *
 *   active  tm_cm_connect(id, its address, a pair in INIT): REQ (our pair's
 *           QP numbers), resent until the REP (theirs) comes; the pair is
 *           connected and RTU sent; then ops.done(id, TM_OK).
 *   passive a REQ from an id with no connection asks ops.request for the
 *           pair to use (the caller checks the id against the address it
 *           published and may refuse); the pair is connected to the
 *           requester's, REP is sent and resent until RTU comes; then
 *           ops.done(id, TM_OK).  (The passive side may receive from the
 *           pair at once, and should send only after done.)
 *
 * Simultaneous connects (both ends called tm_cm_connect): the request of
 * the lower id wins; the higher id drops its own attempt and answers,
 * keeping its pair (so its engine peer stays the same).  Duplicates (a
 * lost REP or RTU) are answered again; anything else that does not fit a
 * connection's state, nonces (each CM draws a random one at creation:
 * replies to an earlier instance are refused) or addresses is dropped
 * and counted by reason (tm_cm_stats.bad, tm_cm_bad_str), never trusted:
 * a datagram is input from whoever could send it.
 *
 * Deadline: an attempt that is not up within cfg.timeout_ms fails:
 * ops.done(id, TM_ERR_IO, ETIMEDOUT), and a request for that id is
 * refused from then on (its requests failed; a second connection would
 * reorder what the first one lost).  Resends start after cfg.retry_ms
 * and double up to 1 s.  A pair that cannot be connected fails at once
 * with its errno.
 *
 * Progress: tm_cm_progress() polls the UD QP's CQ and runs the timers; a
 * peer answers only while its owner calls it, so the deadline should
 * cover a peer busy outside the library for a while.
 *
 * Single-threaded, like the engine: the caller serialises calls; the
 * callbacks run inside tm_cm_progress() or tm_cm_connect() and may call
 * nothing of the CM but tm_cm_stats_get.  Nothing here prints.
 */
#ifndef TM_DEV_CM_H
#define TM_DEV_CM_H

#include <stdbool.h>
#include <stdint.h>
#include "dev/tm_dev.h"

struct tm_cm;

struct tm_cm_addr {
	uint8_t gid[16];
	uint32_t qpn;            /* the UD QP */
	uint16_t lid;
	uint8_t pad[2];
};

/*
 * Wire format: one datagram, exactly this size after the 40-byte GRH, in
 * host order (one architecture), to the peer's UD QP with qkey
 * TM_CM_QKEY.  REQ and REP carry the sender's pair; REP and RTU echo the
 * receiver's nonce.
 */
#define TM_CM_MAGIC 0x746d636du /* "tmcm" */
#define TM_CM_VERSION 1
#define TM_CM_QKEY 0x746d0001u
enum { TM_CM_REQ = 1, TM_CM_REP, TM_CM_RTU };

struct tm_cm_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint64_t job;
	uint64_t src_id, dst_id;
	uint64_t src_nonce, dst_nonce;
	struct tm_cm_addr src;          /* the sender's CM */
	struct tm_dev_pair_addr pair;   /* the sender's pair (REQ, REP) */
};

struct tm_cm_ops {
	void *arg;
	/* A request from id (its CM at *from, as the datagram says): TM_OK
	 * with the pair to connect (created, in INIT), or a refusal. */
	int (*request)(void *arg, uint64_t id, const struct tm_cm_addr *from,
		       struct tm_dev_pair **pair);
	/* The connection to id is up (TM_OK) or failed (status, errno). */
	void (*done)(void *arg, uint64_t id, int status, int err);
};

struct tm_cm_config {
	uint64_t my_id;
	uint64_t job;
	uint32_t retry_ms;       /* first resend (0: 100) */
	uint32_t timeout_ms;     /* give up (0: 60000) */
};

enum tm_cm_bad {
	TM_CM_BAD_SIZE,          /* not the size of a message */
	TM_CM_BAD_HEADER,        /* magic, version or type */
	TM_CM_BAD_JOB,           /* another job's key, or not our id */
	TM_CM_BAD_SOURCE,        /* the GRH's GID is not the one it claims */
	TM_CM_BAD_REFUSED,       /* ops.request refused the id */
	TM_CM_BAD_STALE,         /* fits no connection's state or nonces */
	TM_CM_BAD_RECV,          /* a receive completed in error */
	TM_CM_NBAD
};

struct tm_cm_stats {
	uint64_t sent, resent, received;
	uint64_t accepted;       /* requests answered as the passive side */
	uint64_t connected, failed;
	uint64_t crossed;        /* simultaneous connects settled */
	uint64_t dup;            /* duplicates answered or ignored */
	uint64_t send_fail;      /* datagrams that could not be posted */
	uint64_t bad[TM_CM_NBAD];
	int last_bad;            /* reason of the last one, -1: none */
};

int tm_cm_create(struct tm_dev *dev, const struct tm_cm_config *cfg,
		 const struct tm_cm_ops *ops, struct tm_cm **out);
void tm_cm_destroy(struct tm_cm *cm);
void tm_cm_get_addr(const struct tm_cm *cm, struct tm_cm_addr *a);
/* Starts connecting pair to id (at addr): TM_OK, done() follows. */
int tm_cm_connect(struct tm_cm *cm, uint64_t id, const struct tm_cm_addr *addr,
		  struct tm_dev_pair *pair);
/* Datagrams handled and timers run; TM_ERR_IO if the UD CQ failed. */
int tm_cm_progress(struct tm_cm *cm);
/* Connections under way (progress is owed). */
uint32_t tm_cm_pending(const struct tm_cm *cm);
void tm_cm_stats_get(const struct tm_cm *cm, struct tm_cm_stats *st);
const char *tm_cm_bad_str(int bad);

/* Did a datagram whose 40-byte GRH area is grh come from gid?  Both
 * layouts a receive can hold: a GRH (the source GID at byte 8), and RoCE
 * v2 over IPv4's (20 undefined bytes, then the IPv4 header, whose source
 * address is gid's IPv4-mapped tail).  The CM refuses a datagram that did
 * not (TM_CM_BAD_SOURCE). */
bool tm_cm_grh_from(const uint8_t *grh, const uint8_t *gid);

#endif /* TM_DEV_CM_H */
