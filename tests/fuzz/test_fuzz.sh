#!/bin/bash
# test_fuzz.sh - a bounded libFuzzer run over the soft HCA's packet ingress
# (tests/fuzz/fuzz_ingress.c), as a TAP test.
#
# Builds the target with clang (-fsanitize=fuzzer,address,undefined) out of
# the soft HCA sources, replays the committed seed corpus, then fuzzes for
# FUZZ_SECONDS (default 60) from a scratch copy of it.  Skips when clang or
# its libFuzzer runtime (Debian: clang-14, libclang-rt-14-dev) is missing.
# Findings are kept in $builddir/tests/fuzz/findings for reproduction:
#   tests/fuzz/fuzz_ingress <crash-file>
set -u

srcdir=$(cd "${top_srcdir:-$(dirname "$0")/../..}" && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
secs=${FUZZ_SECONDS:-60}
out=$builddir/tests/fuzz
bin=$out/fuzz_ingress
seeds=$srcdir/tests/fuzz/corpus/ingress
CLANG=${CLANG:-clang}

if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "1..0 # SKIP clang not installed (apt-get install clang libclang-rt-14-dev)"
	exit 0
fi
mkdir -p "$out" "$out/findings"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
	> "$probe/p.c"
if ! "$CLANG" -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
	echo "1..0 # SKIP clang has no libFuzzer runtime (apt-get install libclang-rt-14-dev)"
	exit 0
fi

echo "1..3"
src=$srcdir/ompi_btl_tm
if "$CLANG" -std=gnu11 -g -O1 -fno-omit-frame-pointer \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-I"$src" -I"$srcdir/tests" $(pkg-config --cflags libibverbs 2>/dev/null) \
	"$src"/softhca/*.c "$src"/verbs/tm_verbs_ibv.c \
	"$srcdir"/tests/softhca/sh_util.c "$srcdir"/tests/fuzz/fuzz_ingress.c \
	-libverbs -lpthread -o "$bin" > "$out/build.log" 2>&1; then
	echo "ok 1 - fuzz_ingress builds with clang and libFuzzer"
else
	echo "not ok 1 - fuzz_ingress builds with clang and libFuzzer"
	sed 's/^/# /' "$out/build.log" | head -n 30
	echo "not ok 2 - seed corpus replays clean # not built"
	echo "not ok 3 - fuzzing ran clean # not built"
	exit 0
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cd "$out/findings" || exit 1
if "$bin" -runs=0 "$seeds" > "$out/replay.log" 2>&1; then
	echo "ok 2 - seed corpus replays clean ($(ls "$seeds" | wc -l) inputs)"
else
	echo "not ok 2 - seed corpus replays clean"
	tail -n 40 "$out/replay.log" | sed 's/^/# /'
fi

work=$(mktemp -d)
trap 'rm -rf "$probe" "$work"' EXIT
cp "$seeds"/* "$work"/
if "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	-print_final_stats=1 "$work" "$seeds" > "$out/fuzz.log" 2>&1; then
	runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' \
		"$out/fuzz.log" | tail -n 1)
	cov=$(grep -o 'cov: [0-9]*' "$out/fuzz.log" | tail -n 1)
	echo "ok 3 - fuzzing ran clean for ${secs} s (${runs:-? runs}, ${cov:-cov ?})"
else
	echo "not ok 3 - fuzzing ran clean for ${secs} s (finding in $out/findings)"
	grep -A 30 -m 1 'ERROR\|runtime error\|deadly signal\|timeout' \
		"$out/fuzz.log" | sed 's/^/# /'
fi
exit 0
