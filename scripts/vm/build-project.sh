#!/bin/bash
# build-project.sh - build this tree natively in a chroot of the VM image
# and put the result on a disk the VMs mount (faster than a build inside a
# VM under emulation).
#
#   scripts/vm/build-project.sh IMAGE_DIR RUN_DIR [MAKE_TARGET ...]
#
# IMAGE_DIR is what build-image.sh printed.  Makes RUN_DIR/proj.img, an
# ext4 file system with
#   src/       the tree (tracked and untracked files, not ignored ones)
#   build/     its build (configure; make MAKE_TARGETs, default: every
#              MPI program of tests/mtl, tests/mpi, tests/vm; and the
#              component)
#   install/   the component, installed with DESTDIR (the VMs copy it
#              into / at boot: Open MPI's component directory)
#   rig/       scripts/vm/guest-setup.sh, which the VMs run at boot
# The chroot build writes only into RUN_DIR (bind-mounted on /opt/mtl-tm),
# never into the cached image.  Log: RUN_DIR/build.log.
. "$(dirname "$0")/common.sh"

[ $# -ge 2 ] || vm_die "usage: build-project.sh IMAGE_DIR RUN_DIR [MAKE_TARGET ...]"
image=$1
run=$2
shift 2
targets=("$@")
root=$image/rootfs
[ -d "$root/usr/bin" ] || vm_die "no image tree in $root (run build-image.sh)"
[ "$(id -u)" -eq 0 ] || vm_die "build-project.sh needs root (chroot, mount)"

stage=$run/proj
mnt=$root/opt/mtl-tm
mounted=()
cleanup() {
	local i
	vm_bounded_kill
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount "${mounted[$i]}" 2> /dev/null ||
			umount -l "${mounted[$i]}" 2> /dev/null || true
	done
	mounted=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$stage"
mkdir -p "$stage/src" "$stage/build" "$stage/install" "$stage/rig"
# the tree as it is now, uncommitted changes included
if git -C "$vm_top" rev-parse --git-dir > /dev/null 2>&1; then
	(cd "$vm_top" && git ls-files -z -co --exclude-standard |
		tar --null -T - -cf -) | tar -xf - -C "$stage/src"
else
	tar -C "$vm_top" --exclude=./build --exclude=./.git -cf - . |
		tar -xf - -C "$stage/src"
fi
install -m 755 "$vm_top/scripts/vm/guest-setup.sh" "$stage/rig/guest-setup.sh"
if [ ${#targets[@]} -eq 0 ]; then	# every MPI program of the tests
	for f in "$stage"/src/tests/{mtl,mpi,vm}/mpi_*.c; do
		f=${f#"$stage/src/"}
		targets+=("${f%.c}")
	done
fi

mkdir -p "$mnt"
mount --bind "$stage" "$mnt" && mounted+=("$mnt")
mount -t proc proc "$root/proc" && mounted+=("$root/proc")
vm_say "building in a chroot of the image: make ${targets[*]} (log: $run/build.log)"
t0=$(date +%s%N)
if ! vm_bounded 900 chroot "$root" /usr/bin/env -i \
	PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C HOME=/root \
	/bin/bash -euc '
	cd /opt/mtl-tm/src && ./autogen.sh
	cd /opt/mtl-tm/build && ../src/configure
	make -j2 "$@"
	make -j2 mca_mtl_tm.la
	make install-mtltmLTLIBRARIES DESTDIR=/opt/mtl-tm/install' \
	build "${targets[@]}" > "$run/build.log" 2>&1; then
	grep -E 'error|Error' "$run/build.log" | head -n 20 >&2 || true
	tail -n 20 "$run/build.log" >&2
	vm_die "the build in the image's chroot failed (log: $run/build.log)"
fi
cleanup
vm_say "built in $(vm_elapsed "$t0") s"
so=$(find "$stage/install" -name mca_mtl_tm.so | head -n 1)
[ -n "$so" ] || vm_die "make install put no mca_mtl_tm.so under $stage/install"

size=$(( $(du -sm "$stage" | cut -f1) + 128 ))
rm -f "$run/proj.img"
truncate -s "${size}M" "$run/proj.img"
mkfs.ext4 -q -F -L mtlproj -d "$stage" "$run/proj.img" > "$run/mkfs.log" 2>&1 || {
	cat "$run/mkfs.log" >&2
	vm_die "mkfs.ext4 -d of the project disk failed"
}
vm_say "project disk: $run/proj.img (${size} MiB; component ${so#"$stage/install"})"
