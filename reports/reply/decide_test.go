package reply

import (
	"context"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/smtptest"
	"github.com/rdmabot/rdmabot/reports"
)

// The statistics of reports decide through the adapter: a 48 % drop is a
// regression by the second look, equal samples pass, a crash in the
// candidate is a crash.
func TestDecideWithReports(t *testing.T) {
	r := newReplyRig(t).r
	runs := r.Cfg.Runs
	// At 5 runs a side no rank test can reach the per-look alpha, so the
	// first look may only ask for more.
	if d := decide(t, r, samples(runs, 100, 2), samples(runs, 52, 2)); d.Verdict != flow.Regression && d.NeedMore == 0 {
		t.Errorf("48%% slower at the first look: %+v", d)
	}
	second := runs + r.Cfg.RunsStep
	if d := decide(t, r, samples(second, 100, 2), samples(second, 52, 2)); d.Verdict != flow.Regression {
		t.Errorf("48%% slower at %d runs: %+v", second, d)
	}
	d := decide(t, r, samples(runs, 100, 2), samples(runs, 100, 2))
	if d.Verdict != flow.Pass && d.NeedMore == 0 {
		t.Errorf("equal: %+v", d)
	}
	crashed := samples(runs, 100, 2)
	crashed[1] = flow.Sample{Crash: "INFO: task hung in svc_rdma_drain"}
	if d := decide(t, r, samples(runs, 100, 2), crashed); d.Verdict != flow.Crash {
		t.Errorf("crash: %+v", d)
	}
}

// Transport health decides whatever the throughput: retransmissions in
// two or more patched boots where no base boot had any are a REGRESSION
// at the first look; in one boot alone, or where the base has them too,
// they decide nothing. Boots that reported no counts (a crash, an older
// image's cached base) are left out, and with no base counts at all the
// rule is not applied.
func TestTransportHealthDecides(t *testing.T) {
	r := newReplyRig(t).r
	runs := r.Cfg.Runs
	base, same := samples(runs, 100, 2), samples(runs, 100, 2)
	d := decide(t, r, base, withRetrans(same, 12, 0, 3))
	if d.Verdict != flow.Regression || d.NeedMore != 0 || !strings.Contains(d.Summary, "24 RPC retransmissions in 2 of 5 boots of the patched kernel, none in 5 boots of the base") {
		t.Errorf("retransmissions in 2 of 5 patched boots: %+v", d)
	}
	for name, c := range map[string][2][]flow.Sample{
		"one patched boot":      {base, withRetrans(same, 40, 2)},
		"the base has them too": {withRetrans(base, 1, 4), withRetrans(same, 12, 0, 3)},
		"no base counts":        {withRetrans(base, 0), withRetrans(same, 12, 0, 3)},
	} {
		b := c[0]
		if name == "no base counts" {
			b = append([]flow.Sample(nil), base...)
			for i := range b {
				b[i].Health = nil
			}
		}
		if d := decide(t, r, b, c[1]); d.Verdict == flow.Regression {
			t.Errorf("%s: %+v", name, d)
		}
	}
}

// pressured are n boots of the pressure profile on provider with the
// given counts (the load reached the chunk paths in every one).
func pressured(n int, provider string, set map[string]int) []flow.Sample {
	var out []flow.Sample
	for range n {
		h := counts(map[string]int{"write_chunks": 3000, "read_chunks": 60, "sq_starve": 800})
		for k, v := range set {
			h[k] = v
		}
		out = append(out, flow.Sample{Profile: flow.ProfilePressure + "-" + provider, Health: h,
			Metrics: map[string]float64{"read_MBps": 9, "write_MBps": 1}})
	}
	return out
}

// The pressure profile's evidence decides whatever the throughput, and
// before any default boot: a Send refused for a full Send Queue in one
// patched boot where no base boot had one is a REGRESSION naming it;
// reconnects need two boots; a base that shows the same decides nothing,
// and the context counts (chunks, Send Queue waits) never decide. Its
// figures are never compared with the default test's.
func TestPressureEvidenceDecides(t *testing.T) {
	r := newReplyRig(t).r
	base := append(pressured(1, "rxe", nil), pressured(1, "siw", nil)...)
	cand := append(pressured(1, "rxe", map[string]int{"sq_full": 3, "reconnects": 2}), pressured(1, "siw", map[string]int{"reconnects": 1})...)
	d := decide(t, r, base, cand)
	if d.Verdict != flow.Regression || d.NeedMore != 0 || !strings.Contains(d.Summary, "under Send Queue pressure (rxe and siw under TCG") ||
		!strings.Contains(d.Summary, "3 Sends refused: Send Queue full in 1 of 2 boots of the patched kernel, none in 2 boots of the base") {
		t.Errorf("a full Send Queue in one boot, reconnects in both: %s %s", d.Verdict, d.Summary)
	}
	both := append(pressured(1, "rxe", map[string]int{"reconnects": 2}), pressured(1, "siw", map[string]int{"reconnects": 1})...)
	if d := decide(t, r, base, both); d.Verdict != flow.Regression || !strings.Contains(d.Summary, "3 transport reconnects in 2 of 2 boots") {
		t.Errorf("reconnects in both pressure boots: %s %s", d.Verdict, d.Summary)
	}
	one := append(pressured(1, "rxe", map[string]int{"sq_full": 1}), pressured(1, "siw", nil)...)
	for name, c := range map[string][2][]flow.Sample{
		"reconnects in one boot": {base, append(pressured(1, "rxe", map[string]int{"reconnects": 1}), pressured(1, "siw", nil)...)},
		"the base has them too":  {append(pressured(1, "rxe", map[string]int{"sq_full": 1}), pressured(1, "siw", nil)...), one},
		"context counts only":    {base, pressured(2, "rxe", map[string]int{"sq_starve": 0, "write_chunks": 10})},
	} {
		if d := decide(t, r, c[0], c[1]); d.Verdict == flow.Regression || d.Verdict == flow.Improvement {
			t.Errorf("%s: %+v", name, d)
		}
	}
	// Beside the default boots, the pressure boots' figures (9 MB/s
	// read) are not compared with the default test's (100 MB/s copy).
	runs := r.Cfg.Runs
	d = decide(t, r, append(samples(runs, 100, 2), base...), append(samples(runs, 100, 2), pressured(2, "rxe", nil)...))
	if d.Verdict == flow.Regression {
		t.Errorf("clean pressure boots beside equal default boots: %+v", d)
	}
}

// A reply goes into reports' outbox ledger once, however often the report
// job delivers it.
func TestDeliverThroughOutbox(t *testing.T) {
	ctx := context.Background()
	g := newReplyRig(t)
	r, ob, s := g.r, g.ob, g.s
	base, cand := samples(2*r.Cfg.Runs, 100, 2), samples(2*r.Cfg.Runs, 52, 2)
	d := decide(t, r, base, cand)
	rep := flow.Report{Key: "series:x", Kind: "series", Verdict: d.Verdict, Detail: d.Detail, Series: &s, Tree: "nfsd", Base: "0123456789abcdef0123456789abcdef01234567",
		URL: "http://127.0.0.1:8480/tests/1", BaseSamples: base, CandSamples: cand}
	for range 3 {
		if err := r.Deliver(ctx, rep); err != nil {
			t.Fatal(err)
		}
	}
	es, err := ob.Ledger().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Outcome != "REGRESSION" {
		t.Fatalf("ledger: %+v", es)
	}
	t.Logf("reply %s to %s: %s", es[0].MessageID, es[0].Recipient, es[0].State)
}

// A refusal goes to the command's sender alone, never to the series'
// lists: strangers' commands cannot spend a list's daily replies (a
// refusal Cc the list took its last one, and the author's verdict
// waited).
func TestRefusalSparesTheListsBudget(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	g := newReplyRig(t, func(c *reports.Config) {
		c.Mail, c.Moderate, c.SMTP.Addr, c.SMTP.StartTLS = true, false, srv.Addr, false
		c.ListDailyLimit = 1
	})
	ctx := context.Background()
	refused := g.report(1, flow.Refused, "eve@example.org may not ask.", nil, nil, nil)
	refused.Origin.Command = &flow.Command{MsgID: "cmd-eve@example.org", From: "eve@example.org", Name: "Eve Stranger",
		Line: "#rdmabot test", References: []string{g.s.Root}, Refused: refused.Summary}
	e := g.deliver(t, refused)
	if len(e.Lists) != 0 || strings.Contains(string(e.Raw), "vger.kernel.org") || e.Recipient != "eve@example.org" {
		t.Errorf("refusal to %s, lists %q:\n%s", e.Recipient, e.Lists, e.Raw)
	}
	if m := srv.Messages(); len(m) != 1 || strings.Join(m[0].To, " ") != "eve@example.org" {
		t.Errorf("%d sent, the first to %q", len(m), m[0].To)
	}
	// The author's verdict still has the list's reply of the day.
	d := decide(t, g.r, samples(2*g.r.Cfg.Runs, 100, 2), samples(2*g.r.Cfg.Runs, 52, 2))
	e = g.deliver(t, g.report(2, d.Verdict, d.Summary, d.Detail, nil, nil))
	if len(e.Lists) == 0 {
		t.Fatalf("the verdict goes to no list")
	}
	if _, err := g.ob.Deliver(ctx); err != nil {
		t.Fatal(err)
	}
	if m := srv.Messages(); len(m) != 2 {
		t.Errorf("the author's verdict after a refusal: %d sent, its state %s", len(m)-1, e.State)
	}
}
