#!/bin/bash
# test_component.sh - the Open MPI component, end to end (TAP).
#
# Runs the built mca_mtl_tm.so (top_builddir/.libs, ahead of Open MPI's
# own directory on mca_base_component_path) through ompi_info and mpirun:
# it is listed, its parameters are, as documented in man/mtl_tm.7 with the
# defaults the page states, a plain mpirun keeps pml ob1, asking
# for tm selects pml cm and MPI_Init/MPI_Finalize work over it, a missing
# provider gives one message, and MPI point-to-point works over it
# (ping-pong, mpi_p2p's feature checks, with threads, and on a squeezed
# soft HCA: one tag, one list op, 2-packet rings, 256-byte MTU, random
# card scheduling; and without tag matching, softhca_no_tm, including a
# job whose ranks offer different modes and must agree on one, and one
# whose ranks have different host names on one node; and with no route
# tables, every message looking its peer up).
set -u

. "$(dirname "$0")/mpi_tap.sh"
run() { # run logfile mpirun-args...: with a time limit, output in logfile
	mpirun_log 120 "$@"
}
echo "1..25"

ompi_info > "$tmp/info" 2>&1
check "ompi_info lists mtl tm" grep -q 'MCA mtl: tm' "$tmp/info"

# The manual page and the component in step: every parameter the page
# documents (".TP" then ".B mtl_tm_<name>" under PARAMETERS) is registered, every registered
# one is documented, and the default the page states ("default N", "N KiB"
# / "MiB" / "GiB", or "<word> (default)") is the one ompi_info reports.
# ompi_info runs without the variables that replace defaults.
man=${top_srcdir:-.}/man/mtl_tm.7
clean_env=$(env | sed -n 's/^\(SOFTHCA_[A-Z_]*\|TM_DEV_[A-Z_]*\|OMPI_MCA_mtl_tm_[a-z_]*\)=.*/-u \1/p')
# shellcheck disable=SC2086
env $clean_env ompi_info --param mtl tm --level 9 --parsable > "$tmp/param" 2>&1
sed -n 's/^mca:mtl:tm:param:\(mtl_tm_[a-z_0-9]*\):value:\(.*\)$/\1 \2/p' \
	"$tmp/param" > "$tmp/values"
documented=$(awk '/^\.SH / { in_params = $2 == "PARAMETERS" }
		  in_params && prev == ".TP" && $1 == ".B" && $2 ~ /^mtl_tm_/ { print $2 }
		  { prev = $0 }' "$man")
missing=
for p in $documented; do
	grep -q "^$p " "$tmp/values" || missing="$missing $p"
done
check "ompi_info lists every parameter man/mtl_tm.7 documents${missing:+ (missing:$missing)}" \
	test -n "$documented" -a -z "$missing"

undoc=
while read -r p v; do
	echo "$documented" | grep -qx "$p" || undoc="$undoc $p"
done < "$tmp/values"
check "man/mtl_tm.7 documents every parameter${undoc:+ (missing:$undoc)}" \
	test -s "$tmp/values" -a -z "$undoc"

# man_default NAME: the default the page states in NAME's paragraph
man_default() {
	awk -v p="$1" '
		$0 == ".B " p && prev == ".TP" { on = 1; prev = $0; next }
		on && /^\.(TP|SS|SH)/ { exit }
		on { sub(/^\.[A-Z]+ /, ""); gsub(/\\f[BIRP]/, ""); printf "%s ", $0 }
		{ prev = $0 }' "$man" |
	sed -n -e 's/.*default \([0-9][0-9]*\) \([KMG]\)iB.*/\1 \2/p' \
	       -e 't' -e 's/.*default \([0-9][0-9]*\).*/\1/p' \
	       -e 't' -e 's/.*[^a-z0-9]\([a-z0-9][a-z0-9]*\) (default).*/\1/p' \
	       -e 't' -e 's/^\([a-z0-9][a-z0-9]*\) (default).*/\1/p' |
	awk '{ m = 1 }
	     $2 == "K" { m = 1024 }
	     $2 == "M" { m = 1048576 }
	     $2 == "G" { m = 1073741824 }
	     NF == 2 { printf "%d\n", $1 * m; next }
	     { print $1 }'
}
wrong=
while read -r p v; do
	d=$(man_default "$p")
	[ "$d" = "$v" ] || wrong="$wrong $p (page: ${d:-none}, ompi_info: $v)"
done < "$tmp/values"
check "man/mtl_tm.7 states each parameter's default as registered${wrong:+:$wrong}" \
	test -z "$wrong"

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

# A decline is told once per job, in one format: the message block once,
# whatever the ranks (and at verbosity 10 the others' one-line notes only).
run "$tmp/verbs" -np 2 --mca pml cm --mca mtl tm \
	--mca mtl_tm_provider verbs "$prog/mpi_hello"
rc=$?
# without pml cm, MPI_Init goes on over ob1: every rank meets the decline
run "$tmp/verbs-v" -np 4 --mca mtl tm --mca mtl_tm_verbose 10 \
	--mca mtl_tm_provider verbs "$prog/mpi_hello"
rc_v=$?
once() { # once logfile: the decline's message exactly once, one block
	[ "$(grep -c 'libibverbs lists no device' "$1")" = 1 ] &&
	[ "$(grep -c '^mtl tm (no-provider)' "$1")" = 1 ]
}
if [ $rc = 0 ]; then
	ok "provider verbs: a TM-capable card is present # SKIP"
	ok "provider verbs, 4 ranks, verbose: a TM-capable card is present # SKIP"
else
	check "provider verbs without any RDMA device: one message, MPI_Init fails" \
		once "$tmp/verbs"
	check "provider verbs without any RDMA device, 4 ranks declining, mtl_tm_verbose 10: still one message, ob1 takes over" \
		bash -c "[ $rc_v = 0 ] && $(declare -f once); once '$tmp/verbs-v' &&
			 [ \$(grep -c 'mtl tm: rank [0-9]*: no-provider' '$tmp/verbs-v') = 3 ]"
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
extra=(--mca mtl_tm_verbose 10)
check "mpi_p2p threads over mtl tm (2 ranks, MPI_THREAD_MULTIPLE)" \
	p2p "$tmp/p2p-threads" 2 threads
# the entry points for MPI threads are installed at init (mtl_tm.h)
entries='MPI threads: the general send and receive entry points'
check "... and both ranks took the entry points for MPI threads" \
	bash -c "[ \$(grep -c '$entries' '$tmp/p2p-threads') = 2 ]"
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
check "... and no rank took the entry points for MPI threads (MPI_Init)" \
	bash -c "! grep -q '$entries' '$tmp/p2p-notm'"
extra=(--mca mtl_tm_softhca_sched random --mca mtl_tm_softhca_no_tm 1)
check "mpi_p2p threads without tag matching (2 ranks, random scheduling)" \
	p2p "$tmp/p2p-notm-threads" 2 threads
# a communicator without the memory for its routes (mtl_tm.h, "Routes"):
# MTL_TM_TEST_NO_ROUTES stands in for the failed allocation
extra=(-x MTL_TM_TEST_NO_ROUTES=1 --mca mtl_tm_verbose 10)
check "mpi_p2p without route tables (3 ranks: every message looks its peer up)" \
	p2p "$tmp/p2p-noroutes" 3
check "... and every rank had no routes for MPI_COMM_WORLD" \
	bash -c "[ \$(grep -c 'no routes for MPI_COMM_WORLD' '$tmp/p2p-noroutes') = 3 ]"

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
# without tag matching every receive stays in software for that reason,
# and the line says so (not "offload off")
notm_bad=$(sed -n 's/.*mtl tm: rank \([0-9]*\): receives \([0-9]*\) (.*from unexpected queue \([0-9]*\)).* offload off \([0-9]*\), no tag matching \([0-9]*\),.*/\1 \2 \3 \4 \5/p' "$tmp/mixed" |
	awk '$2 == $3 || $4 != 0 || $5 != $2 - $3 { printf " rank %s: receives %s, from the unexpected queue %s, offload off %s, no tag matching %s", $1, $2, $3, $4, $5 } END { if (NR != 3) printf " %d lines", NR }')
check "... each statistics line counts every receive not taken from the unexpected queue under \"no tag matching\", none under \"offload off\"${notm_bad:+:$notm_bad}" \
	test -z "$notm_bad"
# the providers a rank and the job offer, by name
check "... the offers named: rank 0 \"the soft HCA without tag matching\", the job the same, no bit mask" \
	bash -c "grep -q 'rank 0 offers the soft HCA without tag matching (' '$tmp/mixed' && [ \$(grep -c 'every rank of the job (on one node) offers the soft HCA without tag matching: soft HCA without tag matching' '$tmp/mixed') = 3 ] && ! grep -q 'offers 0x' '$tmp/mixed'"

# One node is what Open MPI's locality says, not host names (which the
# modex cut to 63 characters, so that a longer name never matched itself):
# each rank in a UTS namespace of its own host name, so the names differ
# although Open MPI places both ranks on one node; the job is one node and
# runs on the soft HCA.  Compared by name, it looked like two hosts with no
# RDMA device and refused.  One app context naming the host by rank
# (prterun 3.0.8 crashes on MPMD command lines).  Open MPI 5 takes a
# process's host name from the launcher (PMIx), not from the process, so
# there the namespaces fake nothing.  (A 64-character name, the one a
# 63-character cut breaks, aborts libucs 1.13's start-up on its own.)
ompi_major=$(ompi_info --parsable 2>/dev/null |
	sed -n 's/^ompi:version:full:\([0-9]*\)\..*/\1/p' | head -n 1)
if [ "${ompi_major:-0}" -ge 5 ]; then
	ok "two host names, one node # SKIP Open MPI $ompi_major names hosts through PMIx: a UTS namespace fakes none"
elif unshare -u true 2>/dev/null; then
	timeout 120 "$MPIRUN" --oversubscribe -x OMPI_MCA_mca_base_component_path \
		--mca pml cm --mca mtl tm --mca mtl_tm_verbose 10 -np 2 \
		unshare -u sh -c 'hostname "host$OMPI_COMM_WORLD_RANK" && exec "$0"' \
		"$prog/mpi_hello" > "$tmp/hosts" 2>&1
	rc=$?
	check "two host names on one node: one node, the soft HCA, MPI_Init passes (exit $rc)" \
		bash -c "[ $rc = 0 ] && [ \$(grep -c 'of the job (on one node) offers .*: soft HCA' '$tmp/hosts') = 2 ] && ! grep -q 'no-provider' '$tmp/hosts'"
else
	ok "two host names, one node # SKIP unshare -u (UTS namespaces) not allowed here"
fi

for f in "$tmp"/*; do
	case $f in */info|*/param|*/values) continue;; esac
	sed "s|^|# $(basename "$f"): |" "$f" | head -n 20
done
exit 0
