#!/bin/bash
# bench/scale.sh - what a rank holds as the job grows, mtl tm against
# Open MPI's own transports (issue 24, "Measure"; doc/SCALE.md).
#
#   bench/scale.sh [-b BUILD_DIR] [-p NPS] [-x TRANSPORTS] [-k PATTERNS]
#                  [-n ROUNDS]
#
#   -p NPS         rank counts on this node, oversubscribed (default
#                  "16 64 128")
#   -x TRANSPORTS  of "tm ob1 ucx" (default all three): pml cm + mtl tm
#                  (the mca_mtl_tm.so of BUILD_DIR), pml ob1, pml ucx;
#                  each with btl self,vader (Open MPI opens its BTLs
#                  under every pml, for one-sided; btl tcp's two
#                  listening sockets would count against tm and ucx only)
#   -k PATTERNS    of "ring a2a" (default both): bench/scale.c
#   -n ROUNDS      exchanges per peer (default 10)
#
# One job per (transport, rank count, pattern).  Per rank, mean and max
# over the ranks: MPI_Init time (s), open descriptors and mappings after
# MPI_Init and after the traffic, VmRSS after MPI_Init and after, VmHWM
# (kB); and the modex bytes each rank publishes:
#   tm   sizeof(struct mtl_tm_modex), what mtl_tm_addr.c publishes
#        whatever the job's size (connect on first use), taken by
#        compiling mtl/mtl_tm.h with BUILD_DIR's compiler and flags;
#        "?" if that fails
#   ucx  measured: the sizes pml ucx logs at pml_ucx_verbose 2 ("Pack
#        remote/local worker address, size N", summed), from a separate
#        2-rank job (the address does not depend on the job's size)
#   ob1  not measured ("-"): vader's modex is not logged.
# The load average at the start of each job is printed with it: on a
# shared machine the times mean little, the counts and sizes do not.
# Timings are evidence only; nothing here is a pass/fail test.
# LAUNCH_TIMEOUT (s, default 900) bounds each mpirun.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build/normal
nps="16 64 128"
transports="tm ob1 ucx"
patterns="ring a2a"
rounds=10
usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "scale.sh: $1" >&2; exit "${2:-1}"; }
while getopts "b:p:x:k:n:h" o; do
	case $o in
	b) build=$OPTARG ;;
	p) nps=$OPTARG ;;
	x) transports=$OPTARG ;;
	k) patterns=$OPTARG ;;
	n) rounds=$OPTARG ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || die "unexpected argument $1" 2
for n in $nps; do
	[[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] || die "-p: rank counts of at least 2, not '$n'" 2
done
for k in $patterns; do
	case $k in ring|a2a) ;; *) die "-k: unknown pattern $k (ring, a2a)" 2 ;; esac
done
[[ $rounds =~ ^[0-9]+$ ]] && [ "$rounds" -ge 1 ] || die "-n: a positive count" 2
for t in $transports; do
	case $t in tm|ob1|ucx) ;; *) die "-x: unknown transport $t (tm, ob1, ucx)" 2 ;; esac
done

build=$(cd "$build" 2>/dev/null && pwd) || die "no build directory (configure first)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make -C "$build" -j2 bench/bench_scale mca_mtl_tm.la >"$tmp/build.log" 2>&1 ||
	{ tail -n 20 "$tmp/build.log" >&2; die "building bench_scale or mca_mtl_tm.so in $build failed"; }
prog=$build/bench/bench_scale
pkglib=$(ompi_info --parsable --path pkglibdir 2>/dev/null | sed -n 's/^path:pkglibdir://p')

declare -A ARGS
ARGS[tm]="--mca pml cm --mca mtl tm --mca btl self,vader --mca mca_base_component_path $build/.libs:$pkglib"
ARGS[ob1]="--mca pml ob1 --mca btl self,vader"
ARGS[ucx]="--mca pml ucx --mca btl self,vader --mca pml_ucx_tls any --mca pml_ucx_devices any"
launch=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)

# The bytes one rank of pml ucx publishes: what it logs packing its
# worker addresses (remote and local), for one rank of a 2-rank job.
ucx_modex_bytes() {
	# shellcheck disable=SC2086
	timeout 300 "${launch[@]}" -np 2 ${ARGS[ucx]} --mca pml_ucx_verbose 2 \
		"$prog" ring -n 1 2>&1 |
		awk '/Pack (remote|local) worker address, size/ {
			if (!seen[$1 $4]++) s[$1] += $NF }
		END { for (p in s) { print s[p]; exit } }'
}
ucx_modex=-
if [[ " $transports " == *" ucx "* ]]; then
	ucx_modex=$(ucx_modex_bytes)
	[ -n "$ucx_modex" ] || ucx_modex=-
fi

# sizeof(struct mtl_tm_modex) as BUILD_DIR compiles mtl/mtl_tm.h (printed
# by a program built for it).
tm_modex_sizes() {
	local mk=$build/Makefile cc cppflags
	cc=$(sed -n 's/^CC = //p' "$mk")
	cppflags=$(sed -n 's/^OMPI_CPPFLAGS = //p' "$mk")
	cat >"$tmp/sizes.c" <<-'EOF'
	#include "config.h"
	#include "mtl/mtl_tm.h"
	#include <stdio.h>
	int main(void)
	{
		printf("%zu\n", sizeof(struct mtl_tm_modex));
		return 0;
	}
	EOF
	# shellcheck disable=SC2086
	${cc:-cc} -I "$build" -I "$here/../ompi_btl_tm" $cppflags \
		-o "$tmp/sizes" "$tmp/sizes.c" >"$tmp/sizes.log" 2>&1 &&
		"$tmp/sizes"
}
tm_modex=
if [[ " $transports " == *" tm "* ]]; then
	tm_modex=$(tm_modex_sizes) ||
		{ echo "scale.sh: cannot size struct mtl_tm_modex (tm's modex bytes: ?):" >&2
		  tail -n 5 "$tmp/sizes.log" >&2; tm_modex=; }
fi

# Modex bytes per rank of transport $1 at $2 ranks ("-" if unknown).
modex_bytes() {
	case $1 in
	tm) echo "${tm_modex:-?}" ;;
	ucx) echo "$ucx_modex" ;;
	*) echo - ;;
	esac
}

# The mean/max of quantity $2 in output file $1 as "mean/max".
field() {
	awk -v w="$2" '$1 == "scale:" { ok = 0
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if (v["what"] == w) print v["mean"] "/" v["max"] }' "$1"
}

printf '%-4s %5s %-5s %5s %11s %9s %9s %11s %11s %15s %15s %11s %6s\n' \
	transp np patt load init_s fd_init fd_after maps_init maps_after \
	rss_init_kb rss_after_kb hwm_kb modex
echo "(each cell: mean/max over the ranks; load: 1-minute load average at the job's start)"
fail=0
for np in $nps; do
	for t in $transports; do
		for k in $patterns; do
			tag=$t.$np.$k
			load=$(cut -d' ' -f1 /proc/loadavg)
			# shellcheck disable=SC2086
			timeout --kill-after=5 "${LAUNCH_TIMEOUT:-900}" \
				"${launch[@]}" -np "$np" ${ARGS[$t]} "$prog" "$k" \
				-n "$rounds" >"$tmp/$tag.out" 2>"$tmp/$tag.err"
			rc=$?
			if [ $rc -ne 0 ]; then
				if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
					echo "scale.sh: $k over $t at np $np did not end within ${LAUNCH_TIMEOUT:-900} s (LAUNCH_TIMEOUT)" >&2
				else
					echo "scale.sh: $k over $t at np $np failed (exit $rc):" >&2
				fi
				tail -n 8 "$tmp/$tag.err" >&2
				fail=1
				continue
			fi
			# each cell "mean/max": anything else means bench_scale's
			# report is not what field() reads
			cells=() bad=0
			for w in init_s fd_init fd_after maps_init maps_after \
				rss_init_kb rss_after_kb hwm_kb; do
				c=$(field "$tmp/$tag.out" "$w")
				[[ $c =~ ^-?[0-9.]+/-?[0-9.]+$ ]] || bad=1
				cells+=("$c")
			done
			if [ $bad = 1 ]; then
				echo "scale.sh: $k over $t at np $np: no complete report from bench_scale:" >&2
				tail -n 8 "$tmp/$tag.out" "$tmp/$tag.err" >&2
				fail=1
				continue
			fi
			printf '%-4s %5s %-5s %5s %11s %9s %9s %11s %11s %15s %15s %11s %6s\n' \
				"$t" "$np" "$k" "$load" "${cells[@]}" "$(modex_bytes "$t" "$np")"
		done
	done
done
exit $fail
