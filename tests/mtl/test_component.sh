#!/bin/bash
# test_component.sh - the Open MPI component, end to end (TAP).
#
# Runs the built mca_mtl_tm.so (top_builddir/.libs, ahead of Open MPI's
# own directory on mca_base_component_path) through ompi_info and mpirun:
# it is listed, its parameters are, a plain mpirun keeps pml ob1, asking
# for tm selects pml cm and MPI_Init/MPI_Finalize work over it, a missing
# provider gives one message, and MPI point-to-point works over it
# (ping-pong, mpi_p2p's feature checks, with threads, and on a squeezed
# soft HCA: one tag, one list op, 2-packet rings, 256-byte MTU, random
# card scheduling; and without tag matching, softhca_no_tm, including a
# job whose ranks offer different modes and must agree on one).
set -u

builddir=${top_builddir:-.}
libs=$(cd "$builddir" && pwd)/.libs
prog=$(cd "$builddir" && pwd)/tests/mtl
MPIRUN=${MPIRUN:-mpirun}
export OMPI_MCA_mca_base_component_path="$libs:SYS_DEFAULT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# vader's single-copy mechanism may be refused in containers; harmless here
export OMPI_MCA_btl_vader_single_copy_mechanism=none

n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
check() { # check "name" cond-command...
	local name=$1; shift
	if "$@"; then ok "$name"; else notok "$name"; fi
}
run() { # run logfile mpirun-args...: with a time limit, output in logfile
	local log=$1; shift
	timeout 120 "$MPIRUN" --oversubscribe -x OMPI_MCA_mca_base_component_path \
		"$@" > "$log" 2>&1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -f "$libs/mca_mtl_tm.so" ]; then
	echo "1..0 # SKIP $libs/mca_mtl_tm.so not built"
	exit 0
fi
echo "1..16"

ompi_info > "$tmp/info" 2>&1
check "ompi_info lists mtl tm" grep -q 'MCA mtl: tm' "$tmp/info"

ompi_info --param mtl tm --level 9 > "$tmp/param" 2>&1
missing=
for p in priority verbose provider eager_limit rndv_threshold max_tags \
	 max_ops plain_buffers send_slots offload keepalive_ms rcache \
	 softhca_mtu softhca_ring_depth softhca_max_num_tags softhca_max_ops \
	 softhca_max_rndv_hdr_size softhca_max_qp softhca_max_mr \
	 softhca_max_wr softhca_sched softhca_seed softhca_force_copy_read; do
	grep -q "\"mtl_tm_$p\"" "$tmp/param" || missing="$missing $p"
done
check "ompi_info --param mtl tm lists the parameters${missing:+ (missing:$missing)}" \
	test -z "$missing"

# every parameter ompi_info shows is documented in the manual page
undoc=
for p in $(sed -n 's/.*parameter "\(mtl_tm_[a-z_0-9]*\)".*/\1/p' "$tmp/param"); do
	grep -q "^\.B $p\$" "${top_srcdir:-.}/man/mtl_tm.7" || undoc="$undoc $p"
done
check "man/mtl_tm.7 documents every parameter${undoc:+ (missing:$undoc)}" \
	test -z "$undoc"

run "$tmp/plain" -np 2 --mca pml_base_verbose 10 "$prog/mpi_hello"
check "plain mpirun keeps pml ob1" \
	bash -c "[ \$(grep -c 'select: component ob1 selected' '$tmp/plain') = 2 ]"

run "$tmp/tm" -np 2 --mca mtl tm --mca pml_base_verbose 10 "$prog/mpi_hello"
check "--mca mtl tm selects pml cm on every rank" \
	bash -c "[ \$(grep -c 'select: component cm selected' '$tmp/tm') = 2 ]"

run "$tmp/cm" -np 3 --mca pml cm --mca mtl tm "$prog/mpi_hello"
rc=$?
check "MPI_Init/MPI_Finalize over pml cm + mtl tm (3 ranks)" \
	bash -c "[ $rc = 0 ] && [ \$(grep -c initialised '$tmp/cm') = 3 ]"

run "$tmp/verbs" -np 2 --mca pml cm --mca mtl tm \
	--mca mtl_tm_provider verbs "$prog/mpi_hello"
rc=$?
if [ $rc = 0 ]; then
	ok "provider verbs: a TM-capable card is present # SKIP"
else
	check "provider verbs without any RDMA device: one message, MPI_Init fails" \
		bash -c "[ \$(grep -c 'libibverbs lists no device' '$tmp/verbs') = 1 ]"
fi

# errors-return: an aborted rank would leave its soft HCA segment behind
run "$tmp/pp" -np 2 --mca pml cm --mca mtl tm "$prog/mpi_pingpong" \
	errors-return
rc=$?
check "ping-pong over mtl tm" \
	bash -c "[ $rc = 0 ] && [ \$(grep -c ': ok' '$tmp/pp') = 2 ]"

p2p() { # p2p logfile np mpi_p2p-args...
	local log=$1 np=$2; shift 2
	run "$log" -np "$np" --mca pml cm --mca mtl tm "${extra[@]}" \
		"$prog/mpi_p2p" "$@"
	local rc=$?
	[ $rc = 0 ] && grep -q 'all checks passed' "$log" &&
		! grep -q FAIL "$log"
}
extra=()
check "mpi_p2p over mtl tm (3 ranks): probe, mprobe, ssend, truncation, cancel, modes, datatypes, comms" \
	p2p "$tmp/p2p" 3
check "mpi_p2p threads over mtl tm (2 ranks, MPI_THREAD_MULTIPLE)" \
	p2p "$tmp/p2p-threads" 2 threads
extra=(--mca mtl_tm_softhca_max_num_tags 1 --mca mtl_tm_softhca_max_ops 1
       --mca mtl_tm_softhca_ring_depth 2 --mca mtl_tm_softhca_mtu 256
       --mca mtl_tm_softhca_sched random)
check "mpi_p2p over a squeezed soft HCA (4 ranks; 1 tag, 1 op, ring 2, MTU 256, random scheduling)" \
	p2p "$tmp/p2p-squeezed" 4
extra=(--mca mtl_tm_softhca_no_tm 1 --mca mtl_tm_verbose 10)
check "mpi_p2p without tag matching (3 ranks, softhca_no_tm: all matched in software)" \
	p2p "$tmp/p2p-notm" 3
check "... and every rank's statistics line says so" \
	bash -c "[ \$(grep -c 'mode: no tag matching (all matched in software)' '$tmp/p2p-notm') = 3 ]"
extra=(--mca mtl_tm_softhca_sched random --mca mtl_tm_softhca_no_tm 1)
check "mpi_p2p threads without tag matching (2 ranks, random scheduling)" \
	p2p "$tmp/p2p-notm-threads" 2 threads

# One provider for the job: rank 0's soft HCA offers no tag matching, the
# others' do; every rank guessed its own, and the job must agree on the
# plain mode (a second address exchange), not mix the two.  One app
# context setting SOFTHCA_NO_TM by rank, not two (MPMD): prterun 3.0.8
# (Debian 13) crashes on any command line with a ':'.
"$MPIRUN" --oversubscribe -x OMPI_MCA_mca_base_component_path \
	--mca pml cm --mca mtl tm --mca mtl_tm_verbose 10 -np 3 \
	sh -c 'SOFTHCA_NO_TM=$((OMPI_COMM_WORLD_RANK == 0)) exec "$0"' \
	"$prog/mpi_p2p" > "$tmp/mixed" 2>&1
rc=$?
check "mixed offers (rank 0 without tag matching): mpi_p2p passes" \
	bash -c "[ $rc = 0 ] && grep -q 'all checks passed' '$tmp/mixed' && ! grep -q FAIL '$tmp/mixed'"
check "... every rank opened again and ran without tag matching" \
	bash -c "[ \$(grep -c 'opening again' '$tmp/mixed') = 3 ] && [ \$(grep -c 'mode: no tag matching' '$tmp/mixed') = 3 ]"

for f in "$tmp"/*; do
	case $f in */info|*/param) continue;; esac
	sed "s|^|# $(basename "$f"): |" "$f" | head -n 20
done
exit 0
