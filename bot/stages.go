package bot

import (
	"context"
	"errors"
	"io"

	"github.com/rdmabot/rdmabot/flow"
)

// The bot drives the other stages through these small interfaces, declared
// here where they are used; adapters in cmd/rdmabot wire the real stages.

// Ingester finds new, complete, relevant series. It keeps its own place
// in the mail; it may hand a series over again (after a crash, or when
// its window still holds it), and the bot's unique test keys drop what
// is already queued or tested.
type Ingester interface {
	Poll(ctx context.Context) ([]flow.Series, error)
}

// mailWatcher is an Ingester that can tell between polls, cheaply, that
// a local inbox holds mail no poll has read: one entry per such inbox,
// naming its newest mail (intake.Reader.UnreadLocal).
type mailWatcher interface {
	UnreadLocal(ctx context.Context) ([]string, error)
}

// SeriesFetcher fetches one thread by Message-ID or lore URL.
type SeriesFetcher interface {
	Fetch(ctx context.Context, ref string) (flow.Series, error)
}

// MboxReader assembles the series in an mbox file.
type MboxReader interface {
	ReadMbox(ctx context.Context, mbox []byte) (flow.Series, error)
}

// Builder applies and builds. Apply and Build errors that are not infra
// errors are the patch's fault: "does not apply", BUILD_FAILED.
type Builder interface {
	SelectBase(ctx context.Context, s flow.Series) (flow.Base, error)
	Apply(ctx context.Context, base flow.Base, s flow.Series, trace io.Writer) (commit string, err error)
	// Build builds tree at commit (incrementally) and returns a directory
	// holding the kernel the lab boots.
	Build(ctx context.Context, tree, commit string, trace io.Writer) (dir string, err error)
	// KernelKey names the kernel Build would make: everything that decides
	// it (the source tree, the configuration, the toolchain), so a changed
	// config fragment or compiler is never answered by an old kernel.
	KernelKey(ctx context.Context, tree, commit string) (string, error)
}

// Checker compiles alone the files a candidate changes from its base,
// in the check lane, before its full build joins the build lane: a
// series that does not compile is answered in seconds, and one that
// changes no generated code needs no boot. An error that is not an
// infra error is the candidate's compile failure.
type Checker interface {
	Check(ctx context.Context, tree, base, candidate string, trace io.Writer) (flow.Checked, error)
}

// Trees fetches branches, reverts commits and locates repositories.
type Trees interface {
	// Fetch updates a tree's branches from its URL.
	Fetch(ctx context.Context, tree string) error
	Head(ctx context.Context, tree, ref string) (commit string, err error)
	Revert(ctx context.Context, tree, onto, commit string) (string, error)
	GitDir(tree string) (string, error)
}

// Lab runs the transfer test n times on a leased pair. A crash during a
// run is a sample with Crash set; an error that is not an infra error
// means the kernel did not boot (the kernel's fault).
type Lab interface {
	Run(ctx context.Context, pair string, boot flow.Boot, n int, trace io.Writer) ([]flow.Sample, error)
	// CandidateSide is the side of the pair a series' kernel boots on,
	// beside the trusted base: the one its patches act on.
	CandidateSide(s flow.Series) string
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
	Why(s flow.Series) string
	// Boots per side.
	Boots() int
	// Run is the i-th boot (0-based) of k: one sample, which may name a
	// finer profile (its provider).
	Run(ctx context.Context, pair string, k flow.Boot, i int, trace io.Writer) ([]flow.Sample, error)
}

// Confirmer is a profile whose functional tests a kernel can run again
// by name: the i-th boot's tests again, only those named (fstests).
type Confirmer interface {
	Confirm(ctx context.Context, pair string, k flow.Boot, i int, tests []string, trace io.Writer) ([]flow.Sample, error)
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
// ctx's, never a verdict. id is the test's identity (store.Test.Key, a
// bisection's commit, an A/A comparison's): the resampling is seeded from
// it, so the same test with the same samples gets the same interval.
type Decider interface {
	Decide(ctx context.Context, id string, base, cand []flow.Sample) (flow.Decision, error)
}

// ReplyIndex tells which series version one of the bot's own replies
// answered (the outbox keeps them): a later series whose Closes: names
// that reply is a fix of what it reported. ok is false for a Message-ID
// that is no reply of the bot's to a series.
type ReplyIndex interface {
	Answered(ctx context.Context, replyID string) (root string, version int, ok bool, err error)
}

// Reporter renders and delivers a reply exactly once per Report.Key.
type Reporter interface {
	Deliver(ctx context.Context, r flow.Report) error
}

// Starter is a reporter that says when a series' testing starts (a
// patchwork check "pending"), before its Deliver says how it ended. It is
// called again when the base job is retried, so it must act once per
// Report.Key.
type Starter interface {
	Started(ctx context.Context, r flow.Report) error
}

// Stages are the other packages as the bot uses them.
type Stages struct {
	Ingest Ingester
	Fetch  SeriesFetcher
	Mbox   MboxReader
	Build  Builder
	// Check, when set, checks a series' compile before its build.
	Check Checker
	Trees Trees
	Lab   Lab
	// Profiles are the lab's profiles besides the default test, in the
	// order they boot; none when they are off.
	Profiles []Profile
	// Debug is the debug profile (lab.debug): boots of each side's debug
	// kernel (Boot.Debug), before the other profiles. DebugBuild builds
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
