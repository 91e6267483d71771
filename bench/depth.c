/*
 * depth.c - ping-pong latency with deep matching queues.
 *
 * Before timing, each rank builds a queue of D entries that the ping-pong
 * messages (tag TAG_DATA) never match, and keeps it while the ping-pong
 * runs, so every match has to get past them:
 *
 *   posted  D receives posted from the peer with tag TAG_NOMATCH
 *   any     D receives posted from MPI_ANY_SOURCE with tag TAG_NOMATCH
 *   unexp   D messages (TAG_NOMATCH) sent by the peer and not received:
 *           they wait in this rank's unexpected queue
 *
 * Afterwards the posted receives are cancelled (each must report
 * cancelled: one that matched something is a bug, and the run fails) and
 * the unexpected messages are received, so the next point starts clean.
 *
 *   bench=depth kind=K depth=D size=S usec=MEDIAN min=.. max=.. iters=N batches=B
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char usage[] =
	"usage: mpirun -np 2 bench_depth [options]\n"
	"Ping-pong latency past D non-matching queue entries (default\n"
	"-d 0:4096:4, -s 8); -k posted, any, unexp or all (default all).\n";

static const char *const kinds[] = { "posted", "any", "unexp" };

struct depth_arg {
	void *buf;		/* ping-pong buffer */
	size_t size;
	char *slots;		/* D * size bytes for the queued entries */
	MPI_Request *reqs;	/* D + 1 */
	long depth;
	int kind;		/* index into kinds[] */
};

static double depth_kernel(const struct bench_ctx *ctx, void *arg, long iters)
{
	struct depth_arg *a = arg;

	return bench_pingpong(ctx, a->buf, a->size, iters);
}

static void post_receives(const struct bench_ctx *ctx, struct depth_arg *a,
			  int source)
{
	for (long i = 0; i < a->depth; i++)
		MPI_Irecv(a->slots + i * a->size, (int)a->size, MPI_BYTE,
			  source, TAG_NOMATCH, ctx->comm, &a->reqs[i]);
}

/*
 * Sends D messages the peer has no receive for, then a marker.  Once the
 * peer's marker is here, the peer's D messages are too (both transports
 * and the tm engine deliver one peer's messages in order), so they sit in
 * this rank's unexpected queue.  The sends are completed in cleanup,
 * after the peer has received them: a transport may hold them until then.
 */
static void queue_unexpected(const struct bench_ctx *ctx, struct depth_arg *a)
{
	for (long i = 0; i < a->depth; i++)
		MPI_Isend(a->slots + i * a->size, (int)a->size, MPI_BYTE,
			  ctx->peer, TAG_NOMATCH, ctx->comm, &a->reqs[i]);
	MPI_Isend(NULL, 0, MPI_BYTE, ctx->peer, TAG_MARK, ctx->comm,
		  &a->reqs[a->depth]);
	MPI_Recv(NULL, 0, MPI_BYTE, ctx->peer, TAG_MARK, ctx->comm,
		 MPI_STATUS_IGNORE);
}

static void setup(const struct bench_ctx *ctx, struct depth_arg *a)
{
	if (a->kind == 0)
		post_receives(ctx, a, ctx->peer);
	else if (a->kind == 1)
		post_receives(ctx, a, MPI_ANY_SOURCE);
	else
		queue_unexpected(ctx, a);
	MPI_Barrier(ctx->comm);
}

static void cancel_receives(const struct bench_ctx *ctx, struct depth_arg *a)
{
	long matched = 0;

	for (long i = 0; i < a->depth; i++) {
		MPI_Status st;
		int cancelled;

		MPI_Cancel(&a->reqs[i]);
		MPI_Wait(&a->reqs[i], &st);
		MPI_Test_cancelled(&st, &cancelled);
		matched += !cancelled;
	}
	if (matched)
		bench_fail(ctx, "%s depth %ld: %ld non-matching receives "
			   "matched a message", kinds[a->kind], a->depth,
			   matched);
}

static void drain_unexpected(const struct bench_ctx *ctx, struct depth_arg *a)
{
	int flag = 0;

	/* The queue must still hold them: nothing was meant to match. */
	if (a->depth > 0) {
		MPI_Iprobe(ctx->peer, TAG_NOMATCH, ctx->comm, &flag,
			   MPI_STATUS_IGNORE);
		if (!flag)
			bench_fail(ctx, "unexp depth %ld: queue is empty",
				   a->depth);
	}
	for (long i = 0; i < a->depth; i++)
		MPI_Recv(a->slots + i * a->size, (int)a->size, MPI_BYTE,
			 ctx->peer, TAG_NOMATCH, ctx->comm, MPI_STATUS_IGNORE);
	MPI_Waitall((int)a->depth + 1, a->reqs, MPI_STATUSES_IGNORE);
}

static void cleanup(const struct bench_ctx *ctx, struct depth_arg *a)
{
	if (a->kind < 2)
		cancel_receives(ctx, a);
	else
		drain_unexpected(ctx, a);
	MPI_Barrier(ctx->comm);
}

static void measure(const struct bench_ctx *ctx, struct depth_arg *a)
{
	a->slots = bench_alloc((size_t)a->depth * a->size);
	a->reqs = calloc(a->depth + 1, sizeof(*a->reqs));
	if (!a->reqs)
		bench_fail(ctx, "out of memory");

	setup(ctx, a);
	struct bench_result r = bench_measure(ctx, depth_kernel, a);
	cleanup(ctx, a);

	bench_print(ctx, "bench=depth kind=%s depth=%ld size=%zu usec=%.3f "
		    "min=%.3f max=%.3f iters=%ld batches=%d\n",
		    kinds[a->kind], a->depth, a->size, r.median * 5e5,
		    r.min * 5e5, r.max * 5e5, r.iters, ctx->opts->batches);
	free(a->slots);
	free(a->reqs);
}

int main(int argc, char **argv)
{
	struct bench_opts opts = { .budget_ms = 40, .batches = 5,
				   .kind = "all", .nsizes = 1, .sizes = { 8 } };
	struct bench_ctx ctx;

	for (long d = 0; d <= 4096; d = d ? d * 4 : 1)
		opts.depths[opts.ndepths++] = d;
	bench_init(argc, argv, &ctx, &opts, usage);

	for (int k = 0; k < 3; k++) {
		if (strcmp(opts.kind, "all") && strcmp(opts.kind, kinds[k]))
			continue;
		for (int s = 0; s < opts.nsizes; s++) {
			struct depth_arg a = { .size = opts.sizes[s], .kind = k };

			a.buf = bench_alloc(a.size);
			for (int d = 0; d < opts.ndepths; d++) {
				a.depth = opts.depths[d];
				measure(&ctx, &a);
			}
			free(a.buf);
		}
	}
	bench_finish();
	return 0;
}
