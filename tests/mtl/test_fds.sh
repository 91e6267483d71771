#!/bin/bash
# test_fds.sh - the descriptors a rank of mtl tm holds (TAP; issue 24):
# in a 6-rank job rank 0 talks to 1, then 2, ... then 5 peers, and holds
# after each what it held after MPI_Init (nothing per peer; beyond what
# ob1 gains in the same program, should Open MPI open something); and
# after MPI_Init a rank of pml cm + mtl tm holds at most 3 descriptors
# more than one of pml ob1 (btl self,vader) in the same job: the soft
# HCA's handover socket and its two segments.  The rest, libucs's
# registration cache and its thread, comes with the first buffer
# registered per message, which 4-byte messages never need.
set -u

. "$(dirname "$0")/mpi_tap.sh"

np=6
declare -A args
args[tm]="--mca pml cm --mca mtl tm --mca btl self,vader"
args[ob1]="--mca pml ob1 --mca btl self,vader"
declare -A init grew
for t in ob1 tm; do
	log=$tmp/$t
	# shellcheck disable=SC2086
	mpirun_log 180 "$log" -np $np ${args[$t]} "$prog/mpi_fds"
	rc=$?
	check "$t: the job ran to the end (exit $rc)" \
		bash -c "[ $rc = 0 ] && grep -q '^fds: done' '$log'"
	init[$t]=$(sed -n 's/^rank 0 init fds \([0-9]*\)$/\1/p' "$log")
	after=$(sed -n 's/^rank 0 peers [0-9]* fds \([0-9]*\)$/\1/p' "$log" |
		tr '\n' ' ')
	most=$(echo "$after" | tr ' ' '\n' | sort -n | tail -n 1)
	grew[$t]=$(( ${most:-999} - ${init[$t]:-0} ))
	echo "# $t: rank 0 held ${init[$t]:-?} after MPI_Init, then after 1 to $((np - 1)) peers: ${after:-nothing}"
	[ $rc = 0 ] || sed 's/^/# /' "$log" | head -n 30
done
# (what Open MPI itself opens on first contact, if anything, ob1 shows too)
check "tm: talking to 1 to $((np - 1)) peers adds no descriptor (${grew[tm]} more at most; ob1: ${grew[ob1]})" \
	test "${grew[tm]}" -le "$(( ${grew[ob1]} > 0 ? ${grew[ob1]} : 0 ))"
extra=$(( ${init[tm]:-999} - ${init[ob1]:-0} ))
check "tm: at most 3 descriptors more than ob1 after MPI_Init (${init[tm]:-?} - ${init[ob1]:-?} = $extra)" \
	test "$extra" -le 3
if [ "$extra" -gt 3 ]; then
	diff <(sed -n 's/^rank 0 fd [0-9]* //p' "$tmp/ob1" | sed 's/\[.*//' | sort) \
	     <(sed -n 's/^rank 0 fd [0-9]* //p' "$tmp/tm" | sed 's/\[.*//' | sort) |
		sed 's/^/# /'
fi
echo "1..$n"
exit 0
