#!/bin/sh
# test_card_check.sh - runs tests/dev/tm_card_check (what
# scripts/card-check.sh runs on a machine with a card) on the soft HCA:
# the caps printout and the two-process self-test in the hardware's QP
# layout, once by default and once with the soft HCA strict (where only
# the no-send-queue rx QP gets card rendezvous, doc/mlx5-rules.md rule 10).
bin="${top_builddir:-.}/tests/dev/tm_card_check"
n=0
fail=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fail=1; echo "not ok $n - $1"; }

for strict in 0 1; do
	out=$(TM_DEV_PROVIDER=soft TM_SOFTHCA_STRICT=$strict "$bin" --self-test 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	if [ $rc -eq 0 ] && echo "$out" | grep -q "^tm_caps .*max_ops" &&
	   echo "$out" | grep -q "rendezvous .* read by the card" &&
	   echo "$out" | grep -q "FIN from the receiver's card" &&
	   echo "$out" | grep -q "self-test: passed"; then
		ok "strict=$strict: caps printed, eager + card rendezvous + FIN over a QP pair"
	else
		notok "strict=$strict: self-test (exit $rc)"
	fi
done
out=$(TM_DEV_PROVIDER=verbs "$bin" 2>&1)
rc=$?
if [ -n "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	echo "ok 3 # SKIP this machine has an RDMA device"
	n=3
elif [ $rc -eq 2 ] && echo "$out" | grep -q "no TM-capable device"; then
	ok "no card: a clear message and exit status 2"
else
	notok "no card: exit $rc, output: $out"
fi
echo "1..$n"
exit $fail
