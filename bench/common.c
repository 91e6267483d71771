/*
 * common.c - option parsing, calibration and batch timing shared by the
 * benchmarks (see common.h for why points are measured in batches).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/* Calibration stops once a run takes this fraction of one batch: long
 * enough for a usable per-iteration estimate, short enough to be cheap. */
#define CALIB_FRACTION	0.125
#define MAX_ITERS	(1L << 30)
/* Runs shorter than this say little about the time per iteration. */
#define MIN_TIMED_SEC	10e-6

static const char common_usage[] =
	"common options:\n"
	"  -t MS     time budget per measurement point, all batches (ms)\n"
	"  -n N      batches per point; the median batch is reported\n"
	"  -s LIST   message sizes in bytes\n"
	"  -d LIST   queue depths (bench_depth)\n"
	"  -w N      window: messages in flight (bench_bw, bench_rate)\n"
	"  -k KIND   variant of the benchmark\n"
	"LIST: comma-separated items; an item is N (suffix K or M: x1024,\n"
	"x1048576) or A:B[:F], the series A, A*F, ... up to B (F defaults to\n"
	"2; A = 0 gives 0, 1, F, F*F, ...).  Example: -s 0:4M\n";

void bench_fail(const struct bench_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "bench (rank %d): ", ctx ? ctx->rank : -1);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);	/* not reached: MPI_Abort does not return */
}

void bench_print(const struct bench_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	if (ctx->rank != 0)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static int parse_number(const char *s, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || v < 0)
		return -1;
	if (*end == 'K' || *end == 'k')
		v *= 1024, end++;
	else if (*end == 'M' || *end == 'm')
		v *= 1024 * 1024, end++;
	if (*end != '\0' && *end != ':')
		return -1;
	*out = v;
	return (int)(end - s);
}

/* One item "N" or "A:B[:F]" appended to out[]; returns -1 on bad input. */
static int parse_item(char *item, long *out, int *n)
{
	long a, b, f = 2;
	int len = parse_number(item, &a);

	if (len < 0)
		return -1;
	if (item[len] == '\0') {
		if (*n >= BENCH_MAX_LIST)
			return -1;
		out[(*n)++] = a;
		return 0;
	}
	char *rest = item + len + 1;
	len = parse_number(rest, &b);
	if (len < 0 || (rest[len] == ':' && parse_number(rest + len + 1, &f) < 0)
	    || f < 2 || b < a)
		return -1;
	for (long v = a; v <= b; v = (v == 0) ? 1 : v * f) {
		if (*n >= BENCH_MAX_LIST)
			return -1;
		out[(*n)++] = v;
	}
	return 0;
}

static int parse_list(const char *arg, long *out, int *n)
{
	char *copy = strdup(arg), *save = NULL;
	int rc = 0;

	if (!copy)
		return -1;
	*n = 0;
	for (char *it = strtok_r(copy, ",", &save); it && rc == 0;
	     it = strtok_r(NULL, ",", &save))
		rc = parse_item(it, out, n);
	free(copy);
	return (rc == 0 && *n > 0) ? 0 : -1;
}

static void usage_exit(const struct bench_ctx *ctx, const char *usage,
		       int status)
{
	if (ctx->rank == 0)
		fprintf(status ? stderr : stdout, "%s%s", usage, common_usage);
	MPI_Finalize();
	exit(status);
}

static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
	int c;

	while ((c = getopt(argc, argv, "t:n:s:d:w:k:h")) != -1) {
		switch (c) {
		case 't': o->budget_ms = atof(optarg); break;
		case 'n': o->batches = atoi(optarg); break;
		case 's':
			if (parse_list(optarg, o->sizes, &o->nsizes))
				return -1;
			break;
		case 'd':
			if (parse_list(optarg, o->depths, &o->ndepths))
				return -1;
			break;
		case 'w': o->window = atoi(optarg); break;
		case 'k': o->kind = optarg; break;
		case 'h': return 1;
		default: return -1;
		}
	}
	if (optind != argc || o->budget_ms <= 0 || o->batches < 1 ||
	    o->window < 0)
		return -1;
	return 0;
}

void bench_init(int argc, char **argv, struct bench_ctx *ctx,
		struct bench_opts *opts, const char *usage)
{
	bench_init_thread(argc, argv, ctx, opts, usage, MPI_THREAD_SINGLE);
}

void bench_init_thread(int argc, char **argv, struct bench_ctx *ctx,
		       struct bench_opts *opts, const char *usage,
		       int required)
{
	int size, rc, provided = MPI_THREAD_SINGLE;

	/* Plain MPI_Init for the single-threaded benchmarks: asking for a
	 * level may change what a transport does (locks, progress). */
	if (required == MPI_THREAD_SINGLE)
		MPI_Init(&argc, &argv);
	else
		MPI_Init_thread(&argc, &argv, required, &provided);
	/* A private communicator: nothing else in the process can match. */
	MPI_Comm_dup(MPI_COMM_WORLD, &ctx->comm);
	MPI_Comm_rank(ctx->comm, &ctx->rank);
	MPI_Comm_size(ctx->comm, &size);
	ctx->peer = 1 - ctx->rank;
	ctx->opts = opts;

	rc = parse_opts(argc, argv, opts);
	if (rc != 0)
		usage_exit(ctx, usage, rc < 0);
	if (size != 2) {
		if (ctx->rank == 0)
			fprintf(stderr, "run me on exactly 2 ranks (have %d)\n",
				size);
		MPI_Finalize();
		exit(1);
	}
	if (required != MPI_THREAD_SINGLE && provided < required) {
		if (ctx->rank == 0)
			fprintf(stderr, "this MPI provides thread level %d, "
				"below the %d this benchmark needs\n",
				provided, required);
		MPI_Finalize();
		exit(1);
	}
}

void bench_finish(void)
{
	MPI_Finalize();
}

void *bench_alloc(size_t size)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, size ? size : 1) != 0)
		bench_fail(NULL, "cannot allocate %zu bytes", size);
	memset(p, 0xa5, size);
	return p;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Rank 0 decides, everyone follows: both ranks must run the same count. */
static long agree(const struct bench_ctx *ctx, long v)
{
	MPI_Bcast(&v, 1, MPI_LONG, 0, ctx->comm);
	return v;
}

/*
 * Grows the iteration count until a run takes a fair part of a batch, then
 * sizes batches from the fastest per-iteration time seen.  The first run
 * is warm-up only (connection set-up, registration caches, page faults),
 * and at least two runs count, the fastest winning, so that one
 * descheduled run does not shrink every batch to a handful of iterations.
 */
static long calibrate(const struct bench_ctx *ctx, bench_kernel kernel,
		      void *arg, double batch_sec)
{
	double goal = batch_sec * CALIB_FRACTION, best = 0;
	long iters = 1;

	for (int run = 0;; run++) {
		double t = kernel(ctx, arg, iters);
		long next = 0;	/* 0: done */

		if (ctx->rank == 0 && run > 0 && t >= MIN_TIMED_SEC &&
		    (best == 0 || t / iters < best))
			best = t / iters;
		if (ctx->rank == 0 && !(run >= 2 && t >= goal) &&
		    iters < MAX_ITERS) {
			double f = (t > 0) ? goal / t * 1.5 : 16;

			f = f < 2 ? 2 : (f > 16 ? 16 : f);
			/* Warm-up, or long enough already: run it again. */
			next = (run == 0 || t >= goal) ? iters : (long)(iters * f);
		}
		if (ctx->rank == 0 && next == 0) {
			long n = best > 0 ? (long)(batch_sec / best) : 1;

			iters = n < 1 ? 1 : (n > MAX_ITERS ? MAX_ITERS : n);
		}
		next = agree(ctx, next);
		if (next == 0)
			return agree(ctx, iters);
		iters = next;
	}
}

struct bench_result bench_measure(const struct bench_ctx *ctx,
				  bench_kernel kernel, void *arg)
{
	const struct bench_opts *o = ctx->opts;
	double batch_sec = o->budget_ms / 1e3 / o->batches;
	double per[o->batches];
	struct bench_result r;

	r.iters = calibrate(ctx, kernel, arg, batch_sec);
	for (int b = 0; b < o->batches; b++) {
		/* Both ranks start a batch together, so rank 0 does not
		 * time the peer's lag. */
		MPI_Barrier(ctx->comm);
		per[b] = kernel(ctx, arg, r.iters) / r.iters;
	}
	qsort(per, o->batches, sizeof(per[0]), cmp_double);
	r.min = per[0];
	r.max = per[o->batches - 1];
	/* Even count: the lower middle, an actually measured batch. */
	r.median = per[(o->batches - 1) / 2];
	return r;
}

double bench_pingpong(const struct bench_ctx *ctx, void *buf, size_t size,
		      long iters)
{
	double t0 = MPI_Wtime();

	for (long i = 0; i < iters; i++) {
		if (ctx->rank == 0) {
			MPI_Send(buf, (int)size, MPI_BYTE, ctx->peer, TAG_DATA,
				 ctx->comm);
			MPI_Recv(buf, (int)size, MPI_BYTE, ctx->peer, TAG_DATA,
				 ctx->comm, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(buf, (int)size, MPI_BYTE, ctx->peer, TAG_DATA,
				 ctx->comm, MPI_STATUS_IGNORE);
			MPI_Send(buf, (int)size, MPI_BYTE, ctx->peer, TAG_DATA,
				 ctx->comm);
		}
	}
	return MPI_Wtime() - t0;
}

void bench_stream_init(struct bench_stream *s, size_t max_size, int window)
{
	s->sbuf = bench_alloc(max_size);
	s->rbuf = bench_alloc(2 * (size_t)window * max_size);
	s->size = 0;
	s->window = window;
	s->reqs = calloc(2 * (size_t)window, sizeof(*s->reqs));
	if (!s->reqs)
		bench_fail(NULL, "out of memory");
}

void bench_stream_free(struct bench_stream *s)
{
	free(s->sbuf);
	free(s->rbuf);
	free(s->reqs);
}

/* Rank 1: posts the receives of window slot `set` (0 or 1), then grants
 * the window to the sender. */
static void stream_grant(const struct bench_ctx *ctx, struct bench_stream *s,
			 int set)
{
	for (int i = 0; i < s->window; i++) {
		size_t slot = (size_t)set * s->window + i;

		MPI_Irecv(s->rbuf + slot * s->size, (int)s->size, MPI_BYTE,
			  ctx->peer, TAG_DATA, ctx->comm, &s->reqs[slot]);
	}
	MPI_Send(NULL, 0, MPI_BYTE, ctx->peer, TAG_CREDIT, ctx->comm);
}

static void stream_receive(const struct bench_ctx *ctx, struct bench_stream *s,
			   long iters)
{
	for (long k = 0; k < iters && k < 2; k++)
		stream_grant(ctx, s, (int)k);
	for (long k = 0; k < iters; k++) {
		int set = (int)(k & 1);

		MPI_Waitall(s->window, &s->reqs[set * s->window],
			    MPI_STATUSES_IGNORE);
		if (k + 2 < iters)
			stream_grant(ctx, s, set);
	}
	/* The sender's clock stops when the last byte has arrived here. */
	MPI_Send(NULL, 0, MPI_BYTE, ctx->peer, TAG_ACK, ctx->comm);
}

static void stream_send(const struct bench_ctx *ctx, struct bench_stream *s,
			long iters)
{
	for (long k = 0; k < iters; k++) {
		MPI_Recv(NULL, 0, MPI_BYTE, ctx->peer, TAG_CREDIT, ctx->comm,
			 MPI_STATUS_IGNORE);
		for (int i = 0; i < s->window; i++)
			MPI_Isend(s->sbuf, (int)s->size, MPI_BYTE, ctx->peer,
				  TAG_DATA, ctx->comm, &s->reqs[i]);
		MPI_Waitall(s->window, s->reqs, MPI_STATUSES_IGNORE);
	}
	MPI_Recv(NULL, 0, MPI_BYTE, ctx->peer, TAG_ACK, ctx->comm,
		 MPI_STATUS_IGNORE);
}

double bench_stream_kernel(const struct bench_ctx *ctx, void *arg, long iters)
{
	double t0 = MPI_Wtime();

	if (ctx->rank == 0)
		stream_send(ctx, arg, iters);
	else
		stream_receive(ctx, arg, iters);
	return MPI_Wtime() - t0;
}
