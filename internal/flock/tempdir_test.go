package flock

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A process that made a temporary directory and was killed leaves it to
// Stale; one that still runs keeps it, however old.
func TestStaleNamesOnlyWhatACrashLeft(t *testing.T) {
	if dir := os.Getenv("FLOCK_TEMPDIR_CHILD"); dir != "" {
		tmp, _, err := TempDir(dir, ".tmp-child-")
		if err != nil {
			os.Exit(3)
		}
		os.WriteFile(filepath.Join(tmp, "half"), []byte("x"), 0o644)
		os.Stdout.WriteString(tmp + "\n")
		select {} // until killed
	}
	parent := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestStaleNamesOnlyWhatACrashLeft$")
	child.Env = append(os.Environ(), "FLOCK_TEMPDIR_CHILD="+parent)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	buf := make([]byte, 4096)
	n, _ := out.Read(buf)
	crashed := strings.TrimSpace(string(buf[:n]))
	if !strings.HasPrefix(crashed, parent) {
		t.Fatalf("the child made no directory: %q", crashed)
	}
	live, release, err := TempDir(parent, ".tmp-live-")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	later := time.Now().Add(time.Hour)
	var cleaned []string
	clean := func(dir string) error {
		cleaned = append(cleaned, dir)
		return os.RemoveAll(dir)
	}
	if err := Stale(parent, ".tmp-", later, clean); err != nil || len(cleaned) != 0 {
		t.Fatalf("while both makers run: cleaned %v, err %v", cleaned, err)
	}
	child.Process.Kill()
	child.Wait()
	if err := Stale(parent, ".tmp-", time.Now(), clean); err != nil || len(cleaned) != 0 {
		t.Fatalf("a directory under a minute old: cleaned %v, err %v", cleaned, err)
	}
	if err := Stale(parent, ".tmp-", later, clean); err != nil || len(cleaned) != 1 || cleaned[0] != crashed {
		t.Fatalf("after the crash: cleaned %v (want %s), err %v", cleaned, crashed, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("the live maker's directory: %v", err)
	}
	// A rename keeps the lock: a directory renamed under the prefix by a
	// live maker is still its own.
	moved := filepath.Join(parent, ".tmp-moved")
	if err := os.Rename(live, moved); err != nil {
		t.Fatal(err)
	}
	if err := Stale(parent, ".tmp-", later, clean); err != nil || len(cleaned) != 1 {
		t.Fatalf("a renamed live directory was cleaned: %v %v", cleaned, err)
	}
}
