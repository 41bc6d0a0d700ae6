package kbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Checkout is a directory kept equal to one git tree, without .git and
// without an index: Sync moves it to another tree by writing only what
// differs, so unchanged files keep their mtimes and make stays
// incremental. go-git's Worktree is not used: its status walk alone takes
// seconds on a kernel tree.
type Checkout struct {
	dir   string // the files
	state string // names the tree the files equal, or a sync in progress
}

// SyncStats says what a Sync did.
type SyncStats struct {
	From, To plumbing.Hash
	// Full is set when the files were compared one by one with the tree
	// (first use, or after an interrupted sync) instead of diffing trees.
	Full     bool
	Written  int // files and symlinks (re)written
	Removed  int // files, symlinks and directories removed
	Chmodded int // mode-only changes
	// Changed lists the paths written or removed by a tree diff; nil after
	// a full compare (then anything may have changed).
	Changed  []string
	Duration time.Duration
}

const syncingPrefix = "syncing "

// OpenCheckout uses dir/src as the checkout and dir/tree as its state.
func OpenCheckout(dir string) (*Checkout, error) {
	c := &Checkout{dir: filepath.Join(dir, "src"), state: filepath.Join(dir, "tree")}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, &InfraError{Op: "checkout", Err: err}
	}
	return c, nil
}

// Dir is the directory holding the files.
func (c *Checkout) Dir() string { return c.dir }

// Tree is the tree the files equal; false when unknown (never synced, or
// a sync was interrupted).
func (c *Checkout) Tree() (plumbing.Hash, bool) {
	b, err := os.ReadFile(c.state)
	if err != nil {
		return plumbing.ZeroHash, false
	}
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, syncingPrefix) || !plumbing.IsHash(s) {
		return plumbing.ZeroHash, false
	}
	return plumbing.NewHash(s), true
}

// Sync makes the checkout equal tree to. The state file says "syncing"
// while files change, so a crash mid-way is found on the next Sync and
// repaired by a full compare.
func (c *Checkout) Sync(ctx context.Context, objs storer.EncodedObjectStorer, to plumbing.Hash) (SyncStats, error) {
	start := time.Now()
	from, known := c.Tree()
	st := SyncStats{From: from, To: to, Full: !known}
	if known && from == to {
		st.Duration = time.Since(start)
		return st, nil
	}
	if _, err := object.GetTree(objs, to); err != nil {
		return st, fmt.Errorf("checkout: tree %s: %w", to, err)
	}
	if known {
		// The recorded tree may come from another object store (a slot
		// shared with another process, a store rebuilt since): without it
		// there is nothing to diff against, so compare every file instead.
		if _, err := object.GetTree(objs, from); err != nil {
			known = false
			st.Full = true
		}
	}
	if err := writeFileAtomic(c.state, []byte(syncingPrefix+from.String()+" "+to.String()+"\n")); err != nil {
		return st, &InfraError{Op: "checkout", Err: err}
	}
	s := &syncer{ctx: ctx, objs: objs, root: c.dir, st: &st}
	s.startWriters()
	var err error
	if known {
		err = s.diff("", from, to)
	} else {
		err = s.compare("", to)
	}
	if werr := s.waitWriters(); err == nil {
		err = werr
	}
	if err != nil {
		st.Duration = time.Since(start)
		return st, err
	}
	if err := writeFileAtomic(c.state, []byte(to.String()+"\n")); err != nil {
		return st, &InfraError{Op: "checkout", Err: err}
	}
	st.Duration = time.Since(start)
	return st, nil
}

// ChangedPaths lists the paths that differ between two trees, descending
// only into subtrees whose ids differ. Directories added or removed as a
// whole are listed once, by their own path.
func ChangedPaths(objs storer.EncodedObjectStorer, a, b plumbing.Hash) ([]string, error) {
	var out []string
	err := walkDiff(objs, "", a, b, func(p string, _, _ *object.TreeEntry) error {
		out = append(out, p)
		return nil
	})
	return out, err
}

// walkDiff calls fn for every entry that differs between trees a and b,
// recursing where both sides are directories. fn gets nil for a missing side.
func walkDiff(objs storer.EncodedObjectStorer, rel string, a, b plumbing.Hash, fn func(p string, ea, eb *object.TreeEntry) error) error {
	if a == b {
		return nil
	}
	ta, err := object.GetTree(objs, a)
	if err != nil {
		return fmt.Errorf("checkout: tree %s: %w", a, err)
	}
	tb, err := object.GetTree(objs, b)
	if err != nil {
		return fmt.Errorf("checkout: tree %s: %w", b, err)
	}
	old := make(map[string]*object.TreeEntry, len(ta.Entries))
	for i := range ta.Entries {
		old[ta.Entries[i].Name] = &ta.Entries[i]
	}
	for i := range tb.Entries {
		eb := &tb.Entries[i]
		if err := checkName(rel, eb.Name); err != nil {
			return err
		}
		p := path.Join(rel, eb.Name)
		ea := old[eb.Name]
		delete(old, eb.Name)
		switch {
		case ea == nil:
			err = fn(p, nil, eb)
		case ea.Hash == eb.Hash && ea.Mode == eb.Mode:
			continue
		case ea.Mode == filemode.Dir && eb.Mode == filemode.Dir:
			err = walkDiff(objs, p, ea.Hash, eb.Hash, fn)
		default:
			err = fn(p, ea, eb)
		}
		if err != nil {
			return err
		}
	}
	for _, ea := range ta.Entries {
		if old[ea.Name] != nil {
			if err := fn(path.Join(rel, ea.Name), old[ea.Name], nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkName refuses entry names that would leave the checkout or create
// a .git the kernel's scripts would consult.
func checkName(rel, name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || strings.EqualFold(name, ".git") {
		return fmt.Errorf("checkout: refusing tree entry %q in %q", name, rel)
	}
	return nil
}

type syncer struct {
	ctx   context.Context
	objs  storer.EncodedObjectStorer
	root  string
	st    *SyncStats
	steps int

	// Blobs are read here (go-git's store is not for concurrent use) and
	// written by a few goroutines: on a full checkout the file system's
	// open/write/close, not decompression, takes most of the time.
	writes  chan fileWrite
	wg      sync.WaitGroup
	errOnce sync.Once
	werr    error
}

type fileWrite struct {
	path string
	data []byte
	perm fs.FileMode
}

const fileWriters = 8

func (s *syncer) startWriters() {
	s.writes = make(chan fileWrite, 256)
	for range fileWriters {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for w := range s.writes {
				if err := writeNew(w); err != nil {
					s.errOnce.Do(func() { s.werr = &InfraError{Op: "checkout", Err: err} })
				}
			}
		}()
	}
}

// waitWriters ends the writers and returns their first error.
func (s *syncer) waitWriters() error {
	close(s.writes)
	s.wg.Wait()
	return s.werr
}

// writeNew replaces w.path by a new file. The old name is unlinked and the
// new file created with O_EXCL, so a symlink planted there is never
// followed.
func writeNew(w fileWrite) error {
	if err := os.Remove(w.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, w.perm)
	if err != nil {
		return err
	}
	_, err = f.Write(w.data)
	if err == nil {
		err = f.Chmod(w.perm) // the umask must not decide the mode
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *syncer) abs(rel string) string { return filepath.Join(s.root, filepath.FromSlash(rel)) }

// tick checks for cancellation now and then, not on every file.
func (s *syncer) tick() error {
	s.steps++
	if s.steps%256 == 0 {
		return s.ctx.Err()
	}
	return nil
}

// diff applies the difference between trees a and b, which the checkout
// is known to equal a.
func (s *syncer) diff(rel string, a, b plumbing.Hash) error {
	return walkDiff(s.objs, rel, a, b, func(p string, ea, eb *object.TreeEntry) error {
		if err := s.tick(); err != nil {
			return err
		}
		s.st.Changed = append(s.st.Changed, p)
		switch {
		case eb == nil:
			return s.remove(p)
		case ea == nil:
			return s.add(p, eb)
		case ea.Hash == eb.Hash && isFile(ea.Mode) && isFile(eb.Mode):
			s.st.Chmodded++
			return os.Chmod(s.abs(p), osPerm(eb.Mode))
		default:
			if ea.Mode == filemode.Dir || eb.Mode == filemode.Dir || ea.Mode == filemode.Symlink || eb.Mode == filemode.Symlink {
				if err := s.remove(p); err != nil {
					return err
				}
			}
			return s.add(p, eb)
		}
	})
}

func (s *syncer) remove(rel string) error {
	s.st.Removed++
	if err := os.RemoveAll(s.abs(rel)); err != nil {
		return &InfraError{Op: "checkout", Err: err}
	}
	return nil
}

// add writes entry e at rel, recursively for a directory, assuming
// nothing (or a file to replace) is there.
func (s *syncer) add(rel string, e *object.TreeEntry) error {
	if err := s.tick(); err != nil {
		return err
	}
	switch e.Mode {
	case filemode.Dir:
		if err := os.Mkdir(s.abs(rel), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return &InfraError{Op: "checkout", Err: err}
		}
		t, err := object.GetTree(s.objs, e.Hash)
		if err != nil {
			return fmt.Errorf("checkout: tree %s: %w", e.Hash, err)
		}
		for i := range t.Entries {
			if err := checkName(rel, t.Entries[i].Name); err != nil {
				return err
			}
			if err := s.add(path.Join(rel, t.Entries[i].Name), &t.Entries[i]); err != nil {
				return err
			}
		}
		return nil
	case filemode.Submodule:
		// A gitlink has no content here: an empty directory, as git leaves it.
		if err := os.Mkdir(s.abs(rel), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return &InfraError{Op: "checkout", Err: err}
		}
		return nil
	case filemode.Symlink:
		target, err := s.blob(e.Hash)
		if err != nil {
			return err
		}
		p := s.abs(rel)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return &InfraError{Op: "checkout", Err: err}
		}
		s.st.Written++
		if err := os.Symlink(string(target), p); err != nil {
			return &InfraError{Op: "checkout", Err: err}
		}
		return nil
	case filemode.Regular, filemode.Deprecated, filemode.Executable:
		return s.writeFile(rel, e)
	default:
		return fmt.Errorf("checkout: %s: unsupported mode %o", rel, uint32(e.Mode))
	}
}

func (s *syncer) blob(h plumbing.Hash) ([]byte, error) {
	b, err := object.GetBlob(s.objs, h)
	if err != nil {
		return nil, fmt.Errorf("checkout: blob %s: %w", h, err)
	}
	r, err := b.Reader()
	if err != nil {
		return nil, fmt.Errorf("checkout: blob %s: %w", h, err)
	}
	defer r.Close()
	return io.ReadAll(r)
}

// writeFile queues rel's new content for the writers.
func (s *syncer) writeFile(rel string, e *object.TreeEntry) error {
	data, err := s.blob(e.Hash)
	if err != nil {
		return err
	}
	s.st.Written++
	select {
	case s.writes <- fileWrite{path: s.abs(rel), data: data, perm: osPerm(e.Mode)}:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

// compare makes directory rel equal tree h, checking every file against
// its blob id: the repair after an interrupted sync, and the first
// checkout (where everything is missing and simply written).
func (s *syncer) compare(rel string, h plumbing.Hash) error {
	t, err := object.GetTree(s.objs, h)
	if err != nil {
		return fmt.Errorf("checkout: tree %s: %w", h, err)
	}
	want := make(map[string]bool, len(t.Entries))
	for _, e := range t.Entries {
		if err := checkName(rel, e.Name); err != nil {
			return err
		}
		want[e.Name] = true
	}
	ents, err := os.ReadDir(s.abs(rel))
	if err != nil {
		return &InfraError{Op: "checkout", Err: err}
	}
	for _, de := range ents {
		if !want[de.Name()] {
			if err := s.remove(path.Join(rel, de.Name())); err != nil {
				return err
			}
		}
	}
	for i := range t.Entries {
		e := &t.Entries[i]
		if err := s.tick(); err != nil {
			return err
		}
		p := path.Join(rel, e.Name)
		fi, err := os.Lstat(s.abs(p))
		if errors.Is(err, fs.ErrNotExist) {
			if err := s.add(p, e); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return &InfraError{Op: "checkout", Err: err}
		}
		ok, err := s.matches(p, fi, e)
		if err != nil {
			return err
		}
		switch {
		case ok && e.Mode == filemode.Dir:
			if err := s.compare(p, e.Hash); err != nil {
				return err
			}
		case ok:
		default:
			if err := s.remove(p); err != nil {
				return err
			}
			if err := s.add(p, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// matches says whether what is on disk at rel can stay for entry e
// (for a directory: whether it is a directory; its content is compared
// by the caller). A file whose content is right but mode is wrong is
// fixed here.
func (s *syncer) matches(rel string, fi fs.FileInfo, e *object.TreeEntry) (bool, error) {
	switch e.Mode {
	case filemode.Dir, filemode.Submodule:
		return fi.IsDir(), nil
	case filemode.Symlink:
		if fi.Mode()&fs.ModeSymlink == 0 {
			return false, nil
		}
		target, err := os.Readlink(s.abs(rel))
		if err != nil {
			return false, &InfraError{Op: "checkout", Err: err}
		}
		want, err := s.blob(e.Hash)
		if err != nil {
			return false, err
		}
		return bytes.Equal([]byte(target), want), nil
	default:
		if !fi.Mode().IsRegular() {
			return false, nil
		}
		f, err := os.Open(s.abs(rel))
		if err != nil {
			return false, &InfraError{Op: "checkout", Err: err}
		}
		defer f.Close()
		h := plumbing.NewHasher(plumbing.BlobObject, fi.Size())
		if _, err := io.Copy(h, f); err != nil {
			return false, &InfraError{Op: "checkout", Err: err}
		}
		if h.Sum() != e.Hash {
			return false, nil
		}
		if fi.Mode().Perm() != osPerm(e.Mode) {
			s.st.Chmodded++
			if err := os.Chmod(s.abs(rel), osPerm(e.Mode)); err != nil {
				return false, &InfraError{Op: "checkout", Err: err}
			}
		}
		return true, nil
	}
}

func isFile(m filemode.FileMode) bool {
	return m == filemode.Regular || m == filemode.Deprecated || m == filemode.Executable
}

func osPerm(m filemode.FileMode) fs.FileMode {
	if m == filemode.Executable {
		return 0o755
	}
	return 0o644
}
