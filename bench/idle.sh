#!/bin/bash
# bench/idle.sh - what an idle progress call costs as the number of
# connected peers grows: np ranks on one node (oversubscribed), every rank
# has exchanged messages with every other, then rank 0 makes calls that
# find nothing (bench/idle.c).  Instructions per call by default, from
# callgrind on rank 0 alone (deterministic); -T for nanoseconds.
#
#   bench/idle.sh [-b BUILD_DIR] [-p NPS] [-k KINDS] [-x TRANSPORTS]
#                 [-n CALLS] [-f TOP] [-T MS [-r ROUNDS]]
#
#   -p NPS         rank counts (default "16 64")
#   -k KINDS       of "probe test-any test-peer" (default all three):
#                  MPI_Iprobe with nothing posted, MPI_Test on a posted
#                  any-source receive, on a receive naming rank 1
#   -x TRANSPORTS  of "tm ob1 ucx" (default "tm ob1"), mpirun arguments as
#                  in bench/run.sh
#   -n CALLS       rank 0 runs its loop with CALLS and 2*CALLS calls and
#                  the difference per call is reported (default 2000)
#   -f TOP         also list the TOP functions per call at the largest np
#   -T MS          time instead (ns per call, batches filling MS ms): the
#                  transports alternate within each of ROUNDS rounds
#                  (default 5) and the ratios are medians of per-round
#                  ratios.  Meaningless under load, like every timing.
# The tm component is the one built in BUILD_DIR (default build/normal;
# bench_idle and mca_mtl_tm.so are brought up to date there first).
# TM_DEV_RCACHE=0: libucm's hooks turn themselves off under valgrind.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build/normal
nps="16 64"
kinds="probe test-any test-peer"
transports="tm ob1"
calls=2000
top=0
ms=
rounds=5
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }
while getopts "b:p:k:x:n:f:T:r:h" o; do
	case $o in
	b) build=$OPTARG ;;
	p) nps=$OPTARG ;;
	k) kinds=$OPTARG ;;
	x) transports=$OPTARG ;;
	n) calls=$OPTARG ;;
	f) top=$OPTARG ;;
	T) ms=$OPTARG ;;
	r) rounds=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
die() { echo "idle.sh: $1" >&2; exit "${2:-1}"; }
[ $# -eq 0 ] || die "unexpected argument $1" 2
for n in $nps; do
	[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] || die "-p: rank counts of at least 2, not '$n'" 2
done
for k in $kinds; do
	case $k in probe|test-any|test-peer) ;; *) die "-k: unknown kind $k" 2 ;; esac
done
[[ $calls =~ ^[0-9]+$ ]] && [ "$calls" -ge 1 ] || die "-n: a positive count" 2
[[ $top =~ ^[0-9]+$ ]] || die "-f: a count" 2
[[ $rounds =~ ^[0-9]+$ ]] && [ "$rounds" -ge 1 ] || die "-r: a positive count" 2
if [ -n "$ms" ] && ! { [[ $ms =~ ^[0-9]+$ ]] && [ "$ms" -ge 1 ]; }; then
	die "-T: milliseconds" 2
fi

build=$(cd "$build" 2>/dev/null && pwd) || die "no build directory (run scripts/run-tests.sh --quick or configure first)"
[ -n "$ms" ] || command -v valgrind >/dev/null || die "needs valgrind (or -T for timings)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make -C "$build" -j2 bench/bench_idle mca_mtl_tm.la >"$tmp/build.log" 2>&1 ||
	{ tail -n 20 "$tmp/build.log" >&2; die "building bench_idle or mca_mtl_tm.so in $build failed"; }
prog=$build/bench/bench_idle
pkglib=$(ompi_info --parsable --path pkglibdir 2>/dev/null | sed -n 's/^path:pkglibdir://p')

declare -A ARGS
ARGS[tm]="--mca pml cm --mca mtl tm --mca mca_base_component_path $build/.libs:$pkglib"
ARGS[ob1]="--mca pml ob1 --mca btl self,vader"
ARGS[ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
for t in $transports; do
	[ -n "${ARGS[$t]+x}" ] || die "-x: unknown transport $t" 2
done
# Oversubscribed, Open MPI would yield the CPU in every idle progress
# call (mpi_yield_when_idle, a system call that dwarfs what is measured).
launch=(mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 0)
[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)

# One job; rank 0 under callgrind unless timing.  Output in $tmp/$tag.*.
run() {
	local t=$1 np=$2 kind=$3 tag=$4 wrap=()
	if [ -z "$ms" ]; then
		wrap=(sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then exec valgrind \
			--tool=callgrind --toggle-collect=idle_loop --dump-after=idle_loop \
			--callgrind-out-file="$0" "$@"; else exec "$@"; fi' "$tmp/$tag.cg")
	fi
	# shellcheck disable=SC2086
	TM_DEV_RCACHE=0 timeout --kill-after=5 "${LAUNCH_TIMEOUT:-600}" \
		"${launch[@]}" -np "$np" ${ARGS[$t]} "${wrap[@]}" "$prog" -k "$kind" \
		-n "$calls" ${ms:+-t "$ms"} >"$tmp/$tag.out" 2>"$tmp/$tag.err" && return 0
	echo "idle.sh: $kind over $t at np $np failed (exit $?):" >&2
	# bench_idle's own complaint first, then how the job ended
	grep '^bench_idle:' "$tmp/$tag.err" >&2
	grep -v -e '^==' -e '^bench_idle:' "$tmp/$tag.err" | tail -n 8 >&2
	return 1
}

# Instructions of one idle call: callgrind dumped the loop with CALLS
# calls (.1) and with 2*CALLS calls (.2).
ir_per_call() {
	local f=$tmp/$1.cg a b
	a=$(sed -n 's/^summary: //p' "$f.1" 2>/dev/null)
	b=$(sed -n 's/^summary: //p' "$f.2" 2>/dev/null)
	[ -n "$a" ] && [ -n "$b" ] ||
		{ echo "idle.sh: callgrind left no dump of idle_loop for $1" >&2; return 1; }
	awk -v a="$a" -v b="$b" -v n="$calls" 'BEGIN { printf "%.1f\n", (b - a) / n }'
}

# The TOP functions of the extra CALLS calls (exclusive Ir per call).
top_functions() {
	local f=$tmp/$1.cg
	callgrind_annotate --threshold=100 "$f.1" >"$f.a1" 2>/dev/null &&
		callgrind_annotate --threshold=100 "$f.2" >"$f.a2" 2>/dev/null || return 1
	python3 - "$f.a1" "$f.a2" "$calls" "$top" <<'PY'
import re, sys
a_file, b_file, n, top = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
line_re = re.compile(r'\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?):(\S+)(?: \[(.*)\])?\s*$')
def load(p):
    d, objs, total = {}, {}, 0
    for l in open(p):
        if 'PROGRAM TOTALS' in l:
            total = int(l.split()[0].replace(',', ''))
            continue
        m = line_re.match(l)
        if not m:
            continue
        v = int(m.group(1).replace(',', ''))
        # one function inlined from several files: summed under its name
        fn = m.group(3)
        d[fn] = d.get(fn, 0) + v
        if m.group(4):
            objs[fn] = m.group(4).split('/')[-1]
    # the frames below idle_loop carry the whole dump: not functions' own
    return {k: v for k, v in d.items() if v < total}, objs
(a, _), (b, objs) = load(a_file), load(b_file)
diff = {k: (b.get(k, 0) - a.get(k, 0)) / n for k in set(a) | set(b)}
for fn, v in sorted(diff.items(), key=lambda kv: -kv[1])[:top]:
    print('    %7.1f  %s (%s)' % (v, fn, objs.get(fn, '?')))
PY
}

max_np=0
for np in $nps; do [ "$np" -gt "$max_np" ] && max_np=$np; done
failed=0
declare -A V

if [ -z "$ms" ]; then
	echo "Instructions per idle call on rank 0 (callgrind, $calls vs $((2 * calls)) calls; exact)"
	for k in $kinds; do
		for np in $nps; do
			for t in $transports; do
				tag=$k.$t.$np
				if run "$t" "$np" "$k" "$tag" && v=$(ir_per_call "$tag"); then
					V[$k,$t,$np]=$v
					if [ "$top" -gt 0 ] && [ "$np" = "$max_np" ]; then
						echo "  $k, $t, np $np: top functions (Ir per call)"
						top_functions "$tag"
					fi
				else
					failed=1
				fi
			done
		done
	done
	unit="Ir per call"
else
	echo "Nanoseconds per idle call on rank 0 ($ms ms of batches per launch, $rounds rounds; ratios only)"
	for r in $(seq 1 "$rounds"); do
		for k in $kinds; do
			for np in $nps; do
				for t in $transports; do
					tag=$k.$t.$np.$r
					if run "$t" "$np" "$k" "$tag"; then
						v=$(sed -n 's/.* nsec=\([0-9.]*\) .*/\1/p' "$tmp/$tag.out")
						[ -n "$v" ] && V[$k,$t,$np,$r]=$v
					else
						failed=1
					fi
				done
			done
		done
	done
	unit="ns per call, median of rounds"
fi

# The table: one row per kind and transport, one column per np, the
# growth per added peer, then each transport against the first one.
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
value() {	# kind transport np [round]: a cell's number, or nothing
	if [ -z "$ms" ]; then
		echo "${V[$1,$2,$3]:-}"
	else
		for r in $(seq 1 "$rounds"); do echo "${V[$1,$2,$3,$r]:-}"; done | grep . |
			median | awk '{ printf "%.1f\n", $1 }'
	fi
}
ratio() {	# kind transport base np: median per-round ratio
	if [ -z "$ms" ]; then
		local a=${V[$1,$2,$4]:-} b=${V[$1,$3,$4]:-}
		[ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.2f\n", a / b }'
	else
		for r in $(seq 1 "$rounds"); do
			local a=${V[$1,$2,$4,$r]:-} b=${V[$1,$3,$4,$r]:-}
			[ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) print a / b }'
		done | median | awk '{ printf "%.2f\n", $1 }'
	fi
}
min_np=$max_np
for np in $nps; do [ "$np" -lt "$min_np" ] && min_np=$np; done
base=${transports%% *}
echo
hdr="| kind | transport |"; sep="| --- | --- |"
for np in $nps; do hdr="$hdr np $np |"; sep="$sep ---: |"; done
[ "$max_np" -gt "$min_np" ] && { hdr="$hdr per added peer |"; sep="$sep ---: |"; }
echo "$hdr"; echo "$sep"
for k in $kinds; do
	for t in $transports; do
		line="| $k | $t |"
		for np in $nps; do line="$line $(value "$k" "$t" "$np" | grep . || echo -) |"; done
		if [ "$max_np" -gt "$min_np" ]; then
			lo=$(value "$k" "$t" "$min_np"); hi=$(value "$k" "$t" "$max_np")
			line="$line $([ -n "$lo" ] && [ -n "$hi" ] &&
				awk -v a="$lo" -v b="$hi" -v d=$((max_np - min_np)) \
				'BEGIN { printf "%.2f", (b - a) / d }' || echo -) |"
		fi
		echo "$line"
	done
	for t in $transports; do
		[ "$t" = "$base" ] && continue
		line="| $k | $base/$t |"
		for np in $nps; do line="$line $(ratio "$k" "$base" "$t" "$np" | grep . || echo -) |"; done
		[ "$max_np" -gt "$min_np" ] && line="$line |"
		echo "$line"
	done
done
echo
note="Cells: $unit."
[ "$max_np" -gt "$min_np" ] &&
	note="$note  \"per added peer\": (np $max_np - np $min_np) / $((max_np - min_np))."
echo "$note"
[ "$failed" = 0 ] || die "some jobs failed (see above)"
