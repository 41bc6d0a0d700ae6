package builder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/rdmabot/rdmabot/builder/kbuild"
	"github.com/rdmabot/rdmabot/flow"
)

// Stage is the builder as the bot uses it (bot.Builder, bot.Trees): the
// tree store picks bases, applies series and fetches trees, kbuild builds
// their kernels. A patch that does not apply (*ApplyError, *UnsafeError)
// and a kernel that does not build (*kbuild.BuildError,
// *kbuild.ConfigError) are the source's fault and returned as they are;
// every other failure is the infrastructure's (flow.MarkInfra).
type Stage struct {
	Store   *Store // the trees (OpenStore(StorePath(dataDir)))
	RepoDir string // its repository, for git revert and bisection
	Cfg     Config
	Kbuild  *kbuild.Builder
	Lab     string // kbuild lab configuration name (qemu)
	Now     func() time.Time
}

// SelectBase picks the base among the configured trees.
func (b *Stage) SelectBase(ctx context.Context, s flow.Series) (flow.Base, error) {
	if s.Tree != "" {
		return b.askedBase(s.Tree, s.Branch)
	}
	base, err := b.Store.SelectBase(ctx, s, b.Cfg.Trees, 0)
	if err != nil {
		return flow.Base{}, err
	}
	tree := base.Tree
	if tree == "" && len(b.Cfg.Trees) > 0 {
		tree = b.Cfg.Trees[0].Name
	}
	return flow.Base{Tree: tree, Branch: base.Branch, Commit: base.Commit.String(), Reason: baseReasonPhrase(base)}, nil
}

// askedBase is the head of the tree and branch a command named ("": the
// tree's first branch). A branch the store does not hold is the
// operator's gap (not fetched yet), never the series'.
func (b *Stage) askedBase(tree, branch string) (flow.Base, error) {
	for _, t := range b.Cfg.Trees {
		if t.Name != tree {
			continue
		}
		if branch == "" && len(t.Branches) > 0 {
			branch = t.Branches[0]
		}
		ref, err := b.Store.Repository().Reference(TreeRef(tree, branch), true)
		if err != nil {
			return flow.Base{}, flow.MarkInfra(fmt.Errorf("%s/%s is not in the tree store (fetch it: rdmabot tree fetch --name %s): %w", tree, branch, tree, err))
		}
		return flow.Base{Tree: tree, Commit: ref.Hash().String(), Reason: fmt.Sprintf("asked for: head of %s/%s", tree, branch)}, nil
	}
	return flow.Base{}, fmt.Errorf("no tree %q in trees", tree)
}

// MaintainersOf returns the maintainers and reviewers MAINTAINERS lists
// for files at commit (the base a series would be tested on), every
// section that covers them (get_maintainer's), catch-alls included: who
// may give a command or an applied note, before any test chose a base.
func (b *Stage) MaintainersOf(_ context.Context, commit string, files []string) ([]string, error) {
	return b.maintainers(commit, files, (*Maintainers).For)
}

// MaintainersAt returns the maintainers and reviewers of the sections
// that cover files most specifically at commit (Maintainers.SpecificFor:
// never THE REST or a section naming a whole top-level tree such as
// net/): whom a reply copies. A tree without a MAINTAINERS file lists
// nobody.
func (b *Stage) MaintainersAt(_ context.Context, commit string, files []string) ([]string, error) {
	return b.maintainers(commit, files, (*Maintainers).SpecificFor)
}

// ListsAt returns the mailing lists (L:) of every MAINTAINERS section
// covering files at commit: where a change to them is discussed. A tree
// without a MAINTAINERS file lists none.
func (b *Stage) ListsAt(_ context.Context, commit string, files []string) ([]string, error) {
	m, err := b.Store.MaintainersAt(plumbing.NewHash(commit))
	if errors.Is(err, ErrNoMaintainers) {
		return nil, nil
	}
	if err != nil {
		return nil, flow.MarkInfra(err)
	}
	var out []string
	for _, c := range m.For(files) {
		if c.Role == RoleList && !slices.Contains(out, c.Email) {
			out = append(out, c.Email)
		}
	}
	return out, nil
}

func (b *Stage) maintainers(commit string, files []string, pick func(*Maintainers, []string) []Contact) ([]string, error) {
	m, err := b.Store.MaintainersAt(plumbing.NewHash(commit))
	if errors.Is(err, ErrNoMaintainers) {
		return nil, nil
	}
	if err != nil {
		return nil, flow.MarkInfra(err)
	}
	var out []string
	for _, c := range pick(m, files) {
		if c.Role == RoleMaintainer || c.Role == RoleReviewer {
			out = append(out, c.Email)
		}
	}
	return out, nil
}

// Apply commits the series on base as git am would; *ApplyError and
// *UnsafeError are the series' fault, anything else the store's.
func (b *Stage) Apply(ctx context.Context, base flow.Base, s flow.Series, trace io.Writer) (string, error) {
	res, err := b.Store.Apply(ctx, plumbing.NewHash(base.Commit), s.Patches, ApplyOptions{
		Committer: b.Cfg.Committer, Now: b.Now, Ref: SeriesRef(s.MsgID, s.Version)})
	if err != nil {
		var ae *ApplyError
		var ue *UnsafeError
		if errors.As(err, &ae) || errors.As(err, &ue) {
			return "", err
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
func (b *Stage) Build(ctx context.Context, tree, commit string, trace io.Writer) (string, error) {
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
			return "", err
		}
		return "", flow.MarkInfra(err)
	}
	fmt.Fprintf(trace, "kernel %s (reused %v, synced %+v, timings %+v)\n", res.Key, res.Reused, res.Sync, res.Timings)
	return res.Dir, nil
}

// Check compiles alone the C files a candidate changes from its base
// (kbuild.Builder.Check), before its full build waits its turn: compiled
// lists the objects made, empty when the check could not stand for the
// full build (the trace says why); unchanged says each is byte for byte
// the base's object and the series changes nothing else. A compile
// error is the candidate's (*kbuild.BuildError).
func (b *Stage) Check(ctx context.Context, tree, base, candidate string, trace io.Writer) (compiled []string, unchanged bool, err error) {
	bc, labCfg, err := b.resolve(base)
	if err != nil {
		return nil, false, err
	}
	c, _, err := b.resolve(candidate)
	if err != nil {
		return nil, false, err
	}
	res, err := b.Kbuild.Check(ctx, kbuild.Request{Objects: b.Store.Repository().Storer, Tree: c.TreeHash, Lab: labCfg, Slot: tree}, bc.TreeHash)
	if err != nil {
		var be *kbuild.BuildError
		if errors.As(err, &be) {
			return nil, false, err
		}
		return nil, false, flow.MarkInfra(err)
	}
	if res.Skipped != "" {
		fmt.Fprintf(trace, "quick check skipped: %s\n", res.Skipped)
		return nil, false, nil
	}
	fmt.Fprintf(trace, "quick check compiled %s (timings %+v)\n", strings.Join(res.Objects, " "), res.Timings)
	if res.Unchanged {
		fmt.Fprintf(trace, "the base compiles %s to the same bytes, and the series changes nothing else\n", strings.Join(res.Objects, " "))
	} else {
		fmt.Fprintf(trace, "generated code changed: %s\n", res.Differs)
	}
	return res.Objects, res.Unchanged, nil
}

// Forget drops kbuild's stored copy of the kernel in dir, a directory
// the bot is pruning from its artifact store (bot.artifacts_max_mib).
func (b *Stage) Forget(dir string) error {
	return b.Kbuild.Store().Forget(dir)
}

// Trusted says whether commit is on a configured tree's branch (reached
// from a refs/trees/ head): a base, a mainline head, a bisection step.
// Anything else, an applied series above all, is built by kbuild apart
// from every other build. An error says untrusted. One rev-list walk:
// a commit above the heads is listed at once, so a series costs little.
func (b *Stage) Trusted(ctx context.Context, commit string) bool {
	return b.Store.OnTrees(ctx, commit)
}

// Fetch updates a tree's branches from its URL; a tree without one (an
// import) is re-read from the store, which someone else updates.
func (b *Stage) Fetch(ctx context.Context, tree string) error {
	for _, t := range b.Cfg.Trees {
		if t.Name != tree {
			continue
		}
		if t.URL == "" {
			return flow.MarkInfra(b.Store.Refresh(ctx))
		}
		return flow.MarkInfra(b.Store.Fetch(ctx, t))
	}
	return flow.MarkInfra(fmt.Errorf("tree %s is not configured ([[trees]])", tree))
}

// resolve finds a commit and the kernel configuration of the lab; a
// failure of either is the machine's (the commit was made or fetched here).
func (b *Stage) resolve(commit string) (*object.Commit, kbuild.Lab, error) {
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
func (b *Stage) KernelKey(ctx context.Context, tree, commit string) (string, error) {
	c, labCfg, err := b.resolve(commit)
	if err != nil {
		return "", err
	}
	key, err := b.Kbuild.Key(kbuild.Request{Tree: c.TreeHash, Lab: labCfg})
	return key, flow.MarkInfra(err)
}

// Head fetches a tree's branch (when it has a URL; else re-reads the
// store, which someone else updates) and resolves ref.
func (b *Stage) Head(ctx context.Context, tree, ref string) (string, error) {
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
	return b.Store.ResolveInTree(tree, ref)
}

// ResolveInTree is the commit ref names in tree: its branch ref
// (refs/trees/<tree>/<ref>) first, else any revision the store resolves
// (a commit id, a tag). A mainline head and the CLI's bisect read refs
// alike.
func (st *Store) ResolveInTree(tree, ref string) (string, error) {
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
// run by RunGit like every git the bot runs: the operator's git
// config (signing, hooks, identities) is not read.
func (b *Stage) Revert(ctx context.Context, tree, onto, commit string) (string, error) {
	wt, err := os.MkdirTemp("", "rdmabot-revert-")
	if err != nil {
		return "", flow.MarkInfra(err)
	}
	os.Remove(wt)
	defer func() {
		RunGit(context.WithoutCancel(ctx), b.RepoDir, revertTimeout, "worktree", "remove", "--force", wt)
		os.RemoveAll(wt)
	}()
	if _, err := RunGit(ctx, b.RepoDir, revertTimeout, "worktree", "add", "--detach", wt, onto); err != nil {
		return "", flow.MarkInfra(err)
	}
	// The worktree's own git dir (its HEAD and index), with it as the
	// work tree; the commit is the configured committer's.
	inWT := func(args ...string) ([]byte, error) {
		full := append([]string{"--work-tree", wt, "-c", "user.name=" + b.Cfg.Committer.Name, "-c", "user.email=" + b.Cfg.Committer.Email}, args...)
		return RunGit(ctx, filepath.Join(b.RepoDir, "worktrees", filepath.Base(wt)), revertTimeout, full...)
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
func (b *Stage) GitDir(tree string) (string, error) { return b.RepoDir, nil }

// baseReasonPhrase completes a report's "base chosen by ..." line; a
// tree the series belongs to that the store lacks follows the phrase
// (flow.BaseByDefault stays its prefix: whom an APPLY_FAILED reaches
// depends on it).
func baseReasonPhrase(b *Base) string {
	var p string
	switch b.Reason {
	case BaseFromTrailer:
		p = flow.BaseByTrailer
	case BaseFromBlobs:
		p = flow.BaseByBlobs
	case BaseFromTag:
		p = flow.BaseByTag
	case BaseFromDefault:
		p = flow.BaseByDefault
	case BaseFromRoute:
		p := fmt.Sprintf("the %s tree's rule: %s", b.Tree, b.Why)
		if b.Tried != "" {
			p += "; " + b.Tried
		}
		return p
	default:
		p = string(b.Reason)
	}
	if b.Why != "" {
		p += "; " + b.Why
	}
	return p
}
