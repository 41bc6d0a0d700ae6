// Package lab boots base and patched kernels on a lab pair (two QEMU
// guests joined by soft-RoCE, or real hosts over SSH), runs the NFS/RDMA
// transfer test and watches both consoles for hangs, oopses and panics.
//
// A Pair is the one interface: Run reserves both hosts, boots the kernel on
// them, runs the test, collects results, consoles and dmesg, and releases
// the hosts whatever happens. Failures say whose fault they are: a
// *BootError is the kernel's (reported against the patch), an *InfraError
// is the lab's (retried, never blamed on the patch). A crash seen on a
// console is not an error: it is part of the Result, for the report to
// judge.
package lab

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lab/console"
)

// Pair runs tests on two hosts, a server and a client.
type Pair interface {
	// Run boots kernel on both hosts and runs test. It returns a Result
	// whenever the kernel booted (even if the test then failed or
	// crashed); errors are *BootError or *InfraError.
	Run(ctx context.Context, kernel Kernel, test Test) (*Result, error)
}

// Kernel is a kernel artifact to boot.
type Kernel struct {
	// BzImage is the path of arch/x86/boot/bzImage.
	BzImage string `json:"bzimage"`
	// Modules is a directory holding lib/modules/<release> for a modular
	// kernel; empty for the lab's all-built-in kernels.
	Modules string `json:"modules,omitempty"`
	// Release is `uname -r` the kernel must report; empty: not checked.
	Release string `json:"release,omitempty"`
	// BuildID is the GNU build id of its vmlinux; empty: read from the
	// bzImage when needed.
	BuildID string `json:"build_id,omitempty"`
	// Peer, when set, is a trusted kernel (the series' base) booted on
	// the pair's other side, and this one boots on Side alone. A posted
	// series is code from anyone: with a peer, what judges the run (the
	// transfer's times, its data check, the transport's faults) is
	// measured by the peer's kernel and the host's clock, never by the
	// kernel the series wrote. Nil: this kernel boots on both sides (a
	// base, a mainline head, a bisection step).
	Peer *Kernel `json:"peer,omitempty"`
	// Side is SideServer or SideClient when Peer is set.
	Side string `json:"side,omitempty"`
}

// The sides of a pair a candidate kernel can boot on.
const (
	SideServer = "server"
	SideClient = "client"
)

// On is the kernel that boots on role.
func (k Kernel) On(role string) Kernel {
	if k.Peer != nil && role != k.Side {
		return *k.Peer
	}
	return k
}

// Trusted says whether role boots a kernel whose console may judge the
// run: the peer's side, or both sides when there is no peer.
func (k Kernel) Trusted(role string) bool {
	return k.Peer == nil || role != k.Side
}

// BootError means the kernel under test did not come up: no shell, no
// network, no RDMA device. It is the patch's fault and gets reported.
type BootError struct {
	Host  string // "server" or "client"
	Phase string // the last milestone that was not reached
	Err   error
	// Console is the tail of the host's console, for the report.
	Console string
	// Crash is what the console monitor saw, if anything.
	Crash *console.Crash
}

func (e *BootError) Error() string {
	s := fmt.Sprintf("%s did not boot: %s not reached", e.Host, e.Phase)
	if e.Crash != nil {
		s += ": " + e.Crash.Title
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *BootError) Unwrap() error { return e.Err }

// InfraError is the lab's fault: a QEMU that would not start, a port
// taken, a host that does not answer SSH, a BMC that failed. The job is
// retried; the patch is never blamed.
type InfraError struct {
	Host string // empty when not host-specific
	Op   string
	Err  error
}

func (e *InfraError) Error() string {
	if e.Host != "" {
		return fmt.Sprintf("lab infrastructure: %s: %s: %v", e.Host, e.Op, e.Err)
	}
	return fmt.Sprintf("lab infrastructure: %s: %v", e.Op, e.Err)
}

func (e *InfraError) Unwrap() error { return e.Err }

// Infra says the lab, not the patch, failed: the bot's classification
// (flow.IsInfra) asks every error in a chain for it.
func (e *InfraError) Infra() bool { return true }

// Test says what to run once both hosts are up.
type Test struct {
	// Kind is "transfer" (the bug report's cp/cp/cmp loop), "fio"
	// (sequential READ bandwidth) or "pressure" (the Send Queue pressure
	// test: parallel O_DIRECT 1 MiB READs and WRITEs, Load's settings).
	Kind string `json:"kind" toml:"kind"`
	// SizeMiB is the file size of one iteration.
	SizeMiB int `json:"size_mib" toml:"size_mib"`
	// Iterations per boot.
	Iterations int `json:"iterations" toml:"iterations"`
	// NFSVersion is "auto" (the reference mount, which negotiates v3 on
	// an fsid=0 export), "3", "4.0", "4.1" or "4.2".
	NFSVersion string `json:"nfs_version" toml:"nfs_version"`
	// Transport is "rdma" (port 20049) or "tcp" (2049).
	Transport string `json:"transport" toml:"transport"`
	// RDMA is "rxe" or "siw" (soft devices on the test link), "hw" (use
	// the host's active device) or "opa" (Omni-Path: IPoIB connected
	// mode and opafm first). Soft devices only make sense in QEMU.
	RDMA string `json:"rdma" toml:"rdma"`
	// HungTaskSecs lowers kernel.hung_task_timeout_secs; 0 keeps the
	// kernel's default.
	HungTaskSecs int `json:"hung_task_secs,omitempty" toml:"hung_task_secs"`
	// Netem shapes the test link of both hosts with tc's netem qdisc,
	// its arguments as tc takes them ("delay 2ms 1ms loss 0.5%"): the
	// lossy profile's link, or a seeded slowdown of the power bench.
	// "" leaves the link as it is.
	Netem string `json:"netem,omitempty" toml:"netem"`
	// Load is the pressure test's (Kind "pressure"); SizeMiB is then the
	// file the readers read, and one boot is one iteration.
	Load *Load `json:"load,omitempty" toml:"-"`
	// Fstests is the fstests test's group (Kind "fstests").
	Fstests *FstestsRun `json:"fstests,omitempty" toml:"-"`
}

// Load drives the server's Send Queue to its edge: more 1 MiB O_DIRECT
// READs (each reply a Write chunk of tens of Send Queue entries) and
// WRITEs (Read chunks) outstanding than svcrdma grants credits, with
// nfsd's block size raised to 1 MiB and threads enough that posting,
// not nfsd, is what waits.
type Load struct {
	Seconds int `json:"seconds" toml:"seconds"`
	Readers int `json:"readers" toml:"readers"`
	Writers int `json:"writers" toml:"writers"`
	// Credits is svcrdma's max_requests, read at each accept.
	Credits int `json:"credits" toml:"credits"`
	Threads int `json:"threads" toml:"threads"`
}

// validate rejects a load the guests cannot run.
func (l Load) validate() error {
	switch {
	case l.Seconds < 5 || l.Seconds > 600:
		return fmt.Errorf("pressure seconds %d: want 5..600", l.Seconds)
	case l.Readers < 1 || l.Readers > 256:
		return fmt.Errorf("pressure readers %d: want 1..256", l.Readers)
	case l.Writers < 0 || l.Writers > 256:
		return fmt.Errorf("pressure writers %d: want 0..256", l.Writers)
	case l.Credits < 4 || l.Credits > 1024:
		// svcrdma's own bounds for max_requests.
		return fmt.Errorf("pressure credits %d: want 4..1024", l.Credits)
	case l.Threads < 1 || l.Threads > 1024:
		return fmt.Errorf("pressure threads %d: want 1..1024", l.Threads)
	}
	return nil
}

// DefaultTest is what the bot runs on every kernel: the transfer test with
// 16 MiB files, four per boot, so that one boot of a QEMU pair takes about
// half a minute and a verdict needs no more than a few minutes of runs.
func DefaultTest() Test {
	// A task blocked 20 s is a hang (the motivating report's teardown);
	// a healthy iteration blocks for a few seconds at most.
	return Test{Kind: "transfer", SizeMiB: 16, Iterations: 4, NFSVersion: "auto", Transport: "rdma", RDMA: "rxe", HungTaskSecs: 20}
}

// ReferenceTest is the run the reference lab timed (32 MiB x 3 in about
// 24 s on plain TCG), which the lab benchmark compares against.
func ReferenceTest() Test {
	t := DefaultTest()
	t.SizeMiB, t.Iterations = 32, 3
	return t
}

// Validate rejects a test that cannot run.
func (t Test) Validate() error {
	switch {
	case t.Kind != "transfer" && t.Kind != "fio" && t.Kind != "pressure" && t.Kind != "fstests":
		return fmt.Errorf("test kind %q: want transfer, fio, pressure or fstests", t.Kind)
	case t.Kind == "fstests" && t.Fstests == nil:
		return fmt.Errorf("the fstests test needs its group (lab.fstests)")
	case t.Kind == "fstests" && (t.Transport != "rdma" || t.Iterations != 1):
		return fmt.Errorf("the fstests test runs once over rdma")
	case t.Kind == "pressure" && t.Load == nil:
		return fmt.Errorf("the pressure test needs its load (lab.pressure)")
	case t.Kind == "pressure" && (t.Transport != "rdma" || t.Iterations != 1 || t.SizeMiB < 8):
		return fmt.Errorf("the pressure test runs once over rdma on a file of 8 MiB or more")
	case t.SizeMiB < 1 || t.SizeMiB > 4096:
		return fmt.Errorf("test size %d MiB: want 1..4096", t.SizeMiB)
	case t.Iterations < 1 || t.Iterations > 1000:
		return fmt.Errorf("test iterations %d: want 1..1000", t.Iterations)
	case t.Transport != "rdma" && t.Transport != "tcp":
		return fmt.Errorf("transport %q: want rdma or tcp", t.Transport)
	case t.Kind == "fio" && t.Transport != "rdma":
		return fmt.Errorf("the fio variant measures NFS/RDMA: transport must be rdma")
	}
	switch t.NFSVersion {
	case "auto", "3", "4.0", "4.1", "4.2":
	default:
		return fmt.Errorf("NFS version %q: want auto, 3, 4.0, 4.1 or 4.2", t.NFSVersion)
	}
	switch t.RDMA {
	case "rxe", "siw", "hw", "opa":
	default:
		return fmt.Errorf("rdma %q: want rxe, siw, hw or opa", t.RDMA)
	}
	if t.Load != nil {
		if err := t.Load.validate(); err != nil {
			return err
		}
	}
	if t.Fstests != nil {
		if err := t.Fstests.validate(); err != nil {
			return err
		}
	}
	if t.Netem != "" && !netemArgs.MatchString(t.Netem) {
		return fmt.Errorf("netem %q: want tc netem arguments, words of letters, digits, '.' and '%%' (e.g. \"delay 2ms 1ms loss 0.5%%\")", t.Netem)
	}
	return nil
}

// netemArgs are the netem arguments the guests accept: they travel on
// the kernel command line with commas for spaces, and into tc unquoted.
var netemArgs = regexp.MustCompile(`^[A-Za-z0-9.%]+( [A-Za-z0-9.%]+)*$`)

// Iteration is one round of the test.
type Iteration struct {
	N int `json:"n"`
	// WriteMBps and ReadMBps are MiB/s on the guest's clock, each copy
	// including its close-time flush. The fio variant has no write.
	WriteMBps float64 `json:"write_mbps,omitempty"`
	ReadMBps  float64 `json:"read_mbps"`
	WriteSecs float64 `json:"write_s,omitempty"`
	ReadSecs  float64 `json:"read_s"`
	// GenSecs is the time to make the random file (a CPU speed probe).
	GenSecs float64 `json:"gen_s,omitempty"`
	// Cmp is "ok" or "mismatch" (the transfer test only).
	Cmp string `json:"cmp,omitempty"`
}

// Phases are host wall-clock seconds per phase of a run.
type Phases struct {
	Boot     float64 `json:"boot_s"`     // start until both guests run /init
	RDMAUp   float64 `json:"rdma_up_s"`  // until both RDMA devices are ACTIVE
	Mount    float64 `json:"mount_s"`    // until the client has mounted
	Test     float64 `json:"test_s"`     // the iterations
	Shutdown float64 `json:"shutdown_s"` // until both hosts are down
	Total    float64 `json:"total_s"`
}

// Host is what one host of the pair left behind.
type Host struct {
	Role     string `json:"role"`
	Release  string `json:"release"`  // uname -r as booted
	BuildID  string `json:"build_id"` // the booted kernel's build id
	Console  string `json:"console"`  // the whole serial console
	Dmesg    string `json:"dmesg"`    // kernel messages only
	Status   string `json:"status"`   // the guest's last word: ok, fail, or "" if it never said
	MemUsedK int    `json:"mem_used_kb,omitempty"`
	// Crashes the console monitor found, first one first.
	Crashes []console.Crash `json:"crashes,omitempty"`
	// Blocked is the guest's blocked tasks with their stacks (SysRq w),
	// asked for when the run stalled ("" when not asked); LastLines its
	// last kernel lines before it was asked.
	Blocked   string   `json:"blocked,omitempty"`
	LastLines []string `json:"last_lines,omitempty"`
	// RPCTasks is the guest's RPC tasks in flight (rpc_show_tasks),
	// asked for with Blocked.
	RPCTasks string `json:"rpc_tasks,omitempty"`
}

// Result is one run, as reports and the bot consume it.
type Result struct {
	Pair   string `json:"pair"`
	Mode   string `json:"mode"` // how the lab was run, e.g. "qemu-tcg-icount2"
	Kernel Kernel `json:"kernel"`
	Test   Test   `json:"test"`
	// Transport is what the client's mountstats said (rdma, tcp).
	Transport string `json:"transport"`
	MountOpts string `json:"mount_opts"`
	// Health is what the transport counted during the test.
	Health     Health      `json:"health"`
	Iterations []Iteration `json:"iterations"`
	// LoopSecs is the whole test loop on the guest's clock.
	LoopSecs float64 `json:"loop_s"`
	// Passed: every iteration ran and compared equal, no crash.
	Passed bool `json:"passed"`
	// Failure says why not, in a line; empty when passed.
	Failure string `json:"failure,omitempty"`
	// Stalled says Failure is a stall the host saw (a phase's deadline
	// passed: StallTitle), not a report the kernel printed.
	Stalled bool `json:"stalled,omitempty"`
	// Corrupt says which iteration read back other bytes than it wrote
	// (cmp), when one did: the data's fault, not a crash ("" = none).
	Corrupt string `json:"corrupt,omitempty"`
	Phases  Phases `json:"phases"`
	// Tests are the fstests test's results, in its group's order, as
	// the client reported them; ServerOps the RPCs the trusted server
	// answered from its start to the client's end (0: the server runs
	// the kernel under test).
	Tests     []flow.TestResult `json:"tests,omitempty"`
	ServerOps int64             `json:"server_ops,omitempty"`
	// HostOtherCores is how many host cores other programs used, on
	// average, during this boot of the QEMU pair (-1: unknown; 0 on real
	// pairs, which are lent whole). Busy lists the same figure for each
	// boot before it that was measured under contention and repeated.
	HostOtherCores float64 `json:"host_other_cores"`
	// Figures are filled where a result is saved for others to read
	// (the lab bench's noise files), from Figures().
	Saved *Figures `json:"figures,omitempty"`
	// GuestCPUWait is how many of the QEMUs' threads, on average, were
	// runnable but waiting for a CPU: starvation, whoever caused it.
	GuestCPUWait float64   `json:"guest_cpu_wait"`
	Busy         []float64 `json:"busy_boots,omitempty"`
	// QuietWait is how long, in seconds, the boots behind this result
	// (the repeats included) waited for other programs to leave the host's
	// CPUs before starting (lab.qemu.quiet_wait).
	QuietWait float64 `json:"quiet_wait_s,omitempty"`
	Server    Host    `json:"server"`
	Client    Host    `json:"client"`
}

// Crash is the first fatal crash on either host, else the first WARNING.
func (r *Result) Crash() *console.Crash {
	c, _ := r.CrashOn()
	return c
}

// CrashOn is Crash and the role of the host whose console showed it
// ("server", "client"), whose kernel decodes its frames.
func (r *Result) CrashOn() (*console.Crash, string) {
	var warn *console.Crash
	var warnOn string
	for _, h := range []*Host{&r.Server, &r.Client} {
		for i := range h.Crashes {
			c := &h.Crashes[i]
			if c.Fatal {
				return c, h.Role
			}
			if warn == nil {
				warn, warnOn = c, h.Role
			}
		}
	}
	return warn, warnOn
}

// Figures are a boot's measurements as the bot decides on them: per
// iteration, and the boot's mean of each (loop_s is one figure per boot).
type Figures struct {
	PerIteration map[string][]float64 `json:"per_iteration"`
	Means        map[string]float64   `json:"means"`
}

// Figures derives the decided metrics from the iterations: write_MBps
// and read_MBps as measured, copy_MBps both copies together (writeback
// moves work between the write and the read-back, so their sum varies
// about half as much from boot to boot as either alone), loop_s the
// whole loop on the guest's clock.
func (r *Result) Figures() Figures {
	f := Figures{PerIteration: map[string][]float64{}, Means: map[string]float64{}}
	for _, it := range r.Iterations {
		if it.WriteMBps > 0 {
			f.PerIteration["write_MBps"] = append(f.PerIteration["write_MBps"], it.WriteMBps)
		}
		f.PerIteration["read_MBps"] = append(f.PerIteration["read_MBps"], it.ReadMBps)
		// Under pressure both directions run at once: no copy figure.
		if it.WriteSecs > 0 && it.ReadSecs > 0 && r.Test.SizeMiB > 0 && r.Test.Kind != "pressure" {
			f.PerIteration["copy_MBps"] = append(f.PerIteration["copy_MBps"], 2*float64(r.Test.SizeMiB)/(it.WriteSecs+it.ReadSecs))
		}
	}
	for k, v := range f.PerIteration {
		sum := 0.0
		for _, x := range v {
			sum += x
		}
		f.Means[k] = sum / float64(len(v))
	}
	if r.LoopSecs > 0 {
		f.Means["loop_s"] = r.LoopSecs
	}
	return f
}

// Mean of a metric over the iterations.
func (r *Result) Mean(metric func(Iteration) float64) float64 {
	if len(r.Iterations) == 0 {
		return 0
	}
	s := 0.0
	for _, it := range r.Iterations {
		s += metric(it)
	}
	return s / float64(len(r.Iterations))
}

// dmesgOf keeps the kernel's own lines of a console: those with a printk
// timestamp.
func dmesgOf(consoleText string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(consoleText, "\n") {
		if strings.HasPrefix(l, "[") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// clientSide are the paths of code only the NFS client runs: the
// RPC-over-RDMA client transport (every xprtrdma file but svcrdma's),
// the NFS client and the RPC client core.
var clientSide = regexp.MustCompile(`^(net/sunrpc/xprtrdma/(transport|rpc_rdma|verbs|frwr_ops|backchannel)\.c|net/sunrpc/xprtrdma/xprt_rdma\.h|fs/nfs/|net/sunrpc/(clnt|xprt|sched)\.c)`)

// CandidateSide is the side of a pair a series' kernel boots on, beside
// the trusted base kernel, given the files the series changes: the
// client when it changes only client code, else the server (svcrdma,
// nfsd, ib_core and the providers, and a series touching both).
func CandidateSide(files []string) string {
	if len(files) == 0 {
		return SideServer
	}
	for _, f := range files {
		if !clientSide.MatchString(f) {
			return SideServer
		}
	}
	return SideClient
}
