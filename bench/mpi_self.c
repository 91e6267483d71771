/*
 * mpi_self.c - one process sends 8 B (or -s bytes) to itself, n times:
 * MPI_Irecv, MPI_Send, MPI_Wait, the receive posted first (the matched
 * path).  Not a timing benchmark: bench/mpi_instr.sh runs it under
 * callgrind to count the instructions of the whole MPI path (libmpi, pml
 * cm, mtl tm, engine, soft HCA) per message, which the two-rank
 * benchmarks cannot (valgrind lacks pidfd_open, which two processes' soft
 * HCAs need).  mpi_loop is a function of its own so that callgrind can
 * collect inside it only.
 *
 *   bench_mpi_self N [SIZE]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_SIZE 65536

void mpi_loop(long n, char *sb, char *rb, int size);

__attribute__((noinline)) void mpi_loop(long n, char *sb, char *rb, int size)
{
	MPI_Request r;

	for (long i = 0; i < n; i++) {
		MPI_Irecv(rb, size, MPI_BYTE, 0, 1, MPI_COMM_SELF, &r);
		MPI_Send(sb, size, MPI_BYTE, 0, 1, MPI_COMM_SELF);
		MPI_Wait(&r, MPI_STATUS_IGNORE);
	}
}

int main(int argc, char **argv)
{
	static char sb[MAX_SIZE], rb[MAX_SIZE];
	long n = argc > 1 ? atol(argv[1]) : 0;
	int size = argc > 2 ? atoi(argv[2]) : 8;

	if (n < 1 || size < 0 || size > MAX_SIZE) {
		fprintf(stderr, "usage: bench_mpi_self N [SIZE <= %d]\n",
			MAX_SIZE);
		return 2;
	}
	MPI_Init(&argc, &argv);
	/* warm-up: connection, first-use allocations */
	mpi_loop(100, sb, rb, size);
	mpi_loop(n, sb, rb, size);
	MPI_Finalize();
	return 0;
}
