package feed

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/klauspost/compress/zlib"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// packReader reads objects straight out of a repository's pack files,
// with go-git's index decoder and delta patcher. go-git's object layer is
// correct but, for an archive read once from end to end, slow: it hashes
// every object it caches with collision-detecting SHA-1 and decodes large
// blobs twice; this reads each object once and caches only delta bases.
// Objects outside the packs (loose, alternates) come from go-git.
type packReader struct {
	packs    []*pack
	fallback storer.EncodedObjectStorer
	bases    baseCache
	// buf holds the compressed bytes of the object being read, br reads
	// them: one pread of exactly the object's extent, not a buffer fill
	// per object (an archive's objects are small and many).
	buf []byte
	br  bytes.Reader
	// win is what buf holds: the bytes of pack winPack from winOff. A
	// public-inbox pack stores each message's tree right before its
	// blob, so reading a small object reads the next one along, and
	// the blob comes without a pread of its own.
	win     []byte
	winPack int
	winOff  int64
	zr      io.ReadCloser
	// deltas are scratch space for delta instructions, one per level
	// of the chain being resolved (depth is the current level).
	deltas [][]byte
	depth  int
}

type pack struct {
	f    *os.File
	size int64
	idx  *idxfile.MemoryIndex
	// ends are the objects' offsets in order, then the trailer's: an
	// object's compressed bytes end where the next object starts.
	ends []int64
}

// extent is where the object at off ends.
func (pk *pack) extent(off int64) int64 {
	i, found := slices.BinarySearch(pk.ends, off)
	if found {
		i++
	}
	if i >= len(pk.ends) {
		return pk.size
	}
	return pk.ends[i]
}

func openPackReader(gitDir string, fallback storer.EncodedObjectStorer) (*packReader, error) {
	pr := &packReader{fallback: fallback, bases: baseCache{max: 32 << 20, m: map[baseKey][]byte{}}}
	idxs, err := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-*.idx"))
	if err != nil {
		return nil, err
	}
	for _, ip := range idxs {
		pk, err := openPack(ip)
		if errors.Is(err, os.ErrNotExist) {
			continue // repacked meanwhile: go-git finds the objects
		}
		if err != nil {
			pr.close()
			return nil, err
		}
		pr.packs = append(pr.packs, pk)
	}
	return pr, nil
}

func openPack(idxPath string) (*pack, error) {
	b, err := os.ReadFile(idxPath)
	if err != nil {
		return nil, err
	}
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bytes.NewReader(b)).Decode(idx); err != nil {
		return nil, fmt.Errorf("%s: %w", idxPath, err)
	}
	f, err := os.Open(idxPath[:len(idxPath)-len(".idx")] + ".pack")
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	pk := &pack{f: f, size: fi.Size(), idx: idx}
	it, err := idx.Entries()
	if err != nil {
		f.Close()
		return nil, err
	}
	for {
		e, err := it.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", idxPath, err)
		}
		pk.ends = append(pk.ends, int64(e.Offset))
	}
	slices.Sort(pk.ends)
	// The pack ends in the SHA-1 of its content.
	pk.ends = append(pk.ends, max(0, pk.size-20))
	return pk, nil
}

func (pr *packReader) close() {
	for _, pk := range pr.packs {
		pk.f.Close()
	}
}

// read returns the object's type and content; the bytes are the caller's.
func (pr *packReader) read(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	for i, pk := range pr.packs {
		off, err := pk.idx.FindOffset(h)
		if err != nil {
			continue
		}
		t, b, cached, err := pr.readAt(i, off)
		if err != nil {
			return 0, nil, fmt.Errorf("object %s: %w", h, err)
		}
		if cached {
			b = bytes.Clone(b)
		}
		return t, b, nil
	}
	o, err := pr.fallback.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return 0, nil, fmt.Errorf("object %s: %w", h, err)
	}
	if o.Size() > maxFileRead || o.Size() < 0 {
		return 0, nil, fmt.Errorf("object %s: %d bytes, over the %d byte read cap", h, o.Size(), maxFileRead)
	}
	rc, err := o.Reader()
	if err != nil {
		return 0, nil, fmt.Errorf("object %s: %w", h, err)
	}
	defer rc.Close()
	b := make([]byte, 0, o.Size())
	if b, err = readAllInto(b, rc); err != nil {
		return 0, nil, fmt.Errorf("object %s: %w", h, err)
	}
	return o.Type(), b, nil
}

// readAt decodes the object at off in pack i, resolving deltas; cached
// says the bytes belong to the base cache.
func (pr *packReader) readAt(i int, off int64) (plumbing.ObjectType, []byte, bool, error) {
	key := baseKey{i, off}
	if b, ok := pr.bases.m[key]; ok {
		return pr.bases.typ[key], b, true, nil
	}
	buf, err := pr.window(i, off)
	if err != nil {
		return 0, nil, false, err
	}
	pr.br.Reset(buf)
	h, err := pr.header(off)
	if err != nil {
		return 0, nil, false, err
	}
	isDelta := h.typ == plumbing.OFSDeltaObject || h.typ == plumbing.REFDeltaObject
	data, err := pr.inflate(off, h.size, isDelta)
	if err != nil {
		return 0, nil, false, err
	}
	if !isDelta {
		return h.typ, data, false, nil
	}
	typ, out, err := pr.undelta(i, off, h, data)
	return typ, out, false, err
}

// window returns the compressed bytes of the object at off in pack i,
// from the last read's window when it holds them; a small object's read
// takes the next object along.
func (pr *packReader) window(i int, off int64) ([]byte, error) {
	pk := pr.packs[i]
	end := pk.extent(off)
	if off < 0 || end <= off || end > pk.size {
		return nil, fmt.Errorf("pack offset %d: outside the pack", off)
	}
	if n := end - off; n > maxFileRead+1<<16 {
		return nil, fmt.Errorf("pack offset %d: object of %d compressed bytes", off, n)
	}
	if i == pr.winPack && off >= pr.winOff && end <= pr.winOff+int64(len(pr.win)) {
		return pr.win[off-pr.winOff : end-pr.winOff], nil
	}
	readEnd := end
	if next := pk.extent(end); end-off <= smallObject && next-off <= readAhead && end < next {
		readEnd = next
	}
	if int64(cap(pr.buf)) < readEnd-off {
		pr.buf = make([]byte, readEnd-off)
	}
	pr.win, pr.winPack, pr.winOff = nil, 0, 0
	win := pr.buf[:readEnd-off]
	if _, err := pk.f.ReadAt(win, off); err != nil {
		return nil, fmt.Errorf("pack offset %d: %w", off, err)
	}
	pr.win, pr.winPack, pr.winOff = win, i, off
	return win[:end-off], nil
}

// objHeader is a pack entry's header: its type, its inflated size and,
// for a delta, where its base is.
type objHeader struct {
	typ      plumbing.ObjectType
	size     int64
	baseOff  int64
	baseHash plumbing.Hash
}

// header reads the entry header at the start of pr.br (the object at off).
func (pr *packReader) header(off int64) (objHeader, error) {
	var h objHeader
	c, err := pr.br.ReadByte()
	if err != nil {
		return h, err
	}
	h.typ = plumbing.ObjectType((c >> 4) & 7)
	h.size = int64(c & 0x0f)
	for shift := 4; c&0x80 != 0; shift += 7 {
		if c, err = pr.br.ReadByte(); err != nil {
			return h, err
		}
		h.size |= int64(c&0x7f) << shift
	}
	switch h.typ {
	case plumbing.OFSDeltaObject:
		if c, err = pr.br.ReadByte(); err != nil {
			return h, err
		}
		rel := int64(c & 0x7f)
		for c&0x80 != 0 {
			if c, err = pr.br.ReadByte(); err != nil {
				return h, err
			}
			rel = ((rel + 1) << 7) | int64(c&0x7f)
		}
		h.baseOff = off - rel
	case plumbing.REFDeltaObject:
		if _, err := io.ReadFull(&pr.br, h.baseHash[:]); err != nil {
			return h, err
		}
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
	default:
		return h, fmt.Errorf("pack offset %d: object type %d", off, h.typ)
	}
	if h.size > maxFileRead {
		return h, fmt.Errorf("pack offset %d: object of %d bytes", off, h.size)
	}
	return h, nil
}

// inflate reads size bytes of zlib data from pr.br. A delta's
// instructions go to the scratch of this delta level: they are used up
// by the patch, and the bases read meanwhile use the levels under it.
func (pr *packReader) inflate(off, size int64, isDelta bool) ([]byte, error) {
	var err error
	if pr.zr == nil {
		if pr.zr, err = zlib.NewReader(&pr.br); err != nil {
			return nil, fmt.Errorf("pack offset %d: inflate: %w", off, err)
		}
	} else if err := pr.zr.(zlib.Resetter).Reset(&pr.br, nil); err != nil {
		return nil, fmt.Errorf("pack offset %d: inflate: %w", off, err)
	}
	var data []byte
	if isDelta {
		for len(pr.deltas) <= pr.depth {
			pr.deltas = append(pr.deltas, nil)
		}
		if int64(cap(pr.deltas[pr.depth])) < size {
			pr.deltas[pr.depth] = make([]byte, size)
		}
		data = pr.deltas[pr.depth][:size]
	} else {
		data = make([]byte, size)
	}
	if _, err := io.ReadFull(pr.zr, data); err != nil {
		return nil, fmt.Errorf("pack offset %d: inflate: %w", off, err)
	}
	return data, nil
}

// undelta applies the delta at off in pack i to its base, read (and
// cached) first.
func (pr *packReader) undelta(i int, off int64, h objHeader, delta []byte) (plumbing.ObjectType, []byte, error) {
	if pr.depth >= maxDeltaDepth {
		return 0, nil, fmt.Errorf("pack offset %d: delta chain over %d long", off, maxDeltaDepth)
	}
	pr.depth++
	defer func() { pr.depth-- }()
	var base []byte
	var baseType plumbing.ObjectType
	var err error
	if h.typ == plumbing.OFSDeltaObject {
		baseType, base, _, err = pr.readAt(i, h.baseOff)
		if err == nil {
			pr.bases.put(baseKey{i, h.baseOff}, baseType, base)
		}
	} else {
		baseType, base, err = pr.read(h.baseHash)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("delta base of pack offset %d: %w", off, err)
	}
	out, err := packfile.PatchDelta(base, delta)
	if err != nil {
		return 0, nil, fmt.Errorf("pack offset %d: %w", off, err)
	}
	return baseType, out, nil
}

// A read of an object of up to smallObject compressed bytes (a tree, a
// commit) reads the next object too, when both fit in readAhead.
const (
	smallObject = 1 << 10
	readAhead   = 1 << 20
)

// maxDeltaDepth bounds a delta chain (git writes at most 50; deltas by
// hash could loop).
const maxDeltaDepth = 1000

type baseKey struct {
	pack int
	off  int64
}

// baseCache keeps recent delta bases, oldest evicted first, up to max
// bytes: consecutive archive messages delta against each other.
type baseCache struct {
	max, size int
	m         map[baseKey][]byte
	typ       map[baseKey]plumbing.ObjectType
	order     []baseKey
}

func (c *baseCache) put(k baseKey, t plumbing.ObjectType, b []byte) {
	if _, ok := c.m[k]; ok || len(b) > c.max {
		return
	}
	if c.typ == nil {
		c.typ = map[baseKey]plumbing.ObjectType{}
	}
	for c.size+len(b) > c.max && len(c.order) > 0 {
		old := c.order[0]
		c.order = c.order[1:]
		c.size -= len(c.m[old])
		delete(c.m, old)
		delete(c.typ, old)
	}
	c.m[k], c.typ[k] = b, t
	c.order = append(c.order, k)
	c.size += len(b)
}

// rawCommit is what the archive reader needs of a commit.
type rawCommit struct {
	tree      plumbing.Hash
	parent    plumbing.Hash // first parent; zero for a root
	committed time.Time
}

// parseRawCommit parses a commit; zones holds the time zones made so
// far, shared by the commits with the same offset (nil: a zone each).
func parseRawCommit(b []byte, zones map[int]*time.Location) (rawCommit, error) {
	var c rawCommit
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) == 0 {
			break // the message follows
		}
		k, v, _ := bytes.Cut(line, []byte(" "))
		switch string(k) {
		case "tree":
			c.tree = plumbing.NewHash(string(v))
		case "parent":
			if c.parent.IsZero() {
				c.parent = plumbing.NewHash(string(v))
			}
		case "committer":
			// Name <email> 1704186000 +0100
			if i := bytes.LastIndexByte(v, '>'); i >= 0 {
				f := bytes.Fields(v[i+1:])
				if len(f) == 2 {
					sec, err := strconv.ParseInt(string(f[0]), 10, 64)
					tz, err2 := strconv.Atoi(string(f[1]))
					if err == nil && err2 == nil {
						off := (tz/100*60 + tz%100) * 60
						loc := zones[off]
						if loc == nil {
							loc = time.FixedZone("", off)
							if zones != nil {
								zones[off] = loc
							}
						}
						c.committed = time.Unix(sec, 0).In(loc)
					}
				}
			}
		}
	}
	if c.tree.IsZero() {
		return c, errors.New("commit without a tree")
	}
	return c, nil
}

// treeEntry finds the first regular file named m or d in a raw tree.
func treeEntry(b []byte) (entry, bool) {
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		nul := bytes.IndexByte(b, 0)
		if sp < 0 || nul < sp || nul+21 > len(b) {
			return entry{}, false
		}
		mode, name := string(b[:sp]), string(b[sp+1:nul])
		var h plumbing.Hash
		copy(h[:], b[nul+1:nul+21])
		b = b[nul+21:]
		if (name == "m" || name == "d") && (mode == "100644" || mode == "100755") {
			return entry{name, h}, true
		}
	}
	return entry{}, false
}
