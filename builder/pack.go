package builder

import (
	"bufio"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
)

// packWriter writes objects into one new packfile (undeltified, zlib level
// 1 as git's own loose objects) and its index, then moves both into the
// repository's objects/pack in one step, so a failure leaves nothing
// behind. It exists because go-git writes each object as a loose file at
// the default zlib level, which dominates the time of an import or apply.
type packWriter struct {
	objectsDir string
	f          *os.File
	buf        *bufio.Writer
	off        int64
	idx        idxfile.Writer
	seen       map[plumbing.Hash]bool
	count      uint32
	zw         *zlib.Writer
	scratch    countingCRC
}

// countingCRC computes the CRC-32 git stores per packed object.
type countingCRC struct {
	w   io.Writer
	crc hash.Hash32
	n   int64
}

func (c *countingCRC) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc.Write(p[:n])
	c.n += int64(n)
	return n, err
}

const packHeaderSize = 12

// newPackWriter starts a pack in a temporary file under objectsDir/pack.
func newPackWriter(objectsDir string) (*packWriter, error) {
	dir := filepath.Join(objectsDir, "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "tmp_pack_")
	if err != nil {
		return nil, err
	}
	w := &packWriter{
		objectsDir: objectsDir,
		f:          f,
		buf:        bufio.NewWriterSize(f, 1<<20),
		off:        packHeaderSize,
		seen:       map[plumbing.Hash]bool{},
	}
	// The header's object count is patched in Finish.
	if _, err := w.buf.Write(make([]byte, packHeaderSize)); err != nil {
		w.Abort()
		return nil, err
	}
	w.scratch = countingCRC{w: w.buf, crc: crc32.NewIEEE()}
	w.zw, _ = zlib.NewWriterLevel(&w.scratch, zlib.BestSpeed)
	return w, nil
}

// objectHash is git's object id: SHA-1 of "<type> <size>\0<content>".
func objectHash(t plumbing.ObjectType, content []byte) plumbing.Hash {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", t, len(content))
	h.Write(content)
	var id plumbing.Hash
	h.Sum(id[:0])
	return id
}

// Add compresses content into the pack and returns its id. Adding the
// same object twice writes it once.
func (w *packWriter) Add(t plumbing.ObjectType, content []byte) (plumbing.Hash, error) {
	id := objectHash(t, content)
	return id, w.AddHashed(id, t, content)
}

// AddHashed is Add for a caller that computed id already.
func (w *packWriter) AddHashed(id plumbing.Hash, t plumbing.ObjectType, content []byte) error {
	return w.add(id, t, int64(len(content)), func() error {
		w.zw.Reset(&w.scratch)
		if _, err := w.zw.Write(content); err != nil {
			return err
		}
		return w.zw.Close()
	})
}

// AddCompressed stores an object whose zlib stream was made elsewhere (by
// a parallel worker); the stream must be a complete zlib stream of content.
func (w *packWriter) AddCompressed(id plumbing.Hash, t plumbing.ObjectType, size int64, zdata []byte) error {
	return w.add(id, t, size, func() error {
		_, err := w.scratch.Write(zdata)
		return err
	})
}

// add packs one object: its header, then the zlib stream body writes to
// w.scratch, indexed at its offset. An object already packed is not
// written again.
func (w *packWriter) add(id plumbing.Hash, t plumbing.ObjectType, size int64, body func() error) error {
	if w.seen[id] {
		return nil
	}
	w.seen[id] = true
	w.scratch.crc.Reset()
	w.scratch.n = 0
	var hdr [16]byte
	n := packObjectHeader(hdr[:], t, size)
	if _, err := w.scratch.Write(hdr[:n]); err != nil {
		return err
	}
	if err := body(); err != nil {
		return err
	}
	w.idx.Add(id, uint64(w.off), w.scratch.crc.Sum32())
	w.off += w.scratch.n
	w.count++
	return nil
}

// packObjectHeader encodes type and size as the pack format wants: 3 bits
// of type and 4 bits of size in the first byte, then 7 bits per byte.
func packObjectHeader(b []byte, t plumbing.ObjectType, size int64) int {
	c := byte(t)<<4 | byte(size&0x0f)
	size >>= 4
	n := 0
	for size != 0 {
		b[n] = c | 0x80
		n++
		c = byte(size & 0x7f)
		size >>= 7
	}
	b[n] = c
	return n + 1
}

// Abort removes the temporary pack.
func (w *packWriter) Abort() {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.f.Name())
		w.f = nil
	}
}

// Finish writes the header and trailer, the index, and renames both into
// place. With no objects added it writes nothing.
func (w *packWriter) Finish() error {
	defer w.Abort()
	if w.count == 0 {
		return nil
	}
	if err := w.buf.Flush(); err != nil {
		return err
	}
	var hdr [packHeaderSize]byte
	copy(hdr[:], "PACK")
	binary.BigEndian.PutUint32(hdr[4:], 2)
	binary.BigEndian.PutUint32(hdr[8:], w.count)
	if _, err := w.f.WriteAt(hdr[:], 0); err != nil {
		return err
	}
	// The trailer is a SHA-1 of everything before it, header included,
	// so the file is read once more (sequential, from the page cache).
	if _, err := w.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h := sha1.New()
	if _, err := io.Copy(h, bufio.NewReaderSize(w.f, 1<<20)); err != nil {
		return err
	}
	var sum plumbing.Hash
	h.Sum(sum[:0])
	if _, err := w.f.Write(sum[:]); err != nil {
		return err
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	if err := w.idx.OnFooter(sum); err != nil {
		return err
	}
	mi, err := w.idx.Index()
	if err != nil {
		return err
	}
	dir := filepath.Join(w.objectsDir, "pack")
	idxTmp, err := os.CreateTemp(dir, "tmp_idx_")
	if err != nil {
		return err
	}
	defer os.Remove(idxTmp.Name())
	bw := bufio.NewWriter(idxTmp)
	if _, err := idxfile.NewEncoder(bw).Encode(mi); err != nil {
		idxTmp.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		idxTmp.Close()
		return err
	}
	if err := idxTmp.Close(); err != nil {
		return err
	}
	// Packs are immutable: git makes them read-only.
	if err := os.Chmod(w.f.Name(), 0o444); err != nil {
		return err
	}
	if err := os.Chmod(idxTmp.Name(), 0o444); err != nil {
		return err
	}
	base := filepath.Join(dir, "pack-"+sum.String())
	// The pack goes first: git ignores a pack without its index, never an
	// index without its pack.
	if err := os.Rename(w.f.Name(), base+".pack"); err != nil {
		return err
	}
	return os.Rename(idxTmp.Name(), base+".idx")
}
