/*
 * mpi_status.c - who writes status.MPI_ERROR.
 *
 * The standard: calls that complete one operation (MPI_Probe, MPI_Iprobe,
 * MPI_Mprobe, MPI_Improbe, MPI_Recv, MPI_Mrecv, MPI_Wait, MPI_Test, ...)
 * report the error as their return value and leave status.MPI_ERROR as
 * the caller set it; only calls that complete several (MPI_Waitall,
 * MPI_Testall, ...) write it, and only when they return MPI_ERR_IN_STATUS.
 * pml cm hands MPI_Probe's and MPI_Improbe's status straight to the MTL,
 * so there the MTL is the one that must not touch it; on the request
 * paths the MTL fills the request's own status, whose MPI_ERROR becomes
 * the return value and, for the multiple-completion calls, the per-
 * request error.
 *
 * Rank 0 sends rank 1 a round of messages per size (0 B, 8 B, 3000 B:
 * more than one packet of a squeezed card, 1 MiB: rendezvous).  Every
 * single-completion call gets a status whose MPI_ERROR holds a value no
 * MPI code has, and must leave it so, with source/tag/count right:
 *   probe + recv, iprobe (also while it finds nothing) + irecv/wait,
 *   mprobe (MPI_ANY_TAG) + mrecv, improbe + imrecv/test, persistent
 *   receive, cancelled receive (and MPI_Test_cancelled true), a truncating
 *   MPI_Recv and MPI_Mrecv (return MPI_ERR_TRUNCATE, MPI_ERROR untouched,
 *   the count the bytes delivered: see truncated()),
 *   the sender's MPI_Wait on its sends (one synchronous).  A status
 * reused from a cancelled receive says "not cancelled" after MPI_Probe.
 * Multiple completion: MPI_Waitall of (whole, truncated) receives returns
 * MPI_ERR_IN_STATUS with MPI_SUCCESS / MPI_ERR_TRUNCATE per request (or
 * MPI_ERR_PENDING for the whole one, still active: see finish_pending);
 * MPI_Testall of (cancelled, truncated) the same, the cancelled one with
 * MPI_SUCCESS; MPI_Waitall of one truncated MPI_Imrecv.
 * A message that ends inside a basic element of the receive type (its
 * signature cannot match) gives MPI_ERR_TYPE over tm, as under MPICH;
 * ob1 accepts it (noted, not failed).
 */
#include <stddef.h>

#include "mpitest.h"

/* No MPI error code or class has this value. */
#define UNSET (-424242)

enum { T_PROBE, T_IPROBE, T_MPROBE, T_IMPROBE, T_TRUNC, T_ALL_OK,
       T_ALL_TRUNC, T_PERSIST, T_CANCEL_TRUNC, T_MTRUNC, T_IMTRUNC,
       T_COUNT };

static MPI_Comm comm;

static uint64_t key(int size, int t)
{
	return (uint64_t)size << 16 ^ (uint64_t)t;
}

static void fresh(MPI_Status *st)
{
	st->MPI_SOURCE = -7;
	st->MPI_TAG = -7;
	st->MPI_ERROR = UNSET;
}

static void untouched(const MPI_Status *st, const char *call, int n)
{
	MT_CHECK(st->MPI_ERROR == UNSET,
		 "%d B: %s set status.MPI_ERROR to %d; a single-completion "
		 "call leaves it as the caller set it", n, call,
		 st->MPI_ERROR);
}

/* Source, tag and count of a status; count -1: not checked. */
static void envelope(const MPI_Status *st, int tag, int count,
		     const char *call, int n)
{
	MT_CHECK(st->MPI_SOURCE == 0 && st->MPI_TAG == tag,
		 "%d B: %s: status source %d tag %d, want 0 %d", n, call,
		 st->MPI_SOURCE, st->MPI_TAG, tag);
	if (count >= 0)
		MT_CHECK(mt_count(st, MPI_BYTE) == count,
			 "%d B: %s: count %d, want %d", n, call,
			 mt_count(st, MPI_BYTE), count);
}

/*
 * A truncated receive's status: source and tag, and a count of the bytes
 * delivered, len.  pml ob1 may count the whole message, n, which MPI
 * leaves open: accepted under ob1 only.
 */
static void truncated(const MPI_Status *st, int tag, int len, const char *call,
		      int n)
{
	int got = mt_count(st, MPI_BYTE);

	envelope(st, tag, -1, call, n);
	MT_CHECK(got == len || (mt_is_ob1() && got == n),
		 "%d B: %s: count %d, want %d (the bytes delivered)", n, call,
		 got, len);
}

static void data(const char *b, int len, int n, int t, const char *call)
{
	char what[96];

	snprintf(what, sizeof(what), "%d B: %s", n, call);
	mt_check_data(b, len, key(n, t), what);
}

static void expect_rc(int rc, int cls, const char *call, int n)
{
	MT_CHECK(mt_class(rc) == cls, "%d B: %s returned %s, want class %d",
		 n, call, mt_errstr(rc), cls);
}

static void sender(int n)
{
	MPI_Request r[T_COUNT];
	char *b[T_COUNT];
	MPI_Status st;

	for (int t = 0; t < T_COUNT; t++) {
		b[t] = mt_malloc(n);
		mt_fill(b[t], n, key(n, t));
		if (t == T_PROBE)
			MT_CALL(MPI_Issend(b[t], n, MPI_BYTE, 1, t, comm, &r[t]));
		else
			MT_CALL(MPI_Isend(b[t], n, MPI_BYTE, 1, t, comm, &r[t]));
	}
	for (int t = 0; t < T_COUNT; t++) {
		fresh(&st);
		MT_CALL(mt_wait(&r[t], &st, "send"));
		untouched(&st, t == T_PROBE ? "MPI_Test (issend)" :
			  "MPI_Test (isend)", n);
		free(b[t]);
	}
}

/* probe / iprobe / mprobe / improbe, each followed by its receive */
static void probes(int n, char *buf)
{
	MPI_Request r;
	MPI_Message m;
	MPI_Status st;
	int flag = 0, cancelled = 1;

	/* a status that says "cancelled" going in must not say so after a
	 * probe: the probe fills the whole status but MPI_ERROR */
	MT_CALL(MPI_Irecv(buf, n, MPI_BYTE, 0, T_COUNT + 9, comm, &r));
	MT_CALL(MPI_Cancel(&r));
	MT_CALL(mt_wait(&r, &st, "cancelled receive"));
	st.MPI_ERROR = UNSET;
	MT_CALL(MPI_Probe(0, T_PROBE, comm, &st));
	untouched(&st, "MPI_Probe", n);
	envelope(&st, T_PROBE, n, "MPI_Probe", n);
	MT_CALL(MPI_Test_cancelled(&st, &cancelled));
	MT_CHECK(!cancelled, "%d B: MPI_Probe's status (reused from a "
		 "cancelled receive) says cancelled", n);
	fresh(&st);
	MT_CALL(MPI_Recv(buf, n, MPI_BYTE, 0, T_PROBE, comm, &st));
	untouched(&st, "MPI_Recv", n);
	envelope(&st, T_PROBE, n, "MPI_Recv", n);
	data(buf, n, n, T_PROBE, "MPI_Recv");

	/* a probe that finds nothing leaves the status alone as well */
	fresh(&st);
	MT_CALL(MPI_Iprobe(0, T_COUNT + 5, comm, &flag, &st));
	MT_CHECK(!flag, "%d B: MPI_Iprobe found a message never sent", n);
	untouched(&st, "MPI_Iprobe (nothing found)", n);
	do {
		fresh(&st);
		MT_CALL(MPI_Iprobe(MPI_ANY_SOURCE, T_IPROBE, comm, &flag, &st));
		untouched(&st, flag ? "MPI_Iprobe" :
			  "MPI_Iprobe (not there yet)", n);
	} while (!flag);
	envelope(&st, T_IPROBE, n, "MPI_Iprobe", n);
	MT_CALL(MPI_Irecv(buf, n, MPI_BYTE, 0, T_IPROBE, comm, &r));
	fresh(&st);
	MT_CALL(MPI_Wait(&r, &st));
	untouched(&st, "MPI_Wait (irecv)", n);
	envelope(&st, T_IPROBE, n, "MPI_Wait (irecv)", n);
	data(buf, n, n, T_IPROBE, "MPI_Irecv");

	/* in send order, so MPI_ANY_TAG finds this one */
	fresh(&st);
	MT_CALL(MPI_Mprobe(0, MPI_ANY_TAG, comm, &m, &st));
	untouched(&st, "MPI_Mprobe", n);
	envelope(&st, T_MPROBE, n, "MPI_Mprobe", n);
	fresh(&st);
	MT_CALL(MPI_Mrecv(buf, n, MPI_BYTE, &m, &st));
	untouched(&st, "MPI_Mrecv", n);
	envelope(&st, T_MPROBE, n, "MPI_Mrecv", n);
	data(buf, n, n, T_MPROBE, "MPI_Mrecv");

	do {
		fresh(&st);
		MT_CALL(MPI_Improbe(0, T_IMPROBE, comm, &flag, &m, &st));
		untouched(&st, flag ? "MPI_Improbe" :
			  "MPI_Improbe (not there yet)", n);
	} while (!flag);
	envelope(&st, T_IMPROBE, n, "MPI_Improbe", n);
	MT_CALL(MPI_Imrecv(buf, n, MPI_BYTE, &m, &r));
	do {
		fresh(&st);
		MT_CALL(MPI_Test(&r, &flag, &st));
		untouched(&st, flag ? "MPI_Test (imrecv)" :
			  "MPI_Test (imrecv, not done)", n);
	} while (!flag);
	envelope(&st, T_IMPROBE, n, "MPI_Test (imrecv)", n);
	data(buf, n, n, T_IMPROBE, "MPI_Imrecv");
}

/*
 * MPI_ERR_PENDING in a status of MPI_Waitall that returned
 * MPI_ERR_IN_STATUS: that request was neither failed nor completed when
 * another one had failed, and is still active (MPI-3.1 3.7.5).  Open MPI
 * returns so at once when a request of the array has already failed as
 * MPI_Waitall starts: here the truncated receive, when its message came
 * first and completed while the whole one was still being read.  The
 * pending ones are waited for here, their result in MPI_ERROR.
 */
static void finish_pending(MPI_Request *r, MPI_Status *sts, int count, int n)
{
	for (int i = 0; i < count; i++) {
		if (sts[i].MPI_ERROR != MPI_ERR_PENDING)
			continue;
		MT_CHECK(r[i] != MPI_REQUEST_NULL,
			 "%d B: MPI_Waitall[%d]: MPI_ERR_PENDING but the "
			 "request was freed", n, i);
		if (r[i] == MPI_REQUEST_NULL)
			continue;
		fresh(&sts[i]);
		sts[i].MPI_ERROR = MPI_Wait(&r[i], &sts[i]);
	}
}

/* truncation: single completion returns it, multiple puts it in status */
static void truncations(int n, char *buf, char *buf2)
{
	int half = n / 2, rc;
	MPI_Request r[2];
	MPI_Status st, sts[2];
	MPI_Message m;

	fresh(&st);
	rc = MPI_Recv(buf, half, MPI_BYTE, 0, T_TRUNC, comm, &st);
	expect_rc(rc, n ? MPI_ERR_TRUNCATE : MPI_SUCCESS, "MPI_Recv", n);
	untouched(&st, "MPI_Recv (truncated)", n);
	truncated(&st, T_TRUNC, half, "MPI_Recv (truncated)", n);
	data(buf, half, n, T_TRUNC, "MPI_Recv (truncated)");

	MT_CALL(MPI_Irecv(buf, n, MPI_BYTE, 0, T_ALL_OK, comm, &r[0]));
	MT_CALL(MPI_Irecv(buf2, half, MPI_BYTE, 0, T_ALL_TRUNC, comm, &r[1]));
	fresh(&sts[0]);
	fresh(&sts[1]);
	rc = MPI_Waitall(2, r, sts);
	if (n) {
		expect_rc(rc, MPI_ERR_IN_STATUS, "MPI_Waitall", n);
		finish_pending(r, sts, 2, n);
		MT_CHECK(sts[0].MPI_ERROR == MPI_SUCCESS,
			 "%d B: MPI_Waitall: whole receive's MPI_ERROR %d, "
			 "want MPI_SUCCESS", n, sts[0].MPI_ERROR);
		MT_CHECK(mt_class(sts[1].MPI_ERROR) == MPI_ERR_TRUNCATE,
			 "%d B: MPI_Waitall: truncated receive's MPI_ERROR "
			 "%d, want MPI_ERR_TRUNCATE", n, sts[1].MPI_ERROR);
	} else {
		expect_rc(rc, MPI_SUCCESS, "MPI_Waitall", n);
	}
	envelope(&sts[0], T_ALL_OK, n, "MPI_Waitall[0]", n);
	truncated(&sts[1], T_ALL_TRUNC, half, "MPI_Waitall[1]", n);
	data(buf, n, n, T_ALL_OK, "MPI_Waitall[0]");
	data(buf2, half, n, T_ALL_TRUNC, "MPI_Waitall[1]");

	fresh(&st);
	MT_CALL(MPI_Mprobe(0, T_MTRUNC, comm, &m, &st));
	fresh(&st);
	rc = MPI_Mrecv(buf, half, MPI_BYTE, &m, &st);
	expect_rc(rc, n ? MPI_ERR_TRUNCATE : MPI_SUCCESS, "MPI_Mrecv", n);
	untouched(&st, "MPI_Mrecv (truncated)", n);
	truncated(&st, T_MTRUNC, half, "MPI_Mrecv (truncated)", n);

	fresh(&st);
	MT_CALL(MPI_Mprobe(0, T_IMTRUNC, comm, &m, &st));
	MT_CALL(MPI_Imrecv(buf, half, MPI_BYTE, &m, &r[0]));
	fresh(&sts[0]);
	rc = MPI_Waitall(1, r, sts);
	expect_rc(rc, n ? MPI_ERR_IN_STATUS : MPI_SUCCESS,
		  "MPI_Waitall (imrecv)", n);
	if (n)
		MT_CHECK(mt_class(sts[0].MPI_ERROR) == MPI_ERR_TRUNCATE,
			 "%d B: MPI_Waitall (imrecv): MPI_ERROR %d, want "
			 "MPI_ERR_TRUNCATE", n, sts[0].MPI_ERROR);
	truncated(&sts[0], T_IMTRUNC, half, "MPI_Waitall (imrecv)", n);
}

/* persistent and cancelled receives */
static void requests(int n, char *buf, char *buf2)
{
	MPI_Request r[2];
	MPI_Status st, sts[2];
	int cancelled = 0, rc;

	MT_CALL(MPI_Recv_init(buf, n, MPI_BYTE, 0, T_PERSIST, comm, &r[0]));
	MT_CALL(MPI_Start(&r[0]));
	fresh(&st);
	MT_CALL(MPI_Wait(&r[0], &st));
	untouched(&st, "MPI_Wait (persistent)", n);
	envelope(&st, T_PERSIST, n, "MPI_Wait (persistent)", n);
	data(buf, n, n, T_PERSIST, "persistent receive");
	MT_CALL(MPI_Request_free(&r[0]));

	/* a tag nobody sends: the cancel must win */
	MT_CALL(MPI_Irecv(buf, n, MPI_BYTE, 0, T_COUNT + 9, comm, &r[0]));
	MT_CALL(MPI_Cancel(&r[0]));
	fresh(&st);
	MT_CALL(mt_wait(&r[0], &st, "cancelled receive"));
	untouched(&st, "MPI_Test (cancelled receive)", n);
	MT_CALL(MPI_Test_cancelled(&st, &cancelled));
	MT_CHECK(cancelled, "%d B: cancelled receive: MPI_Test_cancelled "
		 "false", n);

	MT_CALL(MPI_Irecv(buf, n, MPI_BYTE, 0, T_COUNT + 9, comm, &r[0]));
	MT_CALL(MPI_Irecv(buf2, n / 2, MPI_BYTE, 0, T_CANCEL_TRUNC, comm,
			  &r[1]));
	MT_CALL(MPI_Cancel(&r[0]));
	fresh(&sts[0]);
	fresh(&sts[1]);
	rc = mt_waitall(2, r, sts, "cancelled + truncated");
	cancelled = 0;
	MT_CALL(MPI_Test_cancelled(&sts[0], &cancelled));
	MT_CHECK(cancelled, "%d B: MPI_Testall: cancelled receive not "
		 "cancelled", n);
	if (n) {
		expect_rc(rc, MPI_ERR_IN_STATUS, "MPI_Testall", n);
		MT_CHECK(sts[0].MPI_ERROR == MPI_SUCCESS,
			 "%d B: MPI_Testall: cancelled receive's MPI_ERROR %d,"
			 " want MPI_SUCCESS", n, sts[0].MPI_ERROR);
		MT_CHECK(mt_class(sts[1].MPI_ERROR) == MPI_ERR_TRUNCATE,
			 "%d B: MPI_Testall: truncated receive's MPI_ERROR %d,"
			 " want MPI_ERR_TRUNCATE", n, sts[1].MPI_ERROR);
	} else {
		expect_rc(rc, MPI_SUCCESS, "MPI_Testall", n);
	}
	truncated(&sts[1], T_CANCEL_TRUNC, n / 2, "MPI_Testall[1]", n);
}

/*
 * A message ending inside an MPI_INT of the receive type: MPI_ERR_TYPE
 * over tm (single completion: return value; MPI_Waitall: in status);
 * whole ints are fine.  pml ob1 delivers the half element silently: a
 * note there, not a failure.  n_int ints plus 3 bytes; eager and
 * rendezvous.
 */
static void partial(int n_int)
{
	int n = n_int * 4 + 3, rc, want;
	char *b = mt_malloc(n + 8);
	MPI_Request r;
	MPI_Status st;

	want = mt_is_ob1() ? MPI_SUCCESS : MPI_ERR_TYPE;
	if (mt_rank == 0) {
		mt_fill(b, n, key(n, 100));
		MT_CALL(MPI_Send(b, n, MPI_BYTE, 1, 100, comm));
		MT_CALL(MPI_Send(b, n, MPI_BYTE, 1, 101, comm));
		MT_CALL(MPI_Send(b, n - 3, MPI_BYTE, 1, 102, comm));
	} else if (mt_rank == 1) {
		fresh(&st);
		rc = MPI_Recv(b, n_int + 2, MPI_INT, 0, 100, comm, &st);
		if (mt_is_ob1() && rc == MPI_SUCCESS)
			mt_note("pml ob1 accepts %d B into MPI_INT (half an "
				"element)", n);
		else
			expect_rc(rc, want, "MPI_Recv (partial MPI_INT)", n);
		untouched(&st, "MPI_Recv (partial MPI_INT)", n);
		envelope(&st, 100, n, "MPI_Recv (partial MPI_INT)", n);
		data(b, n, n, 100, "MPI_Recv (partial MPI_INT)");

		MT_CALL(MPI_Irecv(b, n_int + 2, MPI_INT, 0, 101, comm, &r));
		fresh(&st);
		rc = MPI_Waitall(1, &r, &st);
		if (!(mt_is_ob1() && rc == MPI_SUCCESS)) {
			expect_rc(rc, MPI_ERR_IN_STATUS,
				  "MPI_Waitall (partial MPI_INT)", n);
			MT_CHECK(mt_class(st.MPI_ERROR) == MPI_ERR_TYPE,
				 "%d B: MPI_Waitall (partial MPI_INT): "
				 "MPI_ERROR %d, want MPI_ERR_TYPE", n,
				 st.MPI_ERROR);
		}

		fresh(&st);
		MT_CALL(MPI_Recv(b, n_int + 2, MPI_INT, 0, 102, comm, &st));
		untouched(&st, "MPI_Recv (whole MPI_INTs)", n - 3);
		MT_CHECK(mt_count(&st, MPI_INT) == n_int,
			 "%d B: MPI_Get_count(MPI_INT) %d, want %d", n - 3,
			 mt_count(&st, MPI_INT), n_int);
	}
	free(b);
	MT_CALL(MPI_Barrier(comm));
}

/*
 * A message shorter than one instance of a large derived receive type is
 * legal (its signature is a prefix); it must arrive whole with no error.
 * The type mixes MPI_INT and MPI_DOUBLE and has a loop per block, so that
 * anything walking its description per receive shows (an early version of
 * the partial-element check overflowed the stack on such a type).
 */
static void short_of_big_type(void)
{
	enum { NBLK = 400000 };
	struct pair { int i; double d; } in = { 1234567, 2.5 }, *out;
	int blk[2] = { 1, 1 }, *lens = mt_malloc(NBLK * sizeof(int)), n = -2;
	MPI_Aint disp[2] = { offsetof(struct pair, i),
			     offsetof(struct pair, d) };
	MPI_Aint *at = mt_malloc(NBLK * sizeof(MPI_Aint));
	MPI_Datatype types[2] = { MPI_INT, MPI_DOUBLE }, pair, big;
	MPI_Status st;

	MT_CALL(MPI_Type_create_struct(2, blk, disp, types, &pair));
	MT_CALL(MPI_Type_commit(&pair));
	if (mt_rank == 0) {
		MT_CALL(MPI_Send(&in, 1, pair, 1, 200, comm));
	} else if (mt_rank == 1) {
		for (int k = 0; k < NBLK; k++) {
			lens[k] = 2;
			at[k] = (MPI_Aint)(k * 3 * sizeof(struct pair));
		}
		MT_CALL(MPI_Type_create_hindexed(NBLK, lens, at, pair, &big));
		MT_CALL(MPI_Type_commit(&big));
		out = mt_malloc(2 * sizeof(struct pair));
		memset(out, 0, 2 * sizeof(struct pair));
		fresh(&st);
		MT_CALL(MPI_Recv(out, 1, big, 0, 200, comm, &st));
		untouched(&st, "MPI_Recv (short of one big type)", 12);
		/* not MPI_Get_elements: Open MPI 4.1's walks the type
		 * with that per-loop alloca and crashes */
		n = mt_count(&st, MPI_BYTE);
		MT_CHECK(n == 12 && out[0].i == in.i && out[0].d == in.d,
			 "short of one big type: %d B, got (%d, %g), want "
			 "12 B (%d, %g)", n, out[0].i, out[0].d, in.i, in.d);
		MT_CALL(MPI_Type_free(&big));
		free(out);
	}
	MT_CALL(MPI_Type_free(&pair));
	free(lens);
	free(at);
	MT_CALL(MPI_Barrier(comm));
}

int main(int argc, char **argv)
{
	static const int sizes[] = { 0, 8, 3000, 1 << 20 };

	mt_init(&argc, &argv, "mpi_status", 2);
	comm = mt_dup(MPI_COMM_WORLD);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int n = sizes[i];

		mt_set_phase("%d B", n);
		if (mt_rank == 0) {
			sender(n);
		} else if (mt_rank == 1) {
			char *buf = mt_malloc(n), *buf2 = mt_malloc(n);

			probes(n, buf);
			truncations(n, buf, buf2);
			requests(n, buf, buf2);
			free(buf);
			free(buf2);
		}
		MT_CALL(MPI_Barrier(comm));
	}
	mt_set_phase("partial element");
	partial(0);
	partial(2);
	partial(1 << 18);
	mt_set_phase("short of one big type");
	short_of_big_type();
	mt_checked("a message shorter than one instance of a %d-block "
		   "derived type (MPI_INT + MPI_DOUBLE): whole, no error", 400000);
	mt_checked("partial MPI_INT: MPI_ERR_TYPE (returned, or in status "
		   "from MPI_Waitall) but over ob1; 3 B, 11 B, 1 MiB + 3 B");
	mt_checked("status.MPI_ERROR left alone by probe, iprobe, mprobe, "
		   "improbe, recv, mrecv, wait, test (receives, sends, "
		   "persistent, cancelled, truncated); set per request by "
		   "waitall/testall with MPI_ERR_IN_STATUS; sizes 0 B - 1 MiB");
	MT_CALL(MPI_Comm_free(&comm));
	return mt_finish();
}
