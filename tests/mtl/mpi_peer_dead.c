/*
 * mpi_peer_dead.c - a receive from a rank that dies (3 ranks, run with
 * mpirun --enable-recovery so that mpirun lets the others go on).
 *
 * Rank 0 posts MPI_Irecv from rank 1 and MPI_Irecv from MPI_ANY_SOURCE
 * (tag 2); after a barrier rank 1 SIGKILLs itself.  Rank 0's receive from
 * rank 1 must return an error (MPI_ERRORS_RETURN) within limit seconds
 * (argv[1], default 10: the soft HCA sees a death in about 0.1 s, RC
 * retries take about 8 s, so across hosts pass a little more); so
 * must a blocking MPI_Recv from rank 1 posted afterwards, and an
 * MPI_Probe and an MPI_Mprobe naming rank 1, and blocking sends to it
 * (8 B and 1 MiB); the
 * MPI_ANY_SOURCE receive gets rank 2's message, sent 2 s after the kill.
 * Rank 0 prints "rank 0: ok: receive from the dead rank failed in <s> s
 * (<error>), ..."; neither survivor calls MPI_Finalize (its fence would
 * wait for the dead rank): they exit, rank 0 with status 0 if all held.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static double limit = 10.0;

int main(int argc, char **argv)
{
	char err[MPI_MAX_ERROR_STRING], perr[MPI_MAX_ERROR_STRING];
	int rank, size, rc, rc2, len, v = 0, w = 0, ok = 1;
	MPI_Message msg;
	MPI_Request r1, r2;
	MPI_Status st;
	double t0, dt, dt2, dt3;

	MPI_Init(&argc, &argv);
	if (argc > 1 && atof(argv[1]) > 0)
		limit = atof(argv[1]);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 3) {
		printf("rank %d: FAIL: needs 3 ranks\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (rank == 0) {
		MPI_Irecv(&v, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &r1);
		MPI_Irecv(&w, 1, MPI_INT, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD,
			  &r2);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 1) {
		kill(getpid(), SIGKILL);
		pause();
	}
	if (rank == 2) {
		sleep(2);
		w = 42;
		MPI_Send(&w, 1, MPI_INT, 0, 2, MPI_COMM_WORLD);
		fflush(stdout);
		_exit(0);
	}
	t0 = MPI_Wtime();
	rc = MPI_Wait(&r1, &st);
	dt = MPI_Wtime() - t0;
	MPI_Error_string(rc, err, &len);
	if (rc == MPI_SUCCESS || dt > limit) {
		printf("rank 0: FAIL: receive from the dead rank: %s after %.1f s\n",
		       err, dt);
		ok = 0;
	}
	t0 = MPI_Wtime();
	rc = MPI_Recv(&v, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, &st);
	dt2 = MPI_Wtime() - t0;
	if (rc == MPI_SUCCESS || dt2 > limit) {
		printf("rank 0: FAIL: a later receive from the dead rank returned %d after %.1f s\n",
		       rc, dt2);
		ok = 0;
	}
	t0 = MPI_Wtime();
	rc = MPI_Probe(1, 4, MPI_COMM_WORLD, &st);
	rc2 = MPI_Mprobe(1, 5, MPI_COMM_WORLD, &msg, &st);
	dt3 = MPI_Wtime() - t0;
	MPI_Error_string(rc, perr, &len);
	if (rc == MPI_SUCCESS || rc2 == MPI_SUCCESS || dt3 > limit) {
		printf("rank 0: FAIL: probes naming the dead rank returned %d, %d after %.1f s\n",
		       rc, rc2, dt3);
		ok = 0;
	}
	/* a blocking send, 8 B (eager) and 1 MiB (rendezvous): its error
	 * comes back through the send's completion, not a request */
	for (int i = 0; i < 2; i++) {
		int n = i ? 1 << 20 : 8;
		char *b = calloc(1, n);

		t0 = MPI_Wtime();
		rc = MPI_Send(b, n, MPI_BYTE, 1, 6, MPI_COMM_WORLD);
		dt3 = MPI_Wtime() - t0;
		free(b);
		if (rc == MPI_SUCCESS || dt3 > limit) {
			printf("rank 0: FAIL: a blocking send of %d B to the dead rank returned %d after %.1f s\n",
			       n, rc, dt3);
			ok = 0;
		}
	}
	rc = MPI_Wait(&r2, &st);
	if (rc != MPI_SUCCESS || w != 42 || st.MPI_SOURCE != 2) {
		printf("rank 0: FAIL: the any-source receive: rc %d, value %d, source %d\n",
		       rc, w, st.MPI_SOURCE);
		ok = 0;
	}
	if (ok)
		printf("rank 0: ok: receive from the dead rank failed in %.2f s (%s), a later one in %.2f s, probes in %.2f s (%s), blocking sends too, any-source from rank 2 fine\n",
		       dt, err, dt2, dt3, perr);
	fflush(stdout);
	_exit(ok ? 0 : 1);
}
