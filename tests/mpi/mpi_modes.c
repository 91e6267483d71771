/*
 * mpi_modes.c - send modes: synchronous, ready, buffered (ranks 0, 1).
 *
 *   ssend   MPI_Issend completes only after the receive matched it: while
 *           rank 0 has not posted, MPI_Test on the send stays false (also
 *           after rank 0 found the message with MPI_Iprobe, which does
 *           not match it); then rank 0 receives and the send completes.
 *           Eager and rendezvous sizes, and a receive posted first.
 *           Blocking MPI_Ssend both ways as well.
 *   rsend   MPI_Rsend / MPI_Irsend to a receive known to be posted.
 *   bsend   MPI_Buffer_attach, then MPI_Bsend / MPI_Ibsend of many
 *           messages before the receiver posts anything (they must return
 *           at once), data received intact, MPI_Buffer_detach gives the
 *           buffer back after delivery; the buffer reused for rounds.
 */
#include "mpitest.h"

static MPI_Comm comm, ctl;

static uint64_t key(int tag, int id)
{
	return (uint64_t)tag << 32 | (uint64_t)id;
}

static void check_msg(const char *b, const MPI_Status *st, int rc, int src,
		      int tag, int id, int n, const char *what)
{
	char w[160];

	snprintf(w, sizeof(w), "%s (tag %d, message %d, %d B)", what, tag,
		 id, n);
	if (rc != MPI_SUCCESS) {
		mt_fail("%s: %s", w, mt_errstr(rc));
		return;
	}
	if (st->MPI_SOURCE != src || st->MPI_TAG != tag ||
	    mt_count(st, MPI_BYTE) != n) {
		mt_fail("%s: got source %d tag %d, %d B", w, st->MPI_SOURCE,
			st->MPI_TAG, mt_count(st, MPI_BYTE));
		return;
	}
	mt_check_data(b, n, key(tag, id), w);
}

static void token(int to)
{
	int x = 0;

	MT_CALL(MPI_Send(&x, 1, MPI_INT, to, 0, ctl));
}

static void await(int from)
{
	int x;

	MT_CALL(MPI_Recv(&x, 1, MPI_INT, from, 0, ctl, MPI_STATUS_IGNORE));
}

static void ssend(void)
{
	static const int sizes[] = { 0, 8, 4096, 8192, 8193, 65536, 1 << 20 };

	for (int k = 0; k < 7; k++) {
		int n = sizes[k];

		mt_set_phase("issend %d B", n);
		if (mt_rank == 1) {
			char *b = mt_malloc(n);
			MPI_Request r;
			int f = 0;

			mt_fill(b, n, key(1, k));
			MT_CALL(MPI_Issend(b, n, MPI_BYTE, 0, 1, comm, &r));
			/* rank 0 has not posted: must stay incomplete */
			for (int i = 0; i < 40 && !f; i++) {
				MT_CALL(MPI_Test(&r, &f, MPI_STATUS_IGNORE));
				mt_sleep_ms(1);
			}
			MT_CHECK(!f, "MPI_Issend of %d B completed before the receive was posted",
				 n);
			token(0);
			/* rank 0 probed it (no match): still incomplete */
			await(0);
			for (int i = 0; i < 20 && !f; i++) {
				MT_CALL(MPI_Test(&r, &f, MPI_STATUS_IGNORE));
				mt_sleep_ms(1);
			}
			MT_CHECK(!f, "MPI_Issend of %d B completed after MPI_Iprobe, before the receive",
				 n);
			token(0);
			MT_CALL(mt_wait(&r, MPI_STATUS_IGNORE,
					"MPI_Issend after the receive"));
			free(b);
		} else if (mt_rank == 0) {
			char *b = mt_malloc(n);
			MPI_Status st;
			int rc;

			await(1);
			mt_wait_arrived(1, 1, comm, &st, "the ssend message");
			token(1);
			await(1);
			rc = MPI_Recv(b, n, MPI_BYTE, 1, 1, comm, &st);
			check_msg(b, &st, rc, 1, 1, k, n, "ssend message");
			free(b);
		}
		MT_CALL(MPI_Barrier(comm));
	}
	mt_checked("MPI_Issend 0 B .. 1 MiB: MPI_Test false for 40 ms before the receive and 20 ms after MPI_Iprobe found it; completes after the receive");

	/* receive posted first; blocking MPI_Ssend both ways */
	mt_set_phase("ssend, receive posted first");
	for (int k = 0; k < 7; k++) {
		int n = sizes[k], peer = 1 - mt_rank;

		if (mt_rank > 1)
			continue;
		char *sb = mt_malloc(n), *rb = mt_malloc(n);
		MPI_Request r;
		MPI_Status st;
		int rc;

		mt_fill(sb, n, key(2 + mt_rank, k));
		MT_CALL(MPI_Irecv(rb, n, MPI_BYTE, peer, 2 + peer, comm, &r));
		MT_CALL(MPI_Ssend(sb, n, MPI_BYTE, peer, 2 + mt_rank, comm));
		rc = mt_wait(&r, &st, "receive of the peer's ssend");
		check_msg(rb, &st, rc, peer, 2 + peer, k, n,
			  "MPI_Ssend both ways");
		free(sb);
		free(rb);
	}
	MT_CALL(MPI_Barrier(comm));
	mt_checked("MPI_Ssend both ways at once (receives pre-posted), 0 B .. 1 MiB");
}

static void rsend(void)
{
	static const int sizes[] = { 0, 100, 8193, 300000 };

	mt_set_phase("rsend");
	for (int k = 0; k < 8; k++) {
		int n = sizes[k % 4];

		if (mt_rank == 0) {
			char *b = mt_malloc(n);
			MPI_Request r;
			MPI_Status st;
			int rc;

			MT_CALL(MPI_Irecv(b, n, MPI_BYTE, 1, 4, comm, &r));
			token(1);
			rc = mt_wait(&r, &st, "receive of the rsend");
			check_msg(b, &st, rc, 1, 4, k, n,
				  k < 4 ? "MPI_Rsend" : "MPI_Irsend");
			free(b);
		} else if (mt_rank == 1) {
			char *b = mt_malloc(n);
			MPI_Request r;

			mt_fill(b, n, key(4, k));
			await(0);
			if (k < 4) {
				MT_CALL(MPI_Rsend(b, n, MPI_BYTE, 0, 4, comm));
			} else {
				MT_CALL(MPI_Irsend(b, n, MPI_BYTE, 0, 4, comm,
						   &r));
				MT_CALL(mt_wait(&r, MPI_STATUS_IGNORE,
						"MPI_Irsend"));
			}
			free(b);
		}
	}
	MT_CALL(MPI_Barrier(comm));
	mt_checked("MPI_Rsend and MPI_Irsend to posted receives, 0 B .. 300 KB");
}

static void bsend(void)
{
	enum { NB = 40 };
	int total = 0, one;

	for (int k = 0; k < NB; k++) {
		int n = k % 10 == 9 ? 100000 : k * 13;

		MT_CALL(MPI_Pack_size(n, MPI_BYTE, MPI_COMM_WORLD, &one));
		total += one + MPI_BSEND_OVERHEAD;
	}
	for (int round = 0; round < 3; round++) {
		mt_set_phase("bsend round %d", round);
		if (mt_rank == 1) {
			char *att = mt_malloc(total), *det = NULL;
			int dsize = 0;
			double t0;

			MT_CALL(MPI_Buffer_attach(att, total));
			t0 = mt_now();
			for (int k = 0; k < NB; k++) {
				int n = k % 10 == 9 ? 100000 : k * 13;
				char *b = mt_malloc(n);

				mt_fill(b, n, key(5 + round, k));
				if (k % 2) {
					MPI_Request r;

					MT_CALL(MPI_Ibsend(b, n, MPI_BYTE, 0,
							   5 + round, comm,
							   &r));
					MT_CALL(mt_wait(&r, MPI_STATUS_IGNORE,
							"MPI_Ibsend"));
				} else {
					MT_CALL(MPI_Bsend(b, n, MPI_BYTE, 0,
							  5 + round, comm));
				}
				/* the user buffer is free again at once */
				memset(b, 0xee, n);
				free(b);
			}
			if (mt_now() - t0 > 10)
				mt_fail("%d buffered sends took %.1f s before any receive was posted",
					NB, mt_now() - t0);
			token(0);
			MT_CALL(MPI_Buffer_detach(&det, &dsize));
			MT_CHECK(det == att && dsize == total,
				 "MPI_Buffer_detach gave %p/%d, attached %p/%d",
				 (void *)det, dsize, (void *)att, total);
			free(att);
		} else if (mt_rank == 0) {
			char *b = mt_malloc(100000);
			MPI_Status st;

			await(1);
			for (int k = 0; k < NB; k++) {
				int n = k % 10 == 9 ? 100000 : k * 13;
				int rc = MPI_Recv(b, 100000, MPI_BYTE, 1,
						  5 + round, comm, &st);

				check_msg(b, &st, rc, 1, 5 + round, k, n,
					  "buffered send");
			}
			free(b);
		}
		MT_CALL(MPI_Barrier(comm));
	}
	mt_checked("MPI_Buffer_attach (%d B), %d MPI_Bsend/MPI_Ibsend (0 B .. 100 KB) returned before any receive was posted, user buffers scribbled at once, data intact, MPI_Buffer_detach returned the buffer; 3 rounds",
		   total, NB);
}

int main(int argc, char **argv)
{
	mt_init(&argc, &argv, "mpi_modes", 2);
	comm = mt_dup(MPI_COMM_WORLD);
	ctl = mt_dup(MPI_COMM_WORLD);
	ssend();
	rsend();
	bsend();
	MPI_Comm_free(&comm);
	MPI_Comm_free(&ctl);
	return mt_finish();
}
