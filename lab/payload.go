package lab

import (
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/ulikunitz/xz/lzma"
)

// payloadFormat names the compression of a bzImage's payload by the
// magic its compressor writes: each one a kernel's config may choose
// (CONFIG_KERNEL_*, arch/x86/boot/compressed/Makefile). All but gzip
// have the unpacked size appended as 4 bytes (size_append), which is no
// part of the stream.
func payloadFormat(p []byte) (name string, sized bool) {
	for _, f := range []struct{ name, magic string }{
		{"gzip", "\x1f\x8b"},
		{"bzip2", "BZh"},
		{"lzma", "\x5d\x00\x00"}, // lzma -9's properties: lc=3 lp=0 pb=2
		{"xz", "\xfd7zXZ\x00"},
		{"lzo", "\x89LZO\x00\r\n\x1a\n"},
		{"lz4", "\x02\x21\x4c\x18"}, // lz4 -l: the legacy frame
		{"zstd", "\x28\xb5\x2f\xfd"},
	} {
		if strings.HasPrefix(string(p[:min(len(p), 16)]), f.magic) {
			return f.name, f.name != "gzip"
		}
	}
	return "", false
}

// unpackPayload is what a bzImage's payload unpacks to, at most limit
// bytes; a stream cut short gives what it holds with
// io.ErrUnexpectedEOF.
func unpackPayload(p []byte, limit int) ([]byte, error) {
	name, sized := payloadFormat(p)
	if sized {
		if len(p) < 4 {
			return nil, fmt.Errorf("%s payload of %d bytes", name, len(p))
		}
		p = p[:len(p)-4]
	}
	var r io.Reader
	switch name {
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(p))
		if err != nil {
			return nil, err
		}
		zr.Multistream(false)
		r = zr
	case "bzip2":
		r = bzip2.NewReader(bytes.NewReader(p))
	case "lzma":
		if len(p) < lzma.HeaderLen {
			return nil, io.ErrUnexpectedEOF
		}
		// The dictionary is allocated as the header says: no larger
		// than what may be unpacked.
		lr, err := lzma.ReaderConfig{DictCap: dictCap(int64(binary.LittleEndian.Uint32(p[1:])), limit)}.NewReader(bytes.NewReader(p))
		if err != nil {
			return nil, fmt.Errorf("lzma: %w", err)
		}
		r = lr
	case "xz":
		return unpackXZ(p, limit)
	case "lz4":
		r = lz4.NewReader(bytes.NewReader(p))
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(p), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(uint64(limit)), zstd.WithDecoderMaxWindow(uint64(max(limit, zstd.MinWindowSize))))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		r = zr
	case "lzo":
		return nil, errors.New("payload is lzo, which the host does not unpack (configure another CONFIG_KERNEL_ compression)")
	default:
		return nil, fmt.Errorf("payload starts % x: no compression a kernel's config may choose", p[:min(len(p), 6)])
	}
	return readAtMost(r, limit)
}

// dictCap is an LZ dictionary of size bounded by max, and no smaller
// than the decoder allows: a match cannot reach further back than
// what was unpacked.
func dictCap(size int64, limit int) int {
	return int(min(max(size, lzma.MinDictCap), int64(max(limit, lzma.MinDictCap))))
}

// unpackXZ is the data of an xz stream as scripts/xz_wrap.sh makes it
// for a kernel: blocks of LZMA2, after x86's branch filter (BCJ). Each
// block is unpacked with its filters; the index and checks are not
// read (the build id note is what the host needs, and elfnote bounds
// what it reads of it).
func unpackXZ(p []byte, limit int) ([]byte, error) {
	if len(p) < 12 {
		return nil, errors.New("xz: stream header cut short")
	}
	checkLen := [16]int{0, 4, 4, 4, 8, 8, 8, 16, 16, 16, 32, 32, 32, 64, 64, 64}[p[7]&0x0f]
	var out []byte
	for pos := 12; ; {
		if pos >= len(p) {
			return out, io.ErrUnexpectedEOF
		}
		if p[pos] == 0 { // the index: no more blocks
			return out, nil
		}
		n := (int(p[pos]) + 1) * 4
		if pos+n > len(p) {
			return out, io.ErrUnexpectedEOF
		}
		bcj, props, err := xzBlockHeader(p[pos : pos+n])
		if err != nil {
			return out, err
		}
		pos += n
		rd := bytes.NewReader(p[pos:])
		lr, err := lzma.Reader2Config{DictCap: dictCap(lzma2DictSize(props), limit)}.NewReader2(rd)
		if err != nil {
			return out, fmt.Errorf("xz: %w", err)
		}
		block, err := readAtMost(lr, limit-len(out))
		if errors.Is(err, errTooLarge) {
			return nil, err
		}
		if bcj {
			unBCJx86(block)
		}
		if out == nil {
			out = block
		} else {
			out = append(out, block...)
		}
		if err != nil {
			return out, err
		}
		used := len(p) - pos - rd.Len()
		pos += used + (4-used%4)%4 + checkLen
	}
}

// xzBlockHeader reads an xz block header's filters: x86's BCJ (with no
// start offset) and LZMA2, whose one property byte it returns.
func xzBlockHeader(h []byte) (bcj bool, props byte, err error) {
	if binary.LittleEndian.Uint32(h[len(h)-4:]) != crc32.ChecksumIEEE(h[:len(h)-4]) {
		return false, 0, errors.New("xz: block header checksum")
	}
	flags, rest := h[1], h[2:len(h)-4]
	next := func() uint64 {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			rest = nil
			err = errors.New("xz: block header cut short")
			return 0
		}
		rest = rest[n:]
		return v
	}
	for _, present := range []byte{0x40, 0x80} { // compressed and unpacked size
		if flags&present != 0 {
			next()
		}
	}
	for range int(flags&3) + 1 {
		id, size := next(), next()
		if err != nil || size > uint64(len(rest)) {
			return false, 0, errors.New("xz: block header cut short")
		}
		switch {
		case id == 0x04 && size == 0:
			bcj = true
		case id == 0x21 && size == 1:
			props = rest[0]
		default:
			return false, 0, fmt.Errorf("xz: filter %#x (%d bytes of properties) is not one the kernel's xz_wrap.sh uses for x86", id, size)
		}
		rest = rest[size:]
	}
	return bcj, props, err
}

// lzma2DictSize is the dictionary size an LZMA2 filter's property byte
// says (the xz file format, 5.3.1).
func lzma2DictSize(props byte) int64 {
	bits := int64(props & 0x3f)
	if bits >= 40 {
		return 1<<32 - 1
	}
	return (2 | bits&1) << (bits/2 + 11)
}

// unBCJx86 undoes xz's x86 branch filter in place, on a block that
// starts at offset 0 (liblzma's simple/x86.c, decoding): the filter
// made each CALL's and JMP's relative target absolute, so that calls to
// one function compress alike.
func unBCJx86(buf []byte) {
	allowed := [8]bool{true, true, true, false, true, false, false, false}
	bitNumber := [8]uint32{0, 1, 2, 2, 3, 3, 3, 3}
	msByte := func(b byte) bool { return b == 0 || b == 0xff }
	var prevMask uint32
	prevPos := ^uint32(4) // -5: nothing before the block
	for i := 0; i+5 <= len(buf); {
		if buf[i] != 0xe8 && buf[i] != 0xe9 {
			i++
			continue
		}
		offset := uint32(i) - prevPos
		prevPos = uint32(i)
		if offset > 5 {
			prevMask = 0
		} else {
			for range offset {
				prevMask = (prevMask & 0x77) << 1
			}
		}
		b := buf[i+4]
		if !msByte(b) || !allowed[(prevMask>>1)&7] || prevMask>>1 >= 0x10 {
			i++
			prevMask |= 1
			if msByte(b) {
				prevMask |= 0x10
			}
			continue
		}
		src := binary.LittleEndian.Uint32(buf[i+1:])
		var dest uint32
		for {
			dest = src - uint32(i+5)
			if prevMask == 0 {
				break
			}
			n := bitNumber[prevMask>>1]
			if !msByte(byte(dest >> (24 - n*8))) {
				break
			}
			src = dest ^ (1<<(32-n*8) - 1)
		}
		binary.LittleEndian.PutUint32(buf[i+1:], dest&0x00ffffff|(0-(dest>>24&1))<<24)
		i += 5
		prevMask = 0
	}
}
