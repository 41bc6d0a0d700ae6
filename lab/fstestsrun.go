package lab

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// The bounds of what an fstests client may say of one test: its console
// is the candidate's when the series changes client code.
const (
	// fstestsLogLines is the most FSTEST_LOG lines of one test
	// labtest.sh prints (client_fstests prints at most 40).
	fstestsLogLines = 48
	// fstestsWhyBytes bounds a test's Why (flow.TestResult).
	fstestsWhyBytes = 4 << 10
	fstestsLineMax  = 512
)

// fstestsCorrupt are the words of fsx and the fstests programs that
// read back other data than they wrote.
var fstestsCorrupt = regexp.MustCompile(`BAD DATA|[Mm]iscompare|data mismatch`)

// fstestsResults follows one client's fstests markers (FSTEST_LOG lines
// of a test, then its FSTEST line) against the group it was given, in
// its order.
type fstestsResults struct {
	group []string
	tests []flow.TestResult
	log   []string // the evidence of the test running now
	// last is the host's time of the previous test's end (first: the
	// mount): a test's Secs are the host's, never the guest's word.
	last time.Time
}

// fstestsTrailer is the time stamp mark() ends each marker with.
var fstestsTrailer = regexp.MustCompile(` t=[0-9.]+$`)

// rawArg is the text of a marker line after " key=" up to its time
// stamp: evidence and reasons are quoted from files the client wrote,
// whose "a=b" words parseMarker would take for keys.
func rawArg(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	return fstestsTrailer.ReplaceAllString(line[i+len(key)+2:], "")
}

// note takes one FSTEST or FSTEST_LOG marker (m, its line); a marker
// that is not the next of the group, or malformed, is the reason
// returned, for the side's protocol to refuse.
func (f *fstestsResults) note(m marker, line string, at time.Time) string {
	if len(f.tests) >= len(f.group) {
		return fmt.Sprintf("%s after the group's %d tests", m.Event, len(f.group))
	}
	next := f.group[len(f.tests)]
	if m.Args["name"] != next {
		return fmt.Sprintf("%s for %q where the group's next test is %s", m.Event, m.Args["name"], next)
	}
	if m.Event == "FSTEST_LOG" {
		if len(f.log) >= fstestsLogLines {
			return fmt.Sprintf("more than %d FSTEST_LOG lines for %s", fstestsLogLines, next)
		}
		l := rawArg(line, "line")
		if len(l) > fstestsLineMax {
			l = l[:fstestsLineMax]
		}
		f.log = append(f.log, l)
		return ""
	}
	r := flow.TestResult{Name: next, Status: m.Args["status"]}
	// The guest's own seconds (its clock runs with QEMU's instruction
	// count, not the host's) must be well formed; the host's count.
	if secs, err := strconv.ParseFloat(m.Args["secs"], 64); err != nil || secs < 0 {
		return fmt.Sprintf("FSTEST for %s with secs %q", next, m.Args["secs"])
	}
	if !f.last.IsZero() {
		r.Secs = math.Round(at.Sub(f.last).Seconds()*10) / 10
	}
	f.last = at
	switch r.Status {
	case flow.TestPass:
		if len(f.log) > 0 {
			return fmt.Sprintf("FSTEST_LOG lines for %s, which passed", next)
		}
	case flow.TestNotRun:
		r.Why = rawArg(line, "why")
	case flow.TestFail:
		r.Why = strings.Join(f.log, "\n")
		r.Corrupt = fstestsCorrupt.MatchString(r.Why)
	default:
		return fmt.Sprintf("FSTEST for %s with status %q", next, r.Status)
	}
	if len(r.Why) > fstestsWhyBytes {
		r.Why = r.Why[:fstestsWhyBytes] + "\n[rdmabot: cut at 4 KiB]"
	}
	f.tests = append(f.tests, r)
	f.log = nil
	return ""
}

// missing says how many of the group's tests reported nothing ("" when
// all did).
func (f *fstestsResults) missing() string {
	if len(f.tests) == len(f.group) {
		return ""
	}
	return fmt.Sprintf("%d of %d fstests ran", len(f.tests), len(f.group))
}

// noteFstest takes a client's FSTEST or FSTEST_LOG marker: one outside
// an fstests run, or out of its group's order, is the client's protocol
// violation.
func (r *run) noteFstest(m marker, ev consoleEvent) {
	if r.fstests == nil {
		r.proto["client"].refuse(m.Event + " in a run that is no fstests run")
		return
	}
	if r.fstests.last.IsZero() {
		r.fstests.last = r.seen["client"]["MOUNTED"]
	}
	if why := r.fstests.note(m, ev.text, ev.at); why != "" {
		r.proto["client"].refuse(why)
		return
	}
	r.lastProgress = ev.at
}

// fstestsTrace is a boot's tests for the trace: how many of each
// status, and the failures by name.
func fstestsTrace(tests []flow.TestResult) string {
	n := map[string]int{}
	var failed []string
	for _, t := range tests {
		n[t.Status]++
		if t.Status == flow.TestFail {
			failed = append(failed, t.Name)
		}
	}
	s := fmt.Sprintf("%d passed, %d failed, %d not run", n[flow.TestPass], n[flow.TestFail], n[flow.TestNotRun])
	if len(failed) > 0 {
		s += " (" + strings.Join(failed, ", ") + ")"
	}
	return s
}
