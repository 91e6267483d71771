#!/bin/bash
# test_sessions_again.sh - the MTL initialised again in one process (TAP):
# 100 jobs of 3 ranks, each running tests/mtl/mpi_sessions' 3 sessions in
# turn over mtl tm, none of which may fail in the MTL.  A second
# initialisation used to read a peer's address of the first now and then
# (1 job in 3 to 25; mtl/mtl_tm_modex.c).  The ranks wait for each other
# between two sessions outside MPI (mpi_sessions N DIR), which keeps
# PMIx 5.0's drift between sessions (openpmix#4113) out of what a job
# measures as far as a program can.  Skipped against Open MPI 4.1, which
# has no sessions.
# What each session runs: tests/mtl/mpi_sessions.c, test_sessions.sh.
set -u

. "$(dirname "$0")/mpi_tap.sh"
prog=$prog/mpi_sessions
skip_without_sessions "$prog"
echo "1..1"

tm=(--mca pml cm --mca mtl tm)
# 100 jobs, 3 sessions each: the MTL initialised 3 times per process.
# A failed job is the MTL's when the MTL or the soft HCA said anything
# (they speak only of errors), or a check of the program failed (a FAIL
# line not about a session's or communicator's creation); otherwise it is
# Open MPI's own drift between sessions (the fence hangs or
# MPI_Session_init fails with nothing from this MTL: pml ob1 fails that
# way in 3 to 4 jobs in 100 on Debian 13's Open MPI 5.0.7 / PMIx 5.0.7).
# Pass: none of the MTL's, and at most 10 of Open MPI's own (mtl tm: 3 in
# 100 at a load of 15 to 50 on 2 cores; a hang costs its 60 s).
drift_max=10
good=0 ours=0 drift=0 first_ours= first_drift=
for i in $(seq 100); do
	sync=$(mktemp -d "$tmp/sync.XXXXXX")
	timeout -k 10 60 "$MPIRUN" --oversubscribe -np 3 \
		-x OMPI_MCA_mca_base_component_path "${tm[@]}" "$prog" 3 \
		"$sync" > "$tmp/job" 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q '^sessions: ok round 3: persistent' \
		"$tmp/job" && grep -q '^sessions: ok$' "$tmp/job" &&
	   ! grep -q FAIL "$tmp/job"; then
		good=$((good + 1))
	elif grep -aq '^softhca: \|mtl tm: ' "$tmp/job" ||
	     grep -a 'FAIL' "$tmp/job" |
		grep -aqv 'MPI_Session_init\|MPI_Session_finalize\|MPI_Comm_create_from_group\|MPI_Group_from_session_pset'; then
		ours=$((ours + 1))
		[ -n "$first_ours" ] ||
			{ first_ours="job $i (mpirun status $rc)"; cp "$tmp/job" "$tmp/ours"; }
	else
		drift=$((drift + 1))
		[ -n "$first_drift" ] ||
			{ first_drift="job $i (mpirun status $rc)"; cp "$tmp/job" "$tmp/drift"; }
	fi
done
n=$((n + 1))
what="sessions over mtl tm: 100 jobs of 3 ranks, 3 sessions in turn each: $good pass, $ours fail in the MTL, $drift in Open MPI's own drift between sessions (at most $drift_max)"
if [ $ours = 0 ] && [ $drift -le $drift_max ]; then
	echo "ok $n - $what"
else
	echo "not ok $n - $what"
fi
for f in ours drift; do
	[ -f "$tmp/$f" ] || continue
	[ $f = ours ] && echo "# first failure in the MTL: $first_ours" ||
		echo "# first of Open MPI's own: $first_drift"
	grep -av 'bad prefix\|pmix_mca_\|^.\{0,2\}or$\|SYS_DEFAULT\|PMIx components\|properly:\|Check to make sure\|^-*$\|^ *$' \
		"$tmp/$f" | sed 's/^/#   /' | head -n 20
done
exit 0
