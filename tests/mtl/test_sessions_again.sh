#!/bin/bash
# test_sessions_again.sh - the MTL initialised again in one process (TAP):
# 100 jobs of 3 ranks, each running tests/mtl/mpi_sessions' 3 sessions in
# turn over mtl tm, every one of which must pass.  A second
# initialisation used to read a peer's address of the first now and then
# (1 job in 3 to 25; mtl/mtl_tm_modex.c).  The ranks wait for each other
# between two sessions outside MPI (mpi_sessions N DIR), which keeps
# PMIx 5.0's drift between sessions (openpmix#4113) out of what a job
# measures as far as a program can.  Skipped against Open MPI 4.1, which
# has no sessions.
# What each session runs: tests/mtl/mpi_sessions.c, test_sessions.sh.
set -u

builddir=${top_builddir:-.}
libs=$(cd "$builddir" && pwd)/.libs
prog=$(cd "$builddir" && pwd)/tests/mtl/mpi_sessions
MPIRUN=${MPIRUN:-mpirun}
export OMPI_MCA_mca_base_component_path="$libs:SYS_DEFAULT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

n=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -f "$libs/mca_mtl_tm.so" ]; then
	echo "1..0 # SKIP $libs/mca_mtl_tm.so not built"
	exit 0
fi
probe=$("$prog" probe)
case $probe in
"sessions: SKIP "*) echo "1..0 # SKIP ${probe#sessions: SKIP }"; exit 0 ;;
"sessions: available") ;;
*) echo "1..1"; echo "not ok 1 - mpi_sessions probe: '$probe'"; exit 0 ;;
esac
echo "1..1"

tm=(--mca pml cm --mca mtl tm)
# 100 jobs, 3 sessions each: the MTL initialised 3 times per process
again=0 bad=
for i in $(seq 100); do
	sync=$(mktemp -d "$tmp/sync.XXXXXX")
	timeout -k 10 120 "$MPIRUN" --oversubscribe -np 3 \
		-x OMPI_MCA_mca_base_component_path "${tm[@]}" "$prog" 3 \
		"$sync" > "$tmp/again" 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q '^sessions: ok round 3: persistent' \
		"$tmp/again" && grep -q '^sessions: ok$' "$tmp/again" &&
	   ! grep -q FAIL "$tmp/again"; then
		again=$((again + 1))
	elif [ -z "$bad" ]; then
		bad="job $i (mpirun status $rc)"
		cp "$tmp/again" "$tmp/again.bad"
	fi
done
n=$((n + 1))
if [ $again = 100 ]; then
	echo "ok $n - sessions over mtl tm: 100 jobs of 3 ranks, 3 sessions in turn each, all pass"
else
	echo "not ok $n - sessions over mtl tm: $again of 100 jobs (3 ranks, 3 sessions in turn) pass; first failure: $bad"
	grep -av 'bad prefix\|pmix_mca_\|^.\{0,2\}or$' "$tmp/again.bad" |
		sed 's/^/# /' | head -n 30
fi
exit 0
