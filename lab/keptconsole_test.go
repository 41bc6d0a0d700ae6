package lab

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// A console under the limit is kept whole.
func TestKeptConsoleWhole(t *testing.T) {
	k := newKeptConsole(1 << 10)
	var want strings.Builder
	for i := range 20 {
		l := fmt.Sprintf("line %d", i)
		k.add(l)
		want.WriteString(l + "\n")
	}
	if k.String() != want.String() {
		t.Errorf("kept %q, want %q", k.String(), want.String())
	}
}

// A flooding kernel (75 MiB in 40 s was seen) is kept at both ends, the
// middle counted, and the host's memory stays near the two halves.
func TestKeptConsoleFlood(t *testing.T) {
	const half = 4 << 20
	k := newKeptConsole(half)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	line := strings.Repeat("x", 74)
	k.add("FIRST: Linux version 6.12")
	n := 75 << 20 / 75
	for range n {
		k.add(strings.Clone(line)) // each line its own allocation, as the scanner makes them
	}
	k.add("LAST: @@RB POWEROFF status=0")
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	got := k.String()
	if len(got) > 2*half+200 {
		t.Errorf("kept %d bytes of a 75 MiB console, want at most %d", len(got), 2*half+200)
	}
	if !strings.HasPrefix(got, "FIRST: ") || !strings.HasSuffix(got, "LAST: @@RB POWEROFF status=0\n") {
		t.Errorf("the console's first or last line is lost")
	}
	if !strings.Contains(got, "lines (") || !strings.Contains(got, "of this console left out: a boot keeps its first and last 4 MiB]\n") {
		t.Errorf("no line says what was left out")
	}
	if live := int64(after.HeapAlloc) - int64(before.HeapAlloc); live > 4*half {
		t.Errorf("%d MiB live after a 75 MiB flood, want near %d MiB", live>>20, 2*half>>20)
	}
	t.Logf("kept %d of %d bytes; heap grew %d MiB", len(got), 75<<20, (int64(after.HeapAlloc)-int64(before.HeapAlloc))>>20)
}

// A line of any length is cut, and what follows it is still read: a
// crash printed after 2 MiB on one line is seen.
func TestReadConsoleLongLine(t *testing.T) {
	in := "first\r\n" + strings.Repeat("a", 2<<20) + "\nKernel panic - not syncing: after the flood\nlast without newline"
	var got []string
	readConsole(strings.NewReader(in), func(l string) { got = append(got, l) })
	if len(got) != 4 || got[0] != "first" || got[2] != "Kernel panic - not syncing: after the flood" || got[3] != "last without newline" {
		t.Fatalf("%d lines: %.80q", len(got), got)
	}
	if len(got[1]) > maxConsoleLine+64 || !strings.HasSuffix(got[1], "[rdmabot: line cut at 64 KiB]") {
		t.Errorf("the long line kept %d bytes: %.40q...", len(got[1]), got[1])
	}
}
