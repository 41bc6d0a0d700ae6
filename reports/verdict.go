package reports

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"strings"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/reports/stats"
)

// Input is everything reports needs to judge one series version and to
// answer it. The bot fills it from lore, builder and lab; reports knows
// none of those packages.
type Input struct {
	Thread Thread
	Base   Base
	Build  BuildInfo
	Test   TestInfo

	// Metrics hold per-run, per-iteration samples of base and candidate.
	Metrics []stats.Metric

	// The failure of a stage before the lab, or of the candidate's boot,
	// as the engine decided it (the bot stores the outcome, and the
	// account in reports.Detail): what the reply of that outcome shows.
	// Judge decides only on what the lab measured.
	Apply      *ApplyFailure
	BuildFail  *BuildFailure
	Boot       *BootFailure
	Corruption *Corruption
	// Crashes seen on the consoles of base and candidate runs.
	BaseCrashes, CandCrashes []Crash
	// BaseHealth and CandHealth are the transport's counts, one map per
	// boot that reported them (HealthCounters names the keys).
	BaseHealth, CandHealth []map[string]int
	// Pressure is the Send Queue pressure profile's boots, when it ran.
	Pressure *PressureRuns
	// Fstests is the fstests profile's boots, when it ran.
	Fstests *FstestsRuns
	// Unchanged is a PASS decided before any boot: the series changes
	// no generated code.
	Unchanged *UnchangedCode
	// Patch is the 1-based patch of the series a failure is in, whose
	// mail the reply answers; 0 answers the series (its cover letter).
	Patch int
	// FirstBad is what testing the series' prefixes found, when the
	// bot did (several patches, a failing verdict).
	FirstBad *FirstBad
	// Fix says which reported test the series reran, when it closes a
	// report of the bot's (a fix follow-up).
	Fix *FixFollowUp
}

// PressureRuns are the pressure profile's counts, one map per boot of
// each side that reported them, and what the profile ran ("rxe and siw,
// 24 readers ..."), for the reply.
type PressureRuns struct {
	Base, Cand []map[string]int
	Words      string
}

// FixFollowUp is a reported test rerun with a fix.
type FixFollowUp struct {
	Test     int64        // the reported test
	Verdict  flow.Outcome // its verdict
	Now      flow.Outcome // the verdict with the fix
	URL      string       // the reported test's page
	ReplyURL string       // the report the fix's Closes: names ("" when unknown)
	Culprit  string       // the commit its Fixes: names, when that named the report
	// OnTop: applied on top of the reported series, or of Head; false:
	// in its place, on its base (a new version of it).
	OnTop bool
	// Head is the mainline tree and head the regression was found in
	// ("" when a series was reported).
	Head      string
	Confirmed bool
}

// Sentence says what the fix was tested against and whether the
// reported failure is gone.
func (f *FixFollowUp) Sentence() string {
	var b strings.Builder
	switch {
	case f.Culprit != "":
		fmt.Fprintf(&b, "This series fixes %s, which rdmabot's bisection blamed for a %s (test %d).", f.Culprit, f.Verdict, f.Test)
	case f.ReplyURL != "":
		fmt.Fprintf(&b, "This series closes rdmabot's report %s (%s in test %d).", f.ReplyURL, f.Verdict, f.Test)
	default:
		fmt.Fprintf(&b, "This series closes rdmabot's report of test %d (%s).", f.Test, f.Verdict)
	}
	b.WriteString(" It was tested as that test was, on the same base, ")
	switch {
	case f.OnTop && f.Head != "":
		fmt.Fprintf(&b, "applied on %s, the head the regression was found in. ", f.Head)
	case f.OnTop:
		b.WriteString("applied on top of the reported series. ")
	case f.Head != "":
		fmt.Fprintf(&b, "applied on the base (it does not apply on %s, the head the regression was found in). ", f.Head)
	default:
		b.WriteString("applied in place of the reported series (it does not apply on top of it). ")
	}
	switch {
	case f.Confirmed:
		gone := map[flow.Outcome]string{flow.Regression: "the regression is gone", flow.Crash: "the kernel no longer crashes",
			flow.BuildFailed: "the kernel builds and the test passes"}[f.Verdict]
		if gone == "" {
			gone = "the test passes"
		}
		fmt.Fprintf(&b, "Confirmed fixed: %s.", gone)
	case f.Now == f.Verdict:
		fmt.Fprintf(&b, "Not fixed: the verdict is still %s.", f.Now)
	default:
		fmt.Fprintf(&b, "Not confirmed fixed: the verdict is now %s.", f.Now)
	}
	// Last, with nothing glued to it: a reader's mailer links it whole.
	fmt.Fprintf(&b, " The reported test: %s", f.URL)
	return b.String()
}

// FirstBad is the outcome of testing a series' prefixes on the same base.
type FirstBad struct {
	Patch, Of int    // the first bad patch, 1-based, of Of; 0 when none was singled out
	Subject   string // its subject
	Note      string // why none was singled out
	// What it cost: prefixes tested, lab boots, minutes.
	Steps, Boots int
	Minutes      float64
}

// Sentence says what testing the prefixes found and what it cost.
func (f *FirstBad) Sentence() string {
	return f.sentence(fmt.Sprintf("%q", oneLine(f.Subject, MaxSubject)), strings.TrimSuffix(f.Note, "."))
}

// sentence is Sentence with the patch's subject and the note written
// as the reply needs them: quoted in mail, code on GitHub.
func (f *FirstBad) sentence(subject, note string) string {
	cost := fmt.Sprintf("%d %s tested", f.Steps, plural(f.Steps, "prefix", "prefixes"))
	if f.Boots > 0 {
		cost += fmt.Sprintf(", %d lab boots", f.Boots)
	}
	cost += fmt.Sprintf(", %.0f min", f.Minutes)
	if f.Patch > 0 {
		return fmt.Sprintf("Testing the series' prefixes on the same base (%s) found the first bad patch: patch %d/%d, %s. This reply answers that patch.",
			cost, f.Patch, f.Of, subject)
	}
	return fmt.Sprintf("Testing the series' prefixes on the same base (%s) did not single out one patch: %s.", cost, note)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Thread is the posting being answered.
type Thread struct {
	// Subject of the cover letter, or of the patch for a single patch.
	Subject string
	// MessageID of the cover letter or single patch, without <>.
	MessageID string
	// References is that message's own References header (its
	// ancestors), oldest first, so our reply keeps the whole chain.
	References []string
	// Patches are the patch mails, in series order.
	Patches []Patch
	Author  Address
	// Lists are the configured lists the series was posted or Cc'd to:
	// the lists whose daily reply budget a reply spends.
	Lists []string
	// Addressed are the lists and people the series' mails were sent To
	// and Cc, but its author: whom every reply in its thread copies.
	Addressed []string
	// Cc are the people a verdict in the thread copies besides those:
	// the maintainers of the touched files.
	Cc      []string
	Version int
	// LoreURL links the cover letter or single patch on lore.
	LoreURL string
	// Reviews are other bots' reviews in the thread, linked (who, URL).
	Reviews [][2]string
}

// Patch is one patch mail of a series.
type Patch struct{ MessageID, Subject string }

// Address is a mailbox.
type Address struct{ Name, Email string }

// Base is the tree the series was tested on and why that one.
type Base struct {
	Tree, Branch, SHA string
	// Reason says how the base was chosen ("base-commit trailer",
	// "index blobs", "subject tag [PATCH rdma-next]").
	Reason string
	// URL of the tree (git remote).
	URL string
}

// BuildInfo says how both kernels were built.
type BuildInfo struct {
	// SeriesURL is a branch or link with the series applied.
	SeriesURL string
	// Config describes the kernel configuration, with a link.
	Config string
	// Compiler names the compiler and binutils.
	Compiler string
}

// TestInfo says where and how the kernels were tested, in words.
type TestInfo struct {
	// Name of the test ("NFS/RDMA transfer").
	Name string
	// Lab describes the machines ("two QEMU TCG guests ...").
	Lab string
	// Test describes what one run does (file size, iterations).
	Test      string
	Reproduce string
	// Files link what a reader may want of the run, each alone (label,
	// URL): the series as applied, the .config, the build log, every
	// boot's figures.
	Files [][2]string
	// RunURL links the run page with the charts and logs.
	RunURL string
	// Limits say what the lab could not exercise of the series' code
	// (an emulated pair's soft providers), one sentence each.
	Limits []string
	// ByHand are the plain commands that redo the run without rdmabot;
	// the reply shows the steps its outcome reached.
	ByHand ByHand
}

// ByHand is a run as shell commands: get the base, apply the series,
// configure and build, and (words only: two guests are a machine's
// set-up) boot.
type ByHand struct {
	Checkout, Apply, Configure []string
	Boot                       string
}

// makeKernel is the build by hand once configured.
const makeKernel = "make -j$(nproc) bzImage"

// NewByHand is a run on base (on branch of the tree at treeURL, when
// public) with the series and, when config, the .config from files (the
// test's files URL, ending in "/"), the patched kernel booted as side.
func NewByHand(treeURL, branch, base, files, side, config string) ByHand {
	if base == "" {
		return ByHand{}
	}
	var h ByHand
	if treeURL != "" && branch != "" {
		h.Checkout = append(h.Checkout, "git fetch "+treeURL+" "+branch)
	}
	h.Checkout = append(h.Checkout, "git checkout "+base)
	h.Apply = []string{"curl -sS " + files + "series.mbox | git am"}
	if config != "" {
		h.Configure = []string{"curl -sS -o .config " + files + config, "make olddefconfig"}
	} else {
		h.Configure = []string{"# configure as the config: line above says"}
	}
	h.Boot = fmt.Sprintf("then boot it as the %s and the base kernel as its peer, two guests joined by soft-RoCE; "+
		"each runs %sguest-init.sh, which starts %sguest-labtest.sh", side, files, files)
	return h
}

// steps are the commands a reader needs to see the outcome of v for
// themselves.
func (h ByHand) steps(v *Verdict) []string {
	if len(h.Checkout) == 0 {
		return nil
	}
	if u := v.In.Unchanged; u != nil {
		return h.sameObjects(u.Objects)
	}
	o := v.Outcome
	out := append(append([]string{}, h.Checkout...), h.Apply...)
	if o == flow.ApplyFailed {
		return out
	}
	out = append(append(out, h.Configure...), makeKernel)
	if o != flow.BuildFailed && h.Boot != "" {
		for _, l := range strings.Split(wrap(h.Boot, 62), "\n") {
			out = append(out, "# "+l)
		}
	}
	return out
}

// sameObjects are the commands that compile objects without and with the
// series and compare them: configured as the full build is, with no
// kernel built or booted.
func (h ByHand) sameObjects(objects []string) []string {
	out := append(append([]string{}, h.Checkout...), h.Configure...)
	out = append(out, "make -j$(nproc) "+strings.Join(objects, " "))
	for i, o := range objects {
		out = append(out, fmt.Sprintf("cp %s /tmp/base-%d.o", o, i+1))
	}
	out = append(append(out, h.Apply...), "make -j$(nproc) "+strings.Join(objects, " "))
	for i, o := range objects {
		out = append(out, fmt.Sprintf("cmp /tmp/base-%d.o %s", i+1, o))
	}
	return out
}

// ApplyFailure is a patch that does not apply to the base.
type ApplyFailure struct {
	// Patch is the subject of the patch that failed, Index its
	// position (1-based) in the series.
	Patch string
	Index int
	File  string
	// Hunk is the failing hunk header ("@@ -120,7 +120,8 @@").
	Hunk   string
	Output string
}

// BuildFailure lists the errors of the patched build (New: the builder
// reports only the errors its own build of the series made).
type BuildFailure struct {
	// Target is the make target that failed.
	Target string
	New    []Diagnostic
	// Warnings are the compiler's warnings in the same build.
	Warnings []Diagnostic
	// Log links or names the whole build log.
	Log string
}

// Diagnostic is one compiler or linker message: its line
// ("file.c:342:9: error: ...") and the source excerpt under it.
type Diagnostic struct {
	Text    string
	Context string
}

// BootFailure is the patched kernel not coming up on the lab pair (a
// base that does not come up is the test's failure, never a reply).
type BootFailure struct {
	Title   string
	Console string
}

// Corruption is data that did not survive the round trip (cmp).
type Corruption struct {
	Base   bool
	Detail string
}

// Crash is a console signature (oops, panic, hung task, warning).
type Crash struct {
	Title   string
	Console string
	// Link is the lab profile it showed under when not the default test
	// ("a lossy link (netem ...)", "Send Queue pressure on rxe (...)"),
	// and LinkBaseRuns how many base boots ran under the same one. Load
	// says the profile is a load, not a link; Debug that it is the
	// debug profile's build of both kernels; Client that the patched
	// kernel booted on the client, beside the base on the server.
	Link         string
	LinkBaseRuns int
	Load         bool `json:",omitempty"`
	Debug        bool `json:",omitempty"`
	Client       bool `json:",omitempty"`
	// Stall: the lab saw the boot stall (a phase's deadline passed), the
	// kernel reported nothing; Boots is how many of the patched kernel's
	// boots showed this signature, Crashed how many crashed or stalled
	// whatever the signature (Confirmed).
	Stall   bool `json:",omitempty"`
	Boots   int  `json:",omitempty"`
	Crashed int  `json:",omitempty"`
}

// Mailed reports whether an outcome is ever answered: inconclusive
// comparisons and our own failures are not.
func Mailed(o flow.Outcome) bool { return o != flow.Inconclusive && o != flow.Infra }

// OffersTags reports whether a reply carries the Reported-by/Closes
// block: a failing outcome but a kernel that did not boot (a regression,
// a build failure, a crash or corrupted data) is what a separate fix
// (the series may be applied already) credits, as 0-day's replies do;
// the block says it is for a separate fix, not a new version.
func OffersTags(o flow.Outcome) bool {
	return o.Failing() && o != flow.BootFailed
}

// Verdict is the judgement of one series version.
type Verdict struct {
	Outcome flow.Outcome
	In      *Input
	// Decision holds the metric comparisons (empty before the lab ran).
	Decision stats.Decision
	// Crash is the candidate crash that the base does not show.
	Crash *Crash
	// Health is the transport's counts over the boots; a Fault in it
	// decided a REGRESSION whatever the throughput. Pressure is the same
	// over the pressure profile's boots.
	Health   *Health
	Pressure *Health
	// Functional is the fstests boots' results; failing ones decided a
	// REGRESSION (or DATA_CORRUPTION) whatever the throughput.
	Functional *Functional
	// Reason explains Infra and Inconclusive outcomes for the log.
	Reason string
}

// Judgement is a verdict as it is stored: everything Judge decided and
// nothing of the input (the bot keeps that), so that every reply renders
// the one judgement instead of judging again.
type Judgement struct {
	Outcome  flow.Outcome   `json:"outcome"`
	Reason   string         `json:"reason,omitempty"`
	Decision stats.Decision `json:"decision"`
	Crash    *Crash         `json:"crash,omitempty"`
	Health   *Health        `json:"health,omitempty"`
	Pressure *Health        `json:"pressure,omitempty"`
	Fstests  *Functional    `json:"fstests,omitempty"`
}

// Judgement is v's stored form.
func (v Verdict) Judgement() Judgement {
	return Judgement{Outcome: v.Outcome, Reason: v.Reason, Decision: v.Decision, Crash: v.Crash, Health: v.Health, Pressure: v.Pressure, Fstests: v.Functional}
}

// Verdict is the stored judgement again, answering in.
func (j Judgement) Verdict(in *Input) (Verdict, error) {
	if j.Outcome == flow.None {
		return Verdict{}, errors.New("a stored judgement without an outcome")
	}
	return Verdict{Outcome: j.Outcome, In: in, Decision: j.Decision, Crash: j.Crash, Health: j.Health, Pressure: j.Pressure, Functional: j.Fstests, Reason: j.Reason}, nil
}

// NeedMore is how many more runs per kernel the comparison wants before
// it can decide; 0 when the verdict is final (a transport fault is,
// whatever the throughput still needs).
func (v Verdict) NeedMore() int {
	if v.Fault() != nil {
		return 0
	}
	return v.Decision.More
}

// Rand is the bootstrap's generator for one series version (or any
// test, its key as MessageID), seeded from its identity: the same runs
// always give the same verdict and interval.
func Rand(t Thread) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(t.MessageID))
	return rand.New(rand.NewPCG(h.Sum64(), uint64(t.Version)))
}

// Judge decides the verdict of one series version on what the lab
// measured: a crash or corruption the base does not share, a failing
// fstests test, then the transport's counts and the metrics, which may
// ask for more runs (NeedMore); the bot then adds runs and calls Judge
// again. A failure the base shares is not the series' doing and becomes
// Infra. The stages before the lab decide their failures themselves
// (APPLY_FAILED, BUILD_FAILED, BOOT_FAILED: the bot's jobs).
func Judge(rng *rand.Rand, p stats.Policy, in *Input) Verdict {
	v := Verdict{In: in}
	// The pressure profile's counts go with a crash found under it too:
	// what the provider and the transport saw is the crash's context.
	if pr := in.Pressure; pr != nil {
		v.Pressure = judgeHealth(pr.Base, pr.Cand, pressureCounters())
		if v.Pressure != nil {
			v.Pressure.Profile = pr.Words
		}
	}
	v.Functional = judgeFstests(in.Fstests)
	if c := newCrash(in.BaseCrashes, in.CandCrashes); c != nil {
		v.Crash = c
		return v.as(flow.Crash, "")
	}
	if len(in.BaseCrashes) > 0 {
		return v.as(flow.Infra, "base kernel crashes: "+in.BaseCrashes[0].Title)
	}
	if in.Corruption != nil {
		if in.Corruption.Base {
			return v.as(flow.Infra, "base kernel corrupts data: "+in.Corruption.Detail)
		}
		return v.as(flow.DataCorruption, "")
	}
	// A functional test the base passes and the patched kernel fails
	// decides whatever the throughput, as a transport fault does.
	if v.Functional.failing() {
		if _, corrupt := v.Functional.regressed(); corrupt {
			return v.as(flow.DataCorruption, "")
		}
		return v.as(flow.Regression, "")
	}
	if len(in.Metrics) == 0 {
		// The pressure profile's evidence decides before any default
		// boot has run.
		if v.Pressure.fault() != nil {
			return v.as(flow.Regression, "")
		}
		return v.as(flow.Infra, "no metrics measured")
	}
	v.Decision = stats.Decide(rng, p, in.Metrics)
	v.Health = judgeHealth(in.BaseHealth, in.CandHealth, HealthCounters())
	if v.Fault() != nil {
		return v.as(flow.Regression, "")
	}
	if !v.Decision.Final() {
		return v.as(flow.Inconclusive, fmt.Sprintf("needs %d more runs per kernel", v.Decision.More))
	}
	worse, better, open := false, false, false
	for _, c := range v.Decision.Comparisons {
		switch c.Change {
		case stats.Worse:
			worse = true
		case stats.Better:
			better = true
		case stats.Open:
			open = true
		}
	}
	switch {
	case worse:
		return v.as(flow.Regression, "")
	case open:
		return v.as(flow.Inconclusive, fmt.Sprintf("undecided after %d runs per kernel (the budget)", v.Decision.Runs))
	case better:
		return v.as(flow.Improvement, "")
	}
	return v.as(flow.Pass, "")
}

// Fault is the transport or provider count that decided a REGRESSION
// whatever the throughput (the default test's first, then the pressure
// profile's), with the boots it was counted over; nil when none did.
func (v Verdict) Fault() *HealthCount {
	if f := v.Health.fault(); f != nil {
		return f
	}
	return v.Pressure.fault()
}

// faultHealth is the Health whose count decided (Fault), nil when none.
func (v Verdict) faultHealth() *Health {
	if v.Health.fault() != nil {
		return v.Health
	}
	if v.Pressure.fault() != nil {
		return v.Pressure
	}
	return nil
}

func (v Verdict) as(o flow.Outcome, reason string) Verdict {
	v.Outcome, v.Reason = o, reason
	return v
}

// newCrash returns the first candidate crash whose signature no base run
// shows.
func newCrash(base, cand []Crash) *Crash {
	seen := map[string]bool{}
	for _, c := range base {
		seen[Signature(c.Title)] = true
	}
	for i := range cand {
		if !seen[Signature(cand[i].Title)] {
			return &cand[i]
		}
	}
	return nil
}

var (
	hexRe   = regexp.MustCompile(`0x[0-9a-fA-F]+|\b[0-9a-f]{8,}\b`)
	digitRe = regexp.MustCompile(`[0-9]+`)
)

// Signature normalises a crash title so that the same crash matches
// across runs: addresses, PIDs, CPU numbers and timings vary.
// "INFO: task dd:174 blocked for more than 122 seconds" and the same with
// task dd:180 are one signature.
func Signature(title string) string {
	s := hexRe.ReplaceAllString(strings.TrimSpace(title), "X")
	return digitRe.ReplaceAllString(s, "N")
}
