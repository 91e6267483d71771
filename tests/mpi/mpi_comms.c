/*
 * mpi_comms.c - hundreds of communicators with equal tags.
 *
 * Messages on different communicators never match each other, whatever
 * their tags and sources.  This program makes 200 duplicates of
 * MPI_COMM_WORLD and 100 MPI_Comm_split communicators (even/odd ranks and
 * everything in one, with reversed and rotated rank orders), sends on all
 * of them with the same tag, and checks that each message is received on
 * its own communicator only (its bytes name the communicator):
 *
 *   expected path    every receive posted (in reverse communicator order,
 *                    half of them MPI_ANY_SOURCE/MPI_ANY_TAG) before the
 *                    messages are sent;
 *   unexpected path  all messages sent first, received in a shuffled
 *                    communicator order; small and rendezvous sizes;
 *   recycling        communicators freed and made again in rounds, with
 *                    traffic in each round (context ids get reused).
 *
 * Each rank sends to the next rank and receives from the previous one
 * (within each communicator's own numbering).
 */
#include "mpitest.h"

#define NDUP 200
#define NSPLIT 100
#define NCOMM (NDUP + NSPLIT)
#define TAG 42
#define ROUNDS 5
#define NROUND 40

struct comm {
	MPI_Comm c;
	int rank, size;
	int id;
};

static struct comm comms[NCOMM];

static uint64_t key(int id, int src, int round)
{
	return ((uint64_t)id << 32) ^ ((uint64_t)src << 16) ^ (uint64_t)round;
}

static void make(struct comm *cm, int i)
{
	cm->id = i;
	if (i < NDUP) {
		cm->c = mt_dup(MPI_COMM_WORLD);
	} else {
		int j = i - NDUP, color, order;

		/* even/odd halves, or all ranks; reversed or rotated keys */
		color = j % 3 == 0 ? 0 : mt_rank % 2;
		order = j % 2 ? mt_size - mt_rank : (mt_rank + j) % mt_size;
		MT_CALL(MPI_Comm_split(MPI_COMM_WORLD, color, order, &cm->c));
		MT_CALL(MPI_Comm_set_errhandler(cm->c, MPI_ERRORS_RETURN));
	}
	MPI_Comm_rank(cm->c, &cm->rank);
	MPI_Comm_size(cm->c, &cm->size);
}

/* Rank in c of the neighbours: next and previous. */
static int nxt(const struct comm *cm)
{
	return (cm->rank + 1) % cm->size;
}

static int prv(const struct comm *cm)
{
	return (cm->rank + cm->size - 1) % cm->size;
}

static void check(const struct comm *cm, const void *buf,
		  const MPI_Status *st, int rc, int n, int round,
		  const char *path)
{
	char what[160];

	snprintf(what, sizeof(what),
		 "%s: communicator #%d (rank %d of %d), %d B from rank %d",
		 path, cm->id, cm->rank, cm->size, n, prv(cm));
	if (rc != MPI_SUCCESS) {
		mt_fail("%s: %s", what, mt_errstr(rc));
		return;
	}
	if (st->MPI_SOURCE != prv(cm) || st->MPI_TAG != TAG ||
	    mt_count(st, MPI_BYTE) != n) {
		mt_fail("%s: got source %d tag %d, %d B", what, st->MPI_SOURCE,
			st->MPI_TAG, mt_count(st, MPI_BYTE));
		return;
	}
	if (n >= 4 && *(const int *)buf != cm->id) {
		mt_fail("%s: the message was sent on communicator #%d", what,
			*(const int *)buf);
		return;
	}
	mt_check_data((const char *)buf + 4, n - 4,
		      key(cm->id, prv(cm), round), what);
}

static void fill(const struct comm *cm, void *buf, int n, int round)
{
	*(int *)buf = cm->id;
	mt_fill((char *)buf + 4, n - 4, key(cm->id, cm->rank, round));
}

/* Exchange on comms[lo..hi): expected or unexpected, n bytes each. */
static void exchange(int lo, int hi, int n, int expected, int round,
		     uint64_t *rng, const char *path)
{
	int cnt = hi - lo;
	MPI_Request *rr = mt_malloc(cnt * sizeof(*rr));
	MPI_Request *sr = mt_malloc(cnt * sizeof(*sr));
	MPI_Status *sts = mt_malloc(cnt * sizeof(*sts));
	char *rb = mt_malloc((size_t)cnt * n), *sb = mt_malloc((size_t)cnt * n);
	int *order = mt_malloc(cnt * sizeof(*order));
	int rc;

	for (int i = 0; i < cnt; i++)
		order[i] = i;
	for (int i = cnt - 1; i > 0; i--) {
		int j = mt_rand(rng) % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (int i = 0; i < cnt; i++)
		fill(&comms[lo + i], sb + (size_t)i * n, n, round);
	if (expected) {
		for (int i = cnt - 1; i >= 0; i--) {
			struct comm *cm = &comms[lo + i];
			int wild = i % 2;

			MT_CALL(MPI_Irecv(rb + (size_t)i * n, n, MPI_BYTE,
					  wild ? MPI_ANY_SOURCE : prv(cm),
					  wild ? MPI_ANY_TAG : TAG, cm->c,
					  &rr[i]));
		}
		MT_CALL(MPI_Barrier(MPI_COMM_WORLD));
		for (int i = 0; i < cnt; i++)
			MT_CALL(MPI_Isend(sb + (size_t)i * n, n, MPI_BYTE,
					  nxt(&comms[lo + i]), TAG,
					  comms[lo + i].c, &sr[i]));
	} else {
		for (int i = 0; i < cnt; i++)
			MT_CALL(MPI_Isend(sb + (size_t)i * n, n, MPI_BYTE,
					  nxt(&comms[lo + i]), TAG,
					  comms[lo + i].c, &sr[i]));
		MT_CALL(MPI_Barrier(MPI_COMM_WORLD));
		mt_progress_ms(MPI_COMM_WORLD, 20);
		for (int k = 0; k < cnt; k++) {
			int i = order[k];
			struct comm *cm = &comms[lo + i];
			int wild = k % 2;

			MT_CALL(MPI_Irecv(rb + (size_t)i * n, n, MPI_BYTE,
					  wild ? MPI_ANY_SOURCE : prv(cm),
					  wild ? MPI_ANY_TAG : TAG, cm->c,
					  &rr[i]));
		}
	}
	rc = mt_waitall(cnt, rr, sts, path);
	for (int i = 0; i < cnt; i++)
		check(&comms[lo + i], rb + (size_t)i * n, &sts[i],
		      rc == MPI_ERR_IN_STATUS ? sts[i].MPI_ERROR : rc, n,
		      round, path);
	MT_CALL(mt_waitall(cnt, sr, MPI_STATUSES_IGNORE, path));
	free(rr);
	free(sr);
	free(sts);
	free(rb);
	free(sb);
	free(order);
}

int main(int argc, char **argv)
{
	static const int sizes[] = { 4, 64, 5000, 20000 };
	uint64_t rng;
	char path[96];

	mt_init(&argc, &argv, "mpi_comms", 2);
	rng = mt_seed();
	for (int i = 0; i < NCOMM; i++)
		make(&comms[i], i);
	for (int s = 0; s < 4; s++) {
		snprintf(path, sizeof(path), "expected path, %d B", sizes[s]);
		mt_set_phase("%s", path);
		exchange(0, NCOMM, sizes[s], 1, 0, &rng, path);
		snprintf(path, sizeof(path), "unexpected path, %d B",
			 sizes[s]);
		mt_set_phase("%s", path);
		exchange(0, NCOMM, sizes[s], 0, 0, &rng, path);
	}
	mt_checked("%d communicators (%d MPI_Comm_dup, %d MPI_Comm_split), one tag, ring traffic on each: expected path (receives posted in reverse order, half wildcard) and unexpected path (receives in shuffled order), 4 B .. 20000 B: every message received on its own communicator",
		   NCOMM, NDUP, NSPLIT);

	/* recycling: free the dups, make new ones, traffic on each round */
	for (int round = 1; round <= ROUNDS; round++) {
		snprintf(path, sizeof(path), "recycling round %d", round);
		mt_set_phase("%s", path);
		for (int i = 0; i < NROUND; i++)
			MT_CALL(MPI_Comm_free(&comms[i].c));
		for (int i = 0; i < NROUND; i++)
			make(&comms[i], i);
		exchange(0, NROUND, 100, round % 2, round, &rng, path);
		/* the older communicators still work */
		exchange(NROUND, NCOMM, 8, 0, round, &rng, path);
	}
	mt_checked("%d rounds of freeing and re-making %d communicators with traffic on new and old ones",
		   ROUNDS, NROUND);
	for (int i = 0; i < NCOMM; i++)
		MT_CALL(MPI_Comm_free(&comms[i].c));
	return mt_finish();
}
