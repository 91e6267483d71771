#!/bin/bash
# build-image.sh - the VM image of the rig: Debian 12 by debootstrap from
# Debian's mirror, with Debian's kernel, rdma-core and the soft-RoCE
# provider, openssh, Open MPI, UCX and the project's build dependencies
# (the list is below: a change to it, to this file or to guest/* makes a
# new image).
#
#   scripts/vm/build-image.sh        build it unless cached; print its dir
#
# The image is cached in $VM_CACHE/image-KEY (KEY hashes the package list
# and the scripts that shape the image), holding:
#   rootfs/      the tree (the project is built in a chroot of it)
#   base.img     an ext4 file system of that tree: the VMs' shared base
#   vmlinuz, initrd.img   the image's kernel, booted directly by QEMU
#   timings      how long debootstrap and the rest took
# Older image-* directories are removed once a new image is complete.
# Needs root (debootstrap, chroot, mount) and debootstrap, e2fsprogs.
. "$(dirname "$0")/common.sh"

# What the image holds: Debian's kernel, the RDMA stack with the soft-RoCE
# provider and its tools, ssh, Open MPI and UCX, and what the project needs
# to build (scripts/install-deps.sh, less the plots and the fuzzer).
VM_PACKAGES=(
	linux-image-amd64 initramfs-tools systemd-sysv udev kmod procps
	iproute2 iputils-ping openssh-server openssh-client sudo
	rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest
	openmpi-bin libopenmpi-dev libucx0 libucx-dev ucx-utils
	build-essential autoconf automake libtool pkg-config
	libibverbs-dev libhwloc-dev
)

[ "$(id -u)" -eq 0 ] || vm_die "build-image.sh needs root (debootstrap, chroot)"
for t in debootstrap mkfs.ext4 chroot flock; do
	command -v "$t" > /dev/null ||
		vm_die "$t not found (scripts/vm/host-deps.sh installs what the rig needs)"
done

dir=$(vm_image_dir)
if [ -f "$dir/ok" ]; then
	vm_say "image cached: $dir"
	echo "$dir"
	exit 0
fi
mkdir -p "$VM_CACHE"
exec 9> "$VM_CACHE/.lock"
flock -w 1800 9 || vm_die "another build holds $VM_CACHE/.lock for 30 min"
if [ -f "$dir/ok" ]; then	# built by the holder of the lock
	echo "$dir"
	exit 0
fi

tmp=$dir.tmp
root=$tmp/rootfs
mounted=()
cleanup() {
	local m
	vm_bounded_kill
	for m in "${mounted[@]}"; do
		umount -l "$m" 2> /dev/null || true
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
in_root=(chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin
	 DEBIAN_FRONTEND=noninteractive LC_ALL=C)

rm -rf "$tmp"
mkdir -p "$tmp"
mirror=$(vm_mirror)
security=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
	/etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v '^[[:space:]]*#' |
	grep -o 'https\?://[^ ]*debian-security[^ ]*' | head -n 1 || true)
security=${security:-http://deb.debian.org/debian-security}

# 1: the minimal system
vm_say "debootstrap $VM_SUITE from $mirror (log: $tmp/debootstrap.log)"
t0=$(date +%s%N)
vm_bounded 1200 debootstrap --variant=minbase --components=main \
	"$VM_SUITE" "$root" "$mirror" > "$tmp/debootstrap.log" 2>&1 || {
	tail -n 30 "$tmp/debootstrap.log" >&2
	vm_die "debootstrap failed (mirror $mirror reachable? VM_MIRROR overrides it)"
}
t_boot=$(vm_elapsed "$t0")
vm_say "debootstrap done in ${t_boot} s"

# 2: the packages, by apt in a chroot, with no service started in it
t0=$(date +%s%N)
cat > "$root/etc/apt/sources.list" <<SRC
deb $mirror $VM_SUITE main
deb $mirror $VM_SUITE-updates main
deb $security $VM_SUITE-security main
SRC
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2> /dev/null || true
mount -t proc proc "$root/proc" && mounted+=("$root/proc")
vm_say "apt-get install ${#VM_PACKAGES[@]} packages in the chroot (log: $tmp/apt.log)"
{ vm_bounded 300 "${in_root[@]}" apt-get update &&
  vm_bounded 1500 "${in_root[@]}" apt-get install -y --no-install-recommends \
	"${VM_PACKAGES[@]}" &&
  "${in_root[@]}" apt-get clean; } > "$tmp/apt.log" 2>&1 || {
	tail -n 30 "$tmp/apt.log" >&2
	vm_die "apt-get in the image's chroot failed"
}

# 3: the rig's configuration (scripts/vm/guest)
g=$vm_top/scripts/vm/guest
install -m 755 "$g/mtl-vm-boot" "$root/usr/local/sbin/mtl-vm-boot"
install -m 644 "$g/mtl-vm-boot.service" "$root/etc/systemd/system/"
ln -sf /etc/systemd/system/mtl-vm-boot.service \
	"$root/etc/systemd/system/multi-user.target.wants/mtl-vm-boot.service"
printf 'UseDNS no\nMaxStartups 64\n' > "$root/etc/ssh/sshd_config.d/mtlvm.conf"
echo "/dev/vda / ext4 defaults 0 0" > "$root/etc/fstab"
"${in_root[@]}" useradd -m -s /bin/bash mpiuser
# nothing periodic or interactive at boot: the VMs live for minutes, and
# under emulation every unit and module costs seconds
for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer \
	 e2scrub_reap.service fstrim.timer man-db.timer getty@tty1.service \
	 getty-static.service; do
	ln -sf /dev/null "$root/etc/systemd/system/$u"
done
# of rdma-core's boot-time modules only the user-space verbs and RDMA CM
# (no IPoIB, iSER, NFS over RDMA)
printf 'ib_uverbs\nrdma_ucm\n' > "$root/etc/rdma/modules/rdma.conf"
: > "$root/etc/rdma/modules/infiniband.conf"
rm -f "$root/usr/sbin/policy-rc.d"
cleanup
mounted=()
kernel=$(ls "$root"/boot/vmlinuz-* | sort -V | tail -n 1)
initrd=$(ls "$root"/boot/initrd.img-* | sort -V | tail -n 1)
[ -f "$kernel" ] && [ -f "$initrd" ] || vm_die "no kernel or initrd in $root/boot"
cp "$kernel" "$tmp/vmlinuz"
cp "$initrd" "$tmp/initrd.img"

# 4: the base disk: an ext4 file system of the tree, no partition table
size=$(( $(du -sm "$root" | cut -f1) + 2048 ))
truncate -s "${size}M" "$tmp/base.img"
mkfs.ext4 -q -F -L mtlvm -d "$root" "$tmp/base.img" > "$tmp/mkfs.log" 2>&1 || {
	cat "$tmp/mkfs.log" >&2
	vm_die "mkfs.ext4 -d failed"
}
t_rest=$(vm_elapsed "$t0")
printf 'debootstrap %s s\npackages and disk %s s\n' "$t_boot" "$t_rest" > "$tmp/timings"
vm_say "packages and base disk done in ${t_rest} s ($(du -sh "$tmp/base.img" | cut -f1) used of ${size} MiB)"

for old in "$VM_CACHE"/image-*; do
	[ "$old" = "$tmp" ] || [ "$old" = "$dir" ] || rm -rf "$old"
done
rm -rf "$dir"
mv "$tmp" "$dir"
touch "$dir/ok"
echo "$dir"
