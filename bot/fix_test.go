package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// A series whose Closes: names the bot's reply to a failure reruns that
// test with the fix: on the reported series when it applies there (a
// separate fix), in its place on its base otherwise (a new version). Its
// reply says whether the failure is gone, also when a "#rdmabot test"
// in the fix's thread asks for it again; a Closes: that names no reply
// of the bot's, or one that reported nothing to fix, leaves an ordinary
// test.
func TestFixFollowUp(t *testing.T) {
	repo, commits := gitRepo(t, 2, -1, nil)
	cfg := testConfig()
	cfg.SeriesBisect = false
	h := newHarnessWith(t, cfg, repo, "", nil)
	h.build.Base = commits[1]
	ctx := context.Background()

	h.ingest.Add(seriesOf("<reg@x>", "svcrdma: tidy", "svcrdma: slow send"))
	h.ingest.Add(series("<pass@x>", "[PATCH] svcrdma: tidy more"))
	h.wait("the first replies", 60*time.Second, func() bool { return h.report.Count() == 2 })
	orig := h.testDone("series:<reg@x>:v1:")
	if orig.Verdict != flow.Regression {
		t.Fatalf("the reported series: %s", orig.Verdict)
	}
	reply := h.report.MessageID(orig.Key)

	fix := func(id, subject string, closes ...string) flow.Series {
		s := series(id, subject)
		s.Closes = closes
		return s
	}
	// The outbox cannot be read once: the test job is retried, not failed.
	h.report.FailAnswered(1)
	h.ingest.Add(fix("<fix@x>", "[PATCH] svcrdma: fix-slow send", "<unrelated@elsewhere>", reply))
	h.ingest.Add(fix("<v2@x>", "[PATCH v2] svcrdma: new-version tidy", reply))
	h.ingest.Add(fix("<nofix@x>", "[PATCH] svcrdma: a comment", reply))
	h.ingest.Add(fix("<other@x>", "[PATCH] svcrdma: a comment too", "<unrelated@elsewhere>"))
	// A series that never reaches the lab shows no boots, not even the
	// base's cached ones (the reply would link boots it does not have).
	h.ingest.Add(series("<na@x>", "[PATCH] svcrdma: does-not-apply"))
	// A reply that reported nothing to fix.
	h.ingest.Add(fix("<afterpass@x>", "[PATCH] svcrdma: a comment again", h.report.MessageID("series:<pass@x>:v1:")))
	// "#rdmabot test" in a fix's thread asks for the fix's test again:
	// it reruns the report too.
	asked := fix("<fix@x>", "[PATCH] svcrdma: fix-slow send", reply)
	asked.Command = &flow.Command{Verb: flow.CommandTest, MsgID: "<cmd@x>", From: "dev@example.org", Line: "#rdmabot test"}
	h.ingest.Add(asked)
	h.wait("the follow-ups' replies", 90*time.Second, func() bool { return h.report.Count() == 9 })

	for _, c := range []struct {
		key       string
		verdict   flow.Outcome
		onTop     bool
		confirmed bool
	}{
		{"series:<fix@x>:v1:", flow.Pass, true, true},
		{"series:<fix@x>:v1::cmd:<cmd@x>", flow.Pass, true, true},
		{"series:<v2@x>:v1:", flow.Pass, false, true},
		{"series:<nofix@x>:v1:", flow.Regression, true, false},
	} {
		r, _ := h.report.Get(c.key)
		f := r.Fix
		if r.Verdict != c.verdict || f == nil || f.Test != orig.ID || f.Verdict != flow.Regression || f.Reply != reply ||
			f.OnTop != c.onTop || f.Confirmed != c.confirmed || f.URL == "" {
			t.Errorf("%s: %s %+v, want %s, on top %v, confirmed %v", c.key, r.Verdict, f, c.verdict, c.onTop, c.confirmed)
		}
		tt := h.testDone(c.key)
		want := ""
		if c.onTop {
			want = orig.Candidate
		}
		if tt.FixOf != orig.ID || tt.Base != orig.Base || tt.ApplyOn != want || r.Base != orig.Base {
			t.Errorf("%s: fix of %d on %s applied on %q, want %d on %s on %q", c.key, tt.FixOf, tt.Base, tt.ApplyOn, orig.ID, orig.Base, want)
		}
	}
	for _, key := range []string{"series:<other@x>:v1:", "series:<afterpass@x>:v1:"} {
		if r, _ := h.report.Get(key); r.Fix != nil || r.Verdict != flow.Pass {
			t.Errorf("%s: a Closes: naming no reported failure: %s %+v", key, r.Verdict, r.Fix)
		}
		if tt := h.testDone(key); tt.FixOf != 0 || tt.ApplyOn != "" {
			t.Errorf("%s: an ordinary test is a fix of %d", key, tt.FixOf)
		}
	}
	fixes, err := h.st.FixesOf(ctx, h.st.DB, orig.ID)
	if err != nil || len(fixes) != 4 {
		t.Fatalf("fixes of the reported test: %d %v", len(fixes), err)
	}
	if !strings.Contains(strings.Join(h.calls.List(), "\n"), ": failed") {
		t.Errorf("the outbox's failure was never met:\n%s", strings.Join(h.calls.List(), "\n"))
	}
	// Nothing answered twice.
	time.Sleep(300 * time.Millisecond)
	if r, _ := h.report.Get("series:<na@x>:v1:"); r.Verdict != flow.ApplyFailed || len(r.BaseSamples)+len(r.CandSamples) != 0 {
		t.Errorf("a series that did not apply: %s with %d base and %d candidate samples", r.Verdict, len(r.BaseSamples), len(r.CandSamples))
	}
	if n := h.report.Count(); n != 9 {
		t.Errorf("%d replies, want 9", n)
	}
}
