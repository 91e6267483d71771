#!/bin/bash
# .ci/user-job.sh - an MPI job exactly as a user runs one: the README's
# first command (scripts/install-component.sh && scripts/mpi-demo.sh),
# whose mpirun names no component path of its own, then the component
# uninstalled again.  Run by .ci/run on this machine's release and by
# .ci/trixie.sh on Debian 13 (where PMIx hands processes a component path
# of its own: scripts/install-component.sh).  As root (it installs into
# Open MPI); prints a TAP line per check and "N passed, M failed" last.
set -uo pipefail
cd "$(dirname "$0")/.."

n=0
pass=0
check() { # what command...
	local what=$1 log
	shift
	n=$((n + 1))
	log=$(mktemp)
	if "$@" > "$log" 2>&1; then
		pass=$((pass + 1))
		echo "ok $n - $what"
	else
		echo "not ok $n - $what"
		tail -n 25 "$log" | sed 's/^/#   /'
	fi
	rm -f "$log"
}

demo() {
	local out
	out=$(scripts/mpi-demo.sh 2 2>&1) || { echo "$out"; return 1; }
	echo "$out"
	grep -q '^ring: all messages checked' <<< "$out"
}
gone() {
	! ompi_info | grep -q 'MCA mtl: tm' &&
	! grep -rqs 'ompi-mtl-tm' "$(ompi_info --parsable --path sysconfdir |
				     sed -n 's/^path:sysconfdir://p')"
}
uninstall() {
	scripts/install-component.sh --uninstall && gone
}

echo "1..3"
check "install-component.sh installs mtl tm into Open MPI" scripts/install-component.sh
check "mpi-demo.sh: a 2-rank ring over --mca pml cm --mca mtl tm, no component path given" demo
check "install-component.sh --uninstall leaves no component and no setting behind" uninstall
echo "$pass passed, $((n - pass)) failed"
[ "$pass" -eq "$n" ]
