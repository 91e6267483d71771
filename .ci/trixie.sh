#!/bin/bash
# .ci/trixie.sh - the test suite on Debian 13 (trixie: Open MPI 5.0, UCX
# 1.18) from a Debian 12 machine, in a debootstrap'd chroot.  Run by
# .ci/run as root; prints the suite's output, its last line
# "N passed, M failed" (one failure if the chroot could not be made).
#
#   .ci/trixie.sh [command...]
#
# With no command, runs the README's setup and the suite inside a copy of
# this tree:  scripts/install-deps.sh && scripts/run-tests.sh $TRIXIE_TESTS
# (TRIXIE_TESTS: default --quick, the plain build; CI's time budget has no
# room for a second sanitizer build).  With a command, runs that in the
# tree's copy instead (e.g. bash, to look around).
#
# The chroot with the project's packages installed (install-deps.sh run in
# it, which also supplies Open MPI headers Debian 13 lacks) is cached as a
# tarball in $TRIXIE_CACHE (default /var/cache/ompi-mtl-tm), keyed by the
# two scripts that define its contents: the first run debootstraps (about
# 4 min), later ones unpack it (seconds).  Each run unpacks into a fresh
# directory, removed at the end.  /proc, /sys, /dev, /dev/pts and /dev/shm
# are mounted in a mount namespace of the run's own, so they go with it
# whatever happens; every step has a time limit, and processes still
# running in the chroot at the end are killed.
#
# The same machinery makes the other chroots CI needs (.ci/deb.sh):
#   CHROOT_SUITE=bookworm    another Debian release (default trixie)
#   CHROOT_BARE=1            debootstrap's minimal system alone, without the
#                            project's packages (a clean machine: cached as
#                            $TRIXIE_CACHE/bare-SUITE.tar.gz, which making
#                            the full chroot also leaves)
#   CHROOT_IN=DIR            DIR's files are in /srv/in for the command
#   CHROOT_OUT=DIR           what the command leaves in /srv/out is copied
#                            to DIR at the end
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cache=${TRIXIE_CACHE:-/var/cache/ompi-mtl-tm}
tests_args=${TRIXIE_TESTS:---quick}
suite=${CHROOT_SUITE:-trixie}
bare=${CHROOT_BARE:-0}

say() { echo "$suite: $*"; }
fail() { # fail message: one failure in the summary
	echo "$suite: $*"
	echo "0 passed, 1 failed"
	exit 1
}

[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, chroot, mounts)"
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8

if ! command -v debootstrap >/dev/null; then
	say "installing debootstrap"
	timeout 600 apt-get -q update </dev/null >/dev/null 2>&1 || true
	timeout 600 apt-get -q install -y --no-install-recommends debootstrap \
		</dev/null >/dev/null 2>&1 ||
		fail "apt-get install debootstrap failed"
fi

# The Debian mirror this machine's apt uses (CI reaches only those).
mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Identifier: Packages' \
	'Component: main' 2>/dev/null | grep -m1 '/debian/$' || true)
mirror=${mirror:-http://deb.debian.org/debian/}

key=$(cat "$top/scripts/install-deps.sh" "$top/scripts/ompi-headers.sh" |
      sha256sum | cut -c1-16)
tarball=$cache/$suite-$key.tar.gz
bare_tarball=$cache/bare-$suite.tar.gz
[ "$bare" = 1 ] && tarball=$bare_tarball

root=$(mktemp -d /var/tmp/ompi-mtl-tm-$suite.XXXXXX)
# Processes whose root is the chroot: a hung mpirun's daemons may have
# left the time limit's process group.
kill_inside() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] &&
			kill -9 "${p#/proc/}" 2>/dev/null
	done
	return 0
}
cleanup() {
	kill_inside
	sleep 1
	# The mounts lived in the run's namespace; never follow one left
	# behind into the host's /dev or /proc.
	if grep -q " $root/" /proc/self/mounts; then
		say "mounts left under $root: not removing it"
	else
		rm -rf --one-file-system "$root"
	fi
}
trap cleanup EXIT

# in_chroot seconds script: runs bash -c script in the chroot, with the
# pseudo file systems mounted in a private mount namespace.
in_chroot() {
	local t=$1
	shift
	timeout --kill-after=30 "$t" unshare --mount --propagation private \
		bash -c '
		r=$1; shift
		for m in proc sys dev dev/pts dev/shm; do
			mkdir -p "$r/$m"
			mount --bind "/$m" "$r/$m" || exit 125
		done
		exec chroot "$r" /usr/bin/env -i HOME=/root TERM=dumb \
			PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
			LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
			CI="${CI:-}" /bin/bash -c "$1"' in_chroot "$root" "$@"
}

make_tarball() {
	say "debootstrap $suite from $mirror (no cached $(basename "$tarball"))"
	timeout 900 debootstrap --variant=minbase "$suite" "$root" "$mirror" \
		</dev/null >"$root.debootstrap.log" 2>&1 || {
		tail -n 20 "$root.debootstrap.log"
		rm -f "$root.debootstrap.log"
		fail "debootstrap $suite failed"
	}
	rm -f "$root.debootstrap.log"
	mkdir -p "$cache"
	if [ ! -f "$bare_tarball" ]; then
		tar -C "$root" --one-file-system -czf "$bare_tarball.tmp" . &&
			mv "$bare_tarball.tmp" "$bare_tarball" ||
			{ rm -f "$bare_tarball.tmp"; say "could not cache the bare chroot (continuing)"; }
	fi
	[ "$bare" = 1 ] && return 0
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
	mkdir -p "$root/tmp/deps"
	cp "$top/scripts/install-deps.sh" "$top/scripts/ompi-headers.sh" \
		"$root/tmp/deps/"
	say "installing the project's packages in it (scripts/install-deps.sh)"
	in_chroot 1200 '/tmp/deps/install-deps.sh </dev/null && apt-get clean' \
		>"$root.deps.log" 2>&1 || {
		tail -n 20 "$root.deps.log"
		rm -f "$root.deps.log"
		fail "scripts/install-deps.sh in the $suite chroot failed"
	}
	rm -rf "$root.deps.log" "$root/tmp/deps"
	mkdir -p "$cache"
	# other keys' tarballs go; this key's is replaced by a rename, and
	# each run writes its own temporary file: runs side by side neither
	# interleave their writes nor delete what another is unpacking
	find "$cache" -maxdepth 1 -name "$suite-*.tar.gz" ! -name "$(basename "$tarball")" -delete
	tar -C "$root" --one-file-system -czf "$tarball.$$.tmp" . &&
		mv "$tarball.$$.tmp" "$tarball" ||
		{ rm -f "$tarball.$$.tmp"; say "could not cache the chroot (continuing)"; }
}

start=$SECONDS
if [ -f "$tarball" ] && tar -C "$root" -xzf "$tarball" 2>/dev/null; then
	say "chroot from $tarball"
else
	rm -rf --one-file-system "${root:?}"/* 2>/dev/null || true
	make_tarball
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
# The chroot's /: not mktemp's 0700 (which the tarball also recorded), or
# the tests that run as nobody reach nothing.
chmod 755 "$root"
say "chroot ready in $((SECONDS - start)) s"

# This tree, without build products: the suite builds afresh inside, in
# /srv/src (readable by other users: tests run scripts as nobody).
mkdir -p "$root/srv/src"
tar -C "$top" --exclude=./build --exclude=./.git -cf - . |
	tar -C "$root/srv/src" -xf -

if [ -n "${CHROOT_IN:-}" ]; then
	mkdir -p "$root/srv/in"
	cp -r "$CHROOT_IN/." "$root/srv/in/"
fi
if [ $# -gt 0 ]; then
	mkdir -p "$root/srv/out"
	rc=0
	in_chroot "${TRIXIE_TIMEOUT:-3600}" "cd /srv/src && $*" || rc=$?
	if [ -n "${CHROOT_OUT:-}" ]; then
		mkdir -p "$CHROOT_OUT"
		cp -r "$root/srv/out/." "$CHROOT_OUT/"
	fi
	exit $rc
fi
rc=0
# the suite, then a job as a user runs one (.ci/user-job.sh: the README's
# first command, which installs into the chroot's Open MPI)
in_chroot "${TRIXIE_TIMEOUT:-1200}" \
	"cd /srv/src && scripts/install-deps.sh </dev/null && ./autogen.sh </dev/null >/dev/null &&
	 { scripts/run-tests.sh $tests_args </dev/null; .ci/user-job.sh </dev/null; }" 2>&1 |
	tee "$root.log" || rc=$?
last=$(tail -n 1 "$root.log")
sums=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$root.log" |
       awk '{ p += $1; f += $3; n++ } END { print n + 0, p + 0, f + 0 }')
rm -f "$root.log"
case $last in
*" passed, "*" failed") ;;
*)	if [ $rc = 124 ] || [ $rc = 137 ]; then
		fail "the suite in the $suite chroot timed out"
	fi
	fail "the suite in the $suite chroot ended without a summary (status $rc)" ;;
esac
read -r nsum p f <<< "$sums"
# both summaries, or one failure more for the missing one
[ "$nsum" -eq 2 ] || f=$((f + 1))
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
