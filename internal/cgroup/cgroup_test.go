package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// newOrSkip is a group with l's limits, or a skip saying why this machine
// gives none (Check's own words).
func newOrSkip(t *testing.T, l Limits) *Group {
	t.Helper()
	if err := Check(); err != nil {
		var lost *LostError
		if !errors.As(err, &lost) || !strings.Contains(err.Error(), "scripts/run.sh") {
			t.Fatalf("Check: want a *LostError telling the operator what to do, got %v", err)
		}
		t.Skipf("no cgroup limits here: %v", err)
	}
	cg := New("rdmabot-cgtest", l)
	if cg == nil {
		t.Fatal("Check passed, New made no group")
	}
	t.Cleanup(cg.Remove)
	return cg
}

// run runs script in the group, the way builds and guests join theirs.
func run(cg *Group, script string) (string, error) {
	out, err := exec.Command("sh", "-c", cg.Join()+script).CombinedOutput()
	return string(out), err
}

// A program that takes memory without end is killed at the group's
// limit, and the group counts it; the test process is untouched.
func TestMemoryLimitKills(t *testing.T) {
	cg := newOrSkip(t, Limits{Memory: 64 << 20})
	// tail keeps the line it is reading: /dev/zero has no newline.
	out, err := run(cg, "exec tail /dev/zero")
	if err == nil {
		t.Fatalf("tail /dev/zero ended well under a 64 MiB limit: %s", out)
	}
	if cg.OOMs() < 1 {
		t.Errorf("killed (%v) but the group counts no OOM kill", err)
	}
	t.Logf("tail /dev/zero under 64 MiB: %v, %d OOM kill(s)", err, cg.OOMs())
}

// A fork bomb gets no more tasks than the limit.
func TestTaskLimitBoundsForks(t *testing.T) {
	cg := newOrSkip(t, Limits{Tasks: 16})
	out, err := run(cg, `n=0; while [ $n -lt 64 ]; do sleep 3 & n=$((n + 1)); done; wait`)
	if err == nil && !strings.Contains(out, "fork") {
		t.Fatalf("64 sleeps started under a limit of 16 tasks: %v %s", err, out)
	}
	first, _, _ := strings.Cut(out, "\n")
	t.Logf("64 sleeps under a limit of 16 tasks: %v, %q", err, first)
}

// Busy loops on every CPU are held to the group's one CPU: the
// scheduler throttles them, and they use about one CPU's time.
func TestCPULimitThrottles(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: a limit of one CPU cannot bind")
	}
	cg := newOrSkip(t, Limits{CPUs: 1})
	// The shell waits for its loops, so its usage counts theirs.
	cmd := exec.Command("sh", "-c", cg.Join()+fmt.Sprintf(
		`p=; for i in $(seq %d); do (while :; do :; done) & p="$p $!"; done; sleep 2; kill $p; wait`, runtime.NumCPU()))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("busy loops: %v %s", err, out)
	}
	used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	throttled := int64(-1)
	for _, d := range cg.dirs {
		b, _ := os.ReadFile(filepath.Join(d, "cpu.stat"))
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "nr_throttled "); ok {
				throttled, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	t.Logf("%d busy loops for %v: throttled %d times, %v of CPU", runtime.NumCPU(), wall.Round(time.Millisecond), throttled, used)
	// One CPU for the wall time, and a period's grace.
	if used > wall+100*time.Millisecond {
		t.Errorf("%v of CPU in %v under a limit of one CPU", used, wall)
	}
	if throttled <= 0 {
		if throttled == 0 && used < wall*9/10 {
			// Others held the CPUs: the loops never asked for more than one.
			t.Skipf("a busy machine: %d loops got %v of CPU in %v, never more than the limit, so nothing to throttle", runtime.NumCPU(), used, wall)
		}
		t.Errorf("busy loops on %d CPUs were never throttled under a limit of one CPU", runtime.NumCPU())
	}
}

// Remove kills what is left and leaves no directory behind.
func TestRemoveKillsAndCleans(t *testing.T) {
	cg := newOrSkip(t, Limits{Tasks: 8})
	cmd := exec.Command("sh", "-c", cg.Join()+"exec sleep 600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Joined: its pid is in the group before sleep runs.
	for range 100 {
		if b, _ := os.ReadFile(cg.procsFiles()[0]); len(strings.Fields(string(b))) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cg.Remove()
	if err := <-done; err == nil {
		t.Error("sleep 600 ended well: Remove did not kill it")
	}
	for _, d := range cg.dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", d, err)
		}
	}
}

// A v2 run's group goes in the process's own cgroup when memory is
// enabled for its children, else beside it in a delegated parent that
// enables memory and hands over its cgroup.procs, else in its own.
func TestV2Base(t *testing.T) {
	root := t.TempDir()
	mk := func(dir, subtree string, procs bool) {
		d := filepath.Join(root, dir)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte(subtree), 0o644)
		if procs {
			os.WriteFile(filepath.Join(d, "cgroup.procs"), nil, 0o644)
		}
	}
	mk(".", "cpu memory pids\n", true)
	mk("enabled", "memory pids\n", true)   // a process's own, enabling memory
	mk("deleg", "cpu memory pids\n", true) // a delegated parent...
	mk("deleg/serve", "", true)            // ...and the leaf serve sits in
	mk("plain", "pids\n", true)            // no memory for its children...
	mk("plain/leaf", "", true)             // ...so none beside this one
	mk("unhanded", "memory\n", false)      // memory, but no cgroup.procs to move into
	mk("unhanded/leaf", "", true)
	for _, c := range []struct{ own, want string }{
		{"/enabled", "enabled"},
		{"/deleg/serve", "deleg"},
		{"/plain/leaf", "plain/leaf"},
		{"/unhanded/leaf", "unhanded/leaf"},
	} {
		if got := v2Base(root, c.own); got != filepath.Join(root, c.want) {
			t.Errorf("own %s: %s, want %s", c.own, got, filepath.Join(root, c.want))
		}
	}
	// The root never looks above itself.
	bare := t.TempDir()
	if got := v2Base(bare, "/"); got != bare {
		t.Errorf("own / without memory: %s, want the root %s", got, bare)
	}
}
