/*
 * mpi_traffic.c - ranks exchange messages around a ring (eager and
 * rendezvous sizes alternating) for the given number of seconds, so that
 * a job can be killed mid-traffic.  Each rank prints "rank R pid P
 * started" once traffic has begun; rank 0 prints "traffic: ok" at the end.
 *
 *   mpi_traffic [seconds]     (default 2)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2.0, t0;
	const int big = 256 * 1024;
	int rank, size, next, prev, round = 0, bad = 0, allbad;
	char *sbuf, *rbuf;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	next = (rank + 1) % size;
	prev = (rank + size - 1) % size;
	sbuf = malloc(big);
	rbuf = malloc(big);
	if (!sbuf || !rbuf)
		MPI_Abort(MPI_COMM_WORLD, 2);
	t0 = MPI_Wtime();
	do {
		int n = round & 1 ? big : 64;

		memset(sbuf, (char)(rank + round), (size_t)n);
		MPI_Sendrecv(sbuf, n, MPI_CHAR, next, round, rbuf, n, MPI_CHAR,
			     prev, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		if (rbuf[0] != (char)(prev + round) ||
		    rbuf[n - 1] != (char)(prev + round))
			bad = 1;
		if (round++ == 0) {
			printf("rank %d pid %d started\n", rank, (int)getpid());
			fflush(stdout);
		}
		/* every rank leaves after the same round */
		if ((round & 63) == 0) {
			int stop = MPI_Wtime() - t0 > secs;

			MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
			if (stop)
				break;
		}
	} while (1);
	MPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0)
		printf("traffic: %s (%d rounds)\n", allbad ? "FAILED" : "ok",
		       round);
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return allbad;
}
