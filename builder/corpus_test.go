package builder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
)

// corpusPatches reads every patch mail of a public-inbox archive (one
// commit per message, the message in blob "m") whose diff touches one
// of the given directories, oldest first.
func corpusPatches(t testing.TB, archive string, dirs ...string) []*flow.Message {
	t.Helper()
	r, err := git.PlainOpen(archive)
	if err != nil {
		t.Fatalf("%s: %v", archive, err)
	}
	head, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	it, err := r.Log(&git.LogOptions{From: head.Hash()})
	if err != nil {
		t.Fatal(err)
	}
	var out []*flow.Message
	err = it.ForEach(func(c *object.Commit) error {
		f, err := c.File("m")
		if err != nil {
			return nil // a few large blobs are missing from the snapshot
		}
		raw, err := f.Contents()
		if err != nil {
			return nil
		}
		if !strings.Contains(raw, "diff --git a/") {
			return nil
		}
		m, err := lore.ParseMessage([]byte(raw))
		if err != nil {
			return nil
		}
		s := lore.ParseSubject(m.Subject)
		if !s.Patch || s.IsReply || s.Index == 0 && s.Total > 0 {
			return nil
		}
		for _, d := range dirs {
			if strings.Contains(m.Body, "diff --git a/"+d) {
				out = append(out, m)
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The log is newest first.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

var diffPath = regexp.MustCompile(`(?m)^diff --git a/(\S+) b/(\S+)$`)

// amCheckout clones the store into a work repository with a sparse
// checkout of just the files the patches name, detached at base, so git
// am can run without writing the whole kernel tree; the builder applies
// into the same repository, never into the store RDMABOT_TEST_TREE names.
func amCheckout(t testing.TB, st *Store, base string, msgs []*flow.Message) (string, *Store) {
	t.Helper()
	wt := filepath.Join(t.TempDir(), "wt")
	gitT(t, filepath.Dir(wt), "clone", "-q", "--no-checkout", "--no-tags", st.Dir, wt)
	paths := map[string]bool{}
	for _, m := range msgs {
		for _, sm := range diffPath.FindAllStringSubmatch(m.Body, -1) {
			paths["/"+sm[1]] = true
			paths["/"+sm[2]] = true
		}
	}
	list := make([]string, 0, len(paths))
	for p := range paths {
		list = append(list, p)
	}
	sort.Strings(list)
	// Not "git sparse-checkout": it sets extensions.worktreeConfig, which
	// go-git refuses to open.
	gitT(t, wt, "config", "core.sparseCheckout", "true")
	if err := os.WriteFile(filepath.Join(wt, ".git", "info", "sparse-checkout"), []byte(strings.Join(list, "\n")+"\n/Makefile\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := st.Resolve(base)
	if err != nil {
		t.Fatal(err)
	}
	gitT(t, wt, "checkout", "-q", "--detach", c.Hash.String())
	ws, err := OpenRepo(wt)
	if err != nil {
		t.Fatal(err)
	}
	return wt, ws
}

// TestCorpusPatchesLikeGitAm takes every 2024 linux-rdma patch touching
// ib_core or xprtrdma, applies each alone to the imported 6.12 tree with
// the builder and with git am, and requires the same outcome: the same
// commit (tree, author, date, message) where git am applies it, an
// *ApplyError where git am fails.
func TestCorpusPatchesLikeGitAm(t *testing.T) {
	shared := sharedDir(t)
	st, base := testTree(t)
	msgs := corpusPatches(t, filepath.Join(shared, "corpus", "linux-rdma-2024.git"),
		"drivers/infiniband/core/", "net/sunrpc/xprtrdma/")
	if len(msgs) < 100 {
		t.Fatalf("only %d patches found in the corpus", len(msgs))
	}
	t.Logf("%d patches touch ib_core or xprtrdma", len(msgs))
	wt, ws := amCheckout(t, st, base, msgs)
	c, err := ws.Resolve("HEAD")
	if err != nil {
		t.Fatal(err)
	}
	mbox := filepath.Join(t.TempDir(), "one.mbox")
	applied, agreedFail, byBlobs := 0, 0, 0
	gitT(t, wt, "update-ref", TreeRef("local", ImportBranch).String(), c.Hash.String())
	local := []TreeConfig{{Name: "local", Branches: []string{ImportBranch}}}
	start := time.Now()
	for i, m := range msgs {
		if i%25 == 0 {
			t.Logf("%d/%d after %v", i, len(msgs), time.Since(start))
		}
		res, err := ws.Apply(context.Background(), c.Hash, []*flow.Message{m}, pinnedOptions())
		var ae *ApplyError
		if err != nil && !errors.As(err, &ae) {
			t.Fatalf("patch %d %q: %v", i, m.Subject, err)
		}
		// Base selection on the same tree: a patch whose pre-image blobs
		// are all in 6.12.117 must apply there.
		b, err := ws.SelectBase(context.Background(), readSeries(t, m), local, 1)
		if err != nil {
			t.Fatal(err)
		}
		if b.Reason == BaseFromBlobs {
			byBlobs++
			if ae != nil {
				t.Errorf("%q: its blobs match 6.12.117 but it does not apply: %v", m.Subject, ae)
			}
		}
		if err := os.WriteFile(mbox, m.Raw, 0o644); err != nil {
			t.Fatal(err)
		}
		want, amErr := gitAmAtHead(t, wt, c.Hash.String(), mbox)
		switch {
		case ae != nil && amErr != nil:
			agreedFail++
		case ae != nil:
			t.Errorf("%q: git am applies it, the builder: %v", m.Subject, ae)
		case amErr != nil:
			t.Errorf("%q: the builder applies it, git am: %v", m.Subject, amErr)
		case len(want) != 1 || want[0] != res.Commits[0].String():
			t.Errorf("%q: builder commit %s, git am %v\n%s\n%s", m.Subject, res.Commits[0], want,
				gitT(t, wt, "cat-file", "-p", res.Commits[0].String()), gitT(t, wt, "cat-file", "-p", want[0]))
		default:
			applied++
		}
	}
	t.Logf("%d patches: %d applied with identical commits, %d refused by both; %d based on 6.12.117 by their blobs",
		len(msgs), applied, agreedFail, byBlobs)
	if applied < 40 {
		t.Errorf("only %d patches applied identically; 46 apply to 6.12.117", applied)
	}
}

// gitAmAtHead runs git am in a checkout already at base and leaves it at
// base again: a failed git am changes neither index nor files (git apply
// is atomic), so removing its state directory is all the cleanup needed,
// which saves two rewrites of the 86,000-entry index per failing patch.
func gitAmAtHead(t testing.TB, dir, base, mbox string) ([]string, error) {
	t.Helper()
	if out, err := gitEnv(dir, nil, "am", "-q", mbox); err != nil {
		if err := os.RemoveAll(filepath.Join(dir, ".git", "rebase-apply")); err != nil {
			t.Fatal(err)
		}
		if head := gitT(t, dir, "rev-parse", "HEAD"); head != base {
			t.Fatalf("a failed git am moved HEAD to %s", head)
		}
		return nil, errors.New(out)
	}
	made := strings.Fields(gitT(t, dir, "rev-list", "--reverse", base+"..HEAD"))
	gitT(t, dir, "checkout", "-q", "--detach", base)
	return made, nil
}
