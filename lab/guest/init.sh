#!/bin/sh
# /init of the rdmabot lab guests (PID 1 in the initramfs). Everything
# comes from the kernel command line (rb.role=server|client|idle, rb.ip,
# rb.peer, and the test's rb.* parameters); progress goes to the serial
# console as "@@RB EVENT key=value ..." lines, which the host parses.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o size=80% tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
exec </dev/console >/dev/console 2>&1

# param NAME DEFAULT: the last rb.NAME= on the command line.
param() {
	v=
	for w in $(cat /proc/cmdline); do
		case $w in "rb.$1="*) v=${w#*=} ;; esac
	done
	echo "${v:-$2}"
}
. /usr/lib/rdmabot/labtest.sh

# rpc_tasks_on_sysrq: once the host's SysRq w dump has ended (the help
# line it asks for after it), the RPC tasks in flight, between two lines
# of ours, all written to the kernel's log so they keep their order
# (lab/blocked.go). No SysRq key lists them: only a write to
# /proc/sys/sunrpc/rpc_debug does, so this takes a process, and a guest
# whose userland is stuck prints nothing (the host waits no more than
# its bound). One waiting on /dev/kmsg costs nothing between kernel
# messages. A cat ended by a record lost to the ring's wrap (EPIPE)
# reads again from the oldest: the records' sequence numbers say which
# were seen.
rpc_tasks_on_sysrq() {
	[ -c /dev/kmsg ] || return 0
	while :; do cat /dev/kmsg 2>/dev/null || sleep 1; done |
		awk -F';' '{ split($1, h, ","); if (h[2] + 0 <= seen) next; seen = h[2] + 0 }
			$2 ~ /^sysrq: HELP :/ { print "list"; fflush() }' |
		while read -r _; do
			echo "rdmabot: RPC tasks begin" >/dev/kmsg
			if [ -w /proc/sys/sunrpc/rpc_debug ]; then
				# Written back as it was: any write lists the tasks.
				read -r v </proc/sys/sunrpc/rpc_debug
				echo "$v" >/proc/sys/sunrpc/rpc_debug
			else
				echo "rdmabot: this kernel has no /proc/sys/sunrpc/rpc_debug (CONFIG_SUNRPC_DEBUG)" >/dev/kmsg
			fi
			echo "rdmabot: RPC tasks end" >/dev/kmsg
		done
}
rpc_tasks_on_sysrq </dev/null >/dev/null 2>&1 &

ROLE=$(param role idle)
hostname "lab-$ROLE"
mark BOOTED "role=$ROLE kernel=$(uname -r) build_id=$(build_id)"

# rb.crash= makes the kernel fail on purpose, to check the host's crash
# detection: panic (sysrq-c right after boot) or hang (see labtest.sh).
RB_CRASH=$(param crash none)
case $RB_CRASH in
panic)
	echo 1 >/proc/sys/kernel/sysrq
	echo c >/proc/sysrq-trigger
	;;
warn | oops | bug)
	# Test kernels with the self-test patch only; a child process does
	# the write, so an oops kills it and not PID 1.
	sh -c "echo $RB_CRASH >/proc/rdmabot_selftest" || mark SELFTEST_MISSING
	;;
esac

ip link set lo up
ip link set eth0 up
ip addr add "$(param ip 10.99.0.1)/24" dev eth0
mark NET_UP "ip=$(param ip 10.99.0.1)"

# A second NIC, when present, is QEMU's restricted user network: it only
# carries a forward from the host's loopback to this guest's sshd.
if [ "$(param sshd 0)" = 1 ] && [ -d /sys/class/net/eth1 ]; then
	ip link set eth1 up
	ip addr add 10.0.2.15/24 dev eth1
	mkdir -p /run/sshd && chmod 700 /root/.ssh 2>/dev/null
	# Debian's sshd_config is made by a maintainer script we never run:
	# everything is given here.
	if /usr/sbin/sshd -f /dev/null -o PermitRootLogin=prohibit-password -o UsePAM=no \
		-o PasswordAuthentication=no -o ListenAddress=10.0.2.15; then
		mark SSHD_UP
	else
		mark SSHD_FAIL
	fi
fi

export RB_IP=$(param ip 10.99.0.1) RB_PEER=$(param peer 10.99.0.2) RB_DEV=eth0
export RB_RDMA=$(param rdma rxe) RB_PROTO=$(param proto rdma) RB_VERS=$(param vers auto)
export RB_TEST=$(param test transfer) RB_MB=$(param mb 32) RB_ITERS=$(param iters 3)
export RB_HUNG=$(param hung 0) RB_CRASH RB_TIMER=$(param timer client)
export RB_SECS=$(param secs 30) RB_READERS=$(param readers 24) RB_WRITERS=$(param writers 4)
export RB_CREDITS=$(param credits 20) RB_THREADS=$(param threads 16)
export RB_TESTS=$(param tests '') RB_FSXOPS=$(param fsxops '')
# rb.netem carries tc's arguments with commas for spaces.
export RB_NETEM="$(param netem '' | tr , ' ')"
# The transfer test's file, when the host gave this guest one (an archive
# of its own, appended for this boot to the client's and a trusted
# server's initramfs).
[ -f /usr/lib/rdmabot/data ] && export RB_DATA=/usr/lib/rdmabot/data

status=fail
case $ROLE in
server)
	rdma_up && server_up && server_wait && status=ok
	# "poweroff" from the client is the hang check: vanish like a server
	# losing power, with the client's writes outstanding.
	if [ "$msg" = poweroff ]; then
		mark POWEROFF status=vanished
		reboot -f
	fi
	server_down
	;;
client)
	rdma_up && client_run && status=ok
	;;
idle)
	# Driven from outside over SSH; stays up until told to stop.
	mark IDLE
	while :; do sleep 3600; done
	;;
esac
mark MEM "$(free -k | awk '/Mem:/{print "total_kB=" $2 " used_kB=" $3}')"
mark POWEROFF "status=$status"
sync
# The lab kernel has no ACPI to power off with: QEMU runs with -no-reboot,
# so a reset ends it.
reboot -f
