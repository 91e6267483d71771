#!/bin/bash
# test_teardown.sh - a clean exit reports no error (TAP).  Every rank of
# 8-rank mpi_ring jobs prints its statistics line (mtl_tm_verbose 10);
# each must say "errors 0 (+0 at teardown)".  Before the last sends were
# retired ahead of MPI_Finalize's fence (mtl/mtl_tm_fini.c), a rank that
# finished late probed peers that had already torn down, and about two
# lines in three showed errors "at teardown".
#
#   TEARDOWN_RUNS=N   jobs (default 8)
set -u

. "$(dirname "$0")/mpi_tap.sh"
runs=${TEARDOWN_RUNS:-8}
np=8

echo "1..3"
lines=0 bad=0 failed=0 stuck=0
for i in $(seq "$runs"); do
	log=$tmp/ring$i
	if ! mpirun_log 120 "$log" -np $np --mca pml cm --mca mtl tm \
		--mca mtl_tm_verbose 10 "$prog/mpi_ring"; then
		failed=$((failed + 1))
		sed 's/^/# /' "$log" | tail -n 20
	fi
	lines=$((lines + $(grep -c 'mtl tm: rank [0-9]*: receives .* at teardown)' "$log")))
	bad=$((bad + $(grep 'mtl tm: rank [0-9]*: receives ' "$log" |
		grep -vc 'errors 0 (+0 at teardown)')))
	stuck=$((stuck + $(grep -c 'still in flight' "$log")))
	grep 'mtl tm: rank [0-9]*: receives ' "$log" |
		grep -v 'errors 0 (+0 at teardown)' |
		grep -oE 'rank [0-9]+:|errors [0-9]+ \(\+[0-9]+ at teardown\)' |
		paste -d' ' - - | sed "s/^/# job $i: /"
done
check "$runs jobs of $np ranks ran to the end ($failed failed)" \
	test "$failed" -eq 0
check "every rank printed its statistics line ($lines of $((runs * np)))" \
	test "$lines" -eq $((runs * np))
check "no line shows an error, at teardown or before ($bad of $lines do; $stuck finalize drains ran out of time)" \
	test "$bad" -eq 0 -a "$stuck" -eq 0
exit 0
