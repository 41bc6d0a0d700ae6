package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := testenv.GitCmd(dir, []string{"GIT_AUTHOR_NAME=A U Thor", "GIT_AUTHOR_EMAIL=author@example.org",
		"GIT_COMMITTER_NAME=rdmabot", "GIT_COMMITTER_EMAIL=rdmabot@localhost",
		"GIT_COMMITTER_DATE=2024-06-01T00:00:00Z"}, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestTreeImportAndApply runs the two builder subcommands end to end: a
// tarball import into a data directory, then rdmabot apply of a
// format-patch mbox on it, whose commits must be git am's.
func TestTreeImportAndApply(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "linux-1.0")
	os.MkdirAll(filepath.Join(src, "net"), 0o755)
	os.WriteFile(filepath.Join(src, "Makefile"), []byte("VERSION = 1\nPATCHLEVEL = 0\n"), 0o644)
	os.WriteFile(filepath.Join(src, "net", "a.c"), []byte("one\ntwo\nthree\n"), 0o644)
	tarball := filepath.Join(tmp, "linux.tar.gz")
	if out, err := exec.Command("tar", "-C", tmp, "-czf", tarball, "linux-1.0").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	data := filepath.Join(tmp, "data")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"tree", "import", "--tarball", tarball, "--name", "local", "--data-dir", data}, &out, &errb); code != 0 {
		t.Fatalf("tree import: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "ref refs/trees/local/import\ntag refs/tags/local/v1.0\n") {
		t.Errorf("tree import printed:\n%s", out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"tree", "list", "--data-dir", data}, &out, &errb); code != 0 || !strings.HasSuffix(out.String(), " local/import\n") {
		t.Errorf("tree list: exit %d: %q %s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"tree", "list", "--json", "--data-dir", data}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), `"tree": "local"`) || !strings.Contains(out.String(), `"branch": "import"`) || !strings.Contains(out.String(), `"commit": "`) {
		t.Errorf("tree list --json: exit %d: %q %s", code, out.String(), errb.String())
	}

	// A work repository cloned from the store, a patch made in it.
	wt := filepath.Join(tmp, "wt")
	gitIn(t, tmp, "clone", "-q", filepath.Join(data, "trees", "kernel.git"), wt)
	gitIn(t, wt, "checkout", "-q", "-b", "work", "local/v1.0") // clone copies tags, not refs/trees
	gitIn(t, wt, "tag", "base")
	os.WriteFile(filepath.Join(wt, "net", "a.c"), []byte("one\nTWO\nthree\n"), 0o644)
	gitIn(t, wt, "commit", "-q", "-am", "net: shout two")
	mbox := filepath.Join(tmp, "p.mbox")
	os.WriteFile(mbox, []byte(gitIn(t, wt, "format-patch", "-q", "--stdout", "base")+"\n"), 0o644)
	want := gitIn(t, wt, "rev-parse", "HEAD")

	out.Reset()
	args := []string{"apply", "--repo", wt, "--base", "base", "--mbox", mbox, "--committer-date", "2024-06-01T00:00:00Z"}
	if code := run(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("apply: exit %d: %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "commit "+want+" ") {
		t.Errorf("apply printed %q, want commit %s", out.String(), want)
	}
}
