package reply

import (
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// A bisection's report shows the culprit's confirmation boots against
// its parent's: the decided metrics with their change, interval and p
// and the rule that decided, in the mail and in the comment; without
// boots of both sides, or without a metric compared, no table.
func TestBisectionTableOfCulpritAgainstParent(t *testing.T) {
	runs := 2 * newReplyRig(t).r.Cfg.Runs
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	g := newReplyRig(t)
	mailed := string(g.deliver(t, bisectionReport(flow.Origin{Kind: "mainline"}, runs)).Raw)
	for _, want := range []string{"The culprit's confirmation boots against its parent's (555555555555):",
		"metric parent mean ± sd change 99% interval culprit mean ± sd p runs verdict",
		"copy MB/s 100.02 ± 0.44 -48.0% -48.5%..-47.3% 52.02 ± 0.44 <0.0001 10/10 worse",
		"The rule: a metric is a regression (or an improvement) when the Mann-Whitney p is below 0.00083"} {
		if !strings.Contains(flat(mailed), want) {
			t.Errorf("the mail lacks %q:\n%s", want, mailed)
		}
	}
	g = newReplyRig(t)
	commented := string(g.deliver(t, bisectionReport(flow.Origin{Kind: "github", Repo: "rdmabot/linux", Issue: 13, Comment: 7, User: "chuck"}, runs)).Raw)
	for _, want := range []string{"| metric | parent mean ± sd | change | 99% interval | culprit mean ± sd | p | runs | verdict |\n",
		"| copy MB/s | 100.02 ± 0.44 | -48.0% | -48.5%..-47.3% | 52.02 ± 0.44 | <0.0001 | 10/10 | worse |\n",
		"\nThe rule: a metric is a regression"} {
		if !strings.Contains(commented, want) {
			t.Errorf("the comment lacks %q:\n%s", want, commented)
		}
	}

	noTable := map[string]func(*flow.BisectReport){
		"no parent boots":  func(b *flow.BisectReport) { b.ParentSamples = nil },
		"no culprit boots": func(b *flow.BisectReport) { b.CulpritSamples = nil },
		"no metric": func(b *flow.BisectReport) {
			b.ParentSamples, b.CulpritSamples = []flow.Sample{{}}, []flow.Sample{{}}
		},
	}
	for name, mod := range noTable {
		g := newReplyRig(t)
		rep := bisectionReport(flow.Origin{Kind: "mainline"}, runs)
		mod(rep.Bisect)
		if e := g.deliver(t, rep); strings.Contains(string(e.Raw), "confirmation boots against") {
			t.Errorf("%s: a table:\n%s", name, e.Raw)
		}
	}
}

// A crash bisected: the table says how many of each side's boots
// crashed, under it the crash's title (code in the comment).
func TestBisectionCrashTable(t *testing.T) {
	title := "BUG: KASAN: slab-use-after-free in svc_rdma_send_ctxt_put"
	crashed := []flow.Sample{{Crash: title, Log: title + "\nRead of size 8 at addr ffff888004a1c2d0 by task nfsd/231"},
		{Crash: title, Log: title + "\nRead of size 8 at addr ffff888004a1c9f0 by task nfsd/233"}}
	report := func(o flow.Origin) flow.Report {
		rep := bisectionReport(o, 2)
		rep.Title = "[mainline] 0f1e2d3c4b5a: nfs-rdma crash regression"
		rep.Bisect.Metric, rep.Bisect.Change, rep.Bisect.CulpritSamples = flow.MetricCrash, 0, crashed
		for i, s := range rep.Bisect.Steps { // as bot's measure words a crash's step
			rep.Bisect.Steps[i].Detail = map[string]string{"good": "PASS", "bad": "CRASH: " + title}[s.Outcome]
		}
		return rep
	}
	g := newReplyRig(t)
	e := g.deliver(t, report(flow.Origin{Kind: "mainline"}))
	golden(t, "replies/bisection_crash.eml", e.Raw)
	for _, want := range []string{"parent   555555555555  crashed in 0 of 2 boots\nculprit  a1b2c3d4e5f6  crashed in 2 of 2 boots\n",
		"\n  " + title + "\n"} {
		if !strings.Contains(string(e.Raw), want) {
			t.Errorf("the mail lacks %q:\n%s", want, e.Raw)
		}
	}
	if strings.Contains(string(e.Raw), "The rule:") {
		t.Errorf("a crash is decided by no metric's rule:\n%s", e.Raw)
	}
	g = newReplyRig(t)
	e = g.deliver(t, report(flow.Origin{Kind: "github", Repo: "rdmabot/linux", Issue: 13, Comment: 7, User: "chuck"}))
	golden(t, githubGolden("reply_bisection_crash.md"), e.Raw)
	for _, want := range []string{"| parent | 555555555555 | crashed in 0 of 2 boots |\n| culprit | a1b2c3d4e5f6 | crashed in 2 of 2 boots |\n",
		"```\n" + title + "\n```\n"} {
		if !strings.Contains(string(e.Raw), want) {
			t.Errorf("the comment lacks %q:\n%s", want, e.Raw)
		}
	}
}
