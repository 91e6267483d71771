#!/bin/bash
# test_pvar.sh - the component's MPI_T performance variables (TAP).
#
# Runs the built mca_mtl_tm.so (top_builddir/.libs first on
# mca_base_component_path): ompi_info lists at least 10 mtl_tm_* pvars,
# each documented in man/mtl_tm.7; then mpi_pvar (2 ranks over pml cm +
# mtl tm) reads them through an MPI_T session around known traffic, and
# each of its checks becomes one TAP line here; last, rank 1's statistics
# line must show the totals the pvars read.
set -u

. "$(dirname "$0")/mpi_tap.sh"

ompi_info --all --parsable > "$tmp/info" 2>&1
sed -n 's/^mca:mtl:tm:pvar:\(mtl_tm_[a-z_0-9]*\):class:.*/\1/p' "$tmp/info" \
	> "$tmp/pvars"
count=$(wc -l < "$tmp/pvars")
check "ompi_info --all lists $count mtl_tm_* pvars (at least 10)" \
	test "$count" -ge 10
undoc=
while read -r p; do
	grep -q "^\.B $p\$" "${top_srcdir:-.}/man/mtl_tm.7" || undoc="$undoc $p"
done < "$tmp/pvars"
check "man/mtl_tm.7 documents every pvar${undoc:+ (missing:$undoc)}" \
	test -z "$undoc"

timeout 120 "$MPIRUN" --oversubscribe -x OMPI_MCA_mca_base_component_path \
	-np 2 --mca pml cm --mca mtl tm --mca mtl_tm_verbose 10 \
	"$prog/mpi_pvar" > "$tmp/run" 2>&1
rc=$?
while IFS= read -r line; do
	case $line in
	"check ok: "*) ok "mpi_pvar: ${line#check ok: }" ;;
	"check FAILED: "*) notok "mpi_pvar: ${line#check FAILED: }" ;;
	esac
done < "$tmp/run"
check "mpi_pvar ran to the end (exit $rc)" \
	bash -c "[ $rc = 0 ] && grep -q '^pvar: [0-9]* checks, 0 failed' '$tmp/run'"
# the statistics line comes from the same variables: rank 1's numbers up
# to "errors N" are the totals mpi_pvar read last (no MTL traffic after)
line=$(sed -n 's/.*mtl tm: rank 1: \(.*\) (+[0-9]* at teardown).*/\1/p' "$tmp/run" |
	grep -oE '[0-9]+' | tr '\n' ' ')
totals=$(sed -n 's/^totals: //p' "$tmp/run")
check "the statistics line shows what the pvars read (line: ${line% }; pvars: $totals)" \
	test -n "$totals" -a "${line% }" = "$totals"
if [ $rc != 0 ]; then
	sed 's/^/# /' "$tmp/run" | grep -v '^# check ok' | head -n 30
fi
echo "1..$n"
exit 0
