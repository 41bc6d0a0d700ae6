package console

import (
	"regexp"
	"strings"
)

var (
	// bugDescEnd cuts a BUG description before its variable part
	// (addresses, task names, source locations).
	bugDescEnd   = regexp.MustCompile(`(, |: | at | for address| - ).*$`)
	hexWord      = regexp.MustCompile(`\b(0x)?[0-9a-f]{8,}\b`)
	callTraceRe  = regexp.MustCompile(`Call Trace:|<TASK>`)
	irqEndRe     = regexp.MustCompile(`</IRQ>`)
	spaceRunRe   = regexp.MustCompile(`\s+`)
	panicTrailRe = regexp.MustCompile(`\s*\]?---\s*$`)
)

// title names a crash as syzkaller does: the kind's fixed words plus the
// function that matters (the blocked task's first non-waiting frame, the
// faulting RIP, the function that WARNed).
func title(c *Crash) string {
	h := c.header
	switch c.Kind {
	case Hang:
		return "INFO: task hung in " + or(stackFunc(c.lines, false), "unknown")
	case SoftLockup:
		return "BUG: soft lockup in " + or(guilty(c.lines), "unknown")
	case RCUStall:
		return "INFO: rcu detected stall in " + or(stackFunc(c.lines, true), ripFunc(c.lines), "unknown")
	case KASAN:
		access := ""
		for _, l := range c.lines {
			if m := accessRe.FindStringSubmatch(stripTime(l)); m != nil {
				access = " " + m[1]
				break
			}
		}
		return h[1] + ": " + h[2] + access + " in " + or(stackFunc(c.lines, false), cleanFunc(h[3]))
	case Lockdep:
		return "possible deadlock in " + or(lockdepFunc(c.lines), stackFunc(c.lines, false), "unknown")
	case ODEBUG:
		// The object's user, not the timer or work helpers that checked it.
		fn := ""
		for _, f := range frames(c.lines) {
			if !skipped(f, false) && !odebugHelpers.MatchString(f) {
				fn = f
				break
			}
		}
		return "WARNING: ODEBUG bug in " + or(fn, "unknown")
	case UBSAN:
		return "UBSAN: " + h[1] + " in " + or(stackFunc(c.lines, false), h[2])
	case GPF:
		return "general protection fault in " + or(guilty(c.lines), "unknown")
	case Bug:
		if strings.HasPrefix(h[0], "kernel BUG at") {
			return "kernel BUG in " + or(guilty(c.lines), h[1])
		}
		desc := strings.TrimSpace(bugDescEnd.ReplaceAllString(h[1], ""))
		desc = strings.TrimSpace(hexWord.ReplaceAllString(desc, ""))
		if fn := guilty(c.lines); fn != "" {
			return "BUG: " + desc + " in " + fn
		}
		return "BUG: " + desc
	case Warning:
		if len(h) > 1 && strings.HasPrefix(h[0], "WARNING: CPU:") {
			// The WARN's own function unless it is a helper (srcu,
			// refcount, list debugging...): then who called it.
			return "WARNING in " + or(guilty(c.lines), cleanFunc(h[1]))
		}
		desc := strings.TrimSpace(spaceRunRe.ReplaceAllString(h[1], " "))
		if fn := stackFunc(c.lines, false); fn != "" {
			return "WARNING: " + desc + " in " + fn
		}
		return "WARNING: " + desc
	case Oops:
		return "Oops in " + or(guilty(c.lines), "unknown")
	case Panic:
		msg := panicTrailRe.ReplaceAllString(strings.TrimSpace(h[1]), "")
		return "kernel panic: " + hexWord.ReplaceAllString(msg, "ADDR")
	}
	return string(c.Kind)
}

func or(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// guilty is the faulting function (the RIP) unless it is a helper such
// as a lock, a copy or a list check; then the first interesting caller.
func guilty(lines []string) string {
	if fn := ripFunc(lines); fn != "" && !skipped(fn, false) {
		return fn
	}
	return stackFunc(lines, false)
}

// ripFunc is the function of the first kernel RIP in the report.
func ripFunc(lines []string) string {
	for _, l := range lines {
		if m := ripRe.FindStringSubmatch(l); m != nil {
			return cleanFunc(m[1])
		}
	}
	return ""
}

// stackFunc is the first interesting reliable frame of the first call
// trace. afterIRQ skips an interrupt stack, where stall detectors print
// themselves, to the task that was interrupted.
func stackFunc(lines []string, afterIRQ bool) string {
	start := -1
	for i, l := range lines {
		if callTraceRe.MatchString(l) {
			start = i
			break
		}
	}
	if start < 0 {
		// KMSAN and KFENCE print their stack right under the header.
		start = 0
	}
	if afterIRQ {
		for i := start; i < len(lines); i++ {
			if irqEndRe.MatchString(lines[i]) {
				start = i
				break
			}
		}
	}
	hang := strings.Contains(lines[0], "blocked")
	for _, l := range lines[start:] {
		m := frameRe.FindStringSubmatch(stripTime(l))
		if m == nil || m[1] != "" {
			continue
		}
		fn := cleanFunc(m[2])
		if !skipped(fn, hang) {
			return fn
		}
	}
	return ""
}

var odebugHelpers = regexp.MustCompile(`timer|grab_pending|debug_`)

// frames are the reliable frames of the first call trace.
func frames(lines []string) []string {
	var out []string
	in := false
	for _, l := range lines {
		if callTraceRe.MatchString(l) {
			in = true
		}
		if !in {
			continue
		}
		if m := frameRe.FindStringSubmatch(stripTime(l)); m != nil && m[1] == "" {
			out = append(out, cleanFunc(m[2]))
		}
	}
	return out
}

// skipped: frames that say how a report was printed or how a task waits,
// never what went wrong. Like syzkaller's, these match anywhere in the
// name, so titles agree with syzbot's.
func skipped(fn string, hang bool) bool {
	return uninteresting.MatchString(fn) || (hang && waiting.MatchString(fn))
}

var lockdepAcquire = regexp.MustCompile(`, at: ([A-Za-z0-9_.]+)\+0x`)

// lockdepFunc is where the task tried to take the lock that closes the
// cycle: the ", at:" of the line after "is trying to acquire".
func lockdepFunc(lines []string) string {
	for i, l := range lines {
		if strings.Contains(l, "is trying to acquire") {
			for _, n := range lines[i+1 : min(i+3, len(lines))] {
				if m := lockdepAcquire.FindStringSubmatch(n); m != nil {
					return cleanFunc(m[1])
				}
			}
		}
	}
	return ""
}

// cleanFunc drops compiler clone suffixes (.isra.0, .cold) so the title is
// stable across builds.
func cleanFunc(fn string) string {
	return syscallRe.ReplaceAllString(suffixRe.ReplaceAllString(fn, ""), "sys_")
}

// syscallRe: the wrappers SYSCALL_DEFINE makes all name the syscall.
var syscallRe = regexp.MustCompile(`^(__se_|__do_|__x64_|__ia32_)sys_`)
