#!/bin/bash
# test_params.sh - MCA parameters of mtl tm under mpirun (TAP).
#
# A value the component cannot use is refused in MPI_Init with a message
# that names the parameter, and nothing crashes or hangs: mpirun ends with
# an ordinary failure, no rank dies on a signal.  Values that are fine take
# effect: the eager/rendezvous boundary (mtl_tm_eager_limit, and the
# deprecated mtl_tm_rndv_threshold that meant eager_limit + 1) decides
# whether mpi_pingpong's 4096-byte message goes by rendezvous, as the
# statistics line at mtl_tm_verbose 10 shows.  The soft HCA's QP limit
# (two QPs per rank) is raised to what the job needs unless set; set too
# small, MPI_Init fails naming it.
set -u

. "$(dirname "$0")/mpi_tap.sh"

run() { # run logfile mpirun-args...: 2 ranks over mtl tm, time-limited
	local log=$1; shift
	mpirun_log 120 "$log" -np 2 --mca pml cm --mca mtl tm "$@"
}

# A failed run that is not a crash: mpirun's own failure status (not the
# timeout's 124, not 128+signal), and no rank reported dead of a signal:
# "exited on signal 11 (Segmentation fault)" from mpirun (4.1) and prterun
# (5.0) alike.  Not any "signal": prterun's ordinary abort text says
# processes "may have been terminated by signals sent by prterun".
clean_failure() { # clean_failure rc logfile
	[ "$1" != 0 ] && [ "$1" != 124 ] && [ "$1" -lt 128 ] &&
		! grep -Eqi 'exited on signal|signal [0-9]+|segmentation fault|core dumped' "$2"
}

# refused "what" "pattern the message must contain" mpirun-args...
refused() {
	local what=$1 pattern=$2 log=$tmp/$n.log rc
	shift 2
	run "$log" "$@" "$prog/mpi_hello"
	rc=$?
	if ! clean_failure "$rc" "$log"; then
		notok "$what: refused without a crash or hang (mpirun status $rc)"
		sed 's/^/# /' "$log" | head -n 20
	elif ! grep -q "mtl tm (bad-parameter): $pattern" "$log"; then
		notok "$what: the message names $pattern"
		sed 's/^/# /' "$log" | head -n 20
	else
		ok "$what: refused, the message names $pattern (mpirun status $rc)"
	fi
}

# rendezvous_count logfile: rendezvous receives (card + software) of all ranks
rendezvous_count() {
	sed -n 's/.*rendezvous card\/sw \([0-9]*\)\/\([0-9]*\).*/\1 \2/p' "$1" |
		awk '{ s += $1 + $2 } END { print s + 0 }'
}

# boundary "what" expect(eager|rndv) mpirun-args...
boundary() {
	local what=$1 expect=$2 log=$tmp/$n.log rc r
	shift 2
	run "$log" --mca mtl_tm_verbose 10 "$@" "$prog/mpi_pingpong" \
		errors-return
	rc=$?
	r=$(rendezvous_count "$log")
	if [ $rc != 0 ] || [ "$(grep -c ': ok' "$log")" != 2 ]; then
		notok "$what: ping-pong runs (mpirun status $rc)"
		sed 's/^/# /' "$log" | head -n 20
	elif { [ "$expect" = eager ] && [ "$r" = 0 ]; } ||
	     { [ "$expect" = rndv ] && [ "$r" -gt 0 ]; }; then
		ok "$what: 4096 bytes go by $expect ($r rendezvous receives)"
	else
		notok "$what: 4096 bytes should go by $expect ($r rendezvous receives)"
		grep 'rendezvous' "$log" | sed 's/^/# /'
	fi
}

# qp_limit: a limit set too small fails naming the parameter; the same
# value as the soft HCA's default (environment) is raised to two per rank
# and one more (the connection manager's UD QP)
qp_limit() {
	local log=$tmp/qp_set.log rc
	# pairs are made at a peer's first use: 2 QPs leave no room for one
	# beside the connection manager's UD QP
	run "$log" --mca mtl_tm_softhca_max_qp 2 "$prog/mpi_pingpong"
	rc=$?
	if clean_failure "$rc" "$log" &&
	   grep -q "cannot create a QP pair for rank [01]: .*mtl_tm_softhca_max_qp (2): two QPs per peer" "$log"; then
		ok "softhca_max_qp 2 set for 2 ranks: the first message fails naming mtl_tm_softhca_max_qp and what it must hold (mpirun status $rc)"
	else
		notok "softhca_max_qp 2 set for 2 ranks: the first message fails naming mtl_tm_softhca_max_qp (mpirun status $rc)"
		sed 's/^/# /' "$log" | head -n 20
	fi
	log=$tmp/qp_env.log
	run "$log" -x SOFTHCA_MAX_QP=3 "$prog/mpi_hello"
	rc=$?
	if [ $rc = 0 ]; then
		ok "SOFTHCA_MAX_QP=3 (a default, not set): raised to two QPs per rank, 2 ranks run"
	else
		notok "SOFTHCA_MAX_QP=3 (a default, not set): raised to two QPs per rank, 2 ranks run (mpirun status $rc)"
		sed 's/^/# /' "$log" | head -n 20
	fi
}

echo "1..19"

refused "eager_limit 4294967396 (does not fit a 32-bit length)" \
	mtl_tm_eager_limit --mca mtl_tm_eager_limit 4294967396
refused "eager_limit 2^31 (more than one message carries)" \
	mtl_tm_eager_limit --mca mtl_tm_eager_limit 2147483648
refused "send_slots 0" mtl_tm_send_slots --mca mtl_tm_send_slots 0
refused "keepalive_ms 2147483647 (a dead peer found in 25 days)" \
	"mtl_tm_keepalive_ms (2147483647) is out of range: 0 to 60000" \
	--mca mtl_tm_keepalive_ms 2147483647
refused "plain_buffers 0" mtl_tm_plain_buffers --mca mtl_tm_plain_buffers 0
refused "plain_buffers 32: a card needs 33" mtl_tm_plain_buffers --mca mtl_tm_plain_buffers 32
refused "rndv_threshold 0 (deprecated)" mtl_tm_rndv_threshold \
	--mca mtl_tm_rndv_threshold 0
refused "eager_limit and rndv_threshold disagree" \
	"mtl_tm_eager_limit (100) and the deprecated mtl_tm_rndv_threshold" \
	--mca mtl_tm_eager_limit 100 --mca mtl_tm_rndv_threshold 200
refused "softhca_mtu 3" mtl_tm_softhca_mtu --mca mtl_tm_softhca_mtu 3
refused "softhca_max_rndv_hdr_size above the MTU" \
	mtl_tm_softhca_max_rndv_hdr_size \
	--mca mtl_tm_softhca_max_rndv_hdr_size 8192
refused "softhca_max_num_tags 0" mtl_tm_softhca_max_num_tags \
	--mca mtl_tm_softhca_max_num_tags 0
refused "SOFTHCA_RING_DEPTH=lots in the environment" \
	"mtl_tm_softhca_ring_depth (.*SOFTHCA_RING_DEPTH)" \
	-x SOFTHCA_RING_DEPTH=lots
refused "TM_DEV_PROVIDER=bogus in the environment" \
	"mtl_tm_provider (.*TM_DEV_PROVIDER)" -x TM_DEV_PROVIDER=bogus

boundary "defaults" eager
boundary "eager_limit 1024" rndv --mca mtl_tm_eager_limit 1024
boundary "rndv_threshold 1025 (deprecated: eager_limit 1024)" rndv \
	--mca mtl_tm_rndv_threshold 1025
boundary "an explicit MCA value wins over the environment" eager \
	-x SOFTHCA_RING_DEPTH=lots --mca mtl_tm_softhca_ring_depth 64
qp_limit
exit 0
