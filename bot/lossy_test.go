package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/internal/fakestage"
	"github.com/rdmabot/rdmabot/bot/store"
)

// The lossy profile runs first for a series whose patches touch drain
// code, base and candidate alternating: a hang only the lossy link
// brings out is a CRASH, found without a single default-link boot of the
// candidate. A series that touches no such code never pays for it, and a
// lossy boot the lab loses is retried like any lab fault.
func TestLossyProfileFindsACrash(t *testing.T) {
	var lossy *fakestage.Lossy
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		lossy = &fakestage.Lossy{Lab: o.Stages.Lab.(*fakestage.Lab), Calls: nil, Match: "ib_drain", N: 2, FailRuns: 1}
		o.Stages.Lossy = lossy
	})
	lossy.Calls = h.calls
	patch := func(id, subject, body string) bot.Series {
		s := series(id, subject)
		s.Patches = [][]byte{[]byte("From: dev\nSubject: " + subject + "\n\n---\n" + body)}
		return s
	}
	// Two patches: a crash over the lossy link alone is not bisected over
	// the series' prefixes, which would boot on the default link.
	hang := patch("<hang@x>", "[PATCH 1/2] RDMA/core: lossy-hang on a flushed drain", "@@ -1 +1 @@ static void ib_drain_qp_done(struct ib_cq *cq)\n-x\n+y\n")
	hang.Patches = append(hang.Patches, []byte("From: dev\nSubject: [PATCH 2/2] RDMA/core: lossy-hang too\n\n---\n"))
	h.ingest.Add(hang)
	h.ingest.Add(patch("<clean@x>", "[PATCH] RDMA/core: reword the drain comment", "@@ -1 +1 @@ static void ib_drain_qp_done(struct ib_cq *cq)\n-x\n+y\n"))
	h.ingest.Add(patch("<unseen@x>", "[PATCH] svcrdma: lossy-hang elsewhere", "@@ -1 +1 @@ int svc_rdma_post_send(void)\n-x\n+y\n"))
	h.wait("three replies", 60*time.Second, func() bool { return h.report.Count() == 3 })

	reply, _ := h.report.Get("series:<hang@x>:v1:")
	if reply.Verdict != "CRASH" || !strings.Contains(reply.Summary, "__ib_drain_sq") {
		t.Fatalf("lossy-only hang: %s %q, want CRASH", reply.Verdict, reply.Summary)
	}
	// The reply's samples say which boots were lossy: the crash and the
	// base boot before it, and no default-link boot of the candidate.
	lossyCand, plainCand := 0, 0
	for _, s := range reply.CandSamples {
		if s.Profile == "lossy" {
			lossyCand++
		} else {
			plainCand++
		}
	}
	if lossyCand != 1 || plainCand != 0 || len(reply.BaseSamples) == 0 || reply.BaseSamples[len(reply.BaseSamples)-1].Profile != "lossy" {
		t.Errorf("crash reply samples: %d lossy and %d default candidate boots, base %+v", lossyCand, plainCand, reply.BaseSamples)
	}

	clean, _ := h.report.Get("series:<clean@x>:v1:")
	unseen, _ := h.report.Get("series:<unseen@x>:v1:")
	if clean.Verdict != "PASS" || unseen.Verdict != "PASS" {
		t.Errorf("clean %s, unseen %s: want PASS (the unseen hang is only over the lossy link)", clean.Verdict, unseen.Verdict)
	}
	// Whatever else it measured, every lossy boot ran on the pair alone.
	n := 0
	for _, c := range h.calls.List() {
		if strings.HasPrefix(c, "lossy ") {
			n++
			if strings.Contains(c, "lossy-hang elsewhere") {
				t.Errorf("a series touching no drain code booted over the lossy link: %s", c)
			}
		}
	}
	// hang: base, candidate (crash); clean: one lost to the lab, then
	// 2+2 in the retried round.
	if n != 2+1+4 {
		t.Errorf("%d lossy boots, want 7:\n%s", n, strings.Join(h.calls.List(), "\n"))
	}
	ht, err := h.st.TestByKey(context.Background(), h.st.DB, "series:<hang@x>:v1:")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := h.st.BisectionOfTest(context.Background(), h.st.DB, ht.ID); ok || err != nil {
		t.Errorf("the crash over the lossy link was bisected over the series' prefixes (%v)", err)
	}
	if h.lab.Overlap != 0 {
		t.Errorf("%d overlapping runs on one pair", h.lab.Overlap)
	}
}

// A kernel that does not come up over the lossy link: the candidate's is
// BOOT_FAILED, as on the default link; a base that does not leaves the
// test failed and unanswered, never blamed on the series.
func TestLossyBootFailures(t *testing.T) {
	for _, c := range []struct {
		noBoot, subject, want string
	}{
		{"lossy-hang", "[PATCH] RDMA/core: lossy-hang in the drain", "BOOT_FAILED"},
		{"fast", "[PATCH] RDMA/core: reword the drain comment", ""},
	} {
		t.Run(c.noBoot, func(t *testing.T) {
			h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
				o.Stages.Lossy = &fakestage.Lossy{Lab: o.Stages.Lab.(*fakestage.Lab), Calls: &fakestage.Calls{}, Match: "ib_drain", N: 2, NoBoot: c.noBoot}
			})
			s := series("<x@x>", c.subject)
			s.Patches = [][]byte{[]byte("From: dev\nSubject: " + c.subject + "\n\n---\n@@ -1 +1 @@ static void ib_drain_qp_done(void)\n-x\n+y\n")}
			h.ingest.Add(s)
			if c.want != "" {
				h.wait("the reply", 30*time.Second, func() bool { return h.report.Count() == 1 })
				if r, _ := h.report.Get("series:<x@x>:v1:"); r.Verdict != c.want || !strings.Contains(r.Summary, "over the lossy link") {
					t.Errorf("%s %q, want %s", r.Verdict, r.Summary, c.want)
				}
				return
			}
			h.wait("the test to fail", 30*time.Second, func() bool {
				tt, err := h.st.TestByKey(context.Background(), h.st.DB, "series:<x@x>:v1:")
				return err == nil && tt.State == store.StateFailed
			})
			tt, _ := h.st.TestByKey(context.Background(), h.st.DB, "series:<x@x>:v1:")
			if !strings.Contains(tt.Summary, "base kernel failed in the lab over the lossy link") || h.report.Count() != 0 {
				t.Errorf("base down over the lossy link: %q, %d replies", tt.Summary, h.report.Count())
			}
		})
	}
}
