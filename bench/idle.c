/*
 * idle.c - what one progress call that finds nothing costs, as a function
 * of the number of connected peers (np ranks on one node, oversubscribed).
 *
 *   mpirun -np P bench_idle [-k KIND] [-n CALLS] [-m MSGS] [-t MS]
 *
 * Every rank first exchanges MSGS (default 32) 8 B messages with every
 * other rank, so each transport holds whatever it keeps per active peer
 * (ob1's vader sets up a fast box for a peer after 16 messages from it;
 * mtl tm connects a QP pair on first contact or at start-up).  Then rank 0
 * makes idle calls of one KIND:
 *   probe      MPI_Iprobe(MPI_ANY_SOURCE, a tag nobody sends), nothing
 *              posted (default)
 *   test-any   MPI_Test on a posted MPI_ANY_SOURCE receive of that tag
 *   test-peer  MPI_Test on a posted receive of that tag naming rank 1
 * Without -t it calls idle_loop() twice, with CALLS and 2*CALLS calls,
 * and prints "bench=idle kind=K np=P calls=N": bench/idle.sh runs rank 0
 * under callgrind --toggle-collect=idle_loop --dump-after=idle_loop and
 * takes the difference of the two dumps per call (instructions: exact).
 * With -t MS it times 5 batches of MS/5 ms each after a calibration and
 * prints "... nsec=MEDIAN min= max=" per call (timings: ratios only).
 * Meanwhile the other ranks test for rank 0's release message with a 1 ms
 * nap between tests, so they leave the CPUs to rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TAG_WARM	1
#define TAG_RELEASE	2
#define TAG_NEVER	30000	/* nobody sends it; below the minimal MPI_TAG_UB */
#define BATCHES		5

enum kind { K_PROBE, K_TEST_ANY, K_TEST_PEER };
static const char *const kind_name[] = { "probe", "test-any", "test-peer" };

struct opts {
	enum kind kind;
	long calls;
	int msgs;
	double ms;	/* 0: instruction mode */
};

void idle_loop(enum kind kind, long n, MPI_Request *req);

/* The measured calls, a function of its own for callgrind. */
__attribute__((noinline)) void idle_loop(enum kind kind, long n,
					 MPI_Request *req)
{
	int flag = 0;

	for (long i = 0; i < n && !flag; i++) {
		if (kind == K_PROBE)
			MPI_Iprobe(MPI_ANY_SOURCE, TAG_NEVER, MPI_COMM_WORLD,
				   &flag, MPI_STATUS_IGNORE);
		else
			MPI_Test(req, &flag, MPI_STATUS_IGNORE);
	}
	if (flag) {
		fprintf(stderr, "bench_idle: an idle call found a message\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

static void usage_exit(int rank)
{
	if (rank == 0)
		fprintf(stderr, "usage: mpirun -np P bench_idle [-k probe|test-any|test-peer]"
			" [-n CALLS] [-m MSGS] [-t MS]\n");
	MPI_Finalize();
	exit(2);
}

static void parse(int argc, char **argv, int rank, struct opts *o)
{
	int c;

	while ((c = getopt(argc, argv, "k:n:m:t:")) != -1) {
		switch (c) {
		case 'k':
			if (!strcmp(optarg, "probe")) o->kind = K_PROBE;
			else if (!strcmp(optarg, "test-any")) o->kind = K_TEST_ANY;
			else if (!strcmp(optarg, "test-peer")) o->kind = K_TEST_PEER;
			else usage_exit(rank);
			break;
		case 'n': o->calls = atol(optarg); break;
		case 'm': o->msgs = atoi(optarg); break;
		case 't': o->ms = atof(optarg); break;
		default: usage_exit(rank);
		}
	}
	if (optind != argc || o->calls < 1 || o->msgs < 1 || o->ms < 0)
		usage_exit(rank);
}

/* MSGS rounds of one 8 B message to and from every other rank. */
static void warm_up(int rank, int np, int msgs)
{
	MPI_Request *r = malloc(2 * (size_t)np * sizeof(*r));
	char *rb = malloc((size_t)np * 8), sb[8] = { 0 };

	if (!r || !rb) {
		fprintf(stderr, "bench_idle: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (int m = 0; m < msgs; m++) {
		int n = 0;

		for (int p = 0; p < np; p++)
			if (p != rank)
				MPI_Irecv(rb + 8 * p, 8, MPI_BYTE, p, TAG_WARM,
					  MPI_COMM_WORLD, &r[n++]);
		for (int p = 0; p < np; p++)
			if (p != rank)
				MPI_Isend(sb, 8, MPI_BYTE, p, TAG_WARM,
					  MPI_COMM_WORLD, &r[n++]);
		MPI_Waitall(n, r, MPI_STATUSES_IGNORE);
	}
	free(r);
	free(rb);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* ns per call: calibrated to fill a batch, median of BATCHES batches. */
static void timed(const struct opts *o, MPI_Request *req, int np)
{
	double batch = o->ms / 1e3 / BATCHES, t, ns[BATCHES];
	long n = 1000;

	for (;;) {
		t = MPI_Wtime();
		idle_loop(o->kind, n, req);
		t = MPI_Wtime() - t;
		if (t >= batch / 2 || n > (1L << 40))
			break;
		n *= t > 0 ? (batch / t > 16 ? 16 : 2) : 16;
	}
	n = (long)(n * batch / t) + 1;
	for (int b = 0; b < BATCHES; b++) {
		t = MPI_Wtime();
		idle_loop(o->kind, n, req);
		ns[b] = (MPI_Wtime() - t) * 1e9 / n;
	}
	qsort(ns, BATCHES, sizeof(ns[0]), cmp_double);
	printf("bench=idle kind=%s np=%d calls=%ld nsec=%.2f min=%.2f max=%.2f "
	       "batches=%d\n", kind_name[o->kind], np, n, ns[BATCHES / 2],
	       ns[0], ns[BATCHES - 1], BATCHES);
}

/* Rank 0's part: the idle calls, then the release of every other rank. */
static void measure(const struct opts *o, int np)
{
	MPI_Request req = MPI_REQUEST_NULL;
	MPI_Status st;
	char buf[8];
	int cancelled;

	if (o->kind != K_PROBE)
		MPI_Irecv(buf, 8, MPI_BYTE,
			  o->kind == K_TEST_PEER ? 1 : MPI_ANY_SOURCE,
			  TAG_NEVER, MPI_COMM_WORLD, &req);
	if (o->ms > 0) {
		timed(o, &req, np);
	} else {
		idle_loop(o->kind, o->calls, &req);
		idle_loop(o->kind, 2 * o->calls, &req);
		printf("bench=idle kind=%s np=%d calls=%ld\n",
		       kind_name[o->kind], np, o->calls);
	}
	fflush(stdout);
	if (req != MPI_REQUEST_NULL) {
		MPI_Cancel(&req);
		MPI_Wait(&req, &st);
		MPI_Test_cancelled(&st, &cancelled);
		if (!cancelled) {
			fprintf(stderr, "bench_idle: the idle receive was not cancelled\n");
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	for (int p = 1; p < np; p++)
		MPI_Send(NULL, 0, MPI_BYTE, p, TAG_RELEASE, MPI_COMM_WORLD);
}

/* The other ranks: off the CPUs until rank 0 is done. */
static void wait_release(void)
{
	const struct timespec nap = { 0, 1000000 };
	MPI_Request req;
	int flag = 0;

	MPI_Irecv(NULL, 0, MPI_BYTE, 0, TAG_RELEASE, MPI_COMM_WORLD, &req);
	for (;;) {
		MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
		if (flag)
			break;
		nanosleep(&nap, NULL);
	}
}

int main(int argc, char **argv)
{
	struct opts o = { .kind = K_PROBE, .calls = 2000, .msgs = 32 };
	int rank, np;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	parse(argc, argv, rank, &o);
	if (np < 2)
		usage_exit(rank);
	warm_up(rank, np, o.msgs);
	/* nothing in flight towards rank 0 once every rank got here */
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		measure(&o, np);
	else
		wait_release();
	MPI_Finalize();
	return 0;
}
