package bot_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/fakestage"
)

// The fstests profile runs for a series that touches what it is for,
// with the group that fits every posting, and decides DATA_CORRUPTION
// when fsx reads back bad data in a boot and again when the failed test
// runs once more, and nothing when it passes then; a series that touches none of it pays
// nothing, unless a "#rdmabot test fstests" asks, which gets the larger
// group; a request for a profile that is off is refused, saying which
// are on.
func TestFstestsProfileChosenAndAskedFor(t *testing.T) {
	fst := &fakestage.Fstests{Calls: &fakestage.Calls{}, Match: "rpcrdma_convert_iovs", N: 1}
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		o.Stages.Profiles = []bot.Profile{fst}
	})
	patch := func(id, subject, body string) flow.Series {
		s := series(id, subject)
		s.Patches = []*flow.Message{fakestage.Mail("From: dev\nSubject: " + subject + "\n\n---\n" + body)}
		return s
	}
	h.ingest.Add(patch("<tail@x>", "[PATCH] xprtrdma: fsx-bad tail rounding", "@@ -1 +1 @@ static int rpcrdma_convert_iovs(void)\n-x\n+y\n"))
	h.ingest.Add(patch("<away@x>", "[PATCH] svcrdma: harmless", "@@ -1 +1 @@ int svc_rdma_recvfrom(void)\n-x\n+y\n"))
	h.ingest.Add(patch("<once@x>", "[PATCH] xprtrdma: fsx-once tail rounding", "@@ -1 +1 @@ static int rpcrdma_convert_iovs(void)\n-x\n+y\n"))
	h.wait("three replies", 60*time.Second, func() bool { return h.report.Count() == 3 })

	tail, _ := h.report.Get("series:<tail@x>:v1:")
	if tail.Verdict != flow.DataCorruption || !strings.Contains(tail.Summary, "generic/075") {
		t.Errorf("fsx reading back bad data: %s %q, want DATA_CORRUPTION naming generic/075", tail.Verdict, tail.Summary)
	}
	away, _ := h.report.Get("series:<away@x>:v1:")
	if away.Verdict != flow.Pass {
		t.Errorf("away: %s, want PASS", away.Verdict)
	}
	// A failure seen once is run again: seen again, it decides (above);
	// passed then, it does not.
	once, _ := h.report.Get("series:<once@x>:v1:")
	if once.Verdict != flow.Pass {
		t.Errorf("a test failed in one boot and passed when run again: %s %q, want PASS", once.Verdict, once.Summary)
	}
	onceTest := h.testDone("series:<once@x>:v1:")
	if tr := h.traceOf(onceTest.Key); !strings.Contains(tr, "generic/075 failed on it and passed on the base: both run them once more to confirm") {
		t.Errorf("the lab job's trace does not say the failure was run again:\n%s", tr)
	}
	calls := fst.Calls.List()
	var again int
	for _, c := range calls {
		if strings.Contains(c, " again generic/075") {
			again++
		}
	}
	if len(calls) != 8 || again != 4 || !strings.HasSuffix(calls[0], "thorough=false") {
		t.Fatalf("fstests boots: base and candidate of each series that touches chunk code, the default group, and each failure once more on both:\n%s", strings.Join(calls, "\n"))
	}

	// Asked for by mail on the series that touches nothing of it: both
	// sides boot the larger group, and the trace says why.
	asked := patch("<away@x>", "[PATCH] svcrdma: harmless", "@@ -1 +1 @@ int svc_rdma_recvfrom(void)\n-x\n+y\n")
	asked.Command = &flow.Command{Verb: flow.CommandTest, Profiles: []string{flow.ProfileFstests}, MsgID: "<ask@x>", From: "dev@example.org", Line: "#rdmabot test fstests"}
	h.ingest.Add(asked)
	h.wait("the asked-for test", 60*time.Second, func() bool { return h.report.Count() == 4 })
	tt := h.testDone("series:<away@x>:v1::cmd:<ask@x>:fstests")
	if tt.Verdict != flow.Pass {
		t.Errorf("asked-for fstests of a harmless series: %s", tt.Verdict)
	}
	calls = fst.Calls.List()[8:]
	if len(calls) != 2 || !strings.HasSuffix(calls[0], "thorough=true") || !strings.HasSuffix(calls[1], "thorough=true") {
		t.Errorf("the asked-for boots, the larger group on both sides:\n%s", strings.Join(calls, "\n"))
	}
	if !strings.Contains(h.traceOf(tt.Key), "the request asked for it: first 1 boots each") {
		t.Errorf("the lab job's trace does not say the request asked for the profile")
	}

	var ce *flow.CommandError
	_, err := h.bot.Act(context.Background(), flow.Command{Verb: flow.CommandTest, Profiles: []string{"ltp"}, Link: ""}, &asked, flow.Origin{Kind: "cli"})
	if !errors.As(err, &ce) || ce.Why != "The ltp profile is off on this bot (on: fstests, the default test)." {
		t.Errorf("asking for a profile that is off: %v", err)
	}
}
