#!/bin/bash
# install-component.sh - build mca_mtl_tm.so (in build/normal) and install
# it where Open MPI looks for components, so that
#   mpirun --mca pml cm --mca mtl tm ...
# finds it.  Needs write access to that directory (root on Debian).
#
#   scripts/install-component.sh            build and install
#   scripts/install-component.sh --uninstall
#
# The directory is Open MPI's pkglibdir ("ompi_info --path pkglibdir",
# /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3 on Debian 12), found by
# configure; configure --with-ompi-pkglibdir=DIR overrides it.  Only that
# one file is installed (the project's libraries are linked into it; the
# manual pages come with a full "make install").
# (A private directory would also need mca_base_component_path to keep
# SYS_DEFAULT and to name only directories that exist, or mpirun breaks.)
set -euo pipefail

. "$(dirname "$0")/build-dir.sh"
ensure_build_dir install-component

destdir=$(sed -n 's/^OMPI_PKGLIBDIR = //p' "$dir/Makefile")
# Say why before trying: the one file goes into Open MPI's own directory.
if [ ! -w "$destdir" ]; then
	echo "install-component: cannot write to Open MPI's component directory $destdir" \
	     "(owned by $(stat -c %U "$destdir" 2>/dev/null || echo '?')): run it as root" >&2
	exit 1
fi
if [ "${1:-}" = --uninstall ]; then
	exec make -C "$dir" --no-print-directory uninstall-mtltmLTLIBRARIES
fi
if ! make -C "$dir" -j2 --no-print-directory mca_mtl_tm.la; then
	echo "install-component: building mca_mtl_tm.la in $dir failed" \
	     "(is $dir writable by $(id -un)? it belongs to" \
	     "$(stat -c %U "$dir" 2>/dev/null || echo '?'))" >&2
	exit 1
fi
# libtool's install talk (ldconfig advice) is shown only if it fails: this
# run's, never an earlier run's
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! make -C "$dir" --no-print-directory install-mtltmLTLIBRARIES \
	> "$log" 2>&1; then
	cat "$log" >&2
	echo "install-component: install into $destdir failed" >&2
	exit 1
fi
echo "install-component: installed $destdir/mca_mtl_tm.so"
if command -v ompi_info > /dev/null; then
	ompi_info | grep 'MCA mtl: tm' || {
		echo "install-component: ompi_info does not list mtl tm" >&2
		exit 1
	}
fi
