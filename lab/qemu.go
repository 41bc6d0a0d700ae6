package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rdmabot/rdmabot/lab/console"

	"github.com/rdmabot/rdmabot/internal/flock"
)

// QEMUPair is the built-in pair: two TCG guests whose only link is a QEMU
// socket netdev on 127.0.0.1, the server listening on a port of its own,
// so several pairs can run at once. There is no user-mode network.
type QEMUPair struct {
	cfg   QEMUConfig
	image Image
	log   *slog.Logger
	// extraArgs adds QEMU arguments per role (the SSH driver's tests use
	// it for a restricted forward to sshd); extraInitrd replaces the
	// image per role.
	extraArgs   map[string][]string
	extraInitrd map[string]string
	extraLayers []string
	// idle boots both guests and leaves them to an outside driver (the
	// SSH driver's tests, through startIdle).
	idle  bool
	hooks testHooks
	// fstests returns the built fstests tree's archive (EnsureFstests),
	// for fstests runs; nil: the pair runs none.
	fstests func(context.Context) (string, error)

	// SelfTest makes the kernel fail on purpose, to check crash
	// detection end to end: "panic" (sysrq-c), "hang" (the server
	// vanishes under the client's writeback), or "warn", "oops", "bug"
	// (kernels with lab/console/testdata/selftest-crash.patch only).
	SelfTest string
}

// testHooks let tests reach into a run: inject faults, watch processes.
type testHooks struct {
	cmdline string              // appended to both guests' command lines
	port    func() (int, error) // replaces freePort
	started func(role string, pid int)
	event   func(ev consoleEvent, g map[string]*guest)
	// guestWait replaces a boot's measured guest CPU wait.
	guestWait func(measured float64) float64
}

// NewQEMUPair returns the pair for a guest image from EnsureImage.
func NewQEMUPair(cfg QEMUConfig, image Image, log *slog.Logger) *QEMUPair {
	return &QEMUPair{cfg: cfg, image: image, log: log}
}

// WithFstests lets the pair run the fstests test: with the tree built
// from f's source (EnsureFstests) in dirs' cache, on first use.
func (p *QEMUPair) WithFstests(dirs Dirs, f FstestsConfig) {
	p.fstests = func(ctx context.Context) (string, error) {
		return EnsureFstests(ctx, filepath.Join(dirs.Cache, "fstests"), f, p.log)
	}
}

// Mode names how the pair runs, for results.
func (p *QEMUPair) Mode() string {
	if p.cfg.Icount == "" {
		return "qemu-tcg"
	}
	return "qemu-tcg-icount(" + p.cfg.Icount + ")"
}

const (
	serverIP = "10.99.0.1"
	clientIP = "10.99.0.2"
)

func (p *QEMUPair) cmdline(role string, t Test) string {
	ip, peer := serverIP, clientIP
	if role == "client" {
		ip, peer = clientIP, serverIP
	}
	sshd := len(p.extraArgs[role]) > 0
	if p.idle {
		role = "idle"
	}
	// panic=-1: reboot at once, which -no-reboot turns into QEMU exiting.
	c := fmt.Sprintf("console=ttyS0 panic=-1 mitigations=off rb.role=%s rb.ip=%s rb.peer=%s rb.rdma=%s rb.proto=%s rb.vers=%s rb.test=%s rb.mb=%d rb.iters=%d rb.hung=%d",
		role, ip, peer, t.RDMA, t.Transport, t.NFSVersion, t.Kind, t.SizeMiB, t.Iterations, t.HungTaskSecs)
	if sshd {
		c += " rb.sshd=1"
	}
	if t.Netem != "" {
		c += " rb.netem=" + strings.ReplaceAll(t.Netem, " ", ",")
	}
	if l := t.Load; l != nil {
		// The lab kernel preempts only when asked (PREEMPT_DYNAMIC, none
		// by default): under pressure a one-CPU 6.12 server spins in
		// svc_rdma_post_send() and starves its own completions otherwise
		// (builder/kbuild/configs/qemu-softroce.config).
		c += " preempt=full"
		c += fmt.Sprintf(" rb.secs=%d rb.readers=%d rb.writers=%d rb.credits=%d rb.threads=%d", l.Seconds, l.Readers, l.Writers, l.Credits, l.Threads)
	}
	if f := t.Fstests; f != nil {
		c += " rb.tests=" + strings.Join(f.Tests, ",")
		if f.FsxOps > 0 {
			c += fmt.Sprintf(" rb.fsxops=%d", f.FsxOps)
		}
	}
	if p.SelfTest != "" {
		c += " rb.crash=" + p.SelfTest
	}
	if p.hooks.cmdline != "" {
		c += " " + p.hooks.cmdline
	}
	return c
}

// Run implements Pair.
func (p *QEMUPair) Run(ctx context.Context, k Kernel, t Test) (*Result, error) {
	// Read before the wait for a quiet host and the boots: unpacking a
	// bzImage takes a second of CPU.
	k, err := withBuildIDs(k)
	if err != nil {
		return nil, err
	}
	// The fstests test's figures are never compared either: its
	// results are its tests'.
	return repeatWhileBusy(ctx, p.cfg, p.log, t.Load != nil || t.Fstests != nil, func() (*Result, error) { return p.runOnce(ctx, k, t) })
}

// withBuildIDs is k with each side's build id read from its bzImage
// where not given, for what each guest reports to be checked against: a
// candidate that reports another one says something untrue of itself.
// A kernel whose id cannot be read is not booted: the trusted one's is
// the lab's gap (InfraError, the operator's base build), the
// candidate's its own failure (BootError).
func withBuildIDs(k Kernel) (Kernel, error) {
	var err error
	if k.BuildID == "" {
		if k.BuildID, err = ReadBuildID(k.BzImage); err != nil {
			return k, unidentified(k, k.Side, err)
		}
	}
	if k.Peer != nil && k.Peer.BuildID == "" {
		peer := *k.Peer
		if peer.BuildID, err = ReadBuildID(peer.BzImage); err != nil {
			return k, unidentified(peer, map[string]string{SideServer: SideClient, SideClient: SideServer}[k.Side], err)
		}
		k.Peer = &peer
	}
	return k, nil
}

// unidentified is the error of a kernel on role (the one kernel on both
// sides when "") whose build id cannot be read.
func unidentified(k Kernel, role string, err error) error {
	if k.Peer != nil {
		return &BootError{Host: role, Phase: "verify", Err: fmt.Errorf("the build id of the kernel built cannot be read: %w", err)}
	}
	return &InfraError{Host: role, Op: "kernel artifact", Err: fmt.Errorf("the trusted kernel's build id cannot be read: %w", err)}
}

// repeatWhileBusy runs boot until one is measured while the guests'
// threads waited for a CPU no more than BusyGuestWait on average; after
// BusyRepeats repeats the host is too busy to measure, which is the
// lab's fault. A selfLoaded test (the pressure test) is never set
// aside: its guests keep both cores busy and wait for each other (0.60-
// 0.67), and its traffic's host-side work reads as other programs' CPU
// (0-0.79 cores), all with nothing else running; the wait for a quiet
// host before each boot still keeps neighbours off it. Its figures are
// never compared, only its faults and crashes.
func repeatWhileBusy(ctx context.Context, cfg QEMUConfig, log *slog.Logger, selfLoaded bool, boot func() (*Result, error)) (*Result, error) {
	var busy []float64
	var waited float64
	for {
		res, err := boot()
		if res != nil {
			waited += res.QuietWait
		}
		if res == nil || cfg.BusyGuestWait <= 0 || res.GuestCPUWait <= cfg.BusyGuestWait || ctx.Err() != nil || selfLoaded {
			if res != nil {
				res.Busy, res.QuietWait = busy, waited
			}
			return res, err
		}
		busy = append(busy, res.GuestCPUWait)
		log.Warn("lab: boot measured under contention, not used", "guest_cpu_wait", res.GuestCPUWait,
			"other_cores", res.HostOtherCores, "limit", cfg.BusyGuestWait, "boot_error", err)
		if len(busy) > cfg.BusyRepeats {
			return nil, &InfraError{Op: "busy host", Err: &BusyError{Waits: busy, Limit: cfg.BusyGuestWait}}
		}
	}
}

// BusyError is a host too busy to measure: every boot in a row was set
// aside as contended. Waits are those boots' figures, for whoever counts
// the boots a comparison cost.
type BusyError struct {
	Waits []float64
	Limit float64
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("the guests waited for a CPU %s on average during %d boots in a row (limit %.2f): the host is too busy to measure",
		twoDecimals(e.Waits), len(e.Waits), e.Limit)
}

func twoDecimals(c []float64) string {
	s := make([]string, len(c))
	for i, x := range c {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, ", ")
}

// runOnce is one boot of the pair.
func (p *QEMUPair) runOnce(ctx context.Context, k Kernel, t Test) (*Result, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if t.RDMA != "rxe" && t.RDMA != "siw" {
		return nil, fmt.Errorf("the QEMU pair has soft RDMA only (rxe, siw), not %q", t.RDMA)
	}
	if k.Peer != nil && k.Side != SideServer && k.Side != SideClient {
		return nil, fmt.Errorf("a kernel with a trusted peer boots on the server or the client, not %q", k.Side)
	}
	for _, role := range []string{"server", "client"} {
		hk := k.On(role)
		if hk.Modules != "" {
			return nil, fmt.Errorf("the QEMU pair boots kernels with everything built in; %s has modules", hk.BzImage)
		}
		if _, err := os.Stat(hk.BzImage); err != nil {
			return nil, &InfraError{Op: "kernel artifact", Err: err}
		}
	}
	initrd, err := p.initrd(ctx, t)
	if err != nil {
		var ie *InfraError
		if errors.As(err, &ie) {
			return nil, err
		}
		return nil, &InfraError{Op: "guest image", Err: err}
	}
	initrds, cleanup, err := dataInitrds(k, t, initrd)
	if err != nil {
		return nil, &InfraError{Op: "guest image", Err: err}
	}
	defer cleanup()
	release, err := flock.Exclusive(ctx, p.cfg.HeavyLock)
	if err != nil {
		return nil, &InfraError{Op: "heavy lock", Err: err}
	}
	defer release()
	var waited time.Duration
	if max := p.cfg.QuietWait.Duration; max > 0 {
		var quiet bool
		if waited, quiet, err = waitQuiet(ctx, procStat, time.Now, sleepCtx, p.cfg.QuietCores, max); err != nil {
			return nil, err
		}
		if !quiet {
			p.log.Warn("lab: the host stayed busy; booting anyway", "waited", waited.Round(time.Second), "quiet_cores", p.cfg.QuietCores)
		} else if waited > 2*time.Second {
			p.log.Info("lab: waited for the host to be quiet", "waited", waited.Round(time.Second))
		}
	}
	r := &run{pair: p, test: t, kernel: k, initrd: initrd, initrds: initrds, events: make(chan consoleEvent, 1024)}
	r.init()
	defer r.stop()
	meter := startHostMeter(procStat, time.Now)
	if err := r.launch(ctx); err != nil {
		return nil, err
	}
	var pids []int
	for _, g := range r.guests {
		pids = append(pids, g.cmd.Process.Pid)
	}
	wait := startWaitMeter(pids, 500*time.Millisecond)
	defer wait.finish()
	r.loop(ctx)
	if r.stalled() {
		r.dumpBlocked(ctx)
	}
	r.stop()
	res, err := r.result(ctx)
	if res != nil {
		res.QuietWait = waited.Seconds()
		res.HostOtherCores = meter.otherCores(wait.ownCPU(r.qemuCPU()))
		if wall := time.Since(meter.t0).Seconds(); wall > 0 {
			res.GuestCPUWait = wait.finish().Seconds() / wall
		}
		if h := p.hooks.guestWait; h != nil {
			res.GuestCPUWait = h(res.GuestCPUWait)
		}
	}
	return res, err
}

// initrd is the image with the layers the test needs.
func (p *QEMUPair) initrd(ctx context.Context, t Test) (string, error) {
	layers := append([]string(nil), p.extraLayers...)
	if t.Kind == "fio" {
		layers = append(layers, "fio")
	}
	if t.Kind == "fstests" {
		return p.fstestsInitrd(ctx, layers)
	}
	path, err := p.image.WithLayers(layers...)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err != nil {
		return "", err
	}
	return path, nil
}

// dataInitrds are the initrds of the guests that hold the transfer
// test's data, made for this boot in a directory of its own (cleanup
// removes it): initrd with fresh data appended, for the roles holdsData
// names. The others boot initrd alone.
func dataInitrds(k Kernel, t Test, initrd string) (map[string]string, func(), error) {
	if t.Kind != "transfer" {
		return nil, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "rdmabot-data-")
	if err != nil {
		return nil, func() {}, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	data, err := newTestData(dataMiB(k, t))
	if err == nil {
		var path string
		if path, err = withData(dir, initrd, data); err == nil {
			m := map[string]string{}
			for _, role := range []string{"server", "client"} {
				if holdsData(k, role) {
					m[role] = path
				}
			}
			return m, cleanup, nil
		}
	}
	cleanup()
	return nil, func() {}, err
}

// ErrNoSysVIPC: fio keeps its job table in SysV shared memory, which the
// kernel under test was built without (CONFIG_SYSVIPC=y is needed).
var ErrNoSysVIPC = errors.New("fio: the kernel lacks SysV IPC (CONFIG_SYSVIPC=y)")

// run is the state of one pair run; only Run's goroutine touches it.
type run struct {
	pair   *QEMUPair
	test   Test
	kernel Kernel
	initrd string
	// initrds replace initrd for the roles given the test's data.
	initrds map[string]string
	events  chan consoleEvent
	guests  map[string]*guest
	start   time.Time
	end     time.Time

	mon      map[string]*console.Monitor
	consoles map[string]*keptConsole
	lines    map[string]int
	seen     map[string]map[string]time.Time // role -> event -> first host time
	last     map[string]marker               // role -> event -> last marker
	// proto follows each side's markers; a marker it refuses is not
	// recorded, and ends the run as the candidate's failure.
	proto   map[string]*protocol
	exitErr map[string]error
	iters   []Iteration
	// clientCmp is the client's data check per iteration, when the
	// server times the run.
	clientCmp map[int]string
	// serverChecks is the server's check of each iteration's file
	// against the data the host gave it (SRVCMP).
	serverChecks serverChecks
	// fstests are the client's fstests results (Test.Fstests).
	fstests *fstestsResults
	fatalAt time.Time
	// lastProgress is when the last iteration reported.
	lastProgress time.Time
	timedOut     string // the phase whose deadline passed
	timedOutAt   time.Time
	stopped      bool
	// dumps are the guests' blocked-task dumps, once asked for.
	dumps map[string]*blockedDump
}

func (r *run) init() {
	r.guests = map[string]*guest{}
	r.mon = map[string]*console.Monitor{"server": console.NewMonitor(), "client": console.NewMonitor()}
	r.consoles = map[string]*keptConsole{"server": newKeptConsole(keptConsoleHalf), "client": newKeptConsole(keptConsoleHalf)}
	r.lines = map[string]int{}
	r.seen = map[string]map[string]time.Time{"server": {}, "client": {}}
	r.last = map[string]marker{}
	r.proto = map[string]*protocol{"server": newProtocol("server"), "client": newProtocol("client")}
	r.exitErr = map[string]error{}
	r.clientCmp = map[int]string{}
	r.serverChecks = newServerChecks()
	if f := r.test.Fstests; f != nil {
		r.fstests = &fstestsResults{group: f.Tests}
	}
}

// timedByServer says the trusted server takes the times: the client
// runs the kernel under test. The pressure test's figures judge nothing
// (only its faults do), so its client's are kept.
func (r *run) timedByServer() bool {
	return !r.kernel.Trusted("client") && r.test.Load == nil && r.test.Fstests == nil
}

func (r *run) spec(role, netdev, mac string) guestSpec {
	p := r.pair
	initrd := r.initrd
	if x := r.initrds[role]; x != "" {
		initrd = x
	}
	if x := p.extraInitrd[role]; x != "" {
		initrd = x
	}
	cmdline := p.cmdline(role, r.test)
	if r.timedByServer() {
		// The server takes the times and checks the data; the client
		// writes what it read back to the server for that check.
		cmdline += " rb.timer=server"
	}
	return guestSpec{
		role: role, binary: p.cfg.Binary, kernel: r.kernel.On(role).BzImage, initrd: initrd,
		cmdline: cmdline, memMiB: p.cfg.MemoryMiB, icount: p.cfg.Icount,
		netdev: netdev, mac: mac, extra: p.extraArgs[role], reboot: p.idle,
	}
}

// launch brings up the server, waits for its socket to listen, then the
// client. A port someone else took is retried on a fresh one.
func (r *run) launch(ctx context.Context) error {
	r.start = time.Now()
	bwrapBin, err := exec.LookPath("bwrap")
	if err != nil {
		return &InfraError{Op: "start qemu", Err: fmt.Errorf("guests run under bwrap, and it is not installed here (scripts/setup.sh installs it): %w", err)}
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		pick := freePort
		if r.pair.hooks.port != nil {
			pick = r.pair.hooks.port
		}
		port, err := pick()
		if err != nil {
			return &InfraError{Op: "port", Err: err}
		}
		srv, err := startGuest(r.spec("server", fmt.Sprintf("socket,id=n0,listen=127.0.0.1:%d", port), "52:54:00:00:00:01"), bwrapBin, r.events)
		if err != nil {
			return &InfraError{Host: "server", Op: "start qemu", Err: err}
		}
		r.guests["server"] = srv
		r.started("server", srv)
		var early []consoleEvent
		exited, err := waitListening(ctx, srv.cmd.Process.Pid, port, r.events, &early, 15*time.Second)
		if exited == nil && err == nil {
			r.pair.log.Debug("lab: server listening", "port", port)
			for _, ev := range early {
				r.handle(ev)
			}
			break
		}
		if err != nil {
			return &InfraError{Host: "server", Op: "link port", Err: err}
		}
		srv.done = true
		delete(r.guests, "server")
		lastErr = fmt.Errorf("qemu exited before listening on 127.0.0.1:%d: %v: %s", port, exited.err, srv.stderr)
		if !strings.Contains(srv.stderr.String(), "Address already in use") {
			return &InfraError{Host: "server", Op: "start qemu", Err: lastErr}
		}
		r.pair.log.Info("lab: link port taken, retrying", "port", port)
	}
	if r.guests["server"] == nil {
		return &InfraError{Host: "server", Op: "link port", Err: lastErr}
	}
	port := portOf(r.guests["server"])
	cli, err := startGuest(r.spec("client", fmt.Sprintf("socket,id=n0,connect=127.0.0.1:%s", port), "52:54:00:00:00:02"), bwrapBin, r.events)
	if err != nil {
		return &InfraError{Host: "client", Op: "start qemu", Err: err}
	}
	r.guests["client"] = cli
	r.started("client", cli)
	return nil
}

func (r *run) started(role string, g *guest) {
	r.pair.log.Debug("lab: qemu started", "role", role, "pid", g.cmd.Process.Pid, "args", g.cmd.Args)
	if h := r.pair.hooks.started; h != nil {
		h(role, g.cmd.Process.Pid)
	}
}

func portOf(g *guest) string {
	for _, a := range g.cmd.Args {
		if i := strings.Index(a, "listen=127.0.0.1:"); i >= 0 {
			return a[i+len("listen=127.0.0.1:"):]
		}
	}
	return ""
}

// handle records one console event.
func (r *run) handle(ev consoleEvent) {
	if ev.exited {
		r.exitErr[ev.role] = ev.err
		if g := r.guests[ev.role]; g != nil {
			g.done = true
		}
		return
	}
	r.lines[ev.role]++
	r.consoles[ev.role].add(ev.text)
	if d := r.dumps[ev.role]; d != nil {
		d.add(ev.text)
	}
	if m, ok := parseMarker(ev.text); ok {
		if !r.proto[ev.role].accept(m) {
			r.mon[ev.role].Line("")
			return
		}
		if _, dup := r.seen[ev.role][m.Event]; !dup {
			r.seen[ev.role][m.Event] = ev.at
		}
		r.last[ev.role+" "+m.Event] = m
		// The side that takes the times reports the figures: the client,
		// or the trusted server when the client runs the kernel under
		// test. Lines of the same names from the other side are not
		// results.
		if ev.role == "server" && m.Event == "SRVCMP" {
			r.serverChecks.note(m)
		}
		if ev.role == "client" && (m.Event == "FSTEST" || m.Event == "FSTEST_LOG") {
			r.noteFstest(m, ev)
		}
		timer, events := "client", []string{"RESULT", "FIO"}
		if r.timedByServer() {
			timer, events = "server", []string{"STIME"}
			if ev.role == "client" && m.Event == "RESULT" {
				r.clientCmp[m.int("iter")] = m.Args["cmp"]
			}
		}
		if ev.role == timer && slices.Contains(events, m.Event) {
			r.iters = append(r.iters, iterationOf(m))
			r.lastProgress = ev.at
		}
		// The monitor watches kernel output only.
		r.mon[ev.role].Line("")
		return
	}
	if c := r.mon[ev.role].Line(ev.text); c != nil && c.Fatal && r.fatalAt.IsZero() {
		r.fatalAt = ev.at
		r.pair.log.Info("lab: crash on console", "host", ev.role, "kind", c.Kind)
	}
}

// violated is the side whose console broke the protocol first ("" when
// neither did).
func (r *run) violated() string {
	for _, role := range []string{"server", "client"} {
		if r.proto[role].violation != "" {
			return role
		}
	}
	return ""
}

func (r *run) has(role, event string) bool {
	_, ok := r.seen[role][event]
	return ok
}

func (r *run) both(event string) (time.Time, bool) {
	a, okA := r.seen["server"][event]
	b, okB := r.seen["client"][event]
	if !okA || !okB {
		return time.Time{}, false
	}
	if a.After(b) {
		return a, true
	}
	return b, true
}

// deadline is when the current phase must be over, and its name.
func (r *run) deadline() (time.Time, string) {
	c := r.pair.cfg
	booted, ok := r.both("BOOTED")
	if !ok {
		return r.start.Add(c.BootTimeout.Duration), "boot"
	}
	if r.pair.idle {
		return booted.Add(c.SetupTimeout.Duration), "idle"
	}
	mounted, ok := r.seen["client"]["MOUNTED"]
	if !ok {
		return booted.Add(c.SetupTimeout.Duration), "setup"
	}
	if done, ok := r.seen["client"]["SUMMARY"]; ok {
		return done.Add(c.ShutdownTimeout.Duration), "shutdown"
	}
	if done, ok := r.seen["client"]["POWEROFF"]; ok {
		return done.Add(c.ShutdownTimeout.Duration), "shutdown"
	}
	if f := r.test.Fstests; f != nil {
		// The whole group, hung or not, within its bound.
		return mounted.Add(f.Timeout), "test"
	}
	if l := r.test.Load; l != nil {
		// The load runs for its seconds on the guest's clock; what it has
		// in flight then must finish within an iteration's timeout.
		return mounted.Add(time.Duration(l.Seconds)*time.Second + c.IterationTimeout.Duration), "test"
	}
	per := c.IterationTimeout.Duration + time.Duration(r.test.SizeMiB)*c.PerMiBTimeout.Duration
	progress := mounted
	if n := len(r.iters); n > 0 {
		progress = r.lastProgress
	}
	// Progress lines buy an iteration's time each, but no more than the
	// test's iterations together: a kernel that reports progress without
	// end does not hold the pair (the host's clock bounds the phase).
	end := progress.Add(per)
	if limit := mounted.Add(time.Duration(max(r.test.Iterations, 1)) * per); end.After(limit) {
		end = limit
	}
	return end, "test"
}

// loop reads both consoles until the run is over: both guests gone, a
// fatal crash fully printed (or its grace passed), a phase deadline
// missed, or ctx done.
func (r *run) loop(ctx context.Context) {
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	for {
		if r.guests["server"].done && r.guests["client"].done {
			return
		}
		if r.pair.idle && r.has("server", "IDLE") && r.has("client", "IDLE") {
			return
		}
		// A link that could not be shaped makes the run meaningless; the
		// peer would wait minutes for a server that is not coming.
		if r.has("server", "NETEM_FAIL") || r.has("client", "NETEM_FAIL") {
			return
		}
		// Markers no script of ours prints decide the run already, as
		// does a client that broke the trusted server's protocol.
		if r.violated() != "" || r.has("server", "DRIVE_FAIL") {
			return
		}
		// A guest gone without saying POWEROFF (killed, crashed, reset)
		// leaves its peer waiting for nothing: end the run, unless a
		// crash report is still being printed.
		for role, g := range r.guests {
			if g.done && !r.has(role, "POWEROFF") && r.fatalAt.IsZero() {
				return
			}
		}
		if !r.fatalAt.IsZero() {
			pending := r.mon["server"].Pending() || r.mon["client"].Pending()
			if !pending || time.Since(r.fatalAt) > r.pair.cfg.CrashGrace.Duration {
				return
			}
		}
		dl, phase := r.deadline()
		if wait := time.Until(dl); wait <= 0 {
			r.timedOut, r.timedOutAt = phase, time.Now()
			r.pair.log.Info("lab: phase deadline passed", "phase", phase)
			return
		} else {
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			if !r.fatalAt.IsZero() && wait > time.Second {
				wait = time.Second
			}
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return
		case ev := <-r.events:
			r.handle(ev)
			if h := r.pair.hooks.event; h != nil {
				h(ev, r.guests)
			}
		case <-timer.C:
		}
	}
}

// stop ends both guests: SIGTERM to each process group, SIGKILL after 5 s,
// and waits for both to be reaped, so no QEMU outlives the run.
func (r *run) stop() {
	if r.stopped {
		return
	}
	r.stopped = true
	r.end = time.Now()
	for _, g := range r.guests {
		if !g.done {
			g.signal(syscall.SIGTERM)
		}
	}
	kill := time.NewTimer(5 * time.Second)
	defer kill.Stop()
	for {
		alive := false
		for _, g := range r.guests {
			alive = alive || !g.done
		}
		if !alive {
			return
		}
		select {
		case ev := <-r.events:
			r.handle(ev)
		case <-kill.C:
			for _, g := range r.guests {
				g.signal(syscall.SIGKILL)
			}
		}
	}
}

func (r *run) host(role string) Host {
	h := Host{Role: role, Console: r.consoles[role].String()}
	h.Dmesg = dmesgOf(h.Console)
	if m, ok := r.last[role+" BOOTED"]; ok {
		h.Release, h.BuildID = m.Args["kernel"], m.Args["build_id"]
	}
	if m, ok := r.last[role+" POWEROFF"]; ok {
		h.Status = m.Args["status"]
	}
	if m, ok := r.last[role+" MEM"]; ok {
		h.MemUsedK = m.int("used_kB")
	}
	h.Crashes = r.mon[role].Crashes()
	if d := r.dumps[role]; d != nil {
		h.Blocked, h.LastLines, h.RPCTasks = d.text(), d.before, d.rpcText()
	}
	return h
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// result classifies the run: the lab's fault, the kernel not booting, or
// a Result (passed or not) for the report to judge.
func (r *run) result(ctx context.Context) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, &InfraError{Op: "run", Err: err}
	}
	res := &Result{
		Pair: "qemu", Mode: r.pair.Mode(), Kernel: r.kernel, Test: r.test, Iterations: r.iters,
		Server: r.host("server"), Client: r.host("client"),
	}
	crashed := res.Crash() != nil && res.Crash().Fatal
	// A QEMU that died of a signal we did not send, with no crash on its
	// console, is the host's doing (OOM killer, an operator), not the
	// kernel's.
	for _, role := range []string{"server", "client"} {
		g := r.guests[role]
		err := r.exitErr[role]
		if err != nil && !g.killed && !crashed {
			return nil, &InfraError{Host: role, Op: "qemu died", Err: fmt.Errorf("%v: %s", err, g.stderr)}
		}
	}
	if role := r.violated(); role != "" {
		return res, protocolError(r.kernel, role, r.proto[role].violation, tail(r.consoles[role].String(), 60))
	}
	for _, role := range []string{"server", "client"} {
		if m, ok := r.last[role+" NETEM_FAIL"]; ok {
			if !r.kernel.Trusted(role) {
				// The candidate's side says its link could not be
				// shaped, where the trusted kernel's could: its own
				// failure (or its word), never the lab's.
				return res, &BootError{Host: role, Phase: "netem", Err: fmt.Errorf("the kernel under test could not shape its link: %s", m.Args["msg"]), Console: tail(r.consoles[role].String(), 60)}
			}
			return nil, netemError(role, m.Args["msg"])
		}
	}
	if res, err := r.milestones(res); err != nil {
		return res, err
	}
	if err := r.verifyBuildIDs(res); err != nil {
		var be *BootError
		if errors.As(err, &be) {
			return res, err
		}
		return nil, err
	}
	res.Phases = r.phases()
	if m, ok := r.last["client TRANSPORT"]; ok {
		res.Transport = m.Args["xprt"]
	}
	if m, ok := r.last["client MOUNTED"]; ok {
		res.MountOpts = m.Args["opts"]
	}
	res.LoopSecs = loopSecs(r.kernel.Trusted("client"), r.last["client SUMMARY"], r.last["server SLOOP"])
	res.Health = healthOf(res.Client.Console, res.Server.Console, r.kernel.Trusted("client"))
	if r.timedByServer() {
		for i := range r.iters {
			r.iters[i].Cmp = r.clientCmp[r.iters[i].N]
		}
		res.Iterations = r.iters
	}
	if r.fstests != nil {
		res.Tests = r.fstests.tests
		if m, ok := r.last["server SRVSTAT"]; ok && r.kernel.Trusted("server") {
			res.ServerOps = int64(m.float("calls"))
		}
	}
	res.Failure = r.failure(res)
	res.Passed = res.Failure == ""
	res.Corrupt = r.corrupt()
	return res, nil
}

// milestones checks that both guests booted and brought their RDMA link
// up (the idle pair only boots): the first missed milestone is a
// BootError of the host that missed it, or of its peer when the peer
// crashed and stopped it, or the lab's when QEMU never started or the
// trusted kernel alone did not come up. res is returned as given.
func (r *run) milestones(res *Result) (*Result, error) {
	for _, step := range []struct{ event, phase string }{{"BOOTED", "boot"}, {"RDMA_UP", "rdma"}} {
		if r.pair.idle && step.event == "RDMA_UP" {
			break
		}
		for _, role := range []string{"server", "client"} {
			if r.has(role, step.event) {
				continue
			}
			g := r.guests[role]
			if err := r.exitErr[role]; err != nil && !g.killed && r.lines[role] == 0 {
				return nil, &InfraError{Host: role, Op: "start qemu", Err: fmt.Errorf("%v: %s", err, g.stderr)}
			}
			// A peer that crashed is why this host was stopped short: the
			// crash, not the stopped host, is what the report must name.
			if _, ok := r.mon[role].Fatal(); !ok {
				peer := map[string]string{"server": "client", "client": "server"}[role]
				if _, ok := r.mon[peer].Fatal(); ok {
					role, step.phase = peer, r.firstMissed(peer, step.phase)
				} else if r.kernel.Peer != nil && r.kernel.Trusted(role) && !r.kernel.Trusted(peer) && step.event == "BOOTED" {
					// The trusted kernel boots before the pair meets:
					// nothing of the candidate's stopped it.
					return nil, &InfraError{Host: role, Op: "boot trusted kernel", Err: fmt.Errorf("the base kernel did not come up: %s", tail(r.consoles[role].String(), 5))}
				}
			}
			h := res.Server
			if role == "client" {
				h = res.Client
			}
			be := &BootError{Host: role, Phase: step.phase, Console: tail(h.Console, 60)}
			if c, ok := r.mon[role].Fatal(); ok {
				be.Crash = &c
			}
			if r.timedOut != "" {
				be.Err = fmt.Errorf("deadline of phase %s passed", r.timedOut)
			} else if m, ok := r.last[role+" RDMA_FAIL"]; ok {
				be.Err = fmt.Errorf("rdma link failed: %v", m.Args)
			}
			return res, be
		}
	}
	return res, nil
}

// verifyBuildIDs checks the build id each guest reports against its
// kernel's (withBuildIDs): another one, or none, from the kernel under
// test is its own failure (BootError), from a trusted kernel the lab's
// (InfraError).
func (r *run) verifyBuildIDs(res *Result) error {
	for _, h := range []Host{res.Server, res.Client} {
		want := r.kernel.On(h.Role).BuildID
		if h.BuildID == want {
			continue
		}
		said := "build id " + h.BuildID
		if h.BuildID == "" {
			said = "no build id"
		}
		if !r.kernel.Trusted(h.Role) {
			// The host booted the file it was given; a kernel that
			// reports another build id says something untrue of itself.
			return &BootError{Host: h.Role, Phase: "verify", Err: fmt.Errorf("the kernel reports %s, not the one built (%s)", said, want), Console: tail(h.Console, 60)}
		}
		return &InfraError{Host: h.Role, Op: "verify kernel", Err: fmt.Errorf("the trusted kernel reports %s, want %s", said, want)}
	}
	return nil
}

// corrupt says which iteration's data did not survive the transfer
// test, "" when all did.
func (r *run) corrupt() string {
	if r.test.Kind != "transfer" {
		return ""
	}
	return r.serverChecks.corrupt(r.iters)
}

// firstMissed is the first boot milestone role did not reach, or
// fallback when it reached them all before crashing.
func (r *run) firstMissed(role, fallback string) string {
	for _, step := range []struct{ event, phase string }{{"BOOTED", "boot"}, {"RDMA_UP", "rdma"}} {
		if !r.has(role, step.event) {
			return step.phase
		}
	}
	return fallback
}

// failure is why a booted run did not pass, "" if it did; a stall (a
// deadline, no crash) sets res.Stalled.
func (r *run) failure(res *Result) string {
	if c := res.Crash(); c != nil && c.Fatal {
		return c.Title
	}
	if r.pair.idle {
		return ""
	}
	switch {
	case r.timedOut != "":
		res.Stalled = true
		return r.stallTitle(res)
	case r.has("client", "MOUNT_FAIL"):
		return "mount failed"
	case r.has("client", "FIO_FAIL"):
		return ErrNoSysVIPC.Error()
	case r.has("client", "FSTESTS_FAIL"):
		return "fstests could not run on the client: " + r.last["client FSTESTS_FAIL"].Args["why"]
	case r.test.Load != nil && r.pressureUnset() != "":
		return "pressure settings not in effect: " + r.pressureUnset()
	case !r.has("client", "MOUNTED"):
		return "client never mounted"
	case res.Transport != r.test.Transport:
		return fmt.Sprintf("transport is %q, not %q", res.Transport, r.test.Transport)
	case r.has("server", "DRIVE_FAIL"):
		return driveFailure(r.last["server DRIVE_FAIL"])
	case r.last["server CLIENT_DONE"].Args["msg"] == "invalid":
		return errInvalidDone
	case r.fstests != nil && r.fstests.missing() != "":
		return r.fstests.missing()
	case r.fstests == nil && len(r.iters) != r.test.Iterations:
		return fmt.Sprintf("%d of %d iterations ran", len(r.iters), r.test.Iterations)
	}
	if why := r.unbacked(); why != "" {
		return why
	}
	for _, it := range r.iters {
		if r.test.Kind != "transfer" {
			break
		}
		if why := r.serverChecks.failure(it, r.timedByServer()); why != "" {
			return why
		}
	}
	if m := r.last["client SUMMARY"]; m.Args["ok"] != "1" {
		return "client test failed"
	}
	if res.Client.Status != "ok" || res.Server.Status != "ok" {
		return fmt.Sprintf("guests ended with status server=%q client=%q", res.Server.Status, res.Client.Status)
	}
	return ""
}

// unbacked says why a client running the kernel under test reports
// figures the trusted server's byte counts do not back ("" when it does
// not, or when the client is trusted).
func (r *run) unbacked() string {
	if r.kernel.Trusted("client") {
		return ""
	}
	srvio, ok := r.last["server SRVIO"]
	return unbacked(r.test, srvio, ok, r.last["client RESULT"])
}

// pressureUnset names the pressure test's setting that did not take
// effect on either guest ("" when all did): a 1 MiB block size, the
// credits and threads asked for, rsize and wsize of 1 MiB on the mount.
// Without them the test measures nothing it is meant to.
func (r *run) pressureUnset() string {
	for _, role := range []string{"server", "client"} {
		if m, ok := r.last[role+" PRESSURE_FAIL"]; ok {
			return fmt.Sprintf("%s: %s", role, strings.TrimSpace(m.Args["what"]+" "+m.Args["opts"]))
		}
	}
	m, ok := r.last["server PRESSURE_SRV"]
	if !ok {
		return "server: no settings reported"
	}
	l := r.test.Load
	want := map[string]int{"block": 1 << 20, "credits": l.Credits, "threads": l.Threads}
	for _, k := range []string{"block", "credits", "threads"} {
		if m.int(k) != want[k] {
			return fmt.Sprintf("server: %s is %q, want %d", k, m.Args[k], want[k])
		}
	}
	return ""
}

func (r *run) phases() Phases {
	secs := func(a, b time.Time) float64 {
		if a.IsZero() || b.IsZero() {
			return 0
		}
		return b.Sub(a).Seconds()
	}
	booted, _ := r.both("BOOTED")
	rdma, _ := r.both("RDMA_UP")
	mounted := r.seen["client"]["MOUNTED"]
	summary := r.seen["client"]["SUMMARY"]
	return Phases{
		Boot:     secs(r.start, booted),
		RDMAUp:   secs(booted, rdma),
		Mount:    secs(rdma, mounted),
		Test:     secs(mounted, summary),
		Shutdown: secs(summary, r.end),
		Total:    secs(r.start, r.end),
	}
}

// CommandLines are the QEMU command lines of the two boots a reproducer
// makes of the default test, as the pair starts them (inside its bwrap
// confinement, which sees the same arguments): the base on both guests,
// then the candidate on side beside the base. Paths and the port are the
// reader's, named by shell variables: $BASE and $CANDIDATE the kernels'
// bzImage, $IMAGE the guest image `rdmabot lab image` prints, $DATA that
// image followed by a cpio archive holding the test's random data at
// /usr/lib/rdmabot/data (the guest that holds the file boots it), and
// $PORT the link's port on 127.0.0.1.
func CommandLines(c Config, side string) (base, candidate []string) {
	p := NewQEMUPair(c.QEMU, Image{}, nil)
	bk := Kernel{BzImage: "$BASE"}
	ck := Kernel{BzImage: "$CANDIDATE", Peer: &bk, Side: side}
	lines := func(k Kernel) []string {
		r := &run{pair: p, kernel: k, test: c.Test, initrd: "$IMAGE", initrds: map[string]string{}}
		var out []string
		for _, role := range []string{"server", "client"} {
			if c.Test.Kind == "transfer" && holdsData(k, role) {
				r.initrds[role] = "$DATA"
			}
			netdev := "socket,id=n0,listen=127.0.0.1:$PORT"
			mac := "52:54:00:00:00:01"
			if role == "client" {
				netdev, mac = "socket,id=n0,connect=127.0.0.1:$PORT", "52:54:00:00:00:02"
			}
			s := r.spec(role, netdev, mac)
			out = append(out, shellWords(append([]string{s.binary}, s.args()...)))
		}
		return out
	}
	return lines(bk), lines(ck)
}

// shellWords joins args as a shell reads them back, leaving $VARIABLE
// words to expand.
func shellWords(args []string) string {
	plain := regexp.MustCompile(`^[A-Za-z0-9_./:,=+@%-]+$`)
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		switch {
		case plain.MatchString(a):
			b.WriteString(a)
		case strings.Contains(a, "$") && !strings.ContainsAny(a, "\"\\`"):
			b.WriteString(`"` + a + `"`)
		default:
			b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
		}
	}
	return b.String()
}
