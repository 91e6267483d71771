/*
 * mpi_many.c - thousands of pre-posted receives, thousands of unexpected
 * messages.
 *
 * More receives than a card's matching list holds (a ConnectX-5 has 1023
 * entries) and more unexpected messages than there are receive buffers
 * for them: the order rules must hold however deep the queues get.
 *
 *   A  pre-posted: rank 0 posts 3000 receives (spread over the senders,
 *      tags i % 500, so six receives share each tag and sender), then the
 *      senders send in reverse order; the k-th receive posted for a
 *      (sender, tag) must get the k-th message sent with it.
 *   B  unexpected: the senders send 3000 messages (tags i % 700) before
 *      rank 0 posts anything; rank 0 takes half of the tags by exact
 *      (source, tag) in a shuffled order, then the rest with MPI_ANY_TAG
 *      per sender (each must get that sender's earliest message left),
 *      then a final MPI_ANY_SOURCE/MPI_ANY_TAG sweep when more senders.
 *   C  both at once: 1000 receives pre-posted with MPI_ANY_TAG from a
 *      sender that sends 2000 messages: the first 1000 go to the posted
 *      receives in order, the rest queue up unexpected.
 * About one message in 50 is 10000 B (rendezvous), the others 8..64 B.
 */
#include "mpitest.h"

#define NTOTAL 3000
#define TAGS_A 500
#define TAGS_B 700

static int nper;  /* messages per sender */

static int msize(int i)
{
	return i % 50 == 17 ? 10000 : 8 + (i * 7) % 57;
}

static uint64_t key(int phase, int s, int i)
{
	return ((uint64_t)phase << 56) ^ ((uint64_t)s << 32) ^ (uint64_t)i;
}

static void send_all(MPI_Comm comm, int phase, int reverse, int tags)
{
	MPI_Request *reqs = mt_malloc(nper * sizeof(*reqs));
	char **bufs = mt_malloc(nper * sizeof(*bufs));

	for (int k = 0; k < nper; k++) {
		int i = reverse ? nper - 1 - k : k;

		bufs[k] = mt_malloc(msize(i));
		mt_fill(bufs[k], msize(i), key(phase, mt_rank, i));
		MT_CALL(MPI_Isend(bufs[k], msize(i), MPI_BYTE, 0, i % tags,
				  comm, &reqs[k]));
	}
	MT_CALL(mt_waitall(nper, reqs, MPI_STATUSES_IGNORE, "the sends"));
	for (int k = 0; k < nper; k++)
		free(bufs[k]);
	free(reqs);
	free(bufs);
}

static void check(const void *buf, const MPI_Status *st, int rc, int phase,
		  int s, int i, const char *how)
{
	char what[200];

	snprintf(what, sizeof(what),
		 "phase %c: %s must get message %d of rank %d (tag %d, %d B)",
		 phase, how, i, s,
		 i % (phase == 'A' ? TAGS_A : phase == 'B' ? TAGS_B : 1000),
		 msize(i));
	if (rc != MPI_SUCCESS) {
		mt_fail("%s: %s", what, mt_errstr(rc));
		return;
	}
	if (st->MPI_SOURCE != s || mt_count(st, MPI_BYTE) != msize(i)) {
		mt_fail("%s: got source %d tag %d, %d B", what, st->MPI_SOURCE,
			st->MPI_TAG, mt_count(st, MPI_BYTE));
		return;
	}
	mt_check_data(buf, msize(i), key(phase, s, i), what);
}

static void phase_a(MPI_Comm comm)
{
	if (mt_rank != 0) {
		MT_CALL(MPI_Barrier(comm));
		send_all(comm, 'A', 1, TAGS_A);
		return;
	}
	int n = nper * (mt_size - 1), q = 0, rc;
	MPI_Request *reqs = mt_malloc(n * sizeof(*reqs));
	MPI_Status *sts = mt_malloc(n * sizeof(*sts));
	char **bufs = mt_malloc(n * sizeof(*bufs));

	/* receive for (s, i): the k-th posted for its tag, i = t + 500 k */
	for (int i = 0; i < nper; i++)
		for (int s = 1; s < mt_size; s++, q++) {
			bufs[q] = mt_malloc(10000);
			MT_CALL(MPI_Irecv(bufs[q], 10000, MPI_BYTE, s,
					  i % TAGS_A, comm, &reqs[q]));
		}
	MT_CALL(MPI_Barrier(comm));
	rc = mt_waitall(n, reqs, sts, "phase A: the 3000 pre-posted receives");
	q = 0;
	for (int i = 0; i < nper; i++)
		for (int s = 1; s < mt_size; s++, q++) {
			/*
			 * Sent in reverse: of the messages with tag t, the
			 * k-th sent is i' = t + 500 (K-1-k), K of them.
			 */
			int t = i % TAGS_A, k = i / TAGS_A;
			int kk = (nper - 1 - t) / TAGS_A + 1;
			int src_i = t + TAGS_A * (kk - 1 - k);

			check(bufs[q], &sts[q],
			      rc == MPI_ERR_IN_STATUS ? sts[q].MPI_ERROR : rc,
			      'A', s, src_i, "pre-posted receive");
			free(bufs[q]);
		}
	free(reqs);
	free(sts);
	free(bufs);
}

static void phase_b(MPI_Comm comm, uint64_t *rng)
{
	if (mt_rank != 0) {
		send_all(comm, 'B', 0, TAGS_B);
		MT_CALL(MPI_Barrier(comm));
		return;
	}
	char *buf = mt_malloc(10000);
	int *order = mt_malloc(TAGS_B * sizeof(*order));
	char *taken = calloc((size_t)mt_size * nper, 1);
	int *next = calloc(mt_size, sizeof(int));
	MPI_Status st;
	int rc;

	/* let the messages arrive first */
	mt_progress_ms(comm, 100);
	for (int t = 0; t < TAGS_B; t++)
		order[t] = t;
	for (int t = TAGS_B - 1; t > 0; t--) {
		int j = mt_rand(rng) % (t + 1), x = order[t];

		order[t] = order[j];
		order[j] = x;
	}
	/* half of the tags, exact, in shuffled order */
	for (int k = 0; k < TAGS_B / 2; k++) {
		int t = order[k];

		for (int s = 1; s < mt_size; s++)
			for (int i = t; i < nper; i += TAGS_B) {
				rc = MPI_Recv(buf, 10000, MPI_BYTE, s, t, comm,
					      &st);
				check(buf, &st, rc, 'B', s, i,
				      "exact receive (source, tag)");
				taken[s * nper + i] = 1;
			}
	}
	/* the rest: MPI_ANY_TAG per sender, earliest left first */
	for (int s = 1; s < mt_size; s++) {
		int left = 0;

		for (int i = 0; i < nper; i++)
			left += !taken[s * nper + i];
		/* when more senders, leave half for the ANY_SOURCE sweep */
		if (mt_size > 2)
			left /= 2;
		for (int n = 0; n < left; n++) {
			while (taken[s * nper + next[s]])
				next[s]++;
			rc = MPI_Recv(buf, 10000, MPI_BYTE, s, MPI_ANY_TAG,
				      comm, &st);
			check(buf, &st, rc, 'B', s, next[s],
			      "MPI_ANY_TAG receive");
			if (rc == MPI_SUCCESS && st.MPI_TAG != next[s] % TAGS_B)
				mt_fail("phase B: MPI_ANY_TAG receive got tag %d, want %d",
					st.MPI_TAG, next[s] % TAGS_B);
			taken[s * nper + next[s]] = 1;
		}
	}
	/* the ANY_SOURCE sweep: per sender in order */
	for (;;) {
		int s, any = 0;

		for (s = 1; s < mt_size; s++)
			for (int i = next[s]; i < nper; i++)
				any += !taken[s * nper + i];
		if (!any)
			break;
		rc = MPI_Recv(buf, 10000, MPI_BYTE, MPI_ANY_SOURCE,
			      MPI_ANY_TAG, comm, &st);
		s = st.MPI_SOURCE;
		if (rc != MPI_SUCCESS || s < 1 || s >= mt_size) {
			mt_fail("phase B: ANY_SOURCE receive: %s, source %d",
				mt_errstr(rc), s);
			break;
		}
		while (next[s] < nper && taken[s * nper + next[s]])
			next[s]++;
		if (next[s] >= nper) {
			mt_fail("phase B: ANY_SOURCE receive got a message from rank %d, which has none left",
				s);
			break;
		}
		check(buf, &st, rc, 'B', s, next[s], "MPI_ANY_SOURCE sweep");
		taken[s * nper + next[s]] = 1;
	}
	MT_CALL(MPI_Barrier(comm));
	free(buf);
	free(order);
	free(taken);
	free(next);
}

static void phase_c(MPI_Comm comm)
{
	int half = NTOTAL / 3;

	if (mt_rank == 1) {
		MPI_Request *reqs = mt_malloc(2 * half * sizeof(*reqs));
		char **bufs = mt_malloc(2 * half * sizeof(*bufs));

		MT_CALL(MPI_Barrier(comm));
		for (int i = 0; i < 2 * half; i++) {
			bufs[i] = mt_malloc(msize(i));
			mt_fill(bufs[i], msize(i), key('C', 1, i));
			MT_CALL(MPI_Isend(bufs[i], msize(i), MPI_BYTE, 0,
					  i % 1000, comm, &reqs[i]));
		}
		MT_CALL(mt_waitall(2 * half, reqs, MPI_STATUSES_IGNORE,
				   "phase C sends"));
		for (int i = 0; i < 2 * half; i++)
			free(bufs[i]);
		free(reqs);
		free(bufs);
	} else if (mt_rank == 0) {
		MPI_Request *reqs = mt_malloc(half * sizeof(*reqs));
		MPI_Status *sts = mt_malloc(half * sizeof(*sts));
		char *bufs = mt_malloc((size_t)half * 10000);
		MPI_Status st;
		int rc;

		for (int i = 0; i < half; i++)
			MT_CALL(MPI_Irecv(bufs + (size_t)i * 10000, 10000,
					  MPI_BYTE, 1, MPI_ANY_TAG, comm,
					  &reqs[i]));
		MT_CALL(MPI_Barrier(comm));
		rc = mt_waitall(half, reqs, sts, "phase C pre-posted");
		for (int i = 0; i < half; i++)
			check(bufs + (size_t)i * 10000, &sts[i],
			      rc == MPI_ERR_IN_STATUS ? sts[i].MPI_ERROR : rc,
			      'C', 1, i, "pre-posted MPI_ANY_TAG receive");
		for (int i = half; i < 2 * half; i++) {
			rc = MPI_Recv(bufs, 10000, MPI_BYTE, 1, i % 1000, comm,
				      &st);
			check(bufs, &st, rc, 'C', 1, i,
			      "receive of a queued message");
		}
		free(reqs);
		free(sts);
		free(bufs);
	} else {
		MT_CALL(MPI_Barrier(comm));
	}
}

int main(int argc, char **argv)
{
	MPI_Comm comm;
	uint64_t rng;

	mt_init(&argc, &argv, "mpi_many", 2);
	rng = mt_seed();
	nper = NTOTAL / (mt_size - 1);
	comm = mt_dup(MPI_COMM_WORLD);

	mt_set_phase("A pre-posted");
	phase_a(comm);
	mt_checked("%d receives pre-posted (%d per sender, %d tags), messages sent in reverse: each got the right message",
		   nper * (mt_size - 1), nper, TAGS_A);
	mt_set_phase("B unexpected");
	phase_b(comm, &rng);
	mt_checked("%d messages unexpected (%d per sender, %d tags): exact receives in shuffled tag order, then MPI_ANY_TAG%s, each got the right message",
		   nper * (mt_size - 1), nper, TAGS_B,
		   mt_size > 2 ? " and MPI_ANY_SOURCE sweeps" : "");
	mt_set_phase("C pre-posted and queued");
	phase_c(comm);
	mt_checked("%d MPI_ANY_TAG receives pre-posted while %d messages came: the first went to them in order, the rest queued and were received by tag",
		   NTOTAL / 3, 2 * (NTOTAL / 3));
	MPI_Comm_free(&comm);
	return mt_finish();
}
