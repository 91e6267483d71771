/*
 * mpi_pingpong.c - rank 0 sends a message to rank 1, which checks it and
 * sends it back.  With "errors-return" as the first argument the errors
 * come back as codes (printed, exit status 1) instead of aborting the job:
 * the check that an MTL failure is clean.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define N 1024

static int check(int rc, int rank, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0, cls = 0;

	if (rc == MPI_SUCCESS)
		return 0;
	MPI_Error_class(rc, &cls);
	MPI_Error_string(rc, msg, &len);
	printf("rank %d: %s failed: error class %d: %s\n", rank, what, cls,
	       msg);
	fflush(stdout);
	return 1;
}

int main(int argc, char **argv)
{
	int buf[N], rank, size, i, bad = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc > 1 && !strcmp(argv[1], "errors-return"))
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (size < 2) {
		printf("needs 2 ranks\n");
		MPI_Finalize();
		return 1;
	}
	if (rank == 0) {
		for (i = 0; i < N; i++)
			buf[i] = i;
		bad |= check(MPI_Send(buf, N, MPI_INT, 1, 7, MPI_COMM_WORLD),
			     rank, "MPI_Send");
		if (!bad)
			bad |= check(MPI_Recv(buf, N, MPI_INT, 1, 8,
					      MPI_COMM_WORLD,
					      MPI_STATUS_IGNORE),
				     rank, "MPI_Recv");
	} else if (rank == 1) {
		bad |= check(MPI_Recv(buf, N, MPI_INT, 0, 7, MPI_COMM_WORLD,
				      MPI_STATUS_IGNORE), rank, "MPI_Recv");
		for (i = 0; !bad && i < N; i++)
			if (buf[i] != i) {
				printf("rank 1: element %d is %d\n", i, buf[i]);
				bad = 1;
				break;
			}
		if (!bad)
			bad |= check(MPI_Send(buf, N, MPI_INT, 0, 8,
					      MPI_COMM_WORLD), rank,
				     "MPI_Send");
	}
	if (!bad)
		printf("rank %d: ok\n", rank);
	MPI_Finalize();
	return bad;
}
