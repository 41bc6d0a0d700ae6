// Package testenv finds what tests read from outside the module: the
// module root, and the workspace's ../shared folder (real mail archives,
// the reference lab), which tests read but never copy.
package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// ModuleRoot is the directory holding go.mod above the test's working
// directory.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// Shared is ../shared/elem... beside the module root. When it is absent
// the test is skipped, saying what it would have read (why).
func Shared(t testing.TB, why string, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{filepath.Dir(ModuleRoot(t)), "shared"}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("../shared absent (%s): %s", p, why)
	}
	return p
}
