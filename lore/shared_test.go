package lore

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// sharedDir returns ../shared next to the module root, or skips.
func sharedDir(t testing.TB) string {
	return testenv.Shared(t, "the real-thread corpus is not on this machine")
}

// threadFiles returns every .eml under shared/corpus/threads, sorted.
func threadFiles(t testing.TB) []string {
	t.Helper()
	root := filepath.Join(sharedDir(t), "corpus", "threads")
	files, err := filepath.Glob(filepath.Join(root, "*", "*.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skipf("../shared absent: no .eml files under %s", root)
	}
	return files
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
