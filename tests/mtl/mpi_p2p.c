/*
 * mpi_p2p.c - point-to-point features the MTL glue maps onto the engine,
 * checked one by one between ranks 0 and 1 (other ranks join the fan-in,
 * collective and communicator parts): probe, matched probe with a
 * non-contiguous datatype, synchronous sends (not complete before the
 * receive is posted), truncation (MPI_ERR_TRUNCATE, count = bytes
 * delivered, nothing written past the buffer), receive cancel (before and
 * after the match), buffered / ready / persistent sends, sends to self,
 * MPI_ANY_TAG next to collectives' internal tags, many communicators, an
 * intercommunicator, zero-byte messages, and, when MPI_THREAD_MULTIPLE is
 * provided, threads sending and receiving at once.
 *
 * Prints "checked: ..." per part (rank 0) and "rank R: FAIL: ..." per
 * mismatch; the exit status is non-zero if any rank failed.
 *   mpi_p2p [threads] [ob1]: threads runs only the threaded part; ob1
 *   accepts pml ob1's count for a truncated receive (the full length).
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, size, fails;
/* pml ob1 counts a truncated message's full length; mtl tm counts what
 * was delivered.  "ob1" as an argument accepts either. */
static int ob1_counts;

#define FAIL(...) do { \
	printf("rank %d: FAIL: ", rank); printf(__VA_ARGS__); \
	printf("\n"); fflush(stdout); fails++; \
} while (0)

#define CALL(x) do { \
	int rc_ = (x); \
	if (rc_ != MPI_SUCCESS) { \
		char s_[MPI_MAX_ERROR_STRING]; int l_ = 0; \
		MPI_Error_string(rc_, s_, &l_); \
		printf("rank %d: FAIL: %s:%d: %s: %s\n", rank, __FILE__, \
		       __LINE__, #x, s_); \
		fflush(stdout); \
		MPI_Abort(MPI_COMM_WORLD, 1); \
	} \
} while (0)

static void checked(const char *what)
{
	if (rank == 0) {
		printf("checked: %s\n", what);
		fflush(stdout);
	}
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fill(int *p, int n, int seed)
{
	for (int i = 0; i < n; i++)
		p[i] = seed * 1000003 + i;
}

static int bad_fill(const int *p, int n, int seed)
{
	for (int i = 0; i < n; i++)
		if (p[i] != seed * 1000003 + i)
			return i + 1;
	return 0;
}

/* Probe, then receive what the probe named. */
static void t_probe(void)
{
	int buf[100];
	MPI_Status st;
	int flag = 0, n;

	if (rank == 1) {
		fill(buf, 100, 1);
		CALL(MPI_Send(buf, 100, MPI_INT, 0, 11, MPI_COMM_WORLD));
	} else if (rank == 0) {
		CALL(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
		MPI_Get_count(&st, MPI_INT, &n);
		if (st.MPI_SOURCE != 1 || st.MPI_TAG != 11 || n != 100)
			FAIL("probe: source %d tag %d count %d", st.MPI_SOURCE,
			     st.MPI_TAG, n);
		CALL(MPI_Iprobe(1, 11, MPI_COMM_WORLD, &flag, &st));
		if (!flag)
			FAIL("iprobe after probe: not found");
		CALL(MPI_Iprobe(1, 12, MPI_COMM_WORLD, &flag, &st));
		if (flag)
			FAIL("iprobe of a tag never sent: found");
		CALL(MPI_Recv(buf, 100, MPI_INT, st.MPI_SOURCE, 11,
			      MPI_COMM_WORLD, &st));
		if (bad_fill(buf, 100, 1))
			FAIL("probe: data");
	}
	checked("MPI_Probe/MPI_Iprobe: source, tag, count; then the receive");
}

/* Matched probe of an eager and a rendezvous message, received into a
 * strided datatype (every other int). */
static void t_mprobe(void)
{
	const int counts[2] = { 100, 20000 };
	MPI_Datatype vec;

	CALL(MPI_Type_vector(1, 1, 2, MPI_INT, &vec));
	CALL(MPI_Type_create_resized(vec, 0, 2 * sizeof(int), &vec));
	CALL(MPI_Type_commit(&vec));
	for (int k = 0; k < 2; k++) {
		int n = counts[k], *buf = malloc(2 * n * sizeof(int));

		if (rank == 1) {
			fill(buf, n, 20 + k);
			CALL(MPI_Send(buf, n, MPI_INT, 0, 21, MPI_COMM_WORLD));
		} else if (rank == 0) {
			MPI_Message msg;
			MPI_Status st;
			MPI_Request req;
			int flag = 0, got;

			if (k == 0) {
				CALL(MPI_Mprobe(1, 21, MPI_COMM_WORLD, &msg, &st));
			} else {
				while (!flag)
					CALL(MPI_Improbe(MPI_ANY_SOURCE, 21,
							 MPI_COMM_WORLD, &flag,
							 &msg, &st));
			}
			MPI_Get_count(&st, MPI_INT, &got);
			if (got != n || st.MPI_SOURCE != 1)
				FAIL("mprobe: count %d source %d", got,
				     st.MPI_SOURCE);
			for (int i = 0; i < 2 * n; i++)
				buf[i] = -1;
			if (k == 0) {
				CALL(MPI_Mrecv(buf, n, vec, &msg, &st));
			} else {
				CALL(MPI_Imrecv(buf, n, vec, &msg, &req));
				CALL(MPI_Wait(&req, &st));
			}
			if (msg != MPI_MESSAGE_NULL)
				FAIL("mrecv: message handle not spent");
			MPI_Get_count(&st, vec, &got);
			if (got != n)
				FAIL("mrecv: count %d, want %d", got, n);
			for (int i = 0; i < n; i++)
				if (buf[2 * i] != (20 + k) * 1000003 + i ||
				    buf[2 * i + 1] != -1) {
					FAIL("mrecv into vector: element %d", i);
					break;
				}
		}
		free(buf);
	}
	CALL(MPI_Type_free(&vec));
	checked("MPI_Mprobe/MPI_Mrecv and MPI_Improbe/MPI_Imrecv (eager, rendezvous) into a strided datatype");
}

/* A synchronous send must not complete before its receive is posted. */
static void t_ssend(void)
{
	const int counts[2] = { 10, 100000 };

	for (int k = 0; k < 2; k++) {
		int n = counts[k], *buf = malloc(n * sizeof(int)), go = 1;

		if (rank == 0) {
			MPI_Request req;
			int done = 0;
			double t0 = now();

			fill(buf, n, 30 + k);
			CALL(MPI_Issend(buf, n, MPI_INT, 1, 31, MPI_COMM_WORLD,
					&req));
			while (now() - t0 < 0.2 && !done)
				CALL(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
			if (done)
				FAIL("ssend of %d ints completed before the receive was posted",
				     n);
			CALL(MPI_Send(&go, 1, MPI_INT, 1, 32, MPI_COMM_WORLD));
			CALL(MPI_Wait(&req, MPI_STATUS_IGNORE));
		} else if (rank == 1) {
			CALL(MPI_Recv(&go, 1, MPI_INT, 0, 32, MPI_COMM_WORLD,
				      MPI_STATUS_IGNORE));
			CALL(MPI_Recv(buf, n, MPI_INT, 0, 31, MPI_COMM_WORLD,
				      MPI_STATUS_IGNORE));
			if (bad_fill(buf, n, 30 + k))
				FAIL("ssend data (%d ints)", n);
		}
		free(buf);
	}
	/* blocking MPI_Ssend returns once matched */
	if (rank == 0) {
		int v = 5;
		CALL(MPI_Ssend(&v, 1, MPI_INT, 1, 33, MPI_COMM_WORLD));
	} else if (rank == 1) {
		int v = 0;
		CALL(MPI_Recv(&v, 1, MPI_INT, 0, 33, MPI_COMM_WORLD,
			      MPI_STATUS_IGNORE));
		if (v != 5)
			FAIL("MPI_Ssend value %d", v);
	}
	checked("MPI_Issend (eager, rendezvous) not complete until the receive is posted; MPI_Ssend");
}

/* A message longer than the receive: MPI_ERR_TRUNCATE, count = what fits,
 * nothing written past the buffer. */
static void t_truncate(void)
{
	/* 6 and 20 ints: receives the MTL stages (under 64 bytes), the
	 * message shorter and longer than the staging area */
	const int counts[4] = { 6, 20, 100, 40000 };
	MPI_Datatype vec;
	MPI_Comm comm;

	CALL(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
	CALL(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
	for (int k = 0; k < 4; k++) {
		int n = counts[k], *buf = malloc(n * sizeof(int));

		if (rank == 1) {
			fill(buf, n, 40 + k);
			CALL(MPI_Send(buf, n, MPI_INT, 0, 41, comm));
		} else if (rank == 0) {
			MPI_Status st;
			int rc, cls, got;

			for (int i = 0; i < n; i++)
				buf[i] = -7;
			rc = MPI_Recv(buf, n / 2, MPI_INT, 1, 41, comm, &st);
			MPI_Error_class(rc, &cls);
			MPI_Get_count(&st, MPI_INT, &got);
			if (cls != MPI_ERR_TRUNCATE)
				FAIL("truncation (%d ints into %d): error class %d",
				     n, n / 2, cls);
			if (got != n / 2 && !(ob1_counts && got == n))
				FAIL("truncation: count %d, want %d", got, n / 2);
			if (bad_fill(buf, n / 2, 40 + k))
				FAIL("truncation: data");
			for (int i = n / 2; i < n; i++)
				if (buf[i] != -7) {
					FAIL("truncation: wrote past the buffer (int %d)",
					     i);
					break;
				}
		}
		free(buf);
	}
	/* small strided receives: 3 ints fit, 5 ints are truncated to 3 */
	CALL(MPI_Type_vector(1, 1, 2, MPI_INT, &vec));
	CALL(MPI_Type_create_resized(vec, 0, 2 * sizeof(int), &vec));
	CALL(MPI_Type_commit(&vec));
	for (int k = 0; k < 2; k++) {
		int n = k ? 5 : 3, buf[10];

		if (rank == 1) {
			fill(buf, n, 45 + k);
			CALL(MPI_Send(buf, n, MPI_INT, 0, 46, comm));
		} else if (rank == 0) {
			MPI_Request req;
			MPI_Status st;
			int rc, cls = MPI_SUCCESS, got;

			for (int i = 0; i < 10; i++)
				buf[i] = -7;
			CALL(MPI_Irecv(buf, 3, vec, 1, 46, comm, &req));
			rc = MPI_Wait(&req, &st);
			if (rc != MPI_SUCCESS)
				MPI_Error_class(rc, &cls);
			if (k ? cls != MPI_ERR_TRUNCATE : rc != MPI_SUCCESS)
				FAIL("small strided receive of %d ints: error class %d",
				     n, cls);
			MPI_Get_count(&st, MPI_INT, &got);
			if (got != 3 && !(ob1_counts && got == n))
				FAIL("small strided receive of %d ints: count %d",
				     n, got);
			for (int i = 0; i < 10; i++)
				if (buf[i] != (i % 2 || i >= 6 ? -7 :
					       (45 + k) * 1000003 + i / 2)) {
					FAIL("small strided receive of %d ints: int %d is %d",
					     n, i, buf[i]);
					break;
				}
		}
	}
	CALL(MPI_Type_free(&vec));
	CALL(MPI_Comm_free(&comm));
	checked("truncation (small, staged, eager, rendezvous; small strided): MPI_ERR_TRUNCATE, count = buffer, nothing past it");
}

/* Cancel a receive nobody sends to; cancel one already matched. */
static void t_cancel(void)
{
	MPI_Request req;
	MPI_Status st;
	int flag = 0, v = 0, c;

	if (rank == 0) {
		CALL(MPI_Irecv(&v, 1, MPI_INT, 1, 51, MPI_COMM_WORLD, &req));
		CALL(MPI_Cancel(&req));
		CALL(MPI_Wait(&req, &st));
		MPI_Test_cancelled(&st, &c);
		if (!c)
			FAIL("cancel of an unmatched receive: not cancelled");
		CALL(MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 52,
			       MPI_COMM_WORLD, &req));
		CALL(MPI_Send(&v, 0, MPI_INT, 1, 53, MPI_COMM_WORLD));
		while (!flag)
			CALL(MPI_Request_get_status(req, &flag, &st));
		CALL(MPI_Cancel(&req));
		CALL(MPI_Wait(&req, &st));
		MPI_Test_cancelled(&st, &c);
		if (c || v != 52)
			FAIL("cancel of a matched receive: cancelled %d value %d",
			     c, v);
	} else if (rank == 1) {
		v = 52;
		CALL(MPI_Recv(NULL, 0, MPI_INT, 0, 53, MPI_COMM_WORLD, &st));
		CALL(MPI_Send(&v, 1, MPI_INT, 0, 52, MPI_COMM_WORLD));
	}
	/* a send cannot be cancelled: it completes normally */
	if (rank == 0) {
		v = 54;
		CALL(MPI_Isend(&v, 1, MPI_INT, 1, 54, MPI_COMM_WORLD, &req));
		CALL(MPI_Cancel(&req));
		CALL(MPI_Wait(&req, &st));
		MPI_Test_cancelled(&st, &c);
		if (c)
			FAIL("send reported cancelled");
	} else if (rank == 1) {
		CALL(MPI_Recv(&v, 1, MPI_INT, 0, 54, MPI_COMM_WORLD, &st));
		if (v != 54)
			FAIL("send after a cancel attempt: value %d", v);
	}
	checked("MPI_Cancel: unmatched receive cancelled, matched one not; a send completes normally");
}

/* Buffered, ready and persistent sends; strided send, contiguous receive. */
static void t_modes(void)
{
	int buf[2000], out[1000], bsz = 3 * (sizeof(out) + MPI_BSEND_OVERHEAD);
	char *bbuf = malloc(bsz);
	MPI_Datatype vec;

	CALL(MPI_Type_vector(1000, 1, 2, MPI_INT, &vec));
	CALL(MPI_Type_commit(&vec));
	if (rank == 0) {
		CALL(MPI_Buffer_attach(bbuf, bsz));
		for (int k = 0; k < 3; k++) {
			fill(out, 1000, 60 + k);
			CALL(MPI_Bsend(out, 1000, MPI_INT, 1, 61, MPI_COMM_WORLD));
		}
		CALL(MPI_Buffer_detach(&bbuf, &bsz));
		/* ready: rank 1 says when its receive is posted */
		CALL(MPI_Recv(NULL, 0, MPI_INT, 1, 62, MPI_COMM_WORLD,
			      MPI_STATUS_IGNORE));
		fill(out, 1000, 63);
		CALL(MPI_Rsend(out, 1000, MPI_INT, 1, 63, MPI_COMM_WORLD));
		for (int i = 0; i < 1000; i++)
			buf[2 * i] = 64 * 1000003 + i;
		CALL(MPI_Send(buf, 1, vec, 1, 64, MPI_COMM_WORLD));
	} else if (rank == 1) {
		MPI_Request req;

		for (int k = 0; k < 3; k++) {
			CALL(MPI_Recv(out, 1000, MPI_INT, 0, 61, MPI_COMM_WORLD,
				      MPI_STATUS_IGNORE));
			if (bad_fill(out, 1000, 60 + k))
				FAIL("bsend %d: data", k);
		}
		CALL(MPI_Irecv(out, 1000, MPI_INT, 0, 63, MPI_COMM_WORLD, &req));
		CALL(MPI_Send(NULL, 0, MPI_INT, 0, 62, MPI_COMM_WORLD));
		CALL(MPI_Wait(&req, MPI_STATUS_IGNORE));
		if (bad_fill(out, 1000, 63))
			FAIL("rsend: data");
		CALL(MPI_Recv(out, 1000, MPI_INT, 0, 64, MPI_COMM_WORLD,
			      MPI_STATUS_IGNORE));
		if (bad_fill(out, 1000, 64))
			FAIL("strided send: data");
	}
	CALL(MPI_Type_free(&vec));
	free(bbuf);

	/* persistent: the same requests started 20 times */
	if (rank <= 1) {
		MPI_Request r[2];
		int s = 0, v = 0, peer = 1 - rank;

		CALL(MPI_Send_init(&s, 1, MPI_INT, peer, 65, MPI_COMM_WORLD,
				   &r[0]));
		CALL(MPI_Recv_init(&v, 1, MPI_INT, peer, 65, MPI_COMM_WORLD,
				   &r[1]));
		for (int k = 0; k < 20; k++) {
			s = 100 * rank + k;
			CALL(MPI_Startall(2, r));
			CALL(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
			if (v != 100 * peer + k)
				FAIL("persistent round %d: got %d", k, v);
		}
		MPI_Request_free(&r[0]);
		MPI_Request_free(&r[1]);
	}
	checked("MPI_Bsend, MPI_Rsend, strided MPI_Send, persistent send/recv (20 starts)");
}

/* Self sends, zero bytes, ANY_SOURCE fan-in from every rank. */
static void t_self_fanin(void)
{
	int v = 0, s = rank + 70, got = 0;
	MPI_Request req;
	MPI_Status st;

	CALL(MPI_Isend(&s, 1, MPI_INT, rank, 71, MPI_COMM_WORLD, &req));
	CALL(MPI_Recv(&v, 1, MPI_INT, rank, 71, MPI_COMM_WORLD, &st));
	CALL(MPI_Wait(&req, MPI_STATUS_IGNORE));
	if (v != s)
		FAIL("self send: %d", v);
	CALL(MPI_Sendrecv(NULL, 0, MPI_BYTE, rank, 72, NULL, 0, MPI_BYTE,
			  rank, 72, MPI_COMM_WORLD, &st));
	MPI_Get_count(&st, MPI_BYTE, &got);
	if (got != 0 || st.MPI_TAG != 72)
		FAIL("zero-byte self sendrecv: count %d tag %d", got, st.MPI_TAG);
	if (rank) {
		CALL(MPI_Send(&rank, 1, MPI_INT, 0, 73, MPI_COMM_WORLD));
	} else {
		int seen = 0;

		for (int i = 1; i < size; i++) {
			CALL(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 73,
				      MPI_COMM_WORLD, &st));
			if (v != st.MPI_SOURCE || v < 1 || v >= size ||
			    (seen & (1 << v)))
				FAIL("fan-in: value %d from %d", v, st.MPI_SOURCE);
			seen |= 1 << v;
		}
	}
	checked("sends to self (eager, zero bytes); MPI_ANY_SOURCE fan-in from every rank");
}

/* An ANY_TAG receive posted while collectives run on the same
 * communicator (their tags are negative) must get only the user message. */
static void t_anytag_vs_coll(void)
{
	MPI_Request req;
	MPI_Status st;
	int v = -1, x = rank, sum = 0;

	if (rank == 0)
		CALL(MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
			       MPI_COMM_WORLD, &req));
	for (int k = 0; k < 5; k++) {
		CALL(MPI_Barrier(MPI_COMM_WORLD));
		CALL(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM,
				   MPI_COMM_WORLD));
		if (sum != size * (size - 1) / 2)
			FAIL("allreduce: %d", sum);
	}
	if (rank == 1) {
		x = 81;
		CALL(MPI_Send(&x, 1, MPI_INT, 0, 81, MPI_COMM_WORLD));
	} else if (rank == 0) {
		CALL(MPI_Wait(&req, &st));
		if (v != 81 || st.MPI_TAG != 81 || st.MPI_SOURCE != 1)
			FAIL("ANY_TAG receive got value %d tag %d from %d", v,
			     st.MPI_TAG, st.MPI_SOURCE);
	}
	checked("MPI_ANY_TAG receive pending across barriers/allreduces on the same communicator: only the user message matched");
}

/* Messages on 40 communicators (same tag), received in reverse order;
 * and across an intercommunicator. */
static void t_comms(void)
{
	enum { NC = 40 };
	MPI_Comm c[NC], half, inter;
	MPI_Request req[NC];
	int v[NC];

	for (int i = 0; i < NC; i++)
		CALL(i % 2 ? MPI_Comm_dup(MPI_COMM_WORLD, &c[i]) :
		     MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &c[i]));
	/* in the split ones, rank r is size-1-r */
	if (rank == 0 || rank == 1) {
		int peer = 1 - rank;

		for (int i = 0; i < NC; i++) {
			int p = i % 2 ? peer : size - 1 - peer;

			v[i] = 1000 + i;
			CALL(MPI_Isend(&v[i], 1, MPI_INT, p, 91, c[i], &req[i]));
		}
		for (int i = NC - 1; i >= 0; i--) {
			int p = i % 2 ? peer : size - 1 - peer, got = 0;
			MPI_Status st;

			CALL(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 91, c[i],
				      &st));
			if (got != 1000 + i || st.MPI_SOURCE != p)
				FAIL("comm %d: value %d from %d", i, got,
				     st.MPI_SOURCE);
		}
		CALL(MPI_Waitall(NC, req, MPI_STATUSES_IGNORE));
	}
	for (int i = 0; i < NC; i++)
		CALL(MPI_Comm_free(&c[i]));

	/* intercommunicator: evens and odds, rank r <-> local rank r/2 */
	CALL(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
	CALL(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - rank % 2, 92,
				  &inter));
	if (rank == 0 || rank == 1) {
		int s = 500 + rank, got = -1;
		MPI_Status st;

		CALL(MPI_Sendrecv(&s, 1, MPI_INT, 0, 93, &got, 1, MPI_INT,
				  MPI_ANY_SOURCE, 93, inter, &st));
		if (got != 500 + (1 - rank) || st.MPI_SOURCE != 0)
			FAIL("intercomm: value %d from %d", got, st.MPI_SOURCE);
	}
	CALL(MPI_Comm_free(&inter));
	CALL(MPI_Comm_free(&half));
	checked("40 communicators (dup and split, reordered ranks), one tag, received in reverse; an intercommunicator");
}

/* MPI_THREAD_MULTIPLE: 4 threads per rank of 0/1 exchange at once. */
enum { NT = 4, NMSG_T = 300 };
static void *thread_main(void *arg)
{
	int t = (int)(long)arg, peer = 1 - rank;

	for (int k = 0; k < NMSG_T; k++) {
		int n = (k % 7 == 3) ? 3000 : 4 + k % 50;
		int *s = malloc(n * sizeof(int)), *r = malloc(n * sizeof(int));
		MPI_Request req[2];

		fill(s, n, rank * 100000 + t * 1000 + k);
		CALL(MPI_Irecv(r, n, MPI_INT, peer, t, MPI_COMM_WORLD, &req[0]));
		CALL(k % 5 == 1 ?
		     MPI_Issend(s, n, MPI_INT, peer, t, MPI_COMM_WORLD, &req[1]) :
		     MPI_Isend(s, n, MPI_INT, peer, t, MPI_COMM_WORLD, &req[1]));
		CALL(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
		if (bad_fill(r, n, peer * 100000 + t * 1000 + k))
			FAIL("thread %d message %d: data", t, k);
		free(s);
		free(r);
	}
	return NULL;
}

static void t_threads(int provided)
{
	pthread_t th[NT];

	if (provided < MPI_THREAD_MULTIPLE) {
		checked("threads: MPI_THREAD_MULTIPLE not provided, skipped");
		return;
	}
	if (rank <= 1) {
		for (long t = 0; t < NT; t++)
			pthread_create(&th[t], NULL, thread_main, (void *)t);
		for (int t = 0; t < NT; t++)
			pthread_join(th[t], NULL);
	}
	checked("MPI_THREAD_MULTIPLE: 4 threads per rank, 300 isend/issend/irecv exchanges each");
}

int main(int argc, char **argv)
{
	int provided = MPI_THREAD_SINGLE, all;
	int threads = 0;

	for (int i = 1; i < argc; i++) {
		threads |= !strcmp(argv[i], "threads");
		ob1_counts |= !strcmp(argv[i], "ob1");
	}

	if (threads)
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	else
		MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		printf("mpi_p2p: needs at least 2 ranks\n");
		MPI_Finalize();
		return 1;
	}
	if (threads) {
		t_threads(provided);
	} else {
		t_probe();
		t_mprobe();
		t_ssend();
		t_truncate();
		t_cancel();
		t_modes();
		t_self_fanin();
		t_anytag_vs_coll();
		t_comms();
	}
	MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_p2p%s: %s on %d ranks\n", threads ? " threads" : "",
		       all ? "FAILED" : "all checks passed", size);
	MPI_Finalize();
	return all != 0;
}
