/*
 * mtl_tm_modex.c - the key this process's address goes under in the
 * modex (mtl_tm.h, "Modex keys"), and the two calls that use it.
 *
 * The key names the initialisation: "mtl.tm.addr.<n>" for the n-th
 * initialisation of the MTL in this process (n counts from 1), with
 * ".again" after it for the second exchange of "One provider for the
 * job".  A process that finalises its last MPI session and starts another
 * initialises the MTL again, with new QPs and a new soft-HCA context
 * (whose GID carries a fresh socket name): PMIx's client keeps what it
 * read of a peer's keys across that, so under one key for every
 * initialisation a rank read a peer's previous address now and then
 * (1 run in 3 to 25 of tests/mtl/test_sessions.sh) and its connect found
 * nobody there.  A key no earlier initialisation used cannot be answered
 * from that cache.  Every rank of a job initialises the MTL the same
 * number of times (each initialisation is the whole job's), so n is the
 * same on both ends.
 *
 * A process of another job (spawned, or connected from another mpirun)
 * counts its own initialisations, which this one cannot know: it is read
 * under its first (a process starts MPI once unless it uses sessions),
 * and under that one's ".again" key when its job needed the second
 * exchange (the first one's address was closed then).  So a process that
 * re-initialised is reached from another job only at its first
 * initialisation's address, which is gone: that connection fails, naming
 * the process, after mtl_tm_connect_timeout (mtl_tm(7), LIMITS).
 */
#include "mtl_tm.h"

#include <stdio.h>

/* The key of initialisation n's exchange (again: the second one). */
static void modex_key(char *key, size_t len, uint32_t n, bool again)
{
	snprintf(key, len, "mtl.tm.addr.%u%s", n, again ? ".again" : "");
}

int mtl_tm_modex_send(const void *m, size_t size)
{
	char key[MTL_TM_MODEX_KEY_LEN];
	int rc;

	modex_key(key, sizeof(key), mtl_tm.inits, mtl_tm.again);
	OPAL_MODEX_SEND_STRING(rc, MTL_TM_MODEX_GLOBAL, key, m, size);
	return rc;
}

int mtl_tm_modex_recv(const opal_process_name_t *name, bool again,
		      void **m, int32_t *size)
{
	char key[MTL_TM_MODEX_KEY_LEN];
	int rc;

	modex_key(key, sizeof(key), mtl_tm.inits, again);
	OPAL_MODEX_RECV_STRING(rc, key, name, m, size);
	return rc;
}

int mtl_tm_modex_recv_other(const opal_process_name_t *name, void **m,
			    int32_t *size)
{
	char key[MTL_TM_MODEX_KEY_LEN];
	int rc;

	/* (at once: most jobs never publish it) */
	modex_key(key, sizeof(key), 1, true);
	if (mtl_tm_modex_recv_now(name, key, m, size) == OPAL_SUCCESS)
		return OPAL_SUCCESS;
	modex_key(key, sizeof(key), 1, false);
	OPAL_MODEX_RECV_STRING(rc, key, name, m, size);
	return rc;
}
