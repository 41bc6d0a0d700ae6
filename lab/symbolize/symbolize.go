// Package symbolize decodes the frames of a kernel's console report into
// source lines, from the vmlinux that ran, the way syzbot shows them:
//
//	svc_rdma_free+0x5c/0x1d0 net/sunrpc/xprtrdma/svc_rdma_transport.c:597
//
// with the functions inlined at that address listed first, each marked
// "[inline]". The vmlinux comes from a kernel built from a posted series,
// so it is read as hostile input: by Go's ELF and DWARF readers (no
// external tool parses it), with its size bounded and a malformed file an
// error, never a crash of the caller.
package symbolize

import (
	"context"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// MaxFile bounds the vmlinux read: its debug sections are held in
// serve's memory while a crash is decoded. The debug profile's kernel
// (KASAN, lockdep, reduced line tables) is 93 MiB; a bigger one is
// refused, not decoded.
const MaxFile = 256 << 20

// Table is one kernel's symbols and line tables.
type Table struct {
	dw *dwarf.Data
	// funcs are the function symbols by name; a name defined more than
	// once (static functions) is told apart by its size, which every
	// frame prints.
	funcs map[string][]elf.Symbol
	// trim are path prefixes cut from the source files the line tables
	// name (the build's own directories), so frames read as tree paths.
	trim []string
	// units are the compile units' address ranges, read on first use.
	units []unit
}

type unit struct {
	off    dwarf.Offset
	ranges [][2]uint64
}

// Open reads path's symbols and DWARF. trim are directory prefixes to cut
// from file names (the source and output directories of the build). A
// file without line tables is an error: the kernel was built without
// debug info.
func Open(path string, trim ...string) (t *Table, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("symbolize: %s: malformed ELF or DWARF: %v", path, r)
		}
	}()
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("symbolize: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > MaxFile {
		return nil, fmt.Errorf("symbolize: %s: not a regular file of at most %d MiB", path, MaxFile>>20)
	}
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("symbolize: %w", err)
	}
	defer f.Close()
	if f.Section(".debug_line") == nil || f.Section(".debug_info") == nil {
		return nil, fmt.Errorf("symbolize: %s has no line tables (built without CONFIG_DEBUG_INFO)", path)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("symbolize: %s: %w", path, err)
	}
	dw, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("symbolize: %s: %w", path, err)
	}
	t = &Table{dw: dw, funcs: map[string][]elf.Symbol{}, trim: trim}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Name != "" {
			t.funcs[s.Name] = append(t.funcs[s.Name], s)
		}
	}
	return t, nil
}

// Location is one source position of a frame: the function it is in, and
// whether the compiler inlined that function into the frame's caller.
type Location struct {
	Func   string
	File   string
	Line   int
	Inline bool
}

// Locate returns the source of fn+off (a symbol of size bytes, as the
// kernel prints "fn+off/size"), innermost inlined function first. ret
// says off is a return address (every frame of a stack but the faulting
// one): the call is the instruction before it.
func (t *Table) Locate(fn string, off, size uint64, ret bool) (locs []Location, err error) {
	defer func() {
		if r := recover(); r != nil {
			locs, err = nil, fmt.Errorf("symbolize: malformed DWARF at %s: %v", fn, r)
		}
	}()
	var sym *elf.Symbol
	for i, s := range t.funcs[fn] {
		if s.Size == size || len(t.funcs[fn]) == 1 {
			sym = &t.funcs[fn][i]
			break
		}
	}
	if sym == nil {
		return nil, fmt.Errorf("symbolize: no function %s of size %#x", fn, size)
	}
	pc := sym.Value + off
	if ret && off > 0 {
		pc--
	}
	r := t.dw.Reader()
	cu := t.unitOf(r, pc)
	if cu == nil {
		return nil, fmt.Errorf("symbolize: %s+%#x: no compile unit holds %#x", fn, off, pc)
	}
	lr, err := t.dw.LineReader(cu)
	if err != nil || lr == nil {
		return nil, fmt.Errorf("symbolize: %s+%#x: no line table", fn, off)
	}
	le, ok := lineOf(lr, pc)
	if !ok {
		return nil, fmt.Errorf("symbolize: %s+%#x: no line holds %#x", fn, off, pc)
	}
	chain := t.scopes(r, pc)
	files := lr.Files()
	// Innermost first: the line table's position is in the innermost
	// inlined function; each inlined call's site is in its parent.
	file, line := le.File.Name, le.Line
	for i := len(chain) - 1; i >= 0; i-- {
		locs = append(locs, Location{Func: t.name(chain[i]), File: t.path(file), Line: line, Inline: chain[i].Tag == dwarf.TagInlinedSubroutine})
		f, _ := chain[i].Val(dwarf.AttrCallFile).(int64)
		l, _ := chain[i].Val(dwarf.AttrCallLine).(int64)
		file, line = "", int(l)
		if f > 0 && int(f) < len(files) && files[f] != nil {
			file = files[f].Name
		}
	}
	if len(locs) == 0 {
		locs = []Location{{Func: fn, File: t.path(le.File.Name), Line: le.Line}}
	}
	// The outermost is the symbol the kernel printed, whatever DWARF
	// calls it.
	locs[len(locs)-1].Func, locs[len(locs)-1].Inline = fn, false
	return locs, nil
}

// lineOf is the row of lr's table that covers pc: the last row at or
// below pc of the sequence whose next row is above it. (LineReader.SeekPC
// misses sequences that come after one at higher addresses, as gcc
// writes .text.startup's after .text's.)
func lineOf(lr *dwarf.LineReader, pc uint64) (dwarf.LineEntry, bool) {
	var prev, cur, best dwarf.LineEntry
	found, have := false, false
	for lr.Next(&cur) == nil {
		if have && !prev.EndSequence && prev.Address <= pc && pc < cur.Address {
			best, found = prev, true
		}
		prev, have = cur, true
	}
	return best, found
}

// unitOf returns the compile unit whose ranges hold pc, with r at its
// first child. (dwarf.Reader.SeekPC misses units of several ranges,
// where gcc puts main and every function of .text.unlikely.)
func (t *Table) unitOf(r *dwarf.Reader, pc uint64) *dwarf.Entry {
	if t.units == nil {
		for {
			e, err := r.Next()
			if err != nil || e == nil {
				break
			}
			if e.Tag == dwarf.TagCompileUnit {
				if rs, err := t.dw.Ranges(e); err == nil {
					t.units = append(t.units, unit{e.Offset, rs})
				}
			}
			r.SkipChildren()
		}
	}
	for _, u := range t.units {
		for _, rg := range u.ranges {
			if rg[0] <= pc && pc < rg[1] {
				r.Seek(u.off)
				e, err := r.Next()
				if err != nil {
					return nil
				}
				return e
			}
		}
	}
	return nil
}

// scopes walks the compile unit r is in (positioned at its first child)
// and returns the function and the inlined calls whose ranges hold pc,
// outermost first. Once a scope holds pc only its children can hold it
// more closely, so the walk only ever goes down.
func (t *Table) scopes(r *dwarf.Reader, pc uint64) []*dwarf.Entry {
	var chain []*dwarf.Entry
	for {
		e, err := r.Next()
		if err != nil || e == nil || e.Tag == 0 {
			return chain // no sibling left at this level holds pc
		}
		switch e.Tag {
		case dwarf.TagSubprogram, dwarf.TagInlinedSubroutine, dwarf.TagLexDwarfBlock:
			if t.holds(e, pc) {
				if e.Tag != dwarf.TagLexDwarfBlock {
					chain = append(chain, e)
				}
				if !e.Children {
					return chain
				}
				continue // down into e's children
			}
		}
		if e.Children {
			r.SkipChildren()
		}
	}
}

func (t *Table) holds(e *dwarf.Entry, pc uint64) bool {
	rs, err := t.dw.Ranges(e)
	if err != nil {
		return false
	}
	for _, rg := range rs {
		if rg[0] <= pc && pc < rg[1] {
			return true
		}
	}
	return false
}

// name is a scope's function name, through its abstract origin or
// specification (an inlined copy names only the original).
func (t *Table) name(e *dwarf.Entry) string {
	for range 4 {
		if n, ok := e.Val(dwarf.AttrName).(string); ok {
			return n
		}
		off, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			if off, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset); !ok {
				return "?"
			}
		}
		r := t.dw.Reader()
		r.Seek(off)
		next, err := r.Next()
		if err != nil || next == nil {
			return "?"
		}
		e = next
	}
	return "?"
}

// path cuts the build's directories from a source file name.
func (t *Table) path(file string) string {
	for _, p := range t.trim {
		if rest, ok := strings.CutPrefix(file, strings.TrimSuffix(p, "/")+"/"); ok {
			return rest
		}
	}
	return file
}

// frameRE is one frame of a report as the kernel prints it: a stack
// entry (" ? fn+0x1a/0x40", possibly of a module) or the faulting
// instruction ("RIP: 0010:fn+0x1a/0x40"), after the console's time stamp
// and caller id.
var frameRE = regexp.MustCompile(`^(\[\s*\d+\.\d+\]\s?(?:\[\s*[CT]\d+\]\s?)?)?(\s*)(RIP: [0-9a-f]{4}:|\? )?([A-Za-z_.$][A-Za-z0-9_.$]*)\+0x([0-9a-f]+)/0x([0-9a-f]+)( \[[A-Za-z0-9_]+\])?\s*$`)

// Decode returns report with each frame of the kernel's own code followed
// by its source line, and the functions inlined there listed before it.
// A frame that cannot be found keeps its line as it was; the error says
// how many, with the first reason.
func (t *Table) Decode(ctx context.Context, report string) (string, error) {
	var b strings.Builder
	missed, first := 0, error(nil)
	lines := strings.Split(report, "\n")
	for i, l := range lines {
		if ctx.Err() != nil {
			b.WriteString(strings.Join(lines[i:], "\n"))
			return b.String(), ctx.Err()
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		m := frameRE.FindStringSubmatch(l)
		if m == nil || m[7] != "" { // modules have their own debug info
			b.WriteString(l)
			continue
		}
		off, err1 := strconv.ParseUint(m[5], 16, 64)
		size, err2 := strconv.ParseUint(m[6], 16, 64)
		if err := errors.Join(err1, err2); err != nil {
			b.WriteString(l)
			continue
		}
		locs, err := t.Locate(m[4], off, size, !strings.HasPrefix(m[3], "RIP"))
		if err != nil {
			missed++
			if first == nil {
				first = err
			}
			b.WriteString(l)
			continue
		}
		prefix := m[1] + m[2] + m[3]
		for _, loc := range locs[:len(locs)-1] {
			fmt.Fprintf(&b, "%s%s %s [inline]\n", prefix, loc.Func, where(loc))
		}
		fmt.Fprintf(&b, "%s %s", strings.TrimRight(l, " \t"), where(locs[len(locs)-1]))
	}
	if missed > 0 {
		return b.String(), fmt.Errorf("%d frames not decoded, the first: %w", missed, first)
	}
	return b.String(), nil
}

func where(l Location) string {
	if l.File == "" {
		return "?:" + strconv.Itoa(l.Line)
	}
	return l.File + ":" + strconv.Itoa(l.Line)
}
