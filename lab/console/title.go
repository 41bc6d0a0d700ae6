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
		return "BUG: soft lockup in " + or(ripFunc(c.lines), stackFunc(c.lines, true), "unknown")
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
		return "KASAN: " + h[1] + access + " in " + cleanFunc(h[2])
	case UBSAN:
		return "UBSAN: " + h[1] + " in " + or(stackFunc(c.lines, false), h[2])
	case GPF:
		return "general protection fault in " + or(ripFunc(c.lines), stackFunc(c.lines, false), "unknown")
	case Bug:
		if strings.HasPrefix(h[0], "kernel BUG at") {
			return "kernel BUG in " + or(ripFunc(c.lines), stackFunc(c.lines, false), h[1])
		}
		desc := strings.TrimSpace(bugDescEnd.ReplaceAllString(h[1], ""))
		desc = strings.TrimSpace(hexWord.ReplaceAllString(desc, ""))
		if fn := or(ripFunc(c.lines), stackFunc(c.lines, false)); fn != "" {
			return "BUG: " + desc + " in " + fn
		}
		return "BUG: " + desc
	case Warning:
		if len(h) > 1 && strings.HasPrefix(h[0], "WARNING: CPU:") {
			return "WARNING in " + cleanFunc(h[1])
		}
		desc := strings.TrimSpace(spaceRunRe.ReplaceAllString(h[1], " "))
		if fn := stackFunc(c.lines, false); fn != "" {
			return "WARNING: " + desc + " in " + fn
		}
		return "WARNING: " + desc
	case Oops:
		return "Oops in " + or(ripFunc(c.lines), stackFunc(c.lines, false), "unknown")
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
		return ""
	}
	if afterIRQ {
		for i := start; i < len(lines); i++ {
			if irqEndRe.MatchString(lines[i]) {
				start = i
				break
			}
		}
	}
	for _, l := range lines[start:] {
		m := frameRe.FindStringSubmatch(stripTime(l))
		if m == nil || m[1] != "" {
			continue
		}
		fn := cleanFunc(m[2])
		if !uninteresting.MatchString(fn) {
			return fn
		}
	}
	return ""
}

// cleanFunc drops compiler clone suffixes (.isra.0, .cold) so the title is
// stable across builds.
func cleanFunc(fn string) string {
	return suffixRe.ReplaceAllString(fn, "")
}
