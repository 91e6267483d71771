/*
 * mpi_complete_cb.c - a request's completion callback that starts MPI
 * operations.
 *
 * Open MPI runs a request's req_complete_cb (ompi/request/request.h) at the
 * moment a transport completes it; its own components (collectives,
 * one-sided) start new sends and receives from there.  A transport
 * completes requests from inside its progress and posting calls, so such
 * a callback re-enters it from within its own completion path: with
 * MPI_THREAD_MULTIPLE it must not be holding a lock it takes again, and
 * without threads (where mtl tm completes straight from its engine's
 * callback) the engine must take calls from inside its own callbacks.
 *
 * Rank 0 posts a receive from rank 1 and sets a callback on it that sends
 * the answer back to rank 1 and posts the receive of the next round (with
 * the same callback); rank 1 sends each round's message and checks the
 * answer.  Sizes cycle through 8 B, 1000 B and 100 kB
 * (rendezvous), so the completion comes from the progress call and from
 * inside the posting calls.  A lock taken twice hangs (the runner's
 * timeout), bad bytes are named.  Built twice: mpi_complete_cb at
 * MPI_THREAD_MULTIPLE, mpi_complete_cb_st (MT_SINGLE) at MPI_THREAD_SINGLE.
 * Ranks above 1 only take part in MPI_Init/Finalize.
 */
#include "mpitest.h"

/* Open MPI's request (for req_complete_cb): the MTL's headers' way in */
#include "ompi_config.h"
#include "ompi/request/request.h"

#define ROUNDS 300
#define MAXSZ 100000
#define TAG_PING 1
#define TAG_PONG 2

static char *ping_buf, *pong_buf[2];
static MPI_Request recv_req[ROUNDS], send_req[ROUNDS];
static int cb_runs, cb_fails;

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

static int on_ping(ompi_request_t *req);

/* The receive of round k, its callback set (run at once if it is done). */
static int post_ping(int k)
{
	int rc = MPI_Irecv(ping_buf, MAXSZ, MPI_BYTE, 1, TAG_PING,
			   MPI_COMM_WORLD, &recv_req[k]);

	if (rc == MPI_SUCCESS)
		ompi_request_set_callback(recv_req[k], on_ping,
					  (void *)(intptr_t)k);
	return rc;
}

/*
 * Runs inside the transport's completion of round k's receive: answers
 * it and posts the next round's receive, both from in here.  Round k's
 * answer buffer is free again by round k + 2: rank 1 sends ping k + 1
 * only once it has answer k whole.
 */
static int on_ping(ompi_request_t *req)
{
	int k = (int)(intptr_t)req->req_complete_cb_data, n = msize(k);

	cb_runs++;
	if (req->req_status.MPI_ERROR != MPI_SUCCESS ||
	    (int)req->req_status._ucount != n ||
	    mt_verify(ping_buf, n, ping_key(k)) >= 0) {
		cb_fails++;
		return 0;
	}
	mt_fill(pong_buf[k % 2], n, pong_key(k));
	if (MPI_Isend(pong_buf[k % 2], n, MPI_BYTE, 1, TAG_PONG,
		      MPI_COMM_WORLD, &send_req[k]) != MPI_SUCCESS)
		cb_fails++;
	if (k + 1 < ROUNDS && post_ping(k + 1) != MPI_SUCCESS)
		cb_fails++;
	return 0;
}

static void rank0(void)
{
	MPI_Status st;

	for (int k = 0; k < ROUNDS; k++)
		send_req[k] = recv_req[k] = MPI_REQUEST_NULL;
	MT_CALL(post_ping(0));
	for (int k = 0; k < ROUNDS && !cb_fails; k++) {
		MT_CALL(mt_wait(&recv_req[k], &st, "the ping"));
		if (k >= 1)
			MT_CALL(mt_wait(&send_req[k - 1], &st,
					"an answer sent from the callback"));
	}
	MT_CALL(mt_wait(&send_req[ROUNDS - 1], &st, "the last answer"));
	MT_CHECK(!cb_fails, "the callback saw a bad ping or could not answer (%d of %d)",
		 cb_fails, cb_runs);
	MT_CHECK(cb_runs == ROUNDS, "the callback ran %d times for %d pings",
		 cb_runs, ROUNDS);
}

static void rank1(void)
{
	char *sb = mt_malloc(MAXSZ), *rb = mt_malloc(MAXSZ);
	MPI_Status st;

	for (int k = 0; k < ROUNDS; k++) {
		int n = msize(k);

		mt_fill(sb, n, ping_key(k));
		MT_CALL(MPI_Send(sb, n, MPI_BYTE, 0, TAG_PING, MPI_COMM_WORLD));
		MT_CALL(MPI_Recv(rb, MAXSZ, MPI_BYTE, 0, TAG_PONG,
				 MPI_COMM_WORLD, &st));
		if (mt_count(&st, MPI_BYTE) != n ||
		    mt_verify(rb, n, pong_key(k)) >= 0) {
			mt_fail("round %d: %d bytes back, not the answer to its ping",
				k, mt_count(&st, MPI_BYTE));
			break;
		}
	}
	free(sb);
	free(rb);
}

int main(int argc, char **argv)
{
#ifdef MT_SINGLE
	int want = MPI_THREAD_SINGLE;
	const char *prog = "mpi_complete_cb_st";
#else
	int want = MPI_THREAD_MULTIPLE;
	const char *prog = "mpi_complete_cb";
#endif
	int provided = 0;

	MPI_Init_thread(&argc, &argv, want, &provided);
	mt_setup(prog, 2);
	if (provided < want) {
		if (mt_rank == 0)
			printf("skip: thread level %d not provided (level %d)\n",
			       want, provided);
		MPI_Finalize();
		return MT_SKIP;
	}
	ping_buf = mt_malloc(MAXSZ);
	pong_buf[0] = mt_malloc(MAXSZ);
	pong_buf[1] = mt_malloc(MAXSZ);
	mt_set_phase("%d rounds, each answered from the receive's completion callback",
		     ROUNDS);
	if (mt_rank == 0)
		rank0();
	else if (mt_rank == 1)
		rank1();
	if (mt_rank == 0 && !mt_fails)
		mt_checked("%d pings (8 B, 1000 B, 100 kB) answered from their receive's completion callback (an MPI_Isend and the next MPI_Irecv started inside the transport's completion), thread level %d",
			   ROUNDS, want);
	free(ping_buf);
	free(pong_buf[0]);
	free(pong_buf[1]);
	return mt_finish();
}
