#!/bin/bash
# install-deps.sh - install the Debian 12 packages the project needs.
#
# Idempotent: does nothing when every package is installed already.  Runs as
# root, or through sudo otherwise.  Non-interactive (CI has no stdin).
set -euo pipefail

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
	clang			# the fuzz target (tests/fuzz)
	libclang-rt-14-dev	# libFuzzer and the sanitizers for clang
)

missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q '^install ok installed$'; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#PACKAGES[@]} packages are installed"
	exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
	SUDO=()
elif command -v sudo >/dev/null 2>&1; then
	SUDO=(sudo)
else
	echo "install-deps: not root and no sudo; install as root: ${missing[*]}" >&2
	exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update </dev/null
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y --no-install-recommends "${missing[@]}" </dev/null
