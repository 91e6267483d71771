/*
 * bw.c - uni- and bi-directional bandwidth over message sizes.
 *
 *   uni: rank 0 streams windows of non-blocking sends to rank 1, which
 *        keeps the receives posted ahead (bench_stream in common.c).
 *   bi:  both ranks post a window of receives and a window of sends at
 *        once and wait for all of them; bytes in both directions count.
 *
 * The window is -w, or by default 64 messages but at most 16 MiB in
 * flight (4 MiB messages: 4), so large sizes do not need huge buffers.
 * MBps is 10^6 bytes per second.
 *
 *   bench=bw size=S MBps=MEDIAN min=.. max=.. window=W iters=N batches=B
 *   bench=bibw ...
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define DEFAULT_WINDOW	64
#define MAX_IN_FLIGHT	(16L << 20)

static const char usage[] =
	"usage: mpirun -np 2 bench_bw [options]\n"
	"Bandwidth for each size (default -s 1:4M); -k uni, bi or both\n"
	"(default both).\n";

static double bibw_kernel(const struct bench_ctx *ctx, void *arg, long iters)
{
	struct bench_stream *s = arg;
	int w = s->window;
	double t0 = MPI_Wtime();

	for (long k = 0; k < iters; k++) {
		for (int i = 0; i < w; i++)
			MPI_Irecv(s->rbuf + (size_t)i * s->size, (int)s->size,
				  MPI_BYTE, ctx->peer, TAG_DATA, ctx->comm,
				  &s->reqs[i]);
		for (int i = 0; i < w; i++)
			MPI_Isend(s->sbuf, (int)s->size, MPI_BYTE, ctx->peer,
				  TAG_DATA, ctx->comm, &s->reqs[w + i]);
		MPI_Waitall(2 * w, s->reqs, MPI_STATUSES_IGNORE);
	}
	/* Rank 0 stops its clock only when the peer has everything too. */
	MPI_Sendrecv(NULL, 0, MPI_BYTE, ctx->peer, TAG_ACK, NULL, 0, MPI_BYTE,
		     ctx->peer, TAG_ACK, ctx->comm, MPI_STATUS_IGNORE);
	return MPI_Wtime() - t0;
}

static int window_for(const struct bench_opts *o, long size)
{
	long w = DEFAULT_WINDOW;

	if (o->window)
		return o->window;
	if (size > 0 && w * size > MAX_IN_FLIGHT)
		w = MAX_IN_FLIGHT / size;
	return w < 1 ? 1 : (int)w;
}

static void measure(const struct bench_ctx *ctx, long size, int bidir)
{
	struct bench_stream s;
	int w = window_for(ctx->opts, size);

	bench_stream_init(&s, size, w);
	s.size = size;
	struct bench_result r = bench_measure(ctx, bidir ? bibw_kernel :
					      bench_stream_kernel, &s);
	/* Seconds per window -> 10^6 bytes per second; fastest batch is
	 * the highest bandwidth. */
	double bytes = (double)size * w * (bidir ? 2 : 1) / 1e6;

	bench_print(ctx, "bench=%s size=%ld MBps=%.1f min=%.1f max=%.1f "
		    "window=%d iters=%ld batches=%d\n", bidir ? "bibw" : "bw",
		    size, bytes / r.median, bytes / r.max, bytes / r.min, w,
		    r.iters, ctx->opts->batches);
	bench_stream_free(&s);
}

int main(int argc, char **argv)
{
	struct bench_opts opts = { .budget_ms = 40, .batches = 5,
				   .kind = "both" };
	struct bench_ctx ctx;

	for (long s = 1; s <= 4L << 20; s *= 2)
		opts.sizes[opts.nsizes++] = s;
	bench_init(argc, argv, &ctx, &opts, usage);

	int uni = !strcmp(opts.kind, "uni") || !strcmp(opts.kind, "both");
	int bi = !strcmp(opts.kind, "bi") || !strcmp(opts.kind, "both");

	if (!uni && !bi)
		bench_fail(&ctx, "-k %s: want uni, bi or both", opts.kind);
	for (int i = 0; i < opts.nsizes; i++) {
		if (uni)
			measure(&ctx, opts.sizes[i], 0);
		if (bi)
			measure(&ctx, opts.sizes[i], 1);
	}
	bench_finish();
	return 0;
}
