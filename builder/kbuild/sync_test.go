package kbuild

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// gitRun runs git in dir (testenv.Git).
func gitRun(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return testenv.Git(t, dir, args...)
}

func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(content, "->"):
			if err := os.Symlink(content[2:], full); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(content, "x:"):
			if err := os.WriteFile(full, []byte(content[2:]), 0o755); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// snapshot describes a directory: type, mode and content of every path.
func snapshot(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." || d.Name() == ".git" && d.IsDir() {
			if rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case fi.IsDir():
			out[rel] = "dir"
		default:
			b, _ := os.ReadFile(p)
			out[rel] = fi.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffSnapshots(a, b map[string]string) []string {
	var d []string
	for k, v := range a {
		if b[k] != v {
			d = append(d, k+": "+v+" vs "+b[k])
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			d = append(d, k+": missing vs "+v)
		}
	}
	sort.Strings(d)
	return d
}

type syncFixture struct {
	repo             *git.Repository
	wt               string        // git's own checkout, the reference
	a, b             plumbing.Hash // trees
	commitA, commitB string
}

// newSyncFixture makes a repository with two commits whose trees differ
// in every way Sync must handle.
func newSyncFixture(t *testing.T) syncFixture {
	t.Helper()
	wt := t.TempDir()
	gitRun(t, wt, "init", "-q")
	writeTree(t, wt, map[string]string{
		"Makefile":                 "all:\n",
		"kept/unchanged.c":         "int x;\n",
		"net/sunrpc/xprtrdma/a.c":  "old a\n",
		"net/sunrpc/xprtrdma/b.c":  "b stays\n",
		"scripts/run.sh":           "x:#!/bin/sh\n",
		"scripts/chmod-me":         "same content\n",
		"gone/deep/file.h":         "bye\n",
		"deleted.txt":              "bye\n",
		"link":                     "->kept/unchanged.c",
		"link-to-file":             "->Makefile",
		"file-to-dir":              "a file\n",
		"dir-to-file/inner.c":      "inner\n",
		"retarget":                 "->Makefile",
		"include/linux/exec-to-rw": "x:#!/bin/sh\necho\n",
	})
	gitRun(t, wt, "add", "-A")
	gitRun(t, wt, "commit", "-q", "-m", "A")
	a := gitRun(t, wt, "rev-parse", "HEAD^{tree}")
	commitA := gitRun(t, wt, "rev-parse", "HEAD")

	for _, p := range []string{"gone", "deleted.txt", "link-to-file", "file-to-dir", "dir-to-file", "retarget"} {
		if err := os.RemoveAll(filepath.Join(wt, p)); err != nil {
			t.Fatal(err)
		}
	}
	writeTree(t, wt, map[string]string{
		"net/sunrpc/xprtrdma/a.c":  "new a\n",
		"new/dir/added.c":          "added\n",
		"link-to-file":             "a regular file now\n",
		"file-to-dir/x":            "x\n",
		"dir-to-file":              "now a file\n",
		"retarget":                 "->kept",
		"include/linux/exec-to-rw": "#!/bin/sh\necho changed\n",
	})
	if err := os.Chmod(filepath.Join(wt, "scripts/chmod-me"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(wt, "include/linux/exec-to-rw"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun(t, wt, "add", "-A")
	gitRun(t, wt, "commit", "-q", "-m", "B")
	b := gitRun(t, wt, "rev-parse", "HEAD^{tree}")
	commitB := gitRun(t, wt, "rev-parse", "HEAD")

	repo, err := git.PlainOpen(wt)
	if err != nil {
		t.Fatal(err)
	}
	return syncFixture{repo: repo, wt: wt, a: plumbing.NewHash(a), b: plumbing.NewHash(b), commitA: commitA, commitB: commitB}
}

func (f syncFixture) gitSnapshot(t *testing.T, rev string) map[string]string {
	t.Helper()
	gitRun(t, f.wt, "checkout", "-q", rev)
	return snapshot(t, f.wt)
}

func TestSyncMatchesGitCheckout(t *testing.T) {
	f := newSyncFixture(t)
	wantA, wantB := f.gitSnapshot(t, f.commitA), f.gitSnapshot(t, f.commitB)
	ctx := context.Background()
	c, err := OpenCheckout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Sync(ctx, f.repo.Storer, f.a)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full {
		t.Error("first sync should be a full compare")
	}
	if d := diffSnapshots(wantA, snapshot(t, c.Dir())); d != nil {
		t.Fatalf("after sync to A:\n%s", strings.Join(d, "\n"))
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	keep := filepath.Join(c.Dir(), "kept/unchanged.c")
	if err := os.Chtimes(keep, old, old); err != nil {
		t.Fatal(err)
	}

	st, err = c.Sync(ctx, f.repo.Storer, f.b)
	if err != nil {
		t.Fatal(err)
	}
	if st.Full {
		t.Error("A to B should be a tree diff")
	}
	if d := diffSnapshots(wantB, snapshot(t, c.Dir())); d != nil {
		t.Fatalf("after sync to B:\n%s", strings.Join(d, "\n"))
	}
	if fi, err := os.Stat(keep); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("unchanged file's mtime moved: %v %v", fi.ModTime(), err)
	}
	if tree, ok := c.Tree(); !ok || tree != f.b {
		t.Errorf("Tree() = %v %v, want %v", tree, ok, f.b)
	}
	changed := strings.Join(st.Changed, " ")
	for _, p := range []string{"net/sunrpc/xprtrdma/a.c", "gone", "new", "scripts/chmod-me"} {
		if !strings.Contains(" "+changed+" ", " "+p+" ") {
			t.Errorf("Changed lacks %s: %s", p, changed)
		}
	}
	if strings.Contains(changed, "b.c") || strings.Contains(changed, "kept/") {
		t.Errorf("Changed lists unchanged paths: %s", changed)
	}
	if st.Chmodded != 1 {
		t.Errorf("Chmodded = %d, want 1 (scripts/chmod-me)", st.Chmodded)
	}

	// And back: B to A restores everything.
	if _, err := c.Sync(ctx, f.repo.Storer, f.a); err != nil {
		t.Fatal(err)
	}
	if d := diffSnapshots(wantA, snapshot(t, c.Dir())); d != nil {
		t.Fatalf("after sync back to A:\n%s", strings.Join(d, "\n"))
	}
}

func TestSyncRepairsInterruptedSync(t *testing.T) {
	f := newSyncFixture(t)
	wantB := f.gitSnapshot(t, f.commitB)
	ctx := context.Background()
	slot := t.TempDir()
	c, err := OpenCheckout(slot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sync(ctx, f.repo.Storer, f.a); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	keep := filepath.Join(c.Dir(), "kept/unchanged.c")
	if err := os.Chtimes(keep, old, old); err != nil {
		t.Fatal(err)
	}
	// A sync to B that died half-way: the state says so, some files are
	// new, some old, plus debris and a changed mode.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Sync(cancelled, f.repo.Storer, f.b); err == nil {
		// Small trees can finish before the first cancellation check; make
		// the half-done state by hand then.
		if err := os.WriteFile(filepath.Join(slot, "tree"), []byte(syncingPrefix+f.a.String()+" "+f.b.String()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTree(t, c.Dir(), map[string]string{"debris/x.o": "junk", "net/sunrpc/xprtrdma/a.c.tmp": "junk"})
	if err := os.WriteFile(filepath.Join(c.Dir(), "net/sunrpc/xprtrdma/b.c"), []byte("half written"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(c.Dir(), "scripts/run.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Tree(); ok {
		t.Fatal("an interrupted sync must not report a tree")
	}

	c2, err := OpenCheckout(slot) // a new process
	if err != nil {
		t.Fatal(err)
	}
	st, err := c2.Sync(ctx, f.repo.Storer, f.b)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full {
		t.Error("sync after a crash must compare everything")
	}
	if d := diffSnapshots(wantB, snapshot(t, c2.Dir())); d != nil {
		t.Fatalf("after repair:\n%s", strings.Join(d, "\n"))
	}
	if fi, _ := os.Stat(keep); !fi.ModTime().Equal(old) {
		t.Errorf("repair rewrote an unchanged file")
	}
}

func TestSyncRefusesHostileNames(t *testing.T) {
	f := newSyncFixture(t)
	for _, name := range []string{"..", ".git", ".GIT"} {
		blob := f.repo.Storer.NewEncodedObject()
		blob.SetType(plumbing.BlobObject)
		w, _ := blob.Writer()
		w.Write([]byte("evil\n"))
		w.Close()
		bh, err := f.repo.Storer.SetEncodedObject(blob)
		if err != nil {
			t.Fatal(err)
		}
		tree := &object.Tree{Entries: []object.TreeEntry{{Name: name, Mode: filemode.Regular, Hash: bh}}}
		obj := f.repo.Storer.NewEncodedObject()
		if err := tree.Encode(obj); err != nil {
			t.Fatal(err)
		}
		th, err := f.repo.Storer.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		slot := t.TempDir()
		c, _ := OpenCheckout(slot)
		if _, err := c.Sync(context.Background(), f.repo.Storer, th); err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("%q: want a refusal, got %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(slot, "evil")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%q: something was written outside", name)
		}
	}
}
