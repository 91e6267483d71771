# shellcheck shell=bash
# common.sh - sourced by the scripts in scripts/vm/: settings, messages
# and the image key.
#
# Settings (environment):
#   VM_CACHE    where images are kept between runs (default
#               /var/cache/mtl-tm-vm); one directory per image key
#   VM_MIRROR   Debian mirror for debootstrap (default: the first bookworm
#               mirror in this machine's apt sources, else deb.debian.org)
#   VM_ACCEL    tcg (default) or kvm
#   VM_MEM      MiB of memory per VM (default 1536)
#   VM_SMP      vCPUs per VM (default 2)
#   VM_CPU      QEMU CPU model (default qemu64)

set -euo pipefail

vm_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VM_CACHE=${VM_CACHE:-/var/cache/mtl-tm-vm}
VM_ACCEL=${VM_ACCEL:-tcg}
VM_MEM=${VM_MEM:-1536}
VM_SMP=${VM_SMP:-2}
VM_CPU=${VM_CPU:-qemu64}
VM_SUITE=bookworm

vm_say() { echo "vm: $*" >&2; }
vm_die() { echo "vm: ERROR: $*" >&2; exit 1; }

# vm_bounded SECS CMD...: CMD under timeout, which puts it in a process
# group of its own; vm_bounded_kill (in the callers' EXIT traps) ends
# that group, so that nothing outlives a script that is stopped.
vm_bounded_pids=()
vm_bounded() {
	local secs=$1 pid rc=0
	shift
	timeout -k 10 "$secs" "$@" &
	pid=$!
	vm_bounded_pids+=("$pid")
	wait "$pid" || rc=$?
	return $rc
}
vm_bounded_kill() {
	local p
	for p in "${vm_bounded_pids[@]}"; do
		kill -- "-$p" 2> /dev/null || true
	done
	vm_bounded_pids=()
}

# seconds since $1 (date +%s%N), one decimal
vm_elapsed() {
	awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'
}

# The image's key: the files that shape the image, build-image.sh (which
# holds the package list) and guest/*.  A change to any of them builds a
# new image; the project and the per-run setup (guest-setup.sh) are not
# part of the image: they come on the project disk.
vm_image_key() {
	{
		echo "$VM_SUITE"
		cat "$vm_top/scripts/vm/build-image.sh"
		find "$vm_top/scripts/vm/guest" -type f | LC_ALL=C sort |
			xargs cat
	} | sha256sum | cut -c1-16
}

vm_image_dir() { echo "$VM_CACHE/image-$(vm_image_key)"; }

# The bookworm mirror this machine's apt uses (deb822 or one-line format).
vm_mirror() {
	if [ -n "${VM_MIRROR:-}" ]; then
		echo "$VM_MIRROR"
		return
	fi
	local m
	m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
		2>/dev/null | awk '$1 == "deb" && $0 ~ / bookworm / {
			for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {
				print $i; exit } }')
	if [ -z "$m" ]; then
		m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '
			/^URIs:/ { u = $2 }
			/^Suites:/ && / bookworm( |$)/ && u != "" { print u; exit }')
	fi
	echo "${m:-http://deb.debian.org/debian}"
}
