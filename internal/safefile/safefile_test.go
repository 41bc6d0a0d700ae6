package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A copy reads only regular files reached without a symlink, within its
// bounds (none when negative); a tree keeps its local symlinks only.
func TestCopies(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "a"), []byte("aaaa"), 0o640)
	os.WriteFile(filepath.Join(src, "sub", "b"), []byte("bbbb"), 0o644)
	os.Symlink("sub/b", filepath.Join(src, "local"))
	os.Symlink("/etc/passwd", filepath.Join(src, "outside"))

	if n, err := CopyFile(filepath.Join(src, "a"), filepath.Join(dir, "a1"), -1); n != 4 || err != nil {
		t.Errorf("unbounded: %d %v", n, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "a1")); fi == nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("the copy's mode: %v", fi)
	}
	if _, err := CopyFile(filepath.Join(src, "a"), filepath.Join(dir, "a2"), 3); err == nil || !strings.Contains(err.Error(), "more than the 3 allowed") {
		t.Errorf("over its bound: %v", err)
	}
	if _, err := CopyFile(filepath.Join(src, "a"), filepath.Join(dir, "a1"), -1); !errors.Is(err, os.ErrExist) {
		t.Errorf("onto an existing file: %v", err)
	}
	if _, _, err := OpenRegular(filepath.Join(src, "local"), -1); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a symlink: %v", err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenRegular(filepath.Join(src, "fifo"), -1); !errors.Is(err, ErrNotRegular) {
		t.Errorf("a FIFO: %v", err)
	}
	os.Remove(filepath.Join(src, "fifo"))
	os.Symlink("src", filepath.Join(dir, "link"))
	if _, _, err := OpenRegular(filepath.Join(dir, "link", "a"), -1); err == nil {
		t.Error("a symlink in the path is followed")
	}

	dst := filepath.Join(dir, "dst")
	if err := CopyTree(src, dst, -1, -1); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "local")); err != nil || string(b) != "bbbb" {
		t.Errorf("the local link: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "outside")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a link out of the tree is copied: %v", err)
	}
	if err := CopyTree(src, filepath.Join(dir, "small"), -1, 6); err == nil {
		t.Error("8 bytes copied under a total of 6")
	}
}
