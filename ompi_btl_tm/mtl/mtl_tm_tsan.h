/*
 * mtl_tm_tsan.h - what ThreadSanitizer cannot see in Open MPI, said at
 * the MTL's edge (a --enable-tsan build; nothing at all in any other).
 *
 * Open MPI is not instrumented: its mutexes (pthread's) are seen, its
 * atomics are not.  pml cm hands a request to the MTL from its free
 * list, and takes it back there after the completion callback, with
 * atomics (opal_free_list, a lock-free LIFO under MPI threads); and the
 * thread in MPI_Wait learns of a completion from an atomic flag.  So for
 * TSan the thread that starts a recycled request races with the thread
 * that last completed it, and a program reading its receive buffer after
 * MPI_Wait races with the thread that wrote it.  The MTL says when it
 * gets a request (mtl_tm_req_got, first thing in each entry that pml cm
 * hands one: isend, irecv, imrecv) and when it lets go of it and of the
 * message's bytes in the user's memory (mtl_tm_req_done(req, buf), just
 * before pml cm's completion callback: nothing of ours touches either
 * after): an acquire, and releases on those addresses, the order pml
 * cm's free list and MPI's completion keep.  A program can then take the
 * buffer back with an acquire on its address (tests/mpi/mpitest.h).
 * A blocking receive's request lives on its caller's stack (pml cm),
 * which the caller reuses once Open MPI's wait returns; so a request on
 * the starting thread's stack also names that thread (its token), the
 * completion releases it, and every entry of the MTL a thread can come
 * back through (mtl_tm_tsan_enter: the entries, progress) acquires its
 * own.  Only that: a request or buffer touched after its completion, or
 * two threads on one live request, are still races to TSan.
 */
#ifndef MTL_TM_TSAN_H
#define MTL_TM_TSAN_H

#if defined(__SANITIZE_THREAD__)
#define MTL_TM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MTL_TM_TSAN 1
#endif
#endif

#ifdef MTL_TM_TSAN
#include <stdint.h>

/* libtsan's annotation interface (no header of its own in gcc 12) */
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);

/* this thread's token: the address of a thread-local byte (mtl_tm.c) */
extern __thread char mtl_tm_tsan_me;

static inline void mtl_tm_tsan_enter(void)
{
	__tsan_acquire(&mtl_tm_tsan_me);
}

/* A request pml cm hands us; *waiter: our token if it is on our stack
 * (within 1 MiB above this frame: a blocking call's), else NULL. */
static inline void mtl_tm_req_got(void *req, void **waiter)
{
	char here;

	mtl_tm_tsan_enter();
	__tsan_acquire(req);
	*waiter = (uintptr_t)req - (uintptr_t)&here < (1u << 20) ?
		  &mtl_tm_tsan_me : NULL;
}

static inline void mtl_tm_req_done(void *req, const void *buf, void *waiter)
{
	if (buf)
		__tsan_release((void *)buf);
	if (waiter)
		__tsan_release(waiter);
	__tsan_release(req);
}
#else
/* (macros: the arguments are not even evaluated) */
#define mtl_tm_tsan_enter() ((void)0)
#define mtl_tm_req_got(req, waiter) ((void)0)
#define mtl_tm_req_done(req, buf, waiter) ((void)0)
#endif

#endif /* MTL_TM_TSAN_H */
