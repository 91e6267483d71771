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
# Open MPI 5 on Debian 13: PMIx's pmdl/ompi plugin gives every process
# mpirun starts OMPI_MCA_mca_base_component_path = PMIx's own plugin
# directory (the mca_base_component_path line of PMIx's
# pmix-mca-params.conf, taken for an Open MPI setting because its name
# starts with "mca"; open-mpi/ompi issue 13314 is one face of it), so
# Open MPI never looks in its own directory for this component.  Open
# MPI's override file is the one place a setting beats the environment:
# a line there names this directory, written only when mpirun is seen
# doing this, and taken out again by --uninstall.
mark="# ompi-mtl-tm (scripts/install-component.sh): PMIx hands processes its own component path"
override=
if command -v ompi_info > /dev/null; then
	override=$(ompi_info --parsable --path sysconfdir |
		   sed -n 's/^path:sysconfdir://p')/openmpi-mca-params-override.conf
fi
override_drop() {
	[ -n "$override" ] && [ -f "$override" ] && grep -qF "$mark" "$override" || return 0
	awk -v m="$mark" 'skip { skip = 0; next } $0 == m { skip = 1; next } { print }' \
		"$override" > "$override.new" && mv "$override.new" "$override"
	[ -s "$override" ] || rm -f "$override"
}
# What mpirun hands a process for the component path (empty: nothing).
forwarded_path() {
	local root=()
	[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
	timeout 60 mpirun "${root[@]}" -np 1 env 2> /dev/null </dev/null |
		sed -n 's/^OMPI_MCA_mca_base_component_path=//p' | head -n 1 || true
}
if [ "${1:-}" = --uninstall ]; then
	override_drop
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
override_drop
fwd=$(command -v mpirun > /dev/null && forwarded_path)
case ":$fwd:" in
::|*":$destdir:"*) ;;
*)	if [ -z "$override" ] || ! { echo "$mark"; echo "mca_base_component_path = $destdir"; } >> "$override"; then
		echo "install-component: mpirun sets the component path to $fwd, which" \
		     "misses $destdir, and Open MPI's override file cannot be written" >&2
		exit 1
	fi
	echo "install-component: mpirun hands processes the component path $fwd" \
	     "(PMIx's): $override now names $destdir, which no environment" \
	     "variable overrides" ;;
esac
if command -v ompi_info > /dev/null; then
	ompi_info | grep 'MCA mtl: tm' || {
		echo "install-component: ompi_info does not list mtl tm" >&2
		exit 1
	}
fi
