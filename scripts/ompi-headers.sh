#!/bin/bash
# ompi-headers.sh - supply the Open MPI devel headers a distribution left
# out of its package, from the same distribution's source package.
#
#   scripts/ompi-headers.sh [--check]
#
# Debian 13's libopenmpi-dev (5.0.7) does not install
# opal/mca/threads/pthreads/threads_pthreads_*.h although opal_config.h
# names them, so no out-of-tree component compiles against it.  This script
# preprocesses the headers the component includes; for each file reported
# missing it copies that file from Debian's source package of the installed
# version (patches applied) into
#
#     /usr/local/include/ompi-mtl-tm/openmpi-<upstream version>/
#
# where configure looks for it (--with-ompi-extra-headers).  Nothing is
# downloaded when the installed headers are complete (Debian 12's 4.1.4).
# The source package is fetched through a private deb-src list for the
# release's own mirror, so the system's apt configuration is not changed.
#
# --check: only report whether headers are missing (exit 1 if so).
# Run by scripts/install-deps.sh, as root (or through sudo, as that does).
set -euo pipefail

check_only=0
[ "${1:-}" = --check ] && check_only=1

say() { echo "ompi-headers: $*"; }
die() { echo "ompi-headers: $*" >&2; exit 1; }

command -v pkg-config >/dev/null || die "pkg-config not found: run scripts/install-deps.sh"
pkg-config --exists ompi-c || die "Open MPI's ompi-c.pc not found: apt-get install libopenmpi-dev"
cc=${CC:-cc}

flags=$(pkg-config --cflags ompi-c)
pkg-config --exists pmix && flags="$flags $(pkg-config --cflags pmix)"

# The version as configure computes it, from ompi_config.h.
# shellcheck disable=SC2086 # flags are words
ompi_version=$(printf '#include "ompi_config.h"\nV OMPI_MAJOR_VERSION.OMPI_MINOR_VERSION.OMPI_RELEASE_VERSION\n' |
	$cc -E -P -x c - $flags 2>/dev/null | sed -n 's/^V //p' | tr -d ' ')
[ -n "$ompi_version" ] || die "cannot read OMPI_MAJOR_VERSION from ompi_config.h: apt-get install libopenmpi-dev"
dest=/usr/local/include/ompi-mtl-tm/openmpi-$ompi_version

# The Open MPI headers mtl/ includes, of either major version.
probe_src() {
	cat <<'EOF'
#include "ompi_config.h"
#include "ompi/mca/mtl/mtl.h"
#include "ompi/mca/mtl/base/base.h"
#include "ompi/communicator/communicator.h"
#include "ompi/request/request.h"
#if OMPI_MAJOR_VERSION >= 5
#include "opal/mca/threads/mutex.h"
#include "opal/mca/threads/tsd.h"
#include "opal/mca/pmix/pmix-internal.h"
#include "ompi/runtime/ompi_rte.h"
#endif
EOF
}

# Prints the first header the preprocessor cannot find ("" if none);
# fails if preprocessing fails for another reason.
first_missing() {
	local out
	# shellcheck disable=SC2086 # flags are words
	if out=$(probe_src | $cc -E -o /dev/null -x c - $flags \
			-isystem "$dest" 2>&1); then
		return 0
	fi
	local miss
	miss=$(printf '%s\n' "$out" |
	       sed -n 's/.*fatal error: \([^:]*\): No such file or directory.*/\1/p' |
	       head -n 1)
	if [ -z "$miss" ]; then
		printf '%s\n' "$out" | tail -n 5 >&2
		die "Open MPI's headers do not preprocess (not a missing file; see above)"
	fi
	echo "$miss"
}

miss=$(first_missing)
if [ -z "$miss" ]; then
	say "Open MPI $ompi_version headers are complete"
	exit 0
fi
if [ $check_only = 1 ]; then
	say "Open MPI $ompi_version headers lack $miss"
	exit 1
fi

# The source package of the installed libopenmpi-dev, exactly.
read -r src_pkg src_ver < <(dpkg-query -W \
	-f='${source:Package} ${source:Version}\n' libopenmpi-dev 2>/dev/null) ||
	die "libopenmpi-dev is not installed as a Debian package: pass configure --with-ompi-extra-headers=DIR instead"
say "Open MPI $ompi_version headers lack $miss: fetching Debian's source package $src_pkg $src_ver"

for t in apt-get dpkg-source; do
	command -v $t >/dev/null || die "$t not found (dpkg-dev: apt-get install build-essential)"
done
# The mirror and release that serve this system's packages.
read -r uri codename < <(apt-get indextargets --format '$(REPO_URI) $(CODENAME)' \
	'Identifier: Packages' 'Component: main' 2>/dev/null | head -n 1) ||
	die "no Debian 'main' repository in apt's configuration: cannot fetch $src_pkg"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial"
echo "deb-src $uri $codename main" > "$work/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/sources.list"
	  -o "Dir::Etc::SourceParts=$work/none"
	  -o "Dir::State::Lists=$work/lists"
	  -o "APT::Sandbox::User=root" -q)
timeout 600 apt-get "${apt_opts[@]}" update </dev/null >"$work/log" 2>&1 ||
	{ tail -n 5 "$work/log" >&2; die "apt-get update of $uri $codename (deb-src) failed"; }
(cd "$work" && timeout 600 apt-get "${apt_opts[@]}" source --download-only \
	"$src_pkg=$src_ver" </dev/null >>"$work/log" 2>&1) ||
	{ tail -n 5 "$work/log" >&2; die "apt-get source $src_pkg=$src_ver failed"; }
(cd "$work" && dpkg-source -x "${src_pkg}_${src_ver#*:}.dsc" src \
	>>"$work/log" 2>&1) ||
	{ tail -n 5 "$work/log" >&2; die "dpkg-source -x failed"; }

# Copy what is missing, one file at a time, until the headers preprocess.
n=0
while [ -n "$miss" ]; do
	[ -f "$work/src/$miss" ] ||
		die "$miss is missing and not in $src_pkg $src_ver either"
	install -D -m 644 "$work/src/$miss" "$dest/$miss"
	say "installed $dest/$miss"
	n=$((n + 1))
	[ $n -lt 50 ] || die "more than 50 headers missing: giving up"
	miss=$(first_missing)
done
echo "$src_pkg $src_ver" > "$dest/SOURCE"
say "Open MPI $ompi_version headers are complete with $n from $src_pkg $src_ver"
