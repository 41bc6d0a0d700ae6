package flock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A lock file serve may not write (made by root before serve ran as its
// own user) still locks: flock needs only a read-only descriptor. An
// immutable file stands in for it, since root may write any file but not
// an immutable one.
func TestReadOnlyFileLocks(t *testing.T) {
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
	release, err := Exclusive(context.Background(), path)
	if err != nil {
		t.Fatalf("a lock file that cannot be written: %v", err)
	}
	release()
}

func TestWaitsAndGivesUpWithContext(t *testing.T) {
	p := filepath.Join(t.TempDir(), "heavy.lock")
	unlock, err := Exclusive(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("build timed out")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 200*time.Millisecond, cause)
	defer cancel()
	if _, err := Exclusive(ctx, p); !errors.Is(err, cause) {
		t.Fatalf("took a held lock, or lost why it gave up: %v", err)
	}
	unlock()
	// The abandoned waiter must not keep the lock once it gets it.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	unlock2, err := Exclusive(ctx2, p)
	if err != nil {
		t.Fatalf("lock not free after release: %v", err)
	}
	unlock2()
}

func TestNoPathNoLock(t *testing.T) {
	release, err := Exclusive(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	release()
}

// A directory that cannot hold the file is an error, not a wait.
func TestUnopenableFails(t *testing.T) {
	if _, err := Exclusive(context.Background(), filepath.Join(t.TempDir(), "missing", "x.lock")); err == nil {
		t.Fatal("locked a file in a directory that does not exist")
	}
}

// A shared lock is refused at once while a writer holds the file, shared
// with other readers, and keeps a writer out until released.
func TestTrySharedYieldsToAWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.lock")
	ctx := context.Background()
	writer, err := Exclusive(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := TryShared(path); ok || err != nil {
		t.Fatalf("shared beside a writer: ok=%v err=%v", ok, err)
	}
	writer()
	r1, ok1, err1 := TryShared(path)
	r2, ok2, err2 := TryShared(path)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		t.Fatalf("two readers: %v %v %v %v", ok1, ok2, err1, err2)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := Exclusive(short, path); err == nil {
		t.Fatal("a writer got the lock beside readers")
	}
	r1()
	r2()
	w, err := Exclusive(ctx, path)
	if err != nil {
		t.Fatalf("writer after the readers left: %v", err)
	}
	w()
	if _, _, err := TryShared(filepath.Join(t.TempDir(), "no", "such", "dir")); err == nil {
		t.Error("a lock in a missing directory: no error")
	}
}
