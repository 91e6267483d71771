/*
 * mem_peers.c - memory a rank holds once it has talked to every peer.
 *
 *   mem_peers            one 8-byte message to every other rank (and one
 *                        from each), then a barrier; rank 0 prints the peak
 *                        RSS of every rank (VmHWM, in kB) and the mean.
 *   mem_peers flood N [MS]
 *                        rank 0 sends N back-to-back 8-byte messages to
 *                        rank 1, which receives them one by one; both print
 *                        their peak RSS (the receiver's includes whatever
 *                        it kept of the unexpected ones).  With MS, rank 1
 *                        first spends MS milliseconds driving progress
 *                        (MPI_Iprobe of another tag) without receiving:
 *                        a receiver that is late, whatever the timing.
 *   mem_peers hold S     as the first, then every rank waits S seconds
 *                        before MPI_Finalize (for a look at its
 *                        descriptors and mappings).
 *
 * Output lines start "mem:" so a script can pick them out (bench/mem.sh).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Peak resident set of this process in kB (VmHWM), or -1. */
static long peak_rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6)) {
			kb = strtol(line + 6, NULL, 10);
			break;
		}
	fclose(f);
	return kb;
}

static void all_peers(int rank, int size)
{
	long out = 0, in = 0, kb, *all = NULL, sum = 0, max = 0;
	MPI_Request *rq = calloc(2 * (size_t)size, sizeof(*rq));
	long *ins = calloc((size_t)size, sizeof(*ins));
	int n = 0;

	for (int p = 0; p < size; p++) {
		if (p == rank)
			continue;
		MPI_Irecv(&ins[p], 1, MPI_LONG, p, 7, MPI_COMM_WORLD, &rq[n++]);
		MPI_Isend(&out, 1, MPI_LONG, p, 7, MPI_COMM_WORLD, &rq[n++]);
	}
	MPI_Waitall(n, rq, MPI_STATUSES_IGNORE);
	(void)in;
	MPI_Barrier(MPI_COMM_WORLD);
	kb = peak_rss_kb();
	if (!rank)
		all = calloc((size_t)size, sizeof(*all));
	MPI_Gather(&kb, 1, MPI_LONG, all, 1, MPI_LONG, 0, MPI_COMM_WORLD);
	if (!rank) {
		for (int p = 0; p < size; p++) {
			sum += all[p];
			if (all[p] > max)
				max = all[p];
		}
		printf("mem: ranks %d peak_rss_kb mean %ld max %ld\n", size,
		       sum / size, max);
	}
	free(all);
	free(ins);
	free(rq);
}

static void flood(int rank, long n, double late_ms)
{
	long v = 0, kb;
	double until = MPI_Wtime() + late_ms / 1000;
	int flag;

	if (rank == 0)
		for (long i = 0; i < n; i++)
			MPI_Send(&i, 1, MPI_LONG, 1, 3, MPI_COMM_WORLD);
	else if (rank == 1)
		while (MPI_Wtime() < until)
			MPI_Iprobe(0, 4, MPI_COMM_WORLD, &flag,
				   MPI_STATUS_IGNORE);
	if (rank == 1)
		for (long i = 0; i < n; i++) {
			MPI_Recv(&v, 1, MPI_LONG, 0, 3, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			if (v != i) {
				fprintf(stderr, "mem: message %ld is %ld\n",
					i, v);
				MPI_Abort(MPI_COMM_WORLD, 1);
			}
		}
	kb = peak_rss_kb();
	printf("mem: flood %ld rank %d peak_rss_kb %ld\n", n, rank, kb);
}

int main(int argc, char **argv)
{
	int rank, size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc > 2 && !strcmp(argv[1], "flood") && size >= 2)
		flood(rank, atol(argv[2]), argc > 3 ? atof(argv[3]) : 0);
	else
		all_peers(rank, size);
	if (argc > 2 && !strcmp(argv[1], "hold"))
		sleep((unsigned)atoi(argv[2]));
	MPI_Finalize();
	return 0;
}
