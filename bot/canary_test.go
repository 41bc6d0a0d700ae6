package bot_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/clients/dashboard"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/fakestage"
)

// foolDecider is the fake decision, except that its first n decisions
// call an IMPROVEMENT of write_MBps (a lab that drifted fooled it). It
// records which metrics each decision was given.
type foolDecider struct {
	mu    sync.Mutex
	fool  int
	given [][]string
}

func (d *foolDecider) Decide(ctx context.Context, id string, base, cand []flow.Sample) (flow.Decision, error) {
	d.mu.Lock()
	var keys []string
	if len(cand) > 0 {
		for k := range cand[0].Metrics {
			keys = append(keys, k)
		}
	}
	d.given = append(d.given, keys)
	fool := d.fool > 0
	if fool {
		d.fool--
	}
	d.mu.Unlock()
	if fool {
		return flow.Decision{Verdict: flow.Improvement, Summary: "write_MBps +12%", Metric: "write_MBps", Change: 0.12}, nil
	}
	return fakestage.Decider{}.Decide(ctx, id, base, cand)
}

func (d *foolDecider) last() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.given[len(d.given)-1]
}

func canaries(t *testing.T, h *harness) []store.Canary {
	cs, err := h.st.Canaries(context.Background(), h.st.DB, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// The canary tests the default base against itself through the jobs a
// series goes through, records the outcome and mails nothing. A false
// alarm mutes its metric: the next series is decided without it, its
// trace says so, and the dashboard shows it; once the alarm is older
// than the window the metric decides again.
func TestCanaryMutesAMetricThatFalseAlarms(t *testing.T) {
	cfg := testConfig()
	cfg.Canary.Schedule = ""
	dec := &foolDecider{fool: 1}
	h := newHarnessWith(t, cfg, "", "", func(o *bot.Options) { o.Stages.Decide = dec })
	ctx := context.Background()
	insert := func(at time.Time) {
		if _, err := h.bot.River().Insert(ctx, bot.CanaryArgs{At: at}, nil); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Date(2026, 12, 2, 3, 30, 0, 0, time.UTC)
	insert(t0)
	h.wait("the first canary", 30*time.Second, func() bool { return len(canaries(t, h)) == 1 })
	c := canaries(t, h)[0]
	if c.Verdict != flow.Improvement || c.Metric != "write_MBps" || c.Tree != "mainline" || c.Commit != strings.Repeat("b", 40) {
		t.Fatalf("canary %+v", c)
	}
	tt, err := h.st.Test(ctx, h.st.DB, c.TestID)
	if err != nil || tt.Kind != store.KindCanary || tt.Base != tt.Candidate || tt.State != store.StateDone {
		t.Fatalf("canary test %+v, %v", tt, err)
	}
	// One kernel: built once, booted as both sides.
	if n := h.calls.Count("build mainline " + strings.Repeat("b", 40)); n != 1 {
		t.Errorf("the canary's kernel was built %d times", n)
	}
	if h.report.Count() != 0 {
		t.Errorf("the canary was answered")
	}
	rates, _, err := h.bot.FalseAlarmRates(ctx)
	if err != nil || len(rates) != 1 || !rates[0].Muted || rates[0].Alarms != 1 || rates[0].Comparisons != 1 {
		t.Fatalf("rates %+v, %v", rates, err)
	}

	h.ingest.Add(series("<after@x>", "[PATCH] svcrdma: harmless"))
	h.wait("the series' reply", 30*time.Second, func() bool { return h.report.Count() == 1 })
	if r, _ := h.report.Get("series:<after@x>:v1:"); r.Verdict != flow.Pass {
		t.Errorf("series after the false alarm: %s", r.Verdict)
	}
	for _, k := range dec.last() {
		if k == "write_MBps" {
			t.Errorf("the muted metric was decided on: %v", dec.last())
		}
	}
	st, _ := h.st.TestByKey(ctx, h.st.DB, "series:<after@x>:v1:")
	if !traceHas(t, h, st.ID, "muted, not decided on: write_MBps (1 false alarms in 1 canary comparisons)") {
		t.Error("the trace does not say the metric was muted")
	}

	mux := http.NewServeMux()
	dashboard.New(h.st, h.bot, slog.New(slog.DiscardHandler)).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	page := get(t, srv, "/canary")
	for _, want := range []string{"<td>write_MBps</td><td>1</td><td>1</td><td>100.0%</td>", ">muted<", ">IMPROVEMENT</a>"} {
		if !strings.Contains(page, want) {
			t.Errorf("canary page lacks %q:\n%s", want, page)
		}
	}

	// The canary itself still judges the muted metric (its recovery is
	// what it measures): a second one, PASS, leaves it muted at 1 in 2.
	insert(t0.Add(time.Hour))
	h.wait("the second canary", 30*time.Second, func() bool { return len(canaries(t, h)) == 2 })
	if got := strings.Join(dec.last(), " "); !strings.Contains(got, "write_MBps") {
		t.Errorf("the canary was decided without the muted metric: %s", got)
	}
	if rates, _, _ := h.bot.FalseAlarmRates(ctx); len(rates) != 1 || !rates[0].Muted || rates[0].Comparisons != 2 {
		t.Errorf("after a passing canary: %+v", rates)
	}

	// A month on, the alarm is out of the window: write_MBps decides again.
	h.skew.Store(int64(31 * 24 * time.Hour))
	insert(t0.Add(24 * time.Hour))
	h.wait("the third canary", 30*time.Second, func() bool { return len(canaries(t, h)) == 3 })
	if c := canaries(t, h)[0]; c.Verdict != flow.Pass || c.Metric != "" {
		t.Errorf("third canary %+v", c)
	}
	h.ingest.Add(series("<later@x>", "[PATCH] svcrdma: harmless"))
	h.wait("the second series' reply", 30*time.Second, func() bool { return h.report.Count() == 2 })
	if got := strings.Join(dec.last(), " "); !strings.Contains(got, "write_MBps") {
		t.Errorf("write_MBps still muted a month later: %s", got)
	}
}

// With no tree to take the default base from (an offline machine before
// run.sh imported one), the canary is INFRA: retried, no comparison
// recorded, nothing mailed.
func TestCanaryWithoutABaseIsInfra(t *testing.T) {
	cfg := testConfig()
	cfg.Canary.Schedule = ""
	cfg.MaxAttempts = 2
	h := newHarness(t, cfg, "")
	h.build.NoBase = true
	if _, err := h.bot.River().Insert(context.Background(), bot.CanaryArgs{At: time.Now()}, nil); err != nil {
		t.Fatal(err)
	}
	h.wait("the canary to fail on infrastructure", 30*time.Second, func() bool {
		ts, _ := h.st.Tests(context.Background(), h.st.DB, 10)
		return len(ts) == 1 && ts[0].State == store.StateFailed
	})
	ts, _ := h.st.Tests(context.Background(), h.st.DB, 10)
	if !strings.Contains(ts[0].Summary, "canary: no default base") || ts[0].Verdict != flow.None {
		t.Errorf("canary ended %q %q", ts[0].Summary, ts[0].Verdict)
	}
	if len(canaries(t, h)) != 0 || h.report.Count() != 0 {
		t.Error("a canary without a base was recorded or answered")
	}
}

// The default configuration runs the canary daily; a bad spec or rate is
// refused.
func TestCanaryConfig(t *testing.T) {
	c := bot.DefaultConfig()
	if c.Canary.Schedule == "" || c.Validate() != nil {
		t.Fatalf("default canary %+v: %v", c.Canary, c.Validate())
	}
	for _, bad := range []func(*bot.Config){
		func(c *bot.Config) { c.Canary.Schedule = "every day" },
		func(c *bot.Config) { c.Canary.MaxFalseAlarmRate = 1 },
		func(c *bot.Config) { c.Canary.Window.Duration = 0 },
	} {
		c := bot.DefaultConfig()
		bad(&c)
		if c.Validate() == nil {
			t.Errorf("accepted %+v", c.Canary)
		}
	}
}

func traceHas(t *testing.T, h *harness, testID int64, want string) bool {
	t.Helper()
	jobs, err := h.bot.JobsOfTest(context.Background(), testID)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		tr, _ := h.st.Trace(context.Background(), j.ID)
		for _, l := range tr {
			if strings.Contains(l.Line, want) {
				return true
			}
		}
	}
	return false
}
