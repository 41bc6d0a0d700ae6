package bot_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/fakestage"
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
		o.Stages.Profiles = []bot.Profile{lossy}
	})
	lossy.Calls = h.calls
	patch := func(id, subject, body string) flow.Series {
		s := series(id, subject)
		s.Patches = []*flow.Message{fakestage.Mail("From: dev\nSubject: " + subject + "\n\n---\n" + body)}
		return s
	}
	// Two patches: a crash over the lossy link alone is not bisected over
	// the series' prefixes, which would boot on the default link.
	hang := patch("<hang@x>", "[PATCH 1/2] RDMA/core: lossy-hang on a flushed drain", "@@ -1 +1 @@ static void ib_drain_qp_done(struct ib_cq *cq)\n-x\n+y\n")
	hang.Patches = append(hang.Patches, fakestage.Mail("From: dev\nSubject: [PATCH 2/2] RDMA/core: lossy-hang too\n\n---\n"))
	h.ingest.Add(hang)
	h.ingest.Add(patch("<clean@x>", "[PATCH] RDMA/core: reword the drain comment", "@@ -1 +1 @@ static void ib_drain_qp_done(struct ib_cq *cq)\n-x\n+y\n"))
	h.ingest.Add(patch("<unseen@x>", "[PATCH] svcrdma: lossy-hang elsewhere", "@@ -1 +1 @@ int svc_rdma_post_send(void)\n-x\n+y\n"))
	h.wait("three replies", 60*time.Second, func() bool { return h.report.Count() == 3 })

	reply, _ := h.report.Get("series:<hang@x>:v1:")
	if reply.Verdict != flow.Crash || !strings.Contains(reply.Summary, "__ib_drain_sq") {
		t.Fatalf("lossy-only hang: %s %q, want CRASH", reply.Verdict, reply.Summary)
	}
	// The reply's samples say which boots were lossy: the crash, the
	// boot that confirmed it and the base boot before them, and no
	// default-link boot of the candidate.
	lossyCand, plainCand := 0, 0
	for _, s := range reply.CandSamples {
		if s.Profile == "lossy" {
			lossyCand++
		} else {
			plainCand++
		}
	}
	if lossyCand != 2 || plainCand != 0 || len(reply.BaseSamples) == 0 || reply.BaseSamples[len(reply.BaseSamples)-1].Profile != "lossy" {
		t.Errorf("crash reply samples: %d lossy and %d default candidate boots, base %+v", lossyCand, plainCand, reply.BaseSamples)
	}

	clean, _ := h.report.Get("series:<clean@x>:v1:")
	unseen, _ := h.report.Get("series:<unseen@x>:v1:")
	if clean.Verdict != flow.Pass || unseen.Verdict != flow.Pass {
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
	// hang: base, candidate (crash), candidate (confirming); clean: one
	// lost to the lab, then 2+2 in the retried round.
	if n != 3+1+4 {
		t.Errorf("%d lossy boots, want 8:\n%s", n, strings.Join(h.calls.List(), "\n"))
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
				o.Stages.Profiles = []bot.Profile{&fakestage.Lossy{Lab: o.Stages.Lab.(*fakestage.Lab), Calls: &fakestage.Calls{}, Match: "ib_drain", N: 2, NoBoot: c.noBoot}}
			})
			s := series("<x@x>", c.subject)
			s.Patches = []*flow.Message{fakestage.Mail("From: dev\nSubject: " + c.subject + "\n\n---\n@@ -1 +1 @@ static void ib_drain_qp_done(void)\n-x\n+y\n")}
			h.ingest.Add(s)
			if c.want != "" {
				h.wait("the reply", 30*time.Second, func() bool { return h.report.Count() == 1 })
				if r, _ := h.report.Get("series:<x@x>:v1:"); r.Verdict.String() != c.want || !strings.Contains(r.Summary, "over the lossy link") {
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

// Every new mainline head gets the lossy boots too (its merges change
// drain and teardown code no series test saw): a head that hangs only
// over the lossy link is a bad head, CRASH, with no default-link boot and
// no bisection (the bisection would boot on the default link); its lossy
// boots never become the next head's base or the history's figures.
func TestLossyProfileOnMainlineHeads(t *testing.T) {
	repo, commits := gitRepo(t, 2, -1, nil)
	git := gitIn(t, repo)
	git("update-ref", "refs/heads/master", commits[0])
	var lossy *fakestage.Lossy
	h := newHarnessWith(t, testConfig(), repo, "", func(o *bot.Options) {
		lossy = &fakestage.Lossy{Lab: o.Stages.Lab.(*fakestage.Lab), Calls: &fakestage.Calls{}, N: 2}
		o.Stages.Profiles = []bot.Profile{lossy}
	})
	ctx := context.Background()
	head := mainlineHeads(t, h)
	// The first head has nothing to compare with: no lossy boots.
	head(1, "good")
	// A clean head: base and candidate each booted twice over the link,
	// then the default rounds; the history's figures are the default's.
	git("update-ref", "refs/heads/master", commits[1])
	hist := head(2, "good")
	if n := len(lossy.Calls.List()); n != 4 {
		t.Fatalf("%d lossy boots for a clean head, want 2+2:\n%s", n, strings.Join(lossy.Calls.List(), "\n"))
	}
	if !strings.Contains(hist[1].Metrics, "write_MBps") {
		t.Errorf("history figures %s", hist[1].Metrics)
	}
	tt, err := h.st.Test(ctx, h.st.DB, hist[1].TestID)
	if err != nil {
		t.Fatal(err)
	}
	cached, _, err := h.st.BaseResults(ctx, h.st.DB, store.BaseKey{Tree: tt.Tree, Commit: commits[1], Lab: tt.Lab, Params: "nfs-rdma-write-256M"}, time.Hour)
	if err != nil || len(cached) == 0 {
		t.Fatalf("the clean head's runs are not the next base: %v", err)
	}
	for _, s := range cached {
		if s.Profile != "" {
			t.Fatalf("a %s boot became base cache: %+v", s.Profile, s)
		}
	}
	// A head that hangs only over the lossy link.
	os.WriteFile(filepath.Join(repo, "LOSSYHANG"), []byte("complete a drain only on success"), 0o644)
	git("add", "-A")
	git("commit", "-q", "-m", "RDMA/core: only complete a drain on a successful WC")
	bad := git("rev-parse", "HEAD")
	before := len(h.lab.Calls.List())
	hist = head(3, "bad")
	tt, err = h.st.Test(ctx, h.st.DB, hist[2].TestID)
	if err != nil {
		t.Fatal(err)
	}
	if tt.Candidate != bad || tt.Verdict != flow.Crash || !strings.Contains(tt.Summary, "__ib_drain_sq") {
		t.Errorf("the hanging head: %s %s %q, want CRASH in __ib_drain_sq", tt.Candidate, tt.Verdict, tt.Summary)
	}
	if n := len(lossy.Calls.List()); n != 4+3 {
		t.Errorf("%d lossy boots, want 4 + base and the hanging candidate twice (the hang confirmed)", n)
	}
	// (The fake lossy link boots a kernel that does not hang through the
	// lab, so the base's lossy boot shows there too.)
	for _, c := range h.lab.Calls.List()[before:] {
		if strings.HasPrefix(c, "run ") && strings.Contains(c, bad) {
			t.Errorf("a default-link boot of the hanging head: %s", c)
		}
	}
	if bis, err := h.st.Bisections(ctx, 10); err != nil || len(bis) != 0 {
		t.Errorf("bisections %+v (%v): a lossy-only crash is not bisected on the default link", bis, err)
	}
}

// The pressure profile runs, after the lossy one, for a series that
// touches Send Queue code, on each provider, base and candidate
// alternating: a kernel whose provider refuses Sends under pressure is a
// REGRESSION without a single default boot, and neither its prefixes
// nor anything else are bisected on the default test, where the fault
// need not show. A series that touches no such code pays nothing.
func TestPressureProfileDecidesWithoutDefaultBoots(t *testing.T) {
	var pressure *fakestage.Pressure
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		pressure = &fakestage.Pressure{Lab: o.Stages.Lab.(*fakestage.Lab), Match: "sqecount", Providers: []string{"rxe", "siw"}}
		lossy := &fakestage.Lossy{Lab: o.Stages.Lab.(*fakestage.Lab), Calls: &fakestage.Calls{}, Match: "ib_drain", N: 1}
		o.Stages.Profiles = []bot.Profile{lossy, pressure}
	})
	pressure.Calls = h.calls
	patch := func(id, subject, body string) flow.Series {
		s := series(id, subject)
		s.Patches = []*flow.Message{fakestage.Mail("From: dev\nSubject: " + subject + "\n\n---\n" + body)}
		return s
	}
	over := patch("<over@x>", "[PATCH 1/2] svcrdma: sq-overflow by crediting twice", "@@ -1 +1 @@ void svc_rdma_write_chunk_release(void)\n-x\n+\tsvc_rdma_wake_send_waiters(rdma, cc->cc_sqecount);\n")
	over.Patches = append(over.Patches, fakestage.Mail("From: dev\nSubject: [PATCH 2/2] svcrdma: sq-overflow too\n\n---\n"))
	h.ingest.Add(over)
	h.ingest.Add(patch("<fine@x>", "[PATCH] svcrdma: count sqecount once", "@@ -1 +1 @@ void svc_rdma_write_chunk_release(void)\n-x\n+y = sqecount;\n"))
	h.ingest.Add(patch("<away@x>", "[PATCH] svcrdma: sq-overflow where nothing asks", "@@ -1 +1 @@ int svc_rdma_recvfrom(void)\n-x\n+y\n"))
	h.wait("three replies", 60*time.Second, func() bool { return h.report.Count() == 3 })

	reply, _ := h.report.Get("series:<over@x>:v1:")
	if reply.Verdict != flow.Regression || !strings.Contains(reply.Summary, "Send Queue full") {
		t.Fatalf("overflow under pressure: %s %q, want REGRESSION", reply.Verdict, reply.Summary)
	}
	for _, s := range reply.CandSamples {
		if !strings.HasPrefix(s.Profile, "pressure-") {
			t.Errorf("a candidate boot outside the pressure profile: %+v", s)
		}
	}
	if len(reply.CandSamples) != 2 {
		t.Errorf("%d candidate boots, want one on each provider", len(reply.CandSamples))
	}
	fine, _ := h.report.Get("series:<fine@x>:v1:")
	away, _ := h.report.Get("series:<away@x>:v1:")
	if fine.Verdict != flow.Pass || away.Verdict != flow.Pass {
		t.Errorf("fine %s, away %s: want PASS (the second touches no Send Queue code)", fine.Verdict, away.Verdict)
	}
	var calls []string
	for _, c := range h.calls.List() {
		if strings.HasPrefix(c, "pressure-") {
			calls = append(calls, c)
		}
	}
	// over and fine: base and candidate on rxe, then on siw.
	if len(calls) != 8 || !strings.HasPrefix(calls[0], "pressure-rxe ") || !strings.HasPrefix(calls[2], "pressure-siw ") {
		t.Errorf("pressure boots:\n%s", strings.Join(calls, "\n"))
	}
	ot, err := h.st.TestByKey(context.Background(), h.st.DB, "series:<over@x>:v1:")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := h.st.BisectionOfTest(context.Background(), h.st.DB, ot.ID); ok || err != nil {
		t.Errorf("the pressure-only regression was bisected over the series' prefixes (%v)", err)
	}
}

// Every new mainline head gets the pressure boots too: a head whose
// provider refuses Sends under pressure is a bad head, REGRESSION, with
// no default boot of it and no bisection (which would boot the default
// test, where the fault need not show).
func TestPressureProfileOnMainlineHeads(t *testing.T) {
	repo, commits := gitRepo(t, 2, -1, nil)
	git := gitIn(t, repo)
	git("update-ref", "refs/heads/master", commits[0])
	var pressure *fakestage.Pressure
	// The client-side profile is on too: a head boots on both sides
	// already, so it never runs for one.
	clientSide := &fakestage.ClientSide{Calls: &fakestage.Calls{}, N: 1}
	h := newHarnessWith(t, testConfig(), repo, "", func(o *bot.Options) {
		pressure = &fakestage.Pressure{Lab: o.Stages.Lab.(*fakestage.Lab), Calls: &fakestage.Calls{}, Providers: []string{"rxe", "siw"}}
		clientSide.Lab = o.Stages.Lab.(*fakestage.Lab)
		o.Stages.Profiles = []bot.Profile{pressure, clientSide}
	})
	ctx := context.Background()
	head := mainlineHeads(t, h)
	head(1, "good")
	git("update-ref", "refs/heads/master", commits[1])
	head(2, "good")
	if n := len(pressure.Calls.List()); n != 4 {
		t.Fatalf("%d pressure boots for a clean head, want base and candidate on rxe and siw:\n%s", n, strings.Join(pressure.Calls.List(), "\n"))
	}
	os.WriteFile(filepath.Join(repo, "SQOVERFLOW"), []byte("credit Write chunk SQEs twice"), 0o644)
	git("add", "-A")
	git("commit", "-q", "-m", "svcrdma: Add Write chunk WRs to the RPC's Send WR chain")
	bad := git("rev-parse", "HEAD")
	before := len(h.lab.Calls.List())
	hist := head(3, "bad")
	tt, err := h.st.Test(ctx, h.st.DB, hist[2].TestID)
	if err != nil {
		t.Fatal(err)
	}
	if tt.Candidate != bad || tt.Verdict != flow.Regression || !strings.Contains(tt.Summary, "Send Queue full") {
		t.Errorf("the overflowing head: %.12s %s %q, want REGRESSION, Send Queue full", tt.Candidate, tt.Verdict, tt.Summary)
	}
	for _, c := range h.lab.Calls.List()[before:] {
		if strings.HasPrefix(c, "run ") && strings.Contains(c, bad) {
			t.Errorf("a default boot of the overflowing head: %s", c)
		}
	}
	if bis, err := h.st.Bisections(ctx, 10); err != nil || len(bis) != 0 {
		t.Errorf("bisections %+v (%v): a pressure-only regression is not bisected on the default test", bis, err)
	}
	if c := clientSide.Calls.List(); len(c) != 0 {
		t.Errorf("client-side boots of mainline heads: %q", c)
	}
}

// A series whose kernel boots on the server but changes code the client
// runs too (ib_core) first boots on the client beside the base on the
// server: a kernel that corrupts only what it writes as a client is
// DATA_CORRUPTION from those boots alone, with no default boot. The same
// kernel in a series that asks nothing of the profile boots on the
// server only, where it does no harm, and passes: what the profile is for.
func TestClientSideProfileFindsClientOnlyCorruption(t *testing.T) {
	var clientSide *fakestage.ClientSide
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		clientSide = &fakestage.ClientSide{Lab: o.Stages.Lab.(*fakestage.Lab), Match: "ib_sg_to_pages", N: 2}
		o.Stages.Profiles = []bot.Profile{clientSide}
	})
	clientSide.Calls = h.calls
	patch := func(id, subject, body string) flow.Series {
		s := series(id, subject)
		s.Patches = []*flow.Message{fakestage.Mail("From: dev\nSubject: " + subject + "\n\n---\n" + body)}
		return s
	}
	h.ingest.Add(patch("<sg@x>", "[PATCH] RDMA/core: client-corrupt by coalescing", "@@ -1 +1 @@ int ib_sg_to_pages(struct ib_mr *mr)\n-x\n+y\n"))
	h.ingest.Add(patch("<elsewhere@x>", "[PATCH] RDMA/core: client-corrupt where nothing asks", "@@ -1 +1 @@ int ib_dealloc_pd(void)\n-x\n+y\n"))
	h.wait("two replies", 60*time.Second, func() bool { return h.report.Count() == 2 })

	sg, _ := h.report.Get("series:<sg@x>:v1:")
	if sg.Verdict != flow.DataCorruption || !strings.Contains(sg.Summary, "server's check: mismatch") {
		t.Fatalf("client-only corruption: %s %q, want DATA_CORRUPTION from the server's check", sg.Verdict, sg.Summary)
	}
	for _, s := range sg.CandSamples {
		if s.Profile != flow.ProfileClientSide {
			t.Errorf("a candidate boot outside the client-side profile: %+v", s)
		}
	}
	if n := len(sg.CandSamples); n != 1 {
		t.Errorf("%d candidate boots: the first corrupt one decides", n)
	}
	if other, _ := h.report.Get("series:<elsewhere@x>:v1:"); other.Verdict != flow.Pass {
		t.Errorf("the same kernel booted on the server only: %s, want PASS", other.Verdict)
	}
	var boots []string
	for _, c := range h.calls.List() {
		if strings.HasPrefix(c, "run ") && strings.Contains(c, " on the client beside ") {
			boots = append(boots, c)
		}
	}
	// Base beside itself, then the candidate beside the base: one pair,
	// as the candidate's first boot was corrupt.
	if len(boots) != 2 {
		t.Errorf("client-side boots:\n%s", strings.Join(boots, "\n"))
	}
}

// mainlineHeads runs the mainline job on master and waits until the
// history holds want heads, the last in state; it returns the history.
func mainlineHeads(t *testing.T, h *harness) func(want int, state string) []store.MainlineRun {
	ctx := context.Background()
	return func(want int, state string) []store.MainlineRun {
		t.Helper()
		if _, err := h.bot.River().Insert(ctx, bot.MainlineArgs{Tree: "mainline", Branch: "master"}, nil); err != nil {
			t.Fatal(err)
		}
		var hist []store.MainlineRun
		h.wait("head "+state, 30*time.Second, func() bool {
			hist, _ = h.st.MainlineHistory(ctx, h.st.DB, "mainline", "master")
			return len(hist) == want && hist[want-1].State == store.MainlineState(state)
		})
		return hist
	}
}
