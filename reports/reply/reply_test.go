package reply

import (
	"context"
	"errors"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/reports"
)

// words is a lab that names itself plainly.
type words struct{}

func (words) TestWords() (string, string)             { return "transfer", "a copy" }
func (words) PairWords(pair string) string            { return "pair " + pair }
func (words) DefaultPair() string                     { return "qemu" }
func (words) LinkWords(profile string) string         { return profile }
func (words) PressureWords(providers []string) string { return "pressure" }
func (words) DebugIterations() int                    { return 1 }

// maintainers records the commit it was asked about.
type maintainers struct{ asked []string }

func (m *maintainers) MaintainersAt(_ context.Context, commit string, _ []string) ([]string, error) {
	m.asked = append(m.asked, commit)
	return []string{"m@example.org"}, nil
}

type files struct{}

func (files) Thread(*flow.Series) (reports.Thread, error) { return reports.Thread{}, nil }
func (files) ChangedFiles(flow.Series) []string           { return []string{"net/sunrpc/xprtrdma/verbs.c"} }

// Decide judges nothing once its context ended; a report with nowhere to
// go (a tree ref tested from the CLI) is delivered by nobody, and the
// pending checks wait for a patchwork URL: no outbox is touched (it is
// nil here). The Cc names MAINTAINERS' people at the tested base only,
// and nobody without one.
func TestReplierEarlyReturns(t *testing.T) {
	ctx := context.Background()
	m := &maintainers{}
	r := &Replier{Cfg: reports.DefaultConfig(), Lab: words{}, Mail: files{}, Maintainers: m}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	s := []flow.Sample{{Metrics: map[string]float64{"copy_MBps": 8}}}
	if _, err := r.Decide(cancelled, s, s); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled decision: %v", err)
	}
	if err := r.Deliver(ctx, flow.Report{Key: "ref:x", Kind: "ref", Verdict: flow.Pass}); err != nil {
		t.Errorf("a CLI ref's report: %v", err)
	}
	if err := r.Started(ctx, flow.Report{Series: &flow.Series{}}); err != nil {
		t.Errorf("started without patchwork: %v", err)
	}
	r.Cfg.CCMaintainers = true
	if cc := r.maintainersCc(ctx, &flow.Series{}, ""); cc != nil || len(m.asked) != 0 {
		t.Errorf("no base: Cc %v, asked %v", cc, m.asked)
	}
	if cc := r.maintainersCc(ctx, &flow.Series{}, "abc"); len(cc) != 1 || len(m.asked) != 1 || m.asked[0] != "abc" {
		t.Errorf("at the tested base: Cc %v, asked %v", cc, m.asked)
	}
}
