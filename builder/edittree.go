package builder

import (
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// editTree is a git tree being edited in memory: directories are read
// from the store only when a path goes through them, and only the
// directories on changed paths are encoded again, so a patch touching
// three files in an 86,000 file tree reads and writes a few dozen trees.
type editTree struct {
	st   storer.EncodedObjectStorer
	root *editDir
}

type editDir struct {
	id      plumbing.Hash // the stored tree, valid while !dirty
	loaded  bool
	dirty   bool
	entries map[string]*editEntry
}

type editEntry struct {
	mode filemode.FileMode
	id   plumbing.Hash
	dir  *editDir // set once a directory entry is opened
}

func newEditTree(st storer.EncodedObjectStorer, root plumbing.Hash) *editTree {
	return &editTree{st: st, root: &editDir{id: root}}
}

func (t *editTree) load(d *editDir) error {
	if d.loaded {
		return nil
	}
	d.entries = map[string]*editEntry{}
	d.loaded = true
	if d.id.IsZero() {
		return nil
	}
	o, err := t.st.EncodedObject(plumbing.TreeObject, d.id)
	if err != nil {
		return fmt.Errorf("tree %s: %w", d.id, err)
	}
	var tree object.Tree
	if err := tree.Decode(o); err != nil {
		return fmt.Errorf("tree %s: %w", d.id, err)
	}
	for _, e := range tree.Entries {
		d.entries[e.Name] = &editEntry{mode: e.Mode, id: e.Hash}
	}
	return nil
}

// walk returns the directory holding p's last component, creating
// directories on the way when create is set. A file where a directory is
// needed is an error; a missing directory without create is (nil, nil).
func (t *editTree) walk(p string, create bool) (*editDir, string, error) {
	d := t.root
	parts := strings.Split(p, "/")
	for i, name := range parts[:len(parts)-1] {
		if err := t.load(d); err != nil {
			return nil, "", err
		}
		e := d.entries[name]
		switch {
		case e == nil && !create:
			return nil, "", nil
		case e == nil:
			e = &editEntry{mode: filemode.Dir, dir: &editDir{loaded: true, dirty: true, entries: map[string]*editEntry{}}}
			d.entries[name] = e
		case e.mode != filemode.Dir:
			return nil, "", fmt.Errorf("%s is not a directory", strings.Join(parts[:i+1], "/"))
		}
		if e.dir == nil {
			e.dir = &editDir{id: e.id}
		}
		d = e.dir
	}
	if err := t.load(d); err != nil {
		return nil, "", err
	}
	return d, parts[len(parts)-1], nil
}

// get returns the file at p, or ok=false when there is none. A directory
// at p is an error: patches name files.
func (t *editTree) get(p string) (mode filemode.FileMode, id plumbing.Hash, ok bool, err error) {
	d, name, err := t.walk(p, false)
	if err != nil || d == nil {
		return 0, plumbing.ZeroHash, false, err
	}
	e := d.entries[name]
	if e == nil {
		return 0, plumbing.ZeroHash, false, nil
	}
	if e.mode == filemode.Dir {
		return 0, plumbing.ZeroHash, false, fmt.Errorf("%s is a directory", p)
	}
	return e.mode, e.id, true, nil
}

// put stores a file at p, replacing a file there.
func (t *editTree) put(p string, mode filemode.FileMode, id plumbing.Hash) error {
	d, name, err := t.walk(p, true)
	if err != nil {
		return err
	}
	if e := d.entries[name]; e != nil && e.mode == filemode.Dir {
		return fmt.Errorf("%s is a directory", p)
	}
	d.entries[name] = &editEntry{mode: mode, id: id}
	t.markDirty(p)
	return nil
}

// remove deletes the file at p; directories left empty vanish with it
// when the trees are written, as in git.
func (t *editTree) remove(p string) error {
	d, name, err := t.walk(p, false)
	if err != nil {
		return err
	}
	if d == nil || d.entries[name] == nil {
		return fmt.Errorf("%s does not exist", p)
	}
	delete(d.entries, name)
	t.markDirty(p)
	return nil
}

// markDirty flags every directory on p's path for re-encoding.
func (t *editTree) markDirty(p string) {
	d := t.root
	d.dirty = true
	parts := strings.Split(p, "/")
	for _, name := range parts[:len(parts)-1] {
		e := d.entries[name]
		if e == nil || e.dir == nil {
			return
		}
		d = e.dir
		d.dirty = true
	}
}

// write encodes the dirty directories bottom-up with add and returns the
// root tree id.
func (t *editTree) write(add func(plumbing.ObjectType, []byte) plumbing.Hash) plumbing.Hash {
	id, _ := t.writeDir(t.root, add)
	return id
}

func (t *editTree) writeDir(d *editDir, add func(plumbing.ObjectType, []byte) plumbing.Hash) (plumbing.Hash, bool) {
	if !d.dirty {
		return d.id, !d.id.IsZero() || len(d.entries) > 0
	}
	entries := make([]object.TreeEntry, 0, len(d.entries))
	for name, e := range d.entries {
		if e.dir != nil {
			id, nonEmpty := t.writeDir(e.dir, add)
			if !nonEmpty {
				delete(d.entries, name)
				continue
			}
			e.id = id
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: e.mode, Hash: e.id})
	}
	d.dirty = false
	if len(entries) == 0 {
		d.id = plumbing.ZeroHash
		return d.id, false
	}
	d.id = add(plumbing.TreeObject, encodeTree(entries))
	return d.id, true
}
