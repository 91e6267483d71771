/*
 * mpi_waitsome.c - MPI_Waitany, MPI_Waitsome, MPI_Testall (and
 * MPI_Testany, MPI_Testsome) over many receives from every other rank.
 *
 * Rank 0 posts 64 receives with distinct tags (sources round-robin over
 * the senders, sizes from 0 B to 100 KB); the senders send them in a
 * shuffled order.  Checked:
 *   - MPI_Waitany returns each index exactly once, with the status of
 *     that receive (source, tag, count) and its data; then MPI_UNDEFINED;
 *   - MPI_Waitsome likewise (indices unique, all covered), then
 *     outcount MPI_UNDEFINED;
 *   - MPI_Testall stays false (30 ms of polling) while one message is
 *     missing, then becomes true once it is sent; MPI_Testsome reports
 *     nothing when nothing is complete; MPI_Testany finds the others;
 *   - arrays of MPI_REQUEST_NULL: MPI_Waitany gives MPI_UNDEFINED,
 *     MPI_Testsome outcount MPI_UNDEFINED, MPI_Testall true;
 *   - sends and receives mixed in one MPI_Waitsome loop (everyone).
 */
#include "mpitest.h"

#define N 64

static MPI_Comm comm, ctl;

static int src_of(int i)
{
	return 1 + i % (mt_size - 1);
}

static int size_of(int i)
{
	return i % 8 == 5 ? 100000 : i % 8 == 2 ? 0 : 10 + i * 3;
}

static uint64_t key(int round, int i)
{
	return (uint64_t)round << 32 | (uint64_t)i;
}

/* Senders: send my messages of this round in shuffled order (except skip). */
static void send_round(int round, uint64_t *rng, int skip)
{
	int mine[N], n = 0;
	MPI_Request r[N];
	char *b[N];

	for (int i = 0; i < N; i++)
		if (src_of(i) == mt_rank && i != skip)
			mine[n++] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = mt_rand(rng) % (i + 1), t = mine[i];

		mine[i] = mine[j];
		mine[j] = t;
	}
	for (int k = 0; k < n; k++) {
		int i = mine[k];

		b[k] = mt_malloc(size_of(i));
		mt_fill(b[k], size_of(i), key(round, i));
		MT_CALL(MPI_Isend(b[k], size_of(i), MPI_BYTE, 0, i, comm,
				  &r[k]));
	}
	MT_CALL(mt_waitall(n, r, MPI_STATUSES_IGNORE, "sends"));
	for (int k = 0; k < n; k++)
		free(b[k]);
}

static void post_all(MPI_Request *r, char **b)
{
	for (int i = 0; i < N; i++) {
		b[i] = mt_malloc(size_of(i));
		MT_CALL(MPI_Irecv(b[i], size_of(i), MPI_BYTE, src_of(i), i,
				  comm, &r[i]));
	}
}

static void check(int round, int i, char *b, const MPI_Status *st,
		  const char *how)
{
	char what[100];

	snprintf(what, sizeof(what), "%s: receive %d (source %d, tag %d)",
		 how, i, src_of(i), i);
	if (st->MPI_SOURCE != src_of(i) || st->MPI_TAG != i ||
	    mt_count(st, MPI_BYTE) != size_of(i))
		mt_fail("%s: status source %d tag %d count %d", what,
			st->MPI_SOURCE, st->MPI_TAG, mt_count(st, MPI_BYTE));
	else
		mt_check_data(b, size_of(i), key(round, i), what);
	free(b);
}

static void waitany(uint64_t *rng)
{
	mt_set_phase("MPI_Waitany");
	if (mt_rank == 0) {
		MPI_Request r[N];
		char *b[N];
		int seen[N] = { 0 }, idx;
		MPI_Status st;

		post_all(r, b);
		MT_CALL(MPI_Barrier(comm));
		for (int k = 0; k < N; k++) {
			MT_CALL(MPI_Waitany(N, r, &idx, &st));
			if (idx < 0 || idx >= N || seen[idx]) {
				mt_fail("MPI_Waitany returned index %d (%s)",
					idx, idx >= 0 && idx < N ?
						     "already returned" :
						     "out of range");
				continue;
			}
			seen[idx] = 1;
			MT_CHECK(r[idx] == MPI_REQUEST_NULL,
				 "MPI_Waitany left request %d set", idx);
			check(1, idx, b[idx], &st, "MPI_Waitany");
		}
		MT_CALL(MPI_Waitany(N, r, &idx, &st));
		MT_CHECK(idx == MPI_UNDEFINED,
			 "MPI_Waitany with all requests done: index %d", idx);
	} else {
		MT_CALL(MPI_Barrier(comm));
		send_round(1, rng, -1);
	}
	MT_CALL(MPI_Barrier(comm));
}

static void waitsome(uint64_t *rng)
{
	mt_set_phase("MPI_Waitsome");
	if (mt_rank == 0) {
		MPI_Request r[N];
		MPI_Status st[N];
		char *b[N];
		int seen[N] = { 0 }, idx[N], out, done = 0;

		post_all(r, b);
		MT_CALL(MPI_Barrier(comm));
		while (done < N) {
			MT_CALL(MPI_Waitsome(N, r, &out, idx, st));
			if (out <= 0 || out == MPI_UNDEFINED) {
				mt_fail("MPI_Waitsome outcount %d with %d pending",
					out, N - done);
				break;
			}
			for (int j = 0; j < out; j++) {
				int i = idx[j];

				if (i < 0 || i >= N || seen[i]) {
					mt_fail("MPI_Waitsome index %d (twice or out of range)",
						i);
					continue;
				}
				seen[i] = 1;
				done++;
				check(2, i, b[i], &st[j], "MPI_Waitsome");
			}
		}
		MT_CALL(MPI_Waitsome(N, r, &out, idx, st));
		MT_CHECK(out == MPI_UNDEFINED,
			 "MPI_Waitsome with all done: outcount %d", out);
	} else {
		MT_CALL(MPI_Barrier(comm));
		send_round(2, rng, -1);
	}
	MT_CALL(MPI_Barrier(comm));
}

static void testall(uint64_t *rng)
{
	int last = N - 1;

	mt_set_phase("MPI_Testall");
	if (mt_rank == 0) {
		MPI_Request r[N];
		MPI_Status st[N];
		char *b[N];
		int f = 0, out = -1, idx[N], go = 1, any;
		double end;

		post_all(r, b);
		MT_CALL(MPI_Barrier(comm));
		/* all but the last arrive: Testall stays false */
		end = mt_now() + 0.03;
		while (mt_now() < end) {
			MT_CALL(MPI_Testall(N, r, &f, st));
			if (f)
				break;
		}
		MT_CHECK(!f, "MPI_Testall true while message %d was not sent",
			 last);
		/* complete all but the last through MPI_Testany */
		for (int k = 0; k < N - 1 && !f; k++) {
			double e2 = mt_now() + MT_HANG_SECONDS;
			int i;
			MPI_Status s1;

			do {
				MT_CALL(MPI_Testany(N, r, &i, &any, &s1));
				if (mt_now() > e2)
					mt_abort("MPI_Testany found nothing");
			} while (!any);
			if (i == last || i < 0 || i >= N) {
				mt_fail("MPI_Testany completed receive %d", i);
				break;
			}
			check(3, i, b[i], &s1, "MPI_Testany");
		}
		MT_CALL(MPI_Testsome(N, r, &out, idx, st));
		MT_CHECK(out == 0,
			 "MPI_Testsome with only the unsent message pending: outcount %d",
			 out);
		MT_CALL(MPI_Send(&go, 1, MPI_INT, src_of(last), 0, ctl));
		end = mt_now() + MT_HANG_SECONDS;
		do {
			MT_CALL(MPI_Testall(N, r, &f, st));
			if (mt_now() > end)
				mt_abort("MPI_Testall never true");
		} while (!f);
		check(3, last, b[last], &st[last], "MPI_Testall");
		/* all null now */
		MT_CALL(MPI_Waitany(N, r, &out, st));
		MT_CHECK(out == MPI_UNDEFINED,
			 "MPI_Waitany of null requests: %d", out);
		MT_CALL(MPI_Testsome(N, r, &out, idx, st));
		MT_CHECK(out == MPI_UNDEFINED,
			 "MPI_Testsome of null requests: %d", out);
		MT_CALL(MPI_Testall(N, r, &f, st));
		MT_CHECK(f, "MPI_Testall of null requests: false");
	} else {
		MT_CALL(MPI_Barrier(comm));
		send_round(3, rng, last);
		if (src_of(last) == mt_rank) {
			int go;
			char *b = mt_malloc(size_of(last));

			MT_CALL(MPI_Recv(&go, 1, MPI_INT, 0, 0, ctl,
					 MPI_STATUS_IGNORE));
			mt_fill(b, size_of(last), key(3, last));
			MT_CALL(MPI_Send(b, size_of(last), MPI_BYTE, 0, last,
					 comm));
			free(b);
		}
	}
	MT_CALL(MPI_Barrier(comm));
}

/* Everyone: sends to all and receives from all, one MPI_Waitsome loop. */
static void mixed(void)
{
	int n = 2 * mt_size, out, idx[128], done = 0;
	MPI_Request r[128];
	MPI_Status st[128];
	char (*sb)[5000] = mt_malloc(mt_size * sizeof(*sb));
	char (*rb)[5000] = mt_malloc(mt_size * sizeof(*rb));

	mt_set_phase("mixed sends and receives");
	for (int p = 0; p < mt_size; p++) {
		MT_CALL(MPI_Irecv(rb[p], 5000, MPI_BYTE, p, 9, comm, &r[p]));
		mt_fill(sb[p], 5000, key(4, mt_rank * 100 + p));
	}
	for (int p = 0; p < mt_size; p++)
		MT_CALL(MPI_Isend(sb[p], 5000, MPI_BYTE, p, 9, comm,
				  &r[mt_size + p]));
	while (done < n) {
		MT_CALL(MPI_Waitsome(n, r, &out, idx, st));
		if (out == MPI_UNDEFINED || out <= 0) {
			mt_fail("MPI_Waitsome outcount %d", out);
			break;
		}
		for (int j = 0; j < out; j++) {
			int i = idx[j];

			done++;
			if (i < mt_size) {
				char what[64];

				snprintf(what, sizeof(what),
					 "mixed MPI_Waitsome: from rank %d", i);
				if (st[j].MPI_SOURCE != i)
					mt_fail("%s: status source %d", what,
						st[j].MPI_SOURCE);
				else
					mt_check_data(rb[i], 5000,
						      key(4, i * 100 + mt_rank),
						      what);
			}
		}
	}
	free(sb);
	free(rb);
	MT_CALL(MPI_Barrier(comm));
}

int main(int argc, char **argv)
{
	uint64_t rng;

	mt_init(&argc, &argv, "mpi_waitsome", 2);
	if (mt_size > 64)
		mt_abort("at most 64 ranks");
	rng = mt_seed() + (uint64_t)mt_rank * 1000003;
	comm = mt_dup(MPI_COMM_WORLD);
	ctl = mt_dup(MPI_COMM_WORLD);
	waitany(&rng);
	mt_checked("MPI_Waitany over %d receives (0 B .. 100 KB, from %d sender(s), sent shuffled): each index once with its status and data, then MPI_UNDEFINED",
		   N, mt_size - 1);
	waitsome(&rng);
	mt_checked("MPI_Waitsome over %d receives: indices unique and complete, statuses and data right, then MPI_UNDEFINED",
		   N);
	testall(&rng);
	mt_checked("MPI_Testall false while one message is unsent, MPI_Testany completes the others, MPI_Testsome reports 0, MPI_Testall true after the last; null arrays: MPI_UNDEFINED / true");
	mixed();
	mt_checked("sends and receives with every rank (5000 B) completed through one MPI_Waitsome loop");
	MPI_Comm_free(&comm);
	MPI_Comm_free(&ctl);
	return mt_finish();
}
