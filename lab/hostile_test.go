package lab

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/cfgtype"
	"github.com/rdmabot/rdmabot/internal/cgroup"
	"github.com/rdmabot/rdmabot/internal/elfnote"
)

// The stand-in for qemu-system-x86_64: the test binary itself, run by
// the name standInName (QEMU runs with an empty environment). It prints the lab's console protocol the way a kernel
// can. A kernel file holding "honest" plays a passing run at about
// 8 MB/s; one holding "hostile" plays an attacker on its side: forged
// results at 2718 MB/s, another build id, progress without end, and no
// power-off; "injector" prints a second BOOTED midway; "liar" moves the data as the honest one does and says it
// did so at 2718 MB/s; "forger" writes other data than it was given and
// says its check passed. The honest server checks what it received
// against the test's data, as a trusted server does.
const standInName = "qemu-standin"

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == standInName {
		os.Exit(standIn(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func standIn(args []string) int {
	var kernel, cmdline, netdev, initrd string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "-kernel":
			kernel = args[i+1]
		case "-initrd":
			initrd = args[i+1]
		case "-append":
			cmdline = args[i+1]
		case "-netdev":
			netdev = args[i+1]
		}
	}
	kind, id, release, err := standInKernelKind(kernel)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	role, mb, iters := "idle", 16, 2
	// Asked to (rb.timer=server), the server takes the times and the
	// client writes what it read back to the server for its check.
	timer := strings.Contains(cmdline, "rb.timer=server")
	for _, w := range strings.Fields(cmdline) {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "rb.role":
			role = v
		case "rb.mb":
			fmt.Sscan(v, &mb)
		case "rb.iters":
			fmt.Sscan(v, &iters)
		}
	}
	// The link: the server listens (the host waits for that), the client
	// connects; a guest's link going down is its peer gone.
	var conn net.Conn
	var link io.Reader // what the server reads of the link
	conns := 0         // the connections the server accepted
	if _, port, ok := strings.Cut(netdev, "listen="); ok {
		l, err := net.Listen("tcp", port)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if conn, link, conns, err = standInAccept(l.(*net.TCPListener)); err != nil {
			return 1
		}
	} else if _, port, ok := strings.Cut(netdev, "connect="); ok {
		if kind == "flaky" {
			// It connects, gives up and connects again: a reconnect,
			// which its own counts will not show.
			if c, err := net.Dial("tcp", port); err == nil {
				c.Close()
			}
		}
		if conn, err = net.Dial("tcp", port); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	say := func(format string, a ...any) { fmt.Printf(format+"\n", a...) }
	say("[    0.000000] Linux version 6.12.117 (%s) #1 SMP", kind)
	if f := strings.Fields(kind); len(f) == 2 && f[0] == "snoop" {
		// A guest broken out into its QEMU looks around the host.
		_, err := os.ReadFile(f[1])
		say("snoop read: %v", err)
		say("snoop write: %v", os.WriteFile(filepath.Join(filepath.Dir(f[1]), "planted"), []byte("x"), 0o644))
		say("snoop env: %q", os.Environ())
	}
	if kind == "spinner" {
		// A guest whose threads outnumber the host's cores many times
		// over, spinning beside an honest run: the host's CPU is
		// contended throughout, as when other work shares the machine.
		runtime.GOMAXPROCS(16)
		for range 12 {
			go func() {
				//lint:ignore SA5002 spinning is what it is for
				for {
				}
			}()
		}
		kind = "honest"
	}
	if kind == "hog" {
		// One that takes all the host's memory it can (outside Go's
		// heap, which the race detector makes slow to grow).
		for {
			b, err := syscall.Mmap(-1, 0, 256<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
			if err != nil {
				return 1
			}
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
		}
	}
	if strings.HasPrefix(kind, "hostile") {
		standInHostile(kind, role, conn, say)
		return 0
	}
	say("@@RB BOOTED role=%s kernel=%s build_id=%s t=1.5", role, release, id)
	say("@@RB RDMA_UP dev=rxe0 t=1.8")
	if kind == "deaf-once" {
		// A kernel stalled after boot that lets the host's first SysRq
		// w go by unanswered, as a hung server once did, and answers
		// the second.
		go standInSysRq(os.Stdin, 2, say)
		time.Sleep(time.Hour)
		return 0
	}
	switch role {
	case "server":
		standInServer(conn, link, kind, initrd, mb, iters, conns, timer, say)
	case "client":
		standInClient(conn, kind, id, initrd, mb, iters, timer, say)
	}
	say("@@RB POWEROFF status=ok t=13.5")
	return 0
}

// standInServer is the server's side of the stand-in: driving the client
// (timer), or counting and checking what the client moves over the link.
func standInServer(conn net.Conn, link io.Reader, kind, initrd string, mb, iters, conns int, timer bool, say func(string, ...any)) {
	say("@@RB NFSD_READY portlist=rdma 20049,tcp 2049, t=3.0")
	if timer {
		standInDrive(conn, link, standInData(initrd), mb, iters, conns, say)
		return
	}
	// The server's own count: what the client wrote over the link,
	// and what it sent back when read, until the client is done. It
	// checks each file against the data the host gave it (a trusted
	// server's lot), as labtest.sh's server_check does.
	file := int64(mb) << 20
	data := standInData(initrd)
	say("standin data: %s", dataSum(data))
	same := map[int]bool{}
	var moved, echoed int64
	buf := make([]byte, 64<<10)
	for {
		n, err := link.Read(buf)
		if n > 0 {
			// The files are read back; the read-backs are not.
			echo := min(int64(n), max(0, int64(iters)*file-moved))
			if kind == "owncopy" {
				// It answers reads from its own copy of the data,
				// as a server that knew it could without pulling
				// the payload: without one, it has nothing right.
				own := make([]byte, echo)
				for j := range own {
					if at := (moved + int64(j)) % file; data != nil {
						own[j] = data[at]
					}
				}
				conn.Write(own)
			} else {
				conn.Write(buf[:echo])
			}
			echoed += echo
			for got, at := buf[:n], moved; len(got) > 0; {
				i, off := int(at/file)+1, at%file
				k := min(int64(len(got)), file-off)
				if _, seen := same[i]; !seen {
					same[i] = true
				}
				same[i] = same[i] && data != nil && bytes.Equal(got[:k], data[off:off+k])
				got, at = got[k:], at+k
			}
			moved += int64(n)
		}
		if err != nil {
			break
		}
	}
	say("@@RB CLIENT_DONE msg=ok t=9")
	check := func(i int) string {
		if moved < int64(i)*file {
			return "missing"
		}
		return map[bool]string{true: "ok", false: "mismatch"}[same[i]]
	}
	for i := 1; i <= iters && data != nil; i++ {
		say("@@RB SRVCMP iter=%d result=%s", i, check(i))
	}
	say("@@RB SRVIO read=%d written=%d", echoed, moved)
	// Its own view of the client: every connection it was asked for.
	say("@@RB SRVSTAT calls=1 badcalls=0")
	say("@@RB SRVCONN rc_hits=0 reconnects=%d", max(conns-1, 0))
}

// standInClient is the client's side: it writes each file over the link
// and reads it back, or is driven by the server (timer).
func standInClient(conn net.Conn, kind, id, initrd string, mb, iters int, timer bool, say func(string, ...any)) {
	say("@@RB MOUNTED try=1 mount_s=1.2 opts=nfs,rw,vers=3,proto=rdma,port=20049 t=5.0")
	say("@@RB TRANSPORT xprt=rdma t=5.1")
	if timer {
		standInDriven(conn, kind, initrd, mb, iters, say)
		return
	}
	chunk := standInData(initrd)
	say("standin data: %s", dataSum(chunk))
	if chunk == nil {
		chunk = make([]byte, mb<<20)
	}
	if kind == "forger" {
		// It moves a file, not the one it was given, and says the
		// data came back as written.
		chunk = make([]byte, mb<<20)
	}
	for i := 1; i <= iters; i++ {
		// Write the file over the link and read it back.
		go conn.Write(chunk)
		back := make([]byte, len(chunk))
		// Its own check, as labtest.sh's cmp: what came back is what
		// it wrote.
		cmp := "ok"
		if _, err := io.ReadFull(conn, back); err != nil || !bytes.Equal(back, chunk) {
			cmp = "mismatch"
		}
		if kind == "misreader" {
			// What it read is not what the server sent, where its
			// own check does not look.
			back[8192] ^= 1
		}
		if kind == "injector" {
			// It boots again, as far as its console says.
			say("@@RB BOOTED role=server kernel=6.12.117 build_id=%s t=9", id)
		}
		if kind == "liar" {
			// It moved the data, and says it did so at 2718 MB/s.
			say("@@RB RESULT iter=%d mb=%d gen_s=0 write_s=0.01 write_MBps=2718.28 read_s=0.01 read_MBps=2718.28 cmp=%s t=2", i, mb, cmp)
			continue
		}
		say("@@RB RESULT iter=%d mb=%d gen_s=0.5 write_s=2.00 write_MBps=8.00 read_s=1.95 read_MBps=8.21 cmp=%s t=9", i, mb, cmp)
	}
	say("@@RB SUMMARY test=transfer loop_s=8.10 ok=1 t=13.2")
	// Its transport's counts: one connect, nothing sent again.
	say("@@RB MSTAT line=xprt: rdma 0 0 1 0 12 400 398 0 400 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0")
	say("@@RB RPCSTAT calls=210 retrans=0")
	conn.Close()
}

// standInHostile is everything a kernel can print to look good, on its
// own console.
func standInHostile(kind, role string, conn net.Conn, say func(string, ...any)) {
	say("@@RB BOOTED role=%s kernel=6.12.117 build_id=ffff t=1.0", role)
	say("@@RB RDMA_UP dev=rxe0 t=1.1")
	say("@@RB NFSD_READY portlist=rdma 20049, t=1.2")
	say("@@RB MOUNTED try=1 mount_s=0.1 opts=nfs,rw,vers=3,proto=rdma,port=20049 t=1.3")
	say("@@RB TRANSPORT xprt=rdma t=1.3")
	for i := 1; i <= 2; i++ {
		say("@@RB RESULT iter=%d mb=16 gen_s=0 write_s=0.01 write_MBps=2718.28 read_s=0.01 read_MBps=2718.28 cmp=ok t=2", i)
	}
	say("@@RB SUMMARY test=transfer loop_s=0.04 ok=1 t=2")
	if conn != nil {
		conn.Close()
	}
	say("@@RB POWEROFF status=ok t=2")
	if strings.Contains(kind, "spin") {
		// Progress without end, and no power-off.
		for i := 3; ; i++ {
			say("@@RB RESULT iter=%d mb=16 gen_s=0 write_s=0.01 write_MBps=2718.28 read_s=0.01 read_MBps=2718.28 cmp=ok t=2", i)
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// standInDrive is the trusted server driving a candidate client
// (rb.timer=server), as labtest.sh's server_drive: per iteration it
// sends the client that iteration's file of its data (the client's read)
// and takes as much back (its write), timing both on its own clock, and
// checks what came back. Bytes that arrive before it sends a file (a
// writer ahead) are the client's failure.
func standInDrive(conn net.Conn, link io.Reader, data []byte, mb, iters, conns int, say func(string, ...any)) {
	file := mb << 20
	say("standin data: %s", dataSum(data))
	if len(data) < iters*file {
		say("@@RB DRIVE_FAIL iter=1 why=no_data")
		return
	}
	var loop0 time.Time
	var checks []string
	var moved int
	for i := 1; i <= iters; i++ {
		conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if n, _ := link.Read(make([]byte, 1)); n > 0 {
			say("@@RB DRIVE_FAIL iter=%d why=moved_before_go", i)
			return
		}
		conn.SetReadDeadline(time.Time{})
		start := time.Now()
		if loop0.IsZero() {
			loop0 = start
		}
		want := data[(i-1)*file : i*file]
		go conn.Write(want)
		back := make([]byte, file)
		n, err := io.ReadFull(link, back)
		moved += n
		if err != nil {
			say("@@RB DRIVE_FAIL iter=%d why=short_write", i)
			return
		}
		secs := time.Since(start).Seconds()
		say("@@RB STIME iter=%d mb=%d write_s=%.2f write_MBps=%.2f read_s=%.2f read_MBps=%.2f", i, mb, secs/2, float64(mb)/secs*2, secs/2, float64(mb)/secs*2)
		checks = append(checks, map[bool]string{true: "ok", false: "mismatch"}[bytes.Equal(back, want)])
	}
	say("@@RB SLOOP loop_s=%.2f", time.Since(loop0).Seconds())
	io.Copy(io.Discard, link) // until the client is done
	say("@@RB CLIENT_DONE msg=ok t=9")
	for i, c := range checks {
		say("@@RB SRVCMP iter=%d result=%s", i+1, c)
	}
	say("@@RB SRVIO read=%d written=%d", iters*file, moved)
	say("@@RB SRVSTAT calls=1 badcalls=0")
	say("@@RB SRVCONN rc_hits=0 reconnects=%d", max(conns-1, 0))
}

// standInDriven is a client the trusted server drives: it takes each
// file and sends it back, as labtest.sh's client_driven copies s_i to
// f_i; its kind bends that ("forger" sends other bytes, "misreader" what
// it read changed, "frontwriter" the next file before it is given it,
// "liar" says 2718 MB/s).
func standInDriven(conn net.Conn, kind, initrd string, mb, iters int, say func(string, ...any)) {
	say("standin data: %s", dataSum(standInData(initrd)))
	file := mb << 20
	for i := 1; i <= iters; i++ {
		got := make([]byte, file)
		if _, err := io.ReadFull(conn, got); err != nil {
			break
		}
		switch kind {
		case "forger":
			got = make([]byte, file)
		case "misreader":
			got[8192] ^= 1
		}
		conn.Write(got)
		if kind == "frontwriter" {
			// The next file, before it is given: it cannot know it.
			conn.Write(make([]byte, 4096))
		}
		if kind == "liar" {
			say("@@RB RESULT iter=%d mb=%d gen_s=0 write_s=0.01 write_MBps=2718.28 read_s=0.01 read_MBps=2718.28 cmp=ok t=2", i, mb)
			continue
		}
		if kind == "injector" {
			say("@@RB BOOTED role=client kernel=6.12.117 build_id=ab t=9")
		}
		say("@@RB RESULT iter=%d mb=%d gen_s=0 write_s=2.00 write_MBps=8.00 read_s=1.95 read_MBps=8.21 cmp=ok t=9", i, mb)
	}
	say("@@RB SUMMARY test=transfer loop_s=8.10 ok=1 t=13.2")
	say("@@RB MSTAT line=xprt: rdma 0 0 1 0 12 400 398 0 400 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0")
	say("@@RB RPCSTAT calls=210 retrans=0")
	conn.Close()
}

// standInAccept is the server's end of the link: a connection closed
// before any byte is one the client gave up on, and another within a
// second takes its place. It returns the connection, what is to be read
// of it, and the connections accepted.
func standInAccept(l *net.TCPListener) (net.Conn, io.Reader, int, error) {
	conn, err := l.Accept()
	if err != nil {
		return nil, nil, 0, err
	}
	for n := 1; ; n++ {
		// A connection still open after a moment, silent or not, is the
		// link.
		first := make([]byte, 1)
		conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		k, err := conn.Read(first)
		conn.SetReadDeadline(time.Time{})
		if k > 0 || errors.Is(err, os.ErrDeadlineExceeded) {
			return conn, io.MultiReader(bytes.NewReader(first[:k]), conn), n, nil
		}
		l.SetDeadline(time.Now().Add(time.Second))
		next, err := l.Accept()
		if err != nil {
			return conn, conn, n, nil
		}
		conn.Close()
		conn = next
	}
}

// standInSysRq answers SysRq w (a break, Ctrl-A b on QEMU's serial mux,
// then "w") from the answerAt-th time it is asked, with a dump of one
// blocked task as the kernel prints it, and the help key ("?") with the
// help line that closes the dump.
func standInSysRq(r io.Reader, answerAt int, say func(string, ...any)) {
	br := bufio.NewReader(r)
	asks, brk, dumped := 0, false, false
	for {
		c, err := br.ReadByte()
		if err != nil {
			return
		}
		switch {
		case c == 0x01:
			next, err := br.ReadByte()
			brk = err == nil && next == 'b'
		case brk && c == 'w':
			brk = false
			if asks++; asks < answerAt {
				continue
			}
			for _, l := range []string{"sysrq: Show Blocked State",
				"task:nfsd            state:D stack:0     pid:136   tgid:136   ppid:2      flags:0x00004000",
				"Call Trace:", " <TASK>", " __schedule+0x287/0x5f0", " __ib_drain_sq+0x10c/0x190", " </TASK>"} {
				say("[   10.000000] %s", l)
			}
			dumped = true
		case brk && c == '?':
			brk = false
			if dumped {
				say("[   10.100000] sysrq: HELP : loglevel(0-9) reboot(b) show-blocked-tasks(w)")
			}
		default:
			brk = false
		}
	}
}

// standInData is the transfer test's file in the stand-in's initrd (a
// newc archive appended to the image), nil when it holds none.
func standInData(initrd string) []byte {
	b, err := os.ReadFile(initrd)
	if err != nil {
		return nil
	}
	i := bytes.Index(b, []byte(dataPath+"\x00"))
	if i < 110 || string(b[i-110:i-104]) != "070701" {
		return nil
	}
	h := i - 110
	var size int
	if _, err := fmt.Sscanf(string(b[h+54:h+62]), "%x", &size); err != nil {
		return nil
	}
	start := h + (110+len(dataPath)+1+3)&^3
	if start+size > len(b) {
		return nil
	}
	return b[start : start+size]
}

// dataSum names data by its SHA-256 prefix, "none" for no data.
func dataSum(data []byte) string {
	if data == nil {
		return "none"
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// standInKernelKind is what the stand-in plays for the kernel file it
// is given: a small file names its kind; a real bzImage (serve's
// builds) plays honest with its own build id and release, unless its
// kernel holds "RDMABOT_STANDIN=" and a kind (a posted series can add
// the string).
func standInKernelKind(kernel string) (kind, id, release string, err error) {
	vmlinux, err := unpackVmlinux(kernel, maxBzImage, maxVmlinux)
	if err != nil {
		raw, err := os.ReadFile(kernel)
		return strings.TrimSpace(string(raw)), "ab", "6.12.117", err
	}
	kind = "honest"
	if _, rest, ok := bytes.Cut(vmlinux, []byte("RDMABOT_STANDIN=")); ok {
		kind, _, _ = strings.Cut(string(rest[:min(len(rest), 32)]), "\x00")
	}
	if id, err = elfnote.BuildID(bytes.NewReader(vmlinux), int64(len(vmlinux))); err != nil {
		return "", "", "", err
	}
	release, err = ReadRelease(kernel)
	return kind, id, release, err
}

// standInPair is a QEMU pair whose qemu is the stand-in, with phase
// limits of seconds.
func standInPair(t *testing.T) *QEMUPair {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), standInName)
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig().QEMU
	cfg.Binary, cfg.Icount, cfg.QuietWait = bin, "", cfgtype.D(0)
	// The stand-ins measure nothing: a host busy with other tests must
	// not set their boots aside (TestContendedBootIsSetAside turns the
	// meter on again).
	cfg.BusyGuestWait = 0
	cfg.HeavyLock = filepath.Join(t.TempDir(), "heavy.lock")
	cfg.BootTimeout, cfg.SetupTimeout = cfgtype.D(5*time.Second), cfgtype.D(5*time.Second)
	cfg.IterationTimeout, cfg.PerMiBTimeout = cfgtype.D(3*time.Second), cfgtype.D(0)
	cfg.ShutdownTimeout, cfg.CrashGrace = cfgtype.D(2*time.Second), cfgtype.D(time.Second)
	dir := t.TempDir()
	initrd := filepath.Join(dir, "initrd")
	os.WriteFile(initrd, []byte("x"), 0o644)
	return NewQEMUPair(cfg, Image{Dir: dir, Path: initrd}, testLogger(t))
}

func standInKernel(t *testing.T, kind string) Kernel {
	p := filepath.Join(t.TempDir(), "bzImage")
	if err := os.WriteFile(p, []byte(kind), 0o644); err != nil {
		t.Fatal(err)
	}
	// The stand-in reports "ab" for a file that is no bzImage.
	return Kernel{BzImage: p, BuildID: "ab"}
}

// A kernel under test that prints what a passing run prints, faster
// than any real one, with another build id, and never stops, boots on
// the server beside the trusted base on the client, or on the client.
// What it prints decides nothing: the figures are the trusted side's,
// the data the trusted side's checks find, and never ending is its own
// failure within the phase limits, not the lab's. None of them passes
// but the liar, which moved the data as given and lied only about its
// speed.
func TestHostileKernelCannotGradeItself(t *testing.T) {
	p := standInPair(t)
	test := DefaultTest()
	test.Iterations = 2
	base := standInKernel(t, "honest")

	// Base on both sides: the stand-in's honest run passes.
	res, err := p.Run(context.Background(), base, test)
	if err != nil || !res.Passed || res.Iterations[0].WriteMBps != 8 {
		t.Fatalf("the honest stand-in: %v %+v", err, res)
	}

	for _, c := range []struct{ side, kind string }{
		{SideServer, "hostile"}, {SideServer, "hostile-spin"}, {SideClient, "hostile"}, {SideClient, "hostile-spin"},
		{SideClient, "liar"}, {SideClient, "forger"}, {SideClient, "misreader"}, {SideClient, "injector"}, {SideClient, "frontwriter"},
	} {
		t.Run(c.side+"-"+c.kind, func(t *testing.T) {
			cand := standInKernel(t, c.kind)
			cand.Peer, cand.Side = &base, c.side
			start := time.Now()
			res, err := p.Run(context.Background(), cand, test)
			took := time.Since(start)
			var infra *InfraError
			if errors.As(err, &infra) {
				t.Fatalf("the hostile kernel made a lab fault: %v", err)
			}
			// Boot, setup, 2 iterations and shutdown: 5+5+2*3+2 s at most.
			if took > 20*time.Second {
				t.Errorf("the run took %v: the hostile kernel held the pair", took)
			}
			var be *BootError
			if c.kind == "injector" && (!errors.As(err, &be) || be.Phase != "protocol" || be.Host != SideClient) {
				t.Errorf("a client printing a second BOOTED: %v, want its protocol failure", err)
			}
			if err != nil {
				return // its own failure (BootError), never a pass
			}
			if res.Passed && c.kind != "liar" {
				t.Errorf("the hostile kernel passed: %+v", res.Iterations)
			}
			if c.kind == "forger" && (res.Passed || !strings.Contains(res.Corrupt, "server's check: mismatch")) {
				t.Errorf("a client that wrote other data than it was given: passed=%v corrupt=%q", res.Passed, res.Corrupt)
			}
			if c.kind == "misreader" && (res.Passed || !strings.Contains(res.Corrupt, "server's check: mismatch")) {
				t.Errorf("a client whose reads differ from what the server sent: passed=%v corrupt=%q", res.Passed, res.Corrupt)
			}
			if c.kind == "frontwriter" && (res.Passed || !strings.Contains(res.Failure, "broke the trusted server's protocol (moved_before_go)")) {
				t.Errorf("a client writing ahead: passed=%v failure %q", res.Passed, res.Failure)
			}
			if c.kind == "liar" && (!res.Passed || res.Corrupt != "") {
				t.Errorf("a client that moved the data as given: failure %q corrupt %q", res.Failure, res.Corrupt)
			}
			// The figures are the trusted side's alone: the base client's
			// 8 MB/s, or the trusted server's own times.
			for _, it := range res.Iterations {
				if it.WriteMBps == 2718.28 || c.side == SideServer && it.WriteMBps != 8 {
					t.Errorf("the figures are not the trusted side's: %+v", it)
				}
			}
			t.Logf("%s %s: %q in %v, %d iterations", c.side, c.kind, res.Failure, took.Round(time.Millisecond), len(res.Iterations))
		})
	}
}

// The transfer test's data is fresh for each boot and given only to the
// trusted side and the client that writes it: a candidate server finds
// none in its initramfs, so one that serves reads from its own copy
// serves the wrong bytes, which the trusted client's check finds.
func TestCandidateServerHoldsNoData(t *testing.T) {
	p := standInPair(t)
	test := DefaultTest()
	test.Iterations = 2
	base := standInKernel(t, "honest")
	sums := map[string]bool{}
	for range 2 {
		res, err := p.Run(context.Background(), base, test)
		if err != nil || !res.Passed {
			t.Fatalf("the honest stand-in: %v %+v", err, res)
		}
		srv, cli := standInSaid(res.Server.Console), standInSaid(res.Client.Console)
		if srv == "none" || srv != cli {
			t.Fatalf("base on both sides: the server holds %q, the client %q", srv, cli)
		}
		sums[srv] = true
	}
	if len(sums) != 2 {
		t.Errorf("two boots had the same data: %v", sums)
	}
	for _, kind := range []string{"honest", "owncopy"} {
		cand := standInKernel(t, kind)
		cand.Peer, cand.Side = &base, SideServer
		res, err := p.Run(context.Background(), cand, test)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if got := standInSaid(res.Server.Console); got != "none" {
			t.Errorf("%s: the candidate server holds data %s", kind, got)
		}
		if standInSaid(res.Client.Console) == "none" {
			t.Errorf("%s: the trusted client holds no data", kind)
		}
		if res.Passed != (kind == "honest") || kind == "owncopy" && !strings.Contains(res.Corrupt, "differs from the one written") {
			t.Errorf("%s: passed %v failure %q corrupt %q", kind, res.Passed, res.Failure, res.Corrupt)
		}
	}
}

// The candidate client's own counts and clock decide nothing: one that
// reconnects and prints a clean transport is caught by the trusted
// server's count of the connections it asked for, and the loop's length
// is the server's.
func TestZeroPrintingClientIsCaught(t *testing.T) {
	p := standInPair(t)
	test := DefaultTest()
	test.Iterations = 2
	base := standInKernel(t, "honest")
	for _, kind := range []string{"honest", "flaky"} {
		cand := standInKernel(t, kind)
		cand.Peer, cand.Side = &base, SideClient
		res, err := p.Run(context.Background(), cand, test)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		want := map[string]int{"honest": 0, "flaky": 1}[kind]
		if h := res.Health; !h.Reported || h.Reconnects != want || h.Retrans != 0 {
			t.Errorf("%s: health %+v, want %d reconnects", kind, h, want)
		}
		if res.LoopSecs <= 0 || res.LoopSecs == 8.10 {
			t.Errorf("%s: loop_s %v is not the trusted server's", kind, res.LoopSecs)
		}
	}
	// The base on both sides: its client's counts stand.
	res, err := p.Run(context.Background(), base, test)
	if err != nil || !res.Health.Reported || res.Health.Reconnects != 0 || res.LoopSecs != 8.10 {
		t.Errorf("the base: %v health %+v loop_s %v", err, res.Health, res.LoopSecs)
	}
}

// standInSaid is what data the stand-in found in its initrd.
func standInSaid(console string) string {
	_, rest, ok := strings.Cut(console, "standin data: ")
	if !ok {
		return ""
	}
	l, _, _ := strings.Cut(rest, "\n")
	return l
}

// A guest that breaks out into its QEMU finds itself confined: it cannot
// read or write the host's files (a stand-in for the database, keys and
// token), has no environment, and its memory is bounded by a cgroup of
// its own; a QEMU stopped there is the lab's fault, said so.
func TestGuestsAreConfined(t *testing.T) {
	p := standInPair(t)
	test := DefaultTest()
	test.Iterations = 1
	secret := filepath.Join(t.TempDir(), "rdmabot.db")
	if err := os.WriteFile(secret, []byte("the bot's secrets"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(context.Background(), standInKernel(t, "snoop "+secret), test)
	if err != nil {
		t.Fatalf("the snooping stand-in's run: %v", err)
	}
	for _, want := range []string{
		"snoop read: open " + secret + ": no such file or directory",
		"snoop write: open " + filepath.Join(filepath.Dir(secret), "planted") + ": no such file or directory",
		`snoop env: ["PWD=/"]`, // bwrap's own
	} {
		if !strings.Contains(res.Server.Console, want) {
			t.Errorf("server console lacks %q:\n%s", want, res.Server.Console)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(secret), "planted")); err == nil {
		t.Error("the guest planted a file on the host")
	}

	if cg := cgroup.New("rdmabot-qemu-test", cgroup.Limits{Memory: 64 << 20}); cg == nil {
		t.Skip("this machine lets the bot make no memory cgroup: the memory bound is not tested here")
	} else {
		cg.Remove()
	}
	// The smallest guest, so the bound (its memory and QEMU's overhead,
	// 1.6 GiB) is reached soon; the host's page faults set the pace.
	p.cfg.MemoryMiB, p.cfg.BootTimeout = 64, cfgtype.D(2*time.Minute)
	start := time.Now()
	_, err = p.Run(context.Background(), standInKernel(t, "hog"), test)
	if !flow.IsInfra(err) || !strings.Contains(err.Error(), "memory limit") {
		t.Fatalf("a QEMU eating the host's memory: want the lab's fault naming the memory limit, got %v", err)
	}
	t.Logf("the hog was stopped in %v", time.Since(start).Round(time.Millisecond))
}
