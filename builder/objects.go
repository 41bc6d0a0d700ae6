package builder

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// pendingObjects holds the objects a series makes until every patch has
// applied; reads fall through to the repository. It is the
// EncodedObjectStorer the edit tree reads from, so a tree or blob made by
// patch 1 is visible to patch 2.
type pendingObjects struct {
	storer.EncodedObjectStorer
	objs  map[plumbing.Hash]pendingObject
	order []plumbing.Hash
}

type pendingObject struct {
	typ  plumbing.ObjectType
	data []byte
}

func newPendingObjects(st storer.EncodedObjectStorer) *pendingObjects {
	return &pendingObjects{EncodedObjectStorer: st, objs: map[plumbing.Hash]pendingObject{}}
}

// add keeps an object and returns its id.
func (p *pendingObjects) add(t plumbing.ObjectType, data []byte) plumbing.Hash {
	id := objectHash(t, data)
	if _, ok := p.objs[id]; !ok {
		p.objs[id] = pendingObject{t, data}
		p.order = append(p.order, id)
	}
	return id
}

// EncodedObject serves pending objects first.
func (p *pendingObjects) EncodedObject(t plumbing.ObjectType, id plumbing.Hash) (plumbing.EncodedObject, error) {
	if o, ok := p.objs[id]; ok {
		if t != plumbing.AnyObject && t != o.typ {
			return nil, plumbing.ErrObjectNotFound
		}
		mo := &plumbing.MemoryObject{}
		mo.SetType(o.typ)
		mo.Write(o.data)
		return mo, nil
	}
	return p.EncodedObjectStorer.EncodedObject(t, id)
}

func (p *pendingObjects) readBlob(id plumbing.Hash) ([]byte, error) {
	if o, ok := p.objs[id]; ok && o.typ == plumbing.BlobObject {
		return o.data, nil
	}
	return readBlob(p.EncodedObjectStorer, id)
}

// flush writes every pending object as a loose object at zlib level 1
// (git's own level; go-git's default level costs several times more for
// the same bytes), skipping those already loose. A series makes tens of
// objects, too few for a pack of its own to pay off; git gc packs them.
func (p *pendingObjects) flush(ctx context.Context, gitDir string) error {
	objDir := filepath.Join(gitDir, "objects")
	var buf bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&buf, zlib.BestSpeed)
	for _, id := range p.order {
		if err := ctx.Err(); err != nil {
			return err
		}
		hex := id.String()
		dir := filepath.Join(objDir, hex[:2])
		final := filepath.Join(dir, hex[2:])
		if _, err := os.Stat(final); err == nil {
			continue
		}
		o := p.objs[id]
		buf.Reset()
		zw.Reset(&buf)
		zw.Write([]byte(o.typ.String() + " " + strconv.Itoa(len(o.data)) + "\x00"))
		zw.Write(o.data)
		if err := zw.Close(); err != nil {
			return err
		}
		if err := writeLoose(dir, final, buf.Bytes()); err != nil {
			return fmt.Errorf("write object %s: %w", hex, err)
		}
	}
	return nil
}

func writeLoose(dir, final string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(f.Name(), 0o444)); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), final); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
