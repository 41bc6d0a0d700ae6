// Package console watches a kernel's serial console line by line and finds
// crashes in it: hung tasks, oopses, BUGs, general protection faults,
// WARNINGs, panics, soft lockups, RCU stalls, KASAN and UBSAN reports. Each
// crash gets a title the way syzkaller titles them ("INFO: task hung in
// __ib_drain_sq", "WARNING in svc_rdma_send"), so the same bug seen twice
// reads the same and reports can group it.
package console

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Kind is the class of a crash.
type Kind string

// The kinds the monitor knows.
const (
	Hang       Kind = "hang"
	Oops       Kind = "oops"
	Bug        Kind = "bug"
	GPF        Kind = "gpf"
	Warning    Kind = "warning"
	Panic      Kind = "panic"
	SoftLockup Kind = "soft-lockup"
	RCUStall   Kind = "rcu-stall"
	KASAN      Kind = "kasan" // also KMSAN and KFENCE reports
	UBSAN      Kind = "ubsan"
	Lockdep    Kind = "lockdep" // "possible deadlock in f"
	ODEBUG     Kind = "odebug"  // "WARNING: ODEBUG bug in f"
)

// Crash is one report found on a console.
type Crash struct {
	Title string `json:"title"`
	Kind  Kind   `json:"kind"`
	// Fatal means the kernel is no longer trustworthy and the run should
	// stop once the report is complete. A WARNING alone is not fatal.
	Fatal bool `json:"fatal"`
	// Complete is set when the end of the trace was seen; an incomplete
	// report was cut by the console ending or by the line budget.
	Complete bool `json:"complete"`
	// StartLine and EndLine are 1-based console line numbers, inclusive.
	StartLine int `json:"start_line"`
	EndLine   int `json:"end_line"`
	// Count is how many times the same title was seen; later repeats
	// (hung-task reports recur every timeout) are only counted.
	Count  int    `json:"count"`
	Report string `json:"report"`

	lines   []string
	bytes   int      // in lines
	pending []string // lines after the end, kept in case a panic follows
	header  []string // the header regexp's submatches
}

// maxReportLines and maxReportBytes bound one report: a trace longer
// than either is cut and marked incomplete rather than growing without
// bound. With maxCrashes and maxLineBytes they bound what a monitor
// keeps, whatever the console: 996 MiB of 64 KiB lines once grew its heap
// by 1.6 GiB.
const (
	maxReportLines = 400
	maxReportBytes = 128 << 10
)

// maxLineBytes bounds what of one line the monitor keeps and scans: a
// kernel message is at most 1 KiB (printk's record), so a longer line is
// other output; its first and last halves are kept, the header of a
// message printed after it included.
const maxLineBytes = 4 << 10

// maxStarts bounds where in one line a header is looked for: the first
// and the last maxStarts/2 places a kernel message may start.
const maxStarts = 16

// panicJoinLines: a panic this close after the end of another report is its
// consequence (panic_on_oops, "Fatal exception") and joins that report.
const panicJoinLines = 60

// maxCrashes bounds the distinct titles kept per console, fatal and not
// apart: a flood of WARNINGs does not hide the crash after it.
const maxCrashes = 32

type header struct {
	kind Kind
	// re matches at the start of a kernel message; prefix is what every
	// match begins with ("" when that varies).
	re     *regexp.Regexp
	prefix string
	fatal  bool
	// end says which line closes this kind of report.
	end func(line string, c *Crash) bool
}

// absorbs says which later headers continue an open report instead of
// starting one: an oops or panic after a BUG, the WARNING that an ODEBUG
// or lockdep line introduces.
func absorbs(open *Crash, next Kind) bool {
	// Symbolized reports repeat a header for an inlined frame first.
	if next == open.Kind && len(open.lines) <= 2 {
		return true
	}
	switch next {
	case Oops, Panic:
		return true
	case Warning:
		return open.Kind == ODEBUG || open.Kind == Lockdep
	}
	return false
}

func endTrace(line string, _ *Crash) bool {
	return strings.Contains(line, "---[ end trace") || strings.Contains(line, "---[ end Kernel panic")
}

func endTask(line string, c *Crash) bool {
	return strings.Contains(line, "</TASK>") || endTrace(line, c)
}

// endPanic: with panic=-1 the kernel reboots right after "Kernel Offset"
// and never prints the closing "---[ end Kernel panic".
func endPanic(line string, _ *Crash) bool {
	return strings.Contains(line, "---[ end Kernel panic") || strings.Contains(line, "Kernel Offset:") ||
		strings.Contains(line, "Rebooting in")
}

// endKASAN: the report sits between two rules of '='; the header follows
// the first one, so the next rule closes it.
func endKASAN(line string, c *Crash) bool {
	return strings.HasPrefix(strings.TrimSpace(stripTime(line)), "=====") && len(c.lines) > 1
}

// headers are tried in order; the first match wins, so the specific forms
// (KASAN's "BUG: KASAN:", "watchdog: BUG: soft lockup") precede "BUG: ".
var headers = []header{
	hdr(Hang, `INFO: task (\S+):\d+ blocked (?:in I/O wait )?for more than \d+ seconds`, true, endTask),
	hdr(SoftLockup, `(?:watchdog: )?BUG: soft lockup - CPU#\d+ stuck for`, true, endTask),
	hdr(RCUStall, `(?:rcu: )?INFO: rcu_\w+ (?:detected stalls?|self-detected stall)`, true, endTask),
	hdr(KASAN, `BUG: (KASAN|KMSAN|KFENCE): ([a-z0-9\- ]+?) in ([A-Za-z0-9_.]+)`, true, endKASAN),
	hdr(UBSAN, `UBSAN: ([a-z0-9\-]+) in (\S+)`, true, endTrace),
	hdr(GPF, `(?:Oops: )?general protection fault`, true, endTrace),
	hdr(Lockdep, `WARNING: possible (?:circular locking dependency|recursive locking) detected`, false, endTask),
	hdr(ODEBUG, `ODEBUG: `, false, endTrace),
	hdr(Bug, `kernel BUG at (\S+)`, true, endTrace),
	hdr(Bug, `BUG: (.+)`, true, endTrace),
	hdr(Warning, `WARNING: CPU: \d+ PID: \d+ at \S+ ([A-Za-z0-9_.]+)`, false, endTrace),
	hdr(Warning, `WARNING: (.+)`, false, endTrace),
	hdr(Oops, `Oops: `, true, endTrace),
	hdr(Panic, `Kernel panic - not syncing: (.*)`, true, endPanic),
}

// hdr is a header whose re matches where a kernel message starts
// (starts): the line's start, or right after a printk timestamp when
// other output shares the line. Prose that merely mentions "a general
// protection fault" is not a crash.
func hdr(kind Kind, re string, fatal bool, end func(string, *Crash) bool) header {
	r := regexp.MustCompile(`^(?:` + re + `)`)
	prefix, _ := r.LiteralPrefix()
	return header{kind: kind, re: r, prefix: prefix, fatal: fatal, end: end}
}

var (
	timePrefix = regexp.MustCompile(`^\s*\[\s*\d+\.\d+\]\s?(?:\[\s*[TC]\d+\]\s?)?`)
	frameRe    = regexp.MustCompile(`^\s*(\? )?([A-Za-z0-9_.$]+)\+0x[0-9a-f]+/0x[0-9a-f]+`)
	ripRe      = regexp.MustCompile(`RIP: [0-9a-f]{4}:(?:\[<[0-9a-f]+>\] )?([A-Za-z0-9_.]+)\+0x`)
	accessRe   = regexp.MustCompile(`^(Read|Write) of size`)
	suffixRe   = regexp.MustCompile(`(\.(cold|isra|constprop|part|llvm)(\.\d+)?)+$`)
	// uninteresting frames print reports, check memory, copy, format or
	// take locks: the title names the first frame after them.
	uninteresting = regexp.MustCompile(strings.Join([]string{
		`__pfx_`, `__sanitizer`, `__asan`, `kasan`, `kmsan`, `kcsan`, `kfence`, `ubsan`, `check_memory_region`,
		`instrument_`, `memcpy`, `memmove`, `memset`, `memcmp`, `^str`, `string`, `vsnprintf`, `snprintf`,
		`sprintf`, `add_uevent_var`, `copy_to_user`, `copy_from_user`, `put_user`, `get_user`, `might_`,
		`list_add`, `list_del`, `list_replace`, `list_move`, `list_splice`, `hlist_`, `kref_`,
		`refcount_`, `debug_object`, `debug_print_object`, `dump_stack`, `show_stack`, `show_regs`,
		`print_address_description`, `print_report`, `warn_slowpath`, `__warn`, `report_bug`, `handle_bug`,
		`exc_invalid_op`, `asm_exc_`, `srcu`, `lock_acquire`, `lock_release`, `lockdep`, `panic`, `nmi_`,
		`_raw_spin`, `_raw_read`, `_raw_write`, `queued_spin`, `do_raw_spin`, `^rcu_`, `print_cpu_stall`,
		`sysvec_`, `irq_exit`, `__irq_`, `hrtimer`, `^tick_`, `update_process_times`, `watchdog`,
		`kmalloc`, `kfree`, `kmem_cache`, `^slab_`, `kzalloc`, `kvmalloc`, `krealloc`, `kvfree`, `fortify`,
	}, "|"))
	// waiting frames say how a blocked task sleeps (hung tasks only).
	waiting = regexp.MustCompile(strings.Join([]string{
		`sched`, `_lock`, `down`, `rwsem`, `completion`, `wait`, `synchronize`, `context_switch`,
		`__switch_to`, `cancel_delayed_work`, `rcu_barrier`, `kthread`, `flush_work`, `flush_workqueue`,
		`folio_`, `_page`,
	}, "|"))
)

// stripTime removes the printk timestamp and caller id.
func stripTime(line string) string {
	return timePrefix.ReplaceAllString(line, "")
}

// Monitor finds crashes in a console fed to it one line at a time. It is
// not safe for concurrent use: one monitor per console.
type Monitor struct {
	crashes []*Crash
	byTitle map[string]*Crash
	open    *Crash
	openEnd func(string, *Crash) bool
	last    *Crash // the last closed report, for a panic that follows it
	line    int
}

// NewMonitor returns a monitor at line 0.
func NewMonitor() *Monitor {
	return &Monitor{byTitle: map[string]*Crash{}}
}

// Line feeds one console line (without its newline). It returns a crash
// when this line starts a new report; the crash keeps filling as more
// lines arrive.
func (m *Monitor) Line(raw string) *Crash {
	m.line++
	raw = cutLine(strings.TrimRight(raw, "\r"))
	text := stripTime(raw)
	h, match := findHeader(text)

	if m.open != nil {
		if h == nil || absorbs(m.open, h.kind) {
			m.open.add(raw, m.line)
			if h != nil && h.kind == Panic {
				m.open.Fatal = true
				m.openEnd = endPanic
			}
			if m.openEnd(raw, m.open) {
				m.close(true)
			} else if len(m.open.lines) >= maxReportLines || m.open.bytes >= maxReportBytes {
				m.close(false)
			}
			return nil
		}
		m.close(false)
	}
	if h == nil {
		if m.last != nil && m.last.EndLine >= m.line-panicJoinLines && m.last.Kind != Panic {
			// Lines between a report's end and its panic belong to it
			// only if the panic comes; keep them aside until then.
			m.last.pending = append(m.last.pending, raw)
		}
		return nil
	}
	if h.kind == Panic && m.last != nil && m.last.EndLine >= m.line-panicJoinLines && m.last.Kind != Panic {
		c := m.last
		c.lines = append(c.lines, c.pending...)
		c.pending = nil
		c.add(raw, m.line)
		c.Fatal = true
		c.Complete = false
		m.open, m.openEnd, m.last = c, endPanic, nil
		return nil
	}
	if l := m.last; l != nil {
		// No panic joins it now: its report is all that is kept of it.
		l.lines, l.pending = nil, nil
	}
	c := &Crash{Kind: h.kind, Fatal: h.fatal, StartLine: m.line, Count: 1}
	c.add(raw, m.line)
	c.header = match
	m.open, m.openEnd, m.last = c, h.end, nil
	return c
}

func (c *Crash) add(raw string, line int) {
	c.lines = append(c.lines, raw)
	c.bytes += len(raw)
	c.EndLine = line
}

// cutLine is line as the monitor keeps and scans it: at most
// maxLineBytes, its first and last halves around a note of the cut.
// The note ends in no "]": what follows it is no kernel message's start.
func cutLine(line string) string {
	if len(line) <= maxLineBytes {
		return line
	}
	half := maxLineBytes / 2
	return line[:half] + fmt.Sprintf(" <rdmabot: %d bytes cut> ", len(line)-2*half) + line[len(line)-half:]
}

// findHeader is the first header, in the order of headers, that starts
// a kernel message in text, and its submatches.
func findHeader(text string) (*header, []string) {
	at := starts(text)
	for i := range headers {
		h := &headers[i]
		for _, p := range at {
			if !strings.HasPrefix(text[p:], h.prefix) {
				continue
			}
			if m := h.re.FindStringSubmatch(text[p:]); m != nil {
				return h, m
			}
		}
	}
	return nil, nil
}

// starts are where a kernel message may start in text: after leading
// space, or after a "]" and space (a printk timestamp, when other output
// shares the line); the first and last maxStarts/2 of them.
func starts(text string) []int {
	const space = " \t\n\f\r" // the regexp package's \s
	at := []int{len(text) - len(strings.TrimLeft(text, space))}
	for i := 0; ; {
		j := strings.IndexByte(text[i:], ']')
		if j < 0 {
			break
		}
		i += j + 1
		if k := len(text) - len(strings.TrimLeft(text[i:], space)); k > i {
			at = append(at, k)
		}
	}
	if len(at) > maxStarts {
		at = append(at[:maxStarts/2], at[len(at)-maxStarts/2:]...)
	}
	return at
}

func (m *Monitor) close(complete bool) {
	c := m.open
	m.open = nil
	c.Complete = complete
	c.Title = title(c)
	c.Report = strings.Join(c.lines, "\n") + "\n"
	if prev, ok := m.byTitle[c.Title]; ok && prev != c {
		prev.Count++
		m.last = nil
		return
	}
	if m.byTitle[c.Title] == nil {
		kept := 0
		for _, k := range m.crashes {
			if k.Fatal == c.Fatal {
				kept++
			}
		}
		if kept >= maxCrashes {
			return
		}
		m.byTitle[c.Title] = c
		m.crashes = append(m.crashes, c)
	}
	m.last = c
}

// Pending reports whether a report is open: its trace has not ended yet.
func (m *Monitor) Pending() bool { return m.open != nil }

// Crashes returns the reports so far, in order of appearance. An open
// report is included as it stands (not complete).
func (m *Monitor) Crashes() []Crash {
	out := make([]Crash, 0, len(m.crashes)+1)
	for _, c := range m.crashes {
		out = append(out, c.export())
	}
	if o := m.open; o != nil {
		if prev, ok := m.byTitle[title(o)]; ok && prev != o {
			return out
		}
		snap := *o
		snap.Title = title(o)
		snap.Report = strings.Join(o.lines, "\n") + "\n"
		out = append(out, snap.export())
	}
	return out
}

// Fatal returns the first fatal crash so far, open or closed, if any.
func (m *Monitor) Fatal() (Crash, bool) {
	for _, c := range m.Crashes() {
		if c.Fatal {
			return c, true
		}
	}
	return Crash{}, false
}

func (c *Crash) export() Crash {
	e := *c
	e.lines, e.pending, e.header = nil, nil, nil
	return e
}

// Scan reads a whole console and returns its crashes.
func Scan(r io.Reader) ([]Crash, error) {
	m := NewMonitor()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		m.Line(sc.Text())
	}
	if m.open != nil {
		m.close(false)
	}
	return m.Crashes(), sc.Err()
}
