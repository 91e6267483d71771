#!/bin/bash
# osu-build.sh - build the OSU micro-benchmarks 7.4 (point-to-point ones:
# osu_latency, osu_bw, osu_bibw, osu_mbw_mr, osu_multi_lat, ...) against
# the system's mpicc, outside the project tree, for bench/run.sh --osu.
#
#   scripts/osu-build.sh SRC [PREFIX]   build and install
#   scripts/osu-build.sh --where        print the directory run.sh searches
#
# SRC: the release tarball osu-micro-benchmarks-7.4.tar.gz (from
# https://mvapich.cse.ohio-state.edu/benchmarks/) or a directory holding
# its unpacked sources.  Another version is refused: the issue's numbers
# are OSU 7.4's.  PREFIX (default: $OSU_PREFIX, else
# /var/cache/ompi-mtl-tm/osu-7.4 as root, else
# ${XDG_CACHE_HOME:-~/.cache}/ompi-mtl-tm/osu-7.4) receives a copy of the
# sources (PREFIX/src), the build log (PREFIX/build.log) and the programs
# (PREFIX/libexec/osu-micro-benchmarks/mpi/pt2pt).  The suite is never
# built or installed inside the project tree and never committed.
set -euo pipefail

OSU_VERSION=7.4
top=$(cd "$(dirname "$0")/.." && pwd)

default_prefix() {
	if [ -n "${OSU_PREFIX:-}" ]; then
		echo "$OSU_PREFIX"
	elif [ "$(id -u)" = 0 ]; then
		echo "/var/cache/ompi-mtl-tm/osu-$OSU_VERSION"
	else
		echo "${XDG_CACHE_HOME:-$HOME/.cache}/ompi-mtl-tm/osu-$OSU_VERSION"
	fi
}
bindir_of() { echo "$1/libexec/osu-micro-benchmarks/mpi/pt2pt"; }

die() { echo "osu-build: $*" >&2; exit 1; }

case ${1:-} in
--where) bindir_of "$(default_prefix)"; exit 0 ;;
-h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
"") sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
src=$1
prefix=$(realpath -m "${2:-$(default_prefix)}")
[ $# -le 2 ] || die "too many arguments (SRC [PREFIX])"
[ -e "$src" ] || die "no such file or directory: $src"
case $prefix/ in
"$top"/*) die "PREFIX $prefix is inside the project tree; third-party suites are built outside it" ;;
esac
command -v mpicc >/dev/null || die "no mpicc on PATH (Debian: apt-get install libopenmpi-dev)"
command -v make >/dev/null || die "no make on PATH"

# The version is checked before anything is copied or built.
check_src() {
	local ver
	[ -x "$1/configure" ] && [ -f "$1/c/mpi/pt2pt/standard/osu_latency.c" ] ||
		die "$src does not look like the OSU micro-benchmarks sources (no configure or c/mpi/pt2pt/standard/osu_latency.c)"
	ver=$(sed -n "s/^PACKAGE_VERSION='\(.*\)'$/\1/p" "$1/configure" | head -n 1)
	[ "$ver" = "$OSU_VERSION" ] ||
		die "$src is OSU version '${ver:-unknown}', not $OSU_VERSION"
}
[ -d "$src" ] && check_src "$src"
mkdir -p "$prefix" || die "cannot create $prefix"
rm -rf "$prefix/src"
mkdir -p "$prefix/src"
if [ -d "$src" ]; then
	cp -a "$src/." "$prefix/src/" || die "cannot copy $src to $prefix/src"
else
	tar -xf "$src" -C "$prefix/src" --strip-components=1 ||
		die "$src is neither a directory nor a tarball tar can unpack"
	check_src "$prefix/src"
fi
cd "$prefix/src"

log=$prefix/build.log
echo "osu-build: OSU $OSU_VERSION with $(command -v mpicc) ($(mpicc --showme:version 2>&1 | head -n 1)); log $log"
# Only the point-to-point programs: the rest of the suite is not needed
# and takes most of the build time.
pt2pt=c/mpi/pt2pt/standard
if ! { ./configure CC=mpicc CXX=mpicxx --prefix="$prefix" &&
       make -C "$pt2pt" -j2 && make -C "$pt2pt" install; } >"$log" 2>&1; then
	tail -n 20 "$log" >&2
	die "configure or make failed; the whole log is $log"
fi
bindir=$(bindir_of "$prefix")
for b in osu_latency osu_bw osu_bibw osu_mbw_mr; do
	[ -x "$bindir/$b" ] || die "$b was not installed in $bindir (see $log)"
done
echo "osu-build: installed in $bindir"
if [ "$bindir" = "$(bindir_of "$(default_prefix)")" ]; then
	echo "osu-build: bench/run.sh --osu finds them there"
else
	echo "osu-build: for bench/run.sh --osu: export OSU_DIR=$bindir"
fi
