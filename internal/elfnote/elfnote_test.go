package elfnote

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// elfWithNote is a little-endian ELF64 file with one SHT_NOTE section
// that claims size bytes at offset 0x100 and holds note there.
func elfWithNote(note []byte, size uint64) []byte {
	const shoff = 0x40
	b := make([]byte, 0x100)
	copy(b, "\x7fELF\x02\x01\x01")
	le := binary.LittleEndian
	le.PutUint64(b[0x28:], shoff) // e_shoff
	le.PutUint16(b[0x3a:], 64)    // e_shentsize
	le.PutUint16(b[0x3c:], 2)     // e_shnum: a null section and the note
	sh := b[shoff+64:]
	le.PutUint32(sh[4:], 7) // SHT_NOTE
	le.PutUint64(sh[0x18:], 0x100)
	le.PutUint64(sh[0x20:], size)
	return append(b, note...)
}

func gnuNote(desc []byte) []byte {
	var n bytes.Buffer
	binary.Write(&n, binary.LittleEndian, []uint32{4, uint32(len(desc)), 3})
	n.WriteString("GNU\x00")
	n.Write(desc)
	for n.Len()%4 != 0 {
		n.WriteByte(0)
	}
	return n.Bytes()
}

func TestBuildIDFindsTheNote(t *testing.T) {
	note := gnuNote([]byte{0xde, 0xad, 0xbe, 0xef})
	b := elfWithNote(note, uint64(len(note)))
	if id, err := BuildID(bytes.NewReader(b), int64(len(b))); err != nil || id != "deadbeef" {
		t.Fatalf("BuildID = %q, %v", id, err)
	}
}

// Finding 4: a sparse file declaring an 8 GiB note section must not make
// the host allocate it.
func TestBuildIDBoundsMemory(t *testing.T) {
	dir := t.TempDir()
	for name, apparent := range map[string]int64{"16K": 16 << 10, "9G": 9 << 30} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, elfWithNote(gnuNote([]byte{1}), 8<<30), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, apparent); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = BuildID(f, apparent)
		f.Close()
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: found a build id in an 8 GiB note", name)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 4<<20 {
			t.Errorf("%s: allocated %d bytes", name, d)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
	}
}

func TestFindBuildIDDoesNotPanic(t *testing.T) {
	for _, in := range []string{"\xff\xff\xff\xff\xff\xff\xff\xff0000", "\xfd\xff\xff\xff\x00\x00\x00\x00\x03\x00\x00\x00GNU\x00"} {
		findBuildID([]byte(in), binary.LittleEndian)
		findBuildID([]byte(in), binary.BigEndian)
	}
}

func FuzzFindBuildID(f *testing.F) {
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\xff0000"))
	f.Add(gnuNote([]byte{1, 2, 3, 4}))
	f.Fuzz(func(t *testing.T, b []byte) {
		findBuildID(b, binary.LittleEndian)
		findBuildID(b, binary.BigEndian)
	})
}

func FuzzReadBuildID(f *testing.F) {
	note := gnuNote([]byte{1, 2, 3, 4})
	f.Add(elfWithNote(note, uint64(len(note))))
	f.Add(elfWithNote(note, 8<<30))
	if b, err := os.ReadFile("/proc/self/exe"); err == nil && len(b) < 64<<20 {
		f.Add(b[:min(len(b), 1<<16)])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// The file may claim any size: reads beyond b fail, but the
		// parser must not allocate by the claim.
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		BuildID(bytes.NewReader(b), 1<<40)
		runtime.ReadMemStats(&after)
		if d := after.TotalAlloc - before.TotalAlloc; d > maxNotes+1<<20 {
			t.Fatalf("allocated %d bytes", d)
		}
	})
}
