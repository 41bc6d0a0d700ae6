package flow

import (
	"encoding/json"
	"time"
)

// Decision is the statistics' answer for one comparison.
type Decision struct {
	Verdict  Outcome
	NeedMore int     // > 0: measure this many more runs of each side first
	Summary  string  // one paragraph: metric, change, confidence
	Metric   string  // the metric that decided a REGRESSION
	Change   float64 // its relative change (-0.48 = -48 %)
	// Detail is the decider's whole judgement (JSON), stored with the
	// test when the decision is final and handed back in Report.Detail,
	// so every reply shows this one judgement. The bot never reads it.
	Detail json.RawMessage
}

// Report is everything a reply needs.
type Report struct {
	Key     string  `json:"key"`  // delivery happens once per key
	Kind    string  `json:"kind"` // series, ref, mainline, bisect
	Title   string  `json:"title,omitempty"`
	Verdict Outcome `json:"verdict"`
	Summary string  `json:"summary"`
	Series  *Series `json:"series,omitempty"`
	Tree    string  `json:"tree"`
	Base    string  `json:"base"`
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
	BaseSamples []Sample `json:"base_samples,omitempty"`
	CandSamples []Sample `json:"cand_samples,omitempty"`
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
	// CulpritFiles are the files the culprit changes: whose lists
	// (MAINTAINERS L:) hear of it.
	CulpritFiles []string
	// Metric is what was bisected: a decided metric, whose Change is
	// bad's median against good's, or MetricCrash or MetricBuild.
	Metric    string
	Change    float64
	Steps     []BisectStep
	Confirmed bool
	// Parent is the culprit's parent; ParentSamples and CulpritSamples
	// are the boots the confirmation last measured of each (the cached
	// results of the commit): the report's table of culprit against
	// parent. Empty when nothing was measured (a build's bisection).
	Parent                        string
	ParentSamples, CulpritSamples []Sample
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
	Test    int64   `json:"test"`    // the reported test
	Verdict Outcome `json:"verdict"` // its verdict
	URL     string  `json:"url"`     // its dashboard page
	Reply   string  `json:"reply"`   // the Message-ID of its reply, which the fix's Closes: names
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
func Fixed(verdict Outcome) bool { return verdict == Pass || verdict == Improvement }

// BisectStep is one tested commit of a bisection.
type BisectStep struct {
	N       int
	Phase   string // bisect, confirm-culprit, confirm-parent, confirm-revert
	Commit  string
	Outcome string // good, bad, skip
	Detail  string
	JobID   int64
	At      time.Time
	Boots   int // lab boots the step took (0: built only)
}

// The metrics of a bisection that is not for a measured change: a crash,
// or the first commit that does not build.
const (
	MetricCrash = "crash"
	MetricBuild = "build"
)
