/*
 * mpi_finalize.c - how long MPI_Finalize takes after traffic to every
 * rank (tests/vm/run-vm-tests.sh, "finalize": 4 ranks across the two VMs).
 *
 * Every rank sends each other rank a few eager messages (their sends stay
 * unsignalled on the card, so at its end each rank still has sends of
 * unknown fate to every peer), receives theirs, checks them, then leaves
 * through a barrier into MPI_Finalize and prints
 *     "rank R: finalize S s"
 * measured on CLOCK_MONOTONIC around MPI_Finalize (MPI_Wtime is gone after
 * it).  A rank that probes a peer that already tore down waits, over RC,
 * for the retry window, up to mtl tm's drain limit (5 s).  Exit status 1
 * on wrong data.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NMSG 8

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	int rank, size, bad = 0;
	double t0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int *in = calloc((size_t)size * NMSG, sizeof(int));
	int *out = calloc((size_t)size * NMSG, sizeof(int));
	MPI_Request *req = calloc((size_t)size * NMSG * 2, sizeof(*req));
	int nreq = 0;

	for (int p = 0; p < size; p++)
		for (int i = 0; i < NMSG && p != rank; i++) {
			out[p * NMSG + i] = rank * 1000 + p * 10 + i;
			MPI_Irecv(&in[p * NMSG + i], 1, MPI_INT, p, i,
				  MPI_COMM_WORLD, &req[nreq++]);
			MPI_Isend(&out[p * NMSG + i], 1, MPI_INT, p, i,
				  MPI_COMM_WORLD, &req[nreq++]);
		}
	MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
	for (int p = 0; p < size; p++)
		for (int i = 0; i < NMSG && p != rank; i++)
			if (in[p * NMSG + i] != p * 1000 + rank * 10 + i) {
				printf("rank %d: message %d from %d: got %d\n",
				       rank, i, p, in[p * NMSG + i]);
				bad = 1;
			}
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = now();
	MPI_Finalize();
	printf("rank %d: finalize %.2f s\n", rank, now() - t0);
	free(in);
	free(out);
	free(req);
	return bad;
}
