package aa

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/reports"
	"github.com/rdmabot/rdmabot/reports/reply"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/lab/console"

	"github.com/rdmabot/rdmabot/internal/flock"
)

// noisyPair is a lab pair whose copy rate is speed x (1 + 2 % noise);
// fail makes the n-th boot (1-based) a lab fault.
type noisyPair struct {
	mu    sync.Mutex
	rng   *rand.Rand
	speed float64
	boots int
	fail  int
	busy  []float64 // the failing boot is a host too busy, these boots set aside
	// seededCost slows the boots of a kernel whose path says "seeded".
	seededCost  float64
	seededBoots int
	// lossyHang makes a kernel whose path says "hang" hang over a
	// shaped link; netemBoots counts the boots over one.
	lossyHang  bool
	netemBoots int
}

func (p *noisyPair) Run(ctx context.Context, k lab.Kernel, t lab.Test) (*lab.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.boots++
	if strings.Contains(k.BzImage, "seeded") {
		p.seededBoots++
	}
	if t.Netem != "" {
		p.netemBoots++
		if p.lossyHang && strings.Contains(k.BzImage, "hang") {
			return &lab.Result{Pair: "qemu", Test: t, Failure: "INFO: task hung in __ib_drain_sq"}, nil
		}
	}
	if p.boots == p.fail {
		if p.busy != nil {
			return nil, &lab.InfraError{Op: "busy host", Err: &lab.BusyError{Waits: p.busy, Limit: 0.55}}
		}
		return nil, &lab.InfraError{Err: errors.New("guest lost")}
	}
	r := &lab.Result{Pair: "qemu", Test: t, Passed: true, LoopSecs: 10, Health: lab.Health{Reported: true, Ops: 100}}
	speed := p.speed
	if strings.Contains(k.BzImage, "seeded") {
		// The power bench's kernel with a slowdown of our own making.
		speed *= 1 - p.seededCost
		r.LoopSecs /= 1 - p.seededCost
	}
	for i := range 3 {
		v := speed * (1 + 0.02*p.rng.NormFloat64())
		secs := float64(t.SizeMiB) / v
		r.Iterations = append(r.Iterations, lab.Iteration{N: i + 1, WriteMBps: v, ReadMBps: v, WriteSecs: secs, ReadSecs: secs})
	}
	return r, nil
}

func newAA(t *testing.T, p *noisyPair) *Runner {
	t.Helper()
	test := lab.DefaultTest()
	r := &reply.Replier{Cfg: reports.DefaultConfig(), Lab: lab.DefaultConfig()}
	return &Runner{
		Lab:    &lab.Runner{Cfg: lab.DefaultConfig(), Test: test, Log: slog.New(slog.DiscardHandler), Pairs: map[string]lab.Pair{"qemu": p}},
		Decide: r,
		Pair:   "qemu", Kernel: t.TempDir(), Runs: 5, Rounds: 6, Results: filepath.Join(t.TempDir(), "aa", "aa.jsonl"),
		Condition: "idle", Commit: "abc", Rand: rand.New(rand.NewPCG(1, 2)), Out: io.Discard,
	}
}

// The runner alternates base and candidate boots of one kernel, asks
// for rounds as the bot's decision wants them, stores each comparison,
// and judges each against the base of the one before. A machine that
// slows by 15 % between two comparisons fools the cached-base judgement
// (REGRESSION) but not the fresh alternating one.
func TestAARunsThroughTheDecision(t *testing.T) {
	p := &noisyPair{rng: rand.New(rand.NewPCG(3, 4)), speed: 100}
	a := newAA(t, p)
	rs, err := a.Run(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Verdict == flow.Regression || r.Verdict == flow.Improvement || r.Error != "" {
			t.Errorf("comparison %d: %+v", i, r)
		}
		if len(r.Base) != len(r.Cand) || len(r.Base) < 5 || r.Rounds < 1 || r.Commit != "abc" || r.Condition != "idle" {
			t.Errorf("comparison %d: %d+%d boots, %d rounds, %q %q", i, len(r.Base), len(r.Cand), r.Rounds, r.Commit, r.Condition)
		}
		if len(r.Health) != 2*len(r.Base) || r.Health[0] == nil || r.Health[0]["retrans"] != 0 {
			t.Errorf("comparison %d: transport counts %v", i, r.Health)
		}
	}
	if rs[0].Cached != flow.None || rs[1].Cached == flow.None {
		t.Errorf("cached-base judgements: %q, %q (want none for the first)", rs[0].Cached, rs[1].Cached)
	}
	if p.boots != 2*(len(rs[0].Base)+len(rs[1].Base)) {
		t.Errorf("%d boots for %d+%d per side", p.boots, len(rs[0].Base), len(rs[1].Base))
	}

	stored, err := Read(a.Results)
	if err != nil || len(stored) != 2 {
		t.Fatalf("stored %d comparisons (%v), want 2", len(stored), err)
	}
}

// A drift between the cached base and the candidate is what the cached
// judgement catches as a false REGRESSION; alternating boots see none.
func TestAACachedBaseFooledByDrift(t *testing.T) {
	p := &noisyPair{rng: rand.New(rand.NewPCG(5, 6)), speed: 100}
	a := newAA(t, p)
	// The machine slows by 15 % once two comparisons are done.
	a.Out = writerFunc(func(b []byte) {
		if p.mu.Lock(); strings.HasPrefix(string(b), "A/A 2/") {
			p.speed = 85
		}
		p.mu.Unlock()
	})
	rs, err := a.Run(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if rs[2].Verdict == flow.Regression || rs[2].Verdict == flow.Improvement {
		t.Errorf("alternating boots: %s (%s)", rs[2].Verdict, rs[2].Summary)
	}
	if !rs[2].CacheDropped {
		t.Errorf("the drifted cache was kept: %+v", rs[2])
	}
	if rs[2].Cached != flow.Regression {
		t.Errorf("against the cached base, a 15 %% slower machine: %s (%s), want REGRESSION", rs[2].Cached, rs[2].CachedSummary)
	}
}

// A lab fault ends that comparison as INFRA with the error; the next
// comparison is judged against the last good bases, not the broken run.
func TestAALabFaultIsInfra(t *testing.T) {
	p := &noisyPair{rng: rand.New(rand.NewPCG(7, 8)), speed: 100, fail: 12}
	a := newAA(t, p)
	rs, err := a.Run(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	k := -1
	for i, r := range rs {
		if r.Error != "" {
			k = i
		}
	}
	if k < 0 || rs[k].Verdict != flow.Infra || !strings.Contains(rs[k].Error, "guest lost") || rs[k].Cached != flow.None {
		t.Fatalf("no INFRA comparison with the lab's error: %+v", rs)
	}
	if k+1 >= len(rs) {
		t.Fatalf("the fault came last (comparison %d)", k)
	}
	next := rs[k+1]
	if next.Error != "" || (k > 0) != (next.Cached != flow.None) {
		t.Errorf("after the fault (comparison %d): %+v", k, next)
	}
}

// The neighbour runs its command on and off, its time is counted, and
// nothing of it is left when the runner stops.
func TestAANeighbourOnAndOff(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep(1)")
	}
	mark := filepath.Join(t.TempDir(), "ran")
	script := neighbourScript(t, "echo x >> "+mark+"\nexec sleep 1000")
	ctx, cancel := context.WithCancel(context.Background())
	n := startNeighbour(ctx, script, [2]time.Duration{20 * time.Millisecond, 60 * time.Millisecond}, rand.New(rand.NewPCG(9, 9)))
	time.Sleep(700 * time.Millisecond)
	on := n.onTime()
	cancel()
	n.stop()
	b, _ := os.ReadFile(mark)
	if starts := strings.Count(string(b), "x"); starts < 3 {
		t.Errorf("the neighbour started %d times in 0.7 s, want several", starts)
	}
	if on <= 0 || on >= 700*time.Millisecond {
		t.Errorf("on for %v of 0.7 s", on)
	}
	if out, _ := exec.Command("pgrep", "-f", "sleep 1000").Output(); len(out) > 0 {
		t.Errorf("the neighbour's command outlived it: %s", out)
	}
}

// neighbourScript is an executable shell script running body.
func neighbourScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "neighbour.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A runner killed with SIGKILL takes its neighbour with it: a neighbour
// left spinning would slow every later run on the machine. The runner is
// this test binary run again as a child (RDMABOT_AA_NEIGHBOUR_CHILD),
// killed once its neighbour has started.
func TestAANeighbourDiesWithItsRunner(t *testing.T) {
	if script := os.Getenv("RDMABOT_AA_NEIGHBOUR_CHILD"); script != "" {
		// Off, then on, for a second or two each: the neighbour is still
		// in its first on period when the parent kills this runner.
		startNeighbour(context.Background(), script+" child", [2]time.Duration{time.Second, 2 * time.Second}, rand.New(rand.NewPCG(1, 1)))
		time.Sleep(time.Minute)
		return
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The neighbour writes its pid, then spins as a CPU-heavy one would.
	script := neighbourScript(t, "echo $$ > "+pidFile+".tmp && mv "+pidFile+".tmp "+pidFile+"\nexec sleep 1000")
	runner := exec.Command(os.Args[0], "-test.run=^TestAANeighbourDiesWithItsRunner$")
	runner.Env = append(os.Environ(), "RDMABOT_AA_NEIGHBOUR_CHILD="+script)
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	defer runner.Process.Kill()
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the neighbour never started")
		}
		if b, err := os.ReadFile(pidFile); err == nil {
			fmt.Sscan(string(b), &pid)
		}
	}
	runner.Process.Signal(syscall.SIGKILL)
	runner.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			syscall.Kill(-pid, syscall.SIGKILL)
			t.Fatalf("neighbour pid %d outlived its runner's kill -9", pid)
		}
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }

// Stopped while waiting for the lock, or during a comparison, the
// runner returns at once and records nothing: a cut-short comparison is
// not an INFRA result.
func TestAAStopsWithoutARecord(t *testing.T) {
	p := &noisyPair{rng: rand.New(rand.NewPCG(1, 1)), speed: 100}
	a := newAA(t, p)
	a.Lock = filepath.Join(t.TempDir(), "lab.lock")
	held, err := flock.Exclusive(context.Background(), a.Lock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := a.Run(ctx, 1); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("waiting for a held lock: %v after %v", err, time.Since(start))
	}
	held()
	ctx2, cancel2 := context.WithCancel(context.Background())
	a.Lab.Pairs["qemu"] = cancelling{cancel2}
	if _, err := a.Run(ctx2, 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled mid-comparison: %v", err)
	}
	if rs, err := Read(a.Results); err != nil || len(rs) != 0 {
		t.Fatalf("recorded %d comparisons (%v), want none", len(rs), err)
	}
}

// cancelling is a pair whose first boot is interrupted (serve or the
// bench stopped).
type cancelling struct{ cancel context.CancelFunc }

func (c cancelling) Run(ctx context.Context, k lab.Kernel, t lab.Test) (*lab.Result, error) {
	c.cancel()
	return nil, &lab.InfraError{Err: ctx.Err()}
}

// --lock naming the lab's own heavy_lock (also through a symlink) is
// refused at once: every boot flocks that file through another
// descriptor, so the bench would wait on itself for ever (as one did).
func TestAARefusesTheLabsOwnLock(t *testing.T) {
	dir := t.TempDir()
	heavy := filepath.Join(dir, "heavy.lock")
	if err := os.WriteFile(heavy, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.lock")
	if err := os.Symlink(heavy, link); err != nil {
		t.Fatal(err)
	}
	for _, lock := range []string{heavy, link, dir + "/./heavy.lock"} {
		a := newAA(t, &noisyPair{rng: rand.New(rand.NewPCG(1, 1)), speed: 100})
		a.Lab.Cfg.QEMU.HeavyLock, a.Lock = heavy, lock
		if _, err := a.Run(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "heavy_lock") {
			t.Errorf("--lock %s: %v", lock, err)
		}
		if _, err := os.Stat(a.Results); !os.IsNotExist(err) {
			t.Errorf("--lock %s: results written (%v)", lock, err)
		}
	}
	// Another file is taken around each comparison as before.
	a := newAA(t, &noisyPair{rng: rand.New(rand.NewPCG(1, 1)), speed: 100})
	a.Lab.Cfg.QEMU.HeavyLock, a.Lock = heavy, filepath.Join(dir, "other.lock")
	if rs, err := a.Run(context.Background(), 1); err != nil || len(rs) != 1 {
		t.Fatalf("another lock: %d results, %v", len(rs), err)
	}
}

// A host too busy to measure ends the comparison as INFRA, and the boots
// it set aside are counted with it (they were lost before).
func TestAABusyHostCountsItsBoots(t *testing.T) {
	p := &noisyPair{rng: rand.New(rand.NewPCG(7, 8)), speed: 100, fail: 4, busy: []float64{0.61, 0.59, 0.6}}
	a := newAA(t, p)
	rs, err := a.Run(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Verdict != flow.Infra || !strings.Contains(rs[0].Error, "too busy to measure") || len(rs[0].Busy) != 3 {
		t.Fatalf("%+v", rs)
	}
}

// kernelPair runs the slow kernel 10 % slower and records which kernel
// each boot booted.
type kernelPair struct {
	noisyPair
	slow   string
	booted []string
}

func (p *kernelPair) Run(ctx context.Context, k lab.Kernel, t lab.Test) (*lab.Result, error) {
	p.noisyPair.mu.Lock()
	p.booted = append(p.booted, filepath.Dir(k.BzImage))
	speed := 100.0
	if filepath.Dir(k.BzImage) == p.slow {
		speed = 90
	}
	p.noisyPair.speed = speed
	p.noisyPair.mu.Unlock()
	return p.noisyPair.Run(ctx, k, t)
}

// Compare boots two kernels alternately, base first, through the bot's
// rounds, and its text is the reply's: a 10 % slower candidate is a
// REGRESSION with the metrics table; the other way round a PASS at the
// first look (no regression of 5 %: the bot asks no more of an
// improvement). Nothing is appended to the A/A results.
func TestCompareTwoKernels(t *testing.T) {
	base, cand := t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		slow string
		want flow.Outcome
	}{{cand, flow.Regression}, {base, flow.Pass}} {
		p := &kernelPair{noisyPair: noisyPair{rng: rand.New(rand.NewPCG(5, 6))}, slow: tc.slow}
		a := newAA(t, &p.noisyPair)
		a.Lab.Pairs["qemu"] = p
		a.Kernel, a.Candidate = base, cand
		var out strings.Builder
		a.Out = &out
		r, b, c := a.Compare(context.Background())
		if r.Verdict != tc.want || r.Error != "" || len(b) != len(c) || len(b) < 5 {
			t.Fatalf("slow %s: %s (%s), %d+%d boots %v %v %v", tc.slow, r.Verdict, r.Error, len(b), len(c), r.Base, r.Cand, p.booted)
		}
		for i, k := range p.booted {
			if want := []string{base, cand}[i%2]; k != want {
				t.Fatalf("boot %d booted %s, want %s", i+1, k, want)
			}
		}
		if strings.Count(out.String(), "boot on qemu") != len(p.booted) {
			t.Errorf("%d boots traced for %d booted:\n%s", strings.Count(out.String(), "boot on qemu"), len(p.booted), out.String())
		}
		text := a.Decide.(*reply.Replier).Text(r.ID(), b, c)
		if !strings.HasPrefix(text, tc.want.String()+": ") || !strings.Contains(text, "copy") || !strings.Contains(text, "Mann-Whitney") {
			t.Errorf("text:\n%s", text)
		}
		if _, err := os.Stat(a.Results); err == nil {
			t.Error("a comparison of two kernels was stored as A/A")
		}
	}
}

// crashPair hangs every boot of one kernel, as the drain bug does.
type crashPair struct {
	noisyPair
	crashing string
}

func (p *crashPair) Run(ctx context.Context, k lab.Kernel, t lab.Test) (*lab.Result, error) {
	r, err := p.noisyPair.Run(ctx, k, t)
	if err == nil && filepath.Dir(k.BzImage) == p.crashing {
		r.Passed, r.Failure = false, "hung"
		r.Client.Crashes = []console.Crash{{Kind: "hang", Title: "INFO: task hung in __ib_drain_rq", Fatal: true,
			Report: "INFO: task kworker/0:1:9 blocked for more than 21 seconds.\n __ib_drain_rq+0x11e/0x1a0\n"}}
	}
	return r, err
}

// A crashing candidate ends the comparison at its second boot, the one
// that confirms the crash as a series' test does: CRASH after two boots
// of each side, not a whole round of hangs.
func TestCompareStopsAtACrash(t *testing.T) {
	base, cand := t.TempDir(), t.TempDir()
	p := &crashPair{noisyPair: noisyPair{rng: rand.New(rand.NewPCG(9, 9)), speed: 100}, crashing: cand}
	a := newAA(t, &p.noisyPair)
	a.Lab.Pairs["qemu"] = p
	a.Kernel, a.Candidate = base, cand
	r, b, c := a.Compare(context.Background())
	if r.Verdict != flow.Crash || len(b) != 2 || len(c) != 2 || p.boots != 4 {
		t.Fatalf("%s after %d+%d samples, %d boots", r.Verdict, len(b), len(c), p.boots)
	}
	if text := a.Decide.(*reply.Replier).Text(r.ID(), b, c); !strings.Contains(text, "INFO: task hung in __ib_drain_rq") || !strings.HasPrefix(text, "CRASH: ") {
		t.Errorf("text:\n%s", text)
	}
}

// The power bench: a kernel with a slowdown of our own making as the
// candidate, through the same rounds and decision as an A/A comparison;
// 10 % slower is called a REGRESSION, with its effect stored and printed.
func TestAASeededSlowdownIsARegression(t *testing.T) {
	p := &noisyPair{rng: rand.New(rand.NewPCG(7, 8)), speed: 100, seededCost: 0.10}
	a := newAA(t, p)
	a.Candidate, a.Seeded = filepath.Join(t.TempDir(), "seeded"), "udelay(60) per Send"
	var out bytes.Buffer
	a.Out = &out
	rs, err := a.Run(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Verdict != flow.Regression || r.Seeded != "udelay(60) per Send" {
			t.Errorf("comparison %d: %s (%s), seeded %q", i, r.Verdict, r.Summary, r.Seeded)
		}
		if e := r.Effect(); e > -0.07 || e < -0.13 {
			t.Errorf("comparison %d: effect %+.3f, want about -0.10", i, e)
		}
	}
	if total := 2 * (len(rs[0].Base) + len(rs[1].Base)); p.seededBoots != total/2 {
		t.Errorf("%d of %d boots were of the seeded kernel, want the candidate's %d", p.seededBoots, total, total/2)
	}
	if !strings.Contains(out.String(), `seeded "udelay(60) per Send" (copy -`) {
		t.Errorf("progress lines:\n%s", out.String())
	}

	a.Candidate = ""
	if _, err := a.Run(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "--candidate") {
		t.Errorf("a seeded slowdown without its kernel: %v, want refused", err)
	}
}

// lab compare --lossy, the reproducer of a crash the lossy profile found:
// lossy boots first, base and candidate alternating, a candidate that
// hangs there is a CRASH once a second boot confirms it (the candidate
// alone booted again); one that does not goes on to the
// default rounds, its lossy boots kept for crashes only.
func TestCompareLossyFirst(t *testing.T) {
	p := &noisyPair{rng: rand.New(rand.NewPCG(9, 10)), speed: 100, lossyHang: true}
	a := newAA(t, p)
	a.Candidate, a.Profiles = filepath.Join(t.TempDir(), "hang"), lossyProfile(t, a)
	r, base, cand := a.Compare(context.Background())
	if r.Verdict != flow.Crash || len(base) != 1 || len(cand) != 2 || cand[0].Profile != "lossy" || cand[1].Profile != "lossy" || base[0].Profile != "lossy" || p.netemBoots != 3 || p.boots != 3 {
		t.Fatalf("hang over the lossy link: %s (%s), %d+%d samples, %d of %d boots shaped", r.Verdict, r.Summary, len(base), len(cand), p.netemBoots, p.boots)
	}

	p = &noisyPair{rng: rand.New(rand.NewPCG(9, 10)), speed: 100, lossyHang: true}
	a = newAA(t, p)
	a.Candidate, a.Profiles = filepath.Join(t.TempDir(), "fine"), lossyProfile(t, a)
	r, base, cand = a.Compare(context.Background())
	lossy := 0
	for _, s := range append(base, cand...) {
		if s.Profile == "lossy" {
			lossy++
		}
	}
	if r.Verdict != flow.Pass || lossy != 6 || p.netemBoots != 6 || len(cand) < 3+5 {
		t.Errorf("a kernel fine over the lossy link: %s (%s), %d lossy samples, %d shaped boots, %d candidate samples", r.Verdict, r.Summary, lossy, p.netemBoots, len(cand))
	}
}

// lossyProfile is the lossy profile of a's lab configuration (3 boots).
func lossyProfile(t *testing.T, a *Runner) []bot.Profile {
	t.Helper()
	p, err := lab.NewLossy(a.Lab)
	if err != nil || p == nil || p.Boots() != 3 {
		t.Fatalf("the lossy profile of the defaults: %v %v", p, err)
	}
	return []bot.Profile{p}
}

// A neighbour program that is not there is refused before any boot:
// otherwise the "busy" comparison measures an idle machine.
func TestAANeighbourMissing(t *testing.T) {
	p := &noisyPair{rng: rand.New(rand.NewPCG(1, 1)), speed: 100}
	a := newAA(t, p)
	a.Neighbour, a.Condition = "no-such-neighbour-xyz --cpu 1", "busy"
	if _, err := a.Run(context.Background(), 1); err == nil || !strings.Contains(err.Error(), "no-such-neighbour-xyz") || p.boots != 0 {
		t.Fatalf("missing neighbour: %v after %d boots, want refused before any", err, p.boots)
	}
}
