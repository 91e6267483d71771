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
 * Only that: a request or buffer touched after its completion, or two
 * threads on one live request, are still races to TSan.
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
/* libtsan's annotation interface (no header of its own in gcc 12) */
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);

static inline void mtl_tm_req_got(void *req)
{
	__tsan_acquire(req);
}

static inline void mtl_tm_req_done(void *req, const void *buf)
{
	if (buf)
		__tsan_release((void *)buf);
	__tsan_release(req);
}
#else
/* (macros: the arguments are not even evaluated) */
#define mtl_tm_req_got(req) ((void)0)
#define mtl_tm_req_done(req, buf) ((void)0)
#endif

#endif /* MTL_TM_TSAN_H */
