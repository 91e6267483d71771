/*
 * mpi_pvar.c - the component's MPI_T performance variables, read as a
 * tool reads them: through an MPI_T pvar session, before and after known
 * traffic between rank 0 (sender) and rank 1 (the rank measured), over
 * pml cm + mtl tm.  Each counter's delta must equal the traffic exactly:
 *
 *   A. N small and K rendezvous receives pre-posted, then their messages:
 *      all to the card and matched there, K rendezvous read by the card;
 *      the card's list level rises by N + K while they wait, and its
 *      high-water mark reaches it;
 *   B. M small and L rendezvous messages arrive before any receive (a
 *      pre-posted token behind them says they are in): all unexpected,
 *      the communicator's unexpected queue holds M + L, then receives
 *      take them from the queue and software reads the L;
 *   C. P receives on a duplicate of MPI_COMM_WORLD and Q on
 *      MPI_COMM_WORLD that no message matches: each communicator's posted
 *      queue shows its own; then all cancelled;
 *   D. a 100-byte message into a 10-byte receive: truncated.
 * Every mtl_tm_* pvar the component registers is read.  Other counters
 * (software-kept reasons, send cancels, promotions, errors, unexpected
 * messages held or spilled) must not move; syncs at most once per receive put on the card.  Rank 1 prints "check ok: ..." or "check FAILED: ..." per
 * check, then "pvar: N checks, F failed".  MPI_T_finalize comes before
 * MPI_Finalize (Open MPI 4.1 crashes the other way round).
 */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 20
#define K 4
#define M 6
#define L 2
#define P 5
#define Q 2
/* at mtl_tm_offload_thresh (8 KiB): the card's, as BIG is */
#define SMALL 8192
#define BIG 20000
#define TAG_GO 999
#define TAG_TOKEN 998

/* the counters, in the order of mtl_tm_pvar.h and of the statistics
 * line (mtl_tm(7)) */
static const char *const cname[] = {
	"receives", "receives_to_card", "receives_from_unexpected",
	"sw_conflict", "sw_list_full", "sw_ops_busy", "sw_small_buffer",
	"sw_long_buffer", "sw_no_staging", "sw_offload_off",
	"sw_no_tag_matching", "sw_below_threshold", "sw_registration_failed",
	"card_matched", "unexpected", "rndv_card", "rndv_sw", "truncated",
	"recv_cancelled", "send_cancels", "send_cancels_ok", "send_cancels_late", "syncs",
	"promoted", "errors", "unexp_throttled", "unexp_spilled",
};
enum { RECEIVES, TO_CARD, FROM_UQ, SW_BELOW = 11, SW_REG_FAIL,
       CARD_MATCHED, UNEXPECTED, RNDV_CARD, RNDV_SW, TRUNCATED,
       CANCELLED, SC_REQ, SC_OK, SC_LATE, SYNCS, PROMOTED, ERRORS,
       UNEXP_THROTTLED, UNEXP_SPILLED, NC };
_Static_assert(sizeof(cname) / sizeof(cname[0]) == NC, "a name per counter");

/* The mtl_tm_* pvars this program reads (each once, whatever it is bound
 * to): every one the component registers must be among them. */
static const char *seen[64];
static int nseen;

static MPI_T_pvar_session ses;
static MPI_T_pvar_handle hc[NC], h_level, h_hwm, h_conn;
static MPI_T_pvar_handle h_posted[2], h_unexp[2]; /* [0] dup, [1] world */
static int rank, checks, failed;

static void check(int ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	checks++;
	failed += !ok;
	if (rank != 1)
		return;
	printf("check %s: ", ok ? "ok" : "FAILED");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "mpi_pvar: rank %d: %s failed: %d\n", rank, what, rc);
	MPI_Abort(MPI_COMM_WORLD, 2);
}

/* The index of pvar mtl_tm_<name>, checking its class and binding. */
static int pvar_index(const char *name, int want_class, int want_bind)
{
	char full[128], got[128];
	int idx, num, nlen, verb, cls, bind, ro, cont, atomic;
	MPI_Datatype dt;
	MPI_T_enum en;

	snprintf(full, sizeof(full), "mtl_tm_%s", name);
	MPI_T_pvar_get_num(&num);
	for (idx = 0; idx < num; idx++) {
		nlen = sizeof(got);
		if (MPI_T_pvar_get_info(idx, got, &nlen, &verb, &cls, &dt, &en,
					NULL, NULL, &bind, &ro, &cont,
					&atomic) != MPI_SUCCESS ||
		    strcmp(got, full))
			continue;
		check(cls == want_class && bind == want_bind &&
		      dt == MPI_UNSIGNED_LONG_LONG && ro && cont,
		      "%s: class %d bind %d, read-only, continuous, unsigned long long",
		      full, cls, bind);
		return idx;
	}
	fprintf(stderr, "mpi_pvar: rank %d: no pvar %s\n", rank, full);
	MPI_Abort(MPI_COMM_WORLD, 3);
	return -1;
}

static MPI_T_pvar_handle alloc(const char *name, int cls, int bind,
			       MPI_Comm *comm)
{
	MPI_T_pvar_handle h;
	int count, rc, i;

	rc = MPI_T_pvar_handle_alloc(ses, pvar_index(name, cls, bind), comm,
				     &h, &count);
	for (i = 0; i < nseen && strcmp(seen[i], name); i++)
		;
	if (i == nseen && nseen < 64)
		seen[nseen++] = name;
	if (rc != MPI_SUCCESS)
		die(name, rc);
	if (count != 1)
		die("count 1", count);
	return h;
}

static unsigned long long rd(MPI_T_pvar_handle h)
{
	unsigned long long v;
	int rc = MPI_T_pvar_read(ses, h, &v);

	if (rc != MPI_SUCCESS)
		die("MPI_T_pvar_read", rc);
	return v;
}

static void snap(unsigned long long v[NC])
{
	int i;

	for (i = 0; i < NC; i++)
		v[i] = rd(hc[i]);
}

/*
 * Every counter moved by want[] (others by 0).  Syncs depend on when the
 * card saw the unexpected messages, not on the traffic alone: at most one
 * per receive placed on the card (each SYNC confirms entries that may be
 * inactive).
 */
static void deltas(const char *phase, const unsigned long long a[NC],
		   const unsigned long long b[NC], const int want[NC])
{
	int i;

	for (i = 0; i < NC; i++) {
		if (i == SYNCS) {
			check(b[i] - a[i] <= (unsigned long long)want[TO_CARD],
			      "%s: mtl_tm_syncs moved by %llu, at most %d",
			      phase, b[i] - a[i], want[TO_CARD]);
			continue;
		}
		check(b[i] - a[i] == (unsigned long long)want[i],
		      "%s: mtl_tm_%s moved by %llu, want %d", phase, cname[i],
		      b[i] - a[i], want[i]);
	}
}

static int count_mtl_tm_pvars(void)
{
	int num, i, n = 0;

	MPI_T_pvar_get_num(&num);
	for (i = 0; i < num; i++) {
		char name[128];
		int nlen = sizeof(name), verb, cls, bind, ro, cont, atomic;
		MPI_Datatype dt;
		MPI_T_enum en;

		if (MPI_T_pvar_get_info(i, name, &nlen, &verb, &cls, &dt, &en,
					NULL, NULL, &bind, &ro, &cont,
					&atomic) == MPI_SUCCESS &&
		    !strncmp(name, "mtl_tm_", 7))
			n++;
	}
	return n;
}

static void go(MPI_Comm c, int phase)
{
	if (rank == 1)
		MPI_Send(&phase, 1, MPI_INT, 0, TAG_GO, c);
	else
		MPI_Recv(&phase, 1, MPI_INT, 1, TAG_GO, c, MPI_STATUS_IGNORE);
}

static char *sbuf, *rbuf;
static MPI_Request req[64];

static void phase_card(MPI_Comm c, unsigned long long s0[NC])
{
	unsigned long long s1[NC], lvl0, lvl;
	int want[NC] = { 0 }, i;

	if (rank == 1) {
		snap(s0);
		lvl0 = rd(h_level);
		for (i = 0; i < N + K; i++)
			MPI_Irecv(rbuf + (size_t)i * BIG, i < N ? SMALL : BIG,
				  MPI_BYTE, 0, i, c, &req[i]);
		lvl = rd(h_level);
		check(lvl - lvl0 == N + K,
		      "A: mtl_tm_card_entries rose by %llu with %d receives waiting",
		      lvl - lvl0, N + K);
		go(c, 1);
		MPI_Waitall(N + K, req, MPI_STATUSES_IGNORE);
		snap(s1);
		want[RECEIVES] = want[TO_CARD] = want[CARD_MATCHED] = N + K;
		want[RNDV_CARD] = K;
		deltas("A (pre-posted)", s0, s1, want);
		check(rd(h_level) == lvl0, "A: mtl_tm_card_entries back to %llu",
		      lvl0);
		check(rd(h_hwm) >= lvl0 + N + K,
		      "A: mtl_tm_card_entries_hwm %llu >= %llu", rd(h_hwm),
		      lvl0 + N + K);
		memcpy(s0, s1, sizeof(s1));
	} else {
		go(c, 1);
		for (i = 0; i < N + K; i++)
			MPI_Isend(sbuf, i < N ? SMALL : BIG, MPI_BYTE, 1, i, c,
				  &req[i]);
		MPI_Waitall(N + K, req, MPI_STATUSES_IGNORE);
	}
}

static void phase_unexpected(MPI_Comm c, unsigned long long s0[NC])
{
	unsigned long long s1[NC], s2[NC];
	int want[NC] = { 0 }, i, tok;

	if (rank == 1) {
		MPI_Request t;

		MPI_Irecv(&tok, 1, MPI_INT, 0, TAG_TOKEN, c, &t);
		go(c, 2);
		MPI_Wait(&t, MPI_STATUS_IGNORE);
		snap(s1);
		/* the token's receive is below the threshold: matched in
		 * software, its message unexpected at the card */
		want[RECEIVES] = want[SW_BELOW] = 1;
		want[UNEXPECTED] = M + L + 1;
		deltas("B (unexpected)", s0, s1, want);
		check(rd(h_unexp[0]) == M + L && rd(h_unexp[1]) == 0,
		      "B: mtl_tm_unexpected_msgq_length %llu on the duplicate (want %d), %llu on MPI_COMM_WORLD (want 0)",
		      rd(h_unexp[0]), M + L, rd(h_unexp[1]));
		check(rd(h_posted[0]) == 0, "B: nothing posted on the duplicate");
		for (i = 0; i < M + L; i++)
			MPI_Recv(rbuf, BIG, MPI_BYTE, 0, 100 + i, c,
				 MPI_STATUS_IGNORE);
		snap(s2);
		memset(want, 0, sizeof(want));
		want[RECEIVES] = want[FROM_UQ] = M + L;
		want[RNDV_SW] = L;
		deltas("B (received)", s1, s2, want);
		check(rd(h_unexp[0]) == 0, "B: the unexpected queue empty again");
		memcpy(s0, s2, sizeof(s2));
	} else {
		go(c, 2);
		for (i = 0; i < M + L; i++)
			MPI_Isend(sbuf, i < M ? SMALL : BIG, MPI_BYTE, 1,
				  100 + i, c, &req[i]);
		MPI_Send(&i, 1, MPI_INT, 1, TAG_TOKEN, c);
		MPI_Waitall(M + L, req, MPI_STATUSES_IGNORE);
	}
}

static void phase_posted(MPI_Comm c, unsigned long long s0[NC])
{
	unsigned long long s1[NC];
	int want[NC] = { 0 }, i;

	if (rank != 1)
		return;
	for (i = 0; i < P + Q; i++)
		MPI_Irecv(rbuf + (size_t)i * BIG, SMALL, MPI_BYTE, 0, 400,
			  i < P ? c : MPI_COMM_WORLD, &req[i]);
	check(rd(h_posted[0]) == P && rd(h_posted[1]) == Q,
	      "C: mtl_tm_posted_recvq_length %llu on the duplicate (want %d), %llu on MPI_COMM_WORLD (want %d)",
	      rd(h_posted[0]), P, rd(h_posted[1]), Q);
	for (i = 0; i < P + Q; i++)
		MPI_Cancel(&req[i]);
	MPI_Waitall(P + Q, req, MPI_STATUSES_IGNORE);
	check(rd(h_posted[0]) == 0 && rd(h_posted[1]) == 0,
	      "C: both posted queues empty after the cancels");
	snap(s1);
	want[RECEIVES] = want[TO_CARD] = want[CANCELLED] = P + Q;
	deltas("C (cancelled)", s0, s1, want);
	memcpy(s0, s1, sizeof(s1));
}

static void phase_truncate(MPI_Comm c, unsigned long long s0[NC])
{
	unsigned long long s1[NC];
	int want[NC] = { 0 }, rc;

	if (rank == 1) {
		MPI_Request r;
		MPI_Status st;

		MPI_Irecv(rbuf, 10, MPI_BYTE, 0, 500, c, &r);
		go(c, 4);
		rc = MPI_Wait(&r, &st);
		check(rc != MPI_SUCCESS, "D: the short receive fails (%d)", rc);
		snap(s1);
		want[RECEIVES] = want[SW_BELOW] = want[UNEXPECTED] = 1;
		want[TRUNCATED] = 1;
		deltas("D (truncated)", s0, s1, want);
	} else {
		go(c, 4);
		MPI_Send(sbuf, 100, MPI_BYTE, 1, 500, c);
	}
	go(c, 5); /* the sender's next message comes after the reads */
}

/*
 * Every counter since the handles were bound, which was before any MTL
 * traffic, in the order of the statistics line: test_pvar.sh compares
 * them with the line printed at MPI_Finalize (no MTL traffic after this).
 */
static void print_totals(void)
{
	unsigned long long v[NC];
	int i;

	snap(v);
	printf("totals:");
	for (i = 0; i <= ERRORS; i++) /* the line's, up to the errors */
		printf(" %llu", v[i]);
	printf("\n");
}

int main(int argc, char **argv)
{
	unsigned long long s[NC];
	MPI_Comm c, world = MPI_COMM_WORLD;
	int provided, size, n, i;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		fprintf(stderr, "mpi_pvar: run with 2 ranks\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
		die("MPI_T_init_thread", 0);
	sbuf = calloc(1, BIG);
	rbuf = malloc((size_t)(N + K + P + Q) * BIG);
	if (!sbuf || !rbuf)
		die("malloc", 0);

	n = count_mtl_tm_pvars();
	check(n >= 10, "%d mtl_tm_* pvars (at least 10)", n);
	MPI_T_pvar_session_create(&ses);
	for (i = 0; i < NC; i++)
		hc[i] = alloc(cname[i], MPI_T_PVAR_CLASS_COUNTER,
			      MPI_T_BIND_NO_OBJECT, NULL);
	h_level = alloc("card_entries", MPI_T_PVAR_CLASS_LEVEL,
			MPI_T_BIND_NO_OBJECT, NULL);
	h_hwm = alloc("card_entries_hwm", MPI_T_PVAR_CLASS_HIGHWATERMARK,
		      MPI_T_BIND_NO_OBJECT, NULL);
	h_conn = alloc("connected_peers", MPI_T_PVAR_CLASS_LEVEL,
		       MPI_T_BIND_NO_OBJECT, NULL);
	/* the counters count from here: the job's first MTL traffic */
	MPI_Comm_dup(MPI_COMM_WORLD, &c);
	MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
	h_posted[0] = alloc("posted_recvq_length", MPI_T_PVAR_CLASS_SIZE,
			    MPI_T_BIND_MPI_COMM, &c);
	h_posted[1] = alloc("posted_recvq_length", MPI_T_PVAR_CLASS_SIZE,
			    MPI_T_BIND_MPI_COMM, &world);
	h_unexp[0] = alloc("unexpected_msgq_length", MPI_T_PVAR_CLASS_SIZE,
			   MPI_T_BIND_MPI_COMM, &c);
	h_unexp[1] = alloc("unexpected_msgq_length", MPI_T_PVAR_CLASS_SIZE,
			   MPI_T_BIND_MPI_COMM, &world);
	check(nseen == n, "every mtl_tm_* pvar read: %d of the %d registered",
	      nseen, n);
	MPI_Barrier(MPI_COMM_WORLD);

	phase_card(c, s);
	phase_unexpected(c, s);
	phase_posted(c, s);
	phase_truncate(c, s);

	MPI_Barrier(MPI_COMM_WORLD);
	/* connect on first use: the other rank, once, whoever started it */
	check(rd(h_conn) == 1, "mtl_tm_connected_peers %llu after traffic with the one other rank (want 1)",
	      rd(h_conn));
	if (rank == 1) {
		print_totals();
		printf("pvar: %d checks, %d failed\n", checks, failed);
	}
	fflush(stdout);
	MPI_T_pvar_session_free(&ses);
	MPI_T_finalize();
	MPI_Comm_free(&c);
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return 0;
}
