#!/bin/bash
# mem.sh - memory per rank, mtl tm against Open MPI's own transports.
#
# For each rank count N (all on this node, oversubscribed as needed):
# every rank sends one 8-byte message to every other rank, then each
# reports its peak RSS (VmHWM); the table gives the mean over the ranks,
# the ratio tm/ob1, and the wall time of the job.  Then the flood: rank 0
# sends FLOOD back-to-back 8-byte messages to rank 1, which first drives
# progress for LATE ms without receiving (a late receiver), then receives
# them; the receiver's peak RSS is what it kept of the unexpected ones.
# Peak RSS does not depend on the machine's load; the times do.
#
# Usage: bench/mem.sh [--ranks "4 16 64"] [--flood N] [--late MS]
#                     [--transports "tm ob1"] [--build-dir DIR]
#                     [--limits]   (also, per job, what the largest rank
#                                   count costs in descriptors and maps)
# Environment: TM_MCA adds mpirun arguments for tm; LAUNCH_TIMEOUT (s,
# default 1200) bounds each mpirun.
set -uo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
RANKS="4 16 64"
FLOOD=1000000
LATE=3000
ONLY="tm ob1"
BUILD_DIR=$TOP/build/normal
LIMITS=0
LAUNCH_TIMEOUT=${LAUNCH_TIMEOUT:-1200}

while [ $# -gt 0 ]; do
	case $1 in
	--ranks) RANKS=$2; shift ;;
	--flood) FLOOD=$2; shift ;;
	--late) LATE=$2; shift ;;
	--transports) ONLY=$2; shift ;;
	--build-dir) BUILD_DIR=$(realpath -m "$2"); shift ;;
	--limits) LIMITS=1 ;;
	-h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "mem.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done

TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
PROG=$TMP/mem_peers
mpicc -O2 -o "$PROG" "$TOP/bench/mem_peers.c" || exit 1

# tm from --build-dir (built here if it has a Makefile), as bench/run.sh
PKGLIB=$(ompi_info --parsable --path pkglibdir 2>/dev/null | sed -n 's/^path:pkglibdir://p')
if [ -f "$BUILD_DIR/Makefile" ] &&
   make -C "$BUILD_DIR" -j2 mca_mtl_tm.la > "$TMP/build.log" 2>&1; then
	TM_PATH="--mca mca_base_component_path $BUILD_DIR/.libs:$PKGLIB"
else
	TM_PATH=
	echo "mem.sh: no build in $BUILD_DIR: using the installed mtl tm" >&2
fi
declare -A ARGS=(
	[tm]="--mca pml cm --mca mtl tm $TM_PATH ${TM_MCA:-}"
	[ob1]="--mca pml ob1 --mca btl self,vader"
	[ucx]="--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any"
)
LAUNCH=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && LAUNCH+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}

# job T N ARGS...: runs, prints "<mean kB> <max kB> <seconds>" or "fail"
job() {
	local t=$1 n=$2 out s0 s1
	shift 2
	s0=$(date +%s.%N)
	out=$(timeout "$LAUNCH_TIMEOUT" "${LAUNCH[@]}" -np "$n" ${ARGS[$t]} \
		"$PROG" "$@" 2> "$TMP/err.$t.$n")
	s1=$(date +%s.%N)
	if [ $# = 0 ]; then
		out=$(echo "$out" | sed -n 's/^mem: ranks .* mean \([0-9]*\) max \([0-9]*\)$/\1 \2/p')
	else
		out=$(echo "$out" | sed -n 's/^mem: flood .* rank 1 peak_rss_kb \([0-9]*\)$/\1 \1/p')
	fi
	if [ -z "$out" ]; then
		echo fail
		sed 's/^/    /' "$TMP/err.$t.$n" | head -n 5 >&2
	else
		echo "$out $(echo "$s1 - $s0" | bc)"
	fi
}

mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

hdr="| ranks |"; sep="| --- |"
for t in $ONLY; do hdr+=" $t MB/rank |"; sep+=" --- |"; done
[[ " $ONLY " == *" tm "* && " $ONLY " == *" ob1 "* ]] && { hdr+=" tm/ob1 |"; sep+=" --- |"; }
for t in $ONLY; do hdr+=" $t s |"; sep+=" --- |"; done
echo "Peak RSS per rank (mean over ranks), one 8 B message to every peer:"
echo "$hdr"; echo "$sep"
for n in $RANKS; do
	row="| $n |"; times=""
	declare -A KB=()
	for t in $ONLY; do
		r=$(job "$t" "$n")
		if [ "$r" = fail ]; then
			row+=" fail |"; times+=" - |"
		else
			set -- $r
			KB[$t]=$1
			row+=" $(mb "$1") |"; times+=" $(printf '%.1f' "$3") |"
		fi
	done
	if [[ -n "${KB[tm]:-}" && -n "${KB[ob1]:-}" ]]; then
		row+=" $(awk -v a="${KB[tm]}" -v b="${KB[ob1]}" 'BEGIN { printf "%.2f", a / b }') |"
	elif [[ " $ONLY " == *" tm "* && " $ONLY " == *" ob1 "* ]]; then
		row+=" - |"
	fi
	echo "$row$times"
	for t in $ONLY; do
		[ -n "${KB[$t]:-}" ] && echo "$t $n ${KB[$t]}" >> "$TMP/points"
	done
done
# growth per peer: least squares over the rank counts that ran
echo
for t in $ONLY; do
	awk -v t="$t" '$1 == t { n++; x += $2; y += $3; xx += $2 * $2; xy += $2 * $3 }
		END { if (n > 1) printf "%s grows by %.3f MB per peer\n", t,
			(n * xy - x * y) / (n * xx - x * x) / 1024 }' "$TMP/points" 2>/dev/null
done

if [ "$FLOOD" -gt 0 ]; then
	echo
	echo "Flood: $FLOOD back-to-back 8 B messages, receiver $LATE ms late; receiver's peak RSS:"
	for t in $ONLY; do
		r=$(job "$t" 2 flood "$FLOOD" "$LATE")
		if [ "$r" = fail ]; then
			echo "  $t: fail"
		else
			set -- $r
			echo "  $t: $(mb "$1") MB ($(printf '%.1f' "$3") s)"
		fi
	done
fi

if [ "$LIMITS" = 1 ]; then
	n=$(echo $RANKS | awk '{ print $NF }')
	echo
	echo "Resources of one rank of a $n-rank tm job (sampled mid-run):"
	"${LAUNCH[@]}" -np "$n" ${ARGS[tm]} "$PROG" hold 20 > "$TMP/hold.out" 2>&1 &
	job_pid=$!
	pid=
	# once rank 0 has printed, every rank is in its 20 s wait
	while kill -0 "$job_pid" 2>/dev/null && ! grep -q '^mem:' "$TMP/hold.out"; do
		sleep 0.5
	done
	pid=$(pgrep -n -f "^$PROG hold 20\$" 2>/dev/null | head -n 1)
	if [ -n "$pid" ] && [ -d /proc/$pid ]; then
		echo "  descriptors $(ls /proc/$pid/fd | wc -l) (limit $(ulimit -n)),"\
		     "maps $(wc -l < /proc/$pid/maps) (limit $(cat /proc/sys/vm/max_map_count)),"\
		     "softtm mappings $(grep -c softtm /proc/$pid/maps)"
	else
		echo "  (no rank found to sample)"
	fi
	wait "$job_pid"
fi
