/*
 * latency_mt.c - ping-pong latency under MPI_THREAD_MULTIPLE, the shape
 * of OSU's osu_latency_mt with "-t 1:R": rank 0 has one sending thread,
 * rank 1 has R receiving threads (default 2) that all sit in MPI_Recv
 * for the same (source, tag) at once.
 *
 * What OSU's benchmark does, and so this one: rank 0 sends a message
 * (tag 1) and waits for the answer (tag 2), again and again.  On rank 1
 * each of the R threads loops over a blocking MPI_Recv of the ping and a
 * blocking MPI_Send of the answer.  Which of the R posted receives a
 * ping matches is up to the MPI library (the first posted one, by MPI's
 * ordering rules, so in the steady state the threads take turns); the
 * thread that gets it answers.  So every ping-pong makes the library hand
 * a completion to the right one of several waiting threads, and with R
 * threads on one core (bench/run.sh binds each rank to a core) that
 * thread may first have to be scheduled: the benchmark measures how well
 * a transport copes with that, not only its wire latency.
 *
 * One difference from OSU: there, receiver thread t takes the fixed
 * iterations t, t + R, ...; here a thread answers pings until rank 0
 * sends it a stop message (tag 3, one per thread; a thread that got one
 * posts no more receives, so each thread gets exactly one).  This lets
 * rank 0 end a run early: a hand-over between threads on one core can
 * cost a scheduler time slice (milliseconds) where the calibration saw
 * microseconds, and a batch sized from the fast runs would then take
 * minutes.  Rank 0 stops after the point's whole time budget (-t) and
 * reports the time per ping-pong actually done.
 *
 * usec is half the round trip, as OSU reports it (elapsed time over
 * 2 * iterations, one sender).  Rank 0's sender is its main thread (one
 * thread either way); rank 1's receivers are started once and parked on
 * a barrier between measurements, so thread creation is never timed.
 *
 *   bench=latency_mt size=S usec=MEDIAN min=.. max=.. iters=N batches=B threads=1:R
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define MAX_RECV_THREADS	16
#define TAG_PING		TAG_DATA
#define TAG_PONG		TAG_ACK
#define TAG_STOP		TAG_MARK

static const char usage[] =
	"usage: mpirun -np 2 bench_latency_mt [options]\n"
	"Ping-pong latency (half round trip) under MPI_THREAD_MULTIPLE with\n"
	"one sending thread on rank 0 and R receiving threads on rank 1\n"
	"(osu_latency_mt -t 1:R).  -k 1:R sets R (default 1:2, R <= 16);\n"
	"sizes default to -s 8:1K.\n";

struct mt_arg {
	const struct bench_ctx *ctx;
	int nthreads;		/* R: receiver threads on rank 1 */
	size_t size;
	bool quit;
	char *sbuf, *rbuf;	/* rank 0 */
	char *tbuf[MAX_RECV_THREADS];	/* rank 1: one per thread */
	pthread_t th[MAX_RECV_THREADS];
	/* rank 1: the main thread and the R receivers meet at `start`
	 * before a measurement and at `done` after it */
	pthread_barrier_t start, done;
};

struct mt_thread {
	struct mt_arg *a;
	int id;
};

static struct mt_thread thread_ids[MAX_RECV_THREADS];

static void *receiver(void *p)
{
	struct mt_thread *me = p;
	struct mt_arg *a = me->a;
	const struct bench_ctx *ctx = a->ctx;
	char *buf = a->tbuf[me->id];
	MPI_Status st;

	for (;;) {
		pthread_barrier_wait(&a->start);
		if (a->quit)
			return NULL;
		for (;;) {
			MPI_Recv(buf, (int)a->size, MPI_BYTE, ctx->peer,
				 MPI_ANY_TAG, ctx->comm, &st);
			if (st.MPI_TAG == TAG_STOP)
				break;
			if (st.MPI_TAG != TAG_PING)
				bench_fail(ctx, "unexpected tag %d", st.MPI_TAG);
			MPI_Send(buf, (int)a->size, MPI_BYTE, ctx->peer,
				 TAG_PONG, ctx->comm);
		}
		pthread_barrier_wait(&a->done);
	}
}

/*
 * Rank 0 returns the time `iters` ping-pongs take at the rate of those it
 * did: all of them, or as many as fit in the point's budget.
 */
static double mt_kernel(const struct bench_ctx *ctx, void *arg, long iters)
{
	struct mt_arg *a = arg;
	double t0, t, limit = ctx->opts->budget_ms / 1e3;
	long i;

	if (ctx->rank == 1) {
		pthread_barrier_wait(&a->start);
		pthread_barrier_wait(&a->done);
		return 0;
	}
	t0 = MPI_Wtime();
	for (i = 0; i < iters; i++) {
		MPI_Send(a->sbuf, (int)a->size, MPI_BYTE, ctx->peer, TAG_PING,
			 ctx->comm);
		MPI_Recv(a->rbuf, (int)a->size, MPI_BYTE, ctx->peer, TAG_PONG,
			 ctx->comm, MPI_STATUS_IGNORE);
		if (MPI_Wtime() - t0 > limit) {
			i++;
			break;
		}
	}
	t = MPI_Wtime() - t0;
	for (int k = 0; k < a->nthreads; k++)
		MPI_Send(NULL, 0, MPI_BYTE, ctx->peer, TAG_STOP, ctx->comm);
	return t * iters / i;
}

/* "-k 1:R": OSU's sender:receiver thread counts; only one sender. */
static int parse_threads(const char *k)
{
	int s, r;
	char end;

	if (!k)
		return 2;
	if (sscanf(k, "%d:%d%c", &s, &r, &end) != 2 || s != 1 || r < 1 ||
	    r > MAX_RECV_THREADS)
		return -1;
	return r;
}

static void start_receivers(struct mt_arg *a, long max)
{
	if (pthread_barrier_init(&a->start, NULL, a->nthreads + 1) ||
	    pthread_barrier_init(&a->done, NULL, a->nthreads + 1))
		bench_fail(a->ctx, "cannot create the thread barriers");
	for (int t = 0; t < a->nthreads; t++) {
		a->tbuf[t] = bench_alloc(max);
		thread_ids[t] = (struct mt_thread){ .a = a, .id = t };
		if (pthread_create(&a->th[t], NULL, receiver, &thread_ids[t]))
			bench_fail(a->ctx, "cannot start receiver thread %d", t);
	}
}

static void stop_receivers(struct mt_arg *a)
{
	a->quit = true;
	pthread_barrier_wait(&a->start);
	for (int t = 0; t < a->nthreads; t++) {
		pthread_join(a->th[t], NULL);
		free(a->tbuf[t]);
	}
	pthread_barrier_destroy(&a->start);
	pthread_barrier_destroy(&a->done);
}

int main(int argc, char **argv)
{
	struct bench_opts opts = { .budget_ms = 40, .batches = 5 };
	struct bench_ctx ctx;
	struct mt_arg a = { .ctx = &ctx };
	long max = 0;

	for (long s = 8; s <= 1024; s *= 2)
		opts.sizes[opts.nsizes++] = s;
	bench_init_thread(argc, argv, &ctx, &opts, usage,
			  MPI_THREAD_MULTIPLE);
	a.nthreads = parse_threads(opts.kind);
	if (a.nthreads < 0)
		bench_fail(&ctx, "-k wants 1:R with 1 <= R <= %d, not %s",
			   MAX_RECV_THREADS, opts.kind);
	for (int i = 0; i < opts.nsizes; i++)
		max = opts.sizes[i] > max ? opts.sizes[i] : max;
	if (max > (1L << 30))
		bench_fail(&ctx, "sizes above 1 GiB are not supported");

	if (ctx.rank == 0) {
		a.sbuf = bench_alloc(max);
		a.rbuf = bench_alloc(max);
	} else {
		start_receivers(&a, max);
	}
	for (int i = 0; i < opts.nsizes; i++) {
		a.size = opts.sizes[i];
		struct bench_result r = bench_measure(&ctx, mt_kernel, &a);
		bench_print(&ctx, "bench=latency_mt size=%zu usec=%.3f min=%.3f "
			    "max=%.3f iters=%ld batches=%d threads=1:%d\n",
			    a.size, r.median * 5e5, r.min * 5e5, r.max * 5e5,
			    r.iters, opts.batches, a.nthreads);
	}
	if (ctx.rank == 1)
		stop_receivers(&a);
	free(a.sbuf);
	free(a.rbuf);
	bench_finish();
	return 0;
}
