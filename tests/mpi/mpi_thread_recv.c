/*
 * mpi_thread_recv.c - MPI_THREAD_MULTIPLE: several threads blocked in
 * MPI_Recv for messages of one sender at once (the osu_latency_mt shape,
 * bench/latency_mt.c).
 *
 * Rank 0's main thread sends ping k (tag k, sizes cycling through 8 B,
 * 1000 B and 9000 B, bytes derived from k) and waits for the answer with
 * tag k before sending ping k + 1.  On rank 1 two threads loop over a
 * blocking receive of any tag from rank 0 (thread 0 names rank 0, thread
 * 1 uses MPI_ANY_SOURCE) and answer each ping with its own bytes turned
 * into the pong's.  So each ping completes the receive of one of two
 * waiting threads, and that thread must get exactly that message: its
 * size and bytes are checked against the tag, and rank 0 checks each
 * answer.  A completion handed to the wrong thread, lost (a hang: the
 * runner's timeout) or garbled is named.  At the end rank 0 sends each
 * thread a stop message; rank 1 checks that its threads answered every
 * ping once.  Ranks above 1 only take part in MPI_Init/Finalize.
 */
#include "mpitest.h"
#include <pthread.h>

#define NRECV		2
#define PINGS		300
#define TAG_STOP	(PINGS + 1)
#define MAXSZ		9000

static int answered[NRECV];
static int thread_fails[NRECV];

static int msize(int k)
{
	static const int s[] = { 8, 1000, MAXSZ };

	return s[k % 3];
}

static uint64_t ping_key(int k)
{
	return 0x70696e67ull << 32 | (uint64_t)k;
}

static uint64_t pong_key(int k)
{
	return 0x706f6e67ull << 32 | (uint64_t)k;
}

static void tfail(int t, const char *what, int k)
{
	printf("rank %d: FAIL: mpi_thread_recv: thread %d, ping %d: %s\n",
	       mt_rank, t, k, what);
	fflush(stdout);
	thread_fails[t]++;
}

static void *receiver(void *arg)
{
	int t = (int)(intptr_t)arg;
	char *buf = mt_malloc(MAXSZ);
	MPI_Status st;

	for (;;) {
		int rc = MPI_Recv(buf, MAXSZ, MPI_BYTE,
				  t == 0 ? 0 : MPI_ANY_SOURCE, MPI_ANY_TAG,
				  MPI_COMM_WORLD, &st);
		int k = st.MPI_TAG;

		if (rc != MPI_SUCCESS) {
			tfail(t, mt_errstr(rc), -1);
			break;
		}
		if (k == TAG_STOP)
			break;
		if (st.MPI_SOURCE != 0 || k < 0 || k >= PINGS) {
			tfail(t, "status names another source or tag", k);
			break;
		}
		if (mt_count(&st, MPI_BYTE) != msize(k) ||
		    mt_verify(buf, msize(k), ping_key(k)) >= 0) {
			tfail(t, "got bytes that are not this ping's", k);
			break;
		}
		answered[t]++;
		mt_fill(buf, msize(k), pong_key(k));
		rc = MPI_Send(buf, msize(k), MPI_BYTE, 0, k, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS) {
			tfail(t, mt_errstr(rc), k);
			break;
		}
	}
	free(buf);
	return NULL;
}

static void pinger(void)
{
	char *sb = mt_malloc(MAXSZ), *rb = mt_malloc(MAXSZ);
	MPI_Status st;

	for (int k = 0; k < PINGS; k++) {
		mt_fill(sb, msize(k), ping_key(k));
		memset(rb, 0, MAXSZ);
		MT_CALL(MPI_Send(sb, msize(k), MPI_BYTE, 1, k, MPI_COMM_WORLD));
		MT_CALL(MPI_Recv(rb, MAXSZ, MPI_BYTE, 1, k, MPI_COMM_WORLD,
				 &st));
		if (mt_count(&st, MPI_BYTE) != msize(k) ||
		    mt_verify(rb, msize(k), pong_key(k)) >= 0) {
			mt_fail("answer %d: %d bytes, not the pong of ping %d",
				k, mt_count(&st, MPI_BYTE), k);
			break;
		}
	}
	for (int t = 0; t < NRECV; t++)
		MT_CALL(MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_STOP,
				 MPI_COMM_WORLD));
	free(sb);
	free(rb);
}

int main(int argc, char **argv)
{
	pthread_t th[NRECV];
	int provided = 0;

	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	mt_setup("mpi_thread_recv", 2);
	if (provided < MPI_THREAD_MULTIPLE) {
		if (mt_rank == 0)
			printf("skip: MPI_THREAD_MULTIPLE not provided (level %d)\n",
			       provided);
		MPI_Finalize();
		return MT_SKIP;
	}
	mt_set_phase("ping-pong with %d receiving threads", NRECV);
	if (mt_rank == 0) {
		pinger();
	} else if (mt_rank == 1) {
		int sum = 0;

		for (int t = 0; t < NRECV; t++)
			if (pthread_create(&th[t], NULL, receiver,
					   (void *)(intptr_t)t))
				mt_abort("cannot start thread %d", t);
		for (int t = 0; t < NRECV; t++) {
			pthread_join(th[t], NULL);
			sum += answered[t];
			if (thread_fails[t])
				mt_fail("thread %d: %d failures", t,
					thread_fails[t]);
		}
		if (sum != PINGS)
			mt_fail("the threads answered %d pings, not %d", sum,
				PINGS);
		else
			mt_checked("%d pings answered, %d by the thread naming rank 0, %d by the MPI_ANY_SOURCE one",
				   PINGS, answered[0], answered[1]);
	}
	return mt_finish();
}
