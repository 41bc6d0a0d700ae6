package builder

import (
	"bytes"
	"sort"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// encodeTree serialises entries as a git tree object, sorting them the
// way git does (a directory sorts as if its name ended in "/"), since git
// and go-git reject trees in any other order.
func encodeTree(entries []object.TreeEntry) []byte {
	sort.Sort(object.TreeEntrySorter(entries))
	var b bytes.Buffer
	b.Grow(len(entries) * 48)
	for _, e := range entries {
		b.WriteString(strconv.FormatUint(uint64(e.Mode), 8))
		b.WriteByte(' ')
		b.WriteString(e.Name)
		b.WriteByte(0)
		b.Write(e.Hash[:])
	}
	return b.Bytes()
}

// gitFileMode maps a Unix mode to the three file modes git records:
// executable when the owner may execute, as git does.
func gitFileMode(unixMode int64, symlink bool) filemode.FileMode {
	switch {
	case symlink:
		return filemode.Symlink
	case unixMode&0o100 != 0:
		return filemode.Executable
	default:
		return filemode.Regular
	}
}

// dirNode is a directory being assembled into tree objects.
type dirNode struct {
	files map[string]object.TreeEntry
	dirs  map[string]*dirNode
}

func newDirNode() *dirNode {
	return &dirNode{files: map[string]object.TreeEntry{}, dirs: map[string]*dirNode{}}
}

// writeTrees writes n and its subdirectories bottom-up with add and
// returns n's id. Empty directories vanish, as in git.
func (n *dirNode) writeTrees(add func(plumbing.ObjectType, []byte) (plumbing.Hash, error)) (plumbing.Hash, bool, error) {
	entries := make([]object.TreeEntry, 0, len(n.files)+len(n.dirs))
	for _, e := range n.files {
		entries = append(entries, e)
	}
	for name, d := range n.dirs {
		id, ok, err := d.writeTrees(add)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if ok {
			entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: id})
		}
	}
	if len(entries) == 0 {
		return plumbing.ZeroHash, false, nil
	}
	id, err := add(plumbing.TreeObject, encodeTree(entries))
	return id, true, err
}
