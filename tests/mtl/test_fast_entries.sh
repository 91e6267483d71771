#!/bin/bash
# test_fast_entries.sh - issue 26: the common small message takes the
# MTL's fast entries (mtl_tm.h, the two sets of entry points): a receive
# in place from a known source or from MPI_ANY_SOURCE is posted by
# mtl_tm_irecv alone (not mtl_tm_irecv_general), a blocking send in place
# to a known route by mtl_tm_send alone (not mtl_tm_send_general), and
# neither looks its route up (mtl_tm_route_slow) past the first message.
# Counted by callgrind (calls, deterministic, never timed) over
# bench/bench_mpi_self (one rank sending 8 B to itself), with a named
# source and with MPI_ANY_SOURCE ("any"): the general entries and the
# lookups at most once in a hundred fast calls (the first use), the fast
# ones once per message.  Skipped without valgrind.
set -u

. "$(dirname "$0")/mpi_tap.sh"
bin=$builddir/bench/bench_mpi_self
# shellcheck source=tests/callgrind.sh
. "${top_srcdir:-.}/tests/callgrind.sh"
callgrind_or_skip "$bin"
iters=300
echo "1..2"

# calls FILE NAME...: the calls of each function NAME in a callgrind file
calls() {
	local f=$1
	shift
	awk -v names="$*" '
		/^c?fn=\(/ {
			id = $1; sub(/^c?fn=/, "", id)
			if (NF > 1) { nm = $2; sub(/\x27.*/, "", nm); name[id] = nm }
			if ($0 ~ /^cfn=/) cur = id
			next
		}
		/^calls=/ { split($1, a, "="); c[cur] += a[2] }
		END {
			for (i in name) tot[name[i]] += c[i]
			k = split(names, want, " ")
			for (j = 1; j <= k; j++)
				printf "%d ", tot[want[j]]
			print ""
		}' "$f"
}

for mode in named:"" any:any; do
	name=${mode%%:*}
	arg=${mode#*:}
	out=$tmp/cg.$name
	# shellcheck disable=SC2086
	mpirun_log 300 "$tmp/log.$name" -np 1 --mca pml cm --mca mtl tm \
		-x TM_DEV_RCACHE=0 valgrind --tool=callgrind \
		--toggle-collect='mpi_loop*' --callgrind-out-file="$out" \
		"$bin" $iters 8 $arg
	rc=$?
	if [ $rc != 0 ] || [ ! -s "$out" ]; then
		notok "$name: bench_mpi_self under callgrind failed (exit $rc)"
		sed 's/^/#   /' "$tmp/log.$name" | tail -n 20
		continue
	fi
	# shellcheck disable=SC2046
	set -- $(calls "$out" mtl_tm_irecv mtl_tm_irecv_general mtl_tm_send \
		mtl_tm_send_general mtl_tm_route_slow)
	echo "# $name: irecv $1 (general $2), send $3 (general $4), route lookups $5"
	msgs=$((iters + 100)) # and the warm-up's
	check "$name: 8 B receives and blocking sends take the fast entries, their routes known" \
		test "$1" -ge $msgs -a "$3" -ge $msgs \
		-a $(($2 * 100)) -le "$1" -a $(($4 * 100)) -le "$3" \
		-a $(($5 * 100)) -le "$1"
done
exit 0
