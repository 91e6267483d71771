/*
 * tm_status.h - the status codes the project's layers return (dev, engine;
 * the MTL turns them into Open MPI's), and their names.
 *
 * Zero is success; errors are negative so that functions that also return
 * a count (tm_engine_progress) can share the int.  This header is shared by
 * every layer and so belongs to none: it sits at the top of the tree,
 * includes nothing, and its one function (tm_status.c) is linked into the
 * lowest layer that returns these codes, the device layer.
 */
#ifndef TM_STATUS_H
#define TM_STATUS_H

enum tm_status {
	TM_OK = 0,
	TM_ERR_NO_DEVICE = -1,   /* no provider / device found */
	TM_ERR_NO_MEMORY = -2,
	TM_ERR_INVALID = -3,     /* bad argument */
	TM_ERR_RANGE = -4,       /* ctx/src/tag outside the tag layout */
	TM_ERR_IO = -5,          /* a verbs call failed */
	TM_ERR_NOT_FOUND = -6,   /* probe: nothing matches */
	TM_ERR_BUSY = -7,        /* resources still in use */
	TM_ERR_UNSUPPORTED = -8,
	TM_ERR_PEER_DEAD = -9,   /* probe: nothing from that peer, and it died */
};

/* A short English name for a status, for messages (never NULL). */
const char *tm_status_str(int status);

#endif /* TM_STATUS_H */
