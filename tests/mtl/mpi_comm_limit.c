/*
 * mpi_comm_limit.c - how many communicators can exist at once.
 *
 * Duplicates MPI_COMM_WORLD until MPI_Comm_dup fails (MPI_ERRORS_RETURN)
 * or MAXC exist, prints "rank R: N duplicates, then <error string>" (or
 * "no limit"), then frees them all and checks that a new duplicate works
 * and carries a message: running into the limit is an error, not a
 * broken library.  test_faults.sh compares N with the limit mtl_tm(7)
 * documents.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXC 20000

int main(int argc, char **argv)
{
	static MPI_Comm c[MAXC];
	char err[MPI_MAX_ERROR_STRING];
	int rank, size, n, rc = MPI_SUCCESS, len, v, peer;
	MPI_Comm again;

	MPI_Init(&argc, &argv);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (n = 0; n < MAXC; n++) {
		rc = MPI_Comm_dup(MPI_COMM_WORLD, &c[n]);
		if (rc != MPI_SUCCESS)
			break;
	}
	if (rc != MPI_SUCCESS) {
		MPI_Error_string(rc, err, &len);
		printf("rank %d: %d duplicates, then %s\n", rank, n, err);
	} else {
		printf("rank %d: %d duplicates, no limit\n", rank, n);
	}
	fflush(stdout);
	while (n > 0)
		MPI_Comm_free(&c[--n]);
	if (MPI_Comm_dup(MPI_COMM_WORLD, &again) != MPI_SUCCESS) {
		printf("rank %d: FAIL: no duplicate after freeing them\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	peer = (rank + 1) % size;
	v = rank;
	MPI_Sendrecv_replace(&v, 1, MPI_INT, peer, 5, (rank + size - 1) % size,
			     5, again, MPI_STATUS_IGNORE);
	if (v != (rank + size - 1) % size) {
		printf("rank %d: FAIL: got %d over the new duplicate\n", rank, v);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	printf("rank %d: ok after freeing\n", rank);
	MPI_Comm_free(&again);
	MPI_Finalize();
	return 0;
}
