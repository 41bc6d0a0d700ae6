package lab

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/rdmabot/rdmabot/internal/elfnote"
)

// bzImage setup header fields (Documentation/arch/x86/boot.rst).
const (
	bootHeaderMagicOff = 0x202 // "HdrS"
	payloadOffsetOff   = 0x248
	payloadLengthOff   = 0x24c
	setupSectsOff      = 0x1f1
)

// Bounds of ReadBuildID: a bzImage was built from a posted series.
const (
	maxBzImage = 256 << 20 // the debug kernel's is 11 MiB
	maxVmlinux = 256 << 20 // its payload unpacked (the debug kernel's: 44 MiB)
)

// ReadBuildID returns the GNU build id of the vmlinux inside a bzImage,
// so a host can prove it booted exactly this artifact (its
// /sys/kernel/notes carries the same id), whichever compression its
// config chose but lzo (unpackPayload). The image and its unpacked payload
// are read within bounds, and the note by internal/elfnote's bounded
// reader: the kernel is hostile.
func ReadBuildID(bzImage string) (string, error) {
	return readBuildID(bzImage, maxBzImage, maxVmlinux)
}

// readBuildID is ReadBuildID within the given bounds.
func readBuildID(bzImage string, maxImage int64, maxUnpacked int) (string, error) {
	vmlinux, err := unpackVmlinux(bzImage, maxImage, maxUnpacked)
	if err != nil {
		return "", err
	}
	id, err := elfnote.BuildID(bytes.NewReader(vmlinux), int64(len(vmlinux)))
	if err != nil {
		return "", fmt.Errorf("%s: vmlinux: %w", bzImage, err)
	}
	return id, nil
}

// unpackVmlinux is the vmlinux in a bzImage's payload, within the
// given bounds (a payload cut short gives what it holds).
func unpackVmlinux(bzImage string, maxImage int64, maxUnpacked int) ([]byte, error) {
	b, err := readBounded(bzImage, maxImage)
	if err != nil {
		return nil, err
	}
	if len(b) < 0x260 || string(b[bootHeaderMagicOff:bootHeaderMagicOff+4]) != "HdrS" {
		return nil, fmt.Errorf("%s: not a bzImage", bzImage)
	}
	setup := (int(b[setupSectsOff]) + 1) * 512
	off := setup + int(binary.LittleEndian.Uint32(b[payloadOffsetOff:]))
	n := int(binary.LittleEndian.Uint32(b[payloadLengthOff:]))
	if off < 0 || n < 2 || off > len(b) || n > len(b)-off {
		return nil, fmt.Errorf("%s: payload out of range", bzImage)
	}
	vmlinux, err := unpackPayload(b[off:off+n], maxUnpacked)
	if errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("%s: payload unpacks to more than %d MiB", bzImage, maxUnpacked>>20)
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("%s: %w", bzImage, err)
	}
	return vmlinux, nil
}

var errTooLarge = errors.New("more than the bound")

// readAtMost reads r to its end, or fails with errTooLarge past max
// bytes. Its buffer doubles up to max+1, so what it allocates in all
// stays under 2*max plus its first 4 MiB, whatever r holds.
func readAtMost(r io.Reader, max int) ([]byte, error) {
	buf := make([]byte, 0, min(4<<20, max+1))
	for {
		if len(buf) == cap(buf) {
			if len(buf) > max {
				return nil, errTooLarge
			}
			grown := make([]byte, len(buf), min(2*cap(buf), max+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// readBounded reads a regular file of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, fmt.Errorf("%s: not a regular file of at most %d MiB", path, max>>20)
	}
	// The size is checked: one buffer of it, no growing.
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

var releaseRe = regexp.MustCompile(`^(\S+) \(`)

// ReadRelease returns the kernel release string of a bzImage from its
// setup header's version pointer (what uname -r will say).
func ReadRelease(bzImage string) (string, error) {
	b, err := readBounded(bzImage, maxBzImage)
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
