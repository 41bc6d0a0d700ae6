package reports

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rdmabot/rdmabot/flow"
)

// FstestsRuns are the fstests profile's boots of both sides, and what
// the profile ran in words ("fstests' default group on rxe ..."), for
// the reply.
type FstestsRuns struct {
	Base, Cand []FstestsBoot
	Words      string
	// Flaky are tests measured flaky on healthy kernels, with the rate
	// (reports.fstests_flaky): they are shown, never decide.
	Flaky map[string]string
}

// FstestsBoot is one boot's tests, and the NFS operations the boot's
// trusted server counted while they ran (0: not counted).
type FstestsBoot struct {
	Tests     []flow.TestResult
	ServerOps int64
	// Confirming: the boot ran only the tests a boot before it failed
	// (flow.Sample.Confirming).
	Confirming bool
}

// Functional is what Judge made of the fstests boots: each test's
// results on both sides, and the tests that decided.
type Functional struct {
	Words     string `json:"words,omitempty"`
	BaseBoots int    `json:"base_boots"`
	CandBoots int    `json:"cand_boots"`
	// BaseConfirmBoots and ConfirmBoots are the boots (of BaseBoots and
	// CandBoots) that ran again only the tests the patched kernel had
	// failed.
	BaseConfirmBoots int              `json:"base_confirm_boots,omitempty"`
	ConfirmBoots     int              `json:"confirm_boots,omitempty"`
	Tests            []FunctionalTest `json:"tests"`
	// Unseen says the patched client reported its tests run while the
	// trusted server saw too few NFS operations for them: its results
	// are not believed, and that is its failure.
	Unseen string `json:"unseen,omitempty"`
	// Secs is the patched kernel's time in the tests, over its boots.
	Secs float64 `json:"secs,omitempty"`
}

// FunctionalTest is one test's results: "pass", "fail", "notrun" or
// "none" (no result) per boot of each side, and what decided.
type FunctionalTest struct {
	Name string   `json:"name"`
	Base []string `json:"base"`
	Cand []string `json:"cand"`
	Secs float64  `json:"secs,omitempty"` // the patched kernel's, summed over its boots
	// Class is what the results say: Regressed (passed on every base
	// boot, failed on every patched boot it ran in), KnownFailing (fails
	// on the base), Flaky (set aside, Rate measured on healthy kernels),
	// or "" (passed, or not run alike).
	Class string `json:"class,omitempty"`
	Rate  string `json:"rate,omitempty"`
	// Why is the patched kernel's evidence: its first failure's
	// .out.bad diff and fsx lines, or the reason it was not run.
	Why     string `json:"why,omitempty"`
	Corrupt bool   `json:"corrupt,omitempty"`
}

// The classes of a FunctionalTest.
const (
	Regressed    = "regressed"
	KnownFailing = "known failing on the base"
	Flaky        = "flaky"
)

// noResult is a boot's status for a test the other side's boots ran
// and it reported nothing of: a patched boot that stops reporting a
// test has failed it.
const noResult = "none"

// unseenRatio is the least share of the base's NFS operations (as its
// trusted server counted them) a patched client's boot must make the
// trusted server count for its reported results to be believed: the
// group does the same I/O on both, and a client that reports tests it
// never ran makes a fraction of them.
const unseenRatio = 0.5

// judgeFstests compares the fstests boots of both sides; nil when
// either side has none.
func judgeFstests(r *FstestsRuns) *Functional {
	if r == nil || len(r.Base) == 0 || len(r.Cand) == 0 {
		return nil
	}
	f := &Functional{Words: r.Words, BaseBoots: len(r.Base), CandBoots: len(r.Cand),
		BaseConfirmBoots: len(confirmingOnly(r.Base, true)), ConfirmBoots: len(confirmingOnly(r.Cand, true))}
	var names []string
	seen := map[string]bool{}
	for _, b := range append(append([]FstestsBoot(nil), r.Base...), r.Cand...) {
		for _, t := range b.Tests {
			if !seen[t.Name] {
				seen[t.Name] = true
				names = append(names, t.Name)
			}
		}
	}
	sort.Strings(names)
	for _, name := range names {
		ft := FunctionalTest{Name: name}
		for _, b := range r.Base {
			st, _ := statusIn(b, name)
			if st == noResult && b.Confirming {
				continue // not asked to run it again
			}
			ft.Base = append(ft.Base, st)
		}
		for _, b := range r.Cand {
			st, t := statusIn(b, name)
			if st == noResult && b.Confirming {
				continue // not asked to run it again
			}
			ft.Cand = append(ft.Cand, st)
			ft.Secs += t.Secs
			f.Secs += t.Secs
			if ft.Why == "" && (st == flow.TestFail || st == flow.TestNotRun) {
				ft.Why = t.Why
			}
			ft.Corrupt = ft.Corrupt || t.Corrupt
		}
		ft.Class, ft.Rate = classify(ft, r.Flaky)
		f.Tests = append(f.Tests, ft)
	}
	f.Unseen = unseen(r)
	return f
}

// statusIn is name's status in boot b, and its result ("none" when the
// boot reported no result for it).
func statusIn(b FstestsBoot, name string) (string, flow.TestResult) {
	for _, t := range b.Tests {
		if t.Name == name {
			return t.Status, t
		}
	}
	return noResult, flow.TestResult{Name: name, Why: "the boot reported no result for it"}
}

// classify says what a test's results decide: a test that passed on
// every base boot and did not pass on any patched boot (failed, reported
// nothing, or was not run where the base ran it: the same userland runs
// on both) regressed; one that failed on a base boot is the base's.
func classify(t FunctionalTest, flaky map[string]string) (class, rate string) {
	switch {
	case slices.ContainsFunc(t.Base, func(s string) bool { return s == flow.TestFail || s == noResult }):
		return KnownFailing, ""
	case slices.ContainsFunc(t.Base, func(s string) bool { return s != flow.TestPass }):
		// Not run on a base boot: nothing to compare with.
		return "", ""
	case !slices.ContainsFunc(t.Cand, func(s string) bool { return s != flow.TestPass }):
		return "", ""
	case flaky[t.Name] != "":
		return Flaky, flaky[t.Name]
	case slices.Contains(t.Cand, flow.TestPass):
		// Passed on another patched boot: intermittent, shown, not decided.
		return "", ""
	}
	return Regressed, ""
}

// unseen is why the patched boots' results are not believed ("" when
// they are): their trusted server counted under unseenRatio of the
// base's NFS operations while the patched client reported no failure.
// A boot that ran only the failed tests again is held to the base's
// boots that did the same.
func unseen(r *FstestsRuns) string {
	for _, confirming := range []bool{false, true} {
		if why := unseenAmong(confirmingOnly(r.Base, confirming), confirmingOnly(r.Cand, confirming)); why != "" {
			return why
		}
	}
	return ""
}

// confirmingOnly are the boots whose Confirming is confirming.
func confirmingOnly(boots []FstestsBoot, confirming bool) []FstestsBoot {
	var out []FstestsBoot
	for _, b := range boots {
		if b.Confirming == confirming {
			out = append(out, b)
		}
	}
	return out
}

// unseenAmong is unseen for boots that ran the same tests.
func unseenAmong(baseBoots, candBoots []FstestsBoot) string {
	med := func(boots []FstestsBoot) int64 {
		var ops []int64
		for _, b := range boots {
			if b.ServerOps > 0 {
				ops = append(ops, b.ServerOps)
			}
		}
		if len(ops) == 0 || len(ops) < len(boots) {
			return 0 // a boot not counted: nothing to hold the others to
		}
		slices.Sort(ops)
		return ops[len(ops)/2]
	}
	// A patched server counts nothing (0): its client is the trusted one.
	var counted []FstestsBoot
	for _, b := range candBoots {
		if b.ServerOps > 0 {
			counted = append(counted, b)
		}
	}
	base := med(baseBoots)
	if base == 0 || len(counted) == 0 {
		return ""
	}
	for _, b := range counted {
		if float64(b.ServerOps) < unseenRatio*float64(base) {
			return fmt.Sprintf("the patched client reported its tests run, but the trusted server counted %d NFS operations during them, against a median of %d in the base's boots", b.ServerOps, base)
		}
	}
	return ""
}

// regressed are the tests that decided, in order; corrupt says one of
// them read back bad data.
func (f *Functional) regressed() (names []string, corrupt bool) {
	if f == nil {
		return nil, false
	}
	for _, t := range f.Tests {
		if t.Class == Regressed {
			names = append(names, t.Name)
			corrupt = corrupt || t.Corrupt
		}
	}
	return names, corrupt
}

// failing says the fstests boots decide a failing verdict.
func (f *Functional) failing() bool {
	names, _ := f.regressed()
	return len(names) > 0 || (f != nil && f.Unseen != "")
}

// sentence is the verdict's sentence when the fstests boots decided.
func (f *Functional) sentence(bot string, o flow.Outcome) string {
	names, _ := f.regressed()
	where := f.what()
	if len(names) == 0 {
		return fmt.Sprintf("%s could not believe the fstests results of this series (%s): %s.", bot, where, f.Unseen)
	}
	if o == flow.DataCorruption {
		return fmt.Sprintf("%s noticed data corruption with this series: fstests %s read back data different from what it wrote, and passed on the base (%s).",
			bot, strings.Join(names, ", "), where)
	}
	return fmt.Sprintf("%s noticed fstests failing with this series: %s failed on the patched kernel and passed on %s of the base (%s).",
		bot, strings.Join(names, ", "), allBoots(f.BaseBoots), where)
}

// what names what the boots ran: the lab's words, or plain fstests.
func (f *Functional) what() string {
	if f.Words != "" {
		return f.Words
	}
	return "fstests over NFS/RDMA"
}

// allBoots is "the one boot" or "all n boots".
func allBoots(n int) string {
	if n == 1 {
		return "the one boot"
	}
	return fmt.Sprintf("all %d boots", n)
}

// FstestsText is the replies' (and the dashboard's) account of the fstests boots: a sentence,
// a row per test (results on base and patched boots, the patched time,
// what the results say), and each deciding test's evidence.
func FstestsText(f *Functional) (para string, rows [][]string, evidence [][2]string) {
	rows = [][]string{{"fstests", "base", "patched", "time", ""}}
	var notrun []string
	for _, t := range f.Tests {
		note := t.Class
		if t.Rate != "" {
			note += " (" + t.Rate + ")"
		}
		rows = append(rows, []string{t.Name, strings.Join(t.Base, " "), strings.Join(t.Cand, " "), fmt.Sprintf("%.0fs", t.Secs), note})
		if t.Class == Regressed && t.Why != "" {
			evidence = append(evidence, [2]string{t.Name + " on the patched kernel:", excerpt(t.Why, 25)})
		}
		if slices.Contains(t.Cand, flow.TestNotRun) && t.Why != "" {
			notrun = append(notrun, t.Name+": "+oneLine(t.Why, 80))
		}
	}
	what := f.what()
	again := ""
	if f.BaseConfirmBoots+f.ConfirmBoots > 0 {
		which := fmt.Sprintf("%d of each", f.ConfirmBoots)
		if f.BaseConfirmBoots != f.ConfirmBoots {
			which = fmt.Sprintf("%d of the base's and %d of the patched kernel's", f.BaseConfirmBoots, f.ConfirmBoots)
		}
		again = fmt.Sprintf(" (%s running again only the tests the patched kernel had failed, to confirm them)", which)
	}
	para = fmt.Sprintf("%s ran on %s of the base and %s of the patched kernel%s, %.0f s of tests on the patched kernel; each column is one boot's result.",
		what, Boots(f.BaseBoots), Boots(f.CandBoots), again, f.Secs)
	if len(notrun) > 0 {
		para += " Not run on NFS: " + strings.Join(notrun, "; ") + "."
	}
	return para, rows, evidence
}
