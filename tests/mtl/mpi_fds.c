/*
 * mpi_fds.c - the descriptors a rank holds as it talks to more peers
 * (run by test_fds.sh; issue 24).
 *
 * Every rank counts its open descriptors right after MPI_Init, before any
 * message.  Rank 0 then exchanges one message with rank 1, then rank 2,
 * ... up to the last, counting again after each peer (connected then:
 * the others wait in an MPI_ANY_SOURCE receive).  Lines:
 *
 *   rank R init fds N
 *   rank 0 peers K fds N        (K = 1 .. size - 1)
 *   rank 0 fd FD WHAT           (its table at the end, for a diagnosis)
 *   fds: done
 *
 * The count leaves out the descriptor that reading /proc/self/fd holds.
 * A peer's connection to our soft HCA's handover thread is open for a
 * moment after the peer has what it asked for (the thread closes it
 * after its answer), so a count above the first is read again, a few
 * times, before it is printed: a descriptor that stays shows in every
 * reading.
 */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Open descriptors (less opendir's own); with list, each one printed. */
static int fds(int list)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char path[300], what[256];
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		ssize_t r;

		if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
			continue;
		n++;
		if (!list)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		r = readlink(path, what, sizeof(what) - 1);
		what[r > 0 ? r : 0] = 0;
		printf("rank 0 fd %s %s\n", e->d_name, what);
	}
	closedir(d);
	return n;
}

/* fds(0), read again while above floor (100 times at most, 20 ms apart). */
static int fds_settled(int floor)
{
	int n = fds(0);

	for (int i = 0; i < 100 && n > floor; i++) {
		usleep(20000);
		n = fds(0);
	}
	return n;
}

int main(int argc, char **argv)
{
	int rank, size, n0, v = 0;

	MPI_Init(&argc, &argv);
	n0 = fds(0);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	printf("rank %d init fds %d\n", rank, n0);
	fflush(stdout);
	if (rank == 0) {
		for (int k = 1; k < size; k++) {
			v = k;
			MPI_Send(&v, 1, MPI_INT, k, 7, MPI_COMM_WORLD);
			MPI_Recv(&v, 1, MPI_INT, k, 8, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			printf("rank 0 peers %d fds %d\n", k, fds_settled(n0));
		}
		fds(1);
		fflush(stdout);
	} else {
		/* (MPI_ANY_SOURCE names nobody, so connects to nobody: rank
		 * 0's send makes the connection, one peer at a time) */
		MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
		MPI_Send(&v, 1, MPI_INT, 0, 8, MPI_COMM_WORLD);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("fds: done\n");
	MPI_Finalize();
	return 0;
}
