package kbuild

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// Finding 5: an untrusted tree whose base builds fails, hangs or fills
// its disk: a failed build (a verdict), never infrastructure (a retry).
func TestHostileUntrustedFailuresAreVerdicts(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	defer func(d time.Duration) { diskPoll = d }(diskPoll)
	diskPoll = 100 * time.Millisecond
	b := newToyBuilder(t, Options{Timeout: 3 * time.Second, Limits: Limits{Memory: 64 << 20, Tmp: 8 << 20, Disk: 8 << 20, Files: 5000, Log: 1 << 20}})
	ctx := context.Background()
	oomTail := "out of memory"
	if cg := newCgroup(Limits{Memory: 64 << 20}); cg == nil {
		oomTail = "" // only the tmpfs and file size limits apply here
	} else {
		cg.remove()
	}
	for _, c := range []struct{ name, recipe, target, tail string }{
		{"prints no space", "\techo 'main.c: No space left on device' && echo 'Killed signal terminated program cc1' && false", "bzImage", ""},
		{"kills itself", "\tkill -9 $$PPID", "bzImage", ""},
		{"hangs", "\tsleep 60", "timeout", "build timeout"},
		{"fills its disk", "\thead -c 64M /dev/zero > $(O)/big; sleep 60", "disk", "disk limit"},
		// Failing before the watch looks (as when the host's disk filled
		// up under it) is still over its own limit.
		{"fills its disk and fails at once", "\thead -c 64M /dev/zero > $(O)/big; false", "disk", "disk limit"},
		{"makes empty files", "\tmkdir $(O)/many && cd $(O)/many && seq 20000 | xargs touch; sleep 60", "disk", "limit of 5000 files"},
		{"fills /tmp", "\thead -c 64M /dev/zero > /tmp/big", "bzImage", ""},
		{"eats memory", "\thead -c 512M /dev/zero | tail >/dev/null", "bzImage", oomTail},
		{"prints forever", "\tyes 'spam spam spam' | head -c 64M; false", "bzImage", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tree := r.edit(map[string]string{"Makefile": hostileMakefile(t, map[string]string{bzImageLine: c.recipe})})
			start := time.Now()
			_, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: tree, Lab: lab})
			var be *BuildError
			if !errors.As(err, &be) {
				t.Fatalf("want *BuildError, got %v", err)
			}
			if be.Target != c.target || !strings.Contains(be.Tail, c.tail) {
				t.Errorf("target %q tail %q, want %q and %q", be.Target, be.Tail, c.target, c.tail)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %v", d)
			}
			if fi, err := os.Stat(be.Log); err != nil || fi.Size() > 1<<20+4096 {
				t.Errorf("log %v, %v", fi.Size(), err)
			}
		})
	}
	// The same hang from a trusted tree (a base) is still the machine's.
	slow := r.edit(map[string]string{"Makefile": hostileMakefile(t, map[string]string{bzImageLine: "\tsleep 60"})})
	_, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: slow, Lab: lab, Trusted: true})
	var ie *InfraError
	if !errors.As(err, &ie) {
		t.Errorf("trusted hang: want *InfraError, got %v", err)
	}
}

// The memory limit is a cgroup's, where this machine lets us make one.
func TestSandboxMemoryLimit(t *testing.T) {
	cg := newCgroup(Limits{Memory: 64 << 20})
	if cg == nil {
		t.Skip("cannot create a memory cgroup here")
	}
	cg.remove()
	sb := &Sandbox{Bwrap: requireBwrap(t), Src: t.TempDir(), Out: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"},
		Limits: &Limits{Memory: 64 << 20, Tasks: 64}}
	var out limitedBuffer
	err := sb.Run(context.Background(), &out, "sh", "-c", "head -c 512M /dev/zero | tail >/dev/null")
	var oom *OOMError
	if !errors.As(err, &oom) {
		t.Fatalf("want *OOMError, got %v: %s", err, out.String())
	}
	err = sb.Run(context.Background(), &out, "sh", "-c", "for i in $(seq 100); do sleep 5 & done; wait")
	if err == nil {
		t.Error("100 tasks ran under a limit of 64")
	}
}
