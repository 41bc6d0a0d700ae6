package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/builder/kbuild"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/reports"
)

// Build is builder and kbuild behind bot.Builder and bot.Trees.
type Build struct {
	Store   *builder.Store // the trees (builder.OpenStore(builder.StorePath(dataDir)))
	RepoDir string         // its repository, for git revert and bisection
	Cfg     builder.Config
	Kbuild  *kbuild.Builder
	Lab     string // kbuild lab configuration name (qemu)
	Now     func() time.Time
}

func parseMails(s flow.Series) ([]*lore.Message, []*lore.Message, error) {
	var all, patches []*lore.Message
	if len(s.Cover) > 0 {
		m, err := lore.ParseMessage(s.Cover)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, m)
	}
	for _, raw := range s.Patches {
		m, err := lore.ParseMessage(raw)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, m)
		patches = append(patches, m)
	}
	return all, patches, nil
}

// SelectBase picks the base among the configured trees.
func (b *Build) SelectBase(ctx context.Context, s flow.Series) (flow.Base, error) {
	all, _, err := parseMails(s)
	if err != nil {
		return flow.Base{}, err
	}
	if s.Tree != "" {
		return b.askedBase(s.Tree, s.Branch)
	}
	base, err := b.Store.SelectBase(ctx, all, b.Cfg.Trees, 0)
	if err != nil {
		return flow.Base{}, err
	}
	tree := base.Tree
	if tree == "" && len(b.Cfg.Trees) > 0 {
		tree = b.Cfg.Trees[0].Name
	}
	return flow.Base{Tree: tree, Branch: base.Branch, Commit: base.Commit.String(), Reason: baseReasonPhrase(base.Reason)}, nil
}

// askedBase is the head of the tree and branch a command named ("": the
// tree's first branch). A branch the store does not hold is the
// operator's gap (not fetched yet), never the series'.
func (b *Build) askedBase(tree, branch string) (flow.Base, error) {
	for _, t := range b.Cfg.Trees {
		if t.Name != tree {
			continue
		}
		if branch == "" && len(t.Branches) > 0 {
			branch = t.Branches[0]
		}
		ref, err := b.Store.Repository().Reference(builder.TreeRef(tree, branch), true)
		if err != nil {
			return flow.Base{}, flow.MarkInfra(fmt.Errorf("%s/%s is not in the tree store (fetch it: rdmabot tree fetch --name %s): %w", tree, branch, tree, err))
		}
		return flow.Base{Tree: tree, Commit: ref.Hash().String(), Reason: fmt.Sprintf("asked for: head of %s/%s", tree, branch)}, nil
	}
	return flow.Base{}, fmt.Errorf("no tree %q in builder.trees", tree)
}

// MaintainersOf returns the maintainers and reviewers MAINTAINERS lists
// for files at the base s would be tested on. A base tree without a
// MAINTAINERS file lists nobody.
func (b *Build) MaintainersOf(ctx context.Context, s flow.Series, files []string) ([]string, error) {
	base, err := b.SelectBase(ctx, s)
	if err != nil {
		return nil, err
	}
	m, err := b.Store.MaintainersAt(plumbing.NewHash(base.Commit))
	if errors.Is(err, builder.ErrNoMaintainers) {
		return nil, nil
	}
	if err != nil {
		return nil, flow.MarkInfra(err)
	}
	var out []string
	for _, c := range m.For(files) {
		if c.Role == builder.RoleMaintainer || c.Role == builder.RoleReviewer {
			out = append(out, c.Email)
		}
	}
	return out, nil
}

// Apply commits the series on base as git am would; *ApplyError and
// *UnsafeError are the series' fault, anything else the store's.
func (b *Build) Apply(ctx context.Context, base flow.Base, s flow.Series, trace io.Writer) (string, error) {
	_, patches, err := parseMails(s)
	if err != nil {
		return "", err
	}
	res, err := b.Store.Apply(ctx, plumbing.NewHash(base.Commit), patches, builder.ApplyOptions{
		Committer: b.Cfg.Committer, Now: b.Now, Ref: builder.SeriesRef(s.MsgID, s.Version)})
	if err != nil {
		var ae *builder.ApplyError
		var ue *builder.UnsafeError
		if errors.As(err, &ae) || errors.As(err, &ue) {
			return "", applyFailure(err)
		}
		return "", flow.MarkInfra(err)
	}
	if len(res.Commits) == 0 {
		return "", fmt.Errorf("the series has no patches")
	}
	fmt.Fprintf(trace, "applied %d patches on %s\n", len(res.Commits), base.Commit)
	return res.Commits[len(res.Commits)-1].String(), nil
}

// Build builds the kernel of a commit with kbuild; *BuildError and
// *ConfigError are the source's fault, everything else the machine's.
func (b *Build) Build(ctx context.Context, tree, commit string, trace io.Writer) (string, error) {
	c, labCfg, err := b.resolve(commit)
	if err != nil {
		return "", err
	}
	trusted := b.Trusted(ctx, c.Hash.String())
	fmt.Fprintf(trace, "building %s as a trusted tree: %v\n", commit, trusted)
	res, err := b.Kbuild.Build(ctx, kbuild.Request{Objects: b.Store.Repository().Storer, Tree: c.TreeHash, Lab: labCfg, Slot: tree, Trusted: trusted})
	if err != nil {
		// The source's findings: it does not build, or it drops a config
		// option the lab needs (a base that does so stops its test as
		// "base does not build", blaming no one; a candidate gets
		// BUILD_FAILED). Retrying either would find the same.
		var be *kbuild.BuildError
		var ce *kbuild.ConfigError
		if errors.As(err, &be) || errors.As(err, &ce) {
			return "", buildFailure(err)
		}
		return "", flow.MarkInfra(err)
	}
	fmt.Fprintf(trace, "kernel %s (reused %v, synced %+v, timings %+v)\n", res.Key, res.Reused, res.Sync, res.Timings)
	return res.Dir, nil
}

// Forget drops kbuild's stored copy of the kernel in dir, a directory
// the bot is pruning from its artifact store (bot.artifacts_max_mib).
func (b *Build) Forget(dir string) error {
	return b.Kbuild.Store().Forget(dir)
}

// Trusted says whether commit is on a configured tree's branch (reached
// from a refs/trees/ head): a base, a mainline head, a bisection step.
// Anything else, an applied series above all, is built by kbuild apart
// from every other build. An error says untrusted. One rev-list walk:
// a commit above the heads is listed at once, so a series costs little.
func (b *Build) Trusted(ctx context.Context, commit string) bool {
	return b.Store.OnTrees(ctx, commit)
}

// Fetch updates a tree's branches from its URL; a tree without one (an
// import) is re-read from the store, which someone else updates.
func (b *Build) Fetch(ctx context.Context, tree string) error {
	for _, t := range b.Cfg.Trees {
		if t.Name != tree {
			continue
		}
		if t.URL == "" {
			return flow.MarkInfra(b.Store.Refresh(ctx))
		}
		return flow.MarkInfra(b.Store.Fetch(ctx, t))
	}
	return flow.MarkInfra(fmt.Errorf("tree %s is not configured ([[builder.trees]])", tree))
}

// resolve finds a commit and the kernel configuration of the lab; a
// failure of either is the machine's (the commit was made or fetched here).
func (b *Build) resolve(commit string) (*object.Commit, kbuild.Lab, error) {
	c, err := b.Store.Resolve(commit)
	if err != nil {
		return nil, kbuild.Lab{}, flow.MarkInfra(err)
	}
	labCfg, err := kbuild.LookupLab(b.Lab)
	if err != nil {
		return nil, kbuild.Lab{}, flow.MarkInfra(err)
	}
	return c, labCfg, nil
}

// KernelKey is kbuild's store key for the kernel of a commit: its tree,
// the lab's configuration and the toolchain.
func (b *Build) KernelKey(ctx context.Context, tree, commit string) (string, error) {
	c, labCfg, err := b.resolve(commit)
	if err != nil {
		return "", err
	}
	key, err := b.Kbuild.Key(kbuild.Request{Tree: c.TreeHash, Lab: labCfg})
	return key, flow.MarkInfra(err)
}

// Head fetches a tree's branch (when it has a URL; else re-reads the
// store, which someone else updates) and resolves ref.
func (b *Build) Head(ctx context.Context, tree, ref string) (string, error) {
	for _, t := range b.Cfg.Trees {
		if t.Name != tree {
			continue
		}
		var err error
		if t.URL != "" {
			err = b.Store.Fetch(ctx, t)
		} else {
			err = b.Store.Refresh(ctx)
		}
		if err != nil {
			return "", flow.MarkInfra(err)
		}
	}
	return ResolveInTree(b.Store, tree, ref)
}

// ResolveInTree is the commit ref names in tree: its branch ref
// (refs/trees/<tree>/<ref>) first, else any revision the store resolves
// (a commit id, a tag). A mainline head and the CLI's bisect read refs
// alike.
func ResolveInTree(st *builder.Store, tree, ref string) (string, error) {
	c, err := st.Resolve(tree + "/" + ref)
	if err != nil {
		if c, err2 := st.Resolve(ref); err2 == nil {
			return c.Hash.String(), nil
		}
		return "", err
	}
	return c.Hash.String(), nil
}

// revertTimeout bounds each git step of a revert: a kernel worktree's
// checkout is the slow one.
const revertTimeout = 15 * time.Minute

// Revert makes "onto with commit reverted" with git revert in a
// temporary worktree sharing the store's objects (go-git cannot revert),
// run by builder.RunGit like every git the bot runs: the operator's git
// config (signing, hooks, identities) is not read.
func (b *Build) Revert(ctx context.Context, tree, onto, commit string) (string, error) {
	wt, err := os.MkdirTemp("", "rdmabot-revert-")
	if err != nil {
		return "", flow.MarkInfra(err)
	}
	os.Remove(wt)
	defer func() {
		builder.RunGit(context.WithoutCancel(ctx), b.RepoDir, revertTimeout, "worktree", "remove", "--force", wt)
		os.RemoveAll(wt)
	}()
	if _, err := builder.RunGit(ctx, b.RepoDir, revertTimeout, "worktree", "add", "--detach", wt, onto); err != nil {
		return "", flow.MarkInfra(err)
	}
	// The worktree's own git dir (its HEAD and index), with it as the
	// work tree; the commit is the configured committer's.
	inWT := func(args ...string) ([]byte, error) {
		full := append([]string{"--work-tree", wt, "-c", "user.name=" + b.Cfg.Committer.Name, "-c", "user.email=" + b.Cfg.Committer.Email}, args...)
		return builder.RunGit(ctx, filepath.Join(b.RepoDir, "worktrees", filepath.Base(wt)), revertTimeout, full...)
	}
	if _, err := inWT("revert", "--no-edit", commit); err != nil {
		return "", err // a revert that does not apply: the confirmation fails
	}
	out, err := inWT("rev-parse", "HEAD")
	if err != nil {
		return "", flow.MarkInfra(err)
	}
	return strings.TrimSpace(string(out)), nil
}

// GitDir is the store's repository: it holds every tree.
func (b *Build) GitDir(tree string) (string, error) { return b.RepoDir, nil }

// baseReasonPhrase completes a report's "base chosen by ..." line.
func baseReasonPhrase(r builder.BaseReason) string {
	switch r {
	case builder.BaseFromTrailer:
		return reports.BaseByTrailer
	case builder.BaseFromBlobs:
		return reports.BaseByBlobs
	case builder.BaseFromTag:
		return reports.BaseByTag
	case builder.BaseFromDefault:
		return reports.BaseByDefault
	}
	return string(r)
}

// applyFailure keeps a patch that does not apply, or that the builder
// refuses, structured for the reply; other errors pass unchanged.
func applyFailure(err error) error {
	var ae *builder.ApplyError
	var ue *builder.UnsafeError
	switch {
	case errors.As(err, &ae):
		a := &reports.ApplyFailure{Patch: ae.Subject, Index: ae.Index, File: ae.File,
			Output: fmt.Sprintf("patch %d/%d: %s", ae.Index, ae.Total, ae.Reason)}
		if ae.Hunk > 0 {
			a.Hunk = fmt.Sprintf("#%d %s", ae.Hunk, ae.HunkHeader)
		}
		return &reports.Failure{Err: err, Account: reports.Detail{Apply: a}}
	case errors.As(err, &ue):
		return &reports.Failure{Err: err, Account: reports.Detail{Apply: &reports.ApplyFailure{Patch: ue.Subject, Index: ue.Index, File: ue.File,
			Output: fmt.Sprintf("patch %d/%d refused: %s", ue.Index, ue.Total, ue.Reason)}}}
	}
	return err
}

// buildFailure keeps a kernel that does not build structured for the
// reply: every error and warning with the compiler's source excerpt.
func buildFailure(err error) error {
	var ce *kbuild.ConfigError
	if errors.As(err, &ce) {
		f := &reports.BuildFailure{Target: "olddefconfig"}
		for _, l := range ce.Lost {
			f.New = append(f.New, reports.Diagnostic{Text: "config option lost: " + l.String()})
		}
		return &reports.Failure{Err: err, Account: reports.Detail{Build: f}}
	}
	var be *kbuild.BuildError
	if !errors.As(err, &be) {
		return err
	}
	diags := func(ds []kbuild.Diagnostic, kind string) []reports.Diagnostic {
		var out []reports.Diagnostic
		for _, d := range ds {
			text := d.String()
			if d.File != "" && d.Line > 0 {
				text = strings.Replace(text, ": "+d.Message, ": "+kind+": "+d.Message, 1)
			}
			out = append(out, reports.Diagnostic{Text: text, Context: d.Context})
		}
		return out
	}
	f := &reports.BuildFailure{Target: be.Target, New: diags(be.Diagnostics, "error"), Warnings: diags(be.Warnings, "warning")}
	if len(f.New) == 0 {
		// No error line recognised (a Makefile or script): the log's end.
		f.New = []reports.Diagnostic{{Text: "make " + be.Target + " failed; the end of its log:", Context: excerptTail(be.Tail, 20)}}
	}
	return &reports.Failure{Err: err, Account: reports.Detail{Build: f}}
}

func excerptTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
