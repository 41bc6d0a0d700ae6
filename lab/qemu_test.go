package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/flock"
	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/lab/console"
)

// The pair tests boot real guests: they need a lab kernel
// (RDMABOT_TEST_KERNEL, a bzImage with the lab's built-in config) and the
// guest image (RDMABOT_TEST_IMAGE, from `rdmabot lab image`).
func testArtifacts(t *testing.T) (kernel, image string) {
	t.Helper()
	kernel, image = os.Getenv("RDMABOT_TEST_KERNEL"), os.Getenv("RDMABOT_TEST_IMAGE")
	if kernel == "" || image == "" {
		t.Skip("RDMABOT_TEST_KERNEL (lab bzImage) and RDMABOT_TEST_IMAGE (rdmabot lab image) must be set")
	}
	return kernel, image
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testPair is a QEMU pair in plain TCG (tests check function, not
// timing) that records its QEMU pids.
func testPair(t *testing.T) (*QEMUPair, *[]int) {
	kernel, image := testArtifacts(t)
	_ = kernel
	cfg := DefaultConfig().QEMU
	cfg.Icount = ""
	cfg.HeavyLock = testenv.HeavyLockPath()
	// The image whose base archive `rdmabot lab image` printed; its
	// layers sit next to it. This build's scripts go over it: the image
	// may have been built from older ones.
	p := NewQEMUPair(cfg, withTheseScripts(t, image), testLogger(t))
	var mu sync.Mutex
	pids := &[]int{}
	p.hooks.started = func(role string, pid int) {
		mu.Lock()
		*pids = append(*pids, pid)
		mu.Unlock()
	}
	return p, pids
}

// withTheseScripts is the image at path with an archive of this build's
// guest scripts appended, in a directory of the test's own that links
// the image's layers.
func withTheseScripts(t *testing.T, path string) Image {
	t.Helper()
	dir := t.TempDir()
	layers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "layer-*.cpio"))
	for _, l := range layers {
		if err := os.Symlink(l, filepath.Join(dir, filepath.Base(l))); err != nil {
			t.Fatal(err)
		}
	}
	base, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	c := newCpioWriter(&b)
	err = c.file("init", 0o755, initScript)
	if err == nil {
		err = c.file("usr/lib/rdmabot/labtest.sh", 0o644, labtestScript)
	}
	if err == nil {
		err = c.close()
	}
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "rootfs.cpio")
	if err := os.WriteFile(out, append(base, b.Bytes()...), 0o644); err != nil {
		t.Fatal(err)
	}
	return Image{Dir: dir, Path: out}
}

func testKernel(t *testing.T) Kernel {
	k, _ := testArtifacts(t)
	return Kernel{BzImage: k}
}

// runPassing runs test on p and fails the test unless it passed and
// left no QEMU behind.
func runPassing(t *testing.T, p *QEMUPair, pids *[]int, test Test) *Result {
	t.Helper()
	return runPassingKernel(t, p, pids, test, testKernel(t))
}

func runPassingKernel(t *testing.T, p *QEMUPair, pids *[]int, test Test, k Kernel) *Result {
	t.Helper()
	res, err := p.Run(context.Background(), k, test)
	noSurvivors(t, *pids)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed {
		t.Fatalf("failed: %s\nclient console tail:\n%s\nserver:\n%s", res.Failure, tail(res.Client.Console, 40), tail(res.Server.Console, 30))
	}
	return res
}

// noSurvivors checks that no QEMU of the run is left, not even a zombie.
func noSurvivors(t *testing.T, pids []int) {
	t.Helper()
	if len(pids) == 0 {
		t.Error("no QEMU was started")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("qemu pid %d outlived its run (kill -0: %v)", pid, err)
		}
	}
}

// onClientBesideCopy is k as a candidate on the client beside a trusted
// copy of itself on the server: each side's file is its own, and the
// pair reads each one's build id.
func onClientBesideCopy(t *testing.T, k Kernel) Kernel {
	t.Helper()
	peer := Kernel{BzImage: filepath.Join(t.TempDir(), "bzImage")}
	img, err := os.ReadFile(k.BzImage)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(peer.BzImage, img, 0o644); err != nil {
		t.Fatal(err)
	}
	k.Peer, k.Side = &peer, SideClient
	return k
}

// The kernel boots as a candidate on the client beside a trusted peer
// (a copy of it, so each side's file is its own): the client's figures
// count only as far as the trusted server's byte counts back them, and
// each guest's build id is checked against its own file.
func TestPairTransferRxe(t *testing.T) {
	p, pids := testPair(t)
	test := DefaultTest()
	test.SizeMiB, test.Iterations = 8, 2
	k := onClientBesideCopy(t, testKernel(t))
	res := runPassingKernel(t, p, pids, test, k)
	if !strings.Contains(res.Server.Console, "@@RB SRVIO read=") {
		t.Errorf("the trusted server reported no byte counts")
	}
	// The trusted server took the times: the figures are its STIME
	// lines, and the client's own RESULT lines say about as much.
	var stime, result []string
	for _, l := range strings.Split(res.Server.Console, "\n") {
		if m, ok := parseMarker(l); ok && m.Event == "STIME" {
			stime = append(stime, m.Args["write_MBps"])
		}
	}
	for _, l := range strings.Split(res.Client.Console, "\n") {
		if m, ok := parseMarker(l); ok && m.Event == "RESULT" {
			result = append(result, m.Args["write_MBps"]+"/"+m.Args["read_MBps"])
		}
	}
	if len(stime) != 2 || fmt.Sprintf("%.2f", res.Iterations[0].WriteMBps) != stime[0] {
		t.Errorf("iterations %+v are not the server's STIME %v", res.Iterations, stime)
	}
	t.Logf("server's times %+v; the client's own write/read MB/s %v", res.Iterations, result)
	if res.Transport != "rdma" || !strings.Contains(res.MountOpts, "proto=rdma") || !strings.Contains(res.MountOpts, "port=20049") {
		t.Errorf("transport %q mount %q: want NFS over RDMA on 20049", res.Transport, res.MountOpts)
	}
	if len(res.Iterations) != 2 {
		t.Fatalf("iterations: %+v", res.Iterations)
	}
	for _, it := range res.Iterations {
		if it.Cmp != "ok" || it.WriteMBps <= 0 || it.ReadMBps <= 0 {
			t.Errorf("iteration %+v", it)
		}
	}
	ph := res.Phases
	if ph.Boot <= 0 || ph.RDMAUp <= 0 || ph.Mount <= 0 || ph.Test <= 0 || ph.Shutdown < 0 || ph.Total < ph.Boot+ph.Test {
		t.Errorf("phases %+v", ph)
	}
	if res.Client.Release == "" || res.Server.Status != "ok" || res.Client.Status != "ok" {
		t.Errorf("hosts: server %q/%q client %q/%q", res.Server.Release, res.Server.Status, res.Client.Release, res.Client.Status)
	}
	if id, err := ReadBuildID(testKernel(t).BzImage); err == nil && res.Client.BuildID != id {
		t.Errorf("guest reports build id %q, bzImage has %q", res.Client.BuildID, id)
	}
	if !strings.Contains(res.Server.Dmesg, "Linux version") || strings.Contains(res.Server.Dmesg, markerPrefix) {
		t.Errorf("server dmesg is not the kernel's log")
	}
	// A healthy transfer: the transport counted its traffic and nothing
	// went wrong.
	h := res.Health
	if !h.Reported || h.Ops == 0 || h.Sends == 0 || h.Faults() != 0 {
		t.Errorf("health %+v\n%s", h, healthLines(res))
	}
	saveHealthConsole(t, "rxe-clean", res)
	t.Logf("phases %+v, iterations %+v, health %+v", ph, res.Iterations, h)
	// The trusted server found each file the client wrote, what it read
	// of the server's file, as it was given.
	if n := strings.Count(res.Server.Console, "@@RB SRVCMP iter="); n != 2 || strings.Count(res.Server.Console, " result=ok ") != 2 {
		t.Errorf("the trusted server's checks of the client's files (%d):\n%s", n, tail(res.Server.Console, 20))
	}

	// A client whose file on the server is not what it was given while
	// its own word is ok (rb.crash=corrupt changes the server's copies
	// once the driving is over): the trusted server's check is what
	// finds it, and the run is corruption, not a pass.
	p.hooks.cmdline = "rb.crash=corrupt"
	res, err := p.Run(context.Background(), k, test)
	noSurvivors(t, *pids)
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed || !strings.Contains(res.Corrupt, "server's check: mismatch") {
		t.Errorf("a file changed on the server: passed=%v failure %q corrupt %q", res.Passed, res.Failure, res.Corrupt)
	}
	if n := strings.Count(res.Server.Console, " result=mismatch "); n != 2 {
		t.Errorf("the trusted server found %d of 2 changed files:\n%s", n, tail(res.Server.Console, 20))
	}
	for _, it := range res.Iterations {
		if it.Cmp != "ok" {
			t.Errorf("the client's own check saw the change (%+v): the server's check was not what found it", it)
		}
	}
	t.Logf("changed on the server: %s", res.Corrupt)
}

// A shaped link (the lossy profile, the power bench's slowdowns): both
// guests put netem on their side of the test link, the transfer still
// passes, and netem's own counts show it carried the test's packets.
// Arguments tc refuses end the run at once as the lab's fault.
func TestPairNetem(t *testing.T) {
	p, pids := testPair(t)
	test := DefaultTest()
	test.SizeMiB, test.Iterations = 4, 1
	test.Netem = "delay 1ms loss 0.01%"
	res := runPassing(t, p, pids, test)
	for _, h := range []Host{res.Server, res.Client} {
		if !strings.Contains(h.Console, "@@RB NETEM dev=eth0 args=delay 1ms loss 0.01%") {
			t.Errorf("%s: no NETEM marker:\n%s", h.Role, tail(h.Console, 30))
		}
		var stats marker
		for _, l := range strings.Split(h.Console, "\n") {
			if m, ok := parseMarker(l); ok && m.Event == "NETEM_STATS" {
				stats = m
			}
		}
		if stats.int("sent_pkt") < 100 {
			t.Errorf("%s: netem sent %q packets, want the test's traffic", h.Role, stats.Args["sent_pkt"])
		}
		t.Logf("%s: netem %v", h.Role, stats.Args)
	}

	p, pids = testPair(t)
	test.Netem = "bogus 1ms"
	start := time.Now()
	_, err := p.Run(context.Background(), testKernel(t), test)
	noSurvivors(t, *pids)
	var ie *InfraError
	if !errors.As(err, &ie) || ie.Op != "netem" {
		t.Fatalf("tc refusing its arguments: want the lab's netem error, got %v", err)
	}
	t.Logf("refused in %s: %v", time.Since(start).Round(time.Second), err)
}

// The lab's self-test of transport health: nfsd restarts mid-transfer
// (rb.crash=reconnect), so the client must connect again and send again;
// the data still compares equal, and the counts show it.
func TestPairReconnectCounted(t *testing.T) {
	p, pids := testPair(t)
	p.SelfTest = "reconnect"
	test := DefaultTest()
	test.SizeMiB, test.Iterations = 8, 2
	res, err := p.Run(context.Background(), testKernel(t), test)
	noSurvivors(t, *pids)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Server.Console, "@@RB BOUNCED") {
		t.Fatalf("nfsd was not restarted\n%s", tail(res.Server.Console, 30))
	}
	if !res.Passed || res.Health.Reconnects < 1 {
		t.Fatalf("passed=%v %s health %+v\n%s", res.Passed, res.Failure, res.Health, healthLines(res))
	}
	saveHealthConsole(t, "rxe-reconnect", res)
	t.Logf("health %+v", res.Health)
}

// healthLines are the health markers of both consoles.
func healthLines(res *Result) string {
	var b strings.Builder
	for _, c := range []string{res.Client.Console, res.Server.Console} {
		for _, l := range strings.Split(c, "\n") {
			if m, ok := parseMarker(l); ok && (m.Event == "MSTAT" || m.Event == "RPCSTAT" || m.Event == "SRVSTAT" || m.Event == "SRVCONN") {
				b.WriteString(strings.TrimSpace(l[strings.Index(l, markerPrefix):]) + "\n")
			}
		}
		b.WriteString("--\n")
	}
	return b.String()
}

// saveHealthConsole keeps a real run's health markers (client, "--",
// server) for TestHealthOfRealConsoles, under -update.
func saveHealthConsole(t *testing.T, name string, res *Result) {
	t.Helper()
	if !*update {
		return
	}
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "health-"+name+".txt"), []byte(healthLines(res)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// siw, NFSv4.2 over TCP: the other provider and the non-RDMA transport.
func TestPairSiwV42TCP(t *testing.T) {
	p, pids := testPair(t)
	test := Test{Kind: "transfer", SizeMiB: 4, Iterations: 1, NFSVersion: "4.2", Transport: "tcp", RDMA: "siw"}
	res, err := p.Run(context.Background(), testKernel(t), test)
	noSurvivors(t, *pids)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed || res.Transport != "tcp" || !strings.Contains(res.MountOpts, "vers=4.2") {
		t.Fatalf("passed=%v %s transport %q opts %q", res.Passed, res.Failure, res.Transport, res.MountOpts)
	}
	// (NFSv4 over TCP connects twice on a healthy mount; only the
	// retransmissions are checked here.)
	if h := res.Health; !h.Reported || h.Ops == 0 || h.Retrans != 0 {
		t.Errorf("health over tcp %+v\n%s", h, healthLines(res))
	}
	t.Logf("health over tcp %+v", res.Health)
	if !strings.Contains(res.Client.Console, "RDMA_UP dev=siw0") {
		t.Error("siw0 was not brought up")
	}
}

func TestPairFio(t *testing.T) {
	p, pids := testPair(t)
	test := DefaultTest()
	test.Kind, test.SizeMiB, test.Iterations = "fio", 8, 1
	res, err := p.Run(context.Background(), testKernel(t), test)
	noSurvivors(t, *pids)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failure == ErrNoSysVIPC.Error() {
		t.Skipf("the lab kernel %s has no SysV IPC, which fio needs: %s", testKernel(t).BzImage, res.Failure)
	}
	if !res.Passed || len(res.Iterations) != 1 || res.Iterations[0].ReadMBps <= 0 || res.Transport != "rdma" {
		t.Fatalf("passed=%v %s iterations %+v\n%s", res.Passed, res.Failure, res.Iterations, tail(res.Client.Console, 30))
	}
}

// A kernel that panics after boot is the patch's fault: a BootError that
// carries the crash and the console.
func TestPairPanicIsBootError(t *testing.T) {
	p, pids := testPair(t)
	p.SelfTest = "panic"
	res, err := p.Run(context.Background(), testKernel(t), DefaultTest())
	noSurvivors(t, *pids)
	var be *BootError
	if !errors.As(err, &be) {
		t.Fatalf("want *BootError, got %v", err)
	}
	if be.Crash == nil || be.Crash.Title != "kernel panic: sysrq triggered crash" || be.Crash.Kind != console.Panic {
		t.Fatalf("crash %+v", be.Crash)
	}
	if flow.IsInfra(err) || res == nil || !strings.Contains(be.Console, "Kernel panic") {
		t.Errorf("infra=%v res=%v console:\n%s", flow.IsInfra(err), res != nil, be.Console)
	}
}

// The reference's hang: the server vanishes under a client's writeback.
// The hung task is part of the result (the report decides), and the run
// stops once its trace is complete.
func TestPairHungTask(t *testing.T) {
	p, pids := testPair(t)
	p.SelfTest = "hang"
	test := DefaultTest()
	test.SizeMiB, test.Iterations, test.HungTaskSecs = 4, 1, 10
	start := time.Now()
	res, err := p.Run(context.Background(), testKernel(t), test)
	noSurvivors(t, *pids)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Crash()
	if c == nil || c.Kind != console.Hang || !c.Complete || res.Passed {
		t.Fatalf("crash %+v passed=%v failure %q\n%s", c, res.Passed, res.Failure, tail(res.Client.Console, 40))
	}
	if !strings.HasPrefix(c.Title, "INFO: task hung in ") || res.Failure != c.Title {
		t.Errorf("title %q failure %q", c.Title, res.Failure)
	}
	t.Logf("%s after %v", c.Title, time.Since(start).Round(time.Second))
}

// A stall with no hung-task report (the server vanished under the
// client's writeback, the hung-task timeout longer than the test's
// deadline): when the deadline passes the host asks the live guest for
// its blocked tasks, and the result shows them with their stacks.
func TestPairStallDumpsBlockedTasks(t *testing.T) {
	p, pids := testPair(t)
	p.SelfTest = "hang"
	p.cfg.IterationTimeout.Duration = 20 * time.Second
	test := DefaultTest()
	test.SizeMiB, test.Iterations, test.HungTaskSecs = 4, 1, 600
	start := time.Now()
	res, err := p.Run(context.Background(), testKernel(t), test)
	noSurvivors(t, *pids)
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed || !res.Stalled || !regexp.MustCompile(`^transfer stalled: 0 of 1 iterations in \d+ s on rxe, NFS 3$`).MatchString(res.Failure) || res.Crash() != nil {
		t.Fatalf("failure %q crash %+v\n%s", res.Failure, res.Crash(), tail(res.Client.Console, 40))
	}
	if res.Server.Blocked != "" {
		t.Errorf("the vanished server was asked for its blocked tasks: %q", res.Server.Blocked)
	}
	if !taskLine.MatchString(strings.Split(res.Client.Blocked, "\n")[0]) || !strings.Contains(res.Client.Blocked, "__schedule") {
		t.Errorf("the client's blocked tasks:\n%s\nconsole:\n%s", res.Client.Blocked, tail(res.Client.Console, 60))
	}
	// The client's writes to the vanished server are in flight.
	if !strings.Contains(res.Client.RPCTasks, "-pid- flgs status") || !strings.Contains(res.Client.RPCTasks, " nfsv3 ") {
		t.Errorf("the client's RPC tasks:\n%s\nconsole:\n%s", res.Client.RPCTasks, tail(res.Client.Console, 60))
	}
	log := res.StallLog(nil)
	if !strings.HasPrefix(log, "client, last kernel lines:") || !strings.Contains(log, "client, blocked tasks (SysRq w):") ||
		!strings.Contains(log, "client, RPC tasks in flight (rpc_debug):") {
		t.Errorf("stall log:\n%s", log)
	}
	t.Logf("after %v:\n%s\n--- the whole dump:\n%s\n--- RPC tasks:\n%s", time.Since(start).Round(time.Second), log, res.Client.Blocked, res.Client.RPCTasks)
}

// A QEMU killed from outside mid-run is the lab's fault.
func TestPairQEMUKilledIsInfra(t *testing.T) {
	p, pids := testPair(t)
	p.hooks.event = func(ev consoleEvent, g map[string]*guest) {
		if ev.role == "client" && strings.Contains(ev.text, "@@RB RDMA_UP") {
			syscall.Kill(g["server"].cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	_, err := p.Run(context.Background(), testKernel(t), DefaultTest())
	noSurvivors(t, *pids)
	var ie *InfraError
	if !errors.As(err, &ie) || ie.Host != "server" || ie.Op != "qemu died" {
		t.Fatalf("want InfraError qemu died on server, got %v", err)
	}
}

// Cancelling the context ends both guests at once.
func TestPairCancel(t *testing.T) {
	p, pids := testPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.hooks.event = func(ev consoleEvent, _ map[string]*guest) {
		if strings.Contains(ev.text, "@@RB BOOTED") {
			cancel()
		}
	}
	_, err := p.Run(ctx, testKernel(t), DefaultTest())
	noSurvivors(t, *pids)
	if !flow.IsInfra(err) || !errors.Is(err, context.Canceled) {
		t.Fatalf("want an InfraError wrapping context.Canceled, got %v", err)
	}
}

// lab.qemu.heavy_lock: a run waits while a kernel build holds the lock,
// and a wait its context ends is the lab's fault, before any guest starts.
func TestPairWaitsForTheHeavyLock(t *testing.T) {
	p, pids := testPair(t)
	p.cfg.HeavyLock = filepath.Join(t.TempDir(), "heavy.lock")
	held, err := flock.Exclusive(context.Background(), p.cfg.HeavyLock)
	if err != nil {
		t.Fatal(err)
	}
	defer held()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = p.Run(ctx, testKernel(t), DefaultTest())
	var ie *InfraError
	if !errors.As(err, &ie) || ie.Op != "heavy lock" {
		t.Fatalf("a run behind a held heavy lock: want INFRA heavy lock, got %v", err)
	}
	if len(*pids) != 0 {
		t.Fatalf("%d guests started while the lock was held", len(*pids))
	}
}

// A port someone holds is retried on another; when every try fails the
// error names the port, as the lab's fault.
func TestPairPortTaken(t *testing.T) {
	p, pids := testPair(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().(*net.TCPAddr).Port
	tries := 0
	p.hooks.port = func() (int, error) {
		tries++
		if tries == 1 {
			return busy, nil
		}
		return freePort()
	}
	test := DefaultTest()
	test.SizeMiB, test.Iterations = 2, 1
	res, err := p.Run(context.Background(), testKernel(t), test)
	noSurvivors(t, *pids)
	if err != nil || !res.Passed || tries != 2 {
		t.Fatalf("after a taken port: tries=%d err=%v res=%+v", tries, err, res)
	}

	p, pids = testPair(t)
	p.hooks.port = func() (int, error) { return busy, nil }
	_, err = p.Run(context.Background(), testKernel(t), test)
	noSurvivors(t, *pids)
	var ie *InfraError
	if !errors.As(err, &ie) || ie.Op != "link port" || !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("want InfraError link port, got %v", err)
	}
}

// QEMU that cannot start (missing binary, an option it rejects) is the
// lab's fault, with QEMU's own message.
func TestPairQEMUFailsToStart(t *testing.T) {
	p, _ := testPair(t)
	p.cfg.Binary = "/nonexistent/qemu-system-x86_64"
	_, err := p.Run(context.Background(), testKernel(t), DefaultTest())
	if !flow.IsInfra(err) {
		t.Fatalf("missing binary: want InfraError, got %v", err)
	}
	p, pids := testPair(t)
	p.cfg.Icount = "shift=bogus"
	_, err = p.Run(context.Background(), testKernel(t), DefaultTest())
	noSurvivors(t, *pids)
	if !flow.IsInfra(err) || !strings.Contains(err.Error(), "icount") {
		t.Fatalf("bad option: want InfraError quoting QEMU, got %v", err)
	}
}
