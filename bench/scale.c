/*
 * scale.c - what a rank holds after MPI_Init and after talking, as the
 * job grows (issue 24, "Measure"; run by bench/scale.sh).
 *
 *   mpirun -np P bench_scale [ring|a2a] [-n ROUNDS]
 *
 *   ring  each rank exchanges one 8-byte message with each of its two
 *         ring neighbours, ROUNDS times (default 10): the stencil case,
 *         where a rank needs two peers
 *   a2a   each rank exchanges one 8-byte message with every other rank,
 *         ROUNDS times, by point-to-point (MPI_Irecv/MPI_Isend to all):
 *         the case where a rank needs every peer
 *
 * Each rank samples itself twice, after MPI_Init and after the traffic
 * (before MPI_Finalize): open descriptors (entries of /proc/self/fd),
 * mappings (lines of /proc/self/maps), VmRSS and VmHWM (kB, from
 * /proc/self/status).  It also times MPI_Init (CLOCK_MONOTONIC around the
 * call: what the process spends in it, not the launcher's start-up).
 * Rank 0 gathers the samples and prints one line per quantity,
 *
 *   scale: pattern=P np=N what=W mean=M min=A max=B
 *
 * with W one of init_s, fd_init, fd_after, maps_init, maps_after,
 * rss_init_kb, rss_after_kb, hwm_kb.  A rank that cannot read /proc
 * reports -1 and the line says so (min=-1).  Timings are evidence only.
 */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { S_INIT_S, S_FD_INIT, S_FD_AFTER, S_MAPS_INIT, S_MAPS_AFTER,
       S_RSS_INIT, S_RSS_AFTER, S_HWM, S_N };
static const char *const s_name[S_N] = {
	"init_s", "fd_init", "fd_after", "maps_init", "maps_after",
	"rss_init_kb", "rss_after_kb", "hwm_kb"
};

#define TAG_SCALE 7

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Entries of /proc/self/fd, less the one opendir() holds; -1 if unreadable. */
static double fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;
}

static double maps_count(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	long n = 0;
	int c;

	if (!f)
		return -1;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* A "Name:   123 kB" field of /proc/self/status, or -1. */
static double status_kb(const char *name)
{
	FILE *f = fopen("/proc/self/status", "r");
	size_t len = strlen(name);
	char line[256];
	double v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, len) && line[len] == ':') {
			v = strtod(line + len + 1, NULL);
			break;
		}
	fclose(f);
	return v;
}

/* One exchange with each peer in peers[0..n), ROUNDS times. */
static void exchange(const int *peers, int n, int rounds)
{
	MPI_Request *req = malloc(2 * (size_t)n * sizeof(*req));
	long *in = malloc((size_t)n * sizeof(*in));
	long out = 0;

	if (!req || !in) {
		fprintf(stderr, "bench_scale: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < n; i++)
			MPI_Irecv(&in[i], 1, MPI_LONG, peers[i], TAG_SCALE,
				  MPI_COMM_WORLD, &req[i]);
		for (int i = 0; i < n; i++)
			MPI_Isend(&out, 1, MPI_LONG, peers[i], TAG_SCALE,
				  MPI_COMM_WORLD, &req[n + i]);
		MPI_Waitall(2 * n, req, MPI_STATUSES_IGNORE);
		out++;
	}
	free(in);
	free(req);
}

/* The peers of a pattern: the two ring neighbours, or every other rank. */
static int peers_of(int a2a, int me, int np, int *peers)
{
	int n = 0;

	if (!a2a) {
		peers[n++] = (me + 1) % np;
		if (np > 2)
			peers[n++] = (me + np - 1) % np;
		return np > 1 ? n : 0;
	}
	for (int i = 1; i < np; i++)
		peers[n++] = (me + i) % np;
	return n;
}

static void report(const char *pattern, int np, const double *all)
{
	for (int s = 0; s < S_N; s++) {
		double sum = 0, lo = all[s], hi = all[s];

		for (int r = 0; r < np; r++) {
			double v = all[(size_t)r * S_N + s];

			sum += v;
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
		printf("scale: pattern=%s np=%d what=%s mean=%.*f min=%.*f max=%.*f\n",
		       pattern, np, s_name[s], s ? 0 : 3, sum / np,
		       s ? 0 : 3, lo, s ? 0 : 3, hi);
	}
}

int main(int argc, char **argv)
{
	double mine[S_N], *all = NULL, t0;
	int me, np, a2a = 0, rounds = 10, n, *peers;

	t0 = now();
	MPI_Init(&argc, &argv);
	mine[S_INIT_S] = now() - t0;
	mine[S_FD_INIT] = fd_count();
	mine[S_MAPS_INIT] = maps_count();
	mine[S_RSS_INIT] = status_kb("VmRSS");
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "a2a"))
			a2a = 1;
		else if (!strcmp(argv[i], "ring"))
			a2a = 0;
		else if (!strcmp(argv[i], "-n") && i + 1 < argc &&
			 atoi(argv[i + 1]) > 0)
			rounds = atoi(argv[++i]);
		else {
			if (!me)
				fprintf(stderr, "bench_scale: usage: bench_scale [ring|a2a] [-n ROUNDS], not '%s'\n",
					argv[i]);
			MPI_Finalize();
			return 2;
		}
	}
	peers = malloc((size_t)np * sizeof(*peers));
	if (!peers || (!me && !(all = malloc((size_t)np * S_N * sizeof(*all))))) {
		fprintf(stderr, "bench_scale: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	n = peers_of(a2a, me, np, peers);
	exchange(peers, n, rounds);
	mine[S_FD_AFTER] = fd_count();
	mine[S_MAPS_AFTER] = maps_count();
	mine[S_RSS_AFTER] = status_kb("VmRSS");
	mine[S_HWM] = status_kb("VmHWM");
	MPI_Gather(mine, S_N, MPI_DOUBLE, all, S_N, MPI_DOUBLE, 0,
		   MPI_COMM_WORLD);
	if (!me)
		report(a2a ? "a2a" : "ring", np, all);
	free(all);
	free(peers);
	MPI_Finalize();
	return 0;
}
