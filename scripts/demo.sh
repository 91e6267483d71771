#!/bin/bash
# demo.sh - build (in build/normal) and run tests/demo/softhca_demo: two
# processes exchange tagged messages through the soft HCA.
#
#   scripts/demo.sh
#
# SOFTHCA_* environment variables (see man/softhca.7) apply, e.g.
#   SOFTHCA_SCHED=random scripts/demo.sh
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
dir=$top/build/normal

if [ ! -x "$top/configure" ]; then
	(cd "$top" && ./autogen.sh)
fi
mkdir -p "$dir"
if [ ! -f "$dir/Makefile" ]; then
	(cd "$dir" && "$top/configure" > configure.out 2>&1) || {
		tail -n 30 "$dir/configure.out" >&2
		echo "demo: configure failed (scripts/install-deps.sh installs what it needs)" >&2
		exit 1
	}
fi
make -C "$dir" -j2 --no-print-directory tests/demo/softhca_demo
exec "$dir/tests/demo/softhca_demo"
