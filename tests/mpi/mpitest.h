/*
 * mpitest.h - shared helpers of the MPI test programs (tests/mpi/).
 *
 * The programs are plain MPI: they must pass over pml ob1 (the reference)
 * and over pml cm + mtl tm alike.  Every program checks its results
 * exactly, prints what it checked (rank 0, "checked: ..." lines), prints
 * each mismatch as "rank R: FAIL: ..." and exits non-zero if any rank
 * found one.  run-mpi-tests.sh turns the exit status into one TAP line.
 *
 * Errors come back as codes (MPI_ERRORS_RETURN on MPI_COMM_WORLD and on
 * every communicator made from it): MT_CALL() aborts the job with the
 * call, file and line when an MPI call fails unexpectedly.  Waits that a
 * broken implementation could turn into a hang go through mt_wait(),
 * which gives up after MT_HANG_SECONDS with a message naming what it
 * waited for, before mpirun's timeout kills the job silently.
 *
 * Exit status 77 means "skipped" (e.g. MPI_THREAD_MULTIPLE not provided).
 */
#ifndef TESTS_MPI_MPITEST_H
#define TESTS_MPI_MPITEST_H

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MT_SKIP 77
#ifndef MT_HANG_SECONDS
#define MT_HANG_SECONDS 25.0
#endif
#define MT_MAX_FAILS 20

static int mt_rank = -1, mt_size = 0;
static int mt_fails;
static const char *mt_prog = "mpitest";
static char mt_phase[160] = "init";
static double mt_t0;

static inline double mt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline void mt_set_phase(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static inline void mt_set_phase(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(mt_phase, sizeof(mt_phase), fmt, ap);
	va_end(ap);
}

static inline void mt_abort(const char *fmt, ...)
	__attribute__((format(printf, 1, 2), noreturn));
static inline void mt_abort(const char *fmt, ...)
{
	va_list ap;

	printf("rank %d: FAIL: %s: [%s] ", mt_rank, mt_prog, mt_phase);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" (aborting)\n");
	fflush(stdout);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

/* A mismatch: printed, counted, not fatal (too many are). */
static inline void mt_fail(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static inline void mt_fail(const char *fmt, ...)
{
	va_list ap;

	printf("rank %d: FAIL: %s: [%s] ", mt_rank, mt_prog, mt_phase);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (++mt_fails >= MT_MAX_FAILS)
		mt_abort("too many failures");
}

/* A note from any rank (known quirks that are tolerated, ...). */
static inline void mt_note(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static inline void mt_note(const char *fmt, ...)
{
	va_list ap;

	printf("rank %d: note: ", mt_rank);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

/* What was checked, printed once (by rank 0). */
static inline void mt_checked(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static inline void mt_checked(const char *fmt, ...)
{
	va_list ap;

	if (mt_rank != 0)
		return;
	printf("checked: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" [%.2f s]\n", mt_now() - mt_t0);
	fflush(stdout);
}

static inline const char *mt_errstr(int rc)
{
	static char msg[MPI_MAX_ERROR_STRING + 32];
	char s[MPI_MAX_ERROR_STRING];
	int len = 0, cls = -1;

	MPI_Error_class(rc, &cls);
	MPI_Error_string(rc, s, &len);
	snprintf(msg, sizeof(msg), "error %d (class %d): %s", rc, cls, s);
	return msg;
}

#define MT_CALL(call)                                                      \
	do {                                                               \
		int mt_rc_ = (call);                                       \
		if (mt_rc_ != MPI_SUCCESS)                                 \
			mt_abort("%s:%d: %s returned %s", __FILE__,        \
				 __LINE__, #call, mt_errstr(mt_rc_));      \
	} while (0)

#define MT_CHECK(cond, ...)                                                \
	do {                                                               \
		if (!(cond))                                               \
			mt_fail(__VA_ARGS__);                              \
	} while (0)

static inline void mt_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * Progresses MPI (MPI_Iprobe on a tag nobody uses) while sleeping ms,
 * so that sends in flight get to the peer before the next step.
 */
static inline void mt_progress_ms(MPI_Comm comm, int ms)
{
	double end = mt_now() + ms / 1000.0;
	int flag;

	while (mt_now() < end) {
		MPI_Iprobe(MPI_ANY_SOURCE, 32000, comm, &flag,
			   MPI_STATUS_IGNORE);
		usleep(200);
	}
}

/* MPI_Wait with a deadline: returns MPI_Test's error code. */
static inline int mt_wait(MPI_Request *req, MPI_Status *st, const char *what)
{
	double end = mt_now() + MT_HANG_SECONDS;
	unsigned spins = 0;
	int flag = 0, rc;

	for (;;) {
		rc = MPI_Test(req, &flag, st);
		if (rc != MPI_SUCCESS || flag)
			return rc;
		if ((++spins & 1023) == 0) {
			if (mt_now() > end)
				mt_abort("no completion after %.0f s: %s",
					 MT_HANG_SECONDS, what);
			usleep(50);
		}
	}
}

/* MPI_Waitall with a deadline. */
static inline int mt_waitall(int n, MPI_Request *reqs, MPI_Status *sts,
			     const char *what)
{
	double end = mt_now() + MT_HANG_SECONDS;
	unsigned spins = 0;
	int flag = 0, rc;

	for (;;) {
		rc = MPI_Testall(n, reqs, &flag, sts);
		if (rc != MPI_SUCCESS || flag)
			return rc;
		if ((++spins & 1023) == 0) {
			if (mt_now() > end)
				mt_abort("no completion after %.0f s: %s",
					 MT_HANG_SECONDS, what);
			usleep(50);
		}
	}
}

/* Waits until MPI_Iprobe(src, tag, comm) finds a message (it has arrived). */
static inline void mt_wait_arrived(int src, int tag, MPI_Comm comm,
				   MPI_Status *st, const char *what)
{
	double end = mt_now() + MT_HANG_SECONDS;
	int flag = 0;

	for (;;) {
		MT_CALL(MPI_Iprobe(src, tag, comm, &flag, st));
		if (flag)
			return;
		if (mt_now() > end)
			mt_abort("MPI_Iprobe found nothing after %.0f s: %s",
				 MT_HANG_SECONDS, what);
		usleep(20);
	}
}

/* ---- data patterns ------------------------------------------------------- */

/* Byte i of the pattern named by key: differs between keys and offsets. */
static inline unsigned char mt_byte(uint64_t key, size_t i)
{
	uint64_t x = key * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;

	x ^= x >> 29;
	x *= 0x94D049BB133111EBull;
	x ^= x >> 32;
	return (unsigned char)x;
}

/*
 * ThreadSanitizer (a --enable-tsan build): Open MPI, not instrumented,
 * hands a buffer back to the program at its operation's completion
 * through atomics TSan does not see, so mtl tm says at each completion
 * that it is done with the message's bytes (ompi_btl_tm/mtl/mtl_tm_tsan.h)
 * and the program takes the buffer back here: mt_fill and mt_verify only
 * touch a buffer whose operations completed.
 */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
#define mt_handed_back(buf) __tsan_acquire((void *)(buf))
#else
#define mt_handed_back(buf) ((void)0)
#endif

static inline void mt_fill(void *buf, size_t n, uint64_t key)
{
	unsigned char *p = buf;

	mt_handed_back(buf);

	for (size_t i = 0; i < n; i++)
		p[i] = mt_byte(key, i);
}

/* Index of the first byte that differs from the pattern, or -1. */
static inline long mt_verify(const void *buf, size_t n, uint64_t key)
{
	const unsigned char *p = buf;

	mt_handed_back(buf);
	for (size_t i = 0; i < n; i++)
		if (p[i] != mt_byte(key, i))
			return (long)i;
	return -1;
}

/* Checks buf against the pattern; reports the first difference. */
static inline int mt_check_data(const void *buf, size_t n, uint64_t key,
				const char *what)
{
	long bad = mt_verify(buf, n, key);

	if (bad < 0)
		return 1;
	mt_fail("%s: data differs at byte %ld of %zu (got 0x%02x, want 0x%02x)",
		what, bad, n, ((const unsigned char *)buf)[bad],
		mt_byte(key, (size_t)bad));
	return 0;
}

/* Index of the first byte in [0, n) not equal to c, or -1. */
static inline long mt_find_not(const void *buf, size_t n, unsigned char c)
{
	const unsigned char *p = buf;

	for (size_t i = 0; i < n; i++)
		if (p[i] != c)
			return (long)i;
	return -1;
}

static inline void *mt_malloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		mt_abort("out of memory (%zu bytes)", n);
	return p;
}

/* Deterministic random numbers (the same on every rank for one seed). */
static inline uint64_t mt_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* The run's seed: MPITEST_SEED if set, else from the clock; rank 0's wins. */
static inline uint64_t mt_seed(void)
{
	const char *s = getenv("MPITEST_SEED");
	unsigned long long v;

	v = s && *s ? strtoull(s, NULL, 0) : (unsigned long long)time(NULL);
	MT_CALL(MPI_Bcast(&v, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD));
	if (mt_rank == 0) {
		printf("seed: %llu (rerun with MPITEST_SEED=%llu)\n", v, v);
		fflush(stdout);
	}
	return v;
}

/* The configuration the runner names (ob1, tm, ...), "" when run by hand. */
static inline const char *mt_config(void)
{
	const char *s = getenv("MPITEST_CONFIG");

	return s ? s : "";
}

/*
 * Is this run over pml ob1?  (mpirun --mca pml ob1 exports OMPI_MCA_pml;
 * the runner also says MPITEST_CONFIG=ob1.)  Used only to tolerate known
 * ob1 bugs, which are reported as notes, never silently.
 */
static inline int mt_is_ob1(void)
{
	const char *pml = getenv("OMPI_MCA_pml");

	return (pml && !strcmp(pml, "ob1")) || !strcmp(mt_config(), "ob1");
}

/* ---- set-up and tear-down ------------------------------------------------ */

static inline void mt_setup(const char *prog, int min_ranks)
{
	mt_prog = prog;
	mt_t0 = mt_now();
	MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (mt_size < min_ranks) {
		if (mt_rank == 0)
			printf("%s: needs at least %d ranks, has %d\n", prog,
			       min_ranks, mt_size);
		MPI_Finalize();
		exit(MT_SKIP);
	}
}

static inline void mt_init(int *argc, char ***argv, const char *prog,
			   int min_ranks)
{
	MPI_Init(argc, argv);
	mt_setup(prog, min_ranks);
}

/* Sums the failures of all ranks; finalizes; returns the exit status. */
static inline int mt_finish(void)
{
	int total = 0;

	mt_set_phase("finish");
	MT_CALL(MPI_Allreduce(&mt_fails, &total, 1, MPI_INT, MPI_SUM,
			      MPI_COMM_WORLD));
	if (mt_rank == 0) {
		if (total)
			printf("%s: %d failure(s) over %d ranks\n", mt_prog,
			       total, mt_size);
		else
			printf("%s: all checks passed on %d ranks\n", mt_prog,
			       mt_size);
		fflush(stdout);
	}
	MPI_Finalize();
	return total ? 1 : 0;
}

/* A communicator of our own, with errors returned. */
static inline MPI_Comm mt_dup(MPI_Comm comm)
{
	MPI_Comm c;

	MT_CALL(MPI_Comm_dup(comm, &c));
	MT_CALL(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
	return c;
}

static inline int mt_count(const MPI_Status *st, MPI_Datatype t)
{
	int n = -2;

	MPI_Get_count(st, t, &n);
	return n;
}

/* The error class of rc. */
static inline int mt_class(int rc)
{
	int cls = -1;

	MPI_Error_class(rc, &cls);
	return cls;
}

#endif /* TESTS_MPI_MPITEST_H */
