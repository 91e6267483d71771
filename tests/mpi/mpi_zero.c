/*
 * mpi_zero.c - zero-byte messages.
 *
 * A message with no data still matches, carries its source and tag, keeps
 * its place in order, and completes synchronous sends.  Every rank > 0
 * sends to rank 0:
 *   - 0-byte messages with tags interleaved with 1-byte and 20 KB ones,
 *     received in order by tag and by MPI_ANY_TAG (expected and
 *     unexpected), status count 0, receive buffer untouched;
 *   - NULL buffer with count 0 on both sides; 0 elements of a derived
 *     datatype;
 *   - MPI_Ssend / MPI_Issend of 0 bytes (completes after the match);
 *   - MPI_Probe of a 0-byte message: count 0;
 *   - 1000 zero-byte messages in a row, then MPI_ANY_SOURCE receives: per
 *     sender in order (tag = index).
 */
#include "mpitest.h"

static MPI_Comm comm;

static void check_st(const MPI_Status *st, int rc, int src, int tag, int n,
		     const char *what)
{
	if (rc != MPI_SUCCESS)
		mt_fail("%s: %s", what, mt_errstr(rc));
	else if (st->MPI_SOURCE != src || st->MPI_TAG != tag ||
		 mt_count(st, MPI_BYTE) != n)
		mt_fail("%s: got source %d tag %d count %d, want %d %d %d",
			what, st->MPI_SOURCE, st->MPI_TAG,
			mt_count(st, MPI_BYTE), src, tag, n);
}

static int msize(int i)
{
	return i % 3 == 0 ? 0 : i % 3 == 1 ? 1 : 20000;
}

static void interleaved(int expected)
{
	enum { N = 60 };
	char *big = mt_malloc(20000);

	mt_set_phase("interleaved, %s", expected ? "expected" : "unexpected");
	if (mt_rank != 0) {
		if (expected)
			MT_CALL(MPI_Barrier(comm));
		for (int i = 0; i < N; i++) {
			mt_fill(big, msize(i), 100 * mt_rank + i);
			MT_CALL(MPI_Send(big, msize(i), MPI_BYTE, 0,
					 i % 2 ? 7 : 8, comm));
		}
		if (!expected)
			MT_CALL(MPI_Barrier(comm));
	} else {
		if (!expected)
			mt_progress_ms(comm, 30);
		for (int s = 1; s < mt_size; s++) {
			MPI_Request r[N];
			MPI_Status st[N];
			char *bufs = mt_malloc((size_t)N * 20001);
			int rc;

			memset(bufs, 0x33, (size_t)N * 20001);
			/* even indexes by tag 8, odd by MPI_ANY_TAG */
			for (int i = 0; i < N; i += 2)
				MT_CALL(MPI_Irecv(bufs + (size_t)i * 20001,
						  20000, MPI_BYTE, s, 8, comm,
						  &r[i]));
			if (expected && s == 1)
				MT_CALL(MPI_Barrier(comm));
			for (int i = 1; i < N; i += 2)
				MT_CALL(MPI_Irecv(bufs + (size_t)i * 20001,
						  20000, MPI_BYTE, s,
						  MPI_ANY_TAG, comm, &r[i]));
			rc = mt_waitall(N, r, st, "interleaved receives");
			for (int i = 0; i < N; i++) {
				char what[120];
				char *b = bufs + (size_t)i * 20001;

				snprintf(what, sizeof(what),
					 "%s: message %d from %d (%d B)",
					 expected ? "expected" : "unexpected",
					 i, s, msize(i));
				check_st(&st[i],
					 rc == MPI_ERR_IN_STATUS ?
						 st[i].MPI_ERROR : rc,
					 s, i % 2 ? 7 : 8, msize(i), what);
				if (msize(i))
					mt_check_data(b, msize(i), 100 * s + i,
						      what);
				else if (mt_find_not(b, 20001, 0x33) >= 0)
					mt_fail("%s: 0-byte receive wrote into the buffer",
						what);
			}
			free(bufs);
		}
		if (!expected)
			MT_CALL(MPI_Barrier(comm));
	}
	free(big);
}

static void nulls(void)
{
	MPI_Datatype vec;
	MPI_Status st;
	int rc;

	mt_set_phase("NULL buffers, 0 elements, ssend, probe");
	MT_CALL(MPI_Type_vector(3, 2, 5, MPI_INT, &vec));
	MT_CALL(MPI_Type_commit(&vec));
	if (mt_rank == 1) {
		MPI_Request r;
		int f = 0, x = 0;

		MT_CALL(MPI_Send(NULL, 0, MPI_BYTE, 0, 1, comm));
		MT_CALL(MPI_Send(NULL, 0, vec, 0, 2, comm));
		MT_CALL(MPI_Issend(NULL, 0, MPI_BYTE, 0, 3, comm, &r));
		for (int i = 0; i < 20 && !f; i++) {
			MT_CALL(MPI_Test(&r, &f, MPI_STATUS_IGNORE));
			mt_sleep_ms(1);
		}
		MT_CHECK(!f, "0-byte MPI_Issend completed before the receive");
		MT_CALL(MPI_Send(&x, 1, MPI_INT, 0, 99, MPI_COMM_WORLD));
		MT_CALL(mt_wait(&r, MPI_STATUS_IGNORE, "0-byte issend"));
		MT_CALL(MPI_Ssend(NULL, 0, MPI_BYTE, 0, 4, comm));
		MT_CALL(MPI_Send(NULL, 0, MPI_BYTE, 0, 5, comm));
	} else if (mt_rank == 0) {
		int x, ints[16];

		rc = MPI_Recv(NULL, 0, MPI_BYTE, 1, 1, comm, &st);
		check_st(&st, rc, 1, 1, 0, "NULL buffer, count 0");
		memset(ints, 0x33, sizeof(ints));
		rc = MPI_Recv(ints, 1, vec, 1, 2, comm, &st);
		check_st(&st, rc, 1, 2, 0, "0 vector elements into 1");
		if (mt_find_not(ints, sizeof(ints), 0x33) >= 0)
			mt_fail("0 elements received wrote into the buffer");
		MT_CALL(MPI_Recv(&x, 1, MPI_INT, 1, 99, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE));
		rc = MPI_Recv(NULL, 0, MPI_BYTE, 1, 3, comm, &st);
		check_st(&st, rc, 1, 3, 0, "0-byte issend");
		rc = MPI_Recv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
			      comm, &st);
		check_st(&st, rc, 1, 4, 0, "0-byte ssend");
		MT_CALL(MPI_Probe(1, MPI_ANY_TAG, comm, &st));
		check_st(&st, MPI_SUCCESS, 1, 5, 0, "probe of 0 bytes");
		rc = MPI_Recv(ints, 16, MPI_INT, 1, 5, comm, &st);
		check_st(&st, rc, 1, 5, 0, "0 bytes into 16 ints");
	}
	MPI_Type_free(&vec);
	MT_CALL(MPI_Barrier(comm));
}

static void many(void)
{
	enum { N = 1000 };

	mt_set_phase("1000 zero-byte messages");
	if (mt_rank != 0) {
		for (int i = 0; i < N; i++)
			MT_CALL(MPI_Send(NULL, 0, MPI_BYTE, 0, i, comm));
		MT_CALL(MPI_Barrier(comm));
	} else {
		int next[64] = { 0 };
		MPI_Status st;

		MT_CALL(MPI_Barrier(comm));
		for (int i = 0; i < N * (mt_size - 1); i++) {
			int rc = MPI_Recv(NULL, 0, MPI_BYTE, MPI_ANY_SOURCE,
					  MPI_ANY_TAG, comm, &st);
			int s = st.MPI_SOURCE;

			if (rc != MPI_SUCCESS || s < 1 || s >= mt_size) {
				mt_fail("receive %d: %s source %d", i,
					mt_errstr(rc), s);
				continue;
			}
			check_st(&st, rc, s, next[s], 0,
				 "ANY_SOURCE receive of 0-byte messages: per sender in order");
			next[s]++;
		}
	}
}

int main(int argc, char **argv)
{
	mt_init(&argc, &argv, "mpi_zero", 2);
	if (mt_size > 64)
		mt_abort("at most 64 ranks");
	comm = mt_dup(MPI_COMM_WORLD);
	interleaved(1);
	interleaved(0);
	mt_checked("0-byte messages interleaved with 1 B and 20 KB ones from %d sender(s), by tag and MPI_ANY_TAG, expected and unexpected: in order, count 0, buffer untouched",
		   mt_size - 1);
	nulls();
	mt_checked("NULL buffer with count 0, 0 vector elements, 0-byte MPI_Issend pending until the receive, MPI_Ssend, MPI_Probe count 0");
	many();
	mt_checked("1000 zero-byte messages per sender, tags 0..999, received with MPI_ANY_SOURCE/MPI_ANY_TAG: per sender in order");
	MPI_Comm_free(&comm);
	return mt_finish();
}
