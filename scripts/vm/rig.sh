#!/bin/bash
# rig.sh - two QEMU VMs of the image on one virtual network, with the
# kernel's soft-RoCE device rxe0 on each.
#
#   scripts/vm/rig.sh up RUN_DIR [MAKE_TARGET ...]
#                                     build image (cached) and project,
#                                     boot vm1 and vm2, wait until ready
#   scripts/vm/rig.sh down RUN_DIR    stop both VMs (always safe)
#   scripts/vm/rig.sh ssh RUN_DIR vmN [-l mpiuser] [CMD ...]
#   scripts/vm/rig.sh link RUN_DIR vmN on|off   plug/pull vmN's VM-to-VM cable
#
# Sourced (tests/vm/run-vm-tests.sh), it only defines rig_up, rig_down,
# rig_ssh and rig_link.
#
# Network: each VM has a management NIC on QEMU user networking (the host
# reaches its sshd through a forwarded port on 127.0.0.1) and a NIC on the
# VM-to-VM link, a QEMU socket netdev on 127.0.0.1 (vm1 listens, vm2
# connects; no bridge, no root needed for it), 192.168.77.1 and .2.  The
# kernel boots directly (-kernel/-initrd of the image, console on the
# first serial port, logged to RUN_DIR/vmN.console.log).  Each VM writes
# to its own qcow2 overlay of the shared base.  ssh keys are made per run.
# Every wait is bounded: VM_BOOT_TIMEOUT (default 300 s) for boot.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

VM_BOOT_TIMEOUT=${VM_BOOT_TIMEOUT:-300}

# a TCP port nobody listens on (127.0.0.1)
rig_free_port() {
	local p i
	for i in $(seq 50); do
		p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 30000 ))
		if ! ss -Htln "sport = :$p" 2> /dev/null | grep -q .; then
			echo "$p"
			return 0
		fi
	done
	vm_die "no free TCP port found in 50 tries"
}

rig_ssh() {
	local run=$1 vm=$2
	shift 2
	ssh -F "$run/ssh_config" "$vm" "$@"
}

# rig_qemu RUN IMAGE N LINKOPT: starts vmN in the background
rig_qemu() {
	local run=$1 image=$2 n=$3 linkopt=$4 accel
	case $VM_ACCEL in
	tcg) accel=tcg,thread=multi ;;
	kvm) accel=kvm ;;
	*) vm_die "VM_ACCEL=$VM_ACCEL: tcg or kvm" ;;
	esac
	qemu-img create -q -f qcow2 -F raw -b "$image/base.img" "$run/vm$n.qcow2"
	# -nodefaults, qemu64: no VGA, CD-ROM, parallel port or CPU feature
	# for the guest to load modules for (each costs seconds under TCG)
	qemu-system-x86_64 -name "vm$n" -machine q35 -accel "$accel" \
		-cpu "$VM_CPU" -smp "$VM_SMP" -m "$VM_MEM" \
		-nodefaults -display none -no-reboot \
		-serial "file:$run/vm$n.console.log" \
		-monitor "tcp:127.0.0.1:$(cat "$run/vm$n.monport"),server=on,wait=off" \
		-kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
		-append "console=ttyS0 root=/dev/vda rw net.ifnames=0 panic=-1 mtlvm.name=vm$n mtlvm.key=$(cut -d' ' -f2 "$run/id_ed25519.pub")" \
		-drive "file=$run/vm$n.qcow2,if=virtio,format=qcow2" \
		-drive "file=$run/proj.img,if=virtio,format=raw,readonly=on" \
		-netdev "user,id=mgmt,net=10.0.2.0/24,hostfwd=tcp:127.0.0.1:$(cat "$run/vm$n.sshport")-:22" \
		-device "virtio-net-pci,netdev=mgmt,mac=52:54:00:00:00:0$n" \
		-netdev "socket,id=link,$linkopt" \
		-device "virtio-net-pci,netdev=link,mac=52:54:00:00:01:0$n" \
		> "$run/vm$n.qemu.log" 2>&1 < /dev/null &
	echo $! > "$run/vm$n.pid"
}

rig_alive() { kill -0 "$(cat "$1/vm$2.pid" 2> /dev/null)" 2> /dev/null; }

rig_down() {
	local run=$1 n pid
	for n in 1 2; do
		pid=$(cat "$run/vm$n.pid" 2> /dev/null) || continue
		kill "$pid" 2> /dev/null || true
		for _ in $(seq 20); do
			kill -0 "$pid" 2> /dev/null || break
			sleep 0.25
		done
		kill -9 "$pid" 2> /dev/null || true
		rm -f "$run/vm$n.pid"
	done
}

# rig_wait_ready RUN N DEADLINE: the VM's setup said MTLVM-READY
rig_wait_ready() {
	local run=$1 n=$2 deadline=$3 log=$1/vm$2.console.log
	while :; do
		if grep -q MTLVM-READY "$log" 2> /dev/null; then
			return 0
		fi
		if grep -q MTLVM-FAILED "$log" 2> /dev/null; then
			vm_say "vm$n: $(grep -m1 -a MTLVM-FAILED "$log")"
			return 1
		fi
		if ! rig_alive "$run" "$n"; then
			vm_say "vm$n: QEMU exited: $(tail -n 5 "$run/vm$n.qemu.log")"
			return 1
		fi
		if [ "$(date +%s)" -ge "$deadline" ]; then
			vm_say "vm$n: not ready after ${VM_BOOT_TIMEOUT} s"
			return 1
		fi
		sleep 1
	done
}

rig_boot() {
	local run=$1 image=$2 n port t0
	[ -f "$run/proj.img" ] || vm_die "no $run/proj.img (build-project.sh makes it)"
	command -v qemu-system-x86_64 > /dev/null ||
		vm_die "qemu-system-x86_64 not found (scripts/vm/host-deps.sh installs it)"
	rm -f "$run"/id_ed25519*
	ssh-keygen -q -t ed25519 -N '' -C mtl-tm-vm -f "$run/id_ed25519"
	: > "$run/ssh_config"
	for n in 1 2; do
		rig_free_port > "$run/vm$n.sshport"
		rig_free_port > "$run/vm$n.monport"
		rm -f "$run/vm$n.console.log"
		cat >> "$run/ssh_config" <<CFG
Host vm$n
	HostName 127.0.0.1
	Port $(cat "$run/vm$n.sshport")
	User root
	IdentityFile $run/id_ed25519
	IdentitiesOnly yes
	StrictHostKeyChecking no
	UserKnownHostsFile /dev/null
	LogLevel ERROR
	BatchMode yes
	ConnectTimeout 10
	ServerAliveInterval 5
	ServerAliveCountMax 6
CFG
	done
	port=$(rig_free_port)
	echo "$port" > "$run/linkport"
	t0=$(date +%s%N)
	vm_say "booting vm1 and vm2 (accel $VM_ACCEL, ${VM_SMP} vCPUs, ${VM_MEM} MiB each; consoles in $run)"
	rig_qemu "$run" "$image" 1 "listen=127.0.0.1:$port"
	# vm2 connects at start-up: vm1 must be listening first
	for _ in $(seq 40); do
		ss -Htln "sport = :$port" | grep -q . && break
		rig_alive "$run" 1 || break
		sleep 0.25
	done
	ss -Htln "sport = :$port" | grep -q . ||
		vm_die "vm1's QEMU does not listen on 127.0.0.1:$port: $(cat "$run/vm1.qemu.log")"
	rig_qemu "$run" "$image" 2 "connect=127.0.0.1:$port"
	local deadline=$(( $(date +%s) + VM_BOOT_TIMEOUT ))
	for n in 1 2; do
		rig_wait_ready "$run" "$n" "$deadline" || {
			tail -n 30 "$run/vm$n.console.log" | sed "s/^/vm$n| /" >&2
			return 1
		}
	done
	for n in 1 2; do
		until rig_ssh "$run" "vm$n" true 2> /dev/null; do
			if [ "$(date +%s)" -ge "$deadline" ]; then
				vm_say "vm$n: no ssh after ${VM_BOOT_TIMEOUT} s"
				return 1
			fi
			sleep 1
		done
		# the run's key, for ssh between the VMs (mpirun), root and mpiuser
		rig_ssh "$run" "vm$n" 'umask 077
			k=$(cat)
			for h in /root /home/mpiuser; do
				printf "%s\n" "$k" > $h/.ssh/id_ed25519
			done
			chown mpiuser: /home/mpiuser/.ssh/id_ed25519' < "$run/id_ed25519"
	done
	echo "$(vm_elapsed "$t0")" > "$run/boot-seconds"
	vm_say "vm1 and vm2 up in $(cat "$run/boot-seconds") s: $(grep -ah -o 'MTLVM-READY.*' "$run"/vm[12].console.log | tr '\n' ';' | tr -d '\r')"
}

rig_up() {
	local run=$1 image
	mkdir -p "$run"
	image=$("$vm_top/scripts/vm/build-image.sh")
	"$vm_top/scripts/vm/build-project.sh" "$image" "$run" "${@:2}"
	rig_boot "$run" "$image"
}

# rig_link RUN vmN on|off: QEMU's set_link on the VM-to-VM NIC (the guest
# sees its carrier go)
rig_link() {
	local run=$1 vm=$2 state=$3 port fd
	port=$(cat "$run/$vm.monport")
	exec {fd}<> "/dev/tcp/127.0.0.1/$port" || return 1
	printf 'set_link link %s\n' "$state" >&"$fd"
	# read the monitor's answer (its prompt twice) for at most 2 s
	while IFS= read -r -t 2 _ <&"$fd"; do :; done
	exec {fd}>&-
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	cmd=${1:-}
	run=${2:-}
	[ -n "$cmd" ] && [ -n "$run" ] || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
	case $cmd in
	up)
		run=$(mkdir -p "$run" && cd "$run" && pwd)
		trap 'rig_down "$run"' EXIT
		rig_up "$run" "${@:3}" || vm_die "the rig did not come up"
		trap - EXIT ;;
	down) rig_down "$run" ;;
	ssh) rig_ssh "$run" "${@:3}" ;;
	link) rig_link "$run" "$3" "$4" ;;
	*) vm_die "unknown command $cmd" ;;
	esac
fi
