# labtest.sh: the NFS/RDMA transfer test, as shell functions. Sourced by
# the QEMU guests' /init and run over SSH on real hosts
# (". labtest.sh; server_up"). Parameters come from the environment:
#   RB_IP RB_PEER   this host's and the peer's address on the test link
#   RB_DEV          the netdev under the RDMA device (eth0, ib0 ...)
#   RB_RDMA         rxe | siw: create a soft device on RB_DEV; hw: use what
#                   exists; opa: also IPoIB connected mode and opafm
#   RB_PROTO        rdma | tcp     RB_VERS  auto | 3 | 4.0 | 4.1 | 4.2
#   RB_TEST         transfer | fio RB_MB    file size (MiB)   RB_ITERS
#   RB_HUNG         hung_task_timeout_secs to set (0: leave it)
#   RB_NETEM        tc netem arguments for RB_DEV ("": leave the link alone)
#   RB_DATA         the transfer test's file, fresh from the host for each
#                   boot, on the client and on a trusted server only (a
#                   server running the kernel under test never has it):
#                   the server checks what the client wrote against it.
#                   Unset on the client: it makes a random file only it
#                   can check
#   RB_TIMER        client | server: server when the client runs the kernel
#                   under test. The trusted server then drives and times
#                   each iteration (server_drive), with RB_DATA holding
#                   RB_ITERS files of RB_MB MiB, one per iteration, only
#                   on the server; the client holds no data
#   RB_SECS RB_READERS RB_WRITERS RB_CREDITS RB_THREADS
#                   the pressure test (RB_TEST=pressure): seconds of load,
#                   parallel O_DIRECT 1 MiB readers and writers, svcrdma's
#                   credits (max_requests) and nfsd threads
#   RB_TESTS        the fstests test (RB_TEST=fstests): the tests, comma-
#                   separated, that the client runs with fstests' check
#                   against the server's /export/test and /export/scratch
#   RB_FSXOPS       fstests: the operations of every fsx run (FSX_AVOID's
#                   -N, which fsx takes last); empty: the tests' own
# Progress and results are "@@RB EVENT key=value ..." lines on stdout,
# each after a newline of its own: the host takes a marker only at the
# start of a line, so a kernel message that shares the line cannot hide
# it. Nothing a peer sends is ever printed (the host would read it as
# this side's word).

mark() { printf '\n@@RB %s %s t=%s\n' "$1" "$2" "$(cut -d' ' -f1 /proc/uptime)"; }
now() { cut -d' ' -f1 /proc/uptime; }
# since T0: seconds elapsed, two decimals.
since() { awk -v a="$(now)" -v b="$1" 'BEGIN{printf "%.2f", a-b}'; }
# mount_opts: the type and options of the mount at $MNT.
mount_opts() { awk -v m="$MNT" '$2==m{print $3 "," $4}' /proc/mounts; }
mbps() { awk -v m="$1" -v s="$2" 'BEGIN{if (s<=0) s=0.01; printf "%.2f", m/s}'; }
build_id() {
	# The GNU build id note of the running kernel, as the host reads it
	# from the bzImage's vmlinux; empty when the kernel exposes none.
	od -An -tx1 -v /sys/kernel/notes 2>/dev/null | tr -d ' \n' |
		sed -n 's/.*040000001400000003000000474e5500\([0-9a-f]\{40\}\).*/\1/p'
}
MNT=/mnt/nfs_test
# nfsd's statistics, and where the test keeps its own files (a test of
# the scripts points them at its own).
NFSD_STATS=/proc/net/rpc/nfsd
RUN=/tmp

# link_shape: the netem qdisc the test asks for, on this host's side of
# the test link (both hosts shape their own sends).
link_shape() {
	[ -n "$RB_NETEM" ] || return 0
	# shellcheck disable=SC2086 # the arguments are words for tc
	out=$($TC qdisc replace dev "$RB_DEV" root netem $RB_NETEM 2>&1) || {
		mark NETEM_FAIL "dev=$RB_DEV msg=$(echo $out)"
		return 1
	}
	mark NETEM "dev=$RB_DEV args=$RB_NETEM"
}

# real_bin NAME is the packaged tool by its path: the guests' busybox sh
# runs its own applets before PATH. busybox's tc knows no netem, and its
# cmp compares a byte at a time: 4.7-8.6 s of guest time per 16 MiB under
# TCG, where diffutils' takes 0.4 s.
real_bin() {
	for d in /usr/sbin /sbin /usr/bin /bin; do
		[ -x "$d/$1" ] && [ ! -L "$d/$1" ] && { echo "$d/$1"; return; }
	done
	echo "$1"
}
# Looked up once: the client's check runs in the timed loop.
CMP=$(real_bin cmp) TC=$(real_bin tc)

# link_unshape: back to the default qdisc, with netem's own count of
# what it sent, dropped and reordered (real hosts outlive the test).
link_unshape() {
	[ -n "$RB_NETEM" ] || return 0
	$TC -s qdisc show dev "$RB_DEV" | awk '$1 == "Sent" {print "\n@@RB NETEM_STATS sent_pkt=" $4 " dropped=" substr($7, 1, length($7)-1)}'
	$TC qdisc del dev "$RB_DEV" root 2>/dev/null
	return 0
}

rdma_up() {
	[ "$RB_HUNG" != 0 ] && echo "$RB_HUNG" >/proc/sys/kernel/hung_task_timeout_secs
	link_shape || return 1
	case $RB_RDMA in
	rxe | siw)
		modprobe "$([ "$RB_RDMA" = rxe ] && echo rdma_rxe || echo siw)" 2>/dev/null
		rdma link add "${RB_RDMA}0" type "$RB_RDMA" netdev "$RB_DEV" || {
			mark RDMA_FAIL "dev=${RB_RDMA}0"
			return 1
		}
		;;
	opa)
		echo connected >"/sys/class/net/$RB_DEV/mode" || mark MODE_FAIL "dev=$RB_DEV"
		systemctl start opafm && sleep 10
		;;
	esac
	# A new link takes a moment to go ACTIVE.
	n=0
	while :; do
		dev=$(rdma link show 2>/dev/null | awk '/state ACTIVE/{sub("/.*", "", $2); print $2; exit}')
		[ -n "$dev" ] && break
		n=$((n + 1))
		[ $n -gt 100 ] && { mark RDMA_FAIL "no_active_link"; return 1; }
		sleep 0.1
	done
	mark RDMA_UP "dev=$dev"
}

server_up() {
	modprobe svcrdma 2>/dev/null
	grep -q nfsd /proc/mounts || mount -t nfsd nfsd /proc/fs/nfsd
	# Daemons get no stdio of ours: over SSH an open pipe would hold the session.
	rpcbind -w </dev/null >/dev/null 2>&1 || mark RPCBIND_FAIL
	if [ "$RB_TEST" = fstests ]; then
		server_fstests_exports
	else
		mkdir -p $MNT
		mount -t tmpfs -o size=75% tmpfs $MNT
		exportfs -o fsid=0,rw,async,insecure,no_root_squash "${RB_IP%.*}.0/24:$MNT" || mark EXPORT_FAIL
	fi
	rpc.mountd </dev/null >/dev/null 2>&1 || mark MOUNTD_FAIL
	# A fresh v4 server would refuse opens for its grace period (90 s).
	echo 10 >/proc/fs/nfsd/nfsv4gracetime
	echo 10 >/proc/fs/nfsd/nfsv4leasetime
	threads=8
	if [ "$RB_TEST" = pressure ]; then
		server_pressure_setup || return 1
		threads=$RB_THREADS
	fi
	rpc.nfsd "$threads" || { mark NFSD_FAIL; return 1; }
	if [ "$RB_PROTO" = rdma ]; then
		echo "rdma 20049" >/proc/fs/nfsd/portlist || { mark PORTLIST_FAIL; return 1; }
	fi
	echo Y >/proc/fs/nfsd/v4_end_grace 2>/dev/null
	[ "$RB_TEST" = pressure ] && server_pressure_report
	mark NFSD_READY "portlist=$(tr '\n' ',' </proc/fs/nfsd/portlist)"
}

# server_fstests_exports: fstests' TEST_DEV and SCRATCH_DEV, a tmpfs
# each, exported at the same path for every NFS version (no fsid=0: nfsd
# makes the NFSv4 pseudo-root itself).
server_fstests_exports() {
	for d in test scratch; do
		mkdir -p /export/$d
		mount -t tmpfs -o size=35% tmpfs /export/$d
	done
	exportfs -o fsid=1,rw,sync,insecure,no_root_squash,no_subtree_check "${RB_IP%.*}.0/24:/export/test" || mark EXPORT_FAIL
	exportfs -o fsid=2,rw,sync,insecure,no_root_squash,no_subtree_check "${RB_IP%.*}.0/24:/export/scratch" || mark EXPORT_FAIL
}

# server_pressure_setup: what the pressure test needs before nfsd starts:
# 1 MiB READs (nfsd's block size is 1/4096 of RAM by default, 128 KiB
# here, and can only be set while no thread runs), fewer credits than
# the client has READs outstanding (svcrdma reads max_requests at each
# accept), and the file the readers read.
server_pressure_setup() {
	echo 1048576 >/proc/fs/nfsd/max_block_size 2>/dev/null || mark PRESSURE_FAIL "what=max_block_size"
	echo "$RB_CREDITS" >/proc/sys/sunrpc/svc_rdma/max_requests 2>/dev/null || mark PRESSURE_FAIL "what=max_requests"
	dd if=/dev/zero of=$MNT/big bs=1M count="$RB_MB" 2>/dev/null || { mark PRESSURE_FAIL "what=file"; return 1; }
}

# server_pressure_report: the settings as the server has them, for the
# host to check they took effect.
server_pressure_report() {
	mark PRESSURE_SRV "block=$(cat /proc/fs/nfsd/max_block_size) credits=$(cat /proc/sys/sunrpc/svc_rdma/max_requests) threads=$(cat /proc/fs/nfsd/threads)"
}

# server_wait: until the client says it is done (plain TCP on the link).
# With the kernel under test on the client (RB_TIMER=server) the server
# drives the transfer test first (server_drive).
server_wait() {
	[ "${RB_CRASH:-none}" = reconnect ] && server_bounce &
	tpid= msg=
	if [ "${RB_TIMER:-client}" = server ] && [ "$RB_TEST" = transfer ]; then
		server_drive
	elif [ "${RB_TIMER:-client}" = server ]; then
		server_time &
		tpid=$!
	fi
	[ -n "$msg" ] || msg=$(nc -l -p 7777)
	[ -n "$tpid" ] && kill "$tpid" 2>/dev/null
	# Only the client's exact words: anything else it sent is no
	# message, and is never printed.
	case $msg in
	ok | fail | poweroff | lost) ;;
	*) msg=invalid ;;
	esac
	mark CLIENT_DONE "msg=$msg"
	[ "$RB_TEST" = transfer ] && server_check
	server_health
	[ "$msg" = ok ]
}

# io_now: nfsd's bytes read and written for its clients, into IO_R and
# IO_W (shell builtins only: it runs every few milliseconds).
io_now() {
	while read -r io_k io_r io_w; do
		[ "$io_k" = io ] && { IO_R=$io_r IO_W=$io_w; return 0; }
	done <"$NFSD_STATS"
}

# server_time (rb.timer=server): the trusted server times a client that
# runs the kernel under test, from its own byte counts on its own clock.
# Iteration i's write lasts from the first byte past (i-1) files written
# to the i-th file's last; its read likewise on the bytes read. STIME
# lines carry the figures the host judges (RESULT's names), SLOOP the
# loop's length, from the first iteration's first byte to the last's.
server_time() {
	b=$((RB_MB * 1048576))
	# The pause between looks is a read that times out on a FIFO no one
	# writes: sleep(1) would fork and exec each time, tens of ms under TCG.
	# Ahead of nfsd's threads, or a busy one-CPU server looks too late.
	renice -n -20 -p "$(sh -c 'echo $PPID')" >/dev/null 2>&1
	mkfifo /tmp/rb.tick 2>/dev/null
	exec 3<>/tmp/rb.tick
	io_now
	r0=$IO_R w0=$IO_W
	i=1 ws= we= rs= l0=
	[ "$RB_TEST" = fio ] && ws=0 we=0
	while [ "$i" -le "$RB_ITERS" ]; do
		io_now
		read -r t _ </proc/uptime
		w=$((IO_W - w0)) r=$((IO_R - r0))
		[ -z "$ws" ] && [ $w -gt $(((i - 1) * b)) ] && ws=$t
		[ -n "$ws" ] && [ -z "$we" ] && [ $w -ge $((i * b)) ] && we=$t
		[ -n "$we" ] && [ -z "$rs" ] && [ $r -gt $(((i - 1) * b)) ] && rs=$t
		# The loop starts with the first byte of the first iteration.
		[ -z "$l0" ] && [ -n "$ws" ] && [ "$ws" != 0 ] && l0=$ws && cm_reqs >"$RUN/rb.cm0"
		[ -z "$l0" ] && [ -n "$rs" ] && l0=$rs && cm_reqs >"$RUN/rb.cm0"
		if [ -n "$rs" ] && [ $r -ge $((i * b)) ]; then
			awk -v i="$i" -v mb="$RB_MB" -v ws="$ws" -v we="$we" -v rs="$rs" -v re="$t" -v fio="$([ "$RB_TEST" = fio ] && echo 1)" 'BEGIN {
				w = we - ws; r = re - rs; if (w <= 0) w = 0.01; if (r <= 0) r = 0.01
				if (fio) printf "\n@@RB STIME iter=%d mb=%s read_s=%.2f read_MBps=%.2f\n", i, mb, r, mb / r
				else printf "\n@@RB STIME iter=%d mb=%s write_s=%.2f write_MBps=%.2f read_s=%.2f read_MBps=%.2f\n", i, mb, w, mb / w, r, mb / r
			}'
			i=$((i + 1)) ws= we= rs=
			[ "$RB_TEST" = fio ] && ws=0 we=0
			[ "$i" -gt "$RB_ITERS" ] && printf '\n@@RB SLOOP loop_s=%s\n' "$(awk -v a="$t" -v b="$l0" 'BEGIN{printf "%.2f", a-b}')"
			continue
		fi
		read -r -t 0.01 -u 3 _
	done
}

# server_drive (RB_TIMER=server, the transfer test): the trusted server
# drives each iteration of a client that runs the kernel under test, and
# times it on its own clock from its own byte counts, per file, in the
# order it asks: it puts iteration i's file (s_i, this boot's data for
# i, which only it holds) into the export, tells the client "go i" on
# the client's port 7778, and waits on its own port 7777 for the
# client's exact "done i". The read lasts from go to nfsd having read
# the whole file, the write from then to "done i". Bytes moved before
# go (reading or writing ahead), a short read or write, a file not as
# long as given, or another word are the client's failure (DRIVE_FAIL);
# a word of the end (fail, poweroff, lost) ends the driving as it is.
server_drive() {
	b=$((RB_MB * 1048576))
	renice -n -20 -p "$(sh -c 'echo $PPID')" >/dev/null 2>&1
	mkfifo "$RUN/rb.tick" 2>/dev/null
	exec 3<>"$RUN/rb.tick"
	# read -t is busybox's and bash's; a real host's dash has only sleep.
	tick=sleep
	(read -r -t 0.001 _ </dev/null) 2>/dev/null
	[ $? = 1 ] && tick=tick_read
	i=1 l0= td= lp=
	while [ "$i" -le "$RB_ITERS" ]; do
		io_now
		r0=$IO_R w0=$IO_W
		[ -e "$MNT/f$i" ] && { drive_fail "$i" written_ahead; return; }
		dd if="$RB_DATA" of="$MNT/s$i" bs=1M skip=$(((i - 1) * RB_MB)) count="$RB_MB" 2>/dev/null
		nc -l -p 7777 >"$RUN/rb.msg" &
		lp=$!
		until ! running $lp || echo "go $i" | nc "$RB_PEER" 7778 2>/dev/null; do
			$tick 0.2
		done
		# The counts at go come first (builtins only): an honest client
		# starts reading only once it has the word.
		io_now
		read -r tg _ </proc/uptime
		# The client's word before go: one of the end (the self-tests'
		# poweroff), or none of the protocol's.
		if ! running $lp; then
			msg=$(cat "$RUN/rb.msg")
			case $msg in
			fail | poweroff | lost) return ;;
			esac
			drive_fail "$i" wrong_message
			return
		fi
		# Connections asked for from here on are reconnects.
		[ -z "$l0" ] && l0=$tg && cm_reqs >"$RUN/rb.cm0"
		[ "$IO_R" = "$r0" ] && [ "$IO_W" = "$w0" ] || { drive_fail "$i" moved_before_go; return; }
		re=
		while running $lp; do
			io_now
			[ -z "$re" ] && [ $((IO_R - r0)) -ge $b ] && read -r re _ </proc/uptime
			$tick 0.01
		done
		read -r td _ </proc/uptime
		io_now
		msg=$(cat "$RUN/rb.msg")
		case $msg in
		"done $i") msg= ;;
		fail | poweroff | lost) return ;;
		*) drive_fail "$i" wrong_message; return ;;
		esac
		[ -n "$re" ] || { drive_fail "$i" short_read; return; }
		[ $((IO_W - w0)) -ge $b ] || { drive_fail "$i" short_write; return; }
		[ "$(wc -c <"$MNT/f$i")" = $b ] 2>/dev/null || { drive_fail "$i" file_size; return; }
		awk -v i="$i" -v mb="$RB_MB" -v tg="$tg" -v re="$re" -v td="$td" 'BEGIN {
			r = re - tg; w = td - re; if (w <= 0) w = 0.01; if (r <= 0) r = 0.01
			printf "\n@@RB STIME iter=%d mb=%s write_s=%.2f write_MBps=%.2f read_s=%.2f read_MBps=%.2f\n", i, mb, w, mb / w, r, mb / r
		}'
		rm -f "$MNT/s$i"
		i=$((i + 1))
	done
	printf '\n@@RB SLOOP loop_s=%s\n' "$(awk -v a="$td" -v b="$l0" 'BEGIN{printf "%.2f", a-b}')"
}

# cm_reqs: the RDMA connection requests this host accepted, less
# repeats and the ones it refused (a mount tried before the listener was
# up).
cm_reqs() {
	cm_n=0
	for cm_p in /sys/class/infiniband/*/ports/*; do
		[ -r "$cm_p/cm_rx_msgs/req" ] || continue
		cm_n=$((cm_n + $(cat "$cm_p/cm_rx_msgs/req") - $(cat "$cm_p/cm_rx_duplicates/req") - $(cat "$cm_p/cm_tx_msgs/rej")))
	done
	echo $cm_n
}

# tick_read SECS: a pause without a fork (a read that times out on a
# FIFO no one writes, fd 3).
tick_read() { read -r -t "$1" -u 3 _; }

# running PID: PID is alive (an exited child not yet reaped is not).
running() {
	[ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# drive_fail ITER WHY: the client broke server_drive's protocol; its end
# word is then none of the protocol's.
drive_fail() {
	[ -n "$lp" ] && kill "$lp" 2>/dev/null
	mark DRIVE_FAIL "iter=$1 why=$2"
	msg=invalid
}

# server_check: the server's own look at the files the client wrote, one
# per iteration, against the data the host gave it (RB_DATA). Run once the
# client is done, so it costs the timed transfers nothing. A client that
# runs the kernel under test can say what it likes of its own cmp; this
# is the trusted side's word on what reached the server, and (RB_TIMER=
# server) on what the client read back, as it wrote that back again.
server_check() {
	[ -n "${RB_DATA:-}" ] || return 0
	i=1
	while [ $i -le "$RB_ITERS" ]; do
		if [ "${RB_TIMER:-client}" = server ]; then
			# What the client wrote is what it read of s_i: the file
			# covers both ways.
			mark SRVCMP "iter=$i result=$(data_check $MNT/f$i $(((i - 1) * RB_MB * 1048576)))"
		else
			mark SRVCMP "iter=$i result=$(data_check $MNT/f$i 0)"
		fi
		i=$((i + 1))
	done
}

# data_check FILE OFF: ok when FILE holds RB_MB MiB of RB_DATA from byte
# OFF on, else mismatch or missing.
data_check() {
	if [ ! -f "$1" ]; then
		echo missing
	elif [ "$(stat -c %s "$1")" = $((RB_MB * 1048576)) ] && $CMP -s -n $((RB_MB * 1048576)) "$1" "$RB_DATA" 0 "$2"; then
		echo ok
	else
		echo mismatch
	fi
}

# server_health: the server's count of RPCs it could not decode
# ("rpc calls badcalls ..." of /proc/net/rpc/nfsd).
server_health() {
	awk '$1 == "rpc" {print "\n@@RB SRVSTAT calls=" $2 " badcalls=" $3}' /proc/net/rpc/nfsd
	# The bytes nfsd read and wrote for its clients: a client running a
	# kernel under test must have moved what it says it moved.
	awk '$1 == "io" {print "\n@@RB SRVIO read=" $2 " written=" $3}' /proc/net/rpc/nfsd
	# What the server saw the client send again, and how often it was
	# asked for an RDMA connection once the test loop had started:
	# replies its reply cache gave again, and the RDMA CM's connection
	# requests since then (the mount's own, a v4 try and the v3 one
	# among them, come before). A client running the kernel under test
	# says what it likes of its own counts.
	recon=0
	[ -r "$RUN/rb.cm0" ] && recon=$(($(cm_reqs) - $(cat "$RUN/rb.cm0")))
	awk -v n=$recon '$1 == "rc" {print "\n@@RB SRVCONN rc_hits=" $2 " reconnects=" n}' /proc/net/rpc/nfsd
	# svcrdma's own counters: sq_starve counts Sends that waited for
	# Send Queue space (a healthy server under pressure waits; one whose
	# accounting is inflated stops waiting).
	d=/proc/sys/sunrpc/svc_rdma
	[ -r $d/rdma_stat_sq_starve ] || return 0
	# svcrdma formats its counters into 8 bytes and refuses a value of
	# 1000000 or more (EFAULT): that is a floor, not nothing.
	starve=$(cat $d/rdma_stat_sq_starve 2>/dev/null) || starve=
	[ -n "$starve" ] || starve=1000000
	printf '\n@@RB SVCRDMA sq_starve=%s reads=%s writes=%s recvs=%s\n' "$starve" "$(cat $d/rdma_stat_read)" "$(cat $d/rdma_stat_write)" "$(cat $d/rdma_stat_recv)"
}

# server_bounce (rb.crash=reconnect, the host's self-test of transport
# health): once the client has written 4 MiB, restart nfsd, which closes
# every connection, so the client must reconnect and send again.
server_bounce() {
	n=0
	until [ "$(awk '$1 == "io" {print $3}' /proc/net/rpc/nfsd)" -ge 4194304 ] 2>/dev/null; do
		n=$((n + 1))
		[ $n -gt 3000 ] && return
		sleep 0.1
	done
	rpc.nfsd 0
	sleep 2
	rpc.nfsd 8
	[ "$RB_PROTO" = rdma ] && echo "rdma 20049" >/proc/fs/nfsd/portlist
	mark BOUNCED
}

server_down() {
	rpc.nfsd 0 2>/dev/null
	exportfs -ua 2>/dev/null
	umount $MNT /export/test /export/scratch 2>/dev/null
	link_unshape
}

client_mount() {
	rpcbind -w </dev/null >/dev/null 2>&1
	# NFSv3 (the reference mount's fallback) needs statd for locking.
	rpc.statd --no-notify </dev/null >/dev/null 2>&1 || mark STATD_FAIL
	t0=$(now)
	until nc -w 1 "$RB_PEER" 2049 </dev/null >/dev/null 2>&1; do
		[ "$(since "$t0" | cut -d. -f1)" -gt 300 ] && break
		sleep 0.5
	done
	if [ "$RB_PROTO" = rdma ]; then opts=rdma,port=20049; else opts=proto=tcp,port=2049; fi
	[ "$RB_TEST" = pressure ] && opts=$opts,rsize=1048576,wsize=1048576
	path=$MNT
	case $RB_VERS in
	auto) ;;
	3) opts=$opts,vers=3 ;;
	*) opts=$opts,vers=$RB_VERS path=/ ;;
	esac
	# fstests mounts TEST_DEV at TEST_DIR as this does; check finds it
	# mounted.
	[ "$RB_TEST" = fstests ] && MNT=/mnt/test path=/export/test
	mkdir -p $MNT
	try=1
	while [ $try -le 5 ]; do
		t1=$(now)
		mount.nfs "$RB_PEER:$path" $MNT -o "$opts" 2>&1 | awk '{print "\n@@RB MOUNT_MSG " $0}'
		if grep -q " $MNT nfs" /proc/mounts; then
			mark MOUNTED "try=$try mount_s=$(since "$t1") opts=$(mount_opts)"
			xprt=$(awk '/xprt:/{print $2; exit}' /proc/self/mountstats)
			mark TRANSPORT "xprt=$xprt"
			return 0
		fi
		try=$((try + 1))
		sleep 2
	done
	mark MOUNT_FAIL "opts=$opts"
	return 1
}

# client_health: the transport's own account of the test, for the host
# to judge: the test mount's xprt line and per-op lines of mountstats
# (sends, retransmissions, timeouts, connects, bad replies) and the
# client's RPC totals. It runs before umount, which drops the mount's.
client_health() {
	awk -v m="$MNT" '$1 == "device" {on = ($5 == m)}
		on && ($1 == "xprt:" || $1 ~ /^[A-Z_0-9]+:$/) {$1 = $1; print "\n@@RB MSTAT line=" $0}' /proc/self/mountstats
	awk '$1 == "rpc" {print "\n@@RB RPCSTAT calls=" $2 " retrans=" $3}' /proc/net/rpc/nfs
}

# client_driven (RB_TIMER=server): the trusted server drives the test
# (server_drive): at its "go i" the client copies s_i to f_i through its
# own memory (reading it over the wire, then writing it back), and says
# "done i" once f_i is on the server. Its RESULT lines are its own word.
client_driven() {
	i=1
	while [ $i -le "$RB_ITERS" ]; do
		[ "$(nc -l -p 7778)" = "go $i" ] || return 1
		b=$(now)
		cp $MNT/s$i /dev/shm/x
		c=$(now)
		# Done means on the server: close() alone need not wait for the
		# writes under a write delegation.
		if cp /dev/shm/x $MNT/f$i && sync; then r=ok; else r=fail; fi
		d=$(now)
		rm -f /dev/shm/x
		n=0
		until echo "done $i" | nc "$RB_PEER" 7777; do
			n=$((n + 1))
			[ $n -gt 50 ] && return 1
			sleep 0.1
		done
		rs=$(awk -v x="$c" -v y="$b" 'BEGIN{printf "%.2f", x-y}')
		ws=$(awk -v x="$d" -v y="$c" 'BEGIN{printf "%.2f", x-y}')
		mark RESULT "iter=$i mb=$RB_MB gen_s=0 write_s=$ws write_MBps=$(mbps "$RB_MB" "$ws") read_s=$rs read_MBps=$(mbps "$RB_MB" "$rs") cmp=$r"
		[ $r = ok ] || return 1
		i=$((i + 1))
	done
	# rb.crash=corrupt, the host's self-test of server_check: the
	# server's copies change once the driving is over, where only the
	# server can see it.
	i=1
	while [ "${RB_CRASH:-none}" = corrupt ] && [ $i -le "$RB_ITERS" ]; do
		printf x | dd of=$MNT/f$i bs=1 seek=4096 conv=notrunc 2>/dev/null
		i=$((i + 1))
	done
	sync
}

client_transfer() {
	[ "${RB_TIMER:-client}" = server ] && { client_driven; return; }
	fails=0
	i=1
	src=${RB_DATA:-}
	a=$(now)
	if [ -z "$src" ]; then
		# One random file per boot: making it takes longer than copying
		# it under TCG, and every iteration still compares what comes back.
		src=/dev/shm/src
		dd if=/dev/urandom of=$src bs=1M count="$RB_MB" 2>/dev/null
	fi
	gen=$(since "$a")
	while [ $i -le "$RB_ITERS" ]; do
		b=$(now)
		# Each iteration's file stays on the server for its check.
		cp "$src" $MNT/f$i
		c=$(now)
		# Drop caches so the read-back crosses the wire.
		sync
		echo 3 >/proc/sys/vm/drop_caches
		d=$(now)
		cp $MNT/f$i /dev/shm/back
		e=$(now)
		if $CMP -s "$src" /dev/shm/back; then r=ok; else r=mismatch fails=$((fails + 1)); fi
		# rb.crash=corrupt, the host's self-test of server_check: the
		# server's copy, and what this client read, change where only the
		# server can see it.
		if [ "${RB_CRASH:-none}" = corrupt ]; then
			printf x | dd of=$MNT/f$i bs=1 seek=4096 conv=notrunc 2>/dev/null
			printf x | dd of=/dev/shm/back bs=1 seek=8192 conv=notrunc 2>/dev/null
		fi
		ws=$(awk -v x="$c" -v y="$b" 'BEGIN{printf "%.2f", x-y}')
		rs=$(awk -v x="$e" -v y="$d" 'BEGIN{printf "%.2f", x-y}')
		mark RESULT "iter=$i mb=$RB_MB gen_s=$gen write_s=$ws write_MBps=$(mbps "$RB_MB" "$ws") read_s=$rs read_MBps=$(mbps "$RB_MB" "$rs") cmp=$r"
		rm -f /dev/shm/back
		gen=0
		i=$((i + 1))
	done
	rm -f /dev/shm/src
	[ $fails = 0 ]
}

client_fio() {
	i=1
	while [ $i -le "$RB_ITERS" ]; do
		sync
		echo 3 >/proc/sys/vm/drop_caches
		# terse v3: field 7 is read bandwidth (KiB/s), 9 read runtime (ms).
		# --thread: one process; fio still needs SysV shm (CONFIG_SYSVIPC).
		out=$(fio --name=seqread --directory=$MNT --rw=read --bs=1M --size="${RB_MB}M" --thread \
			--direct=1 --ioengine=psync --output-format=terse --terse-version=3 2>&1) || {
			echo "$out" | awk '{print "\n@@RB FIO_MSG " $0}'
			# fio keeps its job table in SysV shared memory, even with --thread.
			case $out in *shmget*) mark FIO_FAIL "reason=no_sysvipc" ;; esac
			return 1
		}
		echo "$out" | awk -F';' -v i=$i -v mb="$RB_MB" '$1=="3"{printf "\n@@RB FIO iter=%d mb=%s read_MBps=%.2f read_s=%.3f\n", i, mb, $7/1024, $9/1000}'
		i=$((i + 1))
	done
	rm -f $MNT/seqread.*
}

# client_hang leaves a task in D state: a file is open on the mount, the
# server goes away, then dirty pages are flushed. NFS RPC waits are
# killable and escape the hung-task detector; waiting for writeback is not.
client_hang() {
	(sleep 3; dd if=/dev/zero bs=1M count=8 2>/dev/null; sleep 100000) >$MNT/hang &
	sleep 1
	echo poweroff | nc "$RB_PEER" 7777
	sleep 6
	mark HANG_SYNC
	sync
	mark HANG_ESCAPED
	return 1
}

# client_pressure: more O_DIRECT 1 MiB READs and WRITEs outstanding than
# the server grants credits, for RB_SECS seconds: every READ reply
# carries a Write chunk of about 57 Send Queue entries (rxe), so the
# server's Send Queue runs full and its accounting decides what happens.
# Reports the MiB moved each way as one RESULT.
client_pressure() {
	opts=$(mount_opts)
	case ,$opts, in
	*,rsize=1048576,*wsize=1048576,*) ;;
	*) mark PRESSURE_FAIL "what=rsize opts=$opts"; return 1 ;;
	esac
	rm -rf /tmp/press && mkdir -p /tmp/press
	t0=$(now)
	end=$(($(cut -d. -f1 /proc/uptime) + RB_SECS))
	j=0 pids=
	while [ $j -lt "$RB_READERS" ]; do
		(
			n=0
			while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
				dd if=$MNT/big of=/dev/null bs=1M count=8 skip=$(((j * 8 + n * 8) % (RB_MB - 7))) iflag=direct 2>/dev/null || break
				n=$((n + 8))
			done
			echo $n >/tmp/press/r$j
		) &
		pids="$pids $!"
		j=$((j + 1))
	done
	j=0
	while [ $j -lt "$RB_WRITERS" ]; do
		(
			n=0
			while [ "$(cut -d. -f1 /proc/uptime)" -lt $end ]; do
				dd if=/dev/zero of=$MNT/w$j bs=1M count=8 oflag=direct 2>/dev/null || break
				n=$((n + 8))
			done
			echo $n >/tmp/press/w$j
		) &
		pids="$pids $!"
		j=$((j + 1))
	done
	# Its own load only: init keeps a watcher of its own in the
	# background (init.sh), which a bare wait would wait for forever.
	wait $pids
	secs=$(since "$t0")
	rmb=$(cat /tmp/press/r* 2>/dev/null | awk '{s += $1} END {print s + 0}')
	wmb=$(cat /tmp/press/w* 2>/dev/null | awk '{s += $1} END {print s + 0}')
	mark RESULT "iter=1 mb=$rmb read_s=$secs read_MBps=$(mbps "$rmb" "$secs") write_s=$secs write_MBps=$(mbps "$wmb" "$secs") write_mb=$wmb"
	rm -f $MNT/w*
	[ "$rmb" -gt 0 ]
}

# client_fstests: each test of RB_TESTS with fstests' check, one check
# per test, so that each test's evidence is its own and a hang leaves the
# tests before it reported. Per test, FSTEST_LOG lines (a failure's
# evidence: the start of its .out.bad diff, fsx's and the test's log
# lines, bounded) and one FSTEST line (status pass, fail or notrun, its
# seconds, a notrun's reason). Its own status says the group ran, not
# that its tests passed.
client_fstests() {
	FST=${FST:-/var/lib/xfstests}
	[ -x "$FST/check" ] || { mark FSTESTS_FAIL "why=no fstests in the image"; return 1; }
	mkdir -p /mnt/scratch
	vers=
	[ "$RB_VERS" = auto ] || vers=,vers=$RB_VERS
	export FSTYP=nfs TEST_DEV="$RB_PEER:/export/test" TEST_DIR=$MNT
	export SCRATCH_DEV="$RB_PEER:/export/scratch" SCRATCH_MNT=/mnt/scratch
	export NFS_MOUNT_OPTIONS="-o proto=rdma,port=20049$vers"
	case $RB_FSXOPS in
	'' | *[!0-9]*) ;;
	*) export FSX_AVOID="-N $RB_FSXOPS" ;;
	esac
	for t in $(echo "$RB_TESTS" | tr , ' '); do
		res=$FST/results/$t
		rm -f "$res".*
		t0=$(now)
		# check in a session of its own, so a test still running after
		# RB_FSLIMIT seconds (a hang: its I/O never completes) can be
		# killed whole and reported failed, with its processes and what
		# they wait in, and the group goes on; 60 s in, they are shown
		# once anyway.
		setsid sh -c 'cd "$1" && exec ./check -nfs "$2"' sh "$FST" "$t" </dev/null >"$RUN/fst.out" 2>&1 &
		ck=$! n=0
		rm -f "$RUN/fst.ps"
		while running $ck; do
			sleep 1
			n=$((n + 1))
			[ $n = 60 ] && fstests_ps
			if [ $n -ge "${RB_FSLIMIT:-300}" ]; then
				fstests_stuck >"$RUN/fst.ps"
				fstests_ps >>"$RUN/fst.ps"
				# busybox sh takes -PID, dash (the tests' sh) only after --.
				kill -s KILL "-$ck" 2>/dev/null || kill -s KILL -- "-$ck" 2>/dev/null
				break
			fi
		done
		wait $ck 2>/dev/null
		# check's own words, for the console kept with the boot.
		sed 's/^/fstests: /' "$RUN/fst.out" | head -n 60
		secs=$(since "$t0")
		if [ -f "$RUN/fst.ps" ]; then
			{
				echo "timed out after ${RB_FSLIMIT:-300} s (a hang: killed); its mounts' transports, then its processes:"
				grep -a -v -E ' [IS] (|worker_thread|kthread|smpboot_thread_fn|rescuer_thread|rcu_[a-z_]*) $' "$RUN/fst.ps" | sed 's/^fstests-ps: //'
			} | head -n 40 | cut -c1-300 | while IFS= read -r l; do
				printf '\n@@RB FSTEST_LOG name=%s line=%s\n' "$t" "$l"
			done
			mark FSTEST "name=$t status=fail secs=$secs"
		elif [ -f "$res.notrun" ]; then
			mark FSTEST "name=$t status=notrun secs=$secs why=$(head -c 300 "$res.notrun" | tr '\n' ' ')"
		elif grep -q "^Passed all 1 tests" "$RUN/fst.out" && [ ! -f "$res.out.bad" ]; then
			mark FSTEST "name=$t status=pass secs=$secs"
		else
			fstests_evidence "$t" "$res" | head -n 40 | cut -c1-300 | while IFS= read -r l; do
				printf '\n@@RB FSTEST_LOG name=%s line=%s\n' "$t" "$l"
			done
			mark FSTEST "name=$t status=fail secs=$secs"
		fi
	done
	umount /mnt/scratch 2>/dev/null
	return 0
}

# fstests_stuck: what a test about to be killed as hung waits on. Its
# mounts' transport lines (mountstats' xprt: connects, sends, receives,
# bad xids, the backlog: whether a reply never came or the connection is
# down) are printed first, as evidence; the blocked tasks' stacks (SysRq
# w) and then the RPC tasks in flight (the help line an unknown key
# prints wakes init's rpc_tasks_on_sysrq) go to the kernel's log, kept
# with the boot's console. RB_PROC stands for /proc in tests.
fstests_stuck() {
	awk '$1 == "device" { m = $5 } $1 == "xprt:" && m ~ /^\/mnt\// { $1 = $1; print "transport of " m ": " $0 }' \
		"${RB_PROC:-/proc}/self/mountstats" 2>/dev/null
	if [ -w "${RB_PROC:-/proc}/sysrq-trigger" ]; then
		echo w >>"${RB_PROC:-/proc}/sysrq-trigger"
		echo '?' >>"${RB_PROC:-/proc}/sysrq-trigger"
	fi
}

# fstests_ps: each process with its state, what it waits in and its
# command line, from /proc (busybox's ps knows no wait channel). A
# command line may hold any byte: only printable ASCII is kept, so the
# list stays text for grep and one line per process.
fstests_ps() {
	for p in /proc/[0-9]*; do
		read -r st <"$p/stat" 2>/dev/null || continue
		echo "fstests-ps: ${p#/proc/} $(echo "$st" | sed 's/.*) \(.\).*/\1/') $(cat "$p/wchan" 2>/dev/null) $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | LC_ALL=C tr -c ' -~' '?' | cut -c1-120)"
	done | LC_ALL=C tr -c ' -~\n' '?'
}

# fstests_evidence TEST RES: why TEST failed: the start of its .out.bad
# against the golden output, what fsx and the test logged of bad data,
# the kernel messages check found, or check's own words when it ran
# nothing.
fstests_evidence() {
	if [ -f "$2.out.bad" ]; then
		diff -u "$FST/tests/$1.out" "$2.out.bad" 2>/dev/null | tail -n +3 | head -n 20
	fi
	[ -f "$2.full" ] && grep -E -i -m 12 'BAD DATA|miscompare|mismatch|error|LOG DUMP|^[0-9]+\([0-9]+ mod [0-9]+\)' "$2.full"
	[ -f "$2.dmesg" ] && head -n 8 "$2.dmesg"
	[ -f "$2.out.bad" ] || [ -f "$2.full" ] || tail -n 8 "$RUN/fst.out"
	# fsx keeps its own logs beside its file.
	for f in "$MNT"/*.fsxlog; do
		[ -f "$f" ] && tail -n 8 "$f"
	done
}

client_run() {
	client_mount || { echo fail | nc "$RB_PEER" 7777; return 1; }
	[ "${RB_CRASH:-none}" = hang ] && { client_hang; return 1; }
	t0=$(now)
	case $RB_TEST in
	fio) client_fio ;;
	pressure) client_pressure ;;
	fstests) client_fstests ;;
	*) client_transfer ;;
	esac
	rc=$?
	mark SUMMARY "test=$RB_TEST loop_s=$(since "$t0") ok=$([ $rc = 0 ] && echo 1 || echo 0)"
	client_health
	umount $MNT || mark UMOUNT_FAIL
	# The server may be between two listens: try for a while.
	n=0
	until echo "$([ $rc = 0 ] && echo ok || echo fail)" | nc "$RB_PEER" 7777; do
		n=$((n + 1))
		[ $n -gt 50 ] && break
		sleep 0.1
	done
	link_unshape
	return $rc
}
