#!/bin/bash
# test_docs.sh - what README.md says about testing and failure detection
# agrees with the tree (TAP):
#  1. the suite that runs MPI over the kernel's soft-RoCE (tests/vm) exists
#     and the README does not list "a kernel RDMA stack" among what is not
#     yet run, and names rxe where it says what runs;
#  2. the README's time to turn a dead peer into errors over RC is the one
#     doc/DESIGN.md derives from the QPs' retries ("about N s"), and its
#     "about a second" is said of the soft HCA.
set -u
top=${top_srcdir:-.}
readme=$top/README.md
design=$top/doc/DESIGN.md
n=0
fails=0
check() { # check description command...
	local d=$1
	shift
	n=$((n + 1))
	if "$@" >/dev/null 2>&1; then echo "ok $n - $d"
	else fails=$((fails + 1)); echo "not ok $n - $d"; fi
}
flat() { tr '\n' ' ' < "$1" | tr -s ' '; }

vm_rxe=$(grep -c 'soft-RoCE (rxe)' "$top/tests/vm/run-vm-tests.sh")
check "tests/vm runs over rxe, and README.md names it among what runs, not among what does not" \
	bash -c "[ $vm_rxe -gt 0 ] &&
		! tr '\n' ' ' < '$readme' | tr -s ' ' | grep -qi 'nor [^.]*on a kernel RDMA stack' &&
		tr '\n' ' ' < '$readme' | tr -s ' ' | grep -q 'kernel RDMA stack: .tests/vm/. runs MPI jobs across two VMs over the kernel.s soft-RoCE (rxe)'"
rc_s=$(flat "$design" | sed -n 's/.*IBV_WC_RETRY_EXC_ERR` about \([0-9]*\) s after it was posted.*/\1/p')
check "README.md's dead-peer time over RC is doc/DESIGN.md's (about ${rc_s:-?} s), and about a second is the soft HCA's" \
	bash -c "[ -n '$rc_s' ] && tr '\n' ' ' < '$readme' | tr -s ' ' | grep -q 'errors, within about a second on the soft HCA and about $rc_s s over RC'"
echo "1..$n"
exit $((fails > 0))
