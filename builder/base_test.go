package builder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/lore/intake"
)

// baseFixture is an upstream repository with two lines of history and a
// store that fetched it as two trees, the way the bot fetches mainline
// and rdma (over file://: there is no network here).
//
//	master:   c1 - c2 - c3        (c3 changes f.c again)
//	for-next:        \- c4        (c4 changes g.c; f.c as in c2)
//	for-rc:   c1
type baseFixture struct {
	up             string
	st             *Store
	trees          []TreeConfig
	c1, c2, c3, c4 string
}

func newBaseFixture(t *testing.T) *baseFixture {
	t.Helper()
	f := &baseFixture{up: t.TempDir()}
	up := f.up
	gitT(t, up, "init", "-q", "-b", "master")
	writeFile(t, filepath.Join(up, "f.c"), "f1\nf2\nf3\n", 0o644)
	writeFile(t, filepath.Join(up, "g.c"), "g1\n", 0o644)
	commit := func(msg string, date string) string {
		gitT(t, up, "add", "-A")
		if out, err := gitEnv(up, []string{"GIT_COMMITTER_DATE=" + date}, "commit", "-q", "-m", msg); err != nil {
			t.Fatal(out)
		}
		return gitT(t, up, "rev-parse", "HEAD")
	}
	f.c1 = commit("c1", "2024-01-01T00:00:00Z")
	gitT(t, up, "branch", "for-rc")
	writeFile(t, filepath.Join(up, "f.c"), "f1\nf2 changed\nf3\n", 0o644)
	f.c2 = commit("c2", "2024-01-02T00:00:00Z")
	writeFile(t, filepath.Join(up, "f.c"), "f1\nf2 changed again\nf3\n", 0o644)
	f.c3 = commit("c3", "2024-01-03T00:00:00Z")
	gitT(t, up, "checkout", "-q", "-b", "for-next", f.c2)
	writeFile(t, filepath.Join(up, "g.c"), "g1 changed\n", 0o644)
	f.c4 = commit("c4", "2024-01-04T00:00:00Z")

	st, err := OpenStore(filepath.Join(t.TempDir(), "kernel.git"))
	if err != nil {
		t.Fatal(err)
	}
	f.st = st
	f.trees = []TreeConfig{
		{Name: "mainline", URL: "file://" + up, Branches: []string{"master"}},
		{Name: "rdma", URL: "file://" + up, Branches: []string{"for-next", "for-rc"},
			Tags: map[string]string{"rdma-next": "for-next", "rdma-rc": "for-rc"}},
	}
	for _, tc := range f.trees {
		if err := st.Fetch(context.Background(), tc); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// patchOn makes a patch mail changing f.c as it is in commit rev.
func (f *baseFixture) patchOn(t *testing.T, rev, subjectTag string, extra ...string) *flow.Message {
	t.Helper()
	gitT(t, f.up, "checkout", "-q", "--detach", rev)
	b, _ := os.ReadFile(filepath.Join(f.up, "f.c"))
	writeFile(t, filepath.Join(f.up, "f.c"), strings.Replace(string(b), "f3\n", "f3 patched\n", 1), 0o644)
	gitT(t, f.up, "commit", "-q", "-am", "patch f.c")
	args := append([]string{"format-patch", "-q", "--stdout", "-1"}, extra...)
	if subjectTag != "" {
		args = append(args, "--subject-prefix=PATCH "+subjectTag)
	}
	raw := gitT(t, f.up, args...)
	m, err := lore.ParseMessage([]byte(raw + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// readSeries is a series of the mails as lore's intake reads it: its
// base-commit hint and subject tags are what SelectBase goes by.
func readSeries(t *testing.T, mails ...*flow.Message) flow.Series {
	t.Helper()
	s := flow.Series{Patches: mails}
	if _, err := intake.Reread(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSelectBase(t *testing.T) {
	f := newBaseFixture(t)
	ctx := context.Background()
	bogus := strings.NewReplacer("index ", "index 1")

	cases := []struct {
		name       string
		mail       func() *flow.Message
		want       string
		reason     BaseReason
		tree, head string
	}{
		{"base-commit line wins", func() *flow.Message { return f.patchOn(t, f.c2, "rdma-rc", "--base="+f.c1) }, f.c1, BaseFromTrailer, "", ""},
		// f.c's pre-image is c2's blob: on master only c2 has it, on
		// for-next c4 (newer) still does.
		{"blobs pick the newest matching commit", func() *flow.Message { return f.patchOn(t, f.c2, "") }, f.c4, BaseFromBlobs, "rdma", "for-next"},
		{"blobs on master", func() *flow.Message { return f.patchOn(t, f.c3, "") }, f.c3, BaseFromBlobs, "mainline", "master"},
		{"tree tag when no blob matches", func() *flow.Message {
			m := f.patchOn(t, f.c2, "rdma-rc")
			m.Body = bogus.Replace(m.Body) // index lines no commit has
			return m
		}, f.c1, BaseFromTag, "rdma", "for-rc"},
		{"a base-commit on no configured branch (another series' commit) falls through", func() *flow.Message {
			m := f.patchOn(t, f.c2, "")
			orphan := gitT(t, f.st.Dir, "commit-tree", f.c3+"^{tree}", "-p", f.c3, "-m", "an applied series")
			m.Body = bogus.Replace(m.Body) + "\nbase-commit: " + orphan + "\n"
			return m
		}, f.c3, BaseFromDefault, "mainline", "master"},
		// b4 reads 7 to 40 hex digits in any case: lore's hint, not a
		// second rule, decides.
		{"an abbreviated base-commit line", func() *flow.Message {
			m := f.patchOn(t, f.c2, "")
			m.Body = bogus.Replace(m.Body) + "\nbase-commit: " + f.c1[:7] + "\n"
			return m
		}, f.c1, BaseFromTrailer, "", ""},
		{"an upper-case abbreviated base-commit line", func() *flow.Message {
			m := f.patchOn(t, f.c2, "")
			m.Body = bogus.Replace(m.Body) + "\nbase-commit: " + strings.ToUpper(f.c1[:12]) + " (rdma/for-rc)\n"
			return m
		}, f.c1, BaseFromTrailer, "", ""},
		{"an abbreviation no commit has falls through", func() *flow.Message {
			m := f.patchOn(t, f.c2, "")
			m.Body = bogus.Replace(m.Body) + "\nbase-commit: 0badc0ffee\n"
			return m
		}, f.c3, BaseFromDefault, "mainline", "master"},
		{"unknown base-commit falls through to the default", func() *flow.Message {
			m := f.patchOn(t, f.c2, "")
			m.Body = bogus.Replace(m.Body) + "\nbase-commit: " + strings.Repeat("ab", 20) + "\n"
			return m
		}, f.c3, BaseFromDefault, "mainline", "master"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := f.st.SelectBase(ctx, readSeries(t, tc.mail()), f.trees, 0)
			if err != nil {
				t.Fatal(err)
			}
			if b.Commit.String() != tc.want || b.Reason != tc.reason || b.Tree != tc.tree || b.Branch != tc.head {
				t.Errorf("base = %+v, want %s (%s) on %s/%s", b, tc.want, tc.reason, tc.tree, tc.head)
			}
			if b.Detail == "" {
				t.Error("no detail for the report")
			}
			t.Logf("%s: %s", b.Reason, b.Detail)
		})
	}
}

// TestSelectBaseSearchIsBounded: with a depth of 1 the blob search sees
// only the branch heads, so c2 (below master's head) is not found.
func TestSelectBaseSearchIsBounded(t *testing.T) {
	f := newBaseFixture(t)
	m := f.patchOn(t, f.c2, "")
	trees := f.trees[:1] // mainline only: c2 is one below its head
	b, err := f.st.SelectBase(context.Background(), readSeries(t, m), trees, 1)
	if err != nil {
		t.Fatal(err)
	}
	if b.Reason != BaseFromDefault {
		t.Errorf("depth 1 found %+v", b)
	}
	b, err = f.st.SelectBase(context.Background(), readSeries(t, m), trees, 2)
	if err != nil || b.Reason != BaseFromBlobs || b.Commit.String() != f.c2 {
		t.Errorf("depth 2: %+v, %v; want c2 by blobs", b, err)
	}
}

// TestFetchUpdatesTreeRefs fetches again after upstream moved.
func TestFetchUpdatesTreeRefs(t *testing.T) {
	f := newBaseFixture(t)
	gitT(t, f.up, "checkout", "-q", "master")
	writeFile(t, filepath.Join(f.up, "h.c"), "new\n", 0o644)
	gitT(t, f.up, "add", "-A")
	gitT(t, f.up, "commit", "-q", "-m", "c5")
	c5 := gitT(t, f.up, "rev-parse", "HEAD")
	if err := f.st.Fetch(context.Background(), f.trees[0]); err != nil {
		t.Fatal(err)
	}
	c, err := f.st.Resolve("mainline/master")
	if err != nil || c.Hash.String() != c5 {
		t.Errorf("mainline/master = %v, %v; want %s", c, err, c5)
	}
	bad := TreeConfig{Name: "gone", URL: "file://" + filepath.Join(t.TempDir(), "nothing"), Branches: []string{"master"}}
	if err := f.st.Fetch(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Errorf("fetch of a missing repository: %v", err)
	}
}

// A configured tree that was never fetched (offline, first clone still
// running) gives way to the next one the store holds, saying so; when no
// branch at all is in the store the error is the operator's (infra).
func TestSelectBaseDefaultSkipsUnfetchedTrees(t *testing.T) {
	f := newBaseFixture(t)
	m := f.patchOn(t, f.c2, "")
	m.Body = strings.NewReplacer("index ", "index 1").Replace(m.Body)
	trees := append([]TreeConfig{{Name: "nfsd", URL: "https://example.invalid/nfsd.git", Branches: []string{"nfsd-next"}}}, f.trees...)
	b, err := f.st.SelectBase(context.Background(), readSeries(t, m), trees, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Reason != BaseFromDefault || b.Tree != "mainline" || b.Commit.String() != f.c3 || !strings.Contains(b.Detail, "nfsd/nfsd-next not in the store") {
		t.Errorf("base = %+v, want mainline/master's head, naming the unfetched tree", b)
	}
	_, err = f.st.SelectBase(context.Background(), readSeries(t, m), trees[:1], 0)
	var nb *NoBaseError
	if !errors.As(err, &nb) || !nb.Infra() || !strings.Contains(err.Error(), "nfsd/nfsd-next") {
		t.Errorf("no branch in the store: %v, want a NoBaseError naming it", err)
	}
}
