/*
 * rate.c - message rate: a window of non-blocking sends from rank 0 to
 * rank 1, receives always posted ahead (bench_stream in common.c).
 * Reported in millions of messages per second.
 *
 *   bench=rate size=S Mmsgs=MEDIAN min=.. max=.. window=W iters=N batches=B
 */
#include "common.h"

#define DEFAULT_WINDOW	64

static const char usage[] =
	"usage: mpirun -np 2 bench_rate [options]\n"
	"Message rate for each size (default -s 8:32K:8 and 1K), window -w\n"
	"(64).\n";

int main(int argc, char **argv)
{
	struct bench_opts opts = { .budget_ms = 40, .batches = 5,
				   .window = DEFAULT_WINDOW };
	struct bench_ctx ctx;

	/* 8 B .. 32 KiB by factors of 8, and 1 KiB (a run.sh target) */
	for (long s = 8; s <= 32L << 10; s *= 8) {
		opts.sizes[opts.nsizes++] = s;
		if (s == 512)
			opts.sizes[opts.nsizes++] = 1024;
	}
	bench_init(argc, argv, &ctx, &opts, usage);
	if (opts.window < 1)
		bench_fail(&ctx, "-w must be at least 1");

	for (int i = 0; i < opts.nsizes; i++) {
		struct bench_stream s;
		long size = opts.sizes[i];

		bench_stream_init(&s, size, opts.window);
		s.size = size;
		struct bench_result r = bench_measure(&ctx,
						      bench_stream_kernel, &s);
		double msgs = opts.window / 1e6;	/* per window, 10^6 */

		bench_print(&ctx, "bench=rate size=%ld Mmsgs=%.4f min=%.4f "
			    "max=%.4f window=%d iters=%ld batches=%d\n", size,
			    msgs / r.median, msgs / r.max, msgs / r.min,
			    opts.window, r.iters, opts.batches);
		bench_stream_free(&s);
	}
	bench_finish();
	return 0;
}
