#!/bin/bash
# .ci/deb.sh - the Debian package (debian/), from build to removal, on this
# machine's release and, from Debian 12, on Debian 13 too.  Run as root;
# prints one "ok" / "not ok" line per check, each release's in a block,
# and last "N passed, M failed".
#
# For each release, side by side:
#   build    dpkg-buildpackage -us -uc -b in a copy of the tree, on this
#            machine (its release) or in the Debian 13 chroot that
#            .ci/trixie.sh makes and caches; lintian on the result must
#            report no error and no warning; a small MPI program
#            (tests/mtl/mpi_ring.c) is compiled beside it
#   try      in a clean chroot of the same release (debootstrap's minimal
#            system, cached by .ci/trixie.sh as bare-SUITE.tar.gz): apt
#            installs the .deb and resolves its dependencies from the
#            mirror; ompi_info lists mtl tm; 2 ranks run the program over
#            it (mpirun --mca pml cm --mca mtl tm); apt purges it with
#            what it brought; no file is left and the installed packages
#            are those from before
#
#   .ci/deb.sh                       all of the above
#   .ci/deb.sh --in build|try DIR    one part, where it runs (the chroots
#                                    call it so); DIR: where the .deb goes
#                                    or comes from
# CI_DEB_TRIXIE=0 leaves Debian 13 out on Debian 12; DEB_RELEASES="trixie"
# (a list of suites) does only those.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8

ok() { echo "ok - $*"; }
notok() { echo "not ok - $*"; }
# check description command...: one line for the command's verdict
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else notok "$what"; return 1; fi
}

# ---- build: in the release that builds the package ------------------------

install_build_deps() {
	apt-get -q update </dev/null >/dev/null 2>&1 || true
	apt-get -q install -y --no-install-recommends lintian </dev/null &&
	apt-get -q build-dep -y "$top" </dev/null
}

build_deb() { # out: the .deb and its .changes into out
	local src
	src=$(mktemp -d)/ompi-mtl-tm
	mkdir -p "$src"
	tar -C "$top" --exclude=./build --exclude=./.git -cf - . | tar -C "$src" -xf -
	(cd "$src" && DEB_BUILD_OPTIONS=parallel=2 dpkg-buildpackage -us -uc -b) \
		</dev/null >"$1/build.log" 2>&1 || { tail -n 30 "$1/build.log"; return 1; }
	cp "$src"/../ompi-mtl-tm_*.deb "$src"/../ompi-mtl-tm_*.changes \
		"$src"/../*.buildinfo "$1/"
	# lintian checks the binary packages the .changes names
	cp "$src"/../ompi-mtl-tm-dbgsym_*.deb "$1/" 2>/dev/null || true
}

run_lintian() { # out
	local log=$1/lintian.log
	lintian --fail-on error,warning "$1"/ompi-mtl-tm_*.changes >"$log" 2>&1 || {
		cat "$log"
		return 1
	}
	grep -v 'running with root privileges' "$log" || true
}

in_build() {
	local out=$1 rel
	rel=$(. /etc/os-release && echo "$VERSION_CODENAME")
	mkdir -p "$out"
	if install_build_deps >"$out/deps.log" 2>&1; then
		ok "$rel: build dependencies install (apt-get build-dep)"
	else
		tail -n 20 "$out/deps.log"
		notok "$rel: build dependencies install (apt-get build-dep)"
		return 1
	fi
	check "$rel: dpkg-buildpackage -us -uc -b" build_deb "$out" || return 1
	dpkg-deb -I "$out"/ompi-mtl-tm_*_*.deb | sed -n 's/^ Depends:/    Depends:/p'
	check "$rel: lintian: no error, no warning" run_lintian "$out" || true
	check "$rel: mpicc builds the job's program" \
		mpicc -O2 -o "$out/mpi_ring" "$top/tests/mtl/mpi_ring.c"
}

# ---- try: in a clean chroot of the same release -----------------------------

# What is installed: the files under the system's directories (not
# logs, caches, apt's and dpkg's own records, nor the backups such as
# /etc/gshadow- that groupadd leaves when a dependency adds a group), and
# the packages.
snapshot() { # file
	find /usr /etc /opt /var/lib -xdev \
		\( -path /var/lib/apt -o -path /var/lib/dpkg -o -path /etc/ld.so.cache \
		   -o -path /var/lib/systemd/deb-systemd-helper-enabled \) -prune \
		-o \! -path '/etc/*-' -print | sort >"$1.files"
	dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" { print $2 }' |
		sort >"$1.pkgs"
}

logged() { # log command...: its output to log, shown (the end) if it fails
	local log=$1
	shift
	"$@" </dev/null >"$log" 2>&1 || { tail -n 20 "$log"; return 1; }
}

mpi_job() { # in
	local log
	log=$(mktemp)
	if timeout --kill-after=10 120 mpirun --allow-run-as-root -np 2 \
			--mca pml cm --mca mtl tm "$1/mpi_ring" >"$log" 2>&1; then
		tail -n 3 "$log" | sed 's/^/    /'
		return 0
	fi
	tail -n 30 "$log"
	return 1
}

nothing_left() { # before after
	local rc=0
	if ! diff "$1.pkgs" "$2.pkgs" >/dev/null; then
		echo "packages not as before (< before, > after):"
		diff "$1.pkgs" "$2.pkgs" | head -n 20
		rc=1
	fi
	if ! diff "$1.files" "$2.files" >/dev/null; then
		echo "files not as before (< before, > after):"
		diff "$1.files" "$2.files" | head -n 20
		rc=1
	fi
	return $rc
}

in_try() {
	local in=$1 rel deb s
	rel=$(. /etc/os-release && echo "$VERSION_CODENAME")
	deb=$(ls "$in"/ompi-mtl-tm_*_*.deb)
	s=$(mktemp -d)
	apt-get -q update </dev/null >/dev/null 2>&1 || true
	snapshot "$s/before"
	# openmpi-bin (mpirun) is only recommended: named here, purged below
	check "$rel: apt-get install $(basename "$deb") resolves its dependencies" \
		logged "$s/install.log" apt-get -q install -y --no-install-recommends "$deb" openmpi-bin ||
		return 1
	local dir
	dir=$(ompi_info --parsable --path pkglibdir | sed -n 's/^path:pkglibdir://p')
	check "$rel: mca_mtl_tm.so is in Open MPI's component directory $dir" \
		test -f "$dir/mca_mtl_tm.so"
	check "$rel: ompi_info lists mtl tm" \
		sh -c 'ompi_info | grep -q "MCA mtl: tm"'
	check "$rel: man -w finds mtl_tm(7) and softhca(7)" \
		test -f /usr/share/man/man7/mtl_tm.7.gz -a -f /usr/share/man/man7/softhca.7.gz
	check "$rel: mpirun -np 2 --mca pml cm --mca mtl tm mpi_ring" mpi_job "$in"
	check "$rel: apt-get purge ompi-mtl-tm openmpi-bin && apt-get autoremove --purge" \
		logged "$s/purge.log" sh -c 'apt-get -q purge -y ompi-mtl-tm openmpi-bin &&
					      apt-get -q autoremove --purge -y' || true
	# autoremove keeps a package that satisfies an installed one's
	# alternative (Debian 13: adduser, which libibverbs1 brought, for
	# apt's "base-passwd | adduser"): what the install brought and is
	# still there is named and purged (never the two purged above), so
	# the check below sees this package's leftovers alone
	local kept
	kept=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" { print $2 }' |
	       sort | comm -13 "$s/before.pkgs" - | grep -vx -e ompi-mtl-tm -e openmpi-bin || true)
	if [ -n "$kept" ]; then
		echo "    kept by autoremove, purged: $(tr "\n" " " <<<"$kept")"
		# shellcheck disable=SC2086 # package names are words
		logged "$s/purge-kept.log" apt-get -q purge -y $kept || true
	fi
	snapshot "$s/after"
	check "$rel: nothing is left (files and packages as before the install)" \
		nothing_left "$s/before" "$s/after"
	rm -rf "$s"
}

if [ "${1:-}" = --in ]; then
	case ${2:-} in
	build) in_build "$3" ;;
	try) in_try "$3" ;;
	*) echo "usage: $0 [--in build|try DIR]" >&2; exit 2 ;;
	esac
	exit
fi

# ---- the whole step ---------------------------------------------------------

[ "$(id -u)" -eq 0 ] || { echo "deb: needs root"; echo "0 passed, 1 failed"; exit 1; }
host=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
work=$(mktemp -d /var/tmp/ompi-mtl-tm-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT

# part log what command...: runs a part, its lines to log; a part that
# failed without saying so counts as one failure
part() {
	local what=$1 log=$2 rc=0
	shift 2
	"$@" >>"$log" 2>&1 </dev/null || rc=$?
	if [ $rc -ne 0 ] && ! grep -q '^not ok' "$log"; then
		tail -n 20 "$log" | sed 's/^/    /' >"$log.tail"
		cat "$log.tail" >>"$log"
		echo "not ok - $what (status $rc)" >>"$log"
	fi
	return $rc
}

release() { # suite: build, then try, logging to $work/suite.log
	local r=$1 out=$work/$1 log=$work/$1.log
	local start=$SECONDS
	mkdir -p "$out"
	if [ "$r" = "$host" ]; then
		part "$r: build" "$log" "$0" --in build "$out" || return 0
	else
		CHROOT_SUITE=$r CHROOT_OUT=$out TRIXIE_TIMEOUT=1200 part "$r: build" "$log" \
			"$top/.ci/trixie.sh" ".ci/deb.sh --in build /srv/out" || return 0
	fi
	CHROOT_SUITE=$r CHROOT_BARE=1 CHROOT_IN=$out TRIXIE_TIMEOUT=900 part "$r: try" "$log" \
		"$top/.ci/trixie.sh" ".ci/deb.sh --in try /srv/in" || true
	echo "# $r: $((SECONDS - start)) s" >>"$log"
}

releases=("$host")
[ "$host" = bookworm ] && [ "${CI_DEB_TRIXIE:-1}" != 0 ] && releases+=(trixie)
# shellcheck disable=SC2206 # a list of words
[ -n "${DEB_RELEASES:-}" ] && releases=($DEB_RELEASES)
for r in "${releases[@]}"; do
	release "$r" &
done
wait
passed=0 failed=0
for r in "${releases[@]}"; do
	echo "deb: $r"
	cat "$work/$r.log"
	passed=$((passed + $(grep -c '^ok' "$work/$r.log" || true)))
	failed=$((failed + $(grep -c '^not ok' "$work/$r.log" || true)))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
