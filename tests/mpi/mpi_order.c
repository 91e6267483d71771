/*
 * mpi_order.c - non-overtaking order with mixed eager and rendezvous sizes.
 *
 * Ranks 1..N-1 each send a sequence of messages (0 B .. 4 MiB, sizes
 * shuffled so that small eager messages follow large rendezvous ones and
 * the other way round) to rank 0 on one communicator.  MPI says messages
 * from one sender that match the same receive are received in the order
 * they were sent, whatever their sizes and protocols.  Three phases:
 *
 *   A  unexpected: all sends are posted (MPI_Isend) before rank 0 posts a
 *      receive; rank 0 receives source by source with one tag.
 *   B  expected: rank 0 pre-posts every receive (MPI_Irecv, source given,
 *      each buffer exactly the size of the message it must get), then the
 *      senders send with MPI_Send.
 *   C  concurrent, MPI_ANY_SOURCE + MPI_ANY_TAG: senders alternate two
 *      tags while rank 0 receives; per source the k-th message received
 *      must be the k-th sent (its tag, size and bytes).
 *
 * Every message's bytes are a pattern of (sender, index), so a message
 * delivered in the wrong place or garbled is named exactly.
 */
#include "mpitest.h"

#define NMSG 40
#define MAXSZ (4u << 20)

static const size_t sizes[] = {
	0, 1, 7, 64, 255, 256, 257, 1000, 4095, 4096, 4097, 8191, 8192,
	8193, 12000, 16384, 65536, 262144, 1u << 20, MAXSZ,
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static size_t msg_size[64][NMSG];

/* The size of each message: shuffled, at most two 4 MiB and two 1 MiB. */
static void plan(uint64_t seed)
{
	for (int s = 1; s < mt_size; s++) {
		uint64_t r = seed ^ (uint64_t)s * 7919;
		int big = 0, mid = 0;

		for (int k = 0; k < NMSG; k++) {
			size_t n;

			do {
				n = sizes[mt_rand(&r) % NSIZES];
			} while ((n == MAXSZ && big >= 2) ||
				 (n == (1u << 20) && mid >= 2));
			big += n == MAXSZ;
			mid += n == (1u << 20);
			msg_size[s][k] = n;
		}
		/* a rendezvous message right before tiny ones, at least once */
		msg_size[s][3] = MAXSZ > 65536 ? 65536 : MAXSZ;
		msg_size[s][4] = 0;
		msg_size[s][5] = 1;
	}
}

static uint64_t key(int s, int k, int phase)
{
	return ((uint64_t)phase << 48) | ((uint64_t)s << 32) | (uint64_t)k;
}

static void sender(MPI_Comm comm, int phase)
{
	MPI_Request reqs[NMSG];
	void *bufs[NMSG];
	int s = mt_rank;

	for (int k = 0; k < NMSG; k++) {
		bufs[k] = mt_malloc(msg_size[s][k]);
		mt_fill(bufs[k], msg_size[s][k], key(s, k, phase));
	}
	if (phase == 'A') {
		for (int k = 0; k < NMSG; k++)
			MT_CALL(MPI_Isend(bufs[k], (int)msg_size[s][k],
					  MPI_BYTE, 0, 5, comm, &reqs[k]));
		MT_CALL(MPI_Barrier(comm));
		MT_CALL(mt_waitall(NMSG, reqs, MPI_STATUSES_IGNORE,
				   "phase A sends"));
	} else if (phase == 'B') {
		MT_CALL(MPI_Barrier(comm));
		for (int k = 0; k < NMSG; k++)
			MT_CALL(MPI_Send(bufs[k], (int)msg_size[s][k],
					 MPI_BYTE, 0, 6, comm));
	} else {
		for (int k = 0; k < NMSG; k++)
			MT_CALL(MPI_Send(bufs[k], (int)msg_size[s][k],
					 MPI_BYTE, 0, 7 + (k & 1), comm));
	}
	for (int k = 0; k < NMSG; k++)
		free(bufs[k]);
}

static void check_msg(const void *buf, const MPI_Status *st, int s, int k,
		      int tag, int phase)
{
	char what[128];
	int n = mt_count(st, MPI_BYTE);

	snprintf(what, sizeof(what),
		 "phase %c: message %d from rank %d (%zu B, tag %d)", phase, k,
		 s, msg_size[s][k], tag);
	if (st->MPI_SOURCE != s || st->MPI_TAG != tag) {
		mt_fail("%s: status says source %d tag %d", what,
			st->MPI_SOURCE, st->MPI_TAG);
		return;
	}
	if (n != (int)msg_size[s][k]) {
		mt_fail("%s: got %d bytes (overtaken or lost?)", what, n);
		return;
	}
	mt_check_data(buf, msg_size[s][k], key(s, k, phase), what);
}

int main(int argc, char **argv)
{
	MPI_Comm comm;
	MPI_Status st;
	unsigned char *buf;
	uint64_t seed;
	size_t total = 0;

	mt_init(&argc, &argv, "mpi_order", 2);
	seed = mt_seed();
	if (mt_size > 64)
		mt_abort("at most 64 ranks");
	plan(seed);
	comm = mt_dup(MPI_COMM_WORLD);
	for (int s = 1; s < mt_size; s++)
		for (int k = 0; k < NMSG; k++)
			total += msg_size[s][k];

	/* A: unexpected, one tag, source by source */
	mt_set_phase("A unexpected");
	if (mt_rank == 0) {
		buf = mt_malloc(MAXSZ);
		MT_CALL(MPI_Barrier(comm));
		for (int s = 1; s < mt_size; s++)
			for (int k = 0; k < NMSG; k++) {
				MT_CALL(MPI_Recv(buf, MAXSZ, MPI_BYTE, s, 5,
						 comm, &st));
				check_msg(buf, &st, s, k, 5, 'A');
			}
		free(buf);
	} else {
		sender(comm, 'A');
	}
	mt_checked("unexpected path: %d sender(s) x %d messages (0 B .. 4 MiB, %zu B in all) on one tag, received in send order",
		   mt_size - 1, NMSG, total);

	/* B: expected, pre-posted exact-size receives */
	mt_set_phase("B expected");
	if (mt_rank == 0) {
		int n = (mt_size - 1) * NMSG, i = 0;
		MPI_Request *reqs = mt_malloc(n * sizeof(*reqs));
		MPI_Status *sts = mt_malloc(n * sizeof(*sts));
		void **bufs = mt_malloc(n * sizeof(*bufs));
		int rc;

		for (int k = 0; k < NMSG; k++)
			for (int s = 1; s < mt_size; s++, i++) {
				bufs[i] = mt_malloc(msg_size[s][k]);
				MT_CALL(MPI_Irecv(bufs[i], (int)msg_size[s][k],
						  MPI_BYTE, s, 6, comm,
						  &reqs[i]));
			}
		MT_CALL(MPI_Barrier(comm));
		rc = mt_waitall(n, reqs, sts, "phase B receives");
		i = 0;
		for (int k = 0; k < NMSG; k++)
			for (int s = 1; s < mt_size; s++, i++) {
				if (rc == MPI_ERR_IN_STATUS &&
				    sts[i].MPI_ERROR != MPI_SUCCESS)
					mt_fail("phase B: receive of message %d from rank %d (%zu B): %s",
						k, s, msg_size[s][k],
						mt_errstr(sts[i].MPI_ERROR));
				else
					check_msg(bufs[i], &sts[i], s, k, 6,
						  'B');
				free(bufs[i]);
			}
		if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
			mt_fail("phase B: MPI_Waitall: %s", mt_errstr(rc));
		free(reqs);
		free(sts);
		free(bufs);
	} else {
		sender(comm, 'B');
	}
	mt_checked("expected path: %d receives pre-posted per sender, each exactly the size of its message; every message landed in its own receive",
		   NMSG);

	/* C: concurrent, wildcards, two tags */
	mt_set_phase("C wildcard");
	if (mt_rank == 0) {
		int next[64] = { 0 };
		int n = (mt_size - 1) * NMSG;

		buf = mt_malloc(MAXSZ);
		for (int i = 0; i < n; i++) {
			int s, k;

			MT_CALL(MPI_Recv(buf, MAXSZ, MPI_BYTE, MPI_ANY_SOURCE,
					 MPI_ANY_TAG, comm, &st));
			s = st.MPI_SOURCE;
			if (s < 1 || s >= mt_size || next[s] >= NMSG) {
				mt_fail("phase C: unexpected message from rank %d tag %d (%d B)",
					s, st.MPI_TAG, mt_count(&st, MPI_BYTE));
				continue;
			}
			k = next[s]++;
			check_msg(buf, &st, s, k, 7 + (k & 1), 'C');
		}
		free(buf);
	} else {
		sender(comm, 'C');
	}
	mt_checked("concurrent MPI_ANY_SOURCE/MPI_ANY_TAG receives, two alternating tags: per sender, messages arrived in send order with the right tag, size and bytes");

	MPI_Comm_free(&comm);
	return mt_finish();
}
