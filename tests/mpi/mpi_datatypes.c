/*
 * mpi_datatypes.c - derived datatypes on the send and the receive side.
 *
 * Types: a vector of doubles (blocks of 3, stride 5), an indexed type of
 * ints (blocks of varying length and gaps), a struct {char; double[2];
 * int[3]} (with its padding) resized to its C size and sent as many
 * elements, and one block of ints that starts 24 bytes into its buffer
 * (contiguous, true lower bound 24: the MTL's in-place bytes must start
 * there, mtl_tm_data.h); each small (hundreds of bytes) and large (about
 * 2.3 MiB of data over a larger extent).  Rank 1 sends to rank 0; the reference for
 * every byte is MPI_Pack / MPI_Unpack of the same buffers.
 *
 *   a  typed send -> contiguous receive (unexpected): the bytes are the
 *      packed data, count = packed size;
 *   b  contiguous send -> typed receive (posted first): data lands in the
 *      type's positions, gaps between blocks untouched;
 *   c  typed send -> typed receive;
 *   d  contiguous send, MPI_Mprobe, MPI_Get_count / MPI_Get_elements in
 *      the type, MPI_Mrecv into the non-contiguous type;
 *   e  MPI_Sendrecv of typed data both ways between ranks 0 and 1;
 *   f  a persistent typed send (MPI_Send_init, started twice: pml cm
 *      prepares its convertor, unlike a plain send's) -> contiguous
 *      receive.
 */
#include "mpitest.h"
#include <stddef.h>

#define FRESH 0xC3

struct rec {
	char c;
	double d[2];
	int i[3];
};

struct tcase {
	const char *name;
	MPI_Datatype type;
	int count;
	size_t span;        /* bytes the buffer must have */
	int packed;         /* packed size of count elements */
};

static MPI_Comm comm;

static void make(struct tcase *t, int kind, int large)
{
	MPI_Aint lb, extent;

	if (kind == 0) {
		int v = large ? 100000 : 10;

		MT_CALL(MPI_Type_vector(v, 3, 5, MPI_DOUBLE, &t->type));
		t->count = 1;
		t->name = large ? "vector 100000 x 3 of 5 doubles" :
				  "vector 10 x 3 of 5 doubles";
	} else if (kind == 1) {
		int n = large ? 150000 : 8, *len = mt_malloc(n * sizeof(int));
		int *disp = mt_malloc(n * sizeof(int));

		for (int i = 0; i < n; i++) {
			len[i] = 1 + (i * 5) % 7;
			disp[i] = i * 10 + (i % 3);
		}
		MT_CALL(MPI_Type_indexed(n, len, disp, MPI_INT, &t->type));
		free(len);
		free(disp);
		t->count = 1;
		t->name = large ? "indexed, 150000 blocks of 1..7 ints" :
				  "indexed, 8 blocks of 1..7 ints";
	} else if (kind == 3) {
		int n = large ? 600000 : 10;
		MPI_Aint at = 24;

		MT_CALL(MPI_Type_create_hindexed(1, &n, &at, MPI_INT,
						 &t->type));
		t->count = 1;
		t->name = large ? "600000 ints 24 bytes into the buffer" :
				  "10 ints 24 bytes into the buffer";
	} else {
		int len[3] = { 1, 2, 3 };
		MPI_Aint disp[3] = { offsetof(struct rec, c),
				     offsetof(struct rec, d),
				     offsetof(struct rec, i) };
		MPI_Datatype types[3] = { MPI_CHAR, MPI_DOUBLE, MPI_INT }, s;

		MT_CALL(MPI_Type_create_struct(3, len, disp, types, &s));
		MT_CALL(MPI_Type_create_resized(s, 0, sizeof(struct rec),
						&t->type));
		MPI_Type_free(&s);
		t->count = large ? 80000 : 7;
		t->name = large ? "struct {char; double[2]; int[3]} x 80000" :
				  "struct {char; double[2]; int[3]} x 7";
	}
	MT_CALL(MPI_Type_commit(&t->type));
	MT_CALL(MPI_Type_get_extent(t->type, &lb, &extent));
	t->span = (size_t)(lb + extent * t->count);
	MT_CALL(MPI_Pack_size(t->count, t->type, MPI_COMM_WORLD, &t->packed));
}

/* The packed bytes of the source buffer, and the expected typed receive. */
static void reference(const struct tcase *t, const char *src, char *packed,
		      int *plen, char *expect)
{
	int pos = 0;

	MT_CALL(MPI_Pack(src, t->count, t->type, packed, t->packed, &pos,
			 MPI_COMM_WORLD));
	*plen = pos;
	memset(expect, FRESH, t->span);
	pos = 0;
	MT_CALL(MPI_Unpack(packed, *plen, &pos, expect, t->count, t->type,
			   MPI_COMM_WORLD));
}

static void cmp(const char *got, const char *want, size_t n,
		const char *what)
{
	for (size_t i = 0; i < n; i++)
		if (got[i] != want[i]) {
			mt_fail("%s: byte %zu of %zu is 0x%02x, want 0x%02x%s",
				what, i, n, (unsigned char)got[i],
				(unsigned char)want[i],
				(unsigned char)want[i] == FRESH ?
					" (a gap: must stay untouched)" :
					"");
			return;
		}
}

static void run(struct tcase *t, uint64_t k)
{
	char *src = mt_malloc(t->span), *packed = mt_malloc(t->packed);
	char *expect = mt_malloc(t->span), *rb = mt_malloc(t->span);
	char what[200];
	MPI_Status st;
	int plen, rc;

	mt_fill(src, t->span, k);
	reference(t, src, packed, &plen, expect);

	/* a: typed send -> contiguous receive, unexpected */
	snprintf(what, sizeof(what), "%s: typed send, contiguous receive",
		 t->name);
	mt_set_phase("%s", what);
	if (mt_rank == 1) {
		MT_CALL(MPI_Send(src, t->count, t->type, 0, 1, comm));
	} else if (mt_rank == 0) {
		char *c = mt_malloc(plen);

		mt_wait_arrived(1, 1, comm, &st, what);
		rc = MPI_Recv(c, plen, MPI_BYTE, 1, 1, comm, &st);
		if (rc != MPI_SUCCESS)
			mt_fail("%s: %s", what, mt_errstr(rc));
		else if (mt_count(&st, MPI_BYTE) != plen)
			mt_fail("%s: count %d, packed size %d", what,
				mt_count(&st, MPI_BYTE), plen);
		else
			cmp(c, packed, plen, what);
		free(c);
	}

	/* b: contiguous send -> typed receive, posted first */
	snprintf(what, sizeof(what), "%s: contiguous send, typed receive",
		 t->name);
	mt_set_phase("%s", what);
	if (mt_rank == 1) {
		MT_CALL(MPI_Barrier(comm));
		MT_CALL(MPI_Send(packed, plen, MPI_BYTE, 0, 2, comm));
	} else if (mt_rank == 0) {
		MPI_Request r;
		int n = -1;

		memset(rb, FRESH, t->span);
		MT_CALL(MPI_Irecv(rb, t->count, t->type, 1, 2, comm, &r));
		MT_CALL(MPI_Barrier(comm));
		rc = mt_wait(&r, &st, what);
		MPI_Get_count(&st, t->type, &n);
		if (rc != MPI_SUCCESS)
			mt_fail("%s: %s", what, mt_errstr(rc));
		else if (n != t->count)
			mt_fail("%s: MPI_Get_count in the type %d, want %d",
				what, n, t->count);
		else
			cmp(rb, expect, t->span, what);
	} else {
		MT_CALL(MPI_Barrier(comm));
	}

	/* c: typed -> typed */
	snprintf(what, sizeof(what), "%s: typed send, typed receive",
		 t->name);
	mt_set_phase("%s", what);
	if (mt_rank == 1) {
		MT_CALL(MPI_Send(src, t->count, t->type, 0, 3, comm));
	} else if (mt_rank == 0) {
		memset(rb, FRESH, t->span);
		rc = MPI_Recv(rb, t->count, t->type, 1, 3, comm, &st);
		if (rc != MPI_SUCCESS)
			mt_fail("%s: %s", what, mt_errstr(rc));
		else
			cmp(rb, expect, t->span, what);
	}

	/* d: mprobe + mrecv into the type */
	snprintf(what, sizeof(what),
		 "%s: MPI_Mprobe, MPI_Mrecv into the type", t->name);
	mt_set_phase("%s", what);
	if (mt_rank == 1) {
		MT_CALL(MPI_Send(packed, plen, MPI_BYTE, 0, 4, comm));
	} else if (mt_rank == 0) {
		MPI_Message h;
		int n = -1, e = -1;

		memset(rb, FRESH, t->span);
		MT_CALL(MPI_Mprobe(1, 4, comm, &h, &st));
		MPI_Get_count(&st, t->type, &n);
		MPI_Get_elements(&st, t->type, &e);
		MT_CHECK(n == t->count,
			 "%s: MPI_Get_count of the probe %d, want %d", what, n,
			 t->count);
		rc = MPI_Mrecv(rb, t->count, t->type, &h, &st);
		if (rc != MPI_SUCCESS) {
			mt_fail("%s: %s", what, mt_errstr(rc));
		} else {
			int e2 = -1;

			MPI_Get_elements(&st, t->type, &e2);
			MT_CHECK(e2 == e && e > 0,
				 "%s: MPI_Get_elements %d after MPI_Mrecv, %d after MPI_Mprobe",
				 what, e2, e);
			cmp(rb, expect, t->span, what);
		}
	}

	/* e: sendrecv both ways */
	snprintf(what, sizeof(what), "%s: MPI_Sendrecv both ways", t->name);
	mt_set_phase("%s", what);
	if (mt_rank <= 1) {
		memset(rb, FRESH, t->span);
		rc = MPI_Sendrecv(src, t->count, t->type, 1 - mt_rank, 5, rb,
				  t->count, t->type, 1 - mt_rank, 5, comm,
				  &st);
		if (rc != MPI_SUCCESS)
			mt_fail("%s: %s", what, mt_errstr(rc));
		else
			cmp(rb, expect, t->span, what);
	}

	/* f: persistent typed send -> contiguous receive, twice */
	snprintf(what, sizeof(what), "%s: persistent typed send, contiguous receive",
		 t->name);
	mt_set_phase("%s", what);
	if (mt_rank == 1) {
		MPI_Request r;

		MT_CALL(MPI_Send_init(src, t->count, t->type, 0, 6, comm, &r));
		for (int i = 0; i < 2; i++) {
			MT_CALL(MPI_Start(&r));
			MT_CALL(MPI_Wait(&r, MPI_STATUS_IGNORE));
		}
		MT_CALL(MPI_Request_free(&r));
	} else if (mt_rank == 0) {
		char *c = mt_malloc(plen);

		for (int i = 0; i < 2; i++) {
			memset(c, FRESH, plen);
			rc = MPI_Recv(c, plen, MPI_BYTE, 1, 6, comm, &st);
			if (rc != MPI_SUCCESS)
				mt_fail("%s: %s", what, mt_errstr(rc));
			else
				cmp(c, packed, plen, what);
		}
		free(c);
	}
	MT_CALL(MPI_Barrier(comm));
	free(src);
	free(packed);
	free(expect);
	free(rb);
}

int main(int argc, char **argv)
{
	size_t bytes = 0;

	mt_init(&argc, &argv, "mpi_datatypes", 2);
	comm = mt_dup(MPI_COMM_WORLD);
	for (int large = 0; large < 2; large++)
		for (int kind = 0; kind < 4; kind++) {
			struct tcase t;

			make(&t, kind, large);
			run(&t, 0xD000 + kind);
			bytes += t.packed;
			mt_checked("%s (%d B of data over %zu B): typed->contiguous, contiguous->typed (gaps untouched), typed->typed, MPI_Mprobe + MPI_Mrecv into the type (count, elements), MPI_Sendrecv, persistent typed->contiguous",
				   t.name, t.packed, t.span);
			MPI_Type_free(&t.type);
		}
	MPI_Comm_free(&comm);
	return mt_finish();
}
