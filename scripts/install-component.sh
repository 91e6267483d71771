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

if [ "${1:-}" = --uninstall ]; then
	exec make -C "$dir" --no-print-directory uninstall-mtltmLTLIBRARIES
fi
make -C "$dir" -j2 --no-print-directory mca_mtl_tm.la
# libtool's install talk (ldconfig advice) goes to a log unless it fails
make -C "$dir" --no-print-directory install-mtltmLTLIBRARIES \
	> "$dir/install-component.log" 2>&1 || {
	cat "$dir/install-component.log" >&2
	echo "install-component: install failed (write access to Open MPI's component directory?)" >&2
	exit 1
}
destdir=$(sed -n 's/^OMPI_PKGLIBDIR = //p' "$dir/Makefile")
echo "install-component: installed $destdir/mca_mtl_tm.so"
if command -v ompi_info > /dev/null; then
	ompi_info | grep 'MCA mtl: tm' || {
		echo "install-component: ompi_info does not list mtl tm" >&2
		exit 1
	}
fi
