#!/bin/sh
# autogen.sh - generate configure and Makefile.in (needs autoconf, automake,
# libtool, pkg-config: scripts/install-deps.sh installs them).
set -e
cd "$(dirname "$0")"
mkdir -p build-aux m4
exec autoreconf -fi
