#!/bin/bash
# test_jobs.sh - whole MPI jobs over mtl tm and the soft HCA, as a user
# runs them (TAP): jobs killed with SIGKILL mid-traffic leave nothing in
# /dev/shm, two jobs run at the same time, and two jobs in separate PID
# namespaces (same process ids, one /dev/shm) run side by side.
#
#   KILLED_RUNS=N   killed 4-rank jobs (default 20)
set -u

. "$(dirname "$0")/mpi_tap.sh"
runs=${KILLED_RUNS:-20}
tm=(--oversubscribe -x OMPI_MCA_mca_base_component_path --mca pml cm
    --mca mtl tm)
softtm_files() { find /dev/shm -maxdepth 1 -name '*softtm*' 2>/dev/null | wc -l; }
shm_files() { find /dev/shm -maxdepth 1 -mindepth 1 2>/dev/null | wc -l; }

[ "${1:-}" = --private-shm ] || echo "1..3"

# ---- killed jobs -------------------------------------------------------
# In a mount namespace of their own with a fresh /dev/shm where possible,
# so that what is counted is exactly what these jobs left (other users of
# the machine come and go in the shared one).
killed_jobs() { # prints "<killed> <entries left> <softtm entries left>"
	local before before_tm killed=0 i log job victim
	before=$(shm_files)
	before_tm=$(softtm_files)
	for i in $(seq "$runs"); do
		log=$tmp/kill$i
		timeout 60 "$MPIRUN" "${tm[@]}" -np 4 "$prog/mpi_traffic" 30 \
			> "$log" 2>&1 &
		job=$!
		# wait for every rank to be in traffic, then kill one of them
		for _ in $(seq 400); do
			[ "$(grep -c ' started$' "$log")" -ge 4 ] && break
			sleep 0.05
		done
		victim=$(sed -n 's/^rank 2 pid \([0-9]*\) started$/\1/p' "$log")
		if [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null; then
			killed=$((killed + 1))
		fi
		wait "$job" 2>/dev/null
	done
	echo "$killed $(($(shm_files) - before)) $(($(softtm_files) - before_tm))"
}
if [ "${1:-}" = --private-shm ]; then
	mount -t tmpfs -o mode=1777 softtm-test /dev/shm || exit 1
	killed_jobs
	exit 0
fi
where="a private /dev/shm"
res=$(unshare -m --propagation private bash "$0" --private-shm 2>/dev/null | tail -n 1)
if [ -z "$res" ]; then
	where="the shared /dev/shm (no private mount namespace)"
	res=$(killed_jobs)
fi
read -r killed left left_tm <<< "$res"
msg="$runs jobs of 4 ranks, one rank SIGKILLed mid-traffic ($killed killed): $left entries left in $where ($left_tm named softtm)"
if [ "$killed" -eq "$runs" ] && { [ "$left" -eq 0 ] ||
	{ [ "$where" != "a private /dev/shm" ] && [ "$left_tm" -eq 0 ]; }; }; then
	ok "$msg"
else
	notok "$msg"
fi

# ---- two jobs at once --------------------------------------------------
timeout 120 "$MPIRUN" "${tm[@]}" -np 2 "$prog/mpi_traffic" 2 > "$tmp/c1" 2>&1 &
j1=$!
timeout 120 "$MPIRUN" "${tm[@]}" -np 2 "$prog/mpi_traffic" 2 > "$tmp/c2" 2>&1 &
j2=$!
wait $j1; r1=$?
wait $j2; r2=$?
if [ $r1 = 0 ] && [ $r2 = 0 ] && grep -q 'traffic: ok' "$tmp/c1" &&
   grep -q 'traffic: ok' "$tmp/c2"; then
	ok "two jobs at the same time both run"
else
	notok "two jobs at the same time both run (exit $r1, $r2)"
	sed 's/^/# /' "$tmp/c1" "$tmp/c2" | head -n 30
fi

# ---- two jobs in separate PID namespaces --------------------------------
# Each namespace numbers its processes from 1, so the ranks of both jobs
# have the same pids; /dev/shm is shared.  Open MPI's session directory
# is keyed by pid too, so each job gets its own, through TMPDIR, which
# ORTE (4.1), PRRTE and PMIx (5.0) all start from.
pidns() { # pidns tag np
	mkdir -p "$tmp/ns$1"
	TMPDIR=$tmp/ns$1 timeout 120 unshare -p -f --mount-proc \
		"$MPIRUN" "${tm[@]}" \
		-np "$2" "$prog/mpi_traffic" 2 > "$tmp/ns$1.log" 2>&1
}
if ! unshare -p -f --mount-proc true 2>/dev/null; then
	ok "two jobs in separate PID namespaces # SKIP unshare -p not permitted"
else
	pidns a 3 & p1=$!
	pidns b 3 & p2=$!
	wait $p1; r1=$?
	wait $p2; r2=$?
	if [ $r1 = 0 ] && [ $r2 = 0 ] && grep -q 'traffic: ok' "$tmp/nsa.log" &&
	   grep -q 'traffic: ok' "$tmp/nsb.log"; then
		ok "two jobs in separate PID namespaces (same pids, one /dev/shm) run side by side"
	else
		notok "two jobs in separate PID namespaces run side by side (exit $r1, $r2)"
		sed 's/^/# /' "$tmp/nsa.log" "$tmp/nsb.log" | head -n 30
	fi
fi
exit 0
