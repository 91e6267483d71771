#!/bin/bash
# test_fuzz.sh - bounded libFuzzer runs, as a TAP test: the soft HCA's
# packet ingress (tests/fuzz/fuzz_ingress.c, FUZZ_SECONDS, default 60) and
# the engine's parsing of what a peer sends (fuzz_engine.c,
# FUZZ_ENGINE_SECONDS, default 30).
#
# Builds each target with clang (-fsanitize=fuzzer,address,undefined) out of
# the project's sources, replays its committed seed corpus
# (tests/fuzz/corpus/<target>), then fuzzes from a scratch copy of it.  Skips when clang or
# its libFuzzer runtime (Debian: clang, libclang-rt-dev) is missing.
# Findings are kept in $builddir/tests/fuzz/findings for reproduction:
#   tests/fuzz/fuzz_ingress <crash-file>   (or fuzz_engine)
set -u

srcdir=$(cd "${top_srcdir:-$(dirname "$0")/../..}" && pwd)
builddir=$(cd "${top_builddir:-.}" && pwd)
secs=${FUZZ_SECONDS:-60}
esecs=${FUZZ_ENGINE_SECONDS:-30}
out=$builddir/tests/fuzz
CLANG=${CLANG:-clang}

if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "1..0 # SKIP clang not installed (apt-get install clang libclang-rt-dev)"
	exit 0
fi
mkdir -p "$out" "$out/findings"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
	> "$probe/p.c"
if ! "$CLANG" -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
	echo "1..0 # SKIP clang has no libFuzzer runtime (apt-get install libclang-rt-dev)"
	exit 0
fi

echo "1..6"
src=$srcdir/ompi_btl_tm
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# -I builddir: config.h (which UCX API dev/tm_dev.c builds against)
cflags=(-std=gnu11 -g -O1 -fno-omit-frame-pointer
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
	-I"$src" -I"$srcdir/tests" -I"$builddir" \
	$(pkg-config --cflags libibverbs 2>/dev/null))
softhca=("$src"/softhca/*.c "$src"/tm_param.c "$src"/verbs/tm_verbs_ibv.c)

# fuzz name secs sources... : build, replay the seeds, fuzz (3 TAP lines)
fuzz() {
	local name=$1 secs=$2 bin=$out/$1 seeds=$srcdir/tests/fuzz/corpus/${1#fuzz_}
	shift 2
	if "$CLANG" "${cflags[@]}" "$@" -o "$bin" > "$out/$name.build.log" 2>&1; then
		echo "ok $((n + 1)) - $name builds with clang and libFuzzer"
	else
		echo "not ok $((n + 1)) - $name builds with clang and libFuzzer"
		sed 's/^/# /' "$out/$name.build.log" | head -n 30
		echo "not ok $((n + 2)) - $name: seed corpus replays clean # not built"
		echo "not ok $((n + 3)) - $name: fuzzing ran clean # not built"
		n=$((n + 3))
		return
	fi
	mkdir -p "$out/findings/$name"
	if (cd "$out/findings/$name" && "$bin" -runs=0 "$seeds") \
			> "$out/$name.replay.log" 2>&1; then
		echo "ok $((n + 2)) - $name: seed corpus replays clean ($(ls "$seeds" | wc -l) inputs)"
	else
		echo "not ok $((n + 2)) - $name: seed corpus replays clean"
		tail -n 40 "$out/$name.replay.log" | sed 's/^/# /'
	fi
	rm -rf "$work" && mkdir -p "$work" && cp "$seeds"/* "$work"/
	if (cd "$out/findings/$name" && "$bin" -max_total_time="$secs" \
			-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
			"$work" "$seeds") > "$out/$name.log" 2>&1; then
		local runs cov
		runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' \
			"$out/$name.log" | tail -n 1)
		cov=$(grep -o 'cov: [0-9]*' "$out/$name.log" | tail -n 1)
		echo "ok $((n + 3)) - $name: fuzzing ran clean for $secs s (${runs:-? runs}, ${cov:-cov ?})"
	else
		echo "not ok $((n + 3)) - $name: fuzzing ran clean for $secs s (finding in $out/findings/$name)"
		grep -A 30 -m 1 'ERROR\|runtime error\|deadly signal\|timeout' \
			"$out/$name.log" | sed 's/^/# /'
	fi
	n=$((n + 3))
}

n=0
work=$(mktemp -d)
trap 'rm -rf "$probe" "$work"' EXIT
fuzz fuzz_ingress "$secs" "${softhca[@]}" "$srcdir"/tests/softhca/sh_util.c \
	"$srcdir"/tests/fuzz/fuzz_ingress.c -libverbs -lpthread
# UCS's list iteration computes a member address from a null pointer at
# the end of every list (clang's null and object-size checks report it);
# real null dereferences still fault under ASan.
fuzz fuzz_engine "$esecs" -fno-sanitize=null,object-size "${softhca[@]}" "$src"/dev/*.c "$src"/engine/*.c \
	"$srcdir"/tests/engine/eng_util.c "$srcdir"/tests/fuzz/fuzz_engine.c \
	$(pkg-config --cflags --libs hwloc 2>/dev/null || echo -lhwloc) \
	-lucs -lucm -libverbs -lpthread
exit 0
