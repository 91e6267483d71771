#!/bin/bash
# install-deps.sh - install the Debian packages the project needs (Debian
# 12 or 13), then the Open MPI devel headers the release's libopenmpi-dev
# lacks (scripts/ompi-headers.sh: Debian 13's, from its source package).
#
# Idempotent: does nothing when every package is installed already.  Runs as
# root, or through sudo otherwise.  Non-interactive (CI has no stdin).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

PACKAGES=(
	build-essential		# gcc (with libasan/libubsan), make, libc6-dev
	autoconf
	automake
	libtool
	pkg-config		# pkg.m4 and the pkg-config checks in configure
	libopenmpi-dev		# Open MPI devel headers (ompi/mca/mtl/mtl.h), mpicc
	openmpi-bin		# mpirun, ompi_info
	libibverbs-dev		# infiniband/verbs.h, infiniband/tm_types.h
	rdma-core
	ibverbs-providers
	libhwloc-dev
	libucx-dev		# libucs
	gnuplot-nox		# benchmark plots
	dpkg-dev		# dpkg-source, for scripts/ompi-headers.sh
	clang			# the fuzz target (tests/fuzz)
	libclang-rt-dev		# libFuzzer and the sanitizers for the default clang (14 on Debian 12, 19 on 13)
	valgrind		# callgrind: the counted tests (test_fast_paths, test_arrival_cost) and bench/*instr.sh
)

missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q '^install ok installed$'; then
		missing+=("$p")
	fi
done

# Root, or sudo: found only when something is to be installed.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		echo "install-deps: not root and no sudo; run as root: $*" >&2
		return 1
	fi
}

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#PACKAGES[@]} packages are installed"
else
	echo "install-deps: installing ${missing[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update </dev/null
	as_root env DEBIAN_FRONTEND=noninteractive \
		apt-get install -y --no-install-recommends "${missing[@]}" </dev/null
fi

if ! "$here/ompi-headers.sh" --check >/dev/null 2>&1; then
	as_root "$here/ompi-headers.sh" </dev/null
fi
