package kbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// probeMakefile tries what a hostile build would: write into the source,
// reach a listener on the host's loopback, read the caller's environment
// and files outside the toolchain. Each probe prints a word either way.
const probeMakefile = `
all:
	@if touch $(SRC)/pwned 2>/dev/null; then echo SRC-WRITABLE; else echo SRC-DENIED; fi
	@if bash -c 'echo hi >/dev/tcp/127.0.0.1/$(PORT)' 2>/dev/null; then echo NET-REACHED; else echo NET-DENIED; fi
	@if [ -n "$$KBUILD_PROBE_SECRET" ]; then echo ENV-LEAKED; else echo ENV-CLEAN; fi
	@if [ -e /etc/hostname ] || [ -e /root ]; then echo HOST-VISIBLE; else echo HOST-HIDDEN; fi
	@touch $(OUT)/made && echo OUT-WRITTEN
`

func requireBwrap(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap not installed (Debian package bubblewrap)")
	}
	return p
}

func probe(t *testing.T, sandboxed bool) string {
	t.Helper()
	src, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "Makefile"), []byte(probeMakefile), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	t.Setenv("KBUILD_PROBE_SECRET", "hunter2")
	var buf bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if sandboxed {
		sb := &Sandbox{Bwrap: requireBwrap(t), Src: src, Out: out, Env: []string{"PATH=/usr/bin:/bin"}}
		err = sb.Run(ctx, &buf, "make", "-f", sandboxSrc+"/Makefile",
			"SRC="+sandboxSrc, "OUT="+sandboxOut, fmt.Sprint("PORT=", port))
	} else {
		cmd := exec.CommandContext(ctx, "make", "-f", filepath.Join(src, "Makefile"),
			"SRC="+src, "OUT="+out, fmt.Sprint("PORT=", port))
		cmd.Stdout, cmd.Stderr = &buf, &buf
		err = cmd.Run()
	}
	if err != nil {
		t.Fatalf("make: %v\n%s", err, buf.String())
	}
	if _, err := os.Stat(filepath.Join(out, "made")); err != nil {
		t.Errorf("output directory not written: %v", err)
	}
	return buf.String()
}

func TestSandboxDeniesSourceWritesAndNetwork(t *testing.T) {
	// The same probes outside the sandbox succeed, so the probes can tell.
	plain := probe(t, false)
	for _, w := range []string{"SRC-WRITABLE", "NET-REACHED", "ENV-LEAKED", "HOST-VISIBLE", "OUT-WRITTEN"} {
		if !strings.Contains(plain, w) {
			t.Fatalf("control run outside the sandbox: want %s in\n%s", w, plain)
		}
	}
	boxed := probe(t, true)
	for _, w := range []string{"SRC-DENIED", "NET-DENIED", "ENV-CLEAN", "HOST-HIDDEN", "OUT-WRITTEN"} {
		if !strings.Contains(boxed, w) {
			t.Errorf("sandboxed: want %s in\n%s", w, boxed)
		}
	}
}

func TestSandboxCancelKillsEverything(t *testing.T) {
	sb := &Sandbox{Bwrap: requireBwrap(t), Src: t.TempDir(), Out: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	// A child that ignores SIGTERM and a grandchild in the background: both
	// must go when the context ends.
	err := sb.Run(ctx, &bytes.Buffer{}, "sh", "-c", "trap '' TERM; sleep 60 & sleep 60; wait")
	var ie *InfraError
	if !errors.As(err, &ie) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want an InfraError wrapping the deadline, got %v", err)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Run returned after %v", d)
	}
}

func TestSandboxCheckReportsMissingBwrap(t *testing.T) {
	sb := &Sandbox{Bwrap: filepath.Join(t.TempDir(), "no-bwrap"), Src: t.TempDir(), Out: t.TempDir()}
	err := sb.Check(context.Background())
	var ie *InfraError
	if !errors.As(err, &ie) {
		t.Fatalf("want *InfraError, got %v", err)
	}
}
