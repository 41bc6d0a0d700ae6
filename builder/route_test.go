package builder

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
)

// routeFixture is an nfsd tree with its three branches and a mainline
// whose head is the newest commit and has the same svcrdma file: the
// pre-image blobs alone would pick mainline.
//
//	nfsd-fixes:   r1
//	nfsd-next:    r1 - n1            (n1 changes fs/nfsd/nfs4proc.c)
//	nfsd-testing: r1 - n1 - t1       (t1 changes fs/nfsd/nfs4proc.c)
//	master:       r1 - m1            (m1 changes drivers/x.c, newest)
type routeFixture struct {
	up, r1, n1, t1, m1 string
	st                 *Store
	trees              []TreeConfig
}

const svcRDMA = "net/sunrpc/xprtrdma/svc_rdma_rw.c"

func newRouteFixture(t *testing.T) *routeFixture {
	t.Helper()
	f := &routeFixture{up: t.TempDir()}
	gitT(t, f.up, "init", "-q", "-b", "master")
	for p, c := range map[string]string{svcRDMA: "rw1\nrw2\nrw3\n", "fs/nfsd/nfs4proc.c": "p1\n", "drivers/x.c": "x1\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(f.up, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(f.up, p), c, 0o644)
	}
	commit := func(file, content, date string) string {
		writeFile(t, filepath.Join(f.up, file), content, 0o644)
		gitT(t, f.up, "add", "-A")
		if out, err := gitEnv(f.up, []string{"GIT_COMMITTER_DATE=" + date}, "commit", "-q", "-m", file+" "+date); err != nil {
			t.Fatal(out)
		}
		return gitT(t, f.up, "rev-parse", "HEAD")
	}
	f.r1 = commit("drivers/x.c", "x1\n", "2026-01-01T00:00:00Z")
	gitT(t, f.up, "branch", "nfsd-fixes")
	f.m1 = commit("drivers/x.c", "x2\n", "2026-03-01T00:00:00Z")
	gitT(t, f.up, "checkout", "-q", "-b", "nfsd-next", f.r1)
	f.n1 = commit("fs/nfsd/nfs4proc.c", "p2\n", "2026-01-02T00:00:00Z")
	gitT(t, f.up, "checkout", "-q", "-b", "nfsd-testing")
	f.t1 = commit("fs/nfsd/nfs4proc.c", "p3\n", "2026-01-03T00:00:00Z")

	st, err := OpenStore(filepath.Join(t.TempDir(), "kernel.git"))
	if err != nil {
		t.Fatal(err)
	}
	f.st = st
	nfsd := DefaultConfig().Trees[2]
	if nfsd.Name != "nfsd" {
		t.Fatalf("the third default tree is %s", nfsd.Name)
	}
	nfsd.URL = "file://" + f.up
	f.trees = []TreeConfig{{Name: "mainline", URL: "file://" + f.up, Branches: []string{"master"}}, nfsd}
	for _, tc := range f.trees {
		if err := st.Fetch(context.Background(), tc); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// patch is a format-patch mail changing file on rev; body is appended
// to the commit message (a Fixes: trailer), prefix is the subject's.
func (f *routeFixture) patch(t *testing.T, rev, file, prefix, body string, extra ...string) *flow.Message {
	t.Helper()
	gitT(t, f.up, "checkout", "-q", "--detach", rev)
	b, _ := os.ReadFile(filepath.Join(f.up, file))
	writeFile(t, filepath.Join(f.up, file), string(b)+"patched\n", 0o644)
	gitT(t, f.up, "commit", "-q", "-am", "svcrdma: a change\n\n"+body)
	args := append([]string{"format-patch", "-q", "--stdout", "-1", "--subject-prefix=" + prefix}, extra...)
	m, err := lore.ParseMessage([]byte(gitT(t, f.up, args...) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSelectBaseRoute: a series for nfsd's files (svcrdma) is based on
// the branch the nfsd maintainer applies it to, and the reply's phrase
// says which and why; anything else is chosen as before.
func TestSelectBaseRoute(t *testing.T) {
	f := newRouteFixture(t)
	fixes := "Fixes: " + f.r1[:12] + " (\"x\")\n"
	cases := []struct {
		name         string
		mail         func() *flow.Message
		want, branch string
		reason       BaseReason
		phrase       string
	}{
		{"svcrdma goes on nfsd-testing, not the newer mainline", func() *flow.Message { return f.patch(t, f.m1, svcRDMA, "PATCH", "") },
			f.t1, "nfsd-testing", BaseFromRoute, "the nfsd tree's rule: a series for its files goes on nfsd-testing"},
		{"a Fixes: trailer goes on nfsd-fixes", func() *flow.Message { return f.patch(t, f.r1, svcRDMA, "PATCH", fixes) },
			f.r1, "nfsd-fixes", BaseFromRoute, "the nfsd tree's rule: a fix (Fixes: trailer) goes on nfsd-fixes"},
		{"[PATCH v2 fixes] goes on nfsd-fixes", func() *flow.Message { return f.patch(t, f.r1, svcRDMA, "PATCH v2 fixes", "") },
			f.r1, "nfsd-fixes", BaseFromRoute, "the nfsd tree's rule: a fix ([fixes]) goes on nfsd-fixes"},
		{"[PATCH for-rc] is a fix too", func() *flow.Message { return f.patch(t, f.r1, svcRDMA, "PATCH for-rc", "") },
			f.r1, "nfsd-fixes", BaseFromRoute, "the nfsd tree's rule: a fix ([for-rc]) goes on nfsd-fixes"},
		{"a tag of the tree wins over Fixes:", func() *flow.Message { return f.patch(t, f.n1, "fs/nfsd/nfs4proc.c", "PATCH nfsd-next", fixes) },
			f.n1, "nfsd-next", BaseFromRoute, "the nfsd tree's rule: a series tagged [nfsd-next] goes on nfsd-next"},
		{"base-commit: comes first", func() *flow.Message { return f.patch(t, f.m1, svcRDMA, "PATCH", "", "--base="+f.m1) },
			f.m1, "", BaseFromTrailer, flow.BaseByTrailer},
		{"a series also touching another tree's file is not routed", func() *flow.Message {
			m := f.patch(t, f.m1, svcRDMA, "PATCH", "")
			other := f.patch(t, f.m1, "drivers/x.c", "PATCH", "")
			m.Body += other.Body[strings.Index(other.Body, "diff --git"):]
			return m
		}, f.m1, "master", BaseFromBlobs, flow.BaseByBlobs},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := f.st.SelectBase(context.Background(), readSeries(t, tc.mail()), f.trees, 0)
			if err != nil {
				t.Fatal(err)
			}
			if b.Commit.String() != tc.want || b.Branch != tc.branch || b.Reason != tc.reason {
				t.Errorf("base = %+v, want %s on %q by %s", b, tc.want, tc.branch, tc.reason)
			}
			if got := baseReasonPhrase(b); got != tc.phrase {
				t.Errorf("phrase %q, want %q", got, tc.phrase)
			}
		})
	}
}

// TestSelectBaseRouteOffline: with the nfsd tree not in the store (no
// network: only the imported tree), the base is chosen as before and
// the phrase names the branch the series would have gone on.
func TestSelectBaseRouteOffline(t *testing.T) {
	f := newRouteFixture(t)
	m := f.patch(t, f.m1, svcRDMA, "PATCH", "")
	trees := []TreeConfig{f.trees[1], {Name: "local", URL: "file://" + f.up, Branches: []string{"master"}}}
	trees[0].Name = "nfsd-offline" // a tree the store never fetched
	if err := f.st.Fetch(context.Background(), trees[1]); err != nil {
		t.Fatal(err)
	}
	b, err := f.st.SelectBase(context.Background(), readSeries(t, m), trees, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "pre-image blob ids; nfsd-offline/nfsd-testing, where the nfsd-offline tree takes a series for its files, is not in the store"
	if b.Tree != "local" || b.Commit.String() != f.m1 || baseReasonPhrase(b) != want {
		t.Errorf("base = %+v (%q), want local's head, %q", b, baseReasonPhrase(b), want)
	}
	// A default base keeps flow.BaseByDefault as the phrase's start:
	// whom an APPLY_FAILED reaches depends on it.
	m.Body = strings.NewReplacer("index ", "index 1").Replace(m.Body)
	b, err = f.st.SelectBase(context.Background(), readSeries(t, m), trees, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p := baseReasonPhrase(b); b.Reason != BaseFromDefault || !strings.HasPrefix(p, flow.BaseByDefault+"; nfsd-offline/nfsd-testing") {
		t.Errorf("base = %+v, phrase %q", b, p)
	}
}

func TestTreeConfigRouteValidate(t *testing.T) {
	for _, tc := range []struct {
		set  func(*TreeConfig)
		want string
	}{
		{func(t *TreeConfig) { t.FixesBranch = "nfsd-rc" }, `fixes_branch "nfsd-rc" is not one of its branches`},
		{func(t *TreeConfig) { t.Paths = []string{"fs/[nfsd"} }, "paths: bad path glob fs/[nfsd"},
	} {
		c := DefaultConfig()
		tc.set(&c.Trees[2])
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
	}
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

// A claimed series that does not apply to the rule's branch goes on the
// first of the tree's other branches it applies to, saying so; one that
// applies to none stays on the rule's branch and names each one tried,
// which its APPLY_FAILED reply then shows.
func TestSelectBaseRouteTriesTheTreesBranches(t *testing.T) {
	f := newRouteFixture(t)
	onNext := f.patch(t, f.n1, "fs/nfsd/nfs4proc.c", "PATCH", "")
	b, err := f.st.SelectBase(context.Background(), readSeries(t, onNext), f.trees, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "the nfsd tree's rule: a series for its files goes on nfsd-testing; it does not apply to nfsd/nfsd-testing, so nfsd/nfsd-next"
	if b.Commit.String() != f.n1 || b.Branch != "nfsd-next" || baseReasonPhrase(b) != want {
		t.Errorf("base %+v, phrase %q; want nfsd-next's head, %q", b, baseReasonPhrase(b), want)
	}
	nowhere := f.patch(t, f.n1, "fs/nfsd/nfs4proc.c", "PATCH", "")
	nowhere.Body = strings.ReplaceAll(nowhere.Body, " p2\n", " p9\n")
	b, err = f.st.SelectBase(context.Background(), readSeries(t, nowhere), f.trees, 0)
	if err != nil {
		t.Fatal(err)
	}
	want = "the nfsd tree's rule: a series for its files goes on nfsd-testing; it applies to none of nfsd/nfsd-testing, nfsd/nfsd-next, nfsd/nfsd-fixes"
	if b.Commit.String() != f.t1 || b.Branch != "nfsd-testing" || baseReasonPhrase(b) != want {
		t.Errorf("base %+v, phrase %q; want nfsd-testing's head, %q", b, baseReasonPhrase(b), want)
	}
	refs := gitT(t, f.st.Dir, "for-each-ref", "--format=%(refname)")
	if strings.Contains(refs, "series") {
		t.Errorf("a trial apply left a ref: %s", refs)
	}
}
