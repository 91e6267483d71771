# shellcheck shell=bash
# vm-lib.sh - sourced by tests/vm/run-vm-tests.sh: TAP output, the rig's
# checks (rxe0, RC ping-pong, the mtl tm probe, Yama) and one MPI case
# (mpi_case), each judged by what its program prints.
# Uses the runner's run, seed, timeout_s, budget, flap_s, flap_long_s, tm_required,
# nonroot_tm_required and rig.sh's rig_ssh / rig_link.

n=0 npass=0 nfail=0 nskip=0
tm_skip_why=
t_mpi=

tap_ok() { n=$((n + 1)); npass=$((npass + 1)); echo "ok $n - $*"; }
tap_fail() { n=$((n + 1)); nfail=$((nfail + 1)); echo "not ok $n - $*"; }
tap_skip() { n=$((n + 1)); nskip=$((nskip + 1)); echo "ok $n - $1 # SKIP $2"; }
tap_end() {
	echo "1..$n"
	echo "# $npass passed, $nfail failed, $nskip skipped"
}
timing() { echo "# timing: $*"; }
# the end of a log, as TAP comments
show() { grep -av '^\s*$' "$1" | tail -n "${2:-25}" | cut -c1-300 | sed 's/^/#   | /'; }

# Can this machine run the rig?  Prints why not (the evidence) otherwise.
vm_preflight() {
	local why=() t
	[ "$(id -u)" -eq 0 ] || why+=("not root (uid $(id -u)): debootstrap, chroot and mount need root")
	for t in qemu-system-x86_64 qemu-img debootstrap mkfs.ext4 ssh ssh-keygen ss; do
		command -v "$t" > /dev/null || why+=("no $t in PATH")
	done
	if [ ${#why[@]} -gt 0 ]; then
		local IFS=';'
		echo "${why[*]} (scripts/vm/host-deps.sh installs the tools)"
		return 1
	fi
}

rxe_check() {
	local vm out bad=
	for vm in vm1 vm2; do
		out=$(rig_ssh "$run" "$vm" 'ibv_devinfo -d rxe0; rdma link show' 2>&1) || true
		echo "$out" > "$run/logs/rxe-$vm.log"
		if ! grep -q 'state:.*PORT_ACTIVE' <<< "$out"; then
			bad+=" $vm"
		fi
	done
	if [ -z "$bad" ]; then
		tap_ok "rxe0 (soft-RoCE) active on vm1 and vm2: $(grep -m1 'link rxe0' "$run/logs/rxe-vm1.log")"
	else
		tap_fail "rxe0 not active on:$bad"
		show "$run/logs/rxe-${bad# }.log"
	fi
}

# the GID index of vmN's IPv4 address on rxe0 (RoCE v2)
gid_index() {
	rig_ssh "$run" "$1" 'for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
		case $(cat "$g" 2> /dev/null) in *ffff:c0a8:4d0*) basename "$g"; break ;; esac
	done'
}

pingpong_check() {
	local g1 g2 log=$run/logs/pingpong.log rc=0
	g1=$(gid_index vm1) || true
	g2=$(gid_index vm2) || true
	if [ -z "$g1" ] || [ -z "$g2" ]; then
		tap_fail "ibv_rc_pingpong: no IPv4 GID on rxe0 (vm1: '$g1', vm2: '$g2')"
		return
	fi
	rig_ssh "$run" vm2 "timeout 40 ibv_rc_pingpong -d rxe0 -g $g2 -n 20 > /tmp/pp-server.log 2>&1 < /dev/null &" || true
	sleep 2
	timeout 60 ssh -F "$run/ssh_config" vm1 \
		"timeout 40 ibv_rc_pingpong -d rxe0 -g $g1 -n 20 vm2" > "$log" 2>&1 || rc=$?
	if [ $rc = 0 ] && grep -q 'iters in' "$log"; then
		tap_ok "ibv_rc_pingpong vm1 -> vm2 over rxe0: $(grep 'iters in' "$log")"
	else
		tap_fail "ibv_rc_pingpong vm1 -> vm2 over rxe0 (exit $rc)"
		show "$log"
	fi
}

# Does mtl tm open rxe0 (a device without tag matching)?  Sets tm_skip_why
# while it cannot and tm_required is 0.
tm_probe() {
	local log=$run/logs/tm-probe.log rc=0 name="mtl tm opens rxe0, a device without tag matching (provider verbs, 1 rank)"
	timeout 90 ssh -F "$run/ssh_config" vm1 "timeout -k 5 60 mpirun --allow-run-as-root -np 1 --mca pml cm --mca mtl tm --mca mtl_tm_provider verbs /opt/mtl-tm/build/tests/mtl/mpi_hello" > "$log" 2>&1 || rc=$?
	if [ $rc = 0 ]; then
		tap_ok "$name"
	elif grep -q 'IBV_TM_CAP_RC' "$log" && [ "$tm_required" = 0 ]; then
		tm_skip_why="mtl tm cannot open a device without tag matching yet (on vm1 it says: \"$(tr -s '\n ' '  ' < "$log" | grep -o 'libibverbs lists no device with IBV_TM_CAP_RC' | head -n 1)\"; VM_TM_REQUIRED=1 makes this a failure)"
		tap_skip "$name" "$tm_skip_why"
	else
		tap_fail "$name (exit $rc)"
		show "$log"
	fi
}

yama_set() {
	local vm got ok=1
	for vm in vm1 vm2; do
		got=$(rig_ssh "$run" "$vm" "sysctl -qw kernel.yama.ptrace_scope=$1 && cat /proc/sys/kernel/yama/ptrace_scope" 2>&1) || true
		[ "$got" = "$1" ] || ok=0
	done
	if [ $ok = 1 ]; then
		tap_ok "kernel.yama.ptrace_scope=$1 on vm1 and vm2"
	else
		tap_fail "kernel.yama.ptrace_scope=$1 on vm1 and vm2: got '$got'"
	fi
}

# config_mca CONFIG: the mpirun arguments of a configuration
config_mca() {
	case $1 in
	ob1) echo "--hostfile /etc/mtlvm/hostfile --map-by node --mca pml ob1 --mca btl self,vader,tcp --mca btl_vader_single_copy_mechanism none" ;;
	ucx) echo "--hostfile /etc/mtlvm/hostfile --map-by node --mca pml ucx --mca btl self -x UCX_TLS=rc_verbs,ud_verbs,self -x UCX_NET_DEVICES=rxe0:1" ;;
	# verbose 10: each rank's statistics line names its mode and device
	tm) echo "--hostfile /etc/mtlvm/hostfile --map-by node --mca pml cm --mca mtl tm --mca mtl_tm_verbose 10" ;;
	# every rank on vm1: the soft HCA; no vader, whose PR_SET_PTRACER
	# would hide what Yama does to the soft HCA
	tm1) echo "--host vm1:4 --mca pml cm --mca mtl tm --mca btl self" ;;
	esac
}

# flap_job SECS LOG CMD...: starts the job in the background (linkflap):
# pulls vm2's cable for SECS seconds once the program says "running";
# returns ssh's status.
flap_job() {
	local secs=$1 log=$2 pid i rc=0
	shift 2
	"$@" > "$log" 2>&1 &
	pid=$!
	for i in $(seq 120); do
		grep -q '^running' "$log" && break
		kill -0 "$pid" 2> /dev/null || break
		sleep 0.5
	done
	if grep -q '^running' "$log"; then
		rig_link "$run" vm2 off && echo "# host: vm2's VM-to-VM link off for ${secs} s" >> "$log.flap"
		sleep "$secs"
		rig_link "$run" vm2 on && echo "# host: vm2's VM-to-VM link on" >> "$log.flap"
	else
		echo "# host: the program never said 'running': link left alone" >> "$log.flap"
	fi
	wait "$pid" || rc=$?
	return $rc
}

# judge NAME CONFIG RC LOG SECONDS NP: sets verdict (ok/fail/skip) and why
judge() {
	local name=$1 c=$2 rc=$3 log=$4 secs=${5%.*} np=$6 modes
	verdict=fail why="exit status $rc"
	# 124/137 from timeout, or mpirun's own 137 (a rank killed) in time
	if { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && [ "$secs" -ge "$timeout_s" ]; then
		why="timed out after ${timeout_s} s (hang)"
		return
	fi
	case $name in
	peerdead)
		if [ "$c" = tm ]; then
			if grep -q '^rank 0: ok' "$log" && ! grep -q FAIL "$log"; then
				verdict=ok why=$(grep -m1 '^rank 0: ok' "$log" | cut -c1-200)
			fi
		elif [ "$rc" != 0 ] && grep -q 'rank 1 .*signal 9' "$log"; then
			# the reference, run without recovery: mpirun ends the job
			verdict=ok why="reference: mpirun ended the job in bounded time (exit $rc): $(grep -m1 'rank 1 .*signal 9' "$log" | cut -c1-120)"
		fi
		;;
	finalize)
		judge_finalize "$c" "$rc" "$log" "$np"
		;;
	connect)
		judge_connect "$rc" "$log"
		;;
	linkflap*)
		if [ "$rc" = 0 ] && grep -q 'survived' "$log"; then
			verdict=ok why=$(grep -m1 'survived' "$log")
		elif grep -q 'failed cleanly' "$log"; then
			verdict=ok why="failed cleanly: $(grep -m1 'failed cleanly' "$log" | cut -c1-200)"
		fi
		;;
	*)
		[ "$rc" = 0 ] && verdict=ok why=
		# across the VMs, tm must have run on rxe0, matching in software
		if [ $verdict = ok ] && [ "$c" = tm ]; then
			modes=$(grep -c 'mode: no tag matching.* on verbs:rxe0' "$log")
			if [ "$modes" != "$np" ]; then
				verdict=fail why="$modes of $np ranks say \"mode: no tag matching ... on verbs:rxe0\" (mtl_tm_verbose 10)$(grep -o 'mode: .*' "$log" | grep -v -m1 'on verbs:rxe0' | sed 's/^/; another says: /')"
			else
				why="every rank: $(grep -m1 -o 'mode: .*' "$log")"
			fi
		fi
		;;
	esac
	if [ $verdict = fail ] && [ "$c" = tm1 ] && [ "$nonroot_tm_required" = 0 ] &&
	   grep -q 'cannot connect to rank' "$log"; then
		verdict=skip why="the soft HCA cannot connect its ranks without ptrace permission yet (\"$(grep -m1 -a 'cannot connect to rank' "$log" | sed 's/^[^m]*mtl tm: //' | cut -c1-100)\"; VM_NONROOT_TM_REQUIRED=1 makes this a failure)"
	fi
}

# judge_connect RC LOG (judge's "connect", tests/mtl/mpi_connect 1 on 4
# ranks mapped by node: 0 and 2 on vm1, 1 and 3 on vm2): rank 0 sent to
# rank 1 only, across the VMs, and rank 1 took it from MPI_ANY_SOURCE;
# connected_peers reads 1 on ranks 0 and 1, 0 on ranks 2 and 3.
judge_connect() {
	local rc=$1 log=$2 want line
	[ "$rc" = 0 ] || return 0
	for want in "rank 1 got 4242 from rank 0" "rank 0 connected_peers 1" \
		    "rank 1 connected_peers 1" "rank 2 connected_peers 0" \
		    "rank 3 connected_peers 0" "connect: done"; do
		if ! grep -qx "$want" "$log"; then
			line=$(grep -m1 "^${want% *}" "$log" || true)
			why="no \"$want\"${line:+ (\"$line\")}"
			return 0
		fi
	done
	verdict=ok why="one connection each, across the VMs, on ranks 0 and 1; none on 2 and 3"
}

# judge_finalize CONFIG RC LOG NP (judge's "finalize"): under tm, every
# rank says "errors 0 (+0 at teardown)" on rxe0, none ran out of drain
# time, and every MPI_Finalize took under VM_FINALIZE_SECONDS.  A rank
# that probes a peer already gone waits out RC's retries, up to the
# 5 s drain limit: 6.6 s seen.  The default, 4.5, stays below that and
# leaves room for TCG: there Open MPI's own teardown after mtl tm has
# unloaded takes 1.2-1.5 s, mtl tm's part (drain, fence, teardown)
# 0.2-0.4 s, and a whole MPI_Finalize 1.6-3.1 s on a loaded host (under
# 2 s is for a machine that runs at speed; ob1's takes 0.4-1.2 s here).
judge_finalize() {
	local c=$1 rc=$2 log=$3 np=$4 limit=${VM_FINALIZE_SECONDS:-4.5} times max n
	[ "$rc" = 0 ] || return 0
	times=$(sed -n 's/^rank [0-9]*: finalize \([0-9.]*\) s$/\1/p' "$log")
	n=$(echo "$times" | grep -c .)
	max=$(echo "$times" | sort -g | tail -n 1)
	why="$n of $np ranks timed MPI_Finalize"
	[ "$n" = "$np" ] || return 0
	why="MPI_Finalize took at most $max s (each: $(echo "$times" | tr '\n' ' ' | sed 's/ $//'))"
	[ "$c" = tm ] || { verdict=ok; return 0; }
	if ! awk -v m="$max" -v l="$limit" 'BEGIN { exit !(m < l) }'; then
		why="$why: not under $limit s (VM_FINALIZE_SECONDS)"
	elif grep -q 'still in flight' "$log"; then
		why="$why, but a drain ran out of time: $(grep -m1 -o 'rank [0-9]*: .*still in flight.*' "$log")"
	elif [ "$(grep -c 'errors 0 (+0 at teardown).*on verbs:rxe0' "$log")" != "$np" ]; then
		why="$why, but not every rank says \"errors 0 (+0 at teardown)\" on verbs:rxe0:$(grep -o 'errors [0-9]* (+[0-9]* at teardown)' "$log" | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
	else
		verdict=ok why="$why, under $limit s; every rank: errors 0 (+0 at teardown)"
	fi
}

# mpi_case USER CONFIG NAME NP PROGRAM [ARGS...]: one mpirun on vm1
mpi_case() {
	local user=$1 c=$2 name=$3 np=$4 rc=0 log cmd extra= label
	shift 4
	label="$name [$c] np=$np"
	[ "$user" = root ] || label+=" as $user"
	log=$run/logs/$(echo "$name-$c-$user" | tr -c 'A-Za-z0-9_.\n-' _).log
	[ -n "$t_mpi" ] || t_mpi=$(date +%s)
	if [ $(( $(date +%s) - t_mpi )) -gt "$budget" ]; then
		tap_fail "$label: not run: the MPI part's budget of ${budget} s (VM_SUITE_BUDGET) is spent"
		return
	fi
	if [ "$c" = tm ] && [ -n "$tm_skip_why" ]; then
		tap_skip "$label" "$tm_skip_why"
		return
	fi
	# only tm is asked to let the job go on past a dead rank
	[ "$name" = peerdead ] && [ "$c" = tm ] && extra="--mca orte_enable_recovery 1"
	[ "$user" = root ] && extra+=" --allow-run-as-root"
	cmd="cd /tmp && MPITEST_SEED=$seed MPITEST_CONFIG=$c timeout -k 5 $timeout_s mpirun -np $np $(config_mca "$c") $extra -x MPITEST_SEED -x MPITEST_CONFIG $*"
	local t0
	t0=$(date +%s%N)
	local ssh_cmd=(timeout -k 5 $((timeout_s + 30)) ssh -F "$run/ssh_config" -l "$user" vm1 "$cmd")
	rm -f "$log.flap"
	if [ "${name%%@*}" = linkflap ]; then
		flap_job "$flap_s" "$log" "${ssh_cmd[@]}" || rc=$?
	elif [ "${name%%@*}" = linkflaplong ]; then
		flap_job "$flap_long_s" "$log" "${ssh_cmd[@]}" || rc=$?
	else
		"${ssh_cmd[@]}" > "$log" 2>&1 || rc=$?
	fi
	[ -f "$log.flap" ] && cat "$log.flap" >> "$log"
	local secs
	secs=$(vm_elapsed "$t0")
	judge "${name%%@*}" "$c" "$rc" "$log" "$secs" "$np"
	case $verdict in
	ok)
		tap_ok "$label (${secs} s)${why:+: $why}"
		grep -a '^checked:' "$log" | sort -u | cut -c1-200 | sed 's/^/#   /' || true
		;;
	skip) tap_skip "$label" "$why" ;;
	*)
		tap_fail "$label: $why (${secs} s)"
		echo "#   rerun on vm1 (scripts/vm/rig.sh ssh $run vm1): $cmd"
		show "$log" 30
		;;
	esac
}

# mpi_suite USER SCOPE PROGRAM...: tests/mpi/run-mpi-tests.sh on vm1 as
# USER, every rank there (the soft HCA), configuration tm, 2 ranks, btl
# self (no vader: its PR_SET_PTRACER would hide what Yama does); each of
# its TAP lines becomes one of ours.  A run that ends without every line
# it planned counts one failure more.
mpi_suite() {
	local user=$1 scope=$2 rc=0 log plan got=0 bad=0 line label
	shift 2
	[ $# -gt 0 ] || return 0
	log=$run/logs/suite-scope$scope-$user.log
	label="tests/mpi as $user at ptrace_scope $scope (soft HCA, btl self)"
	if [ $(( $(date +%s) - ${t_mpi:-$(date +%s)} )) -gt "$budget" ]; then
		tap_fail "$label: not run: the MPI part's budget of ${budget} s (VM_SUITE_BUDGET) is spent"
		return
	fi
	timeout -k 5 $(( ($# + 1) * (timeout_s + 10) )) ssh -F "$run/ssh_config" -l "$user" vm1 \
		"cd /tmp && OMPI_MCA_btl=self MPI_TESTS_CONFIGS=tm MPI_TESTS_TM=installed MPI_TESTS_NP=2 MPI_TESTS_TIMEOUT=$timeout_s MPITEST_SEED=$seed top_builddir=/opt/mtl-tm/build /opt/mtl-tm/src/tests/mpi/run-mpi-tests.sh $*" \
		> "$log" 2>&1 || rc=$?
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\)$/\1/p' "$log" | head -n 1)
	while IFS= read -r line; do
		got=$((got + 1))
		case $line in
		"ok "*"# SKIP"*) tap_fail "$label: ${line#ok * - } (a skip here means mtl tm was not found)" ;;
		"ok "*) tap_ok "$label: ${line#ok * - }" ;;
		*)
			tap_fail "$label: ${line#not ok * - }"
			bad=1
			;;
		esac
	done < <(grep -a -E '^(not )?ok [0-9]+ - ' "$log")
	if [ -z "$plan" ] || [ "$got" != "$plan" ]; then
		tap_fail "$label: $got results of ${plan:-no} plan (exit $rc)"
		bad=1
	fi
	[ $bad = 0 ] || show "$log" 40
}
