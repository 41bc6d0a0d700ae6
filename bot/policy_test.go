package bot_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/clients/aa"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/fakestage"
	"github.com/rdmabot/rdmabot/lab"
)

// profileDecider decides outcome whenever the candidate's samples hold
// a profile's boot, and PASS on default boots alone: what a profile
// found, as the decision would say it.
type profileDecider struct{ outcome flow.Outcome }

func (d profileDecider) Decide(ctx context.Context, id string, base, cand []flow.Sample) (flow.Decision, error) {
	for _, s := range cand {
		if s.Profile != "" {
			return flow.Decision{Verdict: d.outcome, Summary: "under the profile: " + d.outcome.String()}, nil
		}
	}
	return flow.Decision{Verdict: flow.Pass, Summary: "default boots"}, nil
}

// steadyPair is a lab pair whose every boot passes at one copy rate.
type steadyPair struct{}

func (steadyPair) Run(ctx context.Context, k lab.Kernel, t lab.Test) (*lab.Result, error) {
	r := &lab.Result{Pair: "qemu", Test: t, Passed: true, LoopSecs: 10, Health: lab.Health{Reported: true, Ops: 100}}
	for i := range 3 {
		secs := float64(t.SizeMiB) / 100
		r.Iterations = append(r.Iterations, lab.Iteration{N: i + 1, WriteMBps: 100, ReadMBps: 100, WriteSecs: secs, ReadSecs: secs})
	}
	return r, nil
}

// The A/A bench follows the lab job's round policy: whatever a profile's
// boots decide, it records the verdict a series gets from the same
// decision, and boots the default test exactly when the series does (a
// failing decision, DATA_CORRUPTION among them, ends both at the
// profiles). --profiles-only records the failing ones as a series gets
// them, and PASS for the rest (it never boots the default test).
func TestAARecordsProfileOutcomesAsASeries(t *testing.T) {
	for _, o := range []flow.Outcome{flow.Pass, flow.Regression, flow.Improvement, flow.Inconclusive, flow.Crash, flow.DataCorruption} {
		t.Run(o.String(), func(t *testing.T) {
			verdict, defaultBoots := seriesUnderProfile(t, o)
			if verdict != o {
				t.Fatalf("the series got %s, want %s (the fake decision)", verdict, o)
			}
			if defaultBoots == o.Failing() {
				t.Errorf("the series booted the default test: %v, for a %s under the profile", defaultBoots, o)
			}
			r := aaUnderProfile(t, o, false)
			if r.Verdict != verdict || (r.Rounds > 0) != defaultBoots || r.Error != "" {
				t.Errorf("A/A: %s after %d default rounds (%s), the series: %s, default boots %v", r.Verdict, r.Rounds, r.Error, verdict, defaultBoots)
			}
			want := flow.Pass
			if o.Failing() {
				want = verdict
			}
			if r := aaUnderProfile(t, o, true); r.Verdict != want || r.Rounds != 0 || r.Error != "" {
				t.Errorf("A/A --profiles-only: %s (%s) after %d default rounds, want %s and none", r.Verdict, r.Summary, r.Rounds, want)
			}
		})
	}
}

// seriesUnderProfile is a series' verdict when the lossy profile's boots
// decide o, and whether its candidate booted the default test.
func seriesUnderProfile(t *testing.T, o flow.Outcome) (flow.Outcome, bool) {
	t.Helper()
	h := newHarnessWith(t, testConfig(), "", "", func(opts *bot.Options) {
		opts.Stages.Decide = profileDecider{o}
		opts.Stages.Profiles = []bot.Profile{&fakestage.Lossy{Lab: opts.Stages.Lab.(*fakestage.Lab), Calls: &fakestage.Calls{}, Match: "ib_drain", N: 2}}
	})
	subject := "[PATCH] RDMA/core: touch the drain"
	s := series("<p@x>", subject)
	s.Patches = []*flow.Message{fakestage.Mail("From: dev\nSubject: " + subject + "\n\n---\n@@ -1 +1 @@ static void ib_drain_qp_done(void)\n-x\n+y\n")}
	h.ingest.Add(s)
	ctx := context.Background()
	var tt store.Test
	h.wait("the verdict", 60*time.Second, func() bool {
		var err error
		tt, err = h.st.TestByKey(ctx, h.st.DB, "series:<p@x>:v1:")
		return err == nil && tt.State == store.StateDone
	})
	runs, err := h.st.Runs(ctx, h.st.DB, tt.ID)
	if err != nil {
		t.Fatal(err)
	}
	defaultBoots := false
	for _, r := range runs {
		for _, s := range r.Samples {
			defaultBoots = defaultBoots || r.Role == "candidate" && s.Profile == ""
		}
	}
	return tt.Verdict, defaultBoots
}

// aaUnderProfile is an A/A comparison's record when the lossy profile's
// boots decide o.
func aaUnderProfile(t *testing.T, o flow.Outcome, profilesOnly bool) aa.Result {
	t.Helper()
	kernel := t.TempDir()
	if err := os.WriteFile(filepath.Join(kernel, "kernel"), []byte("fast"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := &fakestage.Calls{}
	var out bytes.Buffer
	a := &aa.Runner{
		Lab:      &lab.Runner{Cfg: lab.DefaultConfig(), Test: lab.DefaultTest(), Log: slog.New(slog.DiscardHandler), Pairs: map[string]lab.Pair{"qemu": steadyPair{}}},
		Decide:   profileDecider{o},
		Profiles: []bot.Profile{&fakestage.Lossy{Lab: &fakestage.Lab{Calls: calls}, Calls: calls, N: 2}}, ProfilesOnly: profilesOnly,
		Pair: "qemu", Kernel: kernel, Runs: 3, Rounds: testConfig().MaxRounds, Results: filepath.Join(t.TempDir(), "aa.jsonl"),
		Condition: "idle", Commit: "abc", Rand: rand.New(rand.NewPCG(1, 2)), Out: &out,
	}
	rs, err := a.Run(context.Background(), 1)
	if err != nil || len(rs) != 1 {
		t.Fatalf("A/A: %d comparisons, %v", len(rs), err)
	}
	// The progress line counts the profile boots: a --profiles-only
	// comparison is not "0 rounds, 0+0 boots" as if nothing booted.
	if want := fmt.Sprintf("after %d profile boots and %d rounds", len(rs[0].Profiles), rs[0].Rounds); len(rs[0].Profiles) == 0 || !strings.Contains(out.String(), want) {
		t.Errorf("A/A progress: want %q (%d profile boots) in %q", want, len(rs[0].Profiles), out.String())
	}
	// Each profile boot's tests are kept beside its profile: the
	// summary's flakiness table reads them.
	if len(rs[0].ProfileTests) != len(rs[0].Profiles) {
		t.Errorf("%d profile boots, %d lists of their tests", len(rs[0].Profiles), len(rs[0].ProfileTests))
	}
	return rs[0]
}

// scriptDecider answers each decision from verdicts in turn, or fails.
type scriptDecider struct {
	verdicts []flow.Outcome
	err      error
	calls    int
}

func (d *scriptDecider) Decide(ctx context.Context, id string, base, cand []flow.Sample) (flow.Decision, error) {
	d.calls++
	if d.err != nil {
		return flow.Decision{}, d.err
	}
	v := d.verdicts[0]
	d.verdicts = d.verdicts[1:]
	return flow.Decision{Verdict: v}, nil
}

// The round policy's rules one by one: the profiles stop the test on a
// failing decision only; the cache takes the fresh boots after the
// cached ones unless the first round finds them drifted (never checked
// against a crashed round, or later rounds); more rounds while the
// decision asks and the rounds last; the decision's failure is the lab's.
func TestRoundPolicy(t *testing.T) {
	ctx := context.Background()
	smp := func(n int, crash string) []flow.Sample {
		out := make([]flow.Sample, n)
		for i := range out {
			out[i].Crash = crash
		}
		return out
	}
	for _, c := range []struct {
		v    flow.Outcome
		stop bool
	}{{flow.Pass, false}, {flow.Improvement, false}, {flow.Inconclusive, false}, {flow.Regression, true}, {flow.Crash, true}, {flow.DataCorruption, true}} {
		d := &scriptDecider{verdicts: []flow.Outcome{c.v}}
		if got, stop, err := (bot.RoundPolicy{Decide: d}).ProfilesDecide(ctx, "t", smp(1, ""), smp(1, "")); got.Verdict != c.v || stop != c.stop || err != nil {
			t.Errorf("profiles decided %s: %s, stop %v, %v; want stop %v", c.v, got.Verdict, stop, err, c.stop)
		}
	}
	d := &scriptDecider{}
	if _, stop, err := (bot.RoundPolicy{Decide: d}).ProfilesDecide(ctx, "t", smp(1, ""), nil); stop || err != nil || d.calls != 0 {
		t.Errorf("no profile boots: stop %v, %v, %d decisions", stop, err, d.calls)
	}
	d = &scriptDecider{err: context.DeadlineExceeded}
	if _, _, err := (bot.RoundPolicy{Decide: d}).ProfilesDecide(ctx, "t", nil, smp(1, "")); !flow.IsInfra(err) {
		t.Errorf("a decision that failed under the profiles: %v, want INFRA", err)
	}

	for name, c := range map[string]struct {
		cached, fresh []flow.Sample
		round         int
		verdicts      []flow.Outcome
		err           error
		want          int
		drifted       bool
	}{
		"no cache":        {nil, smp(3, ""), 1, nil, nil, 3, false},
		"no fresh boots":  {smp(4, ""), nil, 1, nil, nil, 0, false},
		"agrees":          {smp(4, ""), smp(3, ""), 1, []flow.Outcome{flow.Pass}, nil, 7, false},
		"drifted slower":  {smp(4, ""), smp(3, ""), 1, []flow.Outcome{flow.Regression}, nil, 3, true},
		"drifted faster":  {smp(4, ""), smp(3, ""), 1, []flow.Outcome{flow.Improvement}, nil, 3, true},
		"crashed round":   {smp(4, ""), smp(1, "oops"), 1, nil, nil, 5, false},
		"second round":    {smp(4, ""), smp(3, ""), 2, nil, nil, 7, false},
		"decision failed": {smp(4, ""), smp(3, ""), 1, nil, context.Canceled, -1, false},
	} {
		p := bot.RoundPolicy{Decide: &scriptDecider{verdicts: c.verdicts, err: c.err}}
		cache, drifted, err := p.BaseCache(ctx, "t", c.cached, c.fresh, c.round)
		if c.want < 0 {
			if !flow.IsInfra(err) {
				t.Errorf("%s: %v, want INFRA", name, err)
			}
			continue
		}
		if len(cache) != c.want || drifted != c.drifted || err != nil {
			t.Errorf("%s: %d cached samples, drifted %v, %v; want %d, %v", name, len(cache), drifted, err, c.want, c.drifted)
		}
	}

	p := bot.RoundPolicy{MaxRounds: 3}
	for _, c := range []struct{ need, round, want int }{{0, 1, 0}, {4, 1, 4}, {4, 2, 4}, {4, 3, 0}} {
		if got := p.MoreRuns(flow.Decision{NeedMore: c.need}, c.round); got != c.want {
			t.Errorf("round %d of 3 asking %d more: %d", c.round, c.need, got)
		}
	}
}
