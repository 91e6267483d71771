#!/bin/sh
# test_arrival_cost.sh - issue 26 item 5: in the soft HCA a plain-buffer
# arrival (a NO_TAG message, or a tagged one no entry accepts: a receive
# kept in software) costs at most what a card-matched arrival costs,
# counted in instructions by callgrind (bench/arrival.sh -c: the arrival
# alone and the whole cycle of a message, deterministic, never timed).
# Skipped without valgrind and in sanitizer builds (valgrind cannot run
# those).
src="${top_srcdir:-.}"
bin="${top_builddir:-.}/tests/softhca/arrival_cost"
# shellcheck source=tests/callgrind.sh
. "$src/tests/callgrind.sh"
callgrind_or_skip "$bin"
echo "1..1"
out=$(bash "$src/bench/arrival.sh" -B -c -n 1024 -b "${top_builddir:-.}" 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
if [ $rc -eq 0 ]; then
	echo "ok 1 - a plain-buffer arrival costs at most a card-matched one"
else
	echo "not ok 1 - a plain-buffer arrival costs at most a card-matched one (exit $rc)"
fi
