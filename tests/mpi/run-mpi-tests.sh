#!/bin/bash
# run-mpi-tests.sh - the MPI test programs under mpirun, over several
# configurations and rank counts (TAP: one line per program, configuration
# and number of ranks).
#
#   tests/mpi/run-mpi-tests.sh [program ...]
#   tests/mpi/mpi-CONFIG.sh [program ...]         (make check runs these)
#
# make check runs each configuration as a test of its own, through a link
# named mpi-CONFIG.sh to this script (the configuration is the name's
# middle), so that each has its own time limit and make -j runs them side
# by side.
#
# Configurations:
#   ob1         --mca pml ob1 --mca btl self,vader: the reference, always
#               run, so that a failure under tm is known to be tm's
#   tm          --mca pml cm --mca mtl tm (soft HCA, defaults)
#   tm-small    tm with the soft HCA squeezed: one tag entry on the card,
#               one outstanding list op, 2-packet rings, 256 B MTU
#   tm-random   tm with the soft HCA's random scheduling (races)
#   tm-notm     tm with the soft HCA offering no tag matching (softhca_no_tm):
#               the mode of RDMA devices without it, every message matched
#               in software over plain RC; each program at one rank count
#               (the second of its list, else the first) to keep CI time
#               down; mpi_card checks that every rank's statistics line
#               says so and that the card matched nothing
# The tm configurations run only when mtl tm is selectable; otherwise each
# of their lines is "ok N ... # SKIP mtl tm not installed".  Which mtl tm:
#   MPI_TESTS_TM=auto       (default) the one built in this tree
#                           (top_builddir/.libs/mca_mtl_tm.so, put first on
#                           mca_base_component_path) if there is one, else
#                           the one installed in Open MPI, if any
#   MPI_TESTS_TM=build | installed | no
# Other knobs (environment):
#   MPI_TESTS_CONFIGS   configurations to run (default "ob1 tm tm-small
#                       tm-random tm-notm"); the others are not listed at all
#   MPI_TESTS_NP        rank counts for every program (default: per program)
#   MPI_TESTS_PROGS     programs to run when none is named (default: all)
#   MPI_TESTS_TIMEOUT   seconds per mpirun (default 60); a hang fails
#   MPITEST_SEED        seed of the programs' random choices (default: the
#                       clock; printed, so a failure can be rerun)
#   MPIRUN              mpirun to use (make check passes configure's)
# Each line's diagnostics show what the program checked; a failure shows
# the program's output and the mpirun command line to rerun it.
# Card share: mpi_card in the "tm" configuration (default card, receives
# pre-posted) runs with mtl_tm_verbose 10, and each rank's statistics
# line must show at least 90% of its receives matched on the card.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top_builddir=${top_builddir:-.}
builddir=$(cd "$top_builddir" && pwd)
progdir=$builddir/tests/mpi
MPIRUN=${MPIRUN:-mpirun}
timeout_s=${MPI_TESTS_TIMEOUT:-60}
all_configs="ob1 tm tm-small tm-random tm-notm"
case $(basename "$0") in
mpi-*.sh)
	configs=$(basename "$0" .sh)
	configs=${configs#mpi-}
	case " $all_configs " in
	*" $configs "*) ;;
	*) echo "Bail out! $0: no configuration named $configs"; exit 1 ;;
	esac
	;;
*) configs=${MPI_TESTS_CONFIGS:-$all_configs} ;;
esac
seed=${MPITEST_SEED:-$(date +%s)}
export MPITEST_SEED=$seed

# program and the rank counts it runs at
matrix="
mpi_order 2,3,4
mpi_wildcard 2,3,4
mpi_comms 2,4
mpi_many 2,4
mpi_cancel 2,3
mpi_scancel 2,3
mpi_probe 2,4
mpi_modes 2
mpi_truncate 2,3
mpi_zero 2,4
mpi_datatypes 2
mpi_persistent 2,3
mpi_waitsome 2,4
mpi_self 2
mpi_threads 2,3
mpi_thread_recv 2
mpi_complete_cb 2
mpi_complete_cb_st 2
mpi_card 2,3
mpi_status 2,3
"

# mpirun refuses to run as root unless told (CI runs as root)
root_args=()
if [ "$(id -u)" -eq 0 ]; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	root_args=(--allow-run-as-root)
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- which programs ---------------------------------------------------------

selected=("$@")
if [ ${#selected[@]} -eq 0 ] && [ -n "${MPI_TESTS_PROGS:-}" ]; then
	read -r -a selected <<< "$MPI_TESTS_PROGS"
fi
runs=()   # "prog np" pairs
declare -A one_np # prog -> the one rank count of the reduced configurations
while read -r prog nps; do
	[ -n "$prog" ] || continue
	if [ ${#selected[@]} -gt 0 ]; then
		keep=0
		for s in "${selected[@]}"; do
			[ "$s" = "$prog" ] && keep=1
		done
		[ $keep = 1 ] || continue
	fi
	[ -n "${MPI_TESTS_NP:-}" ] && nps=$MPI_TESTS_NP
	set -- ${nps//,/ }
	one_np[$prog]=${2:-$1}
	for np in ${nps//,/ }; do
		runs+=("$prog $np")
	done
done <<< "$matrix"

# ---- is mtl tm there? ---------------------------------------------------------

tm_state=absent
ompi_info_pre=
tm_why="mtl tm not installed"
tm_mode=${MPI_TESTS_TM:-auto}
built_so=$builddir/.libs/mca_mtl_tm.so
if [ "$tm_mode" != no ]; then
	if [ "$tm_mode" = build ] ||
	   { [ "$tm_mode" = auto ] && [ -f "$built_so" ]; }; then
		if [ -f "$built_so" ]; then
			export OMPI_MCA_mca_base_component_path="$builddir/.libs:SYS_DEFAULT"
			tm_from="built in this tree ($built_so)"
		else
			tm_why="mtl tm not built ($built_so missing)"
		fi
	else
		tm_from="installed in Open MPI"
	fi
	# a ThreadSanitizer build (--enable-tsan): the component needs
	# libtsan loaded first, as in the instrumented test programs
	ompi_info_pre=
	if [ -f "$built_so" ] && [ "${OMPI_MCA_mca_base_component_path:-}" ]; then
		ompi_info_pre=$(ldd "$built_so" 2>/dev/null |
			awk '$1 ~ /^libtsan/ && $3 ~ /^\// { print $3; exit }')
	fi
	if [ -n "${tm_from:-}" ] &&
	   LD_PRELOAD=${ompi_info_pre:-${LD_PRELOAD:-}} ompi_info 2>/dev/null |
	   grep -q 'MCA mtl: tm'; then
		tm_state=present
	elif [ -n "${tm_from:-}" ]; then
		unset OMPI_MCA_mca_base_component_path
		tm_why="mtl tm not installed"
	fi
else
	tm_why="mtl tm not wanted (MPI_TESTS_TM=no)"
fi

# MCA parameters of the soft HCA, where the component defines them
tm_params=
if [ $tm_state = present ]; then
	tm_params=$(LD_PRELOAD=${ompi_info_pre:-${LD_PRELOAD:-}} \
		ompi_info --param mtl tm --level 9 2>/dev/null)
fi
has_param() {
	case $tm_params in *"\"mtl_tm_$1\""*) return 0 ;; esac
	return 1
}

# ---- configurations -------------------------------------------------------------

# config_args NAME: sets cfg_env (VAR=value ...) and cfg_mca (mpirun args)
config_args() {
	cfg_env=()
	cfg_mca=()
	case $1 in
	ob1)
		# vader's single-copy (CMA) may be refused in containers
		cfg_mca=(--mca pml ob1 --mca btl self,vader
			 --mca btl_vader_single_copy_mechanism none)
		;;
	tm)
		cfg_mca=(--mca pml cm --mca mtl tm)
		;;
	tm-small)
		cfg_mca=(--mca pml cm --mca mtl tm)
		cfg_env=(SOFTHCA_MAX_NUM_TAGS=1 SOFTHCA_MAX_OPS=1
			 SOFTHCA_RING_DEPTH=2 SOFTHCA_MTU=256)
		has_param softhca_max_num_tags &&
			cfg_mca+=(--mca mtl_tm_softhca_max_num_tags 1)
		has_param softhca_max_ops &&
			cfg_mca+=(--mca mtl_tm_softhca_max_ops 1)
		has_param softhca_ring_depth &&
			cfg_mca+=(--mca mtl_tm_softhca_ring_depth 2)
		has_param softhca_mtu &&
			cfg_mca+=(--mca mtl_tm_softhca_mtu 256)
		;;
	tm-random)
		cfg_mca=(--mca pml cm --mca mtl tm)
		cfg_env=(SOFTHCA_SCHED=random SOFTHCA_SEED=$seed)
		has_param softhca_sched &&
			cfg_mca+=(--mca mtl_tm_softhca_sched random)
		has_param softhca_seed &&
			cfg_mca+=(--mca mtl_tm_softhca_seed "$seed")
		;;
	tm-notm)
		cfg_mca=(--mca pml cm --mca mtl tm)
		cfg_env=(SOFTHCA_NO_TM=1)
		has_param softhca_no_tm &&
			cfg_mca+=(--mca mtl_tm_softhca_no_tm 1)
		;;
	*)
		echo "Bail out! unknown configuration $1"
		exit 1
		;;
	esac
}

# ---- run ----------------------------------------------------------------------------

# card_share LOG NP: every rank's "mtl tm: rank R: receives N (...; card
# matched M, ...)" line has M >= 90% of N; sets share_why otherwise
card_share() {
	share_why=$(awk -v np="$2" '
		/mtl tm: rank [0-9]+: receives [0-9]+ / {
			r = $0; sub(/.*: receives /, "", r); sub(/ .*/, "", r)
			m = $0; sub(/.*card matched /, "", m); sub(/,.*/, "", m)
			rk = $0; sub(/.*mtl tm: rank /, "", rk); sub(/:.*/, "", rk)
			n++
			if (m * 10 < r * 9)
				bad = bad sprintf(" rank %s: %s of %s on the card;", rk, m, r)
		}
		END {
			if (n != np)
				printf "%d statistics lines for %d ranks (mtl_tm_verbose 10 prints one per rank)", n, np
			else if (bad != "")
				printf "under 90%% of receives matched on the card:%s", bad
		}' "$1")
	[ -z "$share_why" ]
}

# software_mode LOG NP: every rank's statistics line says it ran without
# tag matching and that the card matched nothing; sets share_why otherwise
software_mode() {
	share_why=$(awk -v np="$2" '
		/mtl tm: rank [0-9]+: receives [0-9]+ / {
			n++
			if ($0 !~ /mode: no tag matching/ || $0 !~ /card matched 0,/)
				bad = bad " " $0
		}
		END {
			if (n != np)
				printf "%d statistics lines for %d ranks", n, np
			else if (bad != "")
				printf "not in the no-TM mode:%s", substr(bad, 1, 300)
		}' "$1")
	[ -z "$share_why" ]
}

# a configuration that runs each program at one rank count only (CI time)
reduced() { [ "$1" = tm-notm ]; }
nplan=0
for c in $configs; do
	if reduced "$c"; then
		nplan=$((nplan + ${#one_np[@]}))
	else
		nplan=$((nplan + ${#runs[@]}))
	fi
done
echo "1..$nplan"
echo "# seed $seed (rerun with MPITEST_SEED=$seed); timeout ${timeout_s} s per mpirun; $MPIRUN"
if [ $tm_state = present ]; then
	echo "# mtl tm: $tm_from"
else
	echo "# mtl tm: $tm_why: tm configurations skipped"
fi

n=0
npass=0
nfail=0
nskip=0
t_start=$(date +%s%N)
# seconds since $1 (date +%s%N), one decimal
elapsed() {
	awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'
}
failures=()

for c in $configs; do
	config_args "$c"
	for run in "${runs[@]}"; do
		read -r prog np <<< "$run"
		reduced "$c" && [ "$np" != "${one_np[$prog]}" ] && continue
		n=$((n + 1))
		name="$prog [$c] np=$np"
		if [ "${c#tm}" != "$c" ] && [ $tm_state != present ]; then
			echo "ok $n - $name # SKIP $tm_why"
			nskip=$((nskip + 1))
			continue
		fi
		if [ ! -x "$progdir/$prog" ]; then
			echo "not ok $n - $name: $progdir/$prog not built"
			nfail=$((nfail + 1))
			failures+=("$name")
			continue
		fi
		xargs=(-x MPITEST_SEED -x MPITEST_CONFIG)
		for e in "${cfg_env[@]}"; do
			xargs+=(-x "$e")
		done
		[ -n "${OMPI_MCA_mca_base_component_path:-}" ] &&
			xargs+=(-x OMPI_MCA_mca_base_component_path)
		# a ThreadSanitizer run's settings (scripts/run-tests.sh --tsan)
		for e in TSAN_OPTIONS UCX_MEM_MMAP_HOOK_MODE UCX_MODULES \
			 PMIX_MCA_gds; do
			[ -n "${!e+set}" ] && xargs+=(-x "$e")
		done
		share=0
		[ "$prog" = mpi_card ] && [ "$c" = tm ] && share=1
		[ "$prog" = mpi_card ] && [ "$c" = tm-notm ] && share=2
		extra=()
		[ $share != 0 ] && extra=(--mca mtl_tm_verbose 10)
		cmd=("$MPIRUN" "${root_args[@]}" --oversubscribe -np "$np"
		     "${cfg_mca[@]}" "${extra[@]}" "${xargs[@]}" "$progdir/$prog")
		log=$tmp/out
		t0=$(date +%s%N)
		MPITEST_CONFIG=$c timeout -k 5 "$timeout_s" "${cmd[@]}" \
			> "$log" 2>&1 < /dev/null
		rc=$?
		secs=$(elapsed "$t0")
		if [ $rc = 0 ] && [ $share = 1 ] && ! card_share "$log" "$np"; then
			rc=1
			echo "FAIL: card share: $share_why" >> "$log"
		fi
		if [ $rc = 0 ] && [ $share = 2 ] && ! software_mode "$log" "$np"; then
			rc=1
			echo "FAIL: no-TM mode: $share_why" >> "$log"
		fi
		if [ $rc = 0 ]; then
			echo "ok $n - $name (${secs} s)"
			npass=$((npass + 1))
			grep -E '^(checked|rank [0-9]+: note):' "$log" |
				sort -u | sed 's/^/#   /'
			[ $share = 1 ] && grep -oE 'rank [0-9]+: receives [0-9]+|card matched [0-9]+' "$log" |
				paste -d' ' - - | sed 's/^/#   card share: /'
		elif [ $rc = 77 ]; then
			why=$(grep -m1 -E '^(skip|.*needs at least)' "$log")
			echo "ok $n - $name # SKIP ${why:-program skipped itself}"
			nskip=$((nskip + 1))
		else
			if [ $rc = 124 ] || [ $rc = 137 ]; then
				what="timed out after ${timeout_s} s (hang?)"
			else
				what="exit status $rc"
			fi
			first=$(grep -m1 -E 'FAIL:|^SUMMARY: ThreadSanitizer' "$log" | cut -c1-300)
			echo "not ok $n - $name: $what${first:+: $first}"
			nfail=$((nfail + 1))
			failures+=("$name: $what")
			echo "#   rerun: ${cfg_env[*]:+env ${cfg_env[*]} }MPITEST_SEED=$seed MPITEST_CONFIG=$c ${cmd[*]}"
			grep -v '^\s*$' "$log" | tail -n 60 | cut -c1-400 |
				sed 's/^/#   | /'
		fi
	done
done

echo "# $npass passed, $nfail failed, $nskip skipped in $(elapsed "$t_start") s (configurations: $configs)"
for f in "${failures[@]}"; do
	echo "#   FAILED: $f"
done
exit 0
