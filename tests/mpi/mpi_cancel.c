/*
 * mpi_cancel.c - MPI_Cancel regression tests (ranks 0 and 1; others idle).
 *
 * MPI: "either the cancellation succeeds, or the communication succeeds,
 * but not both"; a cancelled receive must not consume a message; a send
 * that was cancelled must not be received; MPI_Wait on a cancelled
 * request returns.  Checked here:
 *
 *   1 unmatched receive (specific source and tag): cancelled, and the next
 *     message with that tag goes to the next receive;
 *   2 unmatched wildcard receives (ANY_SOURCE, ANY_TAG, both): cancelled,
 *     no message lost to them;
 *   3 matched and completed receive (MPI_Request_get_status said done):
 *     MPI_Cancel does nothing, MPI_Test_cancelled false, data intact;
 *   4 receive posted after MPI_Iprobe found its message (it matches at
 *     once): not cancelled, data intact; eager and rendezvous sizes;
 *   5 race: a receive posted and cancelled at once while its message is
 *     on the way, many times: each time either cancelled (then the
 *     message is received by the next receive) or completed with the data
 *     (then nothing is left over); no message lost or duplicated;
 *   6 post/cancel loop: 2000 receives posted and cancelled on tags nobody
 *     uses, interleaved with real traffic that must keep flowing in order;
 *   7 send cancel: MPI_Isend before the receiver posts, MPI_Cancel: if
 *     MPI_Test_cancelled says true the message must never be received; if
 *     false it must be received, exactly once (ob1 never cancels sends);
 *     eager and rendezvous sizes.
 */
#include "mpitest.h"

static MPI_Comm comm, ctl;

static int cancelled(MPI_Status *st)
{
	int f = -1;

	MT_CALL(MPI_Test_cancelled(st, &f));
	return f;
}

/* A message from 1 to 0 with tag and a pattern of (tag, id). */
static void send_msg(int tag, int id, int n)
{
	char *b = mt_malloc(n);

	mt_fill(b, n, (uint64_t)tag << 32 | (uint64_t)id);
	MT_CALL(MPI_Send(b, n, MPI_BYTE, 0, tag, comm));
	free(b);
}

static void check_msg(const char *b, MPI_Status *st, int tag, int id, int n,
		      const char *what)
{
	char w[200];

	snprintf(w, sizeof(w), "%s: message tag %d id %d (%d B)", what, tag,
		 id, n);
	if (st->MPI_SOURCE != 1 || st->MPI_TAG != tag ||
	    mt_count(st, MPI_BYTE) != n) {
		mt_fail("%s: got source %d tag %d %d B", w, st->MPI_SOURCE,
			st->MPI_TAG, mt_count(st, MPI_BYTE));
		return;
	}
	mt_check_data(b, n, (uint64_t)tag << 32 | (uint64_t)id, w);
}

static void sync01(void)
{
	MT_CALL(MPI_Barrier(ctl));
}

/* 1, 2: unmatched receives */
static void unmatched(void)
{
	static const struct {
		int src, tag;
		const char *name;
	} specs[] = {
		{ 1, 7, "specific (1, 7)" },
		{ MPI_ANY_SOURCE, 7, "(ANY_SOURCE, 7)" },
		{ 1, MPI_ANY_TAG, "(1, ANY_TAG)" },
		{ MPI_ANY_SOURCE, MPI_ANY_TAG, "(ANY_SOURCE, ANY_TAG)" },
	};
	char buf[64];

	for (int k = 0; k < 4; k++) {
		mt_set_phase("1/2 unmatched receive %s", specs[k].name);
		if (mt_rank == 0) {
			MPI_Request r;
			MPI_Status st;
			char what[120];

			snprintf(what, sizeof(what),
				 "MPI_Wait on cancelled receive %s",
				 specs[k].name);
			MT_CALL(MPI_Irecv(buf, 64, MPI_BYTE, specs[k].src,
					  specs[k].tag, comm, &r));
			MT_CALL(MPI_Cancel(&r));
			MT_CALL(mt_wait(&r, &st, what));
			MT_CHECK(cancelled(&st) == 1,
				 "unmatched receive %s: MPI_Test_cancelled false",
				 specs[k].name);
			sync01();
			/* the message sent now goes to the next receive */
			MT_CALL(MPI_Recv(buf, 64, MPI_BYTE, 1, 7, comm, &st));
			check_msg(buf, &st, 7, k, 64,
				  "receive after the cancelled one");
		} else if (mt_rank == 1) {
			sync01();
			send_msg(7, k, 64);
		} else {
			sync01();
		}
	}
	mt_checked("unmatched receives (specific, ANY_SOURCE, ANY_TAG, both) cancelled, MPI_Test_cancelled true; the next message went to the next receive");
}

/* 3: matched and completed */
static void matched_complete(void)
{
	static const int sizes[] = { 0, 100, 8192, 65536, 1 << 20 };

	mt_set_phase("3 matched receive");
	for (int k = 0; k < 5; k++) {
		int n = sizes[k];

		if (mt_rank == 0) {
			char *b = mt_malloc(n);
			MPI_Request r;
			MPI_Status st;
			int f = 0;
			double end = mt_now() + MT_HANG_SECONDS;

			MT_CALL(MPI_Irecv(b, n, MPI_BYTE, 1, 8, comm, &r));
			sync01();
			do {
				MT_CALL(MPI_Request_get_status(r, &f, &st));
				if (mt_now() > end)
					mt_abort("receive of %d B never completed",
						 n);
			} while (!f);
			MT_CALL(MPI_Cancel(&r));
			MT_CALL(mt_wait(&r, &st, "wait after cancel"));
			MT_CHECK(cancelled(&st) == 0,
				 "completed receive of %d B: MPI_Test_cancelled true",
				 n);
			check_msg(b, &st, 8, k, n, "completed receive");
			free(b);
		} else if (mt_rank == 1) {
			sync01();
			send_msg(8, k, n);
		} else {
			sync01();
		}
	}
	mt_checked("matched and completed receives (0 B .. 1 MiB) then MPI_Cancel: MPI_Test_cancelled false, data intact");
}

/* 4: posted after probe */
static void after_probe(void)
{
	static const int sizes[] = { 0, 64, 4096, 8193, 300000 };

	mt_set_phase("4 receive after probe");
	for (int k = 0; k < 5; k++) {
		int n = sizes[k];

		if (mt_rank == 0) {
			char *b = mt_malloc(n);
			MPI_Request r;
			MPI_Status st;

			mt_wait_arrived(1, 9, comm, &st, "probe");
			MT_CALL(MPI_Irecv(b, n, MPI_BYTE, 1, 9, comm, &r));
			MT_CALL(MPI_Cancel(&r));
			MT_CALL(mt_wait(&r, &st, "wait after cancel"));
			if (cancelled(&st)) {
				mt_fail("receive of %d B posted after MPI_Iprobe found its message: cancelled (it had a message to match)",
					n);
				/* the message must still be there */
				MT_CALL(MPI_Recv(b, n, MPI_BYTE, 1, 9, comm,
						 &st));
			}
			check_msg(b, &st, 9, k, n, "receive after probe");
			free(b);
			sync01();
		} else if (mt_rank == 1) {
			send_msg(9, k, n);
			sync01();
		} else {
			sync01();
		}
	}
	mt_checked("receives posted after MPI_Iprobe found the message (0 B .. 300 KB), cancelled at once: not cancelled, data intact");
}

/* 5: race between a message and the cancel of its receive */
static void race(int iters)
{
	static const int sizes[] = { 8, 1000, 8192, 20000 };
	int nc = 0, nd = 0;

	mt_set_phase("5 cancel race");
	for (int i = 0; i < iters; i++) {
		int n = sizes[i % 4];

		if (mt_rank == 0) {
			char *b = mt_malloc(n);
			MPI_Request r;
			MPI_Status st;

			MT_CALL(MPI_Irecv(b, n, MPI_BYTE, 1, 10, comm, &r));
			if (i % 3 == 1)
				mt_progress_ms(comm, 1);
			MT_CALL(MPI_Cancel(&r));
			MT_CALL(mt_wait(&r, &st, "wait after cancel"));
			if (cancelled(&st)) {
				nc++;
				MT_CALL(MPI_Recv(b, n, MPI_BYTE, 1, 10, comm,
						 &st));
			} else {
				nd++;
			}
			check_msg(b, &st, 10, i, n,
				  "cancel race: the message");
			free(b);
			sync01();
		} else if (mt_rank == 1) {
			send_msg(10, i, n);
			sync01();
		} else {
			sync01();
		}
	}
	/* nothing may be left over */
	if (mt_rank == 0) {
		int f = 1;

		mt_progress_ms(comm, 20);
		MT_CALL(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &f,
				   MPI_STATUS_IGNORE));
		MT_CHECK(!f, "cancel race: a message is left over (duplicated?)");
	}
	MT_CALL(MPI_Bcast(&nc, 1, MPI_INT, 0, MPI_COMM_WORLD));
	MT_CALL(MPI_Bcast(&nd, 1, MPI_INT, 0, MPI_COMM_WORLD));
	mt_checked("%d receives cancelled while their message was on the way: %d cancelled (message then received by the next receive), %d completed with the data; none lost or duplicated",
		   iters, nc, nd);
}

/* 6: post/cancel loop interleaved with traffic */
static void loop(int iters)
{
	mt_set_phase("6 post/cancel loop");
	if (mt_rank == 0) {
		char buf[256], junk[64];
		int got = 0;

		for (int i = 0; i < iters; i++) {
			MPI_Request r[3];
			MPI_Status st;

			/* 64 B: large enough to go to a card's list */
			MT_CALL(MPI_Irecv(junk, 64, MPI_BYTE, 1, 1000 + i % 50,
					  comm, &r[0]));
			MT_CALL(MPI_Irecv(junk, 64, MPI_BYTE, MPI_ANY_SOURCE,
					  2000, comm, &r[1]));
			MT_CALL(MPI_Cancel(&r[i % 2]));
			MT_CALL(mt_wait(&r[i % 2], &st, "cancelled receive"));
			MT_CHECK(cancelled(&st) == 1,
				 "loop %d: unmatched receive not cancelled", i);
			MT_CALL(MPI_Cancel(&r[1 - i % 2]));
			MT_CALL(mt_wait(&r[1 - i % 2], &st,
					"cancelled receive"));
			MT_CHECK(cancelled(&st) == 1,
				 "loop %d: unmatched receive not cancelled", i);
			if (i % 10 == 0) {
				MT_CALL(MPI_Recv(buf, 256, MPI_BYTE, 1, 11,
						 comm, &st));
				check_msg(buf, &st, 11, got, 100 + got % 100,
					  "traffic between cancels");
				got++;
			}
		}
	} else if (mt_rank == 1) {
		for (int i = 0; i < iters / 10; i++)
			send_msg(11, i, 100 + i % 100);
	}
	sync01();
	mt_checked("%d x 2 unmatched receives (specific and ANY_SOURCE) posted and cancelled, %d messages in order in between",
		   iters, iters / 10);
}

/* 7: send cancel */
static void send_cancel(void)
{
	static const int sizes[] = { 0, 16, 4096, 8193, 100000, 1 << 20 };
	int ncanc = 0, nrecv = 0, slow = 0;

	mt_set_phase("7 send cancel");
	for (int k = 0; k < 12; k++) {
		int n = sizes[k % 6], flag = -1;

		if (mt_rank == 1) {
			char *b = mt_malloc(n);
			MPI_Request r;
			MPI_Status st;
			double end;
			int f = 0;

			mt_fill(b, n, (uint64_t)12 << 32 | (uint64_t)k);
			MT_CALL(MPI_Isend(b, n, MPI_BYTE, 0, 12, comm, &r));
			if (k >= 6)
				mt_progress_ms(comm, 5);
			MT_CALL(MPI_Cancel(&r));
			/*
			 * MPI_Wait after MPI_Cancel must be local.  ob1 never
			 * cancels, so its rendezvous sends would wait for the
			 * receiver: give up after 0.1 s.  tm settles every
			 * cancel with the receiver's progress alone (rank 0
			 * is blocked in MPI_Recv on ctl): wait for it, with a
			 * bound generous enough for a loaded machine, since
			 * a cancel that succeeds after the receiver was told
			 * "not cancelled" would leave it waiting for nothing.
			 */
			end = mt_now() + (mt_is_ob1() ? 0.1 : 30.0);
			do {
				MT_CALL(MPI_Test(&r, &f, &st));
			} while (!f && mt_now() < end);
			if (f) {
				flag = cancelled(&st);
				MT_CALL(MPI_Send(&flag, 1, MPI_INT, 0, 0, ctl));
			} else {
				/* not cancelled, waits for the receiver */
				flag = 2;
				MT_CALL(MPI_Send(&flag, 1, MPI_INT, 0, 0, ctl));
				MT_CALL(mt_wait(&r, &st, "send after cancel"));
				MT_CHECK(cancelled(&st) == 0,
					 "send of %d B: MPI_Wait waited for the receiver, then MPI_Test_cancelled said true",
					 n);
			}
			/* a marker follows: what the receiver must see next */
			send_msg(12, 100 + k, 16);
			free(b);
		} else if (mt_rank == 0) {
			char *b = mt_malloc(n > 16 ? n : 16);
			MPI_Status st;

			MT_CALL(MPI_Recv(&flag, 1, MPI_INT, 1, 0, ctl,
					 MPI_STATUS_IGNORE));
			if (flag == 1) {
				ncanc++;
			} else {
				slow += flag == 2;
				nrecv++;
				MT_CALL(MPI_Recv(b, n, MPI_BYTE, 1, 12, comm,
						 &st));
				check_msg(b, &st, 12, k, n,
					  "send not cancelled: its message");
			}
			MT_CALL(MPI_Recv(b, 16, MPI_BYTE, 1, 12, comm, &st));
			check_msg(b, &st, 12, 100 + k, 16,
				  flag == 1 ? "after a cancelled send: the next message (the cancelled one must not arrive)" :
					      "marker after the message");
			free(b);
		}
		sync01();
	}
	if (mt_rank == 0) {
		int f = 1;

		mt_progress_ms(comm, 20);
		MT_CALL(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &f,
				   MPI_STATUS_IGNORE));
		MT_CHECK(!f, "send cancel: a message is left over (a cancelled send delivered?)");
		if (slow)
			mt_note("%d cancelled rendezvous send(s) not cancelled and still waiting for the receiver after 0.1 s (MPI says MPI_Wait after MPI_Cancel is local; this pml/mtl%s%s does not cancel sends, as Open MPI's ob1 does not): tolerated",
				slow, *mt_config() ? " = " : "", mt_config());
	}
	MT_CALL(MPI_Bcast(&ncanc, 1, MPI_INT, 0, MPI_COMM_WORLD));
	MT_CALL(MPI_Bcast(&nrecv, 1, MPI_INT, 0, MPI_COMM_WORLD));
	mt_checked("12 sends cancelled before the receive was posted (0 B .. 1 MiB): %d cancelled and never received, %d not cancelled and received exactly once",
		   ncanc, nrecv);
}

int main(int argc, char **argv)
{
	mt_init(&argc, &argv, "mpi_cancel", 2);
	comm = mt_dup(MPI_COMM_WORLD);
	ctl = mt_dup(MPI_COMM_WORLD);

	unmatched();
	matched_complete();
	after_probe();
	race(200);
	loop(2000);
	send_cancel();

	MPI_Comm_free(&comm);
	MPI_Comm_free(&ctl);
	return mt_finish();
}
