/*
 * mpi_probe.c - MPI_Probe, MPI_Iprobe, MPI_Mprobe, MPI_Improbe with
 * MPI_Mrecv and MPI_Imrecv.
 *
 * Rank 1 sends to rank 0 (the exact checks); in the last part every other
 * rank sends too (MPI_ANY_SOURCE matched probes).  Checked:
 *   - MPI_Iprobe/MPI_Improbe find nothing when nothing was sent;
 *   - probe status: source, tag and count (MPI_Get_count in bytes and in
 *     MPI_INT) for 0 B .. 4 MiB; probing twice finds the same message;
 *     the receive after it gets exactly that message;
 *   - MPI_ANY_TAG probe finds the earliest message; a probe for a later
 *     tag finds that one;
 *   - a message claimed by MPI_Mprobe is gone for everyone else: MPI_Iprobe
 *     and a wildcard MPI_Irecv see the next message, or nothing (the
 *     receive stays pending until another message comes); MPI_Mrecv then
 *     gets the claimed one and the handle becomes MPI_MESSAGE_NULL;
 *   - MPI_Improbe + MPI_Imrecv, eager and rendezvous sizes;
 *   - MPI_PROC_NULL: MPI_Probe status, MPI_Mprobe gives
 *     MPI_MESSAGE_NO_PROC, MPI_Mrecv of it returns at once;
 *   - a message that met a posted receive is not seen by MPI_Iprobe;
 *   - MPI_ANY_SOURCE MPI_Mprobe of messages from all senders, received
 *     later in reverse order: per sender in send order, data as probed.
 */
#include "mpitest.h"

static MPI_Comm comm;

static uint64_t key(int src, int tag, int id)
{
	return (uint64_t)src << 48 ^ (uint64_t)tag << 24 ^ (uint64_t)id;
}

static void isend(int tag, int id, int n, MPI_Request *r, char **b)
{
	*b = mt_malloc(n);
	mt_fill(*b, n, key(mt_rank, tag, id));
	MT_CALL(MPI_Isend(*b, n, MPI_BYTE, 0, tag, comm, r));
}

static void send(int tag, int id, int n)
{
	MPI_Request r;
	char *b;

	isend(tag, id, n, &r, &b);
	MT_CALL(mt_wait(&r, MPI_STATUS_IGNORE, "send"));
	free(b);
}

static int check_status(const MPI_Status *st, int src, int tag, int n,
			const char *what)
{
	if (st->MPI_SOURCE != src || st->MPI_TAG != tag ||
	    mt_count(st, MPI_BYTE) != n) {
		mt_fail("%s: status source %d tag %d count %d, want %d %d %d",
			what, st->MPI_SOURCE, st->MPI_TAG,
			mt_count(st, MPI_BYTE), src, tag, n);
		return 0;
	}
	return 1;
}

static void check_msg(const char *b, const MPI_Status *st, int src, int tag,
		      int id, int n, const char *what)
{
	char w[160];

	snprintf(w, sizeof(w), "%s (message tag %d id %d, %d B)", what, tag,
		 id, n);
	if (check_status(st, src, tag, n, w))
		mt_check_data(b, n, key(src, tag, id), w);
}

static void sync01(void)
{
	MT_CALL(MPI_Barrier(comm));
}

static void nothing(void)
{
	mt_set_phase("nothing sent");
	if (mt_rank == 0) {
		MPI_Message m = MPI_MESSAGE_NULL;
		int f = 1;

		MT_CALL(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &f,
				   MPI_STATUS_IGNORE));
		MT_CHECK(!f, "MPI_Iprobe found a message when none was sent");
		f = 1;
		MT_CALL(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &f, &m,
				    MPI_STATUS_IGNORE));
		MT_CHECK(!f, "MPI_Improbe found a message when none was sent");
	}
	sync01();
	mt_checked("MPI_Iprobe and MPI_Improbe find nothing when nothing was sent");
}

static void probe_sizes(void)
{
	static const int sizes[] = { 0, 1, 100, 4096, 8192, 8193, 65536,
				     1 << 20, 4 << 20 };

	mt_set_phase("probe status");
	for (int k = 0; k < 9; k++) {
		int n = sizes[k];

		if (mt_rank == 1) {
			send(1, k, n);
		} else if (mt_rank == 0) {
			MPI_Status st, st2;
			char *b = mt_malloc(n);
			int f = 0, ni = -2;

			MT_CALL(MPI_Probe(1, 1, comm, &st));
			check_status(&st, 1, 1, n, "MPI_Probe");
			if (n % 4 == 0) {
				MPI_Get_count(&st, MPI_INT, &ni);
				MT_CHECK(ni == n / 4,
					 "MPI_Get_count(MPI_INT) of %d B: %d",
					 n, ni);
			}
			MT_CALL(MPI_Iprobe(1, MPI_ANY_TAG, comm, &f, &st2));
			MT_CHECK(f, "second probe of %d B found nothing", n);
			check_status(&st2, 1, 1, n, "second probe (MPI_Iprobe)");
			MT_CALL(MPI_Recv(b, n, MPI_BYTE, st.MPI_SOURCE,
					 st.MPI_TAG, comm, &st2));
			check_msg(b, &st2, 1, 1, k, n, "receive after probe");
			free(b);
		}
		sync01();
	}
	mt_checked("MPI_Probe/MPI_Iprobe status (source, tag, count in bytes and ints) for 0 B .. 4 MiB; probing twice finds the same message; the receive gets it");
}

static void probe_order(void)
{
	mt_set_phase("probe order");
	if (mt_rank == 1) {
		send(5, 0, 10);
		send(6, 1, 20000);
		send(5, 2, 30);
	} else if (mt_rank == 0) {
		MPI_Status st;
		char b[20000];

		/* wait for all three */
		mt_wait_arrived(1, 6, comm, &st, "message with tag 6");
		mt_wait_arrived(1, 5, comm, &st, "message with tag 5");
		MT_CALL(MPI_Probe(1, MPI_ANY_TAG, comm, &st));
		check_status(&st, 1, 5, 10, "MPI_ANY_TAG probe: the earliest");
		MT_CALL(MPI_Probe(MPI_ANY_SOURCE, 6, comm, &st));
		check_status(&st, 1, 6, 20000, "probe for tag 6");
		MT_CALL(MPI_Recv(b, 20000, MPI_BYTE, 1, 6, comm, &st));
		check_msg(b, &st, 1, 6, 1, 20000, "receive tag 6");
		MT_CALL(MPI_Recv(b, 20000, MPI_BYTE, 1, MPI_ANY_TAG, comm,
				 &st));
		check_msg(b, &st, 1, 5, 0, 10, "MPI_ANY_TAG receive");
		MT_CALL(MPI_Recv(b, 20000, MPI_BYTE, 1, 5, comm, &st));
		check_msg(b, &st, 1, 5, 2, 30, "last receive");
	}
	sync01();
	mt_checked("MPI_ANY_TAG probe finds the earliest message, a tag probe the first with that tag; receives then in order");
}

static void mprobe_claim(void)
{
	static const int sizes[] = { 40, 9000, 1 << 20 };

	for (int k = 0; k < 3; k++) {
		int n = sizes[k];

		mt_set_phase("mprobe claim, %d B", n);
		if (mt_rank == 1) {
			MPI_Request r[3];
			char *b[3];

			isend(20, 1, n, &r[0], &b[0]);
			isend(20, 2, 77, &r[1], &b[1]);
			isend(21, 3, 5, &r[2], &b[2]);
			MT_CALL(mt_waitall(3, r, MPI_STATUSES_IGNORE, "sends"));
			for (int i = 0; i < 3; i++)
				free(b[i]);
		} else if (mt_rank == 0) {
			MPI_Message h;
			MPI_Status st;
			MPI_Request r;
			char *b = mt_malloc(n), b2[100];
			int f = 0;

			mt_wait_arrived(1, 21, comm, &st, "the third message");
			MT_CALL(MPI_Mprobe(1, 20, comm, &h, &st));
			check_status(&st, 1, 20, n, "MPI_Mprobe");
			MT_CALL(MPI_Iprobe(1, 20, comm, &f, &st));
			MT_CHECK(f, "MPI_Iprobe after MPI_Mprobe: nothing (the second message is there)");
			if (f)
				check_status(&st, 1, 20, 77,
					     "MPI_Iprobe after MPI_Mprobe: the second message, not the claimed one");
			MT_CALL(MPI_Irecv(b2, 100, MPI_BYTE, MPI_ANY_SOURCE,
					  MPI_ANY_TAG, comm, &r));
			MT_CALL(mt_wait(&r, &st, "wildcard receive"));
			check_msg(b2, &st, 1, 20, 2, 77,
				  "wildcard receive after MPI_Mprobe: the second message");
			MT_CALL(MPI_Mrecv(b, n, MPI_BYTE, &h, &st));
			check_msg(b, &st, 1, 20, 1, n,
				  "MPI_Mrecv: the claimed message");
			MT_CHECK(h == MPI_MESSAGE_NULL,
				 "MPI_Mrecv left the handle set");
			MT_CALL(MPI_Recv(b2, 100, MPI_BYTE, 1, MPI_ANY_TAG,
					 comm, &st));
			check_msg(b2, &st, 1, 21, 3, 5, "third message");
			free(b);
		}
		sync01();
	}
	mt_checked("MPI_Mprobe claims a message (40 B, 9000 B, 1 MiB): MPI_Iprobe and a wildcard receive see the next one; MPI_Mrecv gets the claimed one; handle set to MPI_MESSAGE_NULL");

	/* the only message claimed: a wildcard receive must wait */
	mt_set_phase("mprobe claim of the only message");
	if (mt_rank == 1) {
		MPI_Request r;
		char *b;
		int go;

		isend(22, 1, 8193, &r, &b);
		MT_CALL(MPI_Recv(&go, 1, MPI_INT, 0, 99, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE));
		send(22, 2, 3);
		MT_CALL(mt_wait(&r, MPI_STATUS_IGNORE, "send"));
		free(b);
	} else if (mt_rank == 0) {
		MPI_Message h;
		MPI_Status st;
		MPI_Request r;
		char b[8193], b2[16];
		int f = 0, go = 1;

		MT_CALL(MPI_Mprobe(1, 22, comm, &h, &st));
		MT_CALL(MPI_Irecv(b2, 16, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
				  comm, &r));
		for (int i = 0; i < 50 && !f; i++) {
			MT_CALL(MPI_Test(&r, &f, &st));
			mt_sleep_ms(1);
		}
		MT_CHECK(!f, "a wildcard receive got the message claimed by MPI_Mprobe (tag %d, %d B)",
			 st.MPI_TAG, mt_count(&st, MPI_BYTE));
		MT_CALL(MPI_Send(&go, 1, MPI_INT, 1, 99, MPI_COMM_WORLD));
		if (!f) {
			MT_CALL(mt_wait(&r, &st, "wildcard receive"));
			check_msg(b2, &st, 1, 22, 2, 3,
				  "wildcard receive: the next message");
		}
		MT_CALL(MPI_Mrecv(b, 8193, MPI_BYTE, &h, &st));
		check_msg(b, &st, 1, 22, 1, 8193, "MPI_Mrecv");
	}
	sync01();
	mt_checked("while MPI_Mprobe holds the only message, a wildcard receive stays pending and gets the next message");
}

static void improbe(void)
{
	static const int sizes[] = { 0, 100, 8192, 8193, 500000 };

	mt_set_phase("improbe/imrecv");
	for (int k = 0; k < 5; k++) {
		int n = sizes[k];

		if (mt_rank == 1) {
			sync01();
			mt_sleep_ms(2);
			send(30, k, n);
		} else if (mt_rank == 0) {
			MPI_Message h = MPI_MESSAGE_NULL;
			MPI_Status st;
			MPI_Request r;
			char *b = mt_malloc(n);
			int f = 0;
			double end;

			sync01();
			end = mt_now() + MT_HANG_SECONDS;
			while (!f) {
				MT_CALL(MPI_Improbe(1, 30, comm, &f, &h, &st));
				if (mt_now() > end)
					mt_abort("MPI_Improbe never found it");
			}
			check_status(&st, 1, 30, n, "MPI_Improbe");
			MT_CALL(MPI_Imrecv(b, n, MPI_BYTE, &h, &r));
			MT_CHECK(h == MPI_MESSAGE_NULL,
				 "MPI_Imrecv left the handle set");
			MT_CALL(mt_wait(&r, &st, "MPI_Imrecv"));
			check_msg(b, &st, 1, 30, k, n, "MPI_Imrecv");
			free(b);
		} else {
			sync01();
		}
		sync01();
	}
	mt_checked("MPI_Improbe polled until the message came, MPI_Imrecv + MPI_Wait: 0 B .. 500 KB, status and data");
}

static void proc_null(void)
{
	MPI_Status st;
	MPI_Message h;
	char b[4];

	mt_set_phase("MPI_PROC_NULL");
	MT_CALL(MPI_Probe(MPI_PROC_NULL, 3, comm, &st));
	MT_CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG &&
			 mt_count(&st, MPI_BYTE) == 0,
		 "MPI_Probe(MPI_PROC_NULL): source %d tag %d count %d",
		 st.MPI_SOURCE, st.MPI_TAG, mt_count(&st, MPI_BYTE));
	MT_CALL(MPI_Mprobe(MPI_PROC_NULL, 3, comm, &h, &st));
	MT_CHECK(h == MPI_MESSAGE_NO_PROC,
		 "MPI_Mprobe(MPI_PROC_NULL) did not give MPI_MESSAGE_NO_PROC");
	MT_CALL(MPI_Mrecv(b, 4, MPI_BYTE, &h, &st));
	MT_CHECK(st.MPI_SOURCE == MPI_PROC_NULL &&
			 mt_count(&st, MPI_BYTE) == 0,
		 "MPI_Mrecv(MPI_MESSAGE_NO_PROC): source %d count %d",
		 st.MPI_SOURCE, mt_count(&st, MPI_BYTE));
	sync01();
	mt_checked("MPI_PROC_NULL: MPI_Probe status, MPI_Mprobe gives MPI_MESSAGE_NO_PROC, MPI_Mrecv of it returns at once");
}

static void posted_not_probed(void)
{
	mt_set_phase("posted receive hides the message");
	if (mt_rank == 1) {
		sync01();
		send(40, 0, 64);
		send(41, 1, 64);
	} else if (mt_rank == 0) {
		MPI_Request r;
		MPI_Status st;
		char b[64];
		int f = 1;

		MT_CALL(MPI_Irecv(b, 64, MPI_BYTE, 1, 40, comm, &r));
		sync01();
		mt_wait_arrived(1, 41, comm, &st, "the second message");
		MT_CALL(MPI_Iprobe(1, 40, comm, &f, &st));
		MT_CHECK(!f, "MPI_Iprobe saw a message that met a posted receive");
		MT_CALL(mt_wait(&r, &st, "posted receive"));
		check_msg(b, &st, 1, 40, 0, 64, "posted receive");
		MT_CALL(MPI_Recv(b, 64, MPI_BYTE, 1, 41, comm, &st));
		check_msg(b, &st, 1, 41, 1, 64, "second message");
	} else {
		sync01();
	}
	sync01();
	mt_checked("a message that met a posted receive is not seen by MPI_Iprobe");
}

static void any_source_mprobe(void)
{
	int per = 4, total = per * (mt_size - 1);

	mt_set_phase("ANY_SOURCE mprobe");
	if (mt_rank != 0) {
		MPI_Request r[4];
		char *b[4];

		for (int i = 0; i < per; i++)
			isend(50 + i % 2, i, i == 2 ? 10000 : 10 * (i + 1),
			      &r[i], &b[i]);
		MT_CALL(mt_waitall(per, r, MPI_STATUSES_IGNORE, "sends"));
		for (int i = 0; i < per; i++)
			free(b[i]);
	} else {
		MPI_Message *h = mt_malloc(total * sizeof(*h));
		MPI_Status *ps = mt_malloc(total * sizeof(*ps));
		int next[64] = { 0 }, ids[256];

		for (int j = 0; j < total; j++) {
			int s;

			MT_CALL(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm,
					   &h[j], &ps[j]));
			s = ps[j].MPI_SOURCE;
			if (s < 1 || s >= mt_size || next[s] >= per)
				mt_abort("MPI_Mprobe: message from %d", s);
			ids[j] = next[s]++;
			check_status(&ps[j], s, 50 + ids[j] % 2,
				     ids[j] == 2 ? 10000 : 10 * (ids[j] + 1),
				     "ANY_SOURCE MPI_Mprobe: per sender in send order");
		}
		for (int j = total - 1; j >= 0; j--) {
			int n = mt_count(&ps[j], MPI_BYTE);
			char *b = mt_malloc(n > 0 ? n : 1);
			MPI_Status st;

			MT_CALL(MPI_Mrecv(b, n, MPI_BYTE, &h[j], &st));
			check_msg(b, &st, ps[j].MPI_SOURCE, 50 + ids[j] % 2,
				  ids[j], n, "MPI_Mrecv in reverse order");
			free(b);
		}
		free(h);
		free(ps);
	}
	sync01();
	mt_checked("MPI_ANY_SOURCE MPI_Mprobe of %d messages from %d sender(s): per sender in send order; MPI_Mrecv in reverse order got what each probe said",
		   total, mt_size - 1);
}

int main(int argc, char **argv)
{
	mt_init(&argc, &argv, "mpi_probe", 2);
	comm = mt_dup(MPI_COMM_WORLD);
	nothing();
	probe_sizes();
	probe_order();
	mprobe_claim();
	improbe();
	proc_null();
	posted_not_probed();
	any_source_mprobe();
	MPI_Comm_free(&comm);
	return mt_finish();
}
