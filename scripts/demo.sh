#!/bin/bash
# demo.sh - build (in build/normal) and run tests/demo/softhca_demo: two
# processes exchange tagged messages through the soft HCA.
#
#   scripts/demo.sh
#
# SOFTHCA_* environment variables (see man/softhca.7) apply, e.g.
#   SOFTHCA_SCHED=random scripts/demo.sh
set -euo pipefail

. "$(dirname "$0")/build-dir.sh"
ensure_build_dir demo
make -C "$dir" -j2 --no-print-directory tests/demo/softhca_demo
exec "$dir/tests/demo/softhca_demo"
