#!/bin/bash
# run-vm-tests.sh - MPI jobs across two QEMU VMs over the kernel's
# soft-RoCE (rxe), as TAP.  Needs root, QEMU and debootstrap
# (scripts/vm/host-deps.sh); builds and caches the image, builds this
# tree in a chroot of it, boots the rig (scripts/vm/rig.sh) and always
# stops it at the end.
#
#   tests/vm/run-vm-tests.sh
#
# What runs (mpirun on vm1 over ssh, hostfile vm1 slots=2, vm2 slots=2,
# --map-by node: rank 0 on vm1, rank 1 on vm2, rank 2 on vm1):
#   rig      the image, the build, the boot (with their timings); rxe0
#            active on both VMs; ibv_rc_pingpong between them
#   MPI      each program under the configurations in VM_CONFIGS
#            (default "ob1 tm"):
#              ob1  --mca pml ob1 --mca btl self,vader,tcp (reference)
#              tm   --mca pml cm --mca mtl tm
#              ucx  --mca pml ucx, UCX_TLS=rc_verbs,ud_verbs,self on rxe0
#                   (not by default: Debian 12's UCX 1.13 stops on its
#                   first message here, "UD endpoint ... unhandled timeout
#                   error", while ibv_ud_pingpong works between the VMs)
#            programs: ring 0 B - 4 MiB (tests/mtl/mpi_ring), 4 ranks
#            ending after traffic to every peer (tests/vm/mpi_finalize:
#            under tm every rank reports no error at teardown and its
#            MPI_Finalize takes under VM_FINALIZE_SECONDS, default 4.5
#            for TCG, see judge_finalize; a rank probing a peer already
#            gone would wait out RC's retries, up to the 5 s drain
#            limit), any-source
#            from both hosts at 3 ranks (mpi_wildcard), receive and send
#            cancel (mpi_cancel, mpi_scancel), truncation, probe/mprobe, a
#            rank on vm2 killed (tests/mtl/mpi_peer_dead: under tm, with
#            orte_enable_recovery, rank 0's requests must fail in bounded
#            time; ob1 cannot, so there mpirun must end the job in bounded
#            time, naming the killed rank), connect on first use
#            (tests/mtl/mpi_connect 1, tm only: rank 0 on vm1 sends to
#            rank 1 on vm2 only; connected_peers 1, 1, 0, 0), the VM-to-VM cable of
#            vm2 pulled for VM_FLAP_SECONDS (tests/vm/mpi_linkflap: the
#            job survives or fails cleanly, never hangs), and (full list
#            only) for VM_FLAP_LONG_SECONDS, longer than RC's retries
#            (about 7 s on rxe): the QPs fail, so the job must fail
#            cleanly (or survive), never hang ("linkflaplong")
#   nonroot  as user mpiuser at kernel.yama.ptrace_scope 1 (the ring) and
#            2 (ring, any-source, probe) across the VMs under each
#            configuration; and with every rank on vm1 (the soft HCA,
#            "tm1", --mca btl self: no vader, whose PR_SET_PTRACER would
#            hide what Yama does) the ring at 4 ranks and the MPI suite
#            (tests/mpi/run-mpi-tests.sh, configuration tm, 2 ranks each;
#            one TAP line per program) at both scopes
#
# Two lists (VM_LIST):
#   full     (default; scripts/run-tests.sh --vm) all of the above: every
#            program under ob1 and tm, every tests/mpi program at both
#            scopes
#   ci       (.ci/run) about 10 min under TCG (12.5 on a loaded
#            machine): every program under tm but linkflaplong; under ob1
#            the ring and the killed rank (reference); as mpiuser the ring
#            across the VMs under tm at scope 2 and, on the soft HCA, the
#            ring and the suite's $ci_suite at both scopes
#
# The two switches.  Both are 1 now that what they waited for is on main
# (mtl tm on devices without tag matching; the soft HCA without ptrace
# permission); 0 turns a known failure back into a SKIP that names it:
tm_required=${VM_TM_REQUIRED:-1}
#   0: while mtl tm cannot open a device without tag matching (a probe on
#      vm1 says so: it declines rxe0 for lack of IBV_TM_CAP_RC), the tm
#      lines are "ok ... # SKIP" naming that; 1: they must pass
nonroot_tm_required=${VM_NONROOT_TM_REQUIRED:-1}
#   0: a soft-HCA run as mpiuser that fails to connect its ranks ("cannot
#      connect to rank") is "# SKIP" naming that; 1: it must pass
#
# Other settings: VM_PROGRAMS (names to run, e.g. "ring peerdead nonroot";
# default all), VM_RIG (the run dir of a rig already up, from
# "scripts/vm/rig.sh up DIR": used as it is and left running), VM_RUN_DIR (default: a new /tmp/mtl-tm-vm.XXXXXX, kept
# on failure or with VM_KEEP=1), VM_TEST_TIMEOUT (seconds per mpirun,
# default 150), VM_SUITE_BUDGET (seconds for the MPI part; tests left when
# it is spent fail as "not run", default 900), VM_FLAP_SECONDS (4),
# MPITEST_SEED; and those of scripts/vm/common.sh (VM_CACHE, VM_ACCEL...).
# The last line is "# N passed, M failed, K skipped ..." (a comment).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$top/scripts/vm/rig.sh"
. "$here/vm-lib.sh"

timeout_s=${VM_TEST_TIMEOUT:-150}
budget=${VM_SUITE_BUDGET:-900}
flap_s=${VM_FLAP_SECONDS:-4}
flap_long_s=${VM_FLAP_LONG_SECONDS:-15}
seed=${MPITEST_SEED:-$(date +%s)}
P=/opt/mtl-tm/build/tests
list=${VM_LIST:-full}
# the tests/mpi programs of the non-root suite on the soft HCA
ci_suite="mpi_order mpi_wildcard mpi_probe mpi_cancel"
case $list in
full) suite=$(sed -n 's/^\(mpi_[a-z_]*\) [0-9,]*$/\1/p' "$top/tests/mpi/run-mpi-tests.sh" | tr '\n' ' ') ;;
ci) suite=$ci_suite ;;
*) echo "Bail out! VM_LIST=$list: full or ci"; exit 1 ;;
esac
targets=(tests/mtl/mpi_hello tests/mtl/mpi_ring tests/mtl/mpi_peer_dead
	 tests/mtl/mpi_connect tests/vm/mpi_linkflap tests/vm/mpi_finalize)
for t in $suite mpi_cancel mpi_scancel mpi_truncate mpi_probe mpi_wildcard; do
	[[ " ${targets[*]} " == *" tests/mpi/$t "* ]] || targets+=("tests/mpi/$t")
done
# name, ranks, program and arguments
programs=(
	"ring 2 $P/mtl/mpi_ring"
	"finalize 4 $P/vm/mpi_finalize"
	"anysource 3 $P/mpi/mpi_wildcard"
	"cancel 2 $P/mpi/mpi_cancel"
	"scancel 2 $P/mpi/mpi_scancel"
	"truncate 2 $P/mpi/mpi_truncate"
	"probe 2 $P/mpi/mpi_probe"
	"peerdead 3 $P/mtl/mpi_peer_dead 20"
	"connect 4 $P/mtl/mpi_connect 1"
	"linkflap 2 $P/vm/mpi_linkflap 16"
	"linkflaplong 2 $P/vm/mpi_linkflap 30"
)
read -r -a configs <<< "${VM_CONFIGS:-ob1 tm}"
# ci_skip NAME CONFIG: 0 when the ci list leaves this case out
ci_skip() {
	[ "$2:$1" = ob1:connect ] && return 0 # a tm pvar: tm only, both lists
	[ "$list" = ci ] || return 1
	case $2:$1 in
	*:linkflaplong) return 0 ;;
	tm:* | tm1:* | ob1:ring | ob1:peerdead) return 1 ;;
	esac
	return 0
}

t_all=$(date +%s%N)
run=${VM_RIG:-${VM_RUN_DIR:-$(mktemp -d /tmp/mtl-tm-vm.XXXXXX)}}
mkdir -p "$run/logs"
run=$(cd "$run" && pwd)
finish() {
	if [ -n "${VM_RIG:-}" ]; then
		echo "# the rig in $run is left running (scripts/vm/rig.sh down $run)"
		return
	fi
	rig_down "$run"
	if [ "$nfail" -gt 0 ] || [ "${VM_KEEP:-0}" = 1 ]; then
		echo "# logs kept in $run"
	else
		rm -rf "$run"
	fi
}
trap finish EXIT
trap 'exit 130' INT TERM

echo "# VM rig: run dir $run, seed $seed (MPITEST_SEED), ${timeout_s} s per mpirun"

# ---- the rig --------------------------------------------------------------
if ! why=$(vm_preflight); then
	tap_fail "VM rig cannot run here: $why"
	tap_end
	exit 0
fi
t0=$(date +%s%N)
if [ -n "${VM_RIG:-}" ]; then
	echo "vm: using the rig in $run (VM_RIG)" > "$run/rig.log"
	[ -f "$run/boot-seconds" ] || echo "?" > "$run/boot-seconds"
elif ! rig_up "$run" "${targets[@]}" 2>&1 | tee "$run/rig.log" | sed 's/^/# /'; then
	tap_fail "rig up: image, build in chroot, boot of two VMs (${VM_ACCEL}) failed after $(vm_elapsed "$t0") s"
	tail -n 40 "$run/rig.log" | sed 's/^/#   | /'
	tap_end
	exit 0
fi
image=$(vm_image_dir)
timing "rig up $(vm_elapsed "$t0") s"
timing "image: $( [ -f "$image/timings" ] && tr '\n' ',' < "$image/timings" | sed 's/,$//')$(grep -q 'image cached' "$run/rig.log" && echo ' (ready before this run)')"
timing "build in chroot: $(sed -n 's/^vm: built in //p' "$run/rig.log")"
timing "boot of both VMs: $(cat "$run/boot-seconds") s (${VM_ACCEL})"
tap_ok "rig up: two VMs on one virtual network, accel ${VM_ACCEL}"

# ---- rxe0 and RC between the VMs --------------------------------------------
rxe_check
pingpong_check

# ---- MPI across the VMs -----------------------------------------------------------
wanted() { [ -z "${VM_PROGRAMS:-}" ] || [[ " $VM_PROGRAMS " == *" $1 "* ]]; }
tm_probe
for prog in "${programs[@]}"; do
	wanted "${prog%% *}" || continue
	for c in "${configs[@]}"; do
		ci_skip "${prog%% *}" "$c" || mpi_case root "$c" $prog
	done
done

# ---- non-root users and Yama ----------------------------------------------------------
# As mpiuser: at scope 1 the ring, at scope 2 the ring, any-source and
# probe, under each configuration; and on one VM (the soft HCA, where Yama
# matters) the ring and the MPI suite
for scope in 1 2; do
	wanted nonroot || continue
	yama_set "$scope"
	for prog in "${programs[@]}"; do
		read -r name np rest <<< "$prog"
		case $scope:$name in
		1:ring | 2:ring | 2:anysource | 2:probe) ;;
		*) continue ;;
		esac
		[ "$list" = ci ] && [ "$scope:$name" != 2:ring ] && continue
		for c in "${configs[@]}"; do
			ci_skip "$name@scope$scope" "$c" ||
				mpi_case mpiuser "$c" "$name@scope$scope" "$np" $rest
		done
	done
	mpi_case mpiuser tm1 "ring@scope$scope" 4 "$P/mtl/mpi_ring"
	mpi_suite mpiuser "$scope" $suite
done

tap_end
timing "whole suite $(vm_elapsed "$t_all") s"
