/*
 * latency.c - ping-pong latency over message sizes.
 *
 * Rank 0 sends, rank 1 answers with a message of the same size; the
 * reported usec is half the round trip (blocking MPI_Send/MPI_Recv, one
 * buffer, so the receive is usually posted before the message arrives).
 *
 *   bench=latency size=S usec=MEDIAN min=.. max=.. iters=N batches=B
 */
#include <stdlib.h>

#include "common.h"

static const char usage[] =
	"usage: mpirun -np 2 bench_latency [options]\n"
	"Ping-pong latency (half round trip) for each size (default -s 0:4M).\n";

struct lat_arg {
	void *buf;
	size_t size;
};

static double lat_kernel(const struct bench_ctx *ctx, void *arg, long iters)
{
	struct lat_arg *a = arg;

	return bench_pingpong(ctx, a->buf, a->size, iters);
}

int main(int argc, char **argv)
{
	struct bench_opts opts = { .budget_ms = 40, .batches = 5 };
	struct bench_ctx ctx;
	long max = 0;

	opts.nsizes = 0;
	for (long s = 0; s <= 4L << 20; s = s ? s * 2 : 1)
		opts.sizes[opts.nsizes++] = s;
	bench_init(argc, argv, &ctx, &opts, usage);
	for (int i = 0; i < opts.nsizes; i++)
		max = opts.sizes[i] > max ? opts.sizes[i] : max;

	struct lat_arg a = { .buf = bench_alloc(max) };

	for (int i = 0; i < opts.nsizes; i++) {
		a.size = opts.sizes[i];
		struct bench_result r = bench_measure(&ctx, lat_kernel, &a);
		/* Half a round trip, in microseconds. */
		bench_print(&ctx, "bench=latency size=%zu usec=%.3f min=%.3f "
			    "max=%.3f iters=%ld batches=%d\n", a.size,
			    r.median * 5e5, r.min * 5e5, r.max * 5e5, r.iters,
			    opts.batches);
	}
	free(a.buf);
	bench_finish();
	return 0;
}
