#!/bin/sh
# test_demo.sh - runs tests/demo/softhca_demo (the README's command (c),
# through scripts/demo.sh) as a user would: the soft HCA's default, strict
# model, and once more with the card doing a random amount of work per
# call.  The demo checks every completion and payload itself and ends with
# "softhca_demo: OK" or FAILED; here the rendezvous read by the card (not
# handed to software) and its FIN are asked for too, since the default
# model gives the card rendezvous only to a QP with no send queue
# (doc/mlx5-rules.md rule 10).
bin="${top_builddir:-.}/tests/demo/softhca_demo"
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fail=1; echo "not ok $n - $1"; }

for sched in auto random; do
	out=$(SOFTHCA_SCHED=$sched timeout 120 "$bin" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	if [ $rc -eq 0 ] && echo "$out" | grep -q "^softhca_demo: OK$" &&
	   echo "$out" | grep -q "msg 5: 50000 bytes in tagged entry 3, payload ok" &&
	   echo "$out" | grep -q " 1 rendezvous reads" &&
	   echo "$out" | grep -q "FIN for tag 0x102"; then
		ok "sched=$sched: six messages as the model says, the rendezvous read by the card"
	else
		notok "sched=$sched: softhca_demo (exit $rc)"
	fi
done
echo "1..$n"
exit $fail
