/*
 * mpi_threads.c - MPI_THREAD_MULTIPLE: several threads per rank sending
 * and receiving at the same time.
 *
 * Each rank runs 4 threads; each sends to the next rank and receives
 * from the previous one (a ring), 150 rounds, sizes cycling through 8 B,
 * 1000 B, 9000 B and, every 10th round, 100 KB:
 *   thread 0, 1  each on its own communicator (MPI_Comm_dup), tag 0,
 *                MPI_Isend + MPI_Irecv + MPI_Waitall;
 *   thread 2     shared communicator, tag 2, MPI_ANY_SOURCE receive;
 *   thread 3     shared communicator, tag 3, MPI_Mprobe + MPI_Mrecv (the
 *                thread-safe probe), blocking MPI_Send.
 * Every message carries (sender, thread, round) in its bytes: a message
 * delivered to the wrong thread or garbled is named.  Skipped (exit 77)
 * if the library does not provide MPI_THREAD_MULTIPLE.
 */
#include "mpitest.h"
#include <pthread.h>

#define NT 4
#define ROUNDS 150

static MPI_Comm own[NT], shared;
static int next_rank, prev_rank;
static int thread_fails[NT];

static int msize(int round)
{
	static const int s[] = { 8, 1000, 9000 };

	return round % 10 == 9 ? 100000 : s[round % 3];
}

static uint64_t key(int src, int t, int round)
{
	return (uint64_t)src << 40 ^ (uint64_t)t << 32 ^ (uint64_t)round;
}

static void tfail(int t, int round, const char *fmt, const char *detail)
{
	printf("rank %d: FAIL: mpi_threads: thread %d round %d: %s%s\n",
	       mt_rank, t, round, fmt, detail);
	fflush(stdout);
	thread_fails[t]++;
}

static void *worker(void *arg)
{
	int t = (int)(intptr_t)arg;
	MPI_Comm c = t < 2 ? own[t] : shared;
	int tag = t < 2 ? 0 : t;
	char *sb = mt_malloc(100000), *rb = mt_malloc(100000);

	for (int round = 0; round < ROUNDS && thread_fails[t] < 5; round++) {
		int n = msize(round), rc;
		MPI_Request r[2];
		MPI_Status st[2];
		char detail[160];

		mt_fill(sb, n, key(mt_rank, t, round));
		memset(rb, 0, n);
		if (t == 3) {
			MPI_Message h;

			MT_CALL(MPI_Isend(sb, n, MPI_BYTE, next_rank, tag, c,
					  &r[1]));
			MT_CALL(MPI_Mprobe(prev_rank, tag, c, &h, &st[0]));
			rc = MPI_Mrecv(rb, n, MPI_BYTE, &h, &st[0]);
			if (rc == MPI_SUCCESS)
				rc = MPI_Wait(&r[1], MPI_STATUS_IGNORE);
		} else {
			MT_CALL(MPI_Irecv(rb, n, MPI_BYTE,
					  t == 2 ? MPI_ANY_SOURCE : prev_rank,
					  tag, c, &r[0]));
			MT_CALL(MPI_Isend(sb, n, MPI_BYTE, next_rank, tag, c,
					  &r[1]));
			rc = MPI_Waitall(2, r, st);
			if (rc == MPI_ERR_IN_STATUS)
				rc = st[0].MPI_ERROR ? st[0].MPI_ERROR :
						       st[1].MPI_ERROR;
		}
		if (rc != MPI_SUCCESS) {
			tfail(t, round, "", mt_errstr(rc));
			continue;
		}
		if (st[0].MPI_SOURCE != prev_rank || st[0].MPI_TAG != tag ||
		    mt_count(&st[0], MPI_BYTE) != n) {
			snprintf(detail, sizeof(detail),
				 "status source %d tag %d count %d, want %d %d %d",
				 st[0].MPI_SOURCE, st[0].MPI_TAG,
				 mt_count(&st[0], MPI_BYTE), prev_rank, tag, n);
			tfail(t, round, "", detail);
			continue;
		}
		if (mt_verify(rb, n, key(prev_rank, t, round)) >= 0) {
			int who = -1;

			/* whose message was it? */
			for (int u = 0; u < NT; u++)
				for (int q = round - 2; q <= round + 2; q++)
					if (q >= 0 && msize(q) == n &&
					    mt_verify(rb, n,
						      key(prev_rank, u, q)) < 0)
						who = u * 1000 + q;
			if (who >= 0)
				snprintf(detail, sizeof(detail),
					 "got thread %d's message of round %d",
					 who / 1000, who % 1000);
			else
				snprintf(detail, sizeof(detail),
					 "data garbled (%d B)", n);
			tfail(t, round, "", detail);
		}
	}
	free(sb);
	free(rb);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[NT];
	int provided = 0, fails = 0;

	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	mt_setup("mpi_threads", 2);
	if (provided < MPI_THREAD_MULTIPLE) {
		if (mt_rank == 0)
			printf("skip: MPI_THREAD_MULTIPLE not provided (level %d)\n",
			       provided);
		MPI_Finalize();
		return MT_SKIP;
	}
	next_rank = (mt_rank + 1) % mt_size;
	prev_rank = (mt_rank + mt_size - 1) % mt_size;
	for (int t = 0; t < 2; t++)
		own[t] = mt_dup(MPI_COMM_WORLD);
	shared = mt_dup(MPI_COMM_WORLD);
	mt_set_phase("threads");
	for (int t = 0; t < NT; t++)
		if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t))
			mt_abort("pthread_create failed");
	for (int t = 0; t < NT; t++) {
		pthread_join(th[t], NULL);
		fails += thread_fails[t];
	}
	mt_fails += fails;
	mt_checked("MPI_THREAD_MULTIPLE: %d threads per rank x %d rounds (8 B .. 100 KB) in a ring of %d ranks, own communicators, shared communicator with distinct tags, MPI_ANY_SOURCE, MPI_Mprobe/MPI_Mrecv: every message to the right thread, data intact",
		   NT, ROUNDS, mt_size);
	for (int t = 0; t < 2; t++)
		MPI_Comm_free(&own[t]);
	MPI_Comm_free(&shared);
	return mt_finish();
}
