#!/bin/bash
# run-tests.sh - configure, build and run the test suite out of tree.
#
#   scripts/run-tests.sh [--quick] [--sanitizers] [--tsan] [--vm] [-j N]
#
#   (default)     build/normal only
#   --sanitizers  also build/asan (--enable-sanitizers: ASan + UBSan,
#                 with --enable-debug: the engine checks its invariants)
#   --quick       build/normal only, even with --sanitizers
#   --tsan        build/tsan alone (--enable-tsan: ThreadSanitizer), and
#                 only the tests that run threads (TSAN_TESTS below;
#                 tests/tsan.supp); about 1.5 min on 2 cores
#   --vm          also tests/vm/run-vm-tests.sh: MPI across two QEMU VMs
#                 over soft-RoCE (root; minutes; TAP log in build/vm.tap)
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
tsan=0
vm=0

while [ $# -gt 0 ]; do
	case $1 in
	--sanitizers) sanitizers=1 ;;
	--quick) quick=1 ;;
	--vm) vm=1 ;;
	-j) jobs=$2; shift ;;
	-j*) jobs=${1#-j} ;;
	--tsan) tsan=1 ;;
	-h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run-tests: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done

builds=(normal)
if [ $sanitizers = 1 ] && [ $quick = 0 ]; then
	builds+=(asan)
fi
if [ $tsan = 1 ]; then
	builds=(tsan)
fi

# The TSan build's tests: those that run threads of ours against each
# other.  The soft HCA's locked contexts under threads (test_threads),
# its handover thread serving connects while the owner works
# (test_twoproc, and the engine's test_connect), the registration
# cache's unmap events from any thread (test_rcache), and the MTL under
# MPI_THREAD_MULTIPLE: tests/mpi's threaded programs under mpirun with
# this build's component, on the default soft HCA and with its random
# card scheduling, and bench_latency_mt's threads in blocking receives
# (tests/mtl/test_latency_mt.sh).  Tests that fork a process that then
# starts threads are left out: TSan stops such a child (die_after_fork).
TSAN_TESTS="tests/softhca/test_threads tests/softhca/test_twoproc
	tests/engine/test_connect tests/dev/test_rcache
	tests/mpi/mpi-tm.sh tests/mpi/mpi-tm-random.sh
	tests/mtl/test_latency_mt.sh"
TSAN_MPI_PROGS="mpi_threads mpi_thread_recv mpi_complete_cb"

passed=0
failed=0
build_failed=0

# The VM image (debootstrap and apt: mostly waiting on the mirror) is
# built while the builds below compile; the VM suite waits for it.
vm_image_pid=
if [ $vm = 1 ] && [ "$(id -u)" -eq 0 ] && command -v debootstrap > /dev/null; then
	mkdir -p "$top/build"
	"$top/scripts/vm/build-image.sh" > "$top/build/vm-image.log" 2>&1 < /dev/null &
	vm_image_pid=$!
	echo "run-tests: [vm] building the VM image in the background (log: build/vm-image.log)"
fi

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

# tsan_runs VAR: whether a ThreadSanitizer program runs here; sets the
# array VAR to a command prefix it needs (empty if none), else tsan_why.
# TSan maps its shadow memory at fixed addresses, which some kernels'
# wider address randomisation (vm.mmap_rnd_bits above 28, e.g. 32 on
# Ubuntu's 6.x kernels) can collide with ("unexpected memory mapping").
# Then, in order: the run without randomisation (setarch -R: this
# process tree only), else, as root, the sysctl lowered to 28 for the
# run and put back right after it (tsan_restore, and at exit); through
# /proc/sys, as Debian 13's minimal system has no sysctl(8).
tsan_sysctl_old=
tsan_restore() {
	if [ -n "$tsan_sysctl_old" ]; then
		echo "$tsan_sysctl_old" > /proc/sys/vm/mmap_rnd_bits ||
			echo "run-tests: [tsan] could not put vm.mmap_rnd_bits back to $tsan_sysctl_old" >&2
		echo "run-tests: [tsan] vm.mmap_rnd_bits back to $tsan_sysctl_old"
		tsan_sysctl_old=
	fi
}
trap tsan_restore EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
tsan_runs() {
	local -n pre=$1
	local dir ok=1 bits
	pre=()
	tsan_why=
	dir=$(mktemp -d) || { tsan_why="mktemp failed"; return 1; }
	printf '#include <pthread.h>\nstatic void *f(void *a) { return a; }\nint main(void) { pthread_t t; return pthread_create(&t, 0, f, 0) || pthread_join(t, 0); }\n' > "$dir/p.c"
	if ! ${CC:-cc} -fsanitize=thread "$dir/p.c" -o "$dir/p" 2>"$dir/err"; then
		tsan_why="${CC:-cc} -fsanitize=thread fails: $(head -n 1 "$dir/err")"
		rm -rf "$dir"
		return 1
	fi
	if ! "$dir/p" >"$dir/out" 2>&1; then
		ok=0
		bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null)
		if setarch "$(uname -m)" -R "$dir/p" >/dev/null 2>&1; then
			pre=(setarch "$(uname -m)" -R)
			echo "run-tests: [tsan] TSan needs address randomisation off here (vm.mmap_rnd_bits ${bits:-?}): setarch -R"
			ok=1
		elif [ "$(id -u)" -eq 0 ] && [ -n "$bits" ] && [ "$bits" -gt 28 ] &&
		     { echo 28 > /proc/sys/vm/mmap_rnd_bits; } 2>/dev/null; then
			tsan_sysctl_old=$bits
			echo "run-tests: [tsan] vm.mmap_rnd_bits $bits -> 28 for the TSan run"
			if "$dir/p" >/dev/null 2>&1; then
				ok=1
			else
				tsan_restore
			fi
		fi
		[ $ok = 1 ] || tsan_why="$(grep -m1 -i 'sanitizer' "$dir/out")"
	fi
	rm -rf "$dir"
	[ $ok = 1 ]
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
	unset ASAN_OPTIONS TSAN_OPTIONS
	check_args=()
	run=()
	if [ "$name" = tsan ]; then
		conf_args+=(--enable-tsan)
		# Every report printed, each one fails its test (exit 66).
		# Open MPI, libucs/libucm, libibverbs are not instrumented:
		# their own memory accesses are unseen, and so are their
		# atomics, so their intercepted calls (mutexes, condition
		# variables, memcpy) give TSan half a picture of their own
		# objects; ignore_noninstrumented_modules leaves those calls
		# out, so what is checked is what our code does.  What Open
		# MPI's atomics hand over to our code is said at the MTL's
		# edge (ompi_btl_tm/mtl/mtl_tm_tsan.h); the rest of the
		# third-party reports, if any, are in tests/tsan.supp.
		export TSAN_OPTIONS="suppressions=$top/tests/tsan.supp ignore_noninstrumented_modules=1 halt_on_error=0 second_deadlock_stack=1 history_size=4"
		# libucm's default hooks (bistro) patch libc's madvise, which
		# glibc calls on an exiting thread's stack after TSan let go of
		# the thread: libucm's lock then crashes TSan (gcc 12).  reloc
		# hooks only calls through the PLT (tm_dev_rcache.c's unmaps
		# included: test_rcache checks them).
		export UCX_MEM_MMAP_HOOK_MODE=reloc
		# No UCX modules (UCX 1.18, Debian 13): libucm_rocm pulls in
		# libnuma, whose constructor frees into TSan's allocator what
		# it did not get from it (a TSan CHECK failure in the first
		# rcache), and libucs_fuse leaves a thread never joined.  Our
		# cache needs core libucm only.
		export UCX_MODULES=
		# PMIx 5's gds/shmem2 maps its segment at a fixed address,
		# inside TSan's reserved ranges: MPI_Init fails (Debian 13)
		export PMIX_MCA_gds=hash
		check_args=(TESTS="$(echo $TSAN_TESTS)")
		export MPI_TESTS_PROGS=$TSAN_MPI_PROGS
		if ! tsan_runs run; then
			echo "run-tests: [tsan] a ThreadSanitizer program does not run here: $tsan_why"
			build_failed=$((build_failed + 1))
			continue
		fi
	fi
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

	"${run[@]}" make -C "$dir" -j"$jobs" check "${check_args[@]}" \
		> "$dir/check.out" 2>&1
	rc=$?
	tsan_restore
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

# The VM suite's TAP: ok / not ok lines count; a run that ends without its
# plan, or with fewer lines than planned, counts as one more failure.
run_vm_suite() {
	local tap=$top/build/vm.tap rc=0 p f s plan
	mkdir -p "$top/build"
	if [ -n "$vm_image_pid" ]; then
		# at most VM_IMAGE_WAIT s more once the builds are done; its
		# failure shows again, with its log, in the suite's first line
		local waited=0
		while kill -0 "$vm_image_pid" 2> /dev/null &&
		      [ $waited -lt "${VM_IMAGE_WAIT:-900}" ]; do
			sleep 5
			waited=$((waited + 5))
		done
		if kill -0 "$vm_image_pid" 2> /dev/null; then
			echo "run-tests: [vm] the image build was not done ${waited} s after the builds (VM_IMAGE_WAIT): stopped"
			kill "$vm_image_pid" 2> /dev/null || true
		fi
		wait "$vm_image_pid" || echo "run-tests: [vm] the background image build failed"
		sed 's/^/    image| /' "$top/build/vm-image.log" | tail -n 8
	fi
	echo "run-tests: [vm] MPI across two QEMU VMs over soft-RoCE (tests/vm/run-vm-tests.sh)"
	timeout -k 30 "${VM_TIMEOUT:-1200}" "$top/tests/vm/run-vm-tests.sh" \
		> "$tap" 2>&1 < /dev/null || rc=$?
	sed 's/^/    | /' "$tap"
	p=$(grep -c '^ok ' "$tap" | head -n 1)
	s=$(grep -c '^ok .*# SKIP' "$tap" | head -n 1)
	f=$(grep -c '^not ok ' "$tap" | head -n 1)
	p=$((p - s))
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\)$/\1/p' "$tap" | tail -n 1)
	if [ $rc -ne 0 ] || [ -z "$plan" ] || [ "$plan" -ne $((p + f + s)) ]; then
		echo "run-tests: [vm] the suite ended abnormally (exit $rc, plan '${plan:-none}', $((p + f + s)) results)"
		f=$((f + 1))
	fi
	echo "run-tests: [vm] $p passed, $f failed, $s skipped"
	passed=$((passed + p))
	failed=$((failed + f))
}
if [ $vm = 1 ]; then
	run_vm_suite
fi

if [ $build_failed -gt 0 ]; then
	echo "run-tests: $build_failed build(s) failed"
	failed=$((failed + build_failed))
fi
summary
[ $failed -eq 0 ]
