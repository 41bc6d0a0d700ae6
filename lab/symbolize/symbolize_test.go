package symbolize

import (
	"context"
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// build compiles testdata's program with gcc -g -O2 (the kernel's
// optimisation, so functions are inlined) and returns it and the source
// directory.
func build(t *testing.T) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	src, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(t.TempDir(), "prog")
	cmd := exec.Command("gcc", "-g", "-O2", "-o", prog, "a.c", "b.c")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return prog, src
}

// addr2line is the peer: GNU addr2line's function and file:line chain for
// addr, innermost first, with the directory cut.
func addr2line(t *testing.T, prog, dir string, addr uint64) []Location {
	t.Helper()
	out, err := exec.Command("addr2line", "-f", "-i", "-e", prog, fmt.Sprintf("%#x", addr)).Output()
	if err != nil {
		t.Fatalf("addr2line: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var locs []Location
	posRE := regexp.MustCompile(`^(.*):(\d+|\?)(?: \(discriminator \d+\))?$`)
	for i := 0; i+1 < len(lines); i += 2 {
		m := posRE.FindStringSubmatch(lines[i+1])
		if m == nil {
			t.Fatalf("addr2line: %q", lines[i+1])
		}
		var n int
		fmt.Sscan(m[2], &n)
		locs = append(locs, Location{Func: lines[i], File: strings.TrimPrefix(m[1], dir+"/"), Line: n})
	}
	return locs
}

// Every instruction of every function is located as addr2line locates
// it: the same inlined functions, innermost first, at the same lines;
// the static function two files define is told apart by its size.
func TestLocateAgreesWithAddr2line(t *testing.T) {
	if _, err := exec.LookPath("addr2line"); err != nil {
		t.Skip("addr2line (binutils) not installed")
	}
	prog, dir := build(t)
	tab, err := Open(prog, dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(prog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	inlined, twins, checked := 0, 0, 0
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size == 0 || !strings.Contains("main conn_free twin other", s.Name) {
			continue
		}
		if s.Name == "twin" {
			twins++
		}
		for off := uint64(0); off < s.Size; off++ {
			got, err := tab.Locate(s.Name, off, s.Size, false)
			if err != nil {
				t.Fatalf("%s+%#x/%#x: %v", s.Name, off, s.Size, err)
			}
			want := addr2line(t, prog, dir, s.Value+off)
			if len(got) != len(want) {
				t.Fatalf("%s+%#x: %d locations, addr2line %d:\n%v\n%v", s.Name, off, len(got), len(want), got, want)
			}
			for i := range got {
				g, w := got[i], want[i]
				if g.Func != w.Func || g.File != w.File || g.Line != w.Line || g.Inline != (i < len(got)-1) {
					t.Fatalf("%s+%#x, location %d: got %+v, addr2line %+v", s.Name, off, i, g, w)
				}
			}
			if len(got) > 2 {
				inlined++
			}
			checked++
		}
	}
	if twins != 2 || inlined == 0 {
		t.Fatalf("the program lost its shapes: %d twins, %d addresses two inlines deep", twins, inlined)
	}
	t.Logf("%d addresses located as addr2line does, %d of them two inlines deep", checked, inlined)
}

// A report's frames get their lines, inlined functions before them; the
// rest of the report, module frames and unknown functions stay as they
// were, and the error counts what was not found.
func TestDecodeReport(t *testing.T) {
	prog, dir := build(t)
	tab, err := Open(prog, dir)
	if err != nil {
		t.Fatal(err)
	}
	size := map[string]uint64{}
	f, err := elf.Open(prog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, _ := f.Symbols()
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && (s.Name == "conn_free" || s.Name == "main") {
			size[s.Name] = s.Size
		}
	}
	report := fmt.Sprintf(`[   12.500000] BUG: KASAN: slab-use-after-free in conn_free+0x8/0x%x
[   12.500001] Write of size 4 at addr ffff888004a1c000 by task kworker/0:1/42
[   12.500002] RIP: 0010:conn_free+0x8/0x%x
[   12.500003] Call Trace:
[   12.500004]  <TASK>
[   12.500005]  conn_free+0x8/0x%x
[   12.500006]  ? not_in_this_kernel+0x10/0x20
[   12.500007]  rxe_poll_cq+0x10/0x200 [rdma_rxe]
[   12.500008]  main+0x10/0x%x
[   12.500009]  </TASK>`, size["conn_free"], size["conn_free"], size["conn_free"], size["main"])
	got, err := tab.Decode(context.Background(), report)
	if err == nil || !strings.Contains(err.Error(), "1 frames not decoded") || !strings.Contains(err.Error(), "not_in_this_kernel") {
		t.Errorf("error: %v, want one frame not decoded (not_in_this_kernel)", err)
	}
	testenv.Golden(t, filepath.Join("testdata", "report.golden"), []byte(got), *update)
}

// A file that is not a kernel with line tables is an error, not a crash:
// a missing file, a text file, a program built without -g, and one whose
// DWARF is garbage.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text")
	os.WriteFile(text, []byte("not an ELF file\n"), 0o644)
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file opened")
	}
	if _, err := Open(text); err == nil {
		t.Error("a text file opened")
	}
	huge := filepath.Join(dir, "huge")
	if f, err := os.Create(huge); err == nil {
		f.Truncate(MaxFile + 1) // sparse: costs no disk
		f.Close()
	}
	if _, err := Open(huge); err == nil || !strings.Contains(err.Error(), "at most 256 MiB") {
		t.Errorf("a vmlinux over MaxFile: %v, want it refused unread", err)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	src, _ := filepath.Abs("testdata")
	plain := filepath.Join(dir, "plain")
	cmd := exec.Command("gcc", "-O2", "-o", plain, "a.c", "b.c")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	if _, err := Open(plain); err == nil || !strings.Contains(err.Error(), "no line tables") {
		t.Errorf("a program without -g: %v, want no line tables", err)
	}
	prog, _ := build(t)
	b, err := os.ReadFile(prog)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(prog)
	if err != nil {
		t.Fatal(err)
	}
	info := f.Section(".debug_info")
	f.Close()
	for i := info.Offset; i < info.Offset+info.Size; i++ {
		b[i] = byte(i*7 + 3)
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, b, 0o755)
	tab, err := Open(bad)
	if err != nil {
		return // refused at open: fine
	}
	if _, err := tab.Decode(context.Background(), " main+0x1/0x10"); err == nil {
		t.Error("garbage DWARF decoded a frame")
	}
}
