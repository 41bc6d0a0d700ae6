package builder

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/rdmabot/rdmabot/flow"
)

// BaseReason says how a base was chosen, in the order they are tried.
type BaseReason string

const (
	// BaseFromTrailer: the series names its base in a base-commit: line
	// and the store has that commit.
	BaseFromTrailer BaseReason = "base-commit"
	// BaseFromBlobs: the newest commit on a configured branch where every
	// file the series changes has the blob its index lines name.
	BaseFromBlobs BaseReason = "blobs"
	// BaseFromRoute: every file the series changes is under one tree's
	// paths (fs/nfsd and svcrdma for nfsd): the head of the branch that
	// tree's maintainers apply such a series to (RouteBranch).
	BaseFromRoute BaseReason = "route"
	// BaseFromTag: the subject's tree tag (rdma-next, nfsd ...) names a
	// configured tree branch; its head.
	BaseFromTag BaseReason = "tree-tag"
	// BaseFromDefault: the head of the first configured tree's first
	// branch (mainline).
	BaseFromDefault BaseReason = "default"
)

// Base is a chosen base and why, for every report.
type Base struct {
	Commit plumbing.Hash
	// Tree and Branch name where the base was found ("" for a
	// base-commit found only by id).
	Tree, Branch string
	Reason       BaseReason
	// Detail is one sentence for the report.
	Detail string
	// Why says, for BaseFromRoute, which rule picked which branch ("a
	// fix (Fixes: trailer) goes on nfsd-fixes"); for the others, a tree the series' files
	// belong to that the store does not hold ("" when none): the base
	// chosen instead is not the maintainers' branch.
	Why string
	// Tried says, for BaseFromRoute, the tree's branches the series did
	// not apply to before Branch, or that it applies to none of them
	// ("" when it applies to the rule's branch).
	Tried string
}

// DefaultBaseSearchDepth bounds the blob search: commits per branch,
// newest first. rdma's for-next moves by a few hundred commits a cycle.
const DefaultBaseSearchDepth = 2000

// SelectBase picks the base for a series among the trees of cfg that
// the store holds: the base-commit it names (s.BaseHint), else the blob
// ids of its patches' index lines, else a tree tag of its subjects
// (s.Tags), else the first tree's first branch. depth bounds the blob
// search per branch (0: DefaultBaseSearchDepth).
func (s *Store) SelectBase(ctx context.Context, series flow.Series, trees []TreeConfig, depth int) (*Base, error) {
	if depth <= 0 {
		depth = DefaultBaseSearchDepth
	}
	if b := s.namedBase(ctx, series.BaseHint); b != nil {
		return b, nil
	}
	route, why := routeOf(series, trees)
	if route != nil {
		if _, err := s.Repository().Reference(TreeRef(route.Name, why.branch), true); err == nil {
			return s.routedBase(ctx, series.Patches, route, why)
		}
	}
	b, err := s.selectUnrouted(ctx, series, trees, depth)
	if err == nil && route != nil {
		// Offline, or the tree not fetched yet: said in the reply, since
		// the base is then not where the maintainers apply the series.
		b.Why = fmt.Sprintf("%s/%s, where the %s tree takes %s, is not in the store", route.Name, why.branch, route.Name, why.rule)
	}
	return b, err
}

// selectUnrouted picks the base of a series no tree's paths claim (or
// whose tree the store does not hold): the pre-image blobs, the subject
// tag, the default branch.
func (s *Store) selectUnrouted(ctx context.Context, series flow.Series, trees []TreeConfig, depth int) (*Base, error) {
	mails := series.Mails()
	pre, err := preImages(mails)
	if err != nil {
		return nil, err
	}
	if len(pre) > 0 {
		b, err := s.baseFromBlobs(ctx, pre, trees, depth)
		if err != nil {
			return nil, err
		}
		if b != nil {
			return b, nil
		}
	}

	for _, tag := range series.Tags {
		for _, t := range trees {
			branch, ok := t.Tags[strings.ToLower(tag)]
			if !ok {
				continue
			}
			if ref, err := s.Repository().Reference(TreeRef(t.Name, branch), true); err == nil {
				return &Base{Commit: ref.Hash(), Tree: t.Name, Branch: branch, Reason: BaseFromTag,
					Detail: fmt.Sprintf("subject tag %q: head of %s/%s", tag, t.Name, branch)}, nil
			}
		}
	}

	// The first configured branch the store holds: a tree not fetched yet
	// (offline, or a first clone still running) gives way to the next, e.g.
	// the imported tree "local".
	var missing []string
	for _, t := range trees {
		for _, branch := range t.Branches {
			ref, err := s.Repository().Reference(TreeRef(t.Name, branch), true)
			if err != nil {
				missing = append(missing, t.Name+"/"+branch)
				continue
			}
			detail := fmt.Sprintf("nothing in the series names a base: head of %s/%s", t.Name, branch)
			if len(missing) > 0 {
				detail += fmt.Sprintf(" (%s not in the store)", strings.Join(missing, ", "))
			}
			return &Base{Commit: ref.Hash(), Tree: t.Name, Branch: branch, Reason: BaseFromDefault, Detail: detail}, nil
		}
	}
	if len(missing) == 0 {
		return nil, &NoBaseError{Reason: "no trees configured ([[builder.trees]])"}
	}
	return nil, &NoBaseError{Reason: fmt.Sprintf("none of the configured branches is in the store: %s (rdmabot tree fetch, or rdmabot tree import)", strings.Join(missing, ", "))}
}

// namedBase is the commit a series names as its base (hint: 7 to 40
// lower-case hex digits, abbreviated as b4 allows), when the store has
// exactly one commit by that name and a configured branch holds it; nil
// otherwise. Only a commit of a configured branch: the store also holds
// every applied series, and a base-commit naming another series' commit
// would test on code nobody merged.
func (s *Store) namedBase(ctx context.Context, hint string) *Base {
	if len(hint) < 7 || len(hint) > 40 || strings.Trim(hint, "0123456789abcdef") != "" {
		return nil
	}
	id := hint
	if len(hint) < 40 {
		// git names an abbreviation only when it is unique.
		out, err := RunGit(ctx, s.Dir, time.Minute, "rev-parse", "--verify", "--quiet", hint+"^{commit}")
		if err != nil {
			return nil
		}
		id = strings.TrimSpace(string(out))
	}
	c, err := s.Repository().CommitObject(plumbing.NewHash(id))
	if err != nil || !s.OnTrees(ctx, c.Hash.String()) {
		return nil
	}
	return &Base{Commit: c.Hash, Reason: BaseFromTrailer,
		Detail: fmt.Sprintf("base-commit %s named by the series", c.Hash)}
}

// NoBaseError says the store holds no base to test on: the operator's
// gap (trees not fetched or imported, none configured), never the series'
// fault. It is infrastructure: retried, and shown, never replied to.
type NoBaseError struct{ Reason string }

func (e *NoBaseError) Error() string { return "no base: " + e.Reason }
func (e *NoBaseError) Infra() bool   { return true }

// preImage is a file the series changes and the blob id prefix its
// first patch expects.
type preImage struct {
	path   string
	prefix string // abbreviated blob id; "" for a file the series creates
}

// preImages collects, for every path the series touches, the pre-image
// of the first patch that touches it: later patches see the series' own
// results. A file the series creates must be absent from the base.
func preImages(mails []*flow.Message) ([]preImage, error) {
	seen := map[string]bool{}
	var out []preImage
	for _, m := range mails {
		mi := parseMailInfo(m, false)
		if !strings.Contains(mi.patch, "diff --git ") {
			continue
		}
		files, _, err := gitdiff.Parse(strings.NewReader(mi.patch))
		if err != nil {
			continue // a malformed patch fails later, with its own error
		}
		for _, f := range files {
			name := f.OldName
			if f.IsNew {
				name = f.NewName
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			switch {
			case f.IsNew:
				out = append(out, preImage{path: name})
			case len(f.OldOIDPrefix) >= 7 && strings.Trim(f.OldOIDPrefix, "0") != "":
				out = append(out, preImage{path: name, prefix: f.OldOIDPrefix})
			}
		}
	}
	return out, nil
}

// baseFromBlobs walks each configured branch newest first, at most depth
// commits, for the first commit whose files all have the expected blobs,
// and returns the newest such commit across branches.
func (s *Store) baseFromBlobs(ctx context.Context, pre []preImage, trees []TreeConfig, depth int) (*Base, error) {
	lookup := newPathLookup(s)
	var best *Base
	var bestWhen int64
	checked := map[plumbing.Hash]bool{}
	for _, t := range trees {
		for _, branch := range t.Branches {
			ref, err := s.Repository().Reference(TreeRef(t.Name, branch), true)
			if err != nil {
				continue
			}
			c, err := s.Repository().CommitObject(ref.Hash())
			if err != nil {
				return nil, err
			}
			for n := 0; c != nil && n < depth; n++ {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				if checked[c.Hash] {
					break // another branch walked this history already
				}
				checked[c.Hash] = true
				ok, err := lookup.matches(c.TreeHash, pre)
				if err != nil {
					return nil, err
				}
				if ok {
					if when := c.Committer.When.Unix(); best == nil || when > bestWhen {
						best = &Base{Commit: c.Hash, Tree: t.Name, Branch: branch, Reason: BaseFromBlobs,
							Detail: fmt.Sprintf("the pre-image blobs of the %d changed file(s) match %s on %s/%s, %d commit(s) below its head",
								len(pre), c.Hash, t.Name, branch, n)}
						bestWhen = when
					}
					break
				}
				if len(c.ParentHashes) == 0 {
					break
				}
				// First parents: the branch's own line of history.
				if c, err = s.Repository().CommitObject(c.ParentHashes[0]); err != nil {
					return nil, err
				}
			}
		}
	}
	return best, nil
}

// pathLookup finds blob ids by path, remembering decoded trees: commits
// next to each other share almost all of them.
type pathLookup struct {
	s     *Store
	trees map[plumbing.Hash]*object.Tree
}

func newPathLookup(s *Store) *pathLookup {
	return &pathLookup{s: s, trees: map[plumbing.Hash]*object.Tree{}}
}

func (l *pathLookup) tree(id plumbing.Hash) (*object.Tree, error) {
	if t, ok := l.trees[id]; ok {
		return t, nil
	}
	t, err := object.GetTree(l.s.Repository().Storer, id)
	if err != nil {
		return nil, err
	}
	l.trees[id] = t
	return t, nil
}

// blob returns the blob id at p in tree root, or zero when absent.
func (l *pathLookup) blob(root plumbing.Hash, p string) (plumbing.Hash, error) {
	id := root
	parts := strings.Split(p, "/")
	for i, name := range parts {
		t, err := l.tree(id)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		var found *object.TreeEntry
		for j := range t.Entries {
			if t.Entries[j].Name == name {
				found = &t.Entries[j]
				break
			}
		}
		if found == nil {
			return plumbing.ZeroHash, nil
		}
		isDir := found.Mode == filemode.Dir
		if i == len(parts)-1 {
			if isDir {
				return plumbing.ZeroHash, nil
			}
			return found.Hash, nil
		}
		if !isDir {
			return plumbing.ZeroHash, nil
		}
		id = found.Hash
	}
	return plumbing.ZeroHash, nil
}

func (l *pathLookup) matches(root plumbing.Hash, pre []preImage) (bool, error) {
	for _, p := range pre {
		id, err := l.blob(root, p.path)
		if err != nil {
			return false, err
		}
		if p.prefix == "" {
			if !id.IsZero() {
				return false, nil
			}
			continue
		}
		if id.IsZero() || !strings.HasPrefix(id.String(), p.prefix) {
			return false, nil
		}
	}
	return true, nil
}
