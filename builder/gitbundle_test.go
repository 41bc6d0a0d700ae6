package builder

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// A series' bundle holds the commits from its base to its tip under the
// branch it names: a clone of the base fetches it and gets the tip. The
// store's refs are left as they were; ids that are not commits of the
// store are errors.
func TestGitBundle(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	git := func(wd string, args ...string) string {
		t.Helper()
		return testenv.Git(t, wd, args...)
	}
	git(dir, "init", "-q", "-b", "main", work)
	os.WriteFile(filepath.Join(work, "f"), []byte("base\n"), 0o644)
	git(work, "add", "f")
	git(work, "commit", "-q", "-m", "base")
	base := git(work, "rev-parse", "HEAD")
	for _, c := range []string{"patch 1", "patch 2"} {
		os.WriteFile(filepath.Join(work, "f"), []byte(c+"\n"), 0o644)
		git(work, "commit", "-q", "-am", c)
	}
	tip := git(work, "rev-parse", "HEAD")
	storeDir := filepath.Join(dir, "store.git")
	git(dir, "clone", "-q", "--bare", work, storeDir)
	refsBefore := git(storeDir, "for-each-ref")
	st, err := OpenStore(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.GitBundle(context.Background(), base, tip, "rdmabot/test-7")
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "series.bundle")
	os.WriteFile(bundle, b, 0o644)
	reader := filepath.Join(dir, "reader")
	git(dir, "clone", "-q", work, reader)
	git(reader, "checkout", "-q", base)
	git(reader, "fetch", "-q", bundle, "rdmabot/test-7")
	if got := git(reader, "rev-parse", "FETCH_HEAD"); got != tip {
		t.Errorf("fetched %s from the bundle, want the tip %s", got, tip)
	}
	if n := git(dir, "bundle", "list-heads", bundle); !strings.HasSuffix(n, " refs/heads/rdmabot/test-7") || strings.Count(n, "\n") != 0 {
		t.Errorf("bundle heads: %q, want the one branch", n)
	}
	if after := git(storeDir, "for-each-ref"); after != refsBefore {
		t.Errorf("the store's refs changed:\n%s\nwas:\n%s", after, refsBefore)
	}
	if _, err := st.GitBundle(context.Background(), base, "not-a-commit", "x"); err == nil {
		t.Error("a tip that is no commit id made a bundle")
	}
	if _, err := st.GitBundle(context.Background(), base, strings.Repeat("1", 40), "x"); err == nil {
		t.Error("a tip the store does not have made a bundle")
	}
}
