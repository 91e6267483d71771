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
 *   bench_mpi_self N [SIZE [mt|any]]
 *
 * "mt": MPI_Init_thread(MPI_THREAD_MULTIPLE), one thread (the cost of
 * the locks and checks that mode adds).  "any": the receives name
 * MPI_ANY_SOURCE, in mpi_loop_any (tests/mtl/test_fast_entries.sh).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZE 65536

void mpi_loop(long n, char *sb, char *rb, int size);
void mpi_loop_any(long n, char *sb, char *rb, int size);

__attribute__((noinline)) void mpi_loop(long n, char *sb, char *rb, int size)
{
	MPI_Request r;

	for (long i = 0; i < n; i++) {
		MPI_Irecv(rb, size, MPI_BYTE, 0, 1, MPI_COMM_SELF, &r);
		MPI_Send(sb, size, MPI_BYTE, 0, 1, MPI_COMM_SELF);
		MPI_Wait(&r, MPI_STATUS_IGNORE);
	}
}

__attribute__((noinline)) void mpi_loop_any(long n, char *sb, char *rb,
					    int size)
{
	MPI_Request r;

	for (long i = 0; i < n; i++) {
		MPI_Irecv(rb, size, MPI_BYTE, MPI_ANY_SOURCE, 1, MPI_COMM_SELF,
			  &r);
		MPI_Send(sb, size, MPI_BYTE, 0, 1, MPI_COMM_SELF);
		MPI_Wait(&r, MPI_STATUS_IGNORE);
	}
}

int main(int argc, char **argv)
{
	static char sb[MAX_SIZE], rb[MAX_SIZE];
	long n = argc > 1 ? atol(argv[1]) : 0;
	int size = argc > 2 ? atoi(argv[2]) : 8;
	int mt = argc > 3 && !strcmp(argv[3], "mt"), provided;
	int any = argc > 3 && !strcmp(argv[3], "any");
	void (*loop)(long, char *, char *, int) = any ? mpi_loop_any :
							mpi_loop;

	if (n < 1 || size < 0 || size > MAX_SIZE ||
	    (argc > 3 && !mt && !any) || argc > 4) {
		fprintf(stderr, "usage: bench_mpi_self N [SIZE <= %d [mt|any]]\n",
			MAX_SIZE);
		return 2;
	}
	if (mt) {
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
		if (provided < MPI_THREAD_MULTIPLE) {
			fprintf(stderr, "no MPI_THREAD_MULTIPLE\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	} else {
		MPI_Init(&argc, &argv);
	}
	/* warm-up: connection, first-use allocations */
	loop(100, sb, rb, size);
	loop(n, sb, rb, size);
	MPI_Finalize();
	return 0;
}
