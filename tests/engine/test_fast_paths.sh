#!/bin/sh
# test_fast_paths.sh - issue 26: the common small message takes the
# engine's fast paths, each built from its slow path's steps less their
# tests: a receive below offload_thresh is posted by tm_engine_post_recv
# alone (not post_recv_slow), its message is taken by tme_on_unexpected
# alone (not on_unexpected_slow), and an inline eager send goes out from
# tm_engine_post_send alone (not post_send_rest, nor eager_post_slot).
# Counted by callgrind (calls, deterministic, never timed) over
# bench/engine_pingpong, 8 B, with the card on (the receive below the
# threshold), offload off (-S) and no tag matching (-N): at most one slow
# call in a hundred fast ones (set-up), and the fast ones one per message.
# Skipped without valgrind and in sanitizer builds.
bin="${top_builddir:-.}/bench/engine_pingpong"
# shellcheck source=tests/callgrind.sh
. "${top_srcdir:-.}/tests/callgrind.sh"
callgrind_or_skip "$bin"
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
iters=200
n=0
echo "1..3"
for mode in card:"" sw:-S notm:-N; do
	name=${mode%%:*}
	flag=${mode#*:}
	n=$((n + 1))
	# shellcheck disable=SC2086
	if ! TM_DEV_RCACHE=0 valgrind --tool=callgrind \
	    --callgrind-out-file="$out" "$bin" -n $iters -s 8 $flag \
	    >/dev/null 2>&1; then
		echo "not ok $n - $name: engine_pingpong failed under callgrind"
		continue
	fi
	counts=$(callgrind_calls "$out" tm_engine_post_recv post_recv_slow \
		tme_on_unexpected on_unexpected_slow tm_engine_post_send \
		post_send_rest eager_post_slot)
	# shellcheck disable=SC2086
	set -- $counts
	echo "# $name: post_recv $1 (slow $2), arrival $3 (slow $4), send $5 (rest $6, slot $7)"
	msgs=$((2 * iters))
	if [ "$1" -ge $msgs ] && [ "$3" -ge $msgs ] && [ "$5" -ge $msgs ] &&
	   [ $(($2 * 100)) -le "$1" ] && [ $(($4 * 100)) -le "$3" ] &&
	   [ $(($6 * 100)) -le "$5" ] && [ "$7" -eq 0 ]; then
		echo "ok $n - $name: 8 B receives, arrivals and sends take the fast paths"
	else
		echo "not ok $n - $name: 8 B receives, arrivals and sends take the fast paths"
	fi
done
