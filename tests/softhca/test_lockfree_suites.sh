#!/bin/sh
# test_lockfree_suites.sh - the soft HCA's single-thread suites once more,
# on contexts opened single-threaded (SOFTHCA_SINGLE_THREADED=1: no card
# lock on the data path, as mlx5 with MLX5_SINGLE_THREADED).  Every TAP
# line of every suite must pass again; test_threads is left out (it
# drives contexts from several threads and needs their locks).
dir="${top_builddir:-.}/tests/softhca"
n=0
fail=0
for t in test_device_mr test_cq test_tm_list test_tm_match test_tm_sync \
	 test_rndv test_twoproc test_mlx5_rules test_mlx5_replay test_hostile \
	 test_hostile_packets; do
	n=$((n + 1))
	out=$(SOFTHCA_SINGLE_THREADED=1 "$dir/$t" 2>&1)
	rc=$?
	oks=$(echo "$out" | grep -c "^ok ")
	if [ $rc -eq 0 ] && [ "$oks" -gt 0 ] &&
	   ! echo "$out" | grep -q "^not ok\|^Bail out"; then
		echo "ok $n - $t lock-free: $oks checks pass"
	else
		fail=1
		echo "$out" | grep "^not ok\|^Bail out" | sed 's/^/# /'
		echo "not ok $n - $t lock-free (exit $rc)"
	fi
done
echo "1..$n"
exit $fail
