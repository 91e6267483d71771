/*
 * mpi_card.c - receives posted before their messages: right results, and
 * (under mtl tm with a default card) matched on the card.
 *
 * Each rank sends to its right neighbour and receives from its left one:
 *   1. unexpected traffic first: 5 rendezvous-sized (20 KB) and 5 small
 *      messages sent before the receiver posts anything (a barrier
 *      between), received afterwards; an engine that miscounts any of
 *      them desynchronises its card for good;
 *   2. then N receives pre-posted (tags 0..N-1, mixed sizes), a barrier,
 *      and the N messages.
 * The program checks the data and envelopes.  The share matched on the
 * card is not visible from MPI: run-mpi-tests.sh runs this program with
 * mtl_tm_verbose 10 in the "tm" configuration and requires, from each
 * rank's statistics line, that at least 90% of its receives were matched
 * on the card (N pre-posted receives against the few of phase 1 and of
 * Open MPI's own collectives).
 */
#include "mpitest.h"

#define N 400
#define NU 10
#define BIG 20000

static size_t msize(int i)
{
	return i % 4 == 3 ? BIG : (size_t)(i * 7 % 1000);
}

int main(int argc, char **argv)
{
	int right, left, i;
	MPI_Comm comm;
	MPI_Request *req;
	MPI_Status *st;
	char *sbuf, *rbuf;

	mt_init(&argc, &argv, "mpi_card", 2);
	comm = mt_dup(MPI_COMM_WORLD);
	right = (mt_rank + 1) % mt_size;
	left = (mt_rank + mt_size - 1) % mt_size;
	req = mt_malloc(sizeof(*req) * 2 * N);
	st = mt_malloc(sizeof(*st) * 2 * N);
	sbuf = mt_malloc((size_t)N * BIG);
	rbuf = mt_malloc((size_t)N * BIG);

	mt_set_phase("unexpected first");
	for (i = 0; i < NU; i++) {
		size_t n = i % 2 ? BIG : 100;

		mt_fill(sbuf + (size_t)i * BIG, n, 1000 * mt_rank + i);
		MT_CALL(MPI_Isend(sbuf + (size_t)i * BIG, (int)n, MPI_BYTE,
				  right, 5000 + i, comm, &req[i]));
	}
	MT_CALL(MPI_Barrier(comm));
	for (i = 0; i < NU; i++) {
		size_t n = i % 2 ? BIG : 100;
		MPI_Status s;

		MT_CALL(MPI_Recv(rbuf, BIG, MPI_BYTE, left, 5000 + i, comm, &s));
		if (mt_count(&s, MPI_BYTE) != (int)n)
			mt_fail("unexpected message %d: count %d", i,
				mt_count(&s, MPI_BYTE));
		else
			mt_check_data(rbuf, n, 1000 * left + i, "unexpected");
	}
	mt_waitall(NU, req, st, "unexpected sends");

	mt_set_phase("pre-posted");
	for (i = 0; i < N; i++)
		MT_CALL(MPI_Irecv(rbuf + (size_t)i * BIG, BIG, MPI_BYTE, left, i,
				  comm, &req[i]));
	MT_CALL(MPI_Barrier(comm));
	for (i = 0; i < N; i++) {
		mt_fill(sbuf + (size_t)i * BIG, msize(i), 7 * mt_rank + i);
		MT_CALL(MPI_Isend(sbuf + (size_t)i * BIG, (int)msize(i),
				  MPI_BYTE, right, i, comm, &req[N + i]));
	}
	mt_waitall(2 * N, req, st, "pre-posted receives and their sends");
	for (i = 0; i < N; i++) {
		if (st[i].MPI_SOURCE != left || st[i].MPI_TAG != i ||
		    mt_count(&st[i], MPI_BYTE) != (int)msize(i))
			mt_fail("receive %d: source %d tag %d count %d", i,
				st[i].MPI_SOURCE, st[i].MPI_TAG,
				mt_count(&st[i], MPI_BYTE));
		else
			mt_check_data(rbuf + (size_t)i * BIG, msize(i),
				      7 * left + i, "pre-posted");
	}
	mt_checked("%d unexpected messages (half 20 KB) then %d receives pre-posted before their messages, ring of %d ranks: envelopes and data right",
		   NU, N, mt_size);
	free(req);
	free(st);
	free(sbuf);
	free(rbuf);
	MPI_Comm_free(&comm);
	return mt_finish();
}
