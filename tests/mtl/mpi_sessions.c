/*
 * mpi_sessions.c - MPI-4 sessions over the MTL: communicators made from
 * the group of "mpi://WORLD" (MPI_Comm_create_from_group, which needs
 * extended communicator ids), used for
 *   - point-to-point on two such communicators with the same tags, eager
 *     and rendezvous sizes, messages arriving before and after their
 *     receives: each must land on its own communicator;
 *   - MPI_Isendrecv and MPI_Isendrecv_replace around a ring;
 *   - persistent collectives (MPI_Allreduce_init, MPI_Bcast_init, each
 *     started twice).
 * Odd ranks first make communicators of their own (groups of one), so
 * the two communicators have different local ids on different ranks: a
 * sender must use the id its peer knows them by.
 * "mpi_sessions N" does all of it N times (default 1), each time in a new
 * session (MPI_Session_init ... MPI_Session_finalize), so the MTL is
 * initialised and finalised N times in one process.
 *
 * "mpi_sessions N DIR" also waits, between two sessions, until every rank
 * has finalised the first: each leaves a file in DIR (a directory of the
 * node all ranks share) and waits for the others' (at most 120 s).
 * Without it, PMIx up to 5.0.x (openpmix issue 4113, fixed in 2026)
 * counts a process that disconnects in MPI_Session_finalize as gone from
 * every collective then open: a rank that starts its next session while a
 * peer still finalises the last sees its init fence complete without that
 * peer, and Open MPI's own fences drift apart (MPI_Session_init fails or
 * hangs, with pml ob1 too: 3 jobs in 60 of "mpi_sessions 3" on Debian
 * 13's Open MPI 5.0.7 and PMIx 5.0.7).  The wait keeps a rank from
 * starting a session while a peer still finalises; it does not cure the
 * server, which may see a disconnect late (pml ob1 still failed 4 jobs in
 * 100 of "mpi_sessions 3 DIR"; mtl tm 1 in 200, a hang in Open MPI's
 * fences with nothing from the MTL).
 *
 *
 * "mpi_sessions world" runs the MPI-4 calls that need the world model
 * instead, on a duplicate of MPI_COMM_WORLD after MPI_Init: partitioned
 * send/receive (MPI_Psend_init/MPI_Precv_init, partitions marked ready
 * last first; Open MPI 5.0's part persist duplicates MPI_COMM_WORLD, so
 * it crashes in a process that only has sessions), MPI_Isendrecv and the
 * persistent collectives.
 *
 * "mpi_sessions threads" starts a session at MPI_THREAD_SINGLE (the MTL
 * initialised then, without MPI threads), exchanges on a communicator of
 * it, then starts a second session asking for MPI_THREAD_MULTIPLE while
 * the first is open (Open MPI 5.0 turns opal_using_threads() on then,
 * after the MTL's init) and has 4 threads per rank exchange on a
 * communicator of the second, each with its own tag, eager and
 * rendezvous sizes: the MTL must take its entry points for MPI threads
 * from that communicator on (mtl_tm.h; test_sessions.sh checks its
 * verbose line too).
 *
 * Prints "rank R: FAIL: ..." per mismatch and, from rank 0, "sessions: ok
 * ..." per part; exits non-zero on any failure.  "mpi_sessions probe" only
 * says whether it was built with sessions.  Built against an MPI
 * without sessions (Open MPI 4.1) it prints "sessions: SKIP" and exits 0.
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Open MPI 5.0 has the MPI-4 calls used here but says MPI_VERSION 3. */
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define HAVE_SESSIONS 1
#endif

#ifndef HAVE_SESSIONS

int main(void)
{
	printf("sessions: SKIP no MPI-4 sessions in this MPI (MPI_VERSION %d)\n",
	       MPI_VERSION);
	return 0;
}

#else

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

static int rank, size, fails;
static MPI_Comm ca, cb; /* the two communicators from "mpi://WORLD" */

#define FAIL(...) do { \
	printf("rank %d: FAIL: ", rank); printf(__VA_ARGS__); \
	printf("\n"); fflush(stdout); fails++; \
} while (0)

/* A failed call ends the test: what follows would only hang. */
#define CALL(x) do { \
	int rc_ = (x); \
	if (rc_ != MPI_SUCCESS) { \
		char s_[MPI_MAX_ERROR_STRING]; int l_ = 0; \
		MPI_Error_string(rc_, s_, &l_); \
		printf("rank %d: FAIL: %s:%d: %s: %s\n", rank, __FILE__, \
		       __LINE__, #x, s_); \
		fflush(stdout); \
		exit(1); \
	} \
} while (0)

static void ok(int round, const char *what)
{
	if (rank == 0) {
		printf("sessions: ok round %d: %s\n", round, what);
		fflush(stdout);
	}
}

/* Word i of message (comm c, sender s, sequence q). */
static int word(int c, int s, int q, int i)
{
	/* unsigned: wraps instead of overflowing */
	unsigned w = (((unsigned)c * 64 + s) * 64 + q) * 1000003u + i;

	return (int)(w & 0x7fffffff);
}

static void fill(int *p, int n, int c, int s, int q)
{
	for (int i = 0; i < n; i++)
		p[i] = word(c, s, q, i);
}

static void check(const int *p, int n, int c, int s, int q,
		  const char *what)
{
	for (int i = 0; i < n; i++)
		if (p[i] != word(c, s, q, i)) {
			FAIL("%s: word %d is %d, want %d (comm %c from %d, message %d)",
			     what, i, p[i], word(c, s, q, i), 'a' + c, s, q);
			return;
		}
}

/*
 * Same tag on both communicators.  unexpected: every message is sent (cb
 * first) before the receives are posted (ca first); else the receives
 * are posted first.  n ints per message.
 */
static void same_tags(int n, int unexpected)
{
	int right = (rank + 1) % size, left = (rank + size - 1) % size;
	int *sbuf[2], *rbuf[2];
	MPI_Request sreq[2], rreq[2];
	MPI_Status st[2];
	MPI_Comm comm[2] = { ca, cb };

	for (int c = 0; c < 2; c++) {
		sbuf[c] = malloc(n * sizeof(int));
		rbuf[c] = calloc(n, sizeof(int));
		if (!sbuf[c] || !rbuf[c])
			CALL(MPI_ERR_NO_MEM);
		fill(sbuf[c], n, c, rank, unexpected);
	}
	if (!unexpected)
		for (int c = 0; c < 2; c++)
			CALL(MPI_Irecv(rbuf[c], n, MPI_INT, MPI_ANY_SOURCE, 7,
				       comm[c], &rreq[c]));
	CALL(MPI_Barrier(ca));
	for (int c = 1; c >= 0; c--)
		CALL(MPI_Isend(sbuf[c], n, MPI_INT, right, 7, comm[c],
			       &sreq[c]));
	if (unexpected) {
		/* every message is here or on its way: cb's sent first */
		CALL(MPI_Barrier(cb));
		for (int c = 0; c < 2; c++)
			CALL(MPI_Irecv(rbuf[c], n, MPI_INT, MPI_ANY_SOURCE, 7,
				       comm[c], &rreq[c]));
	}
	CALL(MPI_Waitall(2, rreq, st));
	CALL(MPI_Waitall(2, sreq, MPI_STATUSES_IGNORE));
	for (int c = 0; c < 2; c++) {
		if (st[c].MPI_SOURCE != left || st[c].MPI_TAG != 7)
			FAIL("comm %c: source %d tag %d, want %d, 7", 'a' + c,
			     st[c].MPI_SOURCE, st[c].MPI_TAG, left);
		check(rbuf[c], n, c, left, unexpected, "same tags");
		free(sbuf[c]);
		free(rbuf[c]);
	}
}

static void isendrecv(void)
{
	int right = (rank + 1) % size, left = (rank + size - 1) % size;
	enum { N = 5000 };
	static int s[N], r[N];
	MPI_Request req;
	MPI_Status st;

	fill(s, N, 0, rank, 1);
	memset(r, 0, sizeof(r));
	CALL(MPI_Isendrecv(s, N, MPI_INT, right, 3, r, N, MPI_INT, left, 3,
			   ca, &req));
	CALL(MPI_Wait(&req, &st));
	if (st.MPI_SOURCE != left)
		FAIL("MPI_Isendrecv: source %d, want %d", st.MPI_SOURCE, left);
	check(r, N, 0, left, 1, "MPI_Isendrecv");
	fill(r, N, 1, rank, 2);
	CALL(MPI_Isendrecv_replace(r, N, MPI_INT, right, 4, left, 4, cb,
				   &req));
	CALL(MPI_Wait(&req, MPI_STATUS_IGNORE));
	check(r, N, 1, left, 2, "MPI_Isendrecv_replace");
}

/* Rank 0 to every other rank, 4 partitions marked ready last first. */
static void partitioned(void)
{
	enum { P = 4, PN = 3000 };
	static int buf[P * PN];
	MPI_Request req;

	if (rank == 0) {
		for (int d = 1; d < size; d++) {
			fill(buf, P * PN, 1, 0, d);
			CALL(MPI_Psend_init(buf, P, PN, MPI_INT, d, 5, cb,
					    MPI_INFO_NULL, &req));
			CALL(MPI_Start(&req));
			for (int p = P - 1; p >= 0; p--)
				CALL(MPI_Pready(p, req));
			CALL(MPI_Wait(&req, MPI_STATUS_IGNORE));
			CALL(MPI_Request_free(&req));
		}
	} else {
		memset(buf, 0, sizeof(buf));
		CALL(MPI_Precv_init(buf, P, PN, MPI_INT, 0, 5, cb,
				    MPI_INFO_NULL, &req));
		CALL(MPI_Start(&req));
		CALL(MPI_Wait(&req, MPI_STATUS_IGNORE));
		CALL(MPI_Request_free(&req));
		check(buf, P * PN, 1, 0, rank, "partitioned");
	}
}

static void persistent_coll(void)
{
	int in = 0, out, want = size * (size - 1) / 2, b[100];
	MPI_Request ar, br;

	CALL(MPI_Allreduce_init(&in, &out, 1, MPI_INT, MPI_SUM, ca,
				MPI_INFO_NULL, &ar));
	CALL(MPI_Bcast_init(b, 100, MPI_INT, size - 1, cb, MPI_INFO_NULL,
			    &br));
	for (int k = 0; k < 2; k++) {
		in = rank + k;
		out = -1;
		if (rank == size - 1)
			fill(b, 100, 1, rank, k);
		else
			memset(b, 0, sizeof(b));
		CALL(MPI_Start(&ar));
		CALL(MPI_Start(&br));
		CALL(MPI_Wait(&br, MPI_STATUS_IGNORE));
		CALL(MPI_Wait(&ar, MPI_STATUS_IGNORE));
		if (out != want + k * size)
			FAIL("MPI_Allreduce_init, start %d: %d, want %d", k,
			     out, want + k * size);
		check(b, 100, 1, size - 1, k, "MPI_Bcast_init");
	}
	CALL(MPI_Request_free(&ar));
	CALL(MPI_Request_free(&br));
}

static void one_session(int round)
{
	MPI_Session s;
	MPI_Group world, self;
	MPI_Comm own[3];
	int nown = 0;
	char tag[64];

	CALL(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
	CALL(MPI_Group_from_session_pset(s, "mpi://WORLD", &world));
	CALL(MPI_Group_rank(world, &rank));
	CALL(MPI_Group_size(world, &size));
	if (rank % 2) {
		/* local ids taken here only: ca and cb get other ids on
		 * odd ranks than on even ones */
		CALL(MPI_Group_incl(world, 1, &rank, &self));
		for (nown = 0; nown < 3; nown++) {
			snprintf(tag, sizeof(tag), "mpi_sessions.own.%d.%d",
				 rank, nown);
			CALL(MPI_Comm_create_from_group(self, tag,
				MPI_INFO_NULL, MPI_ERRORS_RETURN, &own[nown]));
		}
		CALL(MPI_Group_free(&self));
	}
	CALL(MPI_Comm_create_from_group(world, "mpi_sessions.a",
		MPI_INFO_NULL, MPI_ERRORS_RETURN, &ca));
	CALL(MPI_Comm_create_from_group(world, "mpi_sessions.b",
		MPI_INFO_NULL, MPI_ERRORS_RETURN, &cb));
	ok(round, "two communicators from mpi://WORLD");

	same_tags(10, 1);
	same_tags(10, 0);
	same_tags(50000, 1);
	same_tags(50000, 0);
	ok(round, "two communicators, same tag, 40 B and 200 kB, unexpected and posted first: no mixing");
	isendrecv();
	ok(round, "MPI_Isendrecv, MPI_Isendrecv_replace");
	persistent_coll();
	ok(round, "persistent collectives (MPI_Allreduce_init, MPI_Bcast_init), started twice");

	CALL(MPI_Comm_free(&ca));
	CALL(MPI_Comm_free(&cb));
	while (nown > 0)
		CALL(MPI_Comm_free(&own[--nown]));
	CALL(MPI_Group_free(&world));
	CALL(MPI_Session_finalize(&s));
}

/* Has rank r left its file for round `round` in dir? */
static bool finalised(const char *dir, int round, int r)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/finalised.%d.%d", dir, round, r);
	return access(path, F_OK) == 0;
}

/* Every rank has finalised session `round` (rank and size: its world). */
static void between_sessions(const char *dir, int round)
{
	struct timespec pause = { 0, 10 * 1000 * 1000 };
	char path[4096];
	int fd, r = 0;
	time_t give_up = time(NULL) + 120;

	snprintf(path, sizeof(path), "%s/finalised.%d.%d", dir, round, rank);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		printf("rank %d: FAIL: cannot create %s\n", rank, path);
		exit(1);
	}
	close(fd);
	while (r < size) {
		if (finalised(dir, round, r)) {
			r++;
			continue;
		}
		if (time(NULL) > give_up) {
			printf("rank %d: FAIL: rank %d did not finalise session %d within 120 s\n",
			       rank, r, round);
			exit(1);
		}
		nanosleep(&pause, NULL);
	}
}

static void world(int *argc, char ***argv)
{
	CALL(MPI_Init(argc, argv));
	CALL(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
	CALL(MPI_Comm_size(MPI_COMM_WORLD, &size));
	CALL(MPI_Comm_dup(MPI_COMM_WORLD, &ca));
	CALL(MPI_Comm_dup(MPI_COMM_WORLD, &cb));
	CALL(MPI_Comm_set_errhandler(ca, MPI_ERRORS_RETURN));
	CALL(MPI_Comm_set_errhandler(cb, MPI_ERRORS_RETURN));
	partitioned();
	ok(0, "partitioned send/receive (4 partitions, ready last first)");
	isendrecv();
	ok(0, "MPI_Isendrecv, MPI_Isendrecv_replace");
	persistent_coll();
	ok(0, "persistent collectives (MPI_Allreduce_init, MPI_Bcast_init), started twice");
	CALL(MPI_Comm_free(&ca));
	CALL(MPI_Comm_free(&cb));
	CALL(MPI_Finalize());
}

#define NTHREADS 4

/* Thread t of "threads": rounds of a ring exchange on cb, tag t. */
static void *ring_thread(void *arg)
{
	int t = (int)(intptr_t)arg, right = (rank + 1) % size;
	int left = (rank + size - 1) % size;
	static const int lens[] = { 10, 50000 };
	int *sbuf = malloc(50000 * sizeof(int));
	int *rbuf = malloc(50000 * sizeof(int));
	MPI_Request r[2];

	if (!sbuf || !rbuf) {
		FAIL("thread %d: no memory", t);
		exit(1);
	}
	for (int q = 0; q < 40; q++) {
		int n = lens[q % 2];

		fill(sbuf, n, t, rank, q);
		CALL(MPI_Irecv(rbuf, n, MPI_INT, left, t, cb, &r[0]));
		CALL(MPI_Isend(sbuf, n, MPI_INT, right, t, cb, &r[1]));
		CALL(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
		check(rbuf, n, t, left, q, "threads: ring");
	}
	free(sbuf);
	free(rbuf);
	return NULL;
}

/* "mpi_sessions threads": see the top. */
static void threads(void)
{
	MPI_Session s1, s2;
	MPI_Group g1, g2;
	MPI_Info info;
	pthread_t th[NTHREADS];

	CALL(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s1));
	CALL(MPI_Group_from_session_pset(s1, "mpi://WORLD", &g1));
	CALL(MPI_Group_rank(g1, &rank));
	CALL(MPI_Group_size(g1, &size));
	CALL(MPI_Comm_create_from_group(g1, "mpi_sessions.t1",
		MPI_INFO_NULL, MPI_ERRORS_RETURN, &ca));
	cb = ca;
	ring_thread((void *)(intptr_t)0);
	ok(0, "a session at MPI_THREAD_SINGLE: a ring on its communicator");
	CALL(MPI_Info_create(&info));
	CALL(MPI_Info_set(info, "thread_level", "MPI_THREAD_MULTIPLE"));
	CALL(MPI_Session_init(info, MPI_ERRORS_RETURN, &s2));
	CALL(MPI_Info_free(&info));
	CALL(MPI_Group_from_session_pset(s2, "mpi://WORLD", &g2));
	CALL(MPI_Comm_create_from_group(g2, "mpi_sessions.t2",
		MPI_INFO_NULL, MPI_ERRORS_RETURN, &cb));
	for (int t = 0; t < NTHREADS; t++)
		if (pthread_create(&th[t], NULL, ring_thread,
				   (void *)(intptr_t)t)) {
			FAIL("pthread_create");
			exit(1);
		}
	for (int t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	ok(0, "a second session at MPI_THREAD_MULTIPLE while the first is open: 4 threads per rank, 40 B and 200 kB, data intact");
	CALL(MPI_Comm_free(&cb));
	CALL(MPI_Comm_free(&ca));
	CALL(MPI_Group_free(&g2));
	CALL(MPI_Group_free(&g1));
	CALL(MPI_Session_finalize(&s2));
	CALL(MPI_Session_finalize(&s1));
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "probe")) {
		/* for the test script: no MPI call, no launcher needed */
		printf("sessions: available\n");
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "world")) {
		world(&argc, &argv);
	} else if (argc > 1 && !strcmp(argv[1], "threads")) {
		threads();
	} else {
		int rounds = argc > 1 ? atoi(argv[1]) : 1;
		const char *dir = argc > 2 ? argv[2] : NULL;

		for (int round = 1; round <= rounds; round++) {
			one_session(round);
			if (dir && round < rounds)
				between_sessions(dir, round);
		}
	}
	if (rank == 0 && !fails)
		printf("sessions: ok\n");
	return fails ? 1 : 0;
}

#endif
