#!/bin/bash
# card-check.sh - for a machine with a TM-capable card (ConnectX-5 or later):
# prints what the card reports for tag matching and what the device layer
# makes of it, runs a two-process self-test over the card (eager matched by
# the card, a rendezvous the card reads and FINs, in the hardware's QP
# layout), and, when mpirun is there, a 2-rank ping-pong with
# --mca pml cm --mca mtl tm forced onto the card.
#
#   scripts/card-check.sh [build-dir]      (default: build/normal)
#
# Builds what it runs (configuring build/normal first on a fresh checkout;
# scripts/install-deps.sh installs what that needs).  Nothing is installed.
# Exit status: 0 all passed, 1 a check failed, 2 no TM-capable card on this
# machine (found before anything is built).
set -u
. "$(dirname "$0")/build-dir.sh"
sysfs_ib=${CARD_CHECK_SYSFS_IB:-/sys/class/infiniband} # tests point it elsewhere

if [ -z "$(ls "$sysfs_ib" 2>/dev/null)" ]; then
	echo "card-check: no RDMA device on this machine ($sysfs_ib" \
	     "is empty): there is no card to check.  The component runs on the" \
	     "built-in soft HCA here."
	exit 2
fi
if [ $# -gt 0 ]; then
	dir=$1
	[ -f "$dir/Makefile" ] || {
		echo "card-check: $dir is not a configured build directory" >&2
		exit 1
	}
else
	ensure_build_dir card-check
fi
build=$dir
bin=$build/tests/dev/tm_card_check
mpirun=$(command -v mpirun || true)
targets=(tests/dev/tm_card_check)
# the MPI part where the build has it (not in a sanitizer build)
if [ -n "$mpirun" ] &&
   make -n -C "$build" tests/mtl/mpi_pingpong > /dev/null 2>&1; then
	targets+=(mca_mtl_tm.la tests/mtl/mpi_pingpong)
fi
echo "== building ${targets[*]} in $build"
make -C "$build" -j2 --no-print-directory "${targets[@]}" > /dev/null || {
	echo "card-check: building ${targets[*]} in $build failed" >&2
	exit 1
}
if command -v ibv_devinfo >/dev/null; then
	echo "== ibv_devinfo -v (tag matching and limits)"
	ibv_devinfo -v | grep -E "hca_id|fw_ver|max_qp_wr|max_srq_wr|max_cqe|rd_atom|tm_caps|max_rndv_hdr_size|max_num_tags|max_ops|max_sge|state:|link_layer|active_mtu|GID\[" 
fi
echo "== tm_dev on the card"
TM_DEV_PROVIDER=verbs "$bin" --self-test
rc=$?
if [ $rc -eq 2 ]; then
	echo "card-check: the RDMA devices here have no RC tag matching" \
	     "(tm_caps.flags lacks IBV_TM_CAP_RC): nothing to check"
	exit 2
fi
[ $rc -eq 0 ] || { echo "card-check: self-test FAILED"; exit 1; }

pp=$build/tests/mtl/mpi_pingpong
if [ -n "$mpirun" ] && [ -x "$pp" ]; then
	echo "== MPI: 2 ranks, pml cm, mtl tm, provider verbs"
	extra=()
	[ "$(id -u)" -eq 0 ] && extra+=(--allow-run-as-root)
	OMPI_MCA_mca_base_component_path="$build/.libs:SYS_DEFAULT" \
	timeout 120 "$mpirun" "${extra[@]}" -np 2 \
		-x OMPI_MCA_mca_base_component_path \
		--mca pml cm --mca mtl tm --mca mtl_tm_provider verbs "$pp" ||
		{ echo "card-check: MPI ping-pong over the card FAILED"; exit 1; }
else
	echo "(mpirun or $pp missing: MPI check skipped)"
fi
echo "card-check: passed"
