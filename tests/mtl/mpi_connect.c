/*
 * mpi_connect.c - connect on first use, seen from MPI: in a job of 4 or
 * more ranks, rank 0 sends to rank P only (argv[1], default 2: across
 * the VMs, mapped by node, 1 is on the other host), rank P receives from
 * MPI_ANY_SOURCE (so it must accept a connection it did not start), and
 * every rank reads mtl_tm_connected_peers before any other traffic:
 * rank 0 and rank P hold exactly one connection, the others none.
 * Prints "rank R connected_peers N" per rank, then "connect: done" from
 * rank 0 once every rank has printed (rank 0's word to the others, then
 * a barrier, after the reads).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static MPI_T_pvar_session ses;
static MPI_T_pvar_handle h;

static unsigned long long connected(void)
{
	unsigned long long v = 0;

	MPI_T_pvar_read(ses, h, &v);
	return v;
}

/* Drives progress (a probe connects nobody) until the count is want or
 * about 5 s passed; returns the count. */
static unsigned long long settle(unsigned long long want)
{
	time_t t0 = time(NULL);
	int flag;

	while (connected() != want && time(NULL) - t0 < 5)
		MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag,
			   MPI_STATUS_IGNORE);
	return connected();
}

int main(int argc, char **argv)
{
	int rank, size, provided, idx = -1, n, i, count, msg = 0, peer;
	char name[256];
	MPI_Status st;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	peer = argc > 1 ? atoi(argv[1]) : 2;
	if (size < 4 || peer < 1 || peer >= size) {
		fprintf(stderr, "mpi_connect: run with at least 4 ranks, and a peer rank (argument) from 1 to the job's size - 1\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
	MPI_T_pvar_get_num(&n);
	for (i = 0; i < n && idx < 0; i++) {
		int nlen = sizeof(name), verb, cls, bind, ro, cont, atomic;
		MPI_Datatype dt;
		MPI_T_enum en;

		if (MPI_T_pvar_get_info(i, name, &nlen, &verb, &cls, &dt, &en,
					NULL, NULL, &bind, &ro, &cont,
					&atomic) == MPI_SUCCESS &&
		    !strcmp(name, "mtl_tm_connected_peers"))
			idx = i;
	}
	if (idx < 0) {
		printf("rank %d: no mtl_tm_connected_peers pvar\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 3);
	}
	MPI_T_pvar_session_create(&ses);
	MPI_T_pvar_handle_alloc(ses, idx, NULL, &h, &count);

	printf("rank %d before connected_peers %llu\n", rank, connected());
	if (rank == 0) {
		msg = 4242;
		MPI_Send(&msg, 1, MPI_INT, peer, 7, MPI_COMM_WORLD);
	} else if (rank == peer) {
		MPI_Recv(&msg, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD,
			 &st);
		printf("rank %d got %d from rank %d\n", rank, msg,
		       st.MPI_SOURCE);
	}
	printf("rank %d connected_peers %llu\n", rank,
	       settle(rank == 0 || rank == peer ? 1 : 0));
	fflush(stdout);
	/* the others wait for rank 0's word, after every read, from any
	 * source: a receive naming rank 0, or a barrier, would connect them
	 * to rank 0 while it still counts */
	if (rank == 0) {
		for (i = 1; i < size; i++)
			if (i != peer)
				MPI_Send(&msg, 1, MPI_INT, i, 8, MPI_COMM_WORLD);
	} else if (rank != peer) {
		MPI_Recv(&msg, 1, MPI_INT, MPI_ANY_SOURCE, 8, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("connect: done\n");
	MPI_T_pvar_handle_free(ses, &h);
	MPI_T_pvar_session_free(&ses);
	MPI_T_finalize();
	MPI_Finalize();
	return 0;
}
