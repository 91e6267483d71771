#!/bin/bash
# guest-setup.sh - the per-run setup of a VM of the rig, run at boot from
# the project disk (mounted on /opt/mtl-tm/rig by the image's
# mtl-vm-boot).  Its settings come from the kernel command line, which
# scripts/vm/start.sh writes:
#   mtlvm.name=vmN       host name (N = 1 or 2)
#   mtlvm.key=BASE64     the run's ssh public key (ssh-ed25519)
# The management NIC (QEMU user networking: ssh from the host) has MAC
# 52:54:00:00:00:0N, the VM-to-VM NIC 52:54:00:00:01:0N with address
# 192.168.77.N/24.  Brings both up, puts the soft-RoCE device rxe0 on the
# VM-to-VM NIC, installs the project's files (the component) from the
# project disk, and prints MTLVM-READY or MTLVM-FAILED on the serial
# console, which the host waits for.
set -euo pipefail

arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^mtlvm\.$1=//p"; }
fail() {
	echo "MTLVM-FAILED: $*" > /dev/ttyS0
	echo "guest-setup: $*" >&2
	exit 1
}
trap 'fail "line $LINENO: $BASH_COMMAND"' ERR
nic_by_mac() {
	local f
	for f in /sys/class/net/*/address; do
		if [ "$(cat "$f")" = "$1" ]; then
			basename "$(dirname "$f")"
			return
		fi
	done
}

name=$(arg name)
key=$(arg key)
[ -n "$name" ] && [ -n "$key" ] || fail "mtlvm.name or mtlvm.key missing from the command line"
n=${name#vm}
hostname "$name"
echo "$name" > /etc/hostname

# the NICs may still be probing: wait for them (20 s)
mgmt='' data=''
for _ in $(seq 40); do
	mgmt=$(nic_by_mac "52:54:00:00:00:0$n")
	data=$(nic_by_mac "52:54:00:00:01:0$n")
	[ -n "$mgmt" ] && [ -n "$data" ] && break
	sleep 0.5
done
[ -n "$mgmt" ] && [ -n "$data" ] || fail "no NIC with the rig's MAC addresses"
ip link set lo up
ip link set "$mgmt" up
ip addr add 10.0.2.15/24 dev "$mgmt"
ip route add default via 10.0.2.2
ip link set "$data" up
ip addr add "192.168.77.$n/24" dev "$data"
echo "$data" > /run/mtlvm-data-nic
printf '127.0.0.1\tlocalhost\n192.168.77.1\tvm1\n192.168.77.2\tvm2\n' > /etc/hosts

modprobe rdma_rxe
rdma link add rxe0 type rxe netdev "$data" || fail "rdma link add rxe0 type rxe netdev $data failed"

# ssh: the run's key for root and mpiuser, in and between the VMs (the
# host copies the private key in after boot); host keys are not checked
cat > /etc/ssh/ssh_config.d/mtlvm.conf <<'CFG'
Host *
	StrictHostKeyChecking no
	UserKnownHostsFile /dev/null
	LogLevel ERROR
	BatchMode yes
	ConnectTimeout 10
CFG
for u in root mpiuser; do
	home=$(getent passwd "$u" | cut -d: -f6)
	mkdir -p "$home/.ssh"
	echo "ssh-ed25519 $key mtl-tm-vm" > "$home/.ssh/authorized_keys"
	chmod 700 "$home/.ssh"
	chmod 600 "$home/.ssh/authorized_keys"
	chown -R "$u:" "$home/.ssh"
done

# Open MPI: each VM has the same 10.0.2.15 on its management NIC, so only
# the VM-to-VM network may be used; openib has no settings for rxe
cat >> /etc/openmpi/openmpi-mca-params.conf <<'CFG'
oob_tcp_if_include = 192.168.77.0/24
btl_tcp_if_include = 192.168.77.0/24
btl = ^openib
CFG
mkdir -p /etc/mtlvm
printf 'vm1 slots=2\nvm2 slots=2\n' > /etc/mtlvm/hostfile

# the project's installed files (make install DESTDIR=.../install)
if [ -d /opt/mtl-tm/install ]; then
	cp -a /opt/mtl-tm/install/. /
fi
state=$(cat /sys/class/infiniband/rxe0/ports/1/state 2> /dev/null || echo none)
echo "MTLVM-READY $name $data rxe0 $state" > /dev/ttyS0
