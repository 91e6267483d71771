#!/bin/bash
# ompi-prefix.sh - the component against an Open MPI built from source
# into a prefix, as a site builds its own: configure --with-ompi=PREFIX
# --with-ompi-source=DIR, then the MPI suite with that prefix's mpirun.
#
#   scripts/ompi-prefix.sh [WORKDIR]        (default /var/tmp/ompi-prefix)
#
# 1. Fetches Debian's source package of the installed libopenmpi-dev
#    (patches applied), as scripts/ompi-headers.sh does, into WORKDIR/src.
# 2. Builds it out of tree in WORKDIR/build and installs it into
#    WORKDIR/prefix (or $OMPI_PREFIX), WITHOUT --with-devel-headers (so the prefix has no
#    ompi_config.h: the case --with-ompi-source exists for), with what a
#    2-core machine can afford: no Fortran, no OpenSHMEM, no Java, no C++
#    bindings, no UCX/verbs transports; hwloc, libevent and PMIx are the
#    system's (Debian does the same).  One MTL of Open MPI's own (ofi,
#    with libfabric-dev) is needed: without any, Open MPI reserves no MTL
#    endpoint slot and configure refuses it.  Kept for the next run: a
#    finished install (WORKDIR/prefix/bin/mpirun) with that slot is not
#    rebuilt.
# 3. Configures this tree in WORKDIR/component against it and checks that
#    configure took the prefix's mpicc/mpirun, refuses the prefix alone
#    (no internal headers), and refuses a source tree of another release
#    (a copy of the tree whose VERSION says so).
# 4. Runs the MPI suite there (make check of tests/mpi and tests/mtl's MPI
#    jobs) with the prefix's mpirun; a tm configuration that skips fails.
# Prints "ok"/"not ok" per step and last "N passed, M failed".  Root
# (apt-get for the source package); takes long, so it is not part of CI
# (30 min): on 2 cores shared with other jobs (load 10-170), the Open MPI
# build took 77 min (autogen.pl 4, configure 11, make 62, install 4) and
# the suite 9 min (207 checks passed, Debian 12's 4.1.4).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/var/tmp/ompi-prefix}
mkdir -p "$work"
work=$(cd "$work" && pwd)
prefix=${OMPI_PREFIX:-$work/prefix}
passed=0 failed=0
ok() { echo "ok - $*"; passed=$((passed + 1)); }
notok() { echo "not ok - $*"; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }
# step description command...: a step the rest needs
step() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else notok "$what"; finish; fi
}

fetch_source() {
	[ -f "$work/src/VERSION" ] && return 0
	read -r src_pkg src_ver < <(dpkg-query -W \
		-f='${source:Package} ${source:Version}\n' libopenmpi-dev) || return 1
	read -r uri codename < <(apt-get indextargets --format '$(REPO_URI) $(CODENAME)' \
		'Identifier: Packages' 'Component: main' | head -n 1) || return 1
	local d=$work/apt
	mkdir -p "$d/lists/partial"
	echo "deb-src $uri $codename main" >"$d/sources.list"
	local opts=(-o "Dir::Etc::SourceList=$d/sources.list" -o "Dir::Etc::SourceParts=$d/none"
		 -o "Dir::State::Lists=$d/lists" -o "APT::Sandbox::User=root" -q)
	apt-get "${opts[@]}" update >"$d/log" 2>&1 &&
	(cd "$d" && apt-get "${opts[@]}" source --download-only "$src_pkg=$src_ver" >>"$d/log" 2>&1) &&
	rm -rf "$work/src" &&
	dpkg-source -x "$d/${src_pkg}_${src_ver#*:}.dsc" "$work/src" >>"$d/log" 2>&1 ||
		{ tail -n 5 "$d/log"; return 1; }
}

# Debian's debian/rules regenerates the build system (its patches touch
# configure.ac and Makefile.am files), then configures out of tree.
build_ompi() {
	[ -x "$prefix/bin/mpirun" ] &&
		grep -q '^#define OMPI_PROC_ENDPOINT_TAG_MTL' "$work/build/opal/include/opal_config.h" &&
		return 0
	dpkg-query -W -f='${Status}' libfabric-dev 2>/dev/null | grep -q 'ok installed' ||
		apt-get -q install -y --no-install-recommends libfabric-dev </dev/null >/dev/null ||
		return 1
	local s=$SECONDS
	(cd "$work/src/config" && autom4te --language=m4sh opal_get_version.m4sh -o opal_get_version.sh) &&
	(cd "$work/src" && ./autogen.pl --force >"$work/autogen.log" 2>&1) || return 1
	echo "# autogen.pl: $((SECONDS - s)) s"
	rm -rf "$work/build" && mkdir -p "$work/build"
	local pmix
	pmix=$(pkg-config --variable=prefix pmix 2>/dev/null || true)
	(cd "$work/build" && "$work/src/configure" --prefix="$prefix" \
		--disable-mpi-fortran --disable-oshmem --disable-mpi-cxx --disable-mpi-java \
		--without-ucx --without-verbs --with-ofi --without-tm \
		--with-libevent=external --with-hwloc=external \
		${pmix:+--with-pmix=$pmix} >"$work/configure.log" 2>&1) ||
		{ tail -n 20 "$work/configure.log"; return 1; }
	echo "# configure: $((SECONDS - s)) s"
	make -C "$work/build" -j2 >"$work/make.log" 2>&1 || { tail -n 30 "$work/make.log"; return 1; }
	echo "# make: $((SECONDS - s)) s"
	make -C "$work/build" install >"$work/install.log" 2>&1 || { tail -n 20 "$work/install.log"; return 1; }
	echo "# install: $((SECONDS - s)) s"
}

no_internal_headers() {
	! find "$prefix/include" -name ompi_config.h | grep -q .
}

configure_component() { # dir configure-args...
	local d=$1
	shift
	rm -rf "$d" && mkdir -p "$d"
	(cd "$d" && "$top/configure" "$@" >configure.out 2>&1)
}

refuses() { # dir pattern configure-args...: configure fails saying pattern
	local d=$1 pat=$2
	shift 2
	if configure_component "$d" "$@"; then
		echo "configure $* succeeded"
		return 1
	fi
	grep -q -- "$pat" "$d/configure.out" || { tail -n 3 "$d/configure.out"; return 1; }
	grep 'error:' "$d/configure.out" | sed 's/^/    /'
}

other_release() { # a copy of the source tree that says it is another release
	local o=$work/other
	[ -d "$o" ] || cp -r "$work/src" "$o"
	sed -i 's/^release=.*/release=99/' "$o/VERSION"
	# its build dir: the real one's generated headers, pointing at the copy
	rm -rf "$work/other-build" && mkdir -p "$work/other-build/opal/include"
	cp "$work/build/opal/include/opal_config.h" "$work/other-build/opal/include/"
	sed "s|^abs_top_srcdir = .*|abs_top_srcdir = $o|" "$work/build/Makefile" \
		>"$work/other-build/Makefile"
}

mpi_suite() {
	local d=$work/component
	make -C "$d" -j2 >"$d/make.out" 2>&1 || { tail -n 30 "$d/make.out"; return 1; }
	local tests="tests/mpi/mpi-ob1.sh tests/mpi/mpi-tm.sh tests/mpi/mpi-tm-small.sh"
	tests+=" tests/mpi/mpi-tm-random.sh tests/mpi/mpi-tm-notm.sh"
	tests+=" tests/mtl/test_component.sh tests/mtl/test_jobs.sh tests/mtl/test_params.sh"
	local rc=0
	make -C "$d" -j2 check TESTS="$tests" >"$d/check.out" 2>&1 || rc=$?
	grep -E '^(# )?(PASS|FAIL|ERROR|XPASS|# TOTAL|# FAIL|# SKIP)' "$d/check.out" | sed 's/^/    /' | tail -n 20
	# which mpirun ran the jobs, and that tm ran at all
	grep -h '^MPIRUN = ' "$d/Makefile" | sed 's/^/    /'
	if grep -h '# SKIP' "$d"/tests/mpi/mpi-tm*.log >/dev/null 2>&1; then
		echo "    tm configurations skipped:"
		grep -h '# SKIP' "$d"/tests/mpi/mpi-tm*.log | head -n 3
		return 1
	fi
	return $rc
}

start=$SECONDS
step "Debian's source package of the installed Open MPI in $work/src" fetch_source
step "Open MPI built from it into $prefix (without --with-devel-headers)" build_ompi
echo "# Open MPI: $((SECONDS - start)) s so far"
step "the prefix has no internal headers (ompi_config.h)" no_internal_headers
step "configure --with-ompi=PREFIX alone is refused: no internal headers" \
	refuses "$work/c-noheaders" "installed without --with-devel-headers" --with-ompi="$prefix"
other_release
step "configure refuses --with-ompi-source of another release (.99)" \
	refuses "$work/c-other" "is Open MPI .*\.99, but" \
	--with-ompi="$prefix" --with-ompi-source="$work/other-build"
step "configure --with-ompi=PREFIX --with-ompi-source=BUILD" \
	configure_component "$work/component" --with-ompi="$prefix" --with-ompi-source="$work/build"
step "configure took the prefix's mpicc, mpirun and component directory" \
	sh -c "grep -q '^MPIRUN = $prefix/bin/mpirun\$' '$work/component/Makefile' &&
	       grep -q '^MPICC = $prefix/bin/mpicc\$' '$work/component/Makefile' &&
	       grep -q '^OMPI_PKGLIBDIR = $prefix/' '$work/component/Makefile'"
s=$SECONDS
if mpi_suite; then ok "the MPI suite with $prefix/bin/mpirun"; else notok "the MPI suite with $prefix/bin/mpirun"; fi
echo "# the suite: $((SECONDS - s)) s; all: $((SECONDS - start)) s"
finish
