#!/bin/bash
# test_sessions.sh - MPI-4 on Open MPI 5 over mtl tm (TAP): the sessions
# model (tests/mtl/mpi_sessions: communicators from "mpi://WORLD" with
# different local ids on different ranks, two of them with the same tags,
# MPI_Isendrecv, persistent collectives), and the
# world model's MPI-4 calls (mpi_sessions world: partitioned send/receive,
# MPI_Isendrecv, persistent collectives), and a second session at
# MPI_THREAD_MULTIPLE after one at MPI_THREAD_SINGLE (mpi_sessions
# threads: the MTL's entry points for MPI threads from its first
# communicator, mtl_tm.h; 4 threads per rank).  pml ob1 runs the sessions
# program first, as the reference, twice in one process (two sessions one
# after the other).  The MTL initialised again, many times over:
# test_sessions_again.sh.  Skipped against Open MPI 4.1, which has no
# sessions.
set -u

. "$(dirname "$0")/mpi_tap.sh"
prog=$prog/mpi_sessions
skip_without_sessions "$prog"
echo "1..7"

# check "what" np log mpirun-args... (the program's args last)
check() {
	local what=$1 np=$2 log=$tmp/$3 rc
	shift 3
	timeout 120 "$MPIRUN" --oversubscribe -np "$np" \
		-x OMPI_MCA_mca_base_component_path "$@" > "$log" 2>&1
	rc=$?
	n=$((n + 1))
	if [ $rc = 0 ] && grep -q '^sessions: ok$' "$log" &&
	   ! grep -q FAIL "$log"; then
		echo "ok $n - $what"
		grep '^sessions: ok ' "$log" | sed 's/^/#   /'
	else
		echo "not ok $n - $what (mpirun status $rc)"
		grep -av 'bad prefix\|pmix_mca_\|^.\{0,2\}or$' "$log" |
			sed 's/^/# /' | head -n 30
	fi
}

tm=(--mca pml cm --mca mtl tm)
check "sessions over pml ob1 (the reference, 3 ranks, two sessions in turn)" \
	3 ob1 --mca pml ob1 "$prog" 2 "$(mktemp -d "$tmp/sync.XXXXXX")"
check "sessions over mtl tm (3 ranks: odd ranks' ids differ)" 3 tm3 \
	"${tm[@]}" "$prog"
check "sessions over mtl tm (4 ranks)" 4 tm4 "${tm[@]}" "$prog"
check "sessions over mtl tm, soft HCA squeezed to 1 tag entry" 3 small \
	"${tm[@]}" --mca mtl_tm_softhca_max_num_tags 1 "$prog"
check "world model over mtl tm: partitioned, MPI_Isendrecv, persistent collectives (3 ranks)" \
	3 world "${tm[@]}" "$prog" world
# A second session at MPI_THREAD_MULTIPLE after the MTL's init without
# MPI threads: every rank must say it took the general entry points
# (mtl_tm.h), and 4 threads per rank exchange on it.
check "a session at MPI_THREAD_MULTIPLE after one at MPI_THREAD_SINGLE (3 ranks, 4 threads each)" \
	3 threads "${tm[@]}" --mca mtl_tm_verbose 10 "$prog" threads
n=$((n + 1))
seen=$(grep -c 'MPI threads: the general send and receive entry points' "$tmp/threads")
if [ "$seen" = 3 ]; then
	echo "ok $n - each of the 3 ranks took the entry points for MPI threads at the second session"
else
	echo "not ok $n - $seen of 3 ranks said they took the entry points for MPI threads"
	grep -a 'mtl tm: rank' "$tmp/threads" | sed 's/^/# /' | head -n 10
fi
exit 0
