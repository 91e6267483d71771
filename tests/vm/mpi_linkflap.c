/*
 * mpi_linkflap.c - traffic while the network goes away for a while
 * (tests/vm/run-vm-tests.sh pulls a VM's virtual cable for a few seconds
 * and plugs it back in while this runs).  2 ranks, one on each VM.
 *
 * Rank 0 and rank 1 exchange messages (8 B eager and 256 KiB rendezvous,
 * every byte checked) for argv[1] seconds (default 20).  Rank 0 prints
 * "running" after the first exchanges, which the runner waits for before
 * pulling the cable.  Three outcomes, each printed by rank 0 (or the rank
 * that saw it):
 *   survived:        "rank 0: survived: N exchanges, longest stall S s"
 *   failed cleanly:  "rank R: failed cleanly: <MPI error>" (an MPI call
 *                    returned an error; exit status 3)
 *   hang:            no exchange completes within STALL seconds: "FAIL:
 *                    stalled", MPI_Abort (the runner's timeout is the
 *                    last resort, and counts as a hang too)
 * Uses MPI_ERRORS_RETURN; bounded waits through MPI_Test.
 */
#include "mpi/mpitest.h"

#define STALL 60.0
#define BIG (256 * 1024)

/* Waits for both requests; 0, or the MPI error code; aborts on a stall. */
static int wait2(MPI_Request *reqs, double *longest)
{
	double t0 = mt_now(), end = t0 + STALL;
	int flag = 0, rc;

	for (;;) {
		rc = MPI_Testall(2, reqs, &flag, MPI_STATUSES_IGNORE);
		if (rc != MPI_SUCCESS || flag)
			break;
		if (mt_now() > end)
			mt_abort("stalled: no exchange completed for %.0f s", STALL);
		usleep(100);
	}
	if (mt_now() - t0 > *longest)
		*longest = mt_now() - t0;
	return rc;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 20.0, longest = 0, end;
	unsigned char *out, *in;
	long n = 0;
	int peer, rc = MPI_SUCCESS;

	mt_init(&argc, &argv, "mpi_linkflap", 2);
	if (mt_rank > 1)
		return mt_finish();
	peer = 1 - mt_rank;
	out = mt_malloc(BIG);
	in = mt_malloc(BIG);
	end = mt_now() + secs;
	/* the two ranks stop after the same count: rank 0 decides */
	for (int go = 1; go; n++) {
		size_t len = (n % 4 == 3) ? BIG : 8;
		MPI_Request r[2];

		mt_set_phase("exchange %ld (%zu B)", n, len);
		mt_fill(out, len, (uint64_t)n * 2 + (uint64_t)mt_rank);
		rc = MPI_Irecv(in, (int)len, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &r[0]);
		if (rc == MPI_SUCCESS)
			rc = MPI_Isend(out, (int)len, MPI_BYTE, peer, 1,
				       MPI_COMM_WORLD, &r[1]);
		if (rc == MPI_SUCCESS)
			rc = wait2(r, &longest);
		if (rc != MPI_SUCCESS)
			break;
		mt_check_data(in, len, (uint64_t)n * 2 + (uint64_t)peer, "exchange");
		if (n == 20 && mt_rank == 0)
			printf("running\n");
		if (mt_rank == 0)
			go = mt_now() < end;
		rc = MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS)
			break;
	}
	if (rc != MPI_SUCCESS) {
		printf("rank %d: failed cleanly: exchange %ld: %s\n", mt_rank, n,
		       mt_errstr(rc));
		fflush(stdout);
		_exit(3);
	}
	if (mt_rank == 0)
		printf("rank 0: survived: %ld exchanges, longest stall %.1f s\n",
		       n, longest);
	free(out);
	free(in);
	return mt_finish();
}
