#!/bin/bash
# bench/arrival.sh - what one arrival costs the soft HCA: against the
# number of connected QPs, and by kind of arrival.
# tests/softhca/arrival_cost (two soft HCA contexts in one process, P QP
# pairs, 8 B messages round-robin over the pairs, each taken by the
# receiver's next poll) under callgrind, with N and 2N messages;
# instructions per message from the difference.  Deterministic.
#
#   bench/arrival.sh [-b BUILD_DIR] [-p PAIRS] [-n N] [-k KINDS] [-c] [-B]
#
#   -p PAIRS  connected QPs per context (default "2 16 64")
#   -n N      messages of the first count (default 4096, a multiple of 8)
#   -k KINDS  of notag, unexp, card (default notag; arrival_cost.c says
#             what each is); each row gives the whole cycle (both sides:
#             send, arrival, both polls, the buffer given back) and the
#             arrival alone (the receiver's poll that takes the message)
#   -c        issue 26 item 5, pass or fail: at 2 QPs, a plain-buffer
#             arrival (notag, unexp) costs at most what a card-matched one
#             (card) costs, both the arrival alone and the whole cycle;
#             exit 1 when it does not
#   -B        do not build arrival_cost (make check has built it)
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build/normal
pairs="2 16 64"
n=4096
kinds=notag
check=
nobuild=
while getopts "b:p:n:k:cBh" o; do
	case $o in
	b) build=$OPTARG ;;
	p) pairs=$OPTARG ;;
	n) n=$OPTARG ;;
	k) kinds=$OPTARG ;;
	c) check=1 ;;
	B) nobuild=1 ;;
	h) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) exit 2 ;;
	esac
done
die() { echo "arrival.sh: $1" >&2; exit "${2:-1}"; }
[ -z "$check" ] || { pairs=2; kinds="card notag unexp"; }
[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 8 ] && [ $((n % 8)) = 0 ] || die "-n: a positive multiple of 8" 2
for p in $pairs; do
	[[ $p =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] && [ "$p" -le 64 ] || die "-p: 1 to 64 pairs, not '$p'" 2
done
for k in $kinds; do
	case $k in notag|unexp|card) ;; *) die "-k: notag, unexp or card, not '$k'" 2 ;; esac
done
command -v valgrind >/dev/null || die "needs valgrind"
build=$(cd "$build" 2>/dev/null && pwd) || die "no build directory"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -n "$nobuild" ] ||
	make -C "$build" -j2 tests/softhca/arrival_cost >"$tmp/build.log" 2>&1 ||
	{ tail -n 20 "$tmp/build.log" >&2; die "building arrival_cost failed"; }
[ -x "$build/tests/softhca/arrival_cost" ] || die "no $build/tests/softhca/arrival_cost"

# Ir per message of function $3 (arrivals: the cycle; take: the arrival)
count() {
	local p=$1 k=$2 fn=$3 f=$tmp/cg.$1.$2.$3 a b
	valgrind --tool=callgrind --toggle-collect="$fn" --dump-after=arrivals \
		--callgrind-out-file="$f" "$build/tests/softhca/arrival_cost" "$p" "$n" "$k" \
		>"$tmp/out" 2>&1 || { tail -n 5 "$tmp/out" >&2; die "arrival_cost $p $n $k failed"; }
	a=$(sed -n 's/^summary: //p' "$f.1"); b=$(sed -n 's/^summary: //p' "$f.2")
	[ -n "$a" ] && [ -n "$b" ] || die "no callgrind dump of $fn for $p pairs, $k"
	awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }'
}

echo "| connected QPs | kind | Ir per message | arrival alone |"
echo "| ---: | --- | ---: | ---: |"
declare -A cyc arr
for p in $pairs; do
	for k in $kinds; do
		cyc[$k]=$(count "$p" "$k" arrivals) || exit 1
		arr[$k]=$(count "$p" "$k" take) || exit 1
		echo "| $p | $k | ${cyc[$k]} | ${arr[$k]} |"
	done
done
[ -n "$check" ] || exit 0
fail=0
for k in notag unexp; do
	for what in cyc arr; do
		declare -n m=$what
		if awk -v x="${m[$k]}" -v c="${m[card]}" 'BEGIN { exit !(x > c) }'; then
			echo "item 5 broken: $k ($what) ${m[$k]} > card ${m[card]}" >&2
			fail=1
		fi
	done
done
[ $fail = 0 ] && echo "item 5 holds: a plain-buffer arrival costs at most a card-matched one"
exit $fail
