package bot

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// The bot drives the other stages through these small interfaces, declared
// here where they are used; adapters in cmd/rdmabot wire the real stages.

// Series is a patch series as the bot carries it between stages.
type Series struct {
	MsgID string `json:"msgid"` // cover letter, or first patch when there is none
	// Root is the Message-ID the series' replies answer (the cover
	// letter's, or the first patch's), when MsgID is not it.
	Root    string `json:"root,omitempty"`
	Version int    `json:"version"`
	Subject string `json:"subject"`
	Author  string `json:"author"`
	Link    string `json:"link"`
	List    string `json:"list,omitempty"` // list address the reply goes to
	Tree    string `json:"tree,omitempty"` // the tree the series names, if any
	// Branch is the branch of Tree a command asked for ("": its first).
	Branch  string   `json:"branch,omitempty"`
	Patches [][]byte `json:"patches"`         // raw messages in order
	Cover   []byte   `json:"cover,omitempty"` // raw cover letter, if any
	// Incomplete, set by the ingester, says which patches never arrived
	// within the grace period: the series is answered with that, not
	// tested.
	Incomplete string `json:"incomplete,omitempty"`
	// Closes are the Message-IDs its patches' Closes: trailers name.
	// When one is a reply of the bot's that reported a failure, the
	// series is a fix of it and reruns that test (a fix follow-up).
	Closes []string `json:"closes,omitempty"`
	// Fixes are the commits (abbreviated hashes) its patches' Fixes:
	// trailers name: one a mainline bisection of the bot's blamed makes
	// the series a fix of that regression, rerun the same way.
	Fixes []string `json:"fixes,omitempty"`
	// Request, set by the ingester, is the command in a reply that
	// brought the series back: a test asked for by mail.
	Request *MailRequest `json:"-"`
}

// MailRequest is a "#rdmabot test|retest" line in a reply to a series.
// The ingester decides who may ask (the series' author, the addresses
// MAINTAINERS lists for its files, lore.command_allow); Refused says why
// not. Each is acted on once, keyed by its Message-ID.
type MailRequest struct {
	MsgID      string   `json:"msgid"`                // the reply holding the command
	References []string `json:"references,omitempty"` // its References, to answer it in place
	From       string   `json:"from"`                 // its sender's address
	Name       string   `json:"name,omitempty"`       // and name
	Line       string   `json:"line"`                 // the command as written
	// Verb is CommandDispute... for a dispute, "" for a test; Note is
	// what the dispute says.
	Verb    string `json:"verb,omitempty"`
	Note    string `json:"note,omitempty"`
	Refused string `json:"refused,omitempty"` // why it is not done; "" = do it
}

// The disputes a mail command may make of the bot's report in its
// thread (lore's "#rdmabot invalid" and "#rdmabot dup").
const (
	CommandDisputeInvalid = "invalid"
	CommandDisputeDup     = "dup"
)

// Ingester finds new, complete, relevant series. It keeps its own place
// in the mail; it may hand a series over again (after a crash, or when
// its window still holds it), and the bot's unique test keys drop what
// is already queued or tested.
type Ingester interface {
	Poll(ctx context.Context) ([]Series, error)
}

// SeriesFetcher fetches one thread by Message-ID or lore URL.
type SeriesFetcher interface {
	Fetch(ctx context.Context, ref string) (Series, error)
}

// MboxReader assembles the series in an mbox file.
type MboxReader interface {
	ReadMbox(ctx context.Context, mbox []byte) (Series, error)
}

// Base is the commit a series is tested on.
type Base struct {
	Tree   string `json:"tree"`
	Commit string `json:"commit"`
	// Reason says how the base was chosen; every report states it.
	Reason string `json:"reason,omitempty"`
	// Branch of Tree the base is on ("" when found only by id).
	Branch string `json:"branch,omitempty"`
}

// Builder applies and builds. Apply and Build errors that are not infra
// errors are the patch's fault: "does not apply", BUILD_FAILED.
type Builder interface {
	SelectBase(ctx context.Context, s Series) (Base, error)
	Apply(ctx context.Context, base Base, s Series, trace io.Writer) (commit string, err error)
	// Build builds tree at commit (incrementally) and returns a directory
	// holding the kernel the lab boots.
	Build(ctx context.Context, tree, commit string, trace io.Writer) (dir string, err error)
	// KernelKey names the kernel Build would make: everything that decides
	// it (the source tree, the configuration, the toolchain), so a changed
	// config fragment or compiler is never answered by an old kernel.
	KernelKey(ctx context.Context, tree, commit string) (string, error)
}

// Trees fetches branches, reverts commits and locates repositories.
type Trees interface {
	// Fetch updates a tree's branches from its URL.
	Fetch(ctx context.Context, tree string) error
	Head(ctx context.Context, tree, ref string) (commit string, err error)
	Revert(ctx context.Context, tree, onto, commit string) (string, error)
	GitDir(tree string) (string, error)
}

// Boot is what one lab boot runs.
type Boot struct {
	// Dir holds the kernel under test.
	Dir string
	// Trusted, when set, holds the series' base kernel, booted on the
	// pair's other side than Side: the kernel under test is code from
	// anyone, so the side that measures and checks the transfer runs a
	// kernel the series did not write. Empty: Dir's kernel boots on both
	// sides (a base, a mainline head, a bisection step).
	Trusted string
	// Side is "server" or "client": where Dir's kernel boots beside
	// Trusted (Lab.CandidateSide).
	Side string
	// Debug holds Dir's commit built for the debug profile (KASAN,
	// lockdep, line tables: Stages.DebugBuild); "" when the test has no
	// debug kernels. The debug profile boots it in Dir's place.
	Debug string
}

// KernelOn is the directory of the kernel that booted on the pair's side
// role ("server", "client").
func (b Boot) KernelOn(role string) string {
	if b.Trusted != "" && role != b.Side {
		return b.Trusted
	}
	return b.Dir
}

// Lab runs the transfer test n times on a leased pair. A crash during a
// run is a sample with Crash set; an error that is not an infra error
// means the kernel did not boot (the kernel's fault).
type Lab interface {
	Run(ctx context.Context, pair string, boot Boot, n int, trace io.Writer) ([]flow.Sample, error)
	// CandidateSide is the side of the pair a series' kernel boots on,
	// beside the trusted base: the one its patches act on.
	CandidateSide(s Series) string
}

// Profile is a lab profile besides the default test: the test over a
// lossy link (lab.lossy), where flushed completions, drains and teardown
// run their error paths, or the Send Queue pressure test
// (lab.pressure). Its boots come first in a test's first round, base and
// candidate alternating; their figures are never compared with the
// default test's, only their crashes and the evidence the decider reads
// in them.
type Profile interface {
	// Name is Sample.Profile of its boots (flow.ProfileLossy ...).
	Name() string
	// Shapes says whether the profile can run on pair at all.
	Shapes(pair string) bool
	// Why names what in the series asks for the profile ("" = nothing).
	Why(s Series) string
	// Boots per side.
	Boots() int
	// Run is the i-th boot (0-based) of k: one sample, which may name a
	// finer profile (its provider).
	Run(ctx context.Context, pair string, k Boot, i int, trace io.Writer) ([]flow.Sample, error)
}

// Decision is the statistics' answer for one comparison.
type Decision struct {
	Verdict  flow.Outcome
	NeedMore int     // > 0: measure this many more runs of each side first
	Summary  string  // one paragraph: metric, change, confidence
	Metric   string  // the metric that decided a REGRESSION
	Change   float64 // its relative change (-0.48 = -48 %)
	// Detail is the decider's whole judgement (JSON), stored with the
	// test when the decision is final and handed back in Report.Detail,
	// so every reply shows this one judgement. The bot never reads it.
	Detail json.RawMessage
}

// detailOf is the structured account of a stage error, if it has one.
func detailOf(err error) string {
	var d flow.Detailed
	if errors.As(err, &d) {
		return string(d.Detail())
	}
	return ""
}

// Decider compares candidate samples against base samples. The
// comparison resamples (bootstrap), so ctx bounds it; an error is
// ctx's, never a verdict.
type Decider interface {
	Decide(ctx context.Context, base, cand []flow.Sample) (Decision, error)
}

// Report is everything a reply needs.
type Report struct {
	Key     string       `json:"key"`  // delivery happens once per key
	Kind    string       `json:"kind"` // series, ref, mainline, bisect
	Title   string       `json:"title,omitempty"`
	Verdict flow.Outcome `json:"verdict"`
	Summary string       `json:"summary"`
	Series  *Series      `json:"series,omitempty"`
	Tree    string       `json:"tree"`
	Base    string       `json:"base"`
	// BaseReason says how the base was chosen, BaseBranch where it is.
	BaseReason string `json:"base_reason,omitempty"`
	BaseBranch string `json:"base_branch,omitempty"`
	Lab        string `json:"lab,omitempty"` // the lab pair the kernels ran on
	Candidate  string `json:"candidate"`
	// BaseArtifact and CandArtifact are the built kernels' keys in the
	// artifact store ("" when none was built): what the reply can link.
	BaseArtifact string        `json:"base_artifact,omitempty"`
	CandArtifact string        `json:"cand_artifact,omitempty"`
	Log          string        `json:"log,omitempty"` // the build or apply error, the crash
	URL          string        `json:"url"`           // the dashboard page
	TraceURL     string        `json:"trace_url"`
	Origin       Origin        `json:"origin"`
	Bisect       *BisectReport `json:"bisect,omitempty"`
	// FirstBad is what testing the series' prefixes found (nil: not
	// done, bot.series_bisect).
	FirstBad *FirstBad `json:"first_bad,omitempty"`
	// Fix says which reported test this series' test reran, when its
	// Closes: named the bot's reply (nil: an ordinary test).
	Fix *FixFollowUp `json:"fix,omitempty"`
	// Detail is the verdict's structured account as the deciding stage
	// stored it (Decision.Detail, Detailed).
	Detail json.RawMessage `json:"detail,omitempty"`
	// The samples the verdict was decided on.
	BaseSamples []flow.Sample `json:"base_samples,omitempty"`
	CandSamples []flow.Sample `json:"cand_samples,omitempty"`
}

// BisectReport is the outcome of a bisection with its confirmations.
type BisectReport struct {
	Good, Bad string
	Culprit   string
	// The culprit commit as the tree has it: its subject, its author
	// ("Name <addr>") and the other addresses that signed it off.
	CulpritTitle    string
	CulpritAuthor   string
	CulpritSignoffs []string
	Metric          string
	Change          float64
	Steps           []store.BisectStep
	Confirmed       bool
}

// FirstBad is the outcome of a bisection over a series' own patches.
type FirstBad struct {
	Patch   int    `json:"patch"` // 1-based; 0 when none was found (Summary says why)
	Commit  string `json:"commit,omitempty"`
	Summary string `json:"summary"`
	// What it cost: prefixes tested, lab boots, and the time from its
	// start to its end.
	Steps int           `json:"steps"`
	Boots int           `json:"boots"`
	Took  time.Duration `json:"took"`
}

// FixFollowUp is a test rerun with a fix: the reported test, how the fix
// went on, and whether its verdict shows the failure gone.
type FixFollowUp struct {
	Test    int64        `json:"test"`    // the reported test
	Verdict flow.Outcome `json:"verdict"` // its verdict
	URL     string       `json:"url"`     // its dashboard page
	Reply   string       `json:"reply"`   // the Message-ID of its reply, which the fix's Closes: names
	// Culprit is the commit the fix's Fixes: names, when that named the
	// report: the culprit of a mainline bisection.
	Culprit string `json:"culprit,omitempty"`
	// OnTop says the fix was applied on top of the reported series (or
	// mainline head); false: in its place, on its base (a new version).
	OnTop bool `json:"on_top"`
	// Head is the reported mainline test's tree and head ("" for a
	// series): the fix went on top of it.
	Head      string `json:"head,omitempty"`
	Confirmed bool   `json:"confirmed"`
}

// Fixed says whether a rerun's verdict shows a reported failure gone:
// it built, booted and measured no regression.
func Fixed(verdict flow.Outcome) bool { return verdict == flow.Pass || verdict == flow.Improvement }

// ReplyIndex tells which series version one of the bot's own replies
// answered (the outbox keeps them): a later series whose Closes: names
// that reply is a fix of what it reported. ok is false for a Message-ID
// that is no reply of the bot's to a series.
type ReplyIndex interface {
	Answered(ctx context.Context, replyID string) (root string, version int, ok bool, err error)
}

// Reporter renders and delivers a reply exactly once per Report.Key.
type Reporter interface {
	Deliver(ctx context.Context, r Report) error
}

// Starter is a reporter that says when a series' testing starts (a
// patchwork check "pending"), before its Deliver says how it ended. It is
// called again when the test job is retried, so it must act once per
// Report.Key.
type Starter interface {
	Started(ctx context.Context, r Report) error
}

// Origin is where a request came from and where its answer goes.
type Origin struct {
	Kind    string `json:"kind"` // mail, github, cli, mainline
	Repo    string `json:"repo,omitempty"`
	Issue   int    `json:"issue,omitempty"`
	Comment int64  `json:"comment,omitempty"`
	User    string `json:"user,omitempty"`
	// Request is the mail command that asked (Kind "mail").
	Request *MailRequest `json:"request,omitempty"`
}

// Stages are the other packages as the bot uses them.
type Stages struct {
	Ingest Ingester
	Fetch  SeriesFetcher
	Mbox   MboxReader
	Build  Builder
	Trees  Trees
	Lab    Lab
	// Profiles are the lab's profiles besides the default test, in the
	// order they boot; none when they are off.
	Profiles []Profile
	// Debug is the debug profile (lab.debug): boots of each side's debug
	// kernel (Boot.Debug), after the other profiles. DebugBuild builds
	// those kernels, in the build job, for a series Debug.Why names a
	// reason for. Both nil when it is off (or this machine builds none).
	Debug      Profile
	DebugBuild Builder
	Decide     Decider
	// Report answers every request where it came from: mail in its
	// thread, a GitHub request in its issue (Origin), new threads.
	Report Reporter
}

// infraOrInterrupted says whether a stage's failure is the bot's side
// (infrastructure, or the job's ctx ended) rather than the code under
// test's: the job then returns err to be retried instead of recording a
// verdict.
func infraOrInterrupted(ctx context.Context, err error) bool {
	return flow.IsInfra(err) || ctx.Err() != nil
}
