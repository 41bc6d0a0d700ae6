package builder

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// refreshFixture is a store and a commit an operator pushed into it
// behind the open Store's back, repacked so it lives only in a new pack.
func refreshFixture(t *testing.T) (*Store, string) {
	t.Helper()
	tmp := t.TempDir()
	st, err := OpenStore(filepath.Join(tmp, "store.git"))
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(tmp, "work")
	gitT(t, tmp, "init", "-q", "-b", "main", work)
	commit := func(version string) string {
		writeFile(t, filepath.Join(work, "Makefile"), "VERSION = "+version+"\n", 0o644)
		gitT(t, work, "add", "-A")
		gitT(t, work, "commit", "-q", "-m", version)
		gitT(t, work, "push", "-q", st.Dir, "HEAD:refs/trees/local/main")
		gitT(t, st.Dir, "repack", "-q", "-a", "-d")
		return gitT(t, work, "rev-parse", "HEAD")
	}
	// The store has read a pack before the operator's push.
	if _, err := st.Resolve(commit("6")); err != nil {
		t.Fatal(err)
	}
	return st, commit("7")
}

// Refresh lets the store see what was pushed into it from outside.
func TestRefreshSeesOutsidePush(t *testing.T) {
	st, commit := refreshFixture(t)
	if err := st.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	c, err := st.Resolve("local/main")
	if err != nil {
		t.Fatal(err)
	}
	if c.Hash.String() != commit {
		t.Fatalf("resolved %s, pushed %s", c.Hash, commit)
	}
}

// A cancelled context refreshes nothing and says so with its error.
func TestRefreshCancelled(t *testing.T) {
	st, _ := refreshFixture(t)
	before := st.Repository()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := st.Refresh(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if st.Repository() != before {
		t.Fatal("a cancelled refresh reopened the repository")
	}
}
