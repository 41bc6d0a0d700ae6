package reply

import (
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// A PASS on the QEMU pair for a series that changes core/rw.c says what
// rxe and siw could not exercise of it, and how to get it tested; the
// same series' BUILD_FAILED booted nothing and says nothing of it.
func TestEmulationLimitsInReplies(t *testing.T) {
	g := newReplyRig(t)
	g.s.Changes = append(g.s.Changes, flow.Change{File: "drivers/infiniband/core/rw.c", Text: "+\tif (rdma_rw_io_needs_mr(dev, port_num, dir, sg_cnt)) {"})
	runs := 2 * g.r.Cfg.Runs
	base, cand := samples(runs, 100, 2), samples(runs, 100, 2)
	d := decide(t, g.r, base, cand)
	if d.Verdict != flow.Pass {
		t.Fatalf("%s: %s", d.Verdict, d.Summary)
	}
	rep := g.report(21, d.Verdict, d.Summary, d.Detail, base, cand)
	rep.Origin.Command = &flow.Command{MsgID: "cmd-jlayton@kernel.org", From: "jlayton@kernel.org", Name: "Jeff Layton",
		Line: "#rdmabot test", References: []string{g.s.Cover.MessageID}}
	e := g.deliver(t, rep)
	golden(t, "replies/pass_rw.eml", e.Raw)
	text := strings.Join(strings.Fields(string(e.Raw)), " ")
	for _, want := range []string{"Not exercised here: this series changes the RDMA R/W API (core/rw.c), and rxe and siw use virtual addressing",
		"force_mr=1"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, e.Raw)
		}
	}

	g = newReplyRig(t)
	g.s.Changes = append(g.s.Changes, flow.Change{File: "drivers/infiniband/core/rw.c"})
	e = g.deliver(t, g.report(22, flow.BuildFailed, "drivers/infiniband/core/rw.c:12:1: error: expected ';'", nil, nil, nil))
	if strings.Contains(string(e.Raw), "Not exercised here") {
		t.Errorf("a build failure names what the lab could not exercise:\n%s", e.Raw)
	}
}

// A GitHub comment carries what the mail carries, in the mail's words:
// the other bots' reviews in the thread, what the lab could not exercise
// and the rule the metrics were decided by.
func TestCommentCarriesTheMailsLines(t *testing.T) {
	g := newReplyRig(t)
	g.s.Changes = append(g.s.Changes, flow.Change{File: "drivers/infiniband/core/rw.c", Text: "+\tif (rdma_rw_io_needs_mr(dev, port_num, dir, sg_cnt)) {"})
	g.s.Reviews = []flow.Review{{By: "Sashiko AI review", MessageID: "20260515115959.3D9D2C2BCB0@smtp.kernel.org",
		URL: "https://sashiko.dev/#/patchset/170708844422.28128.2979813721958631192.stgit%40bazille.1015granger.net?part=1"}}
	runs := 2 * g.r.Cfg.Runs
	base, cand := samples(runs, 100, 2), samples(runs, 52, 2)
	d := decide(t, g.r, base, cand)
	rep := g.report(23, d.Verdict, d.Summary, d.Detail, base, cand)
	mailed := string(g.deliver(t, rep).Raw)
	rep.Key += ":github:rdmabot/linux#12"
	rep.Origin = flow.Origin{Kind: "github", Repo: "rdmabot/linux", Issue: 12, Comment: 99, User: "chuck"}
	e := g.deliver(t, rep)
	golden(t, githubGolden("reply_regression_reviewed.md"), e.Raw)
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, want := range []string{"Reviews by other bots in this thread (not repeated here): Sashiko AI review: https://sashiko.dev/#/patchset/",
		"Not exercised here: this series changes the RDMA R/W API (core/rw.c), and rxe and siw use virtual addressing",
		"The rule: a metric is a regression (or an improvement) when the Mann-Whitney p is below"} {
		if !strings.Contains(flat(mailed), want) {
			t.Fatalf("the mail lacks %q:\n%s", want, mailed)
		}
		if !strings.Contains(flat(string(e.Raw)), want) {
			t.Errorf("the comment lacks %q, which the mail has:\n%s", want, e.Raw)
		}
	}
}
