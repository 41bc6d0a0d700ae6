package lore

import (
	"flag"
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
	testenv.Golden(t, filepath.Join("testdata", name), got, *update)
}
