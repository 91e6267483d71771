#!/bin/bash
# imb-build.sh - build the Intel MPI Benchmarks' IMB-MPI1 (PingPong,
# Uniband, Biband, ...) against the system's mpicc/mpicxx, outside the
# project tree, for bench/run.sh --imb.
#
#   scripts/imb-build.sh SRC [PREFIX]   build and install
#   scripts/imb-build.sh --where        print the directory run.sh searches
#
# SRC: a release tarball (e.g. IMB-v2021.11.tar.gz), its URL
# (https://github.com/intel/mpi-benchmarks/archive/refs/tags/IMB-v2021.11.tar.gz,
# fetched with curl or wget), a directory holding the unpacked sources, or
# a git directory (not a work tree) of github.com/intel/mpi-benchmarks,
# e.g. a bare mirror: $IMB_REF, default IMB-v2021.11, is taken with git
# archive.
# The version (src_cpp/imb.cpp's program name) is printed and written next to the
# program; any 2021.x or later release builds.  PREFIX (default:
# $IMB_PREFIX, else /var/cache/ompi-mtl-tm/imb as root, else
# ${XDG_CACHE_HOME:-~/.cache}/ompi-mtl-tm/imb) receives the sources
# (PREFIX/src), the build log (PREFIX/build.log), PREFIX/VERSION and
# PREFIX/bin/IMB-MPI1.  Never built or installed inside the project tree.
set -euo pipefail

IMB_REF=${IMB_REF:-IMB-v2021.11}
top=$(cd "$(dirname "$0")/.." && pwd)

default_prefix() {
	if [ -n "${IMB_PREFIX:-}" ]; then
		echo "$IMB_PREFIX"
	elif [ "$(id -u)" = 0 ]; then
		echo "/var/cache/ompi-mtl-tm/imb"
	else
		echo "${XDG_CACHE_HOME:-$HOME/.cache}/ompi-mtl-tm/imb"
	fi
}

die() { echo "imb-build: $*" >&2; exit 1; }
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }

case ${1:-} in
--where) echo "$(default_prefix)/bin"; exit 0 ;;
-h|--help) usage; exit 0 ;;
"") usage >&2; exit 2 ;;
esac
src=$1
[ $# -le 2 ] || die "too many arguments (SRC [PREFIX])"
prefix=$(realpath -m "${2:-$(default_prefix)}")
case $prefix/ in
"$top"/*) die "PREFIX $prefix is inside the project tree; third-party suites are built outside it" ;;
esac
command -v mpicc >/dev/null && command -v mpicxx >/dev/null ||
	die "no mpicc/mpicxx on PATH (Debian: apt-get install libopenmpi-dev)"
command -v make >/dev/null || die "no make on PATH"

# The version string IMB prints in its header, from its sources.
imb_version() {
	sed -n 's/.*"Intel(R) MPI Benchmarks \([0-9][0-9.]*\)".*/\1/p' "$1/src_cpp/imb.cpp" 2>/dev/null | head -n 1
}
check_src() {
	[ -f "$1/src_cpp/Makefile" ] && [ -f "$1/src_c/IMB_pingpong.c" ] ||
		die "$src does not look like the Intel MPI Benchmarks sources (no src_cpp/Makefile or src_c/IMB_pingpong.c)"
	local v
	v=$(imb_version "$1")
	case $v in
	20[2-9][0-9].*) ;;
	*) die "$src is IMB version '${v:-unknown}'; 2021.x or later is needed (its IMB-MPI1 has Uniband and Biband and -msglen)" ;;
	esac
}

dl=
stage=
cleanup() {
	[ -z "$dl" ] || rm -rf "$dl"
	[ -z "$stage" ] || rm -rf "$stage"
}
trap cleanup EXIT
case $src in
http://*|https://*)
	dl=$(mktemp -d)
	if command -v curl >/dev/null; then
		curl -fsSL -o "$dl/imb.tar.gz" "$src" || die "cannot download $src"
	elif command -v wget >/dev/null; then
		wget -q -O "$dl/imb.tar.gz" "$src" || die "cannot download $src"
	else
		die "neither curl nor wget to download $src"
	fi
	src=$dl/imb.tar.gz ;;
*)
	[ -e "$src" ] || die "no such file or directory: $src" ;;
esac

mkdir -p "$prefix" || die "cannot create $prefix"
# Unpacked and checked beside the last build, which bad input leaves alone.
stage=$(mktemp -d "$prefix/new-src.XXXXXX") || die "cannot write in $prefix"
if [ -d "$src" ] && git --git-dir="$src" rev-parse --git-dir >/dev/null 2>&1; then
	git --git-dir="$src" archive "$IMB_REF" | tar -x -C "$stage" ||
		die "git archive $IMB_REF from $src failed (set IMB_REF to a tag or commit it has)"
elif [ -d "$src" ]; then
	check_src "$src"
	cp -a "$src/." "$stage/" || die "cannot copy $src to $stage"
else
	tar -xf "$src" -C "$stage" --strip-components=1 ||
		die "$src is neither a directory nor a tarball tar can unpack"
fi
check_src "$stage"
version=$(imb_version "$stage")

# Built where it was unpacked; the last build is replaced only by one
# that worked.
log=$prefix/build.log
echo "imb-build: IMB $version with $(command -v mpicxx) ($(mpicc --showme:version 2>&1 | head -n 1)); log $log"
# IMB-MPI1 only.  Its C++ front end builds with -Wall -Wextra -Werror, and
# g++ 12 warns (-Wcast-function-type) on the function-pointer casts in
# Open MPI 4.1's mpi.h C++ bindings: that warning, and only it, is off.
if ! make -C "$stage/src_cpp" -f Makefile TARGET=MPI1 CC=mpicc CXX=mpicxx \
	CXXFLAGS=-Wno-cast-function-type -j2 >"$log" 2>&1; then
	tail -n 20 "$log" >&2
	die "make failed; the whole log is $log (the last build, if any, is kept)"
fi
[ -x "$stage/src_cpp/IMB-MPI1" ] || die "IMB-MPI1 was not built (see $log)"
rm -rf "${prefix:?}/src" "${prefix:?}/bin" "${prefix:?}/VERSION"
mv "$stage" "$prefix/src" || die "cannot move $stage to $prefix/src"
mkdir -p "$prefix/bin" &&
	cp "$prefix/src/src_cpp/IMB-MPI1" "$prefix/bin/" ||
	die "cannot copy IMB-MPI1 to $prefix/bin"
echo "$version" >"$prefix/VERSION"
echo "imb-build: installed $prefix/bin/IMB-MPI1"
if [ "$prefix" = "$(realpath -m "$(default_prefix)")" ]; then
	echo "imb-build: bench/run.sh --imb finds it there"
else
	echo "imb-build: for bench/run.sh --imb: export IMB_DIR=$prefix/bin"
fi
