/*
 * mpi_ring.c - the demo MPI job: a message goes around a ring of all
 * ranks for a range of sizes (eager ones and rendezvous ones), every hop
 * checked; then every rank reports to rank 0 through MPI_ANY_SOURCE
 * receives.  Rank 0 prints what happened.  Exit status 1 on a mismatch.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint32_t pattern(size_t i, int size, int round)
{
	return (uint32_t)(i * 2654435761u) ^ (uint32_t)(size << 20) ^
	       (uint32_t)round;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 0, 4, 1024, 8192, 65536, 1 << 20,
					4 << 20 };
	const int nsizes = sizeof(sizes) / sizeof(sizes[0]);
	int rank, size, bad = 0, allbad;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;

	if (rank == 0)
		printf("ring of %d ranks over MPI_COMM_WORLD\n", size);
	for (int s = 0; s < nsizes; s++) {
		size_t n = sizes[s] / sizeof(uint32_t);
		uint32_t *buf = malloc(n * sizeof(uint32_t) + 1);
		double t0 = MPI_Wtime(), dt;
		MPI_Status st;
		int count;

		/* rank 0 starts the message, every other rank checks it and
		 * passes it on; rank 0 checks it came back whole */
		if (rank == 0) {
			for (size_t i = 0; i < n; i++)
				buf[i] = pattern(i, (int)sizes[s], 0);
			MPI_Send(buf, (int)n, MPI_UINT32_T, next, s,
				 MPI_COMM_WORLD);
		}
		MPI_Recv(buf, (int)n, MPI_UINT32_T, prev, s, MPI_COMM_WORLD,
			 &st);
		MPI_Get_count(&st, MPI_UINT32_T, &count);
		if ((size_t)count != n) {
			printf("rank %d: %zu-byte message: got %d elements\n",
			       rank, sizes[s], count);
			bad = 1;
		}
		for (size_t i = 0; i < n; i++)
			if (buf[i] != pattern(i, (int)sizes[s], 0)) {
				printf("rank %d: %zu-byte message: element %zu wrong\n",
				       rank, sizes[s], i);
				bad = 1;
				break;
			}
		if (rank != 0)
			MPI_Send(buf, (int)n, MPI_UINT32_T, next, s,
				 MPI_COMM_WORLD);
		dt = MPI_Wtime() - t0;
		if (rank == 0)
			printf("  %8zu bytes: around the ring and checked at every hop (%.1f us per hop)\n",
			       sizes[s], dt * 1e6 / size);
		free(buf);
	}

	/* everyone reports to rank 0, in whatever order they arrive */
	if (rank == 0) {
		int seen = 1, v;
		MPI_Status st;

		for (int i = 1; i < size; i++) {
			MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
				 MPI_COMM_WORLD, &st);
			if (v != st.MPI_SOURCE || st.MPI_TAG != 100 + v) {
				printf("rank 0: report %d with tag %d from %d\n",
				       v, st.MPI_TAG, st.MPI_SOURCE);
				bad = 1;
			}
			seen++;
		}
		printf("  MPI_ANY_SOURCE/MPI_ANY_TAG: %d reports received at rank 0\n",
		       seen - 1);
	} else {
		MPI_Send(&rank, 1, MPI_INT, 0, 100 + rank, MPI_COMM_WORLD);
	}
	MPI_Allreduce(&bad, &allbad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0)
		printf("ring: %s\n", allbad ? "FAILED" : "all messages checked");
	MPI_Finalize();
	return allbad;
}
