#!/bin/bash
# run-tests.sh - configure, build and run the test suite out of tree.
#
#   scripts/run-tests.sh [--quick] [--sanitizers] [-j N]
#
#   (default)     build/normal only
#   --sanitizers  also build/asan (--enable-sanitizers: ASan + UBSan,
#                 with --enable-debug: the engine checks its invariants)
#   --quick       build/normal only, even with --sanitizers
#   -j N          make parallelism (default 2)
#
# Each build directory is configured once (later runs rebuild
# incrementally; delete build/<name> to start over).  Prints the failed
# tests with the tail of their logs; the last line is always
# "N passed, M failed", summed over the TAP results of every build run
# (a build that fails to configure or compile counts as one failure).
# Exit status: non-zero if M > 0.
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
jobs=2
sanitizers=0
quick=0

while [ $# -gt 0 ]; do
	case $1 in
	--sanitizers) sanitizers=1 ;;
	--quick) quick=1 ;;
	-j) jobs=$2; shift ;;
	-j*) jobs=${1#-j} ;;
	-h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run-tests: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done

builds=(normal)
if [ $sanitizers = 1 ] && [ $quick = 0 ]; then
	builds+=(asan)
fi

passed=0
failed=0
build_failed=0

summary() {
	echo "$passed passed, $failed failed"
}

if [ ! -x "$top/configure" ]; then
	echo "run-tests: no configure script, running autogen.sh"
	if ! (cd "$top" && ./autogen.sh); then
		echo "run-tests: autogen.sh failed" >&2
		failed=$((failed + 1))
		summary
		exit 1
	fi
fi

# CI runs as root; mpirun refuses to unless told (MPI tests run mpirun).
if [ "$(id -u)" -eq 0 ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# Sanitizer runtime options.  UBSan only reports by default: make it fail
# the test.  LeakSanitizer stops the process with ptrace to scan it; where
# ptrace is forbidden (some containers, seccomp, Yama scope 3) it dies with
# a fatal error instead of reporting leaks, so we probe it once and run
# with detect_leaks=0 there.  As root on a plain Debian 12 machine it works.
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
lsan_probe() {
	local dir
	dir=$(mktemp -d) || return 1
	printf 'int main(void) { return 0; }\n' > "$dir/p.c"
	if ! ${CC:-cc} -fsanitize=address "$dir/p.c" -o "$dir/p" 2>/dev/null; then
		rm -rf "$dir"
		return 1
	fi
	ASAN_OPTIONS=detect_leaks=1 "$dir/p" >/dev/null 2>&1
	local rc=$?
	rm -rf "$dir"
	return $rc
}

# Every *.trs file holds one ":test-result: X" line per TAP test point.
count_results() {
	local dir=$1 p f s
	p=$(find "$dir" -name '*.trs' -exec grep -h '^:test-result:' {} + |
		awk '$2 == "PASS" || $2 == "XFAIL" { n++ } END { print n + 0 }')
	f=$(find "$dir" -name '*.trs' -exec grep -h '^:test-result:' {} + |
		awk '$2 == "FAIL" || $2 == "XPASS" || $2 == "ERROR" { n++ } END { print n + 0 }')
	s=$(find "$dir" -name '*.trs' -exec grep -h '^:test-result:' {} + |
		awk '$2 == "SKIP" { n++ } END { print n + 0 }')
	echo "run-tests: [$name] $p passed, $f failed, $s skipped"
	passed=$((passed + p))
	failed=$((failed + f))
}

show_failures() {
	local dir=$1 trs log
	while IFS= read -r trs; do
		if grep -q '^:global-test-result: \(FAIL\|XPASS\|ERROR\)' "$trs"; then
			log=${trs%.trs}.log
			echo "---- [$name] FAILED: ${trs#"$dir"/} (tail of ${log#"$top"/})"
			tail -n 40 "$log" 2>/dev/null | sed 's/^/    | /'
		fi
	done < <(find "$dir" -name '*.trs' | sort)
}

for name in "${builds[@]}"; do
	dir=$top/build/$name
	conf_args=()
	unset ASAN_OPTIONS
	if [ "$name" = asan ]; then
		conf_args+=(--enable-sanitizers --enable-debug)
		if lsan_probe; then
			export ASAN_OPTIONS=detect_leaks=1
		else
			echo "run-tests: LeakSanitizer cannot run here (ptrace refused?): detect_leaks=0"
			export ASAN_OPTIONS=detect_leaks=0
		fi
	fi
	mkdir -p "$dir"
	echo "run-tests: [$name] build in ${dir#"$top"/}"

	if [ ! -f "$dir/Makefile" ]; then
		if ! (cd "$dir" && "$top/configure" "${conf_args[@]}" > configure.out 2>&1); then
			echo "run-tests: [$name] configure FAILED:"
			tail -n 30 "$dir/configure.out" | sed 's/^/    | /'
			build_failed=$((build_failed + 1))
			continue
		fi
	fi
	if ! make -C "$dir" -j"$jobs" > "$dir/make.out" 2>&1; then
		echo "run-tests: [$name] build FAILED:"
		grep -E 'error|Error' "$dir/make.out" | head -n 30 | sed 's/^/    | /'
		tail -n 15 "$dir/make.out" | sed 's/^/    | /'
		build_failed=$((build_failed + 1))
		continue
	fi

	# Results of tests that are no longer in TESTS must not count.
	find "$dir" -name '*.trs' -print0 | while IFS= read -r -d '' t; do
		rm -f "$t" "${t%.trs}.log"
	done
	rm -f "$dir/test-suite.log"

	make -C "$dir" -j"$jobs" check > "$dir/check.out" 2>&1
	rc=$?
	count_results "$dir"
	show_failures "$dir"
	if [ $rc -ne 0 ] && ! grep -q '^# \(FAIL\|ERROR\|XPASS\): *[1-9]' "$dir/test-suite.log" 2>/dev/null; then
		# make check failed without a failed test: the test programs
		# did not build, or the harness broke.
		echo "run-tests: [$name] make check FAILED (exit $rc):"
		grep -E 'error|Error' "$dir/check.out" | head -n 30 | sed 's/^/    | /'
		tail -n 15 "$dir/check.out" | sed 's/^/    | /'
		build_failed=$((build_failed + 1))
	fi
done

if [ $build_failed -gt 0 ]; then
	echo "run-tests: $build_failed build(s) failed"
	failed=$((failed + build_failed))
fi
summary
[ $failed -eq 0 ]
