#!/bin/bash
# mpi-demo.sh - the main job: build tests/mtl/mpi_ring (in build/normal)
# and run it over pml cm + mtl tm on the soft HCA, with the installed
# component (scripts/install-component.sh), then show what the card did
# on each rank (mtl_tm_verbose 10 statistics).
#
#   scripts/mpi-demo.sh [NP]        NP ranks (default 4)
#
# Extra mpirun options can be passed in MPIRUN_ARGS, e.g.
#   MPIRUN_ARGS="--mca mtl_tm_softhca_max_num_tags 1" scripts/mpi-demo.sh
# and another mpirun in MPIRUN.  The caller's OMPI_MCA_* variables stay as
# they are (btl_vader_single_copy_mechanism is none only if unset).
set -euo pipefail

. "$(dirname "$0")/build-dir.sh"
np=${1:-4}
ensure_build_dir mpi-demo
make -C "$dir" -j2 --no-print-directory tests/mtl/mpi_ring > /dev/null

args=(--oversubscribe -np "$np" --mca pml cm --mca mtl tm
      --mca mtl_tm_verbose 10)
if [ "$(id -u)" -eq 0 ]; then
	args+=(--allow-run-as-root)
fi
# vader's single-copy mechanism may be refused in containers: off, unless
# the caller chose one
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
echo "mpirun -np $np --mca pml cm --mca mtl tm tests/mtl/mpi_ring"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
# shellcheck disable=SC2086
"${MPIRUN:-mpirun}" "${args[@]}" ${MPIRUN_ARGS:-} "$dir/tests/mtl/mpi_ring" > "$log" 2>&1
rc=$?
set -e
# the program's own output, then the per-rank card statistics
grep -v 'mtl tm:' "$log" || true
grep 'mtl tm: rank .* on \|mtl tm: rank [0-9]*: receives' "$log" |
	sed 's/^\[[^]]*\] //' | sort -V || true
if [ $rc != 0 ]; then
	echo "mpi-demo: mpirun failed (exit $rc); the full log:" >&2
	cat "$log" >&2
fi
exit $rc
