package lab

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// bzImageWith is a file laid out as a bzImage whose payload is p: what
// ReadBuildID reads of a real one.
func bzImageWith(t *testing.T, p []byte) string {
	t.Helper()
	img := make([]byte, 0x400)
	copy(img[bootHeaderMagicOff:], "HdrS")
	img[setupSectsOff] = 0 // setup is one sector: the payload starts at 0x200
	binary.LittleEndian.PutUint32(img[payloadOffsetOff:], 0x200)
	binary.LittleEndian.PutUint32(img[payloadLengthOff:], uint32(len(p)))
	// The kernel's version string, which ReadRelease finds.
	binary.LittleEndian.PutUint16(img[0x20e:], 0x300-0x200)
	copy(img[0x300:], "6.12.117 (rdmabot@test) #1 SMP\x00")
	path := filepath.Join(t.TempDir(), "bzImage")
	if err := os.WriteFile(path, append(img, p...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// kernelCompress is data compressed as arch/x86/boot/compressed/Makefile
// compresses vmlinux.bin for the compression named (the tools'
// arguments are the kernel's, scripts/Makefile.lib and
// scripts/xz_wrap.sh for x86), with the unpacked size appended as
// size_append does for all but gzip. The tools are scripts/setup.sh's.
func kernelCompress(t testing.TB, name string, data []byte, extra ...string) []byte {
	t.Helper()
	if name == "gzip" {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zw.Write(data)
		zw.Close()
		return b.Bytes()
	}
	args := map[string][]string{
		"bzip2": {"bzip2", "-9"},
		"lzma":  {"lzma", "-9"},
		"xz":    {"xz", "--check=crc32", "--x86", "--lzma2=dict=32MiB"},
		"lz4":   {"lz4", "-l", "-9"},
		"zstd":  {"zstd", "-22", "--ultra"},
	}[name]
	cmd := exec.Command(args[0], append(args[1:], extra...)...)
	cmd.Stdin = bytes.NewReader(data)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s (scripts/setup.sh installs it): %v: %s", args[0], err, stderr.String())
	}
	return binary.LittleEndian.AppendUint32(out.Bytes(), uint32(len(data)))
}

// realELF is a real x86-64 program with a GNU build id note, for a
// vmlinux: its code has the calls x86's branch filter rewrites. Debian's
// /bin/sh (125 KiB), so that the kernel's slowest settings (zstd -22)
// take a second.
func realELF(t testing.TB) (data []byte, id string) {
	t.Helper()
	path, err := exec.LookPath("dash")
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		t.Fatalf("%s has no build id note", path)
	}
	note, err := s.Data()
	if err != nil || len(note) < 16+20 {
		t.Fatalf("%s: note %x %v", path, note, err)
	}
	data, err = os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data, hex.EncodeToString(note[16:])
}

// The build id is read from a bzImage whichever compression its config
// chose: the payload unpacks to exactly what was packed (x86's branch
// filter undone for xz, over one block or many), and the id found is
// the program's own.
func TestReadBuildIDEveryCompression(t *testing.T) {
	vmlinux, want := realELF(t)
	for _, c := range []struct {
		name  string
		extra []string
	}{
		{"gzip", nil}, {"bzip2", nil}, {"lzma", nil}, {"xz", nil}, {"xz", []string{"--block-size=40KiB"}}, {"lz4", nil}, {"zstd", nil},
	} {
		label := strings.Join(append([]string{c.name}, c.extra...), " ")
		p := kernelCompress(t, c.name, vmlinux, c.extra...)
		got, err := unpackPayload(p, maxVmlinux)
		if err != nil || !bytes.Equal(got, vmlinux) {
			t.Errorf("%s: unpacked %d bytes (%v), want the %d packed", label, len(got), err, len(vmlinux))
			continue
		}
		id, err := ReadBuildID(bzImageWith(t, p))
		if err != nil || id != want {
			t.Errorf("%s: build id %q %v, want %s", label, id, err, want)
		}
	}
}

// What cannot be unpacked says why: lzo, which the host does not
// unpack, bytes of no compression, a stream cut short, an xz stream
// with a filter the kernel does not use.
func TestUnpackPayloadRefuses(t *testing.T) {
	vmlinux, _ := realELF(t)
	xz := kernelCompress(t, "xz", vmlinux[:4096])
	cmd := exec.Command("xz", "--check=crc32", "--arm", "--lzma2")
	cmd.Stdin = bytes.NewReader(vmlinux[:4096])
	arm, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	arm = binary.LittleEndian.AppendUint32(arm, 0)
	for name, c := range map[string]struct {
		p    []byte
		want string
	}{
		"lzo":          {[]byte("\x89LZO\x00\r\n\x1a\n\x10\x30"), "payload is lzo"},
		"no format":    {[]byte("\x7fELF\x02\x01\x01"), "payload starts 7f 45 4c 46 02 01: no compression"},
		"xz cut short": {xz[:40], "unexpected EOF"},
		"xz header":    {xz[:8], "xz: stream header cut short"},
		"xz for arm":   {arm, "xz: filter 0x7"},
		"lzma":         {[]byte("\x5d\x00\x00\x80"), "unexpected EOF"},
		"bzip2 sized":  {[]byte("BZh"), "bzip2 payload of 3 bytes"},
	} {
		_, err := unpackPayload(c.p, maxVmlinux)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
	// A block header whose checksum is wrong is refused before its
	// filters are read.
	bad := bytes.Clone(xz)
	bad[12+2] ^= 0xff
	if _, err := unpackPayload(bad, maxVmlinux); err == nil || !strings.Contains(err.Error(), "block header checksum") {
		t.Errorf("a broken block header: %v", err)
	}
}

// A payload that unpacks without end is refused within the bound, in
// every compression, and what the host allocates follows the bound.
func TestUnpackPayloadBombs(t *testing.T) {
	const limit = 4 << 20
	zeros := make([]byte, 4*limit)
	for _, name := range []string{"bzip2", "xz", "lz4", "zstd", "lzma"} {
		fast := map[string][]string{"bzip2": {"-1"}, "xz": {"-0"}, "lz4": {"-1"}, "zstd": {"-1"}, "lzma": {"-0"}}[name]
		p := kernelCompress(t, name, zeros, fast...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := readBuildID(bzImageWith(t, p), 1<<30, limit)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "unpacks to more than 4 MiB") {
			t.Errorf("%s: %v, want it refused past 4 MiB", name, err)
		}
		// lz4's legacy frames are of 8 MiB blocks, which its decoder
		// holds whatever the payload's length.
		budget := uint64(4 * limit)
		if name == "lz4" {
			budget += 32 << 20
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > budget {
			t.Errorf("%s: allocated %d MiB for a bound of 4", name, d>>20)
		}
	}
	// zstd's frame may ask for a window larger than the bound: refused
	// before it is allocated.
	if _, err := unpackPayload(kernelCompress(t, "zstd", zeros[:1<<20], "--long=27"), limit); err == nil || errors.Is(err, errTooLarge) {
		t.Errorf("a zstd window over the bound: %v", err)
	}
}

// Whatever a payload holds, unpacking it ends within the bound with
// data or an error, never a panic.
func FuzzUnpackPayload(f *testing.F) {
	vmlinux, _ := realELF(f)
	for _, name := range []string{"gzip", "bzip2", "lzma", "xz", "lz4", "zstd"} {
		f.Add(kernelCompress(f, name, vmlinux[:2048]))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if out, err := unpackPayload(p, 1<<20); err == nil && len(out) > 1<<20 {
			t.Fatalf("%d bytes past the bound", len(out))
		}
	})
}
