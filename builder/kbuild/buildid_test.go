package kbuild

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Finding 4: a FIFO named vmlinux does not block the host.
func TestReadBuildIDRefusesFIFOAndSymlink(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink("/proc/self/exe", link)
	for _, p := range []string{fifo, link} {
		done := make(chan error, 1)
		go func() { _, err := ReadBuildID(p); done <- err }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: read a build id", p)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: ReadBuildID blocked", p)
		}
	}
}

// The FIFO from inside a build: Build returns, as a failed build, long
// before its timeout, and frees the slot.
func TestHostileVmlinuxFIFO(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{Timeout: time.Minute})
	tree := r.edit(map[string]string{"Makefile": hostileMakefile(t, map[string]string{
		bzImageLine: "\trm $(O)/vmlinux && mkfifo $(O)/vmlinux",
	})})
	start := time.Now()
	_, err := b.Build(context.Background(), Request{Objects: r.repo.Storer, Tree: tree, Lab: lab})
	var be *BuildError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "build id") {
		t.Fatalf("want a *BuildError about the build id, got %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v", d)
	}
}
