package builder

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
)

// The builder adapter on a real repository: base selection, apply as git
// am, a patch that does not apply is the series' fault (not infra), heads
// of tree branches, and git revert for the bisection's confirmation.
func TestStage(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	gitT(t, work, "init", "-q", "-b", "master")
	src := filepath.Join(work, "net", "sunrpc", "xprtrdma")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "svc_rdma_sendto.c"), []byte("int a;\nint b;\nint c;\n"), 0o644)
	gitT(t, work, "add", "-A")
	gitT(t, work, "commit", "-q", "-m", "base")
	base := gitT(t, work, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(src, "svc_rdma_sendto.c"), []byte("int a;\nint b2;\nint c;\n"), 0o644)
	gitT(t, work, "commit", "-q", "-am", "svcrdma: rename b")
	patch := gitT(t, work, "format-patch", "--stdout", "-1")
	second := gitT(t, work, "rev-parse", "HEAD")

	// The bot's store: a bare repository holding the tree's branch.
	repo := filepath.Join(t.TempDir(), "trees.git")
	gitT(t, work, "clone", "-q", "--bare", work, repo)
	gitT(t, repo, "update-ref", "refs/trees/mainline/master", base)
	bs, err := OpenStore(repo)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Trees = []TreeConfig{{Name: "mainline", Branches: []string{"master"}}}
	b := &Stage{Store: bs, RepoDir: repo, Cfg: cfg, Lab: "qemu",
		Now: func() time.Time { return time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC) }}

	m, err := lore.ParseMessage([]byte(patch + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := flow.Series{MsgID: "rename@example.org", Version: 1, Subject: "svcrdma: rename b", Patches: []*flow.Message{m}}
	sel, err := b.SelectBase(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Tree != "mainline" || sel.Commit != base {
		t.Fatalf("base %+v, want mainline %s", sel, base)
	}
	// The patch's index line names the base's blob: the report says so.
	if sel.Reason != "pre-image blob ids" {
		t.Fatalf("base reason %q, want the blob guess", sel.Reason)
	}
	var trace bytes.Buffer
	cand, err := b.Apply(ctx, sel, s, &trace)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bs.Resolve(cand)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := bs.Resolve(second)
	if c.TreeHash != orig.TreeHash {
		t.Fatalf("applied tree %s differs from git's %s", c.TreeHash, orig.TreeHash)
	}
	// The same patch on its own result does not apply: the series' fault.
	_, err = b.Apply(ctx, flow.Base{Tree: "mainline", Commit: cand}, s, &trace)
	if err == nil || flow.IsInfra(err) {
		t.Fatalf("conflicting apply: %v (infra %v)", err, flow.IsInfra(err))
	}
	var ae *ApplyError
	if !errors.As(err, &ae) {
		t.Fatalf("want *ApplyError, got %T", err)
	}

	head, err := b.Head(ctx, "mainline", "master")
	if err != nil || head != base {
		t.Fatalf("head %s %v", head, err)
	}
	// The operator's git config is not read by the revert (it runs in
	// builder's clean environment): here it would sign with a gpg that
	// fails.
	hostile := filepath.Join(t.TempDir(), "gitconfig")
	os.WriteFile(hostile, []byte("[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = false\n"), 0o644)
	t.Setenv("GIT_CONFIG_GLOBAL", hostile)
	reverted, err := b.Revert(ctx, "mainline", second, second)
	if err != nil {
		t.Fatal(err)
	}
	// A revert that does not apply (the change is not on the base) is
	// the confirmation failing, not infra, and leaves no worktree.
	if _, err := b.Revert(ctx, "mainline", base, second); err == nil || flow.IsInfra(err) || !strings.Contains(err.Error(), "git revert") {
		t.Errorf("revert onto a base without the change: %v (infra %v)", err, flow.IsInfra(err))
	}
	if wts, _ := os.ReadDir(filepath.Join(repo, "worktrees")); len(wts) != 0 {
		t.Errorf("worktrees left behind: %v", wts)
	}
	if rc, _ := bs.Resolve(reverted); rc == nil || rc.Committer.Name != cfg.Committer.Name {
		t.Errorf("revert committed by %v, want %s", rc, cfg.Committer.Name)
	}
	rc, err := bs.Resolve(reverted)
	if err != nil {
		t.Fatalf("revert commit not in the store: %v", err)
	}
	bc, _ := bs.Resolve(base)
	if rc.TreeHash != bc.TreeHash {
		t.Fatal("revert did not restore the base tree")
	}
	// The branch's commits are trusted kbuild trees; the applied series,
	// and a commit only a series ref reaches, are not.
	if !b.Trusted(ctx, base) {
		t.Error("the branch head is not trusted")
	}
	if b.Trusted(ctx, cand) || b.Trusted(ctx, second) {
		t.Error("a commit off the configured branches is trusted")
	}
	if dir, _ := b.GitDir("mainline"); dir != repo {
		t.Fatalf("git dir %s", dir)
	}
}
