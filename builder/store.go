package builder

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Store is the one bare repository that holds every kernel tree, so the
// history mainline, rdma and nfsd share is stored once and a base-commit
// is found by a single lookup. Its refs:
//
//	refs/trees/<tree>/<branch>   a fetched branch of a configured tree
//	refs/trees/<tree>/import     an imported tarball (rdmabot tree import)
//	refs/tags/<tree>/v<version>  the same imported commit, for humans
//	refs/rdmabot/<series>/v<N>   an applied series (one commit per patch)
//
// A Store may be used from several goroutines: a fetch or an import
// swaps in a freshly opened repository (go-git lists packs only when it
// opens one) while applies keep the one they started with.
type Store struct {
	// Dir is the repository's git directory.
	Dir string

	mu   sync.RWMutex
	repo *git.Repository
}

// Repository is the go-git repository, current as of the last fetch or
// import.
func (s *Store) Repository() *git.Repository {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.repo
}

// StorePath is where the store lives under the bot's data directory.
func StorePath(dataDir string) string {
	return filepath.Join(dataDir, "trees", "kernel.git")
}

// ImportBranch is the branch name an imported tarball gets.
const ImportBranch = "import"

// TreeRef names branch of tree in the store.
func TreeRef(tree, branch string) plumbing.ReferenceName {
	return plumbing.ReferenceName("refs/trees/" + tree + "/" + branch)
}

// SeriesRef names the applied version of a series. series is usually a
// Message-ID, which the sender chooses: anything but letters, digits and
// ".+-=_@" becomes "_", and a name so changed gets a hash of the original
// so two series never share a ref.
func SeriesRef(series string, version int) plumbing.ReferenceName {
	safe := []byte(series)
	changed := false
	for i, c := range safe {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".+-=_@", c) >= 0) {
			safe[i] = '_'
			changed = true
		}
	}
	name := string(safe)
	if len(name) > 100 {
		name, changed = name[:100], true
	}
	if checkRefComponent(name) != nil {
		changed = true
		name = "_" + strings.ReplaceAll(strings.TrimSuffix(name, ".lock"), "..", "__")
	}
	if changed {
		sum := sha1.Sum([]byte(series))
		name += "-" + hex.EncodeToString(sum[:6])
	}
	return plumbing.ReferenceName(fmt.Sprintf("refs/rdmabot/%s/v%d", name, version))
}

// checkRef accepts refs/... names whose every component is a valid ref
// component, so a ref never becomes a path outside the repository.
func checkRef(r plumbing.ReferenceName) error {
	rest, ok := strings.CutPrefix(string(r), "refs/")
	if !ok {
		return fmt.Errorf("ref %q is not under refs/", r)
	}
	for _, c := range strings.Split(rest, "/") {
		if err := checkRefComponent(c); err != nil {
			return fmt.Errorf("ref %q: %w", r, err)
		}
	}
	return nil
}

// OpenStore opens the bare repository at dir, creating it when missing.
func OpenStore(dir string) (*Store, error) {
	r, err := git.PlainOpen(dir)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		r, err = git.PlainInit(dir, true)
	}
	if err != nil {
		return nil, fmt.Errorf("tree store %s: %w", dir, err)
	}
	return &Store{Dir: dir, repo: r}, nil
}

// OpenRepo opens an existing repository, bare or not (Dir is then its
// .git directory): rdmabot apply and the tests work on any repository.
func OpenRepo(dir string) (*Store, error) {
	r, err := git.PlainOpen(dir)
	if err != nil {
		return nil, fmt.Errorf("repository %s: %w", dir, err)
	}
	gitDir := dir
	if fi, err := os.Stat(filepath.Join(dir, ".git")); err == nil && fi.IsDir() {
		gitDir = filepath.Join(dir, ".git")
	}
	return &Store{Dir: gitDir, repo: r}, nil
}

// Branch is one branch head of a tree in the store.
type Branch struct {
	Tree, Branch string
	Commit       plumbing.Hash
}

// Branches lists every refs/trees/ head, in ref order.
func (s *Store) Branches() ([]Branch, error) {
	it, err := s.Repository().Storer.IterReferences()
	if err != nil {
		return nil, err
	}
	var out []Branch
	err = it.ForEach(func(r *plumbing.Reference) error {
		name, ok := strings.CutPrefix(r.Name().String(), "refs/trees/")
		if !ok || r.Type() != plumbing.HashReference {
			return nil
		}
		tree, branch, ok := strings.Cut(name, "/")
		if !ok {
			return nil
		}
		out = append(out, Branch{Tree: tree, Branch: branch, Commit: r.Hash()})
		return nil
	})
	return out, err
}

// Resolve turns a revision (a ref, a tree/branch pair as "tree/branch",
// or a full or abbreviated commit id) into a commit.
func (s *Store) Resolve(rev string) (*object.Commit, error) {
	return resolveCommit(s.Repository(), rev)
}

func resolveCommit(r *git.Repository, rev string) (*object.Commit, error) {
	if tree, branch, ok := strings.Cut(rev, "/"); ok && !strings.HasPrefix(rev, "refs/") {
		if ref, err := r.Reference(TreeRef(tree, branch), true); err == nil {
			return r.CommitObject(ref.Hash())
		}
	}
	h, err := r.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fmt.Errorf("revision %q: %w", rev, err)
	}
	return r.CommitObject(*h)
}

// readBlob reads a whole blob.
func readBlob(st storer.EncodedObjectStorer, id plumbing.Hash) ([]byte, error) {
	o, err := st.EncodedObject(plumbing.BlobObject, id)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", id, err)
	}
	rd, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var b bytes.Buffer
	b.Grow(int(o.Size()) + bytes.MinRead)
	if _, err := b.ReadFrom(rd); err != nil {
		return nil, fmt.Errorf("blob %s: %w", id, err)
	}
	return b.Bytes(), nil
}
