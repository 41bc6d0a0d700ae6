package cgroup

import (
	"errors"
	"os"
	"os/exec"
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
}

// A fork bomb gets no more tasks than the limit.
func TestTaskLimitBoundsForks(t *testing.T) {
	cg := newOrSkip(t, Limits{Tasks: 16})
	out, err := run(cg, `n=0; while [ $n -lt 64 ]; do sleep 3 & n=$((n + 1)); done; wait`)
	if err == nil && !strings.Contains(out, "fork") {
		t.Fatalf("64 sleeps started under a limit of 16 tasks: %v %s", err, out)
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
