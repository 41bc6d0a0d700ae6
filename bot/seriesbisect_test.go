package bot_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/fakestage"
)

// seriesOf is a series of several patches with these subjects, under a
// cover letter.
func seriesOf(id string, subjects ...string) flow.Series {
	s := flow.Series{MsgID: id, Version: 1, Subject: fmt.Sprintf("[PATCH 0/%d] svcrdma: a series", len(subjects)), Author: "Dev <dev@example.org>"}
	for i, subj := range subjects {
		s.Patches = append(s.Patches, fakestage.Mail(fmt.Sprintf("From: dev\nSubject: [PATCH %d/%d] %s\n\n---\n", i+1, len(subjects), subj)))
	}
	return s
}

// A series of several patches that regresses, crashes or does not build
// is bisected over its own patches (applied as commits on the base)
// before its reply goes out; the reply names the first bad patch and
// what finding it cost. A single patch, and a series that passes, are
// answered at once.
func TestSeriesPatchBisected(t *testing.T) {
	repo, commits := gitRepo(t, 2, -1, nil)
	h := newHarnessWith(t, testConfig(), repo, "", nil)
	h.build.Base = commits[1]
	cases := []struct {
		s       flow.Series
		verdict string
		patch   int // the first bad patch; 0: no bisection; -1: none found
		boots   bool
	}{
		{seriesOf("<reg@x>", "svcrdma: tidy", "svcrdma: slow send", "svcrdma: comment"), "REGRESSION", 2, true},
		{seriesOf("<hang@x>", "svcrdma: tidy", "svcrdma: crash on teardown"), "CRASH", 2, true},
		{seriesOf("<cc@x>", "svcrdma: build-fails here", "svcrdma: tidy", "svcrdma: comment"), "BUILD_FAILED", 1, false},
		{seriesOf("<ok@x>", "svcrdma: tidy", "svcrdma: comment"), "PASS", 0, false},
		// Patch 1 alone does not build: the bisection cannot tell 1
		// from 2, says so, and the reply goes out all the same.
		{seriesOf("<skip@x>", "svcrdma: nobuild alone", "svcrdma: slow send"), "REGRESSION", -1, true},
		{series("<one@x>", "[PATCH] svcrdma: slow send"), "REGRESSION", 0, false},
	}
	for _, c := range cases {
		h.ingest.Add(c.s)
	}
	h.wait("every reply", 90*time.Second, func() bool { return h.report.Count() == len(cases) })
	for _, c := range cases {
		r, ok := h.report.Get("series:" + c.s.MsgID + ":v1:")
		if !ok || r.Verdict.String() != c.verdict {
			t.Errorf("%s: %+v, want %s", c.s.MsgID, r.Verdict, c.verdict)
			continue
		}
		if c.patch == 0 {
			if r.FirstBad != nil {
				t.Errorf("%s: bisected (%+v), want a reply at once", c.s.MsgID, r.FirstBad)
			}
			continue
		}
		fb := r.FirstBad
		if c.patch < 0 {
			if fb == nil || fb.Patch != 0 || !strings.Contains(fb.Summary, "only untestable commits are left") {
				t.Errorf("%s: first bad %+v, want none found, and why", c.s.MsgID, fb)
			}
			continue
		}
		if fb == nil || fb.Patch != c.patch || fb.Steps < 1 || (fb.Boots > 0) != c.boots || fb.Summary != fmt.Sprintf("first bad: patch %d/%d", c.patch, len(c.s.Patches)) {
			t.Errorf("%s: first bad %+v, want patch %d (boots: %v)", c.s.MsgID, fb, c.patch, c.boots)
			continue
		}
		t.Logf("%s: %s, patch %d found in %d steps, %d boots, %s", c.s.MsgID, r.Verdict, fb.Patch, fb.Steps, fb.Boots, fb.Took)
	}
	// The test's verdict was kept while its reply waited; the bisection
	// shows its test and outcome.
	ctx := context.Background()
	tt := h.testDone("series:<reg@x>:v1:")
	if tt.Verdict != flow.Regression {
		t.Fatalf("test %+v", tt)
	}
	bis, ok, err := h.st.BisectionOfTest(ctx, h.st.DB, tt.ID)
	if err != nil || !ok || bis.CulpritPatch != 2 || bis.State != "done" || !strings.HasPrefix(bis.Key, "series-test:") {
		t.Fatalf("bisection %+v %v %v", bis, ok, err)
	}
	// Nothing is answered twice.
	time.Sleep(300 * time.Millisecond)
	if n := h.report.Count(); n != len(cases) {
		t.Errorf("%d replies, want %d", n, len(cases))
	}
}

// A bisection step the lab keeps failing under ends the bisection as the
// bot's failure after bot.max_attempts, and the series' reply, which
// waited, goes out with its verdict and says why no patch is named.
func TestSeriesBisectLabFailureStillAnswers(t *testing.T) {
	repo, commits := gitRepo(t, 2, -1, nil)
	cfg := testConfig()
	cfg.MaxAttempts = 2
	h := newHarnessWith(t, cfg, repo, "", nil)
	h.build.Base = commits[1]
	h.ingest.Add(seriesOf("<dies@x>", "svcrdma: lab-dies under this alone", "svcrdma: slow send"))
	h.wait("the reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	r, _ := h.report.Get("series:<dies@x>:v1:")
	if r.Verdict != flow.Regression || r.FirstBad == nil || r.FirstBad.Patch != 0 || !strings.Contains(r.FirstBad.Summary, "failed on the bot's side (INFRA) 2 times: lab: guest 2 died") {
		t.Fatalf("%s %+v", r.Verdict, r.FirstBad)
	}
	if tt := h.testDone("series:<dies@x>:v1:"); tt.Verdict != flow.Regression {
		t.Fatalf("test %s %s", tt.State, tt.Verdict)
	}
}

// bot.series_bisect = false: the reply goes out at once.
func TestSeriesBisectOff(t *testing.T) {
	repo, commits := gitRepo(t, 2, -1, nil)
	cfg := testConfig()
	cfg.SeriesBisect = false
	h := newHarnessWith(t, cfg, repo, "", nil)
	h.build.Base = commits[1]
	s := seriesOf("<reg@x>", "svcrdma: tidy", "svcrdma: slow send")
	h.ingest.Add(s)
	h.wait("the reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	if r, _ := h.report.Get("series:<reg@x>:v1:"); r.Verdict != flow.Regression || r.FirstBad != nil {
		t.Fatalf("%s %+v", r.Verdict, r.FirstBad)
	}
}

// testDone waits for the test with key to be marked done: its reply is
// delivered just before the report job commits that state.
func (h *harness) testDone(key string) store.Test {
	h.t.Helper()
	var tt store.Test
	h.wait("test "+key+" done", 10*time.Second, func() bool {
		var err error
		tt, err = h.st.TestByKey(context.Background(), h.st.DB, key)
		return err == nil && tt.State == store.StateDone
	})
	return tt
}
