#!/bin/bash
# test_imb_build.sh - scripts/imb-build.sh on stand-in IMB trees (TAP):
# what it installs, and that bad input (no source, not IMB, too old, not a
# tarball, a build that fails, a PREFIX inside the project) gets a clear
# error and leaves the last build as it was.  The stand-in's Makefile
# "builds" a shell script, so no IMB sources or compile are needed; the
# script still asks for mpicc and mpicxx on PATH (skipped without them).
set -u
srcdir=$(cd "${top_srcdir:-$(dirname "$0")/../..}" && pwd)
script=$srcdir/scripts/imb-build.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! command -v mpicc >/dev/null || ! command -v mpicxx >/dev/null; then
	echo "1..0 # SKIP no mpicc/mpicxx"
	exit 0
fi
echo "1..11"
n=0
fails=0
check() { # check "name" cond-command...
	local name=$1
	shift
	n=$((n + 1))
	if "$@"; then echo "ok $n - $name"; else
		fails=$((fails + 1)); echo "not ok $n - $name"; fi
}

# fake_tree DIR VERSION [fail]: the files imb-build.sh looks at
fake_tree() {
	mkdir -p "$1/src_cpp" "$1/src_c"
	: >"$1/src_c/IMB_pingpong.c"
	echo "const char *program_name = \"Intel(R) MPI Benchmarks $2\";" \
		>"$1/src_cpp/imb.cpp"
	if [ "${3:-}" = fail ]; then
		printf 'all:\n\t@echo "stand-in compile error" >&2; exit 1\n' \
			>"$1/src_cpp/Makefile"
	else
		printf 'all:\n\tprintf "#!/bin/sh\\necho %s\\n" >IMB-MPI1\n\tchmod +x IMB-MPI1\n' \
			"$2" >"$1/src_cpp/Makefile"
	fi
}

prefix=$tmp/prefix
run() { # run ARGS...: the script's output in $out, its status in $rc
	out=$(bash "$script" "$@" 2>&1)
	rc=$?
}
says() { grep -q -- "$1" <<<"$out"; }
failed_saying() { [ "$rc" = 1 ] && says "$1"; }
# the 2021.11 stand-in is still installed, and nothing is left staged
kept() {
	[ "$("$prefix/bin/IMB-MPI1")" = 2021.11 ] &&
		[ "$(cat "$prefix/VERSION")" = 2021.11 ] &&
		! ls -d "$prefix"/new-src.* >/dev/null 2>&1
}

run
check "no SRC: usage, exit 2" [ "$rc" = 2 ]
run "$tmp/nothing" "$prefix"
check "a missing SRC is named" failed_saying "no such file or directory: .*nothing"
fake_tree "$tmp/good" 2021.11
inside=$srcdir/build/imb-build-test-prefix
run "$tmp/good" "$inside"
check "a PREFIX inside the project tree is refused, nothing made there" \
	failed_saying "inside the project tree"
[ -e "$inside" ] && { echo "# $inside was created"; fails=$((fails + 1)); }
run "$tmp/good" "$prefix"
check "a source tree: installed (exit $rc), bin/IMB-MPI1 is the program built, VERSION 2021.11, nothing staged left" kept
check "... its sources kept in PREFIX/src" [ -f "$prefix/src/src_cpp/imb.cpp" ]
mkdir -p "$tmp/other"
echo hello >"$tmp/other/README"
run "$tmp/other" "$prefix"
check "a directory that is not IMB is refused" \
	failed_saying "does not look like the Intel MPI Benchmarks"
echo "not a tarball" >"$tmp/junk.tar.gz"
run "$tmp/junk.tar.gz" "$prefix"
check "a file tar cannot unpack is refused" \
	failed_saying "neither a directory nor a tarball"
fake_tree "$tmp/old" 2018
run "$tmp/old" "$prefix"
check "IMB 2018 is refused by its version" failed_saying "version '2018'; 2021.x or later"
fake_tree "$tmp/broken" 2021.12 fail
run "$tmp/broken" "$prefix"
check "a build that fails says so, with the compiler's words" \
	failed_saying "stand-in compile error"
check "after the four refusals the last build is still there" kept
tar -czf "$tmp/good.tar.gz" -C "$tmp" good
run "$tmp/good.tar.gz" "$prefix"
tarball_ok() { [ "$rc" = 0 ] && kept; }
check "a tarball: installed" tarball_ok
exit $((fails > 0))
