// Package aa measures the bot's verdicts on real lab boots: A/A
// comparisons (one kernel as both base and candidate), power
// comparisons against a kernel slowed on purpose, and comparisons of two
// kernels, each booted through the bot's own rounds (bot.RunRound,
// bot.RunProfiles) under the lab job's round policy (bot.RoundPolicy)
// and judged by its own decision. `rdmabot lab aa` and
// `rdmabot lab compare` run it.
package aa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/flow"

	"github.com/rdmabot/rdmabot/internal/flock"
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/reports/stats"
)

// Runner runs A/A comparisons: one kernel as both base and candidate, boots
// alternating as the bot's lab rounds alternate them, judged by the
// bot's own decision (reply.Replier.Decide) with its budget and rounds, and
// with the base cache as the lab job keeps it (earlier base boots of the
// kernel join a round's fresh ones unless they disagree). Every
// REGRESSION or IMPROVEMENT it reports is a false alarm the lab and the
// statistics together made.
type Runner struct {
	Lab    *lab.Runner
	Decide bot.Decider // the bot's: reply.Replier
	Pair   string
	Kernel string // directory holding bzImage (and modules/)
	// Candidate, when set, is another kernel directory booted as the
	// candidate: a comparison of two kernels (a reproducer's), no
	// longer A/A.
	Candidate string
	// Seeded, when set, says Candidate is Kernel with a slowdown of our
	// own making ("udelay(60) per svc_rdma_post_send"), which the
	// decision must call a REGRESSION: a power measurement, stored as
	// such.
	Seeded string
	// Profiles, when set, start a comparison with their boots of each
	// kernel, as the lab job does for a series that asks for them (the
	// lossy link, Send Queue pressure): a reproducer of what they found,
	// or their own A/A. ProfilesOnly decides on those boots alone: a
	// failing decision on them is the verdict, as it is a series' (a
	// crash, corrupted data, a fault the base lacks), else PASS.
	Profiles     []bot.Profile
	ProfilesOnly bool
	// Side is where the candidate boots beside the base kernel, as a
	// series' kernel does (flow.Boot.Side): "server" (default), or
	// "client", where the trusted server takes the times and the base
	// boots the same way.
	Side    string
	Runs    int    // runs per side at the first look (reports.runs)
	Rounds  int    // bot.max_rounds
	Results string // JSON-lines file the comparisons are appended to
	// Condition names the machine's state ("idle", "busy"), Neighbour
	// the command run on and off during the comparisons ("" = none).
	Condition, Neighbour string
	Commit               string
	// Lock, when set, is a file flock'ed around each comparison, so that
	// other heavy work on the machine (another lab, a test suite) takes
	// turns with it instead of running beside it unseen.
	Lock string
	// NeighbourSpan bounds each on and each off period of the neighbour
	// (zero: 30 s to 2 min).
	NeighbourSpan [2]time.Duration
	Rand          *rand.Rand
	Out           io.Writer
}

// Result is one comparison, as stored.
type Result struct {
	Time      time.Time `json:"time"`
	Commit    string    `json:"commit"`
	Condition string    `json:"condition"`
	Neighbour string    `json:"neighbour,omitempty"`
	// Seeded is the candidate's seeded slowdown (Runner.Seeded): the
	// comparison is a power measurement, not A/A.
	Seeded string `json:"seeded,omitempty"`
	Pair   string `json:"pair"`
	// Side is where the candidate booted beside the base.
	Side string `json:"side,omitempty"`
	// Verdict is the bot's decision, round after round as it asks for
	// them: fresh alternating boots, with the cached base boots when
	// they agree with the fresh ones (CacheDropped when they did not).
	Verdict      flow.Outcome `json:"verdict"`
	Summary      string       `json:"summary"`
	Rounds       int          `json:"rounds"`
	CacheDropped bool         `json:"cache_dropped,omitempty"`
	// Fresh is the decision on this comparison's own boots alone.
	Fresh flow.Outcome `json:"fresh"`
	// Cached is what the bot said before every round booted the base:
	// the first round's candidate boots against the cached base alone,
	// fresh base boots added from round 2; empty for the first
	// comparison (no cache yet).
	Cached        flow.Outcome `json:"cached,omitempty"`
	CachedSummary string       `json:"cached_summary,omitempty"`
	Base          []float64    `json:"base_copy_MBps"`
	Cand          []float64    `json:"cand_copy_MBps"`
	// HostCores is, per boot used (base and candidate alike, in boot
	// order), the host's cores other programs held; Busy the same for the
	// boots set aside as measured under contention and booted again.
	HostCores []float64 `json:"host_other_cores"`
	GuestWait []float64 `json:"guest_cpu_wait"`
	// Health is each boot's transport counts, in the same order: how
	// often a healthy lab counts anything is what the transport rule's
	// "two boots, none in the base" rests on.
	Health []map[string]int `json:"health,omitempty"`
	// Profiles and ProfileHealth are each profile boot's profile and
	// counts, base and candidate in boot order (Runner.Profiles).
	Profiles      []string         `json:"profiles,omitempty"`
	ProfileHealth []map[string]int `json:"profile_health,omitempty"`
	// ProfileTests are each profile boot's functional tests (fstests), in
	// the same order, a failure's evidence cut short: how often a test
	// fails on a healthy kernel is what "fails on the candidate, passes
	// on every base boot" rests on.
	ProfileTests [][]flow.TestResult `json:"profile_tests,omitempty"`
	Busy         []float64           `json:"busy_boots,omitempty"`
	Seconds      float64             `json:"seconds"`
	// QuietWait is the seconds the boots waited for a quiet host
	// before starting (lab.qemu.quiet_wait), all boots together.
	QuietWait float64 `json:"quiet_wait_s,omitempty"`
	// NeighbourOn is the fraction of the comparison's time the
	// neighbour ran.
	NeighbourOn float64 `json:"neighbour_on"`
	// Error is a lab failure: the comparison counts as INFRA.
	Error string `json:"error,omitempty"`
}

// Run makes n comparisons, appending each to Results as it ends.
func (a *Runner) Run(ctx context.Context, n int) ([]Result, error) {
	// The pair flocks its heavy lock around every boot; the same file
	// flocked again around the comparison by another descriptor of this
	// process would wait for ever on itself.
	if a.Lock != "" && a.Lab != nil && sameFile(a.Lock, a.Lab.Cfg.QEMU.HeavyLock) {
		return nil, fmt.Errorf("lab aa: --lock %s is the lab's own heavy_lock, which every boot takes already: give another file, or none", a.Lock)
	}
	if (a.Seeded != "") != (a.Candidate != "") {
		return nil, fmt.Errorf("lab aa: a seeded slowdown needs both its kernel (--candidate) and what was seeded (--seeded)")
	}
	if err := os.MkdirAll(filepath.Dir(a.Results), 0o755); err != nil {
		return nil, err
	}
	var nb *neighbour
	if a.Neighbour != "" {
		// A neighbour that cannot start would leave a "busy" comparison
		// measuring an idle machine, unseen (stress-ng is not installed
		// everywhere: two such comparisons were made before this check).
		argv := strings.Fields(a.Neighbour)
		if len(argv) == 0 {
			return nil, fmt.Errorf("lab aa: --neighbour %q names no program", a.Neighbour)
		}
		if _, err := exec.LookPath(argv[0]); err != nil {
			return nil, fmt.Errorf("lab aa: --neighbour %q: %w", a.Neighbour, err)
		}
		span := a.NeighbourSpan
		if span[1] <= span[0] {
			span = [2]time.Duration{30 * time.Second, 2 * time.Minute}
		}
		nb = startNeighbour(ctx, a.Neighbour, span, a.Rand)
		defer nb.stop()
	}
	var out []Result
	// cached is the base's cache as the lab job keeps it: every default
	// base boot so far, since the last drift.
	var cached []flow.Sample
	for i := range n {
		unlock, err := flock.Exclusive(ctx, a.Lock)
		if err != nil {
			return out, err
		}
		start := time.Now()
		on0 := nb.onTime()
		r, rounds, cache := a.one(ctx, cached)
		r.Seconds = time.Since(start).Seconds()
		unlock()
		if ctx.Err() != nil {
			// Stopped, not failed: a comparison cut short is no result.
			return out, ctx.Err()
		}
		if r.Seconds > 0 {
			r.NeighbourOn = (nb.onTime() - on0).Seconds() / r.Seconds
		}
		if r.Error == "" {
			if cached != nil {
				var err error
				if r.Cached, r.CachedSummary, err = a.cachedJudgement(ctx, r.ID(), cached, rounds); err != nil {
					return out, err
				}
			}
			cached = cache
		}
		if err := appendJSON(a.Results, r); err != nil {
			return out, err
		}
		out = append(out, r)
		label := "A/A"
		if a.Seeded != "" {
			label = fmt.Sprintf("seeded %q (copy %+.1f%%)", a.Seeded, 100*r.Effect())
		}
		fmt.Fprintf(a.Out, "%s %d/%d (%s): %s after %d profile boots and %d rounds, %d+%d boots (%d more set aside as contended), %.0f s (%.0f s of it waiting for a quiet host), neighbour on %.0f%%; own boots only: %s; cached base only: %s%s %s\n",
			label, i+1, n, a.Condition, r.Verdict, len(r.Profiles), r.Rounds, len(r.Base), len(r.Cand), len(r.Busy), r.Seconds, r.QuietWait, 100*r.NeighbourOn, orDash(r.Fresh), orDash(r.Cached),
			map[bool]string{true: "; cache dropped (drift)"}[r.CacheDropped], r.Error)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
	return out, nil
}

// ID is the comparison's identity, which seeds its decisions'
// resampling as a test's key seeds a series' (bot.Decider): its pair and
// the time it started, as stored.
func (r Result) ID() string {
	return "lab aa " + r.Pair + " " + r.Time.Format(time.RFC3339Nano)
}

// Effect is the candidate's median copy_MBps against the base's own
// boots', as a relative change (-0.1 = 10 % slower); 0 without boots.
func (r Result) Effect() float64 {
	if len(r.Base) == 0 || len(r.Cand) == 0 {
		return 0
	}
	return stats.Median(r.Cand)/stats.Median(r.Base) - 1
}

// round is one round's boots of each side.
type round struct{ base, cand []flow.Sample }

// one comparison, through the lab job's round policy (bot.RoundPolicy):
// the profiles' boots first, whose failing decision ends it; then rounds
// of alternating boots until the decision needs no more or the rounds
// run out, deciding as the report job does, on the base's cache after
// each round (cached joined by the fresh boots unless they drifted) and
// the profiles' base boots. cache is the base's cache after it.
func (a *Runner) one(ctx context.Context, cached []flow.Sample) (r Result, rounds []round, cache []flow.Sample) {
	r = Result{Time: time.Now().UTC(), Commit: a.Commit, Condition: a.Condition, Neighbour: a.Neighbour, Pair: a.Pair, Seeded: a.Seeded, Side: a.side()}
	policy := bot.RoundPolicy{Decide: a.Decide, MaxRounds: a.Rounds}
	infra := func(err error) (Result, []round, []flow.Sample) {
		r.Verdict, r.Error = flow.Infra, err.Error()
		return r, nil, cached
	}
	var profBase, cand, own []flow.Sample
	if len(a.Profiles) > 0 {
		var err error
		profBase, cand, err = bot.RunProfiles(ctx, a.Profiles, a.Pair, a.base(), a.candidate(), "base", "candidate",
			func(bot.Profile) string { return "a comparison" }, a.trace())
		for _, s := range append(append([]flow.Sample(nil), profBase...), cand...) {
			r.Busy = append(r.Busy, s.BusyRepeated...)
			r.Profiles = append(r.Profiles, s.Profile)
			r.ProfileHealth = append(r.ProfileHealth, s.Health)
			r.ProfileTests = append(r.ProfileTests, shortTests(s.Tests))
		}
		if err != nil {
			return infra(err)
		}
		own = append(own, profBase...)
		d, stop, err := policy.ProfilesDecide(ctx, r.ID(), profBase, cand)
		if err != nil {
			return infra(err)
		}
		if stop || a.ProfilesOnly && len(cand) > 0 {
			if !stop {
				d.Verdict, d.Summary = flow.Pass, "nothing under the profiles: no crash, no corrupted data, no transport or provider fault the base lacks"
			}
			r.Verdict, r.Summary, r.Fresh = d.Verdict, d.Summary, d.Verdict
			return r, []round{{base: profBase, cand: cand}}, cached
		}
		rounds = append(rounds, round{base: profBase, cand: cand})
	}
	cache = cached
	for n, runs := 1, a.Runs; runs > 0; n++ {
		r.Rounds = n
		rd, err := a.round(ctx, &r, runs)
		if err != nil {
			return infra(err)
		}
		rounds = append(rounds, rd)
		var drifted bool
		if cache, drifted, err = policy.BaseCache(ctx, r.ID(), cache, rd.base, n); err != nil {
			return infra(err)
		}
		r.CacheDropped = r.CacheDropped || drifted
		cand, own = append(cand, rd.cand...), append(own, rd.base...)
		r.Base, r.Cand = copyMBps(own), copyMBps(cand)
		// The report job's samples: the cache, then the profiles' boots.
		d, err := a.Decide.Decide(ctx, r.ID(), append(append([]flow.Sample(nil), cache...), profBase...), cand)
		if err != nil {
			return infra(err)
		}
		r.Verdict, r.Summary = d.Verdict, d.Summary
		runs = policy.MoreRuns(d, n)
	}
	fresh, err := a.Decide.Decide(ctx, r.ID(), own, cand)
	if err != nil {
		return infra(err)
	}
	r.Fresh = fresh.Verdict
	return r, rounds, cache
}

// round is the lab job's round (bot.RunRound): runs boots each of base
// and candidate alternating, until a boot crashes; r counts the host's
// state over its boots.
func (a *Runner) round(ctx context.Context, r *Result, runs int) (round, error) {
	var rd round
	var err error
	rd.base, rd.cand, err = bot.RunRound(ctx, a.Lab, a.Pair, a.base(), a.candidate(), runs, a.trace())
	for _, x := range append(append([]flow.Sample(nil), rd.base...), rd.cand...) {
		r.HostCores = append(r.HostCores, x.HostOtherCores)
		r.GuestWait = append(r.GuestWait, x.GuestCPUWait)
		r.Health = append(r.Health, x.Health)
		r.Busy = append(r.Busy, x.BusyRepeated...)
		r.QuietWait += x.QuietWait
	}
	var busy *lab.BusyError
	if errors.As(err, &busy) {
		r.Busy = append(r.Busy, busy.Waits...)
	}
	return rd, err
}

// candidate is what the comparison's candidate boots run: as a series'
// kernel does, on Side (the server by default: the seeded slowdowns and
// the seed regression's class are svcrdma's) beside the base.
func (a *Runner) candidate() flow.Boot {
	dir := a.Candidate
	if dir == "" {
		dir = a.Kernel
	}
	return flow.Boot{Dir: dir, Trusted: a.Kernel, Side: a.side()}
}

// base is what the base boots run: the kernel on both sides, or beside
// itself on the client, timed by the server as the candidate is.
func (a *Runner) base() flow.Boot {
	if a.side() == lab.SideClient {
		return flow.Boot{Dir: a.Kernel, Trusted: a.Kernel, Side: lab.SideClient}
	}
	return flow.Boot{Dir: a.Kernel}
}

func (a *Runner) side() string {
	if a.Side == "" {
		return lab.SideServer
	}
	return a.Side
}

// trace is where each boot's line goes: nowhere for A/A or a power
// bench (its summary line says enough), Out for a comparison of two
// kernels, whose reader waits on it boot by boot.
func (a *Runner) trace() io.Writer {
	if a.Candidate != "" && a.Seeded == "" && a.Out != nil {
		return a.Out
	}
	return io.Discard
}

// Compare makes one comparison of Kernel (base) against Candidate with
// the bot's rounds, budget and decision, with no cached base, and
// returns it with every boot of each side.
func (a *Runner) Compare(ctx context.Context) (Result, []flow.Sample, []flow.Sample) {
	r, rounds, _ := a.one(ctx, nil)
	var base, cand []flow.Sample
	for _, rd := range rounds {
		base, cand = append(base, rd.base...), append(cand, rd.cand...)
	}
	return r, base, cand
}

// cachedJudgement is what the bot would have said with a cached base:
// the first round's candidate boots against the cache alone, later
// rounds adding fresh base boots to it, as the lab job does. It uses the
// boots the fresh comparison made; where it would want more than those,
// it stays INCONCLUSIVE.
func (a *Runner) cachedJudgement(ctx context.Context, id string, cached []flow.Sample, rounds []round) (flow.Outcome, string, error) {
	base := append([]flow.Sample(nil), cached...)
	var cand []flow.Sample
	var d flow.Decision
	for i, rd := range rounds {
		if i > 0 {
			base = append(base, rd.base...)
		}
		cand = append(cand, rd.cand...)
		var err error
		if d, err = a.Decide.Decide(ctx, id, base, cand); err != nil {
			return flow.None, "", err
		}
		if d.NeedMore == 0 {
			return d.Verdict, d.Summary, nil
		}
	}
	return d.Verdict, d.Summary + " (the fresh comparison stopped first)", nil
}

func copyMBps(s []flow.Sample) []float64 {
	out := make([]float64, len(s))
	for i, x := range s {
		out[i] = x.Metrics["copy_MBps"]
	}
	return out
}

func orDash(o flow.Outcome) string {
	if o == flow.None {
		return "-"
	}
	return o.String()
}

func appendJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Read reads the stored comparisons.
func Read(path string) ([]Result, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Result
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var r Result
		if err := dec.Decode(&r); err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// neighbour runs a CPU-heavy command on and off at random, as another
// program on the lab machine would. The command is a program and its
// arguments, with no shell between: it gets SIGKILL when the runner
// dies, even by kill -9, where a shell's child would go on spinning on a
// core and slow every later run on the machine. A script that starts
// more must exec its last command.
type neighbour struct {
	mu     sync.Mutex
	on     time.Duration
	since  time.Time // zero while off
	cancel context.CancelFunc
	done   chan struct{}
}

func startNeighbour(ctx context.Context, command string, span [2]time.Duration, rng *rand.Rand) *neighbour {
	ctx, cancel := context.WithCancel(ctx)
	n := &neighbour{cancel: cancel, done: make(chan struct{})}
	pause := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	period := func() time.Duration { return span[0] + time.Duration(rng.Int64N(int64(span[1]-span[0]))) }
	argv := strings.Fields(command)
	go func() {
		defer close(n.done)
		// The parent-death signal follows the thread that started the
		// child: this goroutine keeps its thread for as long as it runs.
		runtime.LockOSThread()
		for len(argv) > 0 && pause(period()) {
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			if cmd.Start() != nil {
				return
			}
			n.mu.Lock()
			n.since = time.Now()
			n.mu.Unlock()
			pause(period())
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			n.mu.Lock()
			n.on += time.Since(n.since)
			n.since = time.Time{}
			n.mu.Unlock()
		}
	}()
	return n
}

func (n *neighbour) onTime() time.Duration {
	if n == nil {
		return 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	d := n.on
	if !n.since.IsZero() {
		d += time.Since(n.since)
	}
	return d
}

func (n *neighbour) stop() {
	n.cancel()
	<-n.done
}

// sameFile reports whether a and b name one file: the same path once
// cleaned, or (both existing) the same inode.
func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// shortTests is tests with each failure's evidence cut to its first
// 300 bytes: enough to tell one failure from another in a summary.
func shortTests(tests []flow.TestResult) []flow.TestResult {
	out := make([]flow.TestResult, len(tests))
	for i, t := range tests {
		if len(t.Why) > 300 {
			t.Why = t.Why[:300]
		}
		out[i] = t
	}
	return out
}
