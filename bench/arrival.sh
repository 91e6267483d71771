#!/bin/bash
# bench/arrival.sh - what one arrival costs the soft HCA against the number
# of connected QPs: tests/softhca/arrival_cost (two soft HCA contexts in
# one process, P QP pairs, 8 B messages round-robin over the pairs, each
# taken by the receiver's next poll) under callgrind, with N and 2N
# messages; instructions per message (both sides: send, arrival, both
# polls, the buffer posted again) from the difference.  Deterministic.
#
#   bench/arrival.sh [-b BUILD_DIR] [-p PAIRS] [-n N]
#
#   -p PAIRS  connected QPs per context (default "2 16 64")
#   -n N      messages of the first count (default 4096, a multiple of 8)
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build/normal
pairs="2 16 64"
n=4096
while getopts "b:p:n:h" o; do
	case $o in
	b) build=$OPTARG ;;
	p) pairs=$OPTARG ;;
	n) n=$OPTARG ;;
	h) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) exit 2 ;;
	esac
done
die() { echo "arrival.sh: $1" >&2; exit "${2:-1}"; }
[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 8 ] && [ $((n % 8)) = 0 ] || die "-n: a positive multiple of 8" 2
for p in $pairs; do
	[[ $p =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] && [ "$p" -le 64 ] || die "-p: 1 to 64 pairs, not '$p'" 2
done
command -v valgrind >/dev/null || die "needs valgrind"
build=$(cd "$build" 2>/dev/null && pwd) || die "no build directory"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make -C "$build" -j2 tests/softhca/arrival_cost >"$tmp/build.log" 2>&1 ||
	{ tail -n 20 "$tmp/build.log" >&2; die "building arrival_cost failed"; }
echo "| connected QPs | Ir per message |"
echo "| ---: | ---: |"
for p in $pairs; do
	f=$tmp/cg.$p
	valgrind --tool=callgrind --toggle-collect=arrivals --dump-after=arrivals \
		--callgrind-out-file="$f" "$build/tests/softhca/arrival_cost" "$p" "$n" \
		>"$tmp/out.$p" 2>&1 || { tail -n 5 "$tmp/out.$p" >&2; die "arrival_cost $p $n failed"; }
	a=$(sed -n 's/^summary: //p' "$f.1"); b=$(sed -n 's/^summary: //p' "$f.2")
	[ -n "$a" ] && [ -n "$b" ] || die "no callgrind dump of arrivals for $p pairs"
	awk -v p="$p" -v a="$a" -v b="$b" -v n="$n" 'BEGIN { printf "| %d | %.1f |\n", p, (b - a) / n }'
done
