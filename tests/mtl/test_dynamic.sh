#!/bin/bash
# test_dynamic.sh - processes that join a job after MPI_Init (TAP), issue 24
# item 4: tests/mtl/mpi_dynamic over an intercommunicator from
# MPI_Comm_spawn, MPI_Comm_accept/connect within one mpirun (the job split
# in two halves, the port name passed through MPI_COMM_WORLD), between two
# separately started mpiruns (the port name passed in a file) and
# MPI_Comm_join (a TCP socket on 127.0.0.1), each with eager and
# rendezvous messages received by MPI_ANY_SOURCE both ways, each message
# checked by source, tag, size and contents (a lost or misrouted one
# fails).  pml ob1 runs each first, as the reference that the program
# itself is right; then mtl tm.  Spawn runs once more from a parent job
# that exchanged its addresses twice (its ranks guessed differently), and
# once between jobs of two modes, which must fail at once, saying why.
#
# Two mpiruns meet only through a rendezvous both know, which differs by
# release: Open MPI 4.1's ompi-server (each mpirun given --ompi-server
# file:URI; without it 4.1's MPI_Comm_connect fails, MPI_ERR_INTERN),
# Open MPI 5.0's persistent PRRTE DVM (prte --report-uri, then each
# mpirun with --dvm file:URI and PRTEPROXY_USE_DVM=1).  Without that
# program the case is a SKIP that names it.
set -u

. "$(dirname "$0")/mpi_tap.sh"
prog=$prog/mpi_dynamic
trap 'rendezvous_stop; rm -rf "$tmp"' EXIT
echo "1..11"

# run what mode log mpirun-args...: mpirun -np 2 of mpi_dynamic mode,
# at most $limit s
limit=90
run() {
	local log=$tmp/$3
	shift 3
	timeout -k 10 $limit "$MPIRUN" --oversubscribe -np 2 \
		-x OMPI_MCA_mca_base_component_path "$@" > "$log" 2>&1
}

# verdict what mode log status: ok if the run said so and nothing failed
verdict() {
	local what=$1 mode=$2 log=$tmp/$3 rc=$4
	n=$((n + 1))
	if [ "$rc" = 0 ] && grep -q "^dynamic: ok $mode\$" "$log" &&
	   ! grep -q FAIL "$log"; then
		echo "ok $n - $what"
		return
	fi
	echo "not ok $n - $what (mpirun status $rc)"
	grep -av 'bad prefix\|pmix_mca_\|^.\{0,2\}or$' "$log" | sed 's/^/# /' |
		head -n 30
}

# check what mode log mpirun-args...
check() {
	local what=$1 mode=$2 log=$3 rc
	shift 3
	run "$what" "$mode" "$log" "$@" "$prog" "$mode"
	rc=$?
	verdict "$what" "$mode" "$log" $rc
}

# The rendezvous of two mpiruns (see the top): its pid in rdv_pid, the
# mpirun arguments in rdv_args; status 1 without its program, 2 if it
# did not start (why in rdv_why).
rdv_pid= rdv_args=() rdv_why=
rendezvous_start() {
	local major
	major=$("$MPIRUN" --version 2>/dev/null | sed -n 's/.*Open MPI) \([0-9]*\).*/\1/p' | head -n 1)
	rm -f "$tmp/uri"
	if [ "$major" = 4 ]; then
		command -v ompi-server >/dev/null ||
			{ rdv_why="Open MPI 4.1 without ompi-server"; return 1; }
		ompi-server --no-daemonize -r "$tmp/uri" > "$tmp/rdv.log" 2>&1 &
		rdv_args=(--ompi-server "file:$tmp/uri")
	else
		command -v prte >/dev/null ||
			{ rdv_why="Open MPI $major without prte (PRRTE's DVM)"; return 1; }
		export PRTE_ALLOW_RUN_AS_ROOT=1 PRTE_ALLOW_RUN_AS_ROOT_CONFIRM=1
		export PRTEPROXY_USE_DVM=1
		prte --report-uri "$tmp/uri" > "$tmp/rdv.log" 2>&1 &
		rdv_args=(--dvm "file:$tmp/uri")
	fi
	rdv_pid=$!
	for _ in $(seq 300); do
		[ -s "$tmp/uri" ] && return 0
		kill -0 $rdv_pid 2>/dev/null || break
		sleep 0.1
	done
	rdv_why="the rendezvous did not start: $(head -c 300 "$tmp/rdv.log")"
	return 2
}

rendezvous_stop() {
	[ -n "$rdv_pid" ] || return 0
	kill $rdv_pid 2>/dev/null
	wait $rdv_pid 2>/dev/null
	rdv_pid=
}

# jobs what log mpirun-args...: a server and a client job, two mpiruns
jobs_check() {
	local what=$1 log=$2 src rc
	shift 2
	rm -f "$tmp/port"
	run "$what" jobs "$log.server" "${rdv_args[@]}" "$@" "$prog" server \
		"$tmp/port" &
	src=$!
	run "$what" jobs "$log.client" "${rdv_args[@]}" "$@" "$prog" client \
		"$tmp/port"
	rc=$?
	wait $src || rc=$?
	# the server job's rank 0 reports; the client's log is shown too
	cat "$tmp/$log.client" >> "$tmp/$log.server"
	verdict "$what" jobs "$log.server" $rc
}

tm=(--mca pml cm --mca mtl tm)
# (loopback allowed: between two jobs ob1 goes over tcp)
ob1=(--mca pml ob1 --mca btl_tcp_if_include lo)
for mode in spawn accept join; do
	check "MPI_Comm_$mode over pml ob1 (the reference)" $mode ob1-$mode \
		"${ob1[@]}"
	check "MPI_Comm_$mode over mtl tm: 400 B and 1 MiB both ways, MPI_ANY_SOURCE" \
		$mode tm-$mode "${tm[@]}"
done
# A parent job whose ranks guessed differently (rank 0's soft HCA offers
# tag matching, the others' do not: mpirun's environment, which the
# children inherit, says SOFTHCA_NO_TM=1) exchanges addresses a second
# time: its children must reach it at the second exchange's address
# (mtl_tm_modex.c), not at the first one's, which is closed by then.
SOFTHCA_NO_TM=1 run "spawn from a job that exchanged its addresses twice" \
	spawn tm-again "${tm[@]}" --mca mtl_tm_verbose 10 \
	sh -c 'SOFTHCA_NO_TM=$((OMPI_COMM_WORLD_RANK != 0)) exec "$0" spawn' \
	"$prog"
rc=$?
verdict "MPI_Comm_spawn over mtl tm from a job that exchanged its addresses twice (its rank 0 with tag matching, the rest without)" \
	spawn tm-again $rc
n=$((n + 1))
again=$(grep -c 'not every rank guessed it: opening again' "$tmp/tm-again")
if [ "$again" = 2 ]; then
	echo "ok $n - ... both parents opened again (the case above is that case)"
else
	echo "not ok $n - ... both parents opened again: $again said so"
fi

# Each job agrees on its mode alone: parents without tag matching and
# children with it are refused, and the first send says so at once,
# naming the other process and both modes (before the check such a pair
# hung in 1 of 3 runs).  The program then calls MPI_Abort, after which
# Open MPI 5.0's mpirun does not always end: its time limit (status 124)
# is no failure here, the refusal is what is checked.
limit=60 run "spawn across two modes" spawn tm-modes "${tm[@]}" \
	sh -c 'SOFTHCA_NO_TM=1 exec "$0" spawn' "$prog"
rc=$?
n=$((n + 1))
if [ $rc != 0 ] && grep -q 'mtl tm: process .* of another job runs the soft HCA, this rank the soft HCA without tag matching: they cannot talk' "$tmp/tm-modes"; then
	echo "ok $n - MPI_Comm_spawn across two modes (parents without tag matching, children with): refused at once, naming both"
else
	echo "not ok $n - MPI_Comm_spawn across two modes (parents without tag matching, children with): refused at once, naming both (mpirun status $rc)"
	grep -av 'bad prefix\|pmix_mca_' "$tmp/tm-modes" | sed 's/^/# /' | head -n 20
fi

rendezvous_start
rdv=$?
if [ $rdv = 0 ]; then
	jobs_check "two mpiruns, MPI_Comm_accept/connect over pml ob1 (the reference)" \
		ob1-jobs "${ob1[@]}"
	jobs_check "two mpiruns, MPI_Comm_accept/connect over mtl tm: 400 B and 1 MiB both ways, MPI_ANY_SOURCE" \
		tm-jobs "${tm[@]}"
else
	# only a missing program is a SKIP: one that fails is a failure
	for k in "pml ob1" "mtl tm"; do
		n=$((n + 1))
		if [ $rdv = 1 ]; then
			echo "ok $n - two mpiruns over $k # SKIP $rdv_why"
		else
			echo "not ok $n - two mpiruns over $k: $rdv_why"
		fi
	done
fi
rendezvous_stop
exit 0
