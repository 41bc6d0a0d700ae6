// Package elfnote reads the GNU build id of an ELF file: the kernel
// store's vmlinux and the vmlinux inside a bzImage. Both were built from
// a posted series, so the reader allocates within bounds whatever the
// file claims. It is the one reader the builder and the lab share.
package elfnote

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// Bounds of BuildID.
const (
	maxNote     = 1 << 20 // one note section
	maxNotes    = 4 << 20 // all note sections read
	maxSections = 1 << 16
)

// BuildID finds the GNU build id (hex) in the note sections of the ELF
// file r of size bytes. It allocates at most maxNotes bytes whatever the
// file claims: the section table is read entry by entry, and only note
// sections of at most maxNote bytes that lie inside the file.
func BuildID(r io.ReaderAt, size int64) (string, error) {
	var ident [elf.EI_NIDENT]byte
	if _, err := r.ReadAt(ident[:], 0); err != nil || string(ident[:4]) != elf.ELFMAG {
		return "", errors.New("not an ELF file")
	}
	var bo binary.ByteOrder
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		bo = binary.LittleEndian
	case elf.ELFDATA2MSB:
		bo = binary.BigEndian
	default:
		return "", errors.New("bad ELF byte order")
	}
	// Offsets in the file header and a section header, by class.
	var hdr [64]byte
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return "", errors.New("short ELF header")
	}
	var shoff uint64
	var shentsize, shnum uint64
	var want uint64 // the section header bytes read
	word := func(b []byte, n int) uint64 {
		if n == 8 {
			return bo.Uint64(b)
		}
		return uint64(bo.Uint32(b))
	}
	var offAt, sizeAt, w int
	switch elf.Class(ident[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		shoff, shentsize, shnum = bo.Uint64(hdr[0x28:]), uint64(bo.Uint16(hdr[0x3a:])), uint64(bo.Uint16(hdr[0x3c:]))
		want, offAt, sizeAt, w = 0x28, 0x18, 0x20, 8
	case elf.ELFCLASS32:
		shoff, shentsize, shnum = uint64(bo.Uint32(hdr[0x20:])), uint64(bo.Uint16(hdr[0x2e:])), uint64(bo.Uint16(hdr[0x30:]))
		want, offAt, sizeAt, w = 0x18, 0x10, 0x14, 4
	default:
		return "", errors.New("bad ELF class")
	}
	if shoff == 0 || shentsize < want || shentsize > 1024 {
		return "", errors.New("no usable section table")
	}
	sh := make([]byte, want)
	readSection := func(i uint64) (typ uint32, off, sz uint64, err error) {
		at := shoff + i*shentsize
		if at < shoff || at+want > uint64(size) || at+want < at {
			return 0, 0, 0, errors.New("section table outside the file")
		}
		if _, err := r.ReadAt(sh, int64(at)); err != nil {
			return 0, 0, 0, err
		}
		return bo.Uint32(sh[4:]), word(sh[offAt:], w), word(sh[sizeAt:], w), nil
	}
	if shnum == 0 {
		// More sections than fit in e_shnum: section 0's size holds it.
		_, _, n, err := readSection(0)
		if err != nil {
			return "", err
		}
		shnum = n
	}
	if shnum > maxSections {
		return "", fmt.Errorf("%d sections", shnum)
	}
	var read uint64
	for i := uint64(0); i < shnum; i++ {
		typ, off, sz, err := readSection(i)
		if err != nil {
			return "", err
		}
		if elf.SectionType(typ) != elf.SHT_NOTE || sz == 0 {
			continue
		}
		if sz > maxNote || off > uint64(size) || sz > uint64(size)-off {
			continue // not a build id note, or not in the file
		}
		if read += sz; read > maxNotes {
			return "", errors.New("too many notes")
		}
		data := make([]byte, sz)
		if _, err := r.ReadAt(data, int64(off)); err != nil {
			return "", err
		}
		if id, ok := findBuildID(data, bo); ok {
			return id, nil
		}
	}
	return "", errors.New("no GNU build id note")
}

// findBuildID walks ELF notes (namesz, descsz, type, name, desc; 4-byte
// aligned) for NT_GNU_BUILD_ID from "GNU". Sizes are checked in 64 bits:
// a 32-bit size near 4 GiB must not wrap around when aligned.
func findBuildID(b []byte, bo binary.ByteOrder) (string, bool) {
	align := func(n uint32) uint64 { return (uint64(n) + 3) &^ 3 }
	for len(b) >= 12 {
		namesz, descsz, typ := bo.Uint32(b), bo.Uint32(b[4:]), bo.Uint32(b[8:])
		b = b[12:]
		if align(namesz)+align(descsz) > uint64(len(b)) {
			return "", false
		}
		name := b[:namesz]
		desc := b[align(namesz) : align(namesz)+uint64(descsz)]
		b = b[align(namesz)+align(descsz):]
		if typ == 3 && bytes.Equal(bytes.TrimRight(name, "\x00"), []byte("GNU")) {
			return hex.EncodeToString(desc), true
		}
	}
	return "", false
}
