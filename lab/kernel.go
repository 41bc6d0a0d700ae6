package lab

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
)

// bzImage setup header fields (Documentation/arch/x86/boot.rst).
const (
	bootHeaderMagicOff = 0x202 // "HdrS"
	payloadOffsetOff   = 0x248
	payloadLengthOff   = 0x24c
	setupSectsOff      = 0x1f1
)

// ReadBuildID returns the GNU build id of the vmlinux inside a bzImage,
// so a host can prove it booted exactly this artifact (its
// /sys/kernel/notes carries the same id). Only gzip payloads are read;
// other compressions give an error.
func ReadBuildID(bzImage string) (string, error) {
	b, err := os.ReadFile(bzImage)
	if err != nil {
		return "", err
	}
	if len(b) < 0x260 || string(b[bootHeaderMagicOff:bootHeaderMagicOff+4]) != "HdrS" {
		return "", fmt.Errorf("%s: not a bzImage", bzImage)
	}
	setup := (int(b[setupSectsOff]) + 1) * 512
	off := setup + int(binary.LittleEndian.Uint32(b[payloadOffsetOff:]))
	n := int(binary.LittleEndian.Uint32(b[payloadLengthOff:]))
	if off+n > len(b) || n < 2 {
		return "", fmt.Errorf("%s: payload out of range", bzImage)
	}
	payload := b[off : off+n]
	if payload[0] != 0x1f || payload[1] != 0x8b {
		return "", fmt.Errorf("%s: payload is not gzip (configure CONFIG_KERNEL_GZIP)", bzImage)
	}
	zr, err := gzip.NewReader(bytes.NewReader(payload))
	if err != nil {
		return "", err
	}
	zr.Multistream(false)
	vmlinux, err := io.ReadAll(zr)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("%s: %w", bzImage, err)
	}
	f, err := elf.NewFile(bytes.NewReader(vmlinux))
	if err != nil {
		return "", fmt.Errorf("%s: vmlinux: %w", bzImage, err)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes, err := io.ReadAll(p.Open())
		if err != nil {
			return "", err
		}
		if id := gnuBuildID(notes); id != "" {
			return id, nil
		}
	}
	return "", fmt.Errorf("%s: no GNU build id note", bzImage)
}

// gnuBuildID walks ELF notes (4-byte aligned) for NT_GNU_BUILD_ID.
func gnuBuildID(notes []byte) string {
	for len(notes) >= 12 {
		namesz := int(binary.LittleEndian.Uint32(notes[0:]))
		descsz := int(binary.LittleEndian.Uint32(notes[4:]))
		typ := binary.LittleEndian.Uint32(notes[8:])
		name := 12
		desc := name + (namesz+3)&^3
		next := desc + (descsz+3)&^3
		if next > len(notes) || desc > len(notes) {
			return ""
		}
		if typ == 3 && namesz == 4 && string(notes[name:name+3]) == "GNU" {
			return hex.EncodeToString(notes[desc : desc+descsz])
		}
		notes = notes[next:]
	}
	return ""
}

var releaseRe = regexp.MustCompile(`^(\S+) \(`)

// ReadRelease returns the kernel release string of a bzImage from its
// setup header's version pointer (what uname -r will say).
func ReadRelease(bzImage string) (string, error) {
	b, err := os.ReadFile(bzImage)
	if err != nil {
		return "", err
	}
	if len(b) < 0x210 || string(b[bootHeaderMagicOff:bootHeaderMagicOff+4]) != "HdrS" {
		return "", fmt.Errorf("%s: not a bzImage", bzImage)
	}
	p := int(binary.LittleEndian.Uint16(b[0x20e:])) + 0x200
	if p >= len(b) {
		return "", fmt.Errorf("%s: version pointer out of range", bzImage)
	}
	end := bytes.IndexByte(b[p:], 0)
	if end < 0 {
		return "", fmt.Errorf("%s: unterminated version", bzImage)
	}
	m := releaseRe.FindSubmatch(b[p : p+end])
	if m == nil {
		return "", fmt.Errorf("%s: version %q", bzImage, b[p:p+end])
	}
	return string(m[1]), nil
}
