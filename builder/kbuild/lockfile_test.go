package kbuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The heavy lock made by another user (root, before serve ran as its own
// user) still locks a build: flock needs only a read-only descriptor. An
// immutable file stands in for it, since root may write any other file.
func TestFlockReadOnlyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heavy.lock")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s (needs root on a file system with attributes)", err, out)
	}
	defer exec.Command("chattr", "-i", path).Run()
	if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
		f.Close()
		t.Fatal("an immutable file opened for writing: the test proves nothing here")
	}
	release, err := flock(context.Background(), path)
	if err != nil {
		t.Fatalf("a lock file that cannot be written: %v", err)
	}
	release()
}
