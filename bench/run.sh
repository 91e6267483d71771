#!/bin/bash
# run.sh - compare mtl tm with Open MPI's own transports, in one command.
#
# Runs the bench/ programs (2 ranks, bound to cores) over
#   tm   --mca pml cm --mca mtl tm
#   ob1  --mca pml ob1 --mca btl self,vader
#   ucx  --mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any
# ALTERNATING them in short back-to-back rounds (round r: latency over tm,
# ob1, ucx, then threaded latency (latency_mt, MPI_THREAD_MULTIPLE, one
# sending thread against two receiving ones), bandwidth, ...), because these machines
# switch between vCPU placement regimes every 10-30 s: a tm figure is only
# compared with peer figures measured seconds apart, round by round, and
# the table reports the MEDIAN per-round ratio and its interquartile range.
# Then it draws PNG plots with gnuplot.  If tm cannot be selected, it says
# so in one line and compares ob1 with ucx.
#
# Usage: bench/run.sh [--quick] [--osu] [--imb] [options]   (--help for all)
set -uo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
BENCH_SRC=$TOP/bench

ROUNDS=
BUDGET=
BATCHES=5
QUICK=0
OSU=0
IMB=0
PLOTS=1
BUILD_DIR=$TOP/build/normal
RESULTS=
ONLY="tm ob1 ucx"
KINDS="latency latency_mt bw rate depth"
STAT=best
MAX_TIME=
LAUNCH_TIMEOUT=${LAUNCH_TIMEOUT:-180}

usage() {
	cat <<'EOF'
usage: bench/run.sh [options]
  --quick          about 1 minute: 5 rounds, shorter measurement points
  --rounds N       rounds over all transports (default 9, --quick 5)
  --budget MS      time per measurement point, all batches (default 40,
                   --quick 15)
  --osu            also run OSU 7.4's osu_latency and osu_mbw_mr (and
                   osu_bw, osu_bibw when present) in the same rounds; they
                   are looked for in $OSU_DIR, in the cache that
                   scripts/osu-build.sh fills, under /usr/lib*/.../
                   osu-micro-benchmarks and on PATH; without osu_latency
                   and osu_mbw_mr the run stops before measuring.  Extra
                   arguments for them in $OSU_ARGS (e.g. "-m 1:4096")
  --imb            also run the Intel MPI Benchmarks' IMB-MPI1 PingPong,
                   Uniband and Biband (one launch per transport and round)
                   at 8 B, 1 KiB, 16 KiB, 1 MiB and 4 MiB ($IMB_ARGS
                   replaces the default "-time 2"); the
                   program is looked for in $IMB_DIR, in the cache that
                   scripts/imb-build.sh fills and on PATH
  --max-time S     start no new round after S seconds of measuring
                   (default 240, --quick 50); at least one round runs
  --stat best|median
                   which batch of each launch counts: best (default; the
                   fastest of the batches, least disturbed by other jobs)
                   or median
  --transports L   subset of "tm ob1 ucx", e.g. --transports "ob1 ucx"
  --benches L      subset of "latency latency_mt bw rate depth" (default
                   all), e.g. --benches latency_mt; "none" with --osu
                   runs OSU only
  --build-dir DIR  where to build the benchmarks and mca_mtl_tm.so
                   (default build/normal; configured there if needed); that
                   mca_mtl_tm.so is used unless an installed one is newer
  --results DIR    output directory (default build/bench-results/<time>)
  --no-plots       skip gnuplot
Environment: TM_MCA replaces tm's mpirun arguments (e.g. to try the
script against another MTL); LAUNCH_TIMEOUT (s) bounds each mpirun.

Issue 18's table (8 B latency, 8 B message rate with window 64, 1 KiB,
OSU 7.4's osu_latency and osu_mbw_mr; median round of 7), on a quiet
machine, OSU built first with scripts/osu-build.sh (6-10 minutes):
  bench/run.sh --rounds 7 --max-time 900 --osu
It prints that table ("Issue 18") after the per-point table.
EOF
}

while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--rounds) ROUNDS=$2; shift ;;
	--budget) BUDGET=$2; shift ;;
	--osu) OSU=1 ;;
	--imb) IMB=1 ;;
	--transports) ONLY=$2; shift ;;
	--benches) KINDS=$2; shift ;;
	--max-time) MAX_TIME=$2; shift ;;
	--stat) STAT=$2; shift ;;
	--build-dir) BUILD_DIR=$(realpath -m "$2"); shift ;;
	--results) RESULTS=$(realpath -m "$2"); shift ;;
	--no-plots) PLOTS=0 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done
if [ "$QUICK" = 1 ]; then
	ROUNDS=${ROUNDS:-5}; BUDGET=${BUDGET:-15}; MAX_TIME=${MAX_TIME:-50}
else
	ROUNDS=${ROUNDS:-9}; BUDGET=${BUDGET:-40}; MAX_TIME=${MAX_TIME:-240}
fi
case $STAT in best|median) ;; *) echo "run.sh: --stat best or median" >&2; exit 2 ;; esac
[ "$KINDS" = none ] && KINDS=
for g in $KINDS; do
	case $g in latency|latency_mt|bw|rate|depth) ;;
	*) echo "run.sh: unknown benchmark $g" >&2; exit 2 ;;
	esac
done
[ -n "$KINDS" ] || [ "$OSU" = 1 ] || [ "$IMB" = 1 ] ||
	{ echo "run.sh: --benches none leaves nothing to run without --osu or --imb" >&2; exit 2; }

# ---- OSU micro-benchmarks (not shipped; scripts/osu-build.sh) ---------------

# Searched before anything is built: asked for and missing is an error.
OSU_NEEDED="osu_latency osu_mbw_mr"
OSU_BENCHES="osu_latency osu_mbw_mr osu_bw osu_bibw"
OSU_CACHE=$("$TOP/scripts/osu-build.sh" --where 2>/dev/null)
if [ -n "${OSU_DIR:-}" ]; then
	OSU_SEARCHED="\$OSU_DIR ($OSU_DIR) only"
else
	OSU_SEARCHED="$OSU_CACHE, /usr/lib*/.../osu-micro-benchmarks/mpi/pt2pt, PATH; or set \$OSU_DIR"
fi
find_osu() {
	local b=$1 d
	# An explicit $OSU_DIR is the only place looked at.
	if [ -n "${OSU_DIR:-}" ]; then
		[ -x "$OSU_DIR/$b" ] && echo "$OSU_DIR/$b"
		return
	fi
	for d in "$OSU_CACHE" /usr/lib/x86_64-linux-gnu/openmpi/libexec/osu-micro-benchmarks/mpi/pt2pt \
		 /usr/libexec/osu-micro-benchmarks/mpi/pt2pt \
		 /usr/local/libexec/osu-micro-benchmarks/mpi/pt2pt; do
		[ -n "$d" ] && [ -x "$d/$b" ] && { echo "$d/$b"; return 0; }
	done
	command -v "$b"
}
declare -A OSU_PATH
OSU_GROUPS=
OSU_VERSION=
if [ "$OSU" = 1 ]; then
	for b in $OSU_BENCHES; do
		if p=$(find_osu "$b"); then
			OSU_PATH[$b]=$p
			OSU_GROUPS="$OSU_GROUPS $b"
		elif [[ " $OSU_NEEDED " == *" $b "* ]]; then
			echo "run.sh: --osu: $b not found (looked in $OSU_SEARCHED)." >&2
			echo "run.sh: build OSU 7.4 first: scripts/osu-build.sh osu-micro-benchmarks-7.4.tar.gz" \
				"(sources: https://mvapich.cse.ohio-state.edu/benchmarks/); see bench/README.md" >&2
			exit 1
		fi
	done
	# The version is compiled into each program's header line.
	OSU_VERSION=$(grep -a -o -m 1 'Test v[0-9][0-9.]*' "${OSU_PATH[osu_latency]}" |
		head -n 1 | sed 's/^Test v//')
fi
# ---- Intel MPI Benchmarks (not shipped; scripts/imb-build.sh) --------------

IMB_PROG=
IMB_VERSION=
# Sizes: the issue's 8 B and 1 KiB, one above mtl_tm_offload_thresh
# (16 KiB), and the 1-4 MiB bandwidth points.
IMB_SIZES="8 1024 16384 1048576 4194304"
if [ "$IMB" = 1 ]; then
	if [ -n "${IMB_DIR:-}" ]; then
		IMB_SEARCHED="\$IMB_DIR ($IMB_DIR) only"
		[ -x "$IMB_DIR/IMB-MPI1" ] && IMB_PROG=$IMB_DIR/IMB-MPI1
	else
		d=$("$TOP/scripts/imb-build.sh" --where 2>/dev/null)
		IMB_SEARCHED="$d, PATH; or set \$IMB_DIR"
		if [ -n "$d" ] && [ -x "$d/IMB-MPI1" ]; then
			IMB_PROG=$d/IMB-MPI1
		else
			IMB_PROG=$(command -v IMB-MPI1)
		fi
	fi
	if [ -z "$IMB_PROG" ]; then
		echo "run.sh: --imb: IMB-MPI1 not found (looked in $IMB_SEARCHED)." >&2
		echo "run.sh: build it first: scripts/imb-build.sh IMB-v2021.11.tar.gz" \
			"(https://github.com/intel/mpi-benchmarks/releases); see bench/README.md" >&2
		exit 1
	fi
	IMB_VERSION=$(grep -a -o -m 1 'Intel(R) MPI Benchmarks [0-9][0-9.]*' "$IMB_PROG" |
		head -n 1 | sed 's/.* //')
fi
RESULTS=${RESULTS:-$TOP/build/bench-results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RESULTS" || exit 1
RAW=$RESULTS/raw.txt
ERRLOG=$RESULTS/errors.log
: >"$RAW"; : >"$ERRLOG"; : >"$RESULTS/launches.log"

say() { echo "$*" | tee -a "$RESULTS/summary.md"; }
: >"$RESULTS/summary.md"

# ---- build -----------------------------------------------------------------

PROGS="bench_latency bench_latency_mt bench_bw bench_rate bench_depth"
build() {
	local log=$RESULTS/build.log
	if [ ! -f "$BUILD_DIR/Makefile" ]; then
		[ -x "$TOP/configure" ] || (cd "$TOP" && ./autogen.sh) >"$log" 2>&1
		mkdir -p "$BUILD_DIR" &&
			(cd "$BUILD_DIR" && "$TOP/configure") >>"$log" 2>&1
	fi
	make -C "$BUILD_DIR" -j2 $(printf 'bench/%s ' $PROGS) >>"$log" 2>&1
}
if ! build; then
	echo "run.sh: building the benchmarks failed; last lines of $RESULTS/build.log:" >&2
	tail -n 20 "$RESULTS/build.log" >&2
	exit 1
fi
BIN=$BUILD_DIR/bench

# ---- transports ------------------------------------------------------------

MPIRUN=${MPIRUN:-mpirun}
LAUNCH=("$MPIRUN" -np 2 --bind-to core --map-by core)
[ "$(id -u)" = 0 ] && LAUNCH+=(--allow-run-as-root)

# mtl tm: build it in --build-dir from this tree (once the Makefile knows
# it), so the benchmarks measure the current code; use that build rather
# than an installed copy (scripts/install-component.sh) unless the
# installed one is newer.  Open MPI takes the first mca_mtl_tm.so on its
# component path.
PKGLIB=$(ompi_info --parsable --path pkglibdir 2>/dev/null | sed -n 's/^path:pkglibdir://p')
TM_SO=
TM_NOTE=
if [[ " $ONLY " == *" tm "* ]] &&
   grep -q 'mca_mtl_tm\.la' "$BUILD_DIR/Makefile" 2>/dev/null; then
	if make -C "$BUILD_DIR" -j2 mca_mtl_tm.la >>"$RESULTS/build.log" 2>&1; then
		TM_SO=$BUILD_DIR/.libs/mca_mtl_tm.so
	else
		TM_NOTE="building mca_mtl_tm.so failed, see $RESULTS/build.log"
	fi
fi
if [ -n "$TM_SO" ] && [ -n "$PKGLIB" ] && [ "$TM_SO" -nt "$PKGLIB/mca_mtl_tm.so" ]; then
	TM_ARGS="--mca pml cm --mca mtl tm --mca mca_base_component_path $(dirname "$TM_SO"):$PKGLIB"
	TM_USED=$TM_SO
else
	TM_ARGS="--mca pml cm --mca mtl tm"
	TM_USED="$PKGLIB/mca_mtl_tm.so (installed)"
fi
[ -n "${TM_MCA:-}" ] && { TM_ARGS=$TM_MCA; TM_USED="\$TM_MCA"; }

declare -A ARGS
ARGS[tm]=$TM_ARGS
ARGS[ob1]="--mca pml ob1 --mca btl self,vader"
# Debian's openmpi-mca-params.conf says "pml = ^ucx"; a command-line
# --mca pml overrides the file.  pml ucx's default transport list names
# only InfiniBand ones: "any" lets it use shared memory here.
ARGS[ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"

# The first line of a failed job's output that says what went wrong,
# without the selection log and the [host:pid] prefix.
first_error() {
	sed 's/^\[[^]]*\] //' |
		grep -v -E 'mca: ?base|select:|bound to|^-+$|^ *$' |
		grep -m 1 -i -E 'error|not |fail|abort|cannot' | cut -c 1-160
}

# Runs a 2-rank job with selection logging and checks that the pml (and
# mtl) asked for are the ones selected on both ranks.  Prints one line
# saying why not on failure.
probe() {
	local t=$1 out rc pml mtl
	# shellcheck disable=SC2086
	out=$(timeout --kill-after=5 60 "${LAUNCH[@]}" --report-bindings \
		--mca pml_base_verbose 10 --mca mtl_base_verbose 10 ${ARGS[$t]} \
		"$BIN/bench_latency" -s 8 -t 2 -n 1 2>&1)
	rc=$?
	echo "$out" >"$RESULTS/probe-$t.log"
	pml=$(sed -n 's/.*--mca pml \([^ ]*\).*/\1/p' <<<"${ARGS[$t]}")
	mtl=$(sed -n 's/.*--mca mtl \([^ ]*\).*/\1/p' <<<"${ARGS[$t]}")
	if [ $rc -ne 0 ]; then
		if [ -n "$mtl" ] && grep -q "Component: *$mtl *\$" <<<"$out"; then
			echo "Open MPI has no mtl $mtl component${TM_NOTE:+; $TM_NOTE}"
		else
			echo "probe job failed, exit $rc: $(first_error <<<"$out")"
		fi
		return 1
	fi
	if [ "$(grep -c "select: component $pml selected" <<<"$out")" -lt 2 ]; then
		echo "pml $pml was not selected on both ranks"
		return 1
	fi
	if [ -n "$mtl" ] &&
	   [ "$(grep -c "select: component $mtl selected" <<<"$out")" -lt 2 ]; then
		echo "mtl $mtl was not selected on both ranks"
		return 1
	fi
}

TRANSPORTS=
for t in $ONLY; do
	[ -n "${ARGS[$t]+x}" ] || { echo "run.sh: unknown transport $t" >&2; exit 2; }
	if why=$(probe "$t"); then
		TRANSPORTS="$TRANSPORTS $t"
	elif [ "$t" = tm ]; then
		say "tm: not available ($why); comparing ob1 vs ucx only."
	else
		say "$t: not available ($why); skipped."
	fi
done
TRANSPORTS=${TRANSPORTS# }
[ -n "$TRANSPORTS" ] || { echo "run.sh: no transport works" >&2; exit 1; }
# The transport the others are compared with: tm, or ucx without tm.
BASE=
for b in tm ucx; do
	if [[ " $TRANSPORTS " == *" $b "* ]] && [ "$TRANSPORTS" != "$b" ]; then
		BASE=$b
		break
	fi
done

# ---- what is being compared --------------------------------------------------

ompi_ver=$(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p' | head -n 1)
ucx_ver=$(dpkg-query -W -f='${Version}' libucx0 2>/dev/null || echo "?")
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
bindings=$(grep -o 'MCW rank [0-9] bound to .*' "$RESULTS/probe-${TRANSPORTS%% *}.log" |
	sed 's/MCW //' | paste -sd ';' | sed 's/;/; /g')
say "# bench/run.sh results, $(date '+%Y-%m-%d %H:%M %Z')"
say ""
say "- machine: $(hostname), $cpu, $(nproc) CPUs, $(uname -r)"
say "- Open MPI ${ompi_ver:-?}, UCX $ucx_ver"
say "- launch: ${LAUNCH[*]} (binding: ${bindings:-?})"
for t in $TRANSPORTS; do say "- $t: ${ARGS[$t]}"; done
[[ " $TRANSPORTS " == *" tm "* ]] && say "- tm component: $TM_USED"
say "- load average before: $(cut -d ' ' -f 1-3 /proc/loadavg) (other jobs on these CPUs add noise)"
if [ -n "$OSU_GROUPS" ]; then
	say "- OSU ${OSU_VERSION:-of unknown version}:$(for b in $OSU_GROUPS; do printf ' %s' "${OSU_PATH[$b]##*/}"; done)" \
		"from $(dirname "${OSU_PATH[osu_latency]}")${OSU_ARGS:+, arguments $OSU_ARGS}"
	[ "$OSU_VERSION" = 7.4 ] || say "- WARNING: OSU is ${OSU_VERSION:-of unknown version}, not 7.4: its numbers are not the issue's"
fi
if [ -n "$IMB_PROG" ]; then
	printf '%s\n' $IMB_SIZES >"$RESULTS/imb-msglen.txt"
	say "- Intel MPI Benchmarks ${IMB_VERSION:-of unknown version}: $IMB_PROG PingPong Uniband Biband" \
		"-msglen imb-msglen.txt ($IMB_SIZES) ${IMB_ARGS:--time 2}"
fi
say "- up to $ROUNDS rounds (--max-time $MAX_TIME s), each: every benchmark over $(echo "$TRANSPORTS" | sed 's/ /, /g') back to back;" \
	"points of $BUDGET ms in $BATCHES batches, each launch counted by its $STAT batch"
say ""

# ---- rounds --------------------------------------------------------------------

BENCHES="$KINDS$OSU_GROUPS"
[ -n "$IMB_PROG" ] && BENCHES="$BENCHES imb"
# The plots want every benchmark's data.
[ "$KINDS" = "latency latency_mt bw rate depth" ] || PLOTS=0

# Turns OSU's "size value..." lines into our key=value lines.
osu_filter() {
	awk -v b="$1" '$1 ~ /^[0-9]+$/ && NF >= 2 {
		if (b == "osu_latency") printf "bench=%s size=%s usec=%s\n", b, $1, $2
		else if (b == "osu_mbw_mr") {
			if (NF >= 3) printf "bench=%s size=%s Mmsgs=%.6f\n", b, $1, $3 / 1e6
		} else printf "bench=%s size=%s MBps=%s\n", b, $1, $2
	}'
}

# Turns IMB-MPI1's tables ("#bytes #repetitions value...", one per
# "# Benchmarking NAME" header) into our lines: PingPong's t[usec],
# Uniband's and Biband's Msg/sec (below 64 KiB) or Mbytes/sec (IMB's
# MB: 10^6 B).
imb_filter() {
	awk '/^# Benchmarking / { b = "imb_" tolower($3); next }
	     b != "" && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 4 {
		if (b == "imb_pingpong") printf "bench=%s size=%s usec=%s\n", b, $1, $3
		else if ($1 < 65536) printf "bench=%s size=%s Mmsgs=%.6f\n", b, $1, $4 / 1e6
		else printf "bench=%s size=%s MBps=%s\n", b, $1, $3
	}'
}

declare -A HUNG
run_one() {
	local r=$1 g=$2 t=$3 cmd out rc t0=$SECONDS
	# A launch that hung once would cost LAUNCH_TIMEOUT every round.
	[ -n "${HUNG[$g,$t]+x}" ] && return
	if [ -n "${OSU_PATH[$g]+x}" ]; then
		# shellcheck disable=SC2206
		cmd=("${OSU_PATH[$g]}" ${OSU_ARGS:-})
	elif [ "$g" = imb ]; then
		# shellcheck disable=SC2206
		cmd=("$IMB_PROG" PingPong Uniband Biband -msglen "$RESULTS/imb-msglen.txt" ${IMB_ARGS:--time 2})
	else
		cmd=("$BIN/bench_$g" -t "$BUDGET" -n "$BATCHES")
	fi
	# shellcheck disable=SC2086
	out=$(timeout --kill-after=5 "$LAUNCH_TIMEOUT" "${LAUNCH[@]}" ${ARGS[$t]} \
		"${cmd[@]}" 2>"$RESULTS/last.err")
	rc=$?
	echo "round=$r bench=$g transport=$t exit=$rc sec=$((SECONDS - t0))" >>"$RESULTS/launches.log"
	if [ -n "${OSU_PATH[$g]+x}" ]; then
		out=$(osu_filter "$g" <<<"$out")
		# OSU's output changing shape must not pass as "no numbers".
		if [ $rc -eq 0 ] && [ -z "$out" ]; then
			echo "round $r: $g over $t printed no size lines" >&2
			echo "== round $r: $g over $t: exit 0 but no \"size value\" lines" >>"$ERRLOG"
		fi
	elif [ "$g" = imb ]; then
		# IMB stops a benchmark's remaining sizes after -time x sizes s.
		grep -q 'time-out' <<<"$out" &&
			echo "== round $r: IMB-MPI1 over $t: time-out (sizes left unmeasured; raise -time in \$IMB_ARGS)" >>"$ERRLOG"
		out=$(imb_filter <<<"$out")
		if [ $rc -eq 0 ] && [ "$(grep -c . <<<"$out")" -lt 3 ]; then
			echo "round $r: IMB-MPI1 over $t printed no result lines" >&2
			echo "== round $r: IMB-MPI1 over $t: exit 0 but no \"#bytes #repetitions\" lines" >>"$ERRLOG"
		fi
	fi
	grep '^bench=' <<<"$out" | sed "s/^/round=$r transport=$t /" >>"$RAW"
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		HUNG[$g,$t]=1
		echo "round $r: $g over $t timed out after $LAUNCH_TIMEOUT s; not run again" >&2
	fi
	if [ $rc -ne 0 ]; then
		echo "round $r: $g over $t failed (exit $rc), see $ERRLOG" >&2
		{ echo "== round $r: $g over $t, exit $rc"; cat "$RESULTS/last.err"; } >>"$ERRLOG"
	fi
	rm -f "$RESULTS/last.err"
}

# Percent of CPU time used by other processes over 0.3 s: rounds measured
# while other jobs ran are flagged, their numbers are suspect.
busy_pct() {
	local a b
	read -r -a a < <(head -n 1 /proc/stat)
	sleep 0.3
	read -r -a b < <(head -n 1 /proc/stat)
	local idle=$(( (b[4] + b[5]) - (a[4] + a[5]) ))
	local total=$(( b[1]+b[2]+b[3]+b[4]+b[5]+b[6]+b[7]+b[8] - \
		(a[1]+a[2]+a[3]+a[4]+a[5]+a[6]+a[7]+a[8]) ))
	echo $(( total > 0 ? 100 * (total - idle) / total : 0 ))
}

start=$SECONDS
done_rounds=0
busy_list=
for r in $(seq 1 "$ROUNDS"); do
	elapsed=$((SECONDS - start))
	# Stop early rather than overrun: a round lasts about as long as the
	# ones before it.
	if [ "$r" -gt 1 ] && [ $((elapsed + elapsed / (r - 1))) -gt "$MAX_TIME" ]; then
		echo "stopping after $((r - 1)) rounds: --max-time $MAX_TIME s" >&2
		break
	fi
	busy=$(busy_pct)
	busy_list="$busy_list $busy%"
	for g in $BENCHES; do
		for t in $TRANSPORTS; do
			run_one "$r" "$g" "$t"
		done
	done
	done_rounds=$r
	echo "round $r/$ROUNDS done, $((SECONDS - start)) s (other jobs used $busy% CPU before it)" >&2
done
say "- rounds done: $done_rounds; CPU used by other jobs just before each:$busy_list"
say "- load average after: $(cut -d ' ' -f 1-3 /proc/loadavg); measuring took $((SECONDS - start)) s"
say ""

# ---- tables and plots ------------------------------------------------------------

summarize() {
	awk -v transports="$TRANSPORTS" -v base="$BASE" -v stat="$STAT" "$@" \
		-f "$BENCH_SRC/summarize.awk" "$RAW"
}

legend="Each launch counts with its $STAT batch (--stat).
Cells: median over rounds ±half the interquartile range (in % of the median).
Ratios: A/B of the metric, computed per round, median [IQR]; for
usec lower is better, for MBps (10^6 B/s) and Mmsgs (10^6 msgs/s) higher."
summarize -v part=table -v rows=all >"$RESULTS/table-all.md"
summarize -v part=table -v rows=key -v datadir="$RESULTS" | tee -a "$RESULTS/summary.md"
say ""
say "$legend"
say ""
summarize -v part=depth | tee -a "$RESULTS/summary.md"
say ""
say "Queue cost: latency at the deepest D over latency at D=0, per transport,"
say "per round (same launch), median [IQR]."
if [ "$BASE" = tm ] && { [ -n "$KINDS" ] || [ "$OSU" = 1 ]; }; then
	say ""
	summarize -v part=targets | tee -a "$RESULTS/summary.md"
	say ""
	say "Issue 18 (medians over rounds; the ratio is per round: tm's latency"
	say "over the better peer's, tm's rate over the better peer's):"
	say ""
	summarize -v part=issue | tee -a "$RESULTS/summary.md"
fi
if [ -n "$IMB_PROG" ]; then
	say ""
	say "Intel MPI Benchmarks $IMB_VERSION (medians over rounds; the ratio is per"
	say "round, tm against the better of ob1 and ucx: time over time, rate over rate):"
	say ""
	summarize -v part=imb | tee -a "$RESULTS/summary.md"
fi
say ""
say "Every point: $RESULTS/table-all.md; raw lines: $RAW."

if [ "$PLOTS" = 1 ]; then
	if command -v gnuplot >/dev/null; then
		if gnuplot -e "dir='$RESULTS'; transports='$TRANSPORTS'" \
			"$BENCH_SRC/plot.gp" 2>"$RESULTS/gnuplot.log"; then
			say "Plots: $RESULTS/{latency,bandwidth,rate,depth}.png"
		else
			say "Plots failed: see $RESULTS/gnuplot.log"
		fi
	else
		say "No plots: gnuplot is missing (scripts/install-deps.sh installs gnuplot-nox)."
	fi
fi
ln -sfn "$RESULTS" "$(dirname "$RESULTS")/latest" 2>/dev/null
[ -s "$ERRLOG" ] && echo "Some runs failed: $ERRLOG" >&2
echo "Total $((SECONDS - start)) s of measurement." >&2
# Asked for and never measured is a failure, not a table of dashes.
if [ "$OSU" = 1 ] && ! grep -q ' bench=osu_' "$RAW"; then
	echo "run.sh: --osu: no OSU program gave a result in any round; see $ERRLOG" >&2
	exit 1
fi
if [ -n "$IMB_PROG" ] && ! grep -q ' bench=imb_' "$RAW"; then
	echo "run.sh: --imb: IMB-MPI1 gave no result in any round; see $ERRLOG" >&2
	exit 1
fi
exit 0
