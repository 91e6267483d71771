/*
 * mpi_large.c - a message longer than 2 GiB, rank 0 to rank 1, four
 * times: arriving before its receive is posted (rank 1 waits for it with
 * MPI_Iprobe, whose status must give the full size), with the receive
 * posted first, through MPI_Mprobe + MPI_Mrecv, and into a receive 1 GiB
 * shorter (MPI_ERR_TRUNCATE, exactly the buffer delivered, the rest of
 * it untouched).  The size is counted in 1 MiB blocks of a
 * contiguous derived datatype, so no int overflows on the way: 2049
 * blocks by default (2 GiB + 1 MiB), or the number given as argv[1]
 * (4608: 4.5 GiB, past 32 bits).  Each received byte is checked.  Prints
 * "rank 1: ok <bytes> bytes, unexpected <s> s, posted first <s> s,
 * mprobe <s> s, truncated <s> s".
 * Needs the message's size in memory on each of the two ranks.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK (1u << 20)

static uint64_t word(uint64_t i, int seed)
{
	return i * 0x9e3779b97f4a7c15ull + (uint64_t)seed;
}

static void fill(uint64_t *p, uint64_t n, int seed)
{
	for (uint64_t i = 0; i < n; i++)
		p[i] = word(i, seed);
}

static uint64_t bad_word(const uint64_t *p, uint64_t n, int seed)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i] != word(i, seed))
			return i;
	return UINT64_MAX;
}

static void fail(const char *what, long long a, long long b)
{
	printf("rank 1: FAIL: %s (%lld, expected %lld)\n", what, a, b);
	fflush(stdout);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

/* rank 1: the status says the whole message, and the data (unless buf is
 * NULL: a probe) is right */
static void check(MPI_Status *st, MPI_Datatype blk, int blocks,
		  const uint64_t *buf, uint64_t bytes, int seed)
{
	MPI_Count elems;
	int count;
	uint64_t at;

	MPI_Get_elements_x(st, MPI_BYTE, &elems);
	if ((uint64_t)elems != bytes)
		fail("MPI_Get_elements_x in bytes", elems, (long long)bytes);
	MPI_Get_count(st, blk, &count);
	if (count != blocks)
		fail("MPI_Get_count in blocks", count, blocks);
	/* Not MPI_ERROR: only the multiple-completion calls set it; the
	 * calls' return codes are checked instead. */
	if (st->MPI_SOURCE != 0)
		fail("status source", st->MPI_SOURCE, 0);
	at = buf ? bad_word(buf, bytes / 8, seed) : UINT64_MAX;
	if (at != UINT64_MAX)
		fail("data differs at byte", (long long)(at * 8), -1);
}

int main(int argc, char **argv)
{
	int blocks = argc > 1 ? atoi(argv[1]) : 2049;
	uint64_t bytes = (uint64_t)blocks * BLOCK;
	double t0, t_unexp, t_posted, t_mprobe, t_trunc;
	MPI_Message msg;
	MPI_Datatype blk;
	MPI_Request req;
	MPI_Status st;
	uint64_t *buf;
	int rank, flag = 0, rc;

	MPI_Init(&argc, &argv);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Type_contiguous(BLOCK, MPI_BYTE, &blk);
	MPI_Type_commit(&blk);
	buf = malloc(bytes);
	if (!buf) {
		printf("rank %d: FAIL: no memory for %llu bytes\n", rank,
		       (unsigned long long)bytes);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (rank == 0) {
		fill(buf, bytes / 8, 1);
		rc = MPI_Send(buf, blocks, blk, 1, 1, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS)
			fail("rank 0: MPI_Send (unexpected) returned", rc, 0);
		fill(buf, bytes / 8, 2);
		MPI_Barrier(MPI_COMM_WORLD);
		rc = MPI_Send(buf, blocks, blk, 1, 2, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS)
			fail("rank 0: MPI_Send (posted first) returned", rc, 0);
		fill(buf, bytes / 8, 3);
		rc = MPI_Send(buf, blocks, blk, 1, 3, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS)
			fail("rank 0: MPI_Send (mprobe) returned", rc, 0);
		fill(buf, bytes / 8, 4);
		rc = MPI_Send(buf, blocks, blk, 1, 4, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS)
			fail("rank 0: MPI_Send (truncated) returned", rc, 0);
	} else if (rank == 1) {
		memset(buf, 0, bytes);
		t0 = MPI_Wtime();
		while (!flag)
			MPI_Iprobe(0, 1, MPI_COMM_WORLD, &flag, &st);
		check(&st, blk, blocks, NULL, bytes, 0); /* sizes only */
		rc = MPI_Recv(buf, blocks, blk, 0, 1, MPI_COMM_WORLD, &st);
		if (rc != MPI_SUCCESS)
			fail("MPI_Recv (unexpected) returned", rc, 0);
		check(&st, blk, blocks, buf, bytes, 1);
		t_unexp = MPI_Wtime() - t0;
		memset(buf, 0, bytes);
		rc = MPI_Irecv(buf, blocks, blk, 0, 2, MPI_COMM_WORLD, &req);
		if (rc != MPI_SUCCESS)
			fail("MPI_Irecv returned", rc, 0);
		t0 = MPI_Wtime();
		MPI_Barrier(MPI_COMM_WORLD);
		rc = MPI_Wait(&req, &st);
		if (rc != MPI_SUCCESS)
			fail("MPI_Wait (posted first) returned", rc, 0);
		check(&st, blk, blocks, buf, bytes, 2);
		t_posted = MPI_Wtime() - t0;

		memset(buf, 0, bytes);
		t0 = MPI_Wtime();
		rc = MPI_Mprobe(0, 3, MPI_COMM_WORLD, &msg, &st);
		if (rc != MPI_SUCCESS)
			fail("MPI_Mprobe returned", rc, 0);
		check(&st, blk, blocks, NULL, bytes, 0);
		rc = MPI_Mrecv(buf, blocks, blk, &msg, &st);
		if (rc != MPI_SUCCESS)
			fail("MPI_Mrecv returned", rc, 0);
		check(&st, blk, blocks, buf, bytes, 3);
		t_mprobe = MPI_Wtime() - t0;

		/* 1 GiB short: the last GiB of buf must stay zero */
		memset(buf, 0, bytes);
		t0 = MPI_Wtime();
		rc = MPI_Recv(buf, blocks - 1024, blk, 0, 4, MPI_COMM_WORLD, &st);
		if (rc != MPI_ERR_TRUNCATE)
			fail("truncated MPI_Recv returned", rc, MPI_ERR_TRUNCATE);
		st.MPI_ERROR = MPI_SUCCESS;
		check(&st, blk, blocks - 1024, buf,
		      (uint64_t)(blocks - 1024) * BLOCK, 4);
		for (uint64_t i = (uint64_t)(blocks - 1024) * BLOCK / 8;
		     i < bytes / 8; i++)
			if (buf[i])
				fail("written past the buffer at byte",
				     (long long)(i * 8), -1);
		t_trunc = MPI_Wtime() - t0;
		printf("rank 1: ok %llu bytes, unexpected %.1f s, posted first %.1f s, mprobe %.1f s, truncated %.1f s\n",
		       (unsigned long long)bytes, t_unexp, t_posted, t_mprobe,
		       t_trunc);
	} else {
		MPI_Barrier(MPI_COMM_WORLD);
	}
	free(buf);
	MPI_Type_free(&blk);
	MPI_Finalize();
	return 0;
}
