// Package fakestage stands in for lore, builder, lab and reports in the
// bot's tests, where the real stages would take minutes: each fake
// records its calls and behaves by rules the test sets. Kernels are real
// directories, git trees are real repositories, and the lab notices two
// runs overlapping on one pair.
package fakestage

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/rdmabot/rdmabot/flow"
)

// InfraError is a lab or build outage: retried, never blamed on a patch.
type InfraError struct{ Msg string }

func (e *InfraError) Error() string { return e.Msg }
func (e *InfraError) Infra() bool   { return true }

// Calls is a concurrency-safe call log ("build mainline abc", ...),
// optionally mirrored to a file so a killed process's calls survive.
type Calls struct {
	mu   sync.Mutex
	list []string
	File string
}

// Add records a call.
func (c *Calls) Add(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := fmt.Sprintf(format, args...)
	c.list = append(c.list, s)
	if c.File != "" {
		f, err := os.OpenFile(c.File, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, s)
			f.Sync()
			f.Close()
		}
	}
}

// List returns the calls so far.
func (c *Calls) List() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.list...)
}

// Count counts calls starting with prefix.
func (c *Calls) Count(prefix string) int {
	n := 0
	for _, s := range c.List() {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// Ingest hands out Series one poll at a time, remembering its place in
// the checkpoint "fake" as the real sources do.
type Ingest struct {
	mu     sync.Mutex
	Series []flow.Series
	Calls  *Calls
	File   string // when set, Series are read from this JSON file
	done   int    // the series handed over so far
}

func (f *Ingest) Add(s flow.Series) {
	f.mu.Lock()
	f.Series = append(f.Series, s)
	f.mu.Unlock()
}

// Poll hands over the series added since the last poll. Its place is
// kept in memory: a new process hands all of them over again, as lore
// does with its window, and the bot's unique keys drop them.
func (f *Ingest) Poll(ctx context.Context) ([]flow.Series, error) {
	if f.File != "" {
		// Another process (the test) appends series to the file.
		b, err := os.ReadFile(f.File)
		if err != nil && !os.IsNotExist(err) {
			return nil, &InfraError{err.Error()}
		}
		var list []flow.Series
		if len(b) > 0 {
			if err := json.Unmarshal(b, &list); err != nil {
				return nil, &InfraError{err.Error()}
			}
		}
		f.mu.Lock()
		f.Series = list
		f.mu.Unlock()
	}
	f.mu.Lock()
	out := append([]flow.Series(nil), f.Series[min(f.done, len(f.Series)):]...)
	f.done = len(f.Series)
	f.mu.Unlock()
	f.Calls.Add("poll %d", len(out))
	return out, nil
}

// Builder applies by hashing and builds by writing a kernel directory
// whose "kernel" file says how fast the kernel is. A series' subject
// steers it: "does-not-apply", "build-fails", "slow", "slightly-slow",
// "crash".
// Commits of Repo (a real git repository) are judged by their trees: a
// SLOW file makes them slow, a CRASH file makes them crash, a LOSSYHANG
// file makes them hang over the lossy link only (Lossy), a SQOVERFLOW
// file overflows the Send Queue under pressure only (Pressure), a LABDIES
// file (without SLOW) kills the lab under them, a BROKEN file or
// "nobuild" in that commit's own message makes them fail to build. With Base set, a series of several patches is applied to Repo
// as real commits, one per patch (as git am makes them), each adding
// the file its subject steers ("slow": SLOW, "crash": CRASH,
// "build-fails": BROKEN).
type Builder struct {
	Dir   string // where kernels are written
	Repo  string // a git repository for tree commits, optional
	Calls *Calls
	Delay time.Duration
	// FailBuilds makes this many builds fail with an infra error first.
	FailBuilds int
	// PanicBuilds makes this many builds panic first.
	PanicBuilds int
	// NoBase makes SelectBase fail as an unfetched store does.
	NoBase bool
	// NoBaseFirst makes the first this many SelectBase calls fail so.
	NoBaseFirst int
	// Config names the kernel configuration (part of KernelKey).
	Config string
	// Base, when set, is the commit of Repo every series is based on.
	Base string
	// ForgetErr is what Forget returns.
	ForgetErr error
	// Debug makes this the debug profile's builder: a "uaf" series'
	// kernel shows its use-after-free ("uaf" kernel), and a
	// "debug-build-fails" series does not build.
	Debug bool
	// Of is the builder that applied the series, whose subjects a
	// second configuration's builder (Debug) reads.
	Of *Builder
	// Machine, when set, is the machine's one build at a time (kbuild's
	// slot and heavy locks), shared by the builders of one bot.
	Machine chan struct{}
	// Slow is how long a commit's kernel takes to build from nothing (a
	// cold base), by commit. What a build spends is kept, so a stopped
	// build resumes where it stopped, as make does; "slow-build stopped"
	// and "slow-build done" are recorded.
	Slow map[string]time.Duration
	// Broken are commits whose kernels do not build, with the compiler's
	// error.
	Broken map[string]string

	mu      sync.Mutex
	applied map[string]string // candidate commit -> subject
}

func (f *Builder) SelectBase(ctx context.Context, s flow.Series) (flow.Base, error) {
	f.Calls.Add("base %s", s.MsgID)
	f.mu.Lock()
	first := f.NoBaseFirst > 0
	if first {
		f.NoBaseFirst--
	}
	f.mu.Unlock()
	if f.NoBase || first {
		return flow.Base{}, &InfraError{"no base: mainline/master is not in the store (rdmabot tree fetch)"}
	}
	if f.Base != "" {
		return flow.Base{Tree: "mainline", Commit: f.Base}, nil
	}
	return flow.Base{Tree: "mainline", Commit: strings.Repeat("b", 40)}, nil
}

// worktree checks rev of repo out in a temporary worktree; run runs git
// there (dir "" is the worktree) as the bot would commit; done removes it.
func worktree(ctx context.Context, repo, rev string) (wt string, run func(dir string, args ...string) (string, error), done func(), err error) {
	if wt, err = os.MkdirTemp("", "worktree-"); err != nil {
		return "", nil, nil, err
	}
	os.Remove(wt)
	run = func(dir string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=dev", "GIT_AUTHOR_EMAIL=dev@example.org",
			"GIT_COMMITTER_NAME=rdmabot", "GIT_COMMITTER_EMAIL=bot@example.org")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	done = func() {
		exec.Command("git", "-C", repo, "worktree", "remove", "--force", wt).Run()
		os.RemoveAll(wt)
	}
	if _, err := run(repo, "worktree", "add", "--detach", wt, rev); err != nil {
		done()
		return "", nil, nil, err
	}
	return wt, run, done, nil
}

// applyCommits commits each patch of s on base in Repo.
func (f *Builder) applyCommits(ctx context.Context, base string, s flow.Series) (string, error) {
	wt, run, done, err := worktree(ctx, f.Repo, base)
	if err != nil {
		return "", &InfraError{err.Error()}
	}
	defer done()
	head := ""
	for i, p := range s.Patches {
		subject := ""
		if m := regexp.MustCompile(`(?m)^Subject: (.*)$`).FindSubmatch(p.Raw); m != nil {
			subject = string(m[1])
		}
		file := fmt.Sprintf("patch%02d", i+1)
		for steer, name := range map[string]string{"slow": "SLOW", "crash": "CRASH", "build-fails": "BROKEN", "lab-dies": "LABDIES"} {
			if strings.Contains(subject, steer) {
				file = name
			}
		}
		if strings.Contains(subject, "fix-slow") {
			// A fix: takes the slowness out again.
			file = fmt.Sprintf("patch%02d", i+1)
			os.Remove(filepath.Join(wt, "SLOW"))
		}
		if err := os.WriteFile(filepath.Join(wt, file), []byte(subject), 0o644); err != nil {
			return "", err
		}
		if _, err := run(wt, "add", "-A"); err != nil {
			return "", err
		}
		if _, err := run(wt, "commit", "-q", "-m", subject); err != nil {
			return "", err
		}
		if head, err = run(wt, "rev-parse", "HEAD"); err != nil {
			return "", err
		}
	}
	return head, nil
}

func (f *Builder) Apply(ctx context.Context, base flow.Base, s flow.Series, trace io.Writer) (string, error) {
	f.Calls.Add("apply %s", s.MsgID)
	if strings.Contains(s.Subject, "does-not-apply") {
		return "", fmt.Errorf("patch 1/1 %q does not apply to %s", s.Subject, base.Commit[:12])
	}
	if strings.Contains(s.Subject, "new-version") && f.Base != "" && base.Commit != f.Base {
		// A new version of a series: it applies on the base only.
		return "", fmt.Errorf("patch 1/1 %q does not apply to %s", s.Subject, base.Commit[:12])
	}
	if f.Base != "" && f.Repo != "" && (len(s.Patches) > 1 || len(s.Closes) > 0 || len(s.Fixes) > 0) {
		return f.applyCommits(ctx, base.Commit, s)
	}
	h := sha1.Sum([]byte(base.Commit + s.MsgID + fmt.Sprint(s.Version)))
	c := hex.EncodeToString(h[:])
	f.mu.Lock()
	if f.applied == nil {
		f.applied = map[string]string{}
	}
	f.applied[c] = s.Subject
	f.mu.Unlock()
	return c, nil
}

// KernelKey is the commit with the builder's Config: a test changes
// Config as an operator changes a config fragment.
func (f *Builder) KernelKey(ctx context.Context, tree, commit string) (string, error) {
	if f.Config != "" {
		return commit + "-" + f.Config, nil
	}
	return commit, nil
}

func (f *Builder) Build(ctx context.Context, tree, commit string, trace io.Writer) (string, error) {
	if f.Debug {
		f.Calls.Add("debug-build %s %s", tree, commit)
	} else {
		f.Calls.Add("build %s %s", tree, commit)
	}
	fmt.Fprintf(trace, "make -j2 bzImage (fake) for %s\n", commit)
	release, err := occupy(ctx, f.Machine)
	if err != nil {
		return "", err
	}
	defer release()
	if err := f.wait(ctx, commit); err != nil {
		return "", err
	}
	if msg, ok := f.Broken[commit]; ok {
		return "", errors.New(msg)
	}
	f.mu.Lock()
	if f.PanicBuilds > 0 {
		f.PanicBuilds--
		f.mu.Unlock()
		var done func()
		done() // the nil func call kbuild once made on an early error
	}
	if f.FailBuilds > 0 {
		f.FailBuilds--
		f.mu.Unlock()
		return "", &InfraError{"builder: disk full"}
	}
	subject := f.applied[commit]
	f.mu.Unlock()
	if f.Of != nil {
		f.Of.mu.Lock()
		subject = f.Of.applied[commit]
		f.Of.mu.Unlock()
	}
	speed := "fast"
	switch {
	case f.Debug && strings.Contains(subject, "debug-build-fails"):
		return "", errors.New("net/sunrpc/xprtrdma/svc_rdma_transport.c:590:2: error: implicit declaration of function 'lockdep_assert_held_once'")
	case f.Debug && strings.Contains(subject, "uaf"):
		speed = "uaf"
	case strings.Contains(subject, "debug-build-fails"):
	case strings.Contains(subject, "build-fails"):
		return "", errors.New(buildFailsError)
	case strings.Contains(subject, "lossy-hang"):
		speed = "lossy-hang"
	case strings.Contains(subject, "sq-overflow"):
		speed = "sq-overflow"
	case strings.Contains(subject, "fsx-bad"):
		speed = "fsx-bad"
	case strings.Contains(subject, "fsx-once"):
		speed = "fsx-once"
	case strings.Contains(subject, "client-corrupt"):
		speed = "client-corrupt"
	case strings.Contains(subject, "slightly-slow"):
		speed = "slightly"
	case strings.Contains(subject, "slow"):
		speed = "slow"
	case strings.Contains(subject, "crash"):
		speed = "crash"
	case f.Repo != "" && subject == "" && commit != strings.Repeat("b", 40):
		// A commit of Repo: a tree commit, or a patch of a series applied
		// there.
		var err error
		if speed, err = f.judgeCommit(commit); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(f.Dir, commit)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "kernel"), []byte(speed), 0o644)
}

// wait is a build's time: Delay, or what is left of a Slow one.
func (f *Builder) wait(ctx context.Context, commit string) error {
	f.mu.Lock()
	left, slow := f.Slow[commit]
	f.mu.Unlock()
	if !slow {
		left = f.Delay
	}
	start := time.Now()
	select {
	case <-time.After(left):
	case <-ctx.Done():
		if slow {
			f.mu.Lock()
			f.Slow[commit] = left - time.Since(start)
			f.mu.Unlock()
			f.Calls.Add("slow-build stopped %s", commit)
		}
		return ctx.Err()
	}
	if slow {
		f.mu.Lock()
		f.Slow[commit] = 0
		f.mu.Unlock()
		f.Calls.Add("slow-build done %s", commit)
	}
	return nil
}

// Forget is told of each kernel pruned from the bot's artifact store,
// by the directory it was moved to (named by its key).
func (f *Builder) Forget(dir string) error {
	f.Calls.Add("forget %s", filepath.Base(dir))
	return f.ForgetErr
}

func (f *Builder) judgeCommit(commit string) (string, error) {
	repo, err := git.PlainOpen(f.Repo)
	if err != nil {
		return "", &InfraError{err.Error()}
	}
	c, err := repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return "", fmt.Errorf("no commit %s: %w", commit, err)
	}
	if strings.Contains(c.Message, "nobuild") {
		return "", errors.New("drivers/infiniband/core/cma.c:1:1: error: nobuild")
	}
	if _, err := c.File("BROKEN"); err == nil {
		return "", errors.New("net/sunrpc/xprtrdma/svc_rdma_sendto.c:42:1: error: expected ';' before '}' token")
	}
	if _, err := c.File("CRASH"); err == nil {
		return "crash", nil
	}
	if _, err := c.File("LOSSYHANG"); err == nil {
		return "lossy-hang", nil
	}
	if _, err := c.File("SQOVERFLOW"); err == nil {
		return "sq-overflow", nil
	}
	if _, err := c.File("SLOW"); err == nil {
		return "slow", nil
	}
	if _, err := c.File("LABDIES"); err == nil {
		return "lab-dies", nil
	}
	return "fast", nil
}

// Trees resolves refs of Repo with git and reverts in a worktree.
type Trees struct {
	Repo  string
	Calls *Calls
}

// Fetch fails for a tree named "unreachable", as a tree behind a dead
// network does; any other tree is already there.
func (f *Trees) Fetch(ctx context.Context, tree string) error {
	f.Calls.Add("fetch %s", tree)
	if tree == "unreachable" {
		return &InfraError{"fetch tree unreachable: git fetch: exit status 128: Could not resolve host"}
	}
	return nil
}

func (f *Trees) Head(ctx context.Context, tree, ref string) (string, error) {
	f.Calls.Add("head %s %s", tree, ref)
	out, err := exec.CommandContext(ctx, "git", "-C", f.Repo, "rev-parse", ref+"^{commit}").Output()
	if err != nil {
		return "", fmt.Errorf("no ref %s: %w", ref, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (f *Trees) Revert(ctx context.Context, tree, onto, commit string) (string, error) {
	f.Calls.Add("revert %s on %s", commit, onto)
	wt, run, done, err := worktree(ctx, f.Repo, onto)
	if err != nil {
		return "", err
	}
	defer done()
	if _, err := run(wt, "revert", "--no-edit", commit); err != nil {
		return "", err
	}
	return run(wt, "rev-parse", "HEAD")
}

func (f *Trees) GitDir(tree string) (string, error) { return f.Repo, nil }

// Lab measures write_MBps from the kernel's speed: fast ~100, slow ~52,
// crash ends every run in a crash. Two runs on one pair at once is an
// error the test sees.
type Lab struct {
	Calls *Calls
	Delay time.Duration
	// FailRuns makes this many runs fail with an infra error first.
	FailRuns int
	// PanicRuns makes this many runs panic first, holding the pair.
	PanicRuns int
	// Hold, when set, keeps every run on the pair until it is closed.
	Hold chan struct{}
	// Machine, when set, is the heavy lock a boot shares with builds
	// (Builder.Machine): a run waits while a kernel builds.
	Machine chan struct{}

	mu      sync.Mutex
	busy    map[string]bool
	Overlap int
	seq     int
	// slowdown scales every later run's figures, as a machine that
	// became busier would (SetSlowdown).
	slowdown float64
}

// SetSlowdown makes every later run slower by this fraction (0.2 = 20 %),
// whatever the kernel.
func (f *Lab) SetSlowdown(x float64) {
	f.mu.Lock()
	f.slowdown = x
	f.mu.Unlock()
}

// CandidateSide is the client for a series whose patches change only
// client files (net/sunrpc/xprtrdma/ but svc_rdma*, fs/nfs/), else the
// server, as the real lab's rule.
func (f *Lab) CandidateSide(s flow.Series) string {
	side := "server"
	for _, p := range s.Patches {
		for _, l := range strings.Split(string(p.Raw), "\n") {
			file, ok := strings.CutPrefix(l, "+++ b/")
			if !ok {
				continue
			}
			client := strings.HasPrefix(file, "fs/nfs/") ||
				strings.HasPrefix(file, "net/sunrpc/xprtrdma/") && !strings.Contains(file, "svc_rdma")
			if !client {
				return "server"
			}
			side = "client"
		}
	}
	return side
}

func (f *Lab) Run(ctx context.Context, pair string, boot flow.Boot, n int, trace io.Writer) ([]flow.Sample, error) {
	dir := boot.Dir
	release, err := occupy(ctx, f.Machine)
	if err != nil {
		return nil, err
	}
	defer release()
	f.mu.Lock()
	if f.busy == nil {
		f.busy = map[string]bool{}
	}
	if f.busy[pair] {
		f.Overlap++
	}
	f.busy[pair] = true
	fail := f.FailRuns > 0
	if fail {
		f.FailRuns--
	}
	panics := f.PanicRuns > 0
	if panics {
		f.PanicRuns--
	}
	f.seq++
	seq := f.seq
	scale := 1 - f.slowdown
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.busy[pair] = false
		f.mu.Unlock()
	}()
	speed, err := os.ReadFile(filepath.Join(dir, "kernel"))
	if err != nil {
		return nil, &InfraError{"lab: cannot read kernel: " + err.Error()}
	}
	if boot.Trusted != "" {
		f.Calls.Add("run %s %s %d on the %s beside %s", pair, filepath.Base(dir), n, boot.Side, filepath.Base(boot.Trusted))
	} else {
		f.Calls.Add("run %s %s %d", pair, filepath.Base(dir), n)
	}
	if f.Hold != nil {
		select {
		case <-f.Hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	select {
	case <-time.After(f.Delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if fail || string(speed) == "lab-dies" {
		return nil, &InfraError{"lab: guest 2 died (qemu exited with signal 9)"}
	}
	if panics {
		panic("lab: index out of range [3] with length 3")
	}
	var out []flow.Sample
	for i := range n {
		noise := float64((seq*7+i*13)%5) - 2 // -2..2, deterministic
		mb := func(v float64) float64 { return (v + noise) * scale }
		switch string(speed) {
		case "crash":
			out = append(out, flow.Sample{Crash: "INFO: task hung in svc_rdma_drain"})
		case "client-corrupt":
			// It corrupts what it writes as a client, beside a trusted
			// server that checks it; as the server it runs as any other.
			if boot.Side == "client" && boot.Trusted != "" {
				out = append(out, flow.Sample{Corrupt: "iteration 1 of 2: the file the client wrote over NFS/RDMA is not, on the server, the data it was given (server's check: mismatch)",
					Metrics: map[string]float64{"write_MBps": mb(100), "read_MBps": mb(200)}})
				continue
			}
			out = append(out, flow.Sample{Metrics: map[string]float64{"write_MBps": mb(100), "read_MBps": mb(200)}})
		case "slow":
			out = append(out, flow.Sample{Metrics: map[string]float64{"write_MBps": mb(52), "read_MBps": mb(200)}})
		case "slightly":
			out = append(out, flow.Sample{Metrics: map[string]float64{"write_MBps": mb(96), "read_MBps": mb(200)}})
		default:
			out = append(out, flow.Sample{Metrics: map[string]float64{"write_MBps": mb(100), "read_MBps": mb(200)}})
		}
	}
	fmt.Fprintf(trace, "lab: %d runs of %s done\n", n, speed)
	return out, nil
}

// Lossy is the lossy profile over Lab: a "lossy-hang" kernel (a subject
// saying so) runs like any other on the default link and hangs over the
// lossy one. Why asks for it when a patch holds Match.
type Lossy struct {
	Lab   *Lab
	Calls *Calls
	Match string
	N     int
	// FailRuns makes this many lossy runs fail with an infra error first.
	FailRuns int
	// NoBoot is a kernel ("fast", "lossy-hang", ...) that does not come
	// up over the lossy link: the kernel's fault, not the lab's.
	NoBoot string

	mu sync.Mutex
}

func (f *Lossy) Name() string { return flow.ProfileLossy }

func (f *Lossy) Shapes(pair string) bool { return true }

func (f *Lossy) Why(s flow.Series) string { return why(s, f.Match) }

// why is a fake profile's reason: match, when a patch holds it.
func why(s flow.Series, match string) string {
	for _, p := range s.Patches {
		if bytes.Contains(p.Raw, []byte(match)) {
			return match + " code (fake)"
		}
	}
	return ""
}

func (f *Lossy) Boots() int { return f.N }

func (f *Lossy) Run(ctx context.Context, pair string, k flow.Boot, boot int, trace io.Writer) ([]flow.Sample, error) {
	dir := k.Dir
	const n = 1
	f.mu.Lock()
	fail := f.FailRuns > 0
	if fail {
		f.FailRuns--
	}
	f.mu.Unlock()
	f.Calls.Add("lossy %s %s %d", pair, filepath.Base(dir), n)
	if fail {
		return nil, &InfraError{"lab: lossy link: guest 1 died"}
	}
	speed, err := os.ReadFile(filepath.Join(dir, "kernel"))
	if err == nil && f.NoBoot != "" && string(speed) == f.NoBoot {
		return nil, errors.New("lab: server did not come up: no RDMA link")
	}
	if err == nil && string(speed) == "lossy-hang" {
		return []flow.Sample{{Crash: "INFO: task hung in __ib_drain_sq"}}, nil
	}
	return f.Lab.Run(ctx, pair, k, n, trace)
}

// Fstests is the fstests profile: each boot reports one test, which an
// "fsx-bad" kernel fails with bad data read back, and an "fsx-once"
// kernel the same in its first boot only.
// Why asks for it when a patch holds Match; each call says whether the
// boot asked for the larger group (Boot.Thorough), or which tests it
// ran again (Confirm).
type Fstests struct {
	Calls *Calls
	Match string
	N     int
}

func (f *Fstests) Name() string { return flow.ProfileFstests }

func (f *Fstests) Shapes(pair string) bool { return true }

func (f *Fstests) Why(s flow.Series) string { return why(s, f.Match) }

func (f *Fstests) Boots() int { return f.N }

func (f *Fstests) Run(ctx context.Context, pair string, k flow.Boot, boot int, trace io.Writer) ([]flow.Sample, error) {
	f.Calls.Add("fstests %s %s thorough=%t", pair, filepath.Base(k.Dir), k.Thorough)
	return f.boot(k, false), nil
}

func (f *Fstests) Confirm(ctx context.Context, pair string, k flow.Boot, boot int, tests []string, trace io.Writer) ([]flow.Sample, error) {
	f.Calls.Add("fstests %s %s again %s", pair, filepath.Base(k.Dir), strings.Join(tests, ","))
	if !slices.Equal(tests, []string{"generic/075"}) {
		return nil, fmt.Errorf("fstests: asked to confirm %v, which no boot failed", tests)
	}
	return f.boot(k, true), nil
}

func (f *Fstests) boot(k flow.Boot, again bool) []flow.Sample {
	t := flow.TestResult{Name: "generic/075", Status: flow.TestPass, Secs: 12}
	b, _ := os.ReadFile(filepath.Join(k.Dir, "kernel"))
	switch {
	case string(b) == "fsx-bad":
		t.Status, t.Corrupt, t.Why = flow.TestFail, true, "READ BAD DATA: offset = 0x2a01, size = 0x1ff3"
	case string(b) == "fsx-once" && !again:
		t.Status, t.Corrupt, t.Why = flow.TestFail, true, "READ BAD DATA: offset = 0x1000, size = 0x200"
	}
	ops := int64(1000)
	if again {
		ops = 400
	}
	return []flow.Sample{{Profile: flow.ProfileFstests + "-rxe", Tests: []flow.TestResult{t}, ServerOps: ops, Confirming: again}}
}

// Debug is the debug profile over Lab: it boots each side's debug
// kernel (Boot.Debug), where a "uaf" kernel reports a use-after-free.
// Why asks for it when a patch holds Match.
type Debug struct {
	Lab   *Lab
	Calls *Calls
	Match string
	N     int
}

func (f *Debug) Name() string { return flow.ProfileDebug }

func (f *Debug) Shapes(pair string) bool { return true }

func (f *Debug) Why(s flow.Series) string { return why(s, f.Match) }

func (f *Debug) Boots() int { return f.N }

func (f *Debug) Run(ctx context.Context, pair string, k flow.Boot, boot int, trace io.Writer) ([]flow.Sample, error) {
	f.Calls.Add("debug %s %s", pair, filepath.Base(k.Debug))
	if k.Debug == "" {
		return nil, &InfraError{"debug profile: no debug kernel"}
	}
	if b, err := os.ReadFile(filepath.Join(k.Debug, "kernel")); err == nil && string(b) == "uaf" {
		return []flow.Sample{{Crash: "KASAN: slab-use-after-free Read in svc_rdma_free",
			Log: "BUG: KASAN: slab-use-after-free in svc_rdma_free+0x5c/0x1d0 net/sunrpc/xprtrdma/svc_rdma_transport.c:597"}}, nil
	}
	return f.Lab.Run(ctx, pair, flow.Boot{Dir: k.Debug, Trusted: k.Trusted, Side: k.Side}, 1, trace)
}

// Pressure is the Send Queue pressure profile over Lab: an "sq-overflow"
// kernel (a subject saying so) runs like any other on the default test
// and, under pressure, has its provider refuse Sends (sq_full) on each
// of Providers. Why asks for it when a patch holds Match.
type Pressure struct {
	Lab       *Lab
	Calls     *Calls
	Match     string
	Providers []string
}

func (f *Pressure) Name() string { return flow.ProfilePressure }

func (f *Pressure) Shapes(pair string) bool { return true }

func (f *Pressure) Why(s flow.Series) string { return why(s, f.Match) }

func (f *Pressure) Boots() int { return len(f.Providers) }

func (f *Pressure) Run(ctx context.Context, pair string, k flow.Boot, boot int, trace io.Writer) ([]flow.Sample, error) {
	dir := k.Dir
	prov := f.Providers[boot%len(f.Providers)]
	f.Calls.Add("pressure-%s %s %s", prov, pair, filepath.Base(dir))
	speed, err := os.ReadFile(filepath.Join(dir, "kernel"))
	if err != nil {
		return nil, &InfraError{err.Error()}
	}
	h := map[string]int{"write_chunks": 3000, "sq_starve": 800}
	if string(speed) == "sq-overflow" {
		h["sq_full"], h["sq_starve"] = 3, 0
	}
	return []flow.Sample{{Profile: flow.ProfilePressure + "-" + prov, Health: h, Metrics: map[string]float64{"read_MBps": 9}}}, nil
}

// ClientSide is the client-side profile over Lab: a series' kernel on
// the client beside the base on the server (the base beside itself),
// where a "client-corrupt" kernel corrupts the files it writes. Why asks
// for it when a patch holds Match.
type ClientSide struct {
	Lab   *Lab
	Calls *Calls
	Match string
	N     int
}

func (f *ClientSide) Name() string { return flow.ProfileClientSide }

func (f *ClientSide) Shapes(pair string) bool { return true }

func (f *ClientSide) SeriesOnly() bool { return true }

func (f *ClientSide) Why(s flow.Series) string { return why(s, f.Match) }

func (f *ClientSide) Boots() int { return f.N }

func (f *ClientSide) Run(ctx context.Context, pair string, k flow.Boot, boot int, trace io.Writer) ([]flow.Sample, error) {
	f.Calls.Add("client-side %s %s", pair, filepath.Base(k.Dir))
	trusted := k.Trusted
	if trusted == "" {
		trusted = k.Dir
	}
	smp, err := f.Lab.Run(ctx, pair, flow.Boot{Dir: k.Dir, Trusted: trusted, Side: "client"}, 1, trace)
	for i := range smp {
		smp[i].Profile = flow.ProfileClientSide
	}
	return smp, err
}

// Decider calls a regression when write_MBps drops more than 10 % (an
// improvement when it gains as much) and
// asks for one more round when it has fewer than 6 candidate samples of a
// borderline change.
type Decider struct{}

func (Decider) Decide(ctx context.Context, id string, base, cand []flow.Sample) (flow.Decision, error) {
	if err := ctx.Err(); err != nil {
		return flow.Decision{}, err
	}
	for _, s := range cand {
		if s.Crash != "" {
			return flow.Decision{Verdict: flow.Crash, Summary: s.Crash}, nil
		}
	}
	for _, s := range cand {
		if s.Corrupt != "" {
			return flow.Decision{Verdict: flow.DataCorruption, Summary: s.Corrupt}, nil
		}
	}
	// As reports judges: an fstests test the base passes and the
	// candidate fails, and passes in none of its boots, decides, bad data
	// read back as corruption.
	passed := map[string]bool{}
	for _, s := range cand {
		for _, t := range s.Tests {
			passed[t.Name] = passed[t.Name] || t.Status == flow.TestPass
		}
	}
	for _, s := range cand {
		for _, t := range s.Tests {
			if t.Status == flow.TestFail && t.Corrupt && !passed[t.Name] {
				return flow.Decision{Verdict: flow.DataCorruption, Summary: t.Name + ": " + t.Why}, nil
			}
		}
	}
	// As reports judges: a full Send Queue no base boot shows decides.
	if sqFull(cand) > 0 && sqFull(base) == 0 {
		return flow.Decision{Verdict: flow.Regression, Summary: fmt.Sprintf("%d Sends refused: Send Queue full", sqFull(cand))}, nil
	}
	b, c := median(base), median(cand)
	if b == 0 {
		return flow.Decision{Verdict: flow.Pass, Summary: "no base"}, nil
	}
	change := c/b - 1
	summary := fmt.Sprintf("write_MBps %.1f -> %.1f (%+.0f%%)", b, c, change*100)
	if change < -0.10 {
		return flow.Decision{Verdict: flow.Regression, Summary: summary, Metric: "write_MBps", Change: change}, nil
	}
	if change > 0.10 {
		return flow.Decision{Verdict: flow.Improvement, Summary: summary, Metric: "write_MBps", Change: change}, nil
	}
	if change < -0.02 && len(cand) < 6 {
		return flow.Decision{NeedMore: 3, Summary: summary}, nil
	}
	return flow.Decision{Verdict: flow.Pass, Summary: summary}, nil
}

func sqFull(samples []flow.Sample) int {
	n := 0
	for _, s := range samples {
		n += s.Health["sq_full"]
	}
	return n
}

func median(samples []flow.Sample) float64 {
	var v []float64
	for _, s := range samples {
		// A profile's figures are not the default test's (wire.metrics).
		if s.Profile != "" {
			continue
		}
		if x, ok := s.Metrics["write_MBps"]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// Reporter delivers once per key: into memory, and into Dir as one file
// per key when Dir is set (an outbox that survives the process).
type Reporter struct {
	Dir   string
	Calls *Calls

	mu        sync.Mutex
	Delivered map[string]flow.Report
	Attempts  int
	// Begun are the reports whose testing started, by key; FailStarts
	// Started calls fail first (a reporter's database down).
	Begun      map[string]flow.Report
	FailStarts int
	// failAnswered Answered calls fail first (the outbox's database down).
	failAnswered int
}

// FailAnswered makes the next n Answered calls fail.
func (f *Reporter) FailAnswered(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAnswered = n
}

// MessageID is the Message-ID of the reply delivered under key.
func (f *Reporter) MessageID(key string) string {
	return "reply." + hex.EncodeToString([]byte(key)) + "@rdmabot.example.org"
}

// Answered tells which series version a delivered reply answered.
func (f *Reporter) Answered(ctx context.Context, replyID string) (string, int, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failAnswered > 0 {
		f.failAnswered--
		f.Calls.Add("answered %s: failed", replyID)
		return "", 0, false, errors.New("fake reporter: outbox unreadable")
	}
	for key, r := range f.Delivered {
		if f.MessageID(key) == replyID && r.Series != nil {
			f.Calls.Add("answered %s: %s", replyID, key)
			return r.Series.MsgID, r.Series.Version, true, nil
		}
	}
	return "", 0, false, nil
}

// Started records that a series' testing started.
func (f *Reporter) Started(ctx context.Context, r flow.Report) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls.Add("started %s", r.Key)
	if f.FailStarts > 0 {
		f.FailStarts--
		return errors.New("fake reporter: cannot record the start")
	}
	if f.Begun == nil {
		f.Begun = map[string]flow.Report{}
	}
	f.Begun[r.Key] = r
	return nil
}

// Flush counts the periodic deliveries of what is due.
func (f *Reporter) Flush(ctx context.Context) (int, error) {
	f.Calls.Add("flush")
	return 0, nil
}

func (f *Reporter) Deliver(ctx context.Context, r flow.Report) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Attempts++
	f.Calls.Add("deliver %s %s", r.Key, r.Verdict)
	if f.Delivered == nil {
		f.Delivered = map[string]flow.Report{}
	}
	if _, ok := f.Delivered[r.Key]; ok {
		return nil
	}
	f.Delivered[r.Key] = r
	if f.Dir == "" {
		return nil
	}
	name := filepath.Join(f.Dir, hex.EncodeToString([]byte(r.Key)))
	if _, err := os.Stat(name); err == nil {
		return nil // sent by an earlier incarnation
	}
	b, _ := json.Marshal(r)
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// Get returns the report delivered under key.
func (f *Reporter) Get(key string) (flow.Report, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.Delivered[key]
	return r, ok
}

// Count is the number of distinct replies.
func (f *Reporter) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.Delivered)
}

// Mail is a series mail as intake would hand it over: raw is
// "Header: value" lines, a blank line and the body; the Message-ID,
// Subject and Body are read from it the simple way a test's mail needs.
func Mail(raw string) *flow.Message {
	m := &flow.Message{Raw: []byte(raw)}
	head, body, _ := strings.Cut(raw, "\n\n")
	m.Body = body
	for _, l := range strings.Split(head, "\n") {
		name, value, _ := strings.Cut(l, ":")
		m.Header = append(m.Header, flow.Field{Name: name, Raw: value})
		switch strings.ToLower(name) {
		case "subject":
			m.Subject = strings.TrimSpace(value)
		case "message-id":
			m.MessageID = strings.Trim(value, " <>")
		}
	}
	return m
}

// buildFailsError is a "build-fails" series' compiler error.
const buildFailsError = "net/sunrpc/xprtrdma/svc_rdma_sendto.c:42:1: error: expected ';' before '}' token"

// Checker is the quick check of a series' changed files (bot.Checker):
// it takes no machine slot, as kbuild's check takes no heavy lock. A
// "build-fails" series (applied by Of) fails it with the compiler error
// its build would give; a "check-skips" one compiles nothing; a
// "comment-only" one compiles its one changed file to the base's object;
// any other compiles its one changed file.
type Checker struct {
	Of    *Builder
	Calls *Calls
	// FailChecks makes this many checks fail with an infra error first.
	FailChecks int
	// Delay is how long a check compiles.
	Delay time.Duration

	mu sync.Mutex
}

func (c *Checker) Check(ctx context.Context, tree, base, candidate string, trace io.Writer) (flow.Checked, error) {
	c.Calls.Add("check %s %s", tree, candidate)
	select {
	case <-time.After(c.Delay):
	case <-ctx.Done():
		return flow.Checked{}, ctx.Err()
	}
	c.mu.Lock()
	fail := c.FailChecks > 0
	if fail {
		c.FailChecks--
	}
	c.mu.Unlock()
	if fail {
		return flow.Checked{}, &InfraError{"kbuild: check: no space left on device"}
	}
	c.Of.mu.Lock()
	subject := c.Of.applied[candidate]
	c.Of.mu.Unlock()
	switch {
	case strings.Contains(subject, "build-fails") && !strings.Contains(subject, "debug-build-fails"):
		return flow.Checked{}, errors.New(buildFailsError)
	case strings.Contains(subject, "check-skips"):
		fmt.Fprintln(trace, "quick check skipped: the series changes Kconfig")
		return flow.Checked{}, nil
	}
	objs := []string{"net/sunrpc/xprtrdma/svc_rdma_sendto.o"}
	if strings.Contains(subject, "comment-only") {
		return flow.Checked{Compiled: objs, Unchanged: true, Detail: json.RawMessage(`{"unchanged":{"objects":["net/sunrpc/xprtrdma/svc_rdma_sendto.o"]}}`)}, nil
	}
	return flow.Checked{Compiled: objs}, nil
}

// occupy takes the one slot of machine (the builds' and boots' shared
// heavy lock; nil: none) until release, or fails when ctx ends first.
func occupy(ctx context.Context, machine chan struct{}) (release func(), err error) {
	if machine == nil {
		return func() {}, nil
	}
	select {
	case machine <- struct{}{}:
		return func() { <-machine }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
