#!/bin/bash
# test_connect.sh - connect on first use, as MPI sees it (TAP): in a
# 4-rank job rank 0 sends to rank 2 only (rank 2 receives from
# MPI_ANY_SOURCE); mtl_tm_connected_peers reads 1 on ranks 0 and 2 and 0
# on ranks 1 and 3.  Run with Open MPI's lazy add_procs (the default
# mpi_add_procs_cutoff 0: a process is added at its first use) and with
# every process added at MPI_Init (a cutoff above the job's size): the
# connections are the same.
set -u

. "$(dirname "$0")/mpi_tap.sh"

for cutoff in 0 1024; do
	log=$tmp/connect$cutoff
	mpirun_log 120 "$log" -np 4 --mca pml cm --mca mtl tm \
		--mca mpi_add_procs_cutoff $cutoff "$prog/mpi_connect"
	rc=$?
	what="mpi_add_procs_cutoff $cutoff"
	check "$what: the job ran to the end (exit $rc)" \
		bash -c "[ $rc = 0 ] && grep -q '^connect: done' '$log'"
	check "$what: no rank held a connection before its first message" \
		test "$(grep -c '^rank [0-9] before connected_peers 0$' "$log")" = 4
	check "$what: rank 2 received rank 0's message through MPI_ANY_SOURCE" \
		grep -q '^rank 2 got 4242 from rank 0$' "$log"
	for r in 0 1 2 3; do
		want=0
		[ $r = 0 ] || [ $r = 2 ] && want=1
		got=$(sed -n "s/^rank $r connected_peers \([0-9]*\)$/\1/p" "$log")
		check "$what: rank $r made $want connection(s) (read ${got:-nothing})" \
			test "${got:-x}" = $want
	done
	if [ $rc != 0 ]; then
		sed 's/^/# /' "$log" | head -n 30
	fi
done
echo "1..$n"
exit 0
