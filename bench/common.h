/*
 * common.h - shared parts of the point-to-point benchmarks in bench/.
 *
 * Every benchmark runs on exactly 2 ranks and prints one line per
 * measurement point, "key=value" pairs separated by blanks, e.g.
 *
 *   bench=latency size=8 usec=0.512 min=0.498 max=0.611 iters=20000 batches=5
 *
 * Why batches: the machines this runs on switch between two vCPU
 * placement regimes every 10-30 s, which can triple small-message latency.
 * A point is therefore measured as a few short batches (time budget -t,
 * split over -n batches) and the MEDIAN batch is reported, with the fastest
 * and slowest batch as min/max so the noise is visible.  Comparing
 * transports is bench/run.sh's job: it alternates them in short rounds.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>
#include <mpi.h>

#define BENCH_MAX_LIST	64

/* Tags.  Distinct from each other so no benchmark message can ever be
 * taken by a receive meant for another purpose. */
#define TAG_DATA	1
#define TAG_CREDIT	2
#define TAG_ACK		3
#define TAG_MARK	4
/* Never sent by the ping-pong: receives with this tag never match it.
 * Below 32767, the smallest MPI_TAG_UB the standard allows. */
#define TAG_NOMATCH	30000

struct bench_opts {
	double budget_ms;	/* time per measurement point (all batches) */
	int batches;		/* batches per point; the median is reported */
	long sizes[BENCH_MAX_LIST];	/* -s list: message sizes, bytes */
	int nsizes;
	long depths[BENCH_MAX_LIST];	/* -d list: queue depths */
	int ndepths;
	int window;		/* -w: messages in flight (0: default) */
	const char *kind;	/* -k: variant, benchmark specific */
};

/* Who we are and what we were asked to do. */
struct bench_ctx {
	MPI_Comm comm;
	int rank;		/* 0 or 1 */
	int peer;
	const struct bench_opts *opts;
};

/*
 * A kernel runs `iters` iterations of one measurement on both ranks and
 * returns the elapsed seconds as seen by rank 0 (other ranks: any value).
 */
typedef double (*bench_kernel)(const struct bench_ctx *ctx, void *arg,
			       long iters);

struct bench_result {
	double median;		/* seconds per iteration, median batch */
	double min;
	double max;
	long iters;		/* iterations per batch */
};

/* Initialises MPI and parses the common options over the benchmark's
 * defaults in *opts.  Prints usage and exits on error or if not 2 ranks. */
void bench_init(int argc, char **argv, struct bench_ctx *ctx,
		struct bench_opts *opts, const char *usage);
/* The same, with MPI_Init_thread(required); exits if the library
 * provides less. */
void bench_init_thread(int argc, char **argv, struct bench_ctx *ctx,
		       struct bench_opts *opts, const char *usage,
		       int required);
void bench_finish(void);

/* printf on rank 0 only, flushed at once (run.sh reads a pipe). */
void bench_print(const struct bench_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Calibrates the iteration count, then runs the batches.  Result on rank 0
 * only (seconds per iteration). */
struct bench_result bench_measure(const struct bench_ctx *ctx,
				  bench_kernel kernel, void *arg);

/* Page-aligned, touched buffer (page faults must not land in timings). */
void *bench_alloc(size_t size);

/* Aborts all ranks with a message: benchmarks have no partial results. */
void bench_fail(const struct bench_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

/* The MPI blocking ping-pong both latency and depth benchmarks time. */
double bench_pingpong(const struct bench_ctx *ctx, void *buf, size_t size,
		      long iters);

/*
 * A one-way stream from rank 0 to rank 1, `window` messages of `size`
 * bytes at a time, `iters` windows.  Rank 1 keeps two windows of receives
 * posted and grants each window with a zero-byte credit, so every data
 * message finds its receive already posted (the expected path, where
 * hardware tag matching works) without a round trip per window.
 */
struct bench_stream {
	void *sbuf;		/* rank 0: one buffer, reused by every send */
	char *rbuf;		/* rank 1: 2 * window slots of `size` bytes */
	size_t size;
	int window;
	MPI_Request *reqs;	/* 2 * window */
};

void bench_stream_init(struct bench_stream *s, size_t max_size, int window);
void bench_stream_free(struct bench_stream *s);
double bench_stream_kernel(const struct bench_ctx *ctx, void *arg,
			   long iters);

#endif
