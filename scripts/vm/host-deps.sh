#!/bin/bash
# host-deps.sh - install the Debian 12 packages the VM rig needs on the
# host: QEMU (x86 system emulator and qemu-img), debootstrap, e2fsprogs
# (mkfs.ext4 -d), the ssh client, iproute2 (ss).  Idempotent; runs as root
# (the rig needs root anyway: debootstrap, chroot, mount).
set -euo pipefail

PACKAGES=(qemu-system-x86 qemu-utils debootstrap e2fsprogs openssh-client
	  iproute2)
missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2> /dev/null |
		grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "host-deps: all ${#PACKAGES[@]} packages are installed"
	exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "host-deps: not root; install as root: ${missing[*]}" >&2; exit 1; }
echo "host-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# apt-get update only when a package is not known yet (CI ran it already)
if ! apt-cache policy "${missing[@]}" 2> /dev/null | grep -q 'Candidate: [0-9]'; then
	apt-get update < /dev/null
fi
apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends \
	"${missing[@]}" < /dev/null
