#!/bin/bash
# test_latency_mt.sh - bench/bench_latency_mt as a test (TAP): rank 0
# sends, rank 1 has 3 threads sitting in a blocking MPI_Recv of the same
# (source, tag) and answering with a blocking MPI_Send, under
# MPI_THREAD_MULTIPLE over pml cm + mtl tm (the built component).  The
# job ends and reports both sizes; never timed.  Its point is the TSan
# build (scripts/run-tests.sh --tsan), where any report fails the job:
# a blocking receive's request lives on the waiting thread's stack and
# another thread completes it (ompi_btl_tm/mtl/mtl_tm_tsan.h).
set -u

. "$(dirname "$0")/mpi_tap.sh"

bench=$(cd "$builddir" && pwd)/bench/bench_latency_mt
xargs=()
# a TSan run's settings (scripts/run-tests.sh --tsan)
for e in TSAN_OPTIONS UCX_MEM_MMAP_HOOK_MODE UCX_MODULES PMIX_MCA_gds; do
	[ -n "${!e+set}" ] && xargs+=(-x "$e")
done
mpirun_log 120 "$tmp/run" "${xargs[@]}" -np 2 --mca pml cm --mca mtl tm \
	"$bench" -k 1:3 -s 8,64K -t 300 -n 3
rc=$?
check "bench_latency_mt 1:3 over mtl tm ran to the end (exit $rc)" test $rc = 0
for s in 8 65536; do
	check "it reports $s B with 3 receiving threads" \
		grep -q "^bench=latency_mt size=$s .*threads=1:3" "$tmp/run"
done
if [ $rc != 0 ]; then
	grep -m3 '^SUMMARY: ThreadSanitizer' "$tmp/run" | sed 's/^/# /'
	tail -n 30 "$tmp/run" | sed 's/^/# | /'
fi
echo "1..$n"
exit 0
