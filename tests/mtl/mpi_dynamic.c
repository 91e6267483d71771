/*
 * mpi_dynamic.c - point-to-point across an intercommunicator made by MPI's
 * dynamic process calls (issue 24 item 4):
 *   mpi_dynamic spawn    MPI_Comm_spawn: the job starts 2 more copies
 *                        of this program ("child"), parents and children
 *                        talk over the intercommunicator
 *   mpi_dynamic accept   MPI_Open_port / MPI_Comm_accept / MPI_Comm_connect:
 *                        the job splits in two halves, the first half's
 *                        rank 0 opens a port and hands its name to the
 *                        other half's through MPI_COMM_WORLD
 *   mpi_dynamic server FILE, mpi_dynamic client FILE
 *                        MPI_Comm_accept / MPI_Comm_connect between two
 *                        separately started mpiruns: the server job's
 *                        rank 0 opens a port and writes its name to FILE
 *                        (whole, by a rename); the client job's rank 0
 *                        waits for FILE (at most 60 s) and hands the
 *                        name to its job
 *   mpi_dynamic join     MPI_Comm_join: ranks 0 and 1 meet over a TCP
 *                        socket on 127.0.0.1 (rank 0 listens on a port the
 *                        kernel picks and sends its number over
 *                        MPI_COMM_WORLD)
 * On each intercommunicator, every process of one side sends every process
 * of the other a message of 400 bytes (eager) and one of 1 MiB
 * (rendezvous), with tags of its own; the other side receives them with
 * MPI_ANY_SOURCE / MPI_ANY_TAG and checks each by its status; then the
 * other way round.
 *
 * Prints "rank R: FAIL: ..." on a mismatch or a failed call, and, from the
 * first side's rank 0, "dynamic: ok MODE"; exits non-zero on failure.
 */
#include <mpi.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int wrank;
static int fails;

#define FAIL(...) do { \
	printf("rank %d: FAIL: ", wrank); printf(__VA_ARGS__); \
	printf("\n"); fflush(stdout); fails++; \
} while (0)

/* A failed call ends the test: what follows would only hang. */
#define CALL(x) do { \
	int rc_ = (x); \
	if (rc_ != MPI_SUCCESS) { \
		char s_[MPI_MAX_ERROR_STRING]; int l_ = 0; \
		MPI_Error_string(rc_, s_, &l_); \
		printf("rank %d: FAIL: %s:%d: %s: %s\n", wrank, __FILE__, \
		       __LINE__, #x, s_); \
		fflush(stdout); \
		MPI_Abort(MPI_COMM_WORLD, 1); \
	} \
} while (0)

enum { EAGER_N = 100, RNDV_N = 256 * 1024 }; /* ints: 400 B, 1 MiB */

/* Word i of the message from (side, rank) with tag. */
static int word(int side, int r, int tag, int i)
{
	unsigned w = ((unsigned)side * 131 + (unsigned)r * 7 + (unsigned)tag)
		     * 2654435761u + (unsigned)i;

	return (int)(w & 0x7fffffff);
}

static int tag_of(int r, int big)
{
	return 10 + 2 * r + big;
}

/* Side `me` (0 or 1) sends to every remote process if me == sender,
 * else receives every remote process's two messages by ANY_SOURCE. */
static void one_way(MPI_Comm inter, int me, int sender)
{
	int lrank, rsize, n;
	MPI_Status st;
	int *buf = malloc(RNDV_N * sizeof(int));
	int *seen;

	MPI_Comm_rank(inter, &lrank);
	MPI_Comm_remote_size(inter, &rsize);
	seen = calloc((size_t)rsize * 2, sizeof(int));
	if (!buf || !seen)
		CALL(MPI_ERR_NO_MEM);
	if (me == sender) {
		for (int d = 0; d < rsize; d++)
			for (int big = 0; big < 2; big++) {
				n = big ? RNDV_N : EAGER_N;
				for (int i = 0; i < n; i++)
					buf[i] = word(me, lrank,
						      tag_of(lrank, big), i);
				CALL(MPI_Send(buf, n, MPI_INT, d,
					      tag_of(lrank, big), inter));
			}
	} else {
		for (int k = 0; k < 2 * rsize; k++) {
			int src, tag, big, cnt;

			memset(buf, 0, RNDV_N * sizeof(int));
			CALL(MPI_Recv(buf, RNDV_N, MPI_INT, MPI_ANY_SOURCE,
				      MPI_ANY_TAG, inter, &st));
			src = st.MPI_SOURCE;
			tag = st.MPI_TAG;
			big = (tag - 10) % 2;
			MPI_Get_count(&st, MPI_INT, &cnt);
			if (src < 0 || src >= rsize ||
			    tag != tag_of(src, big) || seen[2 * src + big]++) {
				FAIL("side %d: unexpected source %d tag %d",
				     me, src, tag);
				continue;
			}
			n = big ? RNDV_N : EAGER_N;
			if (cnt != n) {
				FAIL("side %d: from %d tag %d: %d ints, want %d",
				     me, src, tag, cnt, n);
				continue;
			}
			for (int i = 0; i < n; i++)
				if (buf[i] != word(1 - me, src, tag, i)) {
					FAIL("side %d: from %d tag %d: word %d is %d, want %d",
					     me, src, tag, i, buf[i],
					     word(1 - me, src, tag, i));
					break;
				}
		}
	}
	free(seen);
	free(buf);
}

/* Both ways over inter; side 0's rank 0 reports. */
static void traffic(MPI_Comm inter, int side, const char *mode)
{
	int lrank, all = 0;

	CALL(MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN));
	one_way(inter, side, 0);
	one_way(inter, side, 1);
	/* every process's verdict, on both sides */
	CALL(MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, inter));
	MPI_Comm_rank(inter, &lrank);
	if (side == 0 && lrank == 0 && !fails && !all)
		printf("dynamic: ok %s\n", mode);
	if (all)
		fails++;
	fflush(stdout);
}

static void spawn(char *prog)
{
	char *args[] = { "child", NULL };
	int errs[2];
	MPI_Comm inter;

	CALL(MPI_Comm_spawn(prog, args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
			    &inter, errs));
	traffic(inter, 0, "spawn");
	CALL(MPI_Comm_disconnect(&inter));
}

static void child(void)
{
	MPI_Comm parent;

	MPI_Comm_get_parent(&parent);
	if (parent == MPI_COMM_NULL) {
		FAIL("started as a child without a parent");
		return;
	}
	traffic(parent, 1, "spawn");
	CALL(MPI_Comm_disconnect(&parent));
}

static void accept_connect(void)
{
	char port[MPI_MAX_PORT_NAME];
	int wsize, side;
	MPI_Comm half, inter;

	MPI_Comm_size(MPI_COMM_WORLD, &wsize);
	if (wsize < 2) {
		FAIL("accept needs at least 2 ranks");
		return;
	}
	side = wrank >= wsize / 2;
	CALL(MPI_Comm_split(MPI_COMM_WORLD, side, wrank, &half));
	memset(port, 0, sizeof(port));
	if (wrank == 0)
		CALL(MPI_Open_port(MPI_INFO_NULL, port));
	/* the name goes from world rank 0 to the other half's first */
	CALL(MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, MPI_COMM_WORLD));
	if (side == 0)
		CALL(MPI_Comm_accept(port, MPI_INFO_NULL, 0, half, &inter));
	else
		CALL(MPI_Comm_connect(port, MPI_INFO_NULL, 0, half, &inter));
	traffic(inter, side, "accept");
	CALL(MPI_Comm_disconnect(&inter));
	if (wrank == 0)
		CALL(MPI_Close_port(port));
	CALL(MPI_Comm_free(&half));
}

/* Rank 0 of the server job: the port's name into path, whole. */
static void write_port(const char *port, const char *path)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fputs(port, f) < 0 || fclose(f) || rename(tmp, path)) {
		FAIL("cannot write the port name to %s", path);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

/* Rank 0 of the client job: the port's name from path, once it is
 * there (the server may start later). */
static void read_port(char *port, const char *path)
{
	FILE *f = NULL;

	for (int i = 0; i < 600 && !(f = fopen(path, "r")); i++)
		usleep(100 * 1000);
	if (!f || !fgets(port, MPI_MAX_PORT_NAME, f)) {
		FAIL("no port name in %s after 60 s", path);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	fclose(f);
}

/* Two mpiruns: the server job (side 0) accepts, the client (1) connects. */
static void two_jobs(int side, const char *path)
{
	char port[MPI_MAX_PORT_NAME];
	MPI_Comm inter;

	memset(port, 0, sizeof(port));
	if (side == 0 && wrank == 0) {
		CALL(MPI_Open_port(MPI_INFO_NULL, port));
		write_port(port, path);
	} else if (wrank == 0) {
		read_port(port, path);
	}
	CALL(MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, MPI_COMM_WORLD));
	if (side == 0)
		CALL(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
				     &inter));
	else
		CALL(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
				      &inter));
	traffic(inter, side, "jobs");
	CALL(MPI_Comm_disconnect(&inter));
	if (side == 0 && wrank == 0)
		CALL(MPI_Close_port(port));
}

/* Ranks 0 and 1: a connected TCP socket between them, or -1. */
static int socket_pair_end(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int s, fd = -1, port = 0;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (wrank == 0) {
		s = socket(AF_INET, SOCK_STREAM, 0);
		if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) ||
		    listen(s, 1) ||
		    getsockname(s, (struct sockaddr *)&a, &len))
			port = -1;
		else
			port = ntohs(a.sin_port);
		CALL(MPI_Send(&port, 1, MPI_INT, 1, 99, MPI_COMM_WORLD));
		if (port > 0)
			fd = accept(s, NULL, NULL);
		if (s >= 0)
			close(s);
	} else {
		CALL(MPI_Recv(&port, 1, MPI_INT, 0, 99, MPI_COMM_WORLD,
			      MPI_STATUS_IGNORE));
		if (port <= 0)
			return -1;
		a.sin_port = htons((uint16_t)port);
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))) {
			close(fd);
			fd = -1;
		}
	}
	return fd;
}

static void join(void)
{
	MPI_Comm inter;
	int fd;

	if (wrank > 1)
		return;
	fd = socket_pair_end();
	if (fd < 0) {
		FAIL("no TCP socket between ranks 0 and 1 on 127.0.0.1");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	CALL(MPI_Comm_join(fd, &inter));
	close(fd);
	traffic(inter, wrank, "join");
	CALL(MPI_Comm_disconnect(&inter));
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (!strcmp(mode, "spawn"))
		spawn(argv[0]);
	else if (!strcmp(mode, "child"))
		child();
	else if (!strcmp(mode, "accept"))
		accept_connect();
	else if (!strcmp(mode, "join"))
		join();
	else if (argc > 2 && !strcmp(mode, "server"))
		two_jobs(0, argv[2]);
	else if (argc > 2 && !strcmp(mode, "client"))
		two_jobs(1, argv[2]);
	else
		FAIL("usage: mpi_dynamic spawn|accept|join|server FILE|client FILE");
	MPI_Finalize();
	return fails ? 1 : 0;
}
