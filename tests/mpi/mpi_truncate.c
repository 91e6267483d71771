/*
 * mpi_truncate.c - a message longer than its receive buffer (rank 1 to 0).
 *
 * Under MPI_ERRORS_RETURN the receive reports MPI_ERR_TRUNCATE (from
 * MPI_Recv and MPI_Wait; from MPI_Waitall as MPI_ERR_IN_STATUS with the
 * status's MPI_ERROR set), with the status source and tag right, and a
 * count of the bytes delivered: the buffer's size (pml ob1 may report the
 * message's instead, which MPI leaves open: accepted under ob1 only; the
 * program says which it saw).  The
 * buffer holds the message's first bytes, and nothing outside the buffer
 * is touched: guard bytes before it and after it (as many as the whole
 * message, so an overrun stays inside our allocation) must be unchanged.
 * The sender's send succeeds, and the next message on the communicator
 * arrives intact.
 *
 * Sizes: 1 B into 0 B, small eager, around the eager/rendezvous limits
 * (4 KiB, 8 KiB), 64 KiB into 1 KiB, 1 MiB into 64 KiB, 4 MiB into
 * 4 MiB - 1.  Paths: receive posted first (expected), message first
 * (unexpected, found with MPI_Iprobe), and an MPI_ANY_SOURCE receive.
 *
 * Known: Open MPI's ob1 writes past the buffer for truncated messages of
 * about 4 KiB and more (it copies the whole message).  Under pml ob1
 * (OMPI_MCA_pml=ob1, as mpirun --mca pml ob1 exports) that overrun is
 * reported as a note and tolerated; anywhere else it is a failure.
 */
#include "mpitest.h"

#define GUARD_BEFORE 64
#define GUARD 0xA5
#define FRESH 0x5A

static MPI_Comm comm;
static int ob1;
static int count_buf, count_msg, overruns_tolerated;

static const struct {
	int msg, buf;
} cases[] = {
	{ 1, 0 },         { 16, 8 },        { 100, 99 },
	{ 1000, 100 },    { 4095, 2000 },   { 4096, 2048 },
	{ 5000, 4097 },   { 8192, 4096 },   { 8193, 8192 },
	{ 9000, 8193 },   { 65536, 1024 },  { 1 << 20, 65536 },
	{ 4 << 20, (4 << 20) - 1 },
};
#define NCASES ((int)(sizeof(cases) / sizeof(cases[0])))

static uint64_t key(int k)
{
	return 0x7700 + (uint64_t)k;
}

enum { EXPECTED, UNEXPECTED, WILDCARD };
static const char *pathname[] = { "receive posted first",
				  "message first (unexpected)",
				  "MPI_ANY_SOURCE receive posted first" };

static void check(int k, int path, int how, const unsigned char *area,
		  size_t guard_after, int rc, const MPI_Status *st)
{
	const unsigned char *buf = area + GUARD_BEFORE;
	int n = cases[k].msg, cap = cases[k].buf, cnt;
	char what[200];
	long bad;

	snprintf(what, sizeof(what), "%d B message into %d B buffer, %s, %s",
		 n, cap, pathname[path],
		 how == 0 ? "MPI_Recv" : how == 1 ? "MPI_Wait" : "MPI_Waitall");
	if (how == 2) {
		if (rc != MPI_ERR_IN_STATUS)
			mt_fail("%s: MPI_Waitall returned %s, want MPI_ERR_IN_STATUS",
				what, mt_errstr(rc));
		rc = st->MPI_ERROR;
	}
	if (mt_class(rc) != MPI_ERR_TRUNCATE)
		mt_fail("%s: error %s, want MPI_ERR_TRUNCATE", what,
			rc == MPI_SUCCESS ? "MPI_SUCCESS" : mt_errstr(rc));
	if (st->MPI_SOURCE != 1 || st->MPI_TAG != k)
		mt_fail("%s: status source %d tag %d, want 1 %d", what,
			st->MPI_SOURCE, st->MPI_TAG, k);
	cnt = mt_count(st, MPI_BYTE);
	if (cnt == cap)
		count_buf++;
	else if (cnt == n && ob1)
		count_msg++;
	else
		mt_fail("%s: count %d, want %d: the bytes delivered%s", what,
			cnt, cap, ob1 ? " (or the message's, under ob1)" : "");
	bad = mt_find_not(area, GUARD_BEFORE, GUARD);
	if (bad >= 0)
		mt_fail("%s: byte %ld before the buffer was written", what,
			GUARD_BEFORE - bad);
	bad = mt_verify(buf, cap, key(k));
	if (bad >= 0)
		mt_fail("%s: the buffer does not hold the message's first %d bytes: byte %ld is 0x%02x, want 0x%02x",
			what, cap, bad, buf[bad], mt_byte(key(k), bad));
	bad = mt_find_not(buf + cap, guard_after, GUARD);
	if (bad >= 0) {
		long last = bad;

		for (long i = (long)guard_after - 1; i > bad; i--)
			if (buf[cap + i] != GUARD) {
				last = i;
				break;
			}
		if (ob1 && n >= 4000) {
			overruns_tolerated++;
		} else {
			mt_fail("%s: wrote past the buffer: bytes %ld..%ld after its end changed",
				what, bad, last);
		}
	}
}

static void one(int k, int path, int how)
{
	int n = cases[k].msg, cap = cases[k].buf;
	size_t guard_after = (size_t)(n - cap) + 4096;

	if (mt_rank == 1) {
		char *b = mt_malloc(n), small[32];
		int rc;

		mt_fill(b, n, key(k));
		if (path != UNEXPECTED)
			MT_CALL(MPI_Barrier(comm));
		rc = MPI_Send(b, n, MPI_BYTE, 0, k, comm);
		MT_CHECK(rc == MPI_SUCCESS,
			 "sender of the %d B message truncated at the receiver: %s",
			 n, mt_errstr(rc));
		mt_fill(small, 32, key(1000 + k));
		MT_CALL(MPI_Send(small, 32, MPI_BYTE, 0, 1000 + k, comm));
		free(b);
	} else if (mt_rank == 0) {
		size_t len = GUARD_BEFORE + cap + guard_after;
		unsigned char *area = mt_malloc(len), small[32];
		MPI_Request r;
		MPI_Status st;
		int rc;

		memset(area, GUARD, len);
		memset(area + GUARD_BEFORE, FRESH, cap);
		if (path == UNEXPECTED) {
			mt_wait_arrived(1, k, comm, &st, "the long message");
			if (how == 0) {
				rc = MPI_Recv(area + GUARD_BEFORE, cap,
					      MPI_BYTE, 1, k, comm, &st);
			} else {
				MT_CALL(MPI_Irecv(area + GUARD_BEFORE, cap,
						  MPI_BYTE, 1, k, comm, &r));
				rc = how == 1 ?
					     mt_wait(&r, &st, "truncated receive") :
					     mt_waitall(1, &r, &st,
							"truncated receive");
			}
		} else {
			MT_CALL(MPI_Irecv(area + GUARD_BEFORE, cap, MPI_BYTE,
					  path == WILDCARD ? MPI_ANY_SOURCE : 1,
					  k, comm, &r));
			MT_CALL(MPI_Barrier(comm));
			rc = how == 2 ? mt_waitall(1, &r, &st,
						   "truncated receive") :
					mt_wait(&r, &st, "truncated receive");
			if (how == 0)
				how = 1;
		}
		check(k, path, how, area, guard_after, rc, &st);
		rc = MPI_Recv(small, 32, MPI_BYTE, 1, MPI_ANY_TAG, comm, &st);
		if (rc != MPI_SUCCESS || st.MPI_TAG != 1000 + k ||
		    mt_count(&st, MPI_BYTE) != 32 ||
		    mt_verify(small, 32, key(1000 + k)) >= 0)
			mt_fail("%d B into %d B, %s: the next message (tag %d) came wrong: %s, tag %d, %d B",
				n, cap, pathname[path], 1000 + k,
				mt_errstr(rc), st.MPI_TAG,
				mt_count(&st, MPI_BYTE));
		free(area);
	} else if (path != UNEXPECTED) {
		MT_CALL(MPI_Barrier(comm));
	}
}

int main(int argc, char **argv)
{
	int total = 0;

	mt_init(&argc, &argv, "mpi_truncate", 2);
	ob1 = mt_is_ob1();
	comm = mt_dup(MPI_COMM_WORLD);
	for (int path = 0; path < 3; path++) {
		for (int k = 0; k < NCASES; k++) {
			/* MPI_Recv, MPI_Wait, MPI_Waitall in turn */
			int how = (k + path) % 3;

			mt_set_phase("%s, case %d", pathname[path], k);
			one(k, path, how);
			total++;
		}
		MT_CALL(MPI_Barrier(comm));
	}
	MT_CALL(MPI_Bcast(&count_buf, 1, MPI_INT, 0, MPI_COMM_WORLD));
	MT_CALL(MPI_Bcast(&count_msg, 1, MPI_INT, 0, MPI_COMM_WORLD));
	MT_CALL(MPI_Bcast(&overruns_tolerated, 1, MPI_INT, 0, MPI_COMM_WORLD));
	mt_checked("%d truncated receives (1 B into 0 B .. 4 MiB into 4 MiB-1; posted first, unexpected, ANY_SOURCE; MPI_Recv, MPI_Wait, MPI_Waitall): MPI_ERR_TRUNCATE, status source/tag, the message's first bytes in the buffer, guard bytes before and after intact, the next message intact",
		   total);
	mt_checked("count reported: buffer size %d time(s), message size %d time(s)",
		   count_buf, count_msg);
	if (overruns_tolerated && mt_rank == 0)
		mt_note("pml ob1 wrote past the receive buffer in %d truncated receive(s) of 4 KiB and more: a known Open MPI ob1 bug, tolerated under ob1 only",
			overruns_tolerated);
	MPI_Comm_free(&comm);
	return mt_finish();
}
