package bot

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// The A/A canary: on schedule, the default base is tested against itself
// through the same jobs a series goes through (build, lab rounds with
// the base cache, decision). The kernels are one, so a REGRESSION or an
// IMPROVEMENT is a false alarm, measured on the lab as it is that day;
// a metric whose false alarms exceed bot.canary.max_false_alarm_rate is
// muted until they do not.

type canaryWorker struct {
	river.WorkerDefaults[CanaryArgs]
	b *Bot
}

func (w *canaryWorker) Timeout(*river.Job[CanaryArgs]) time.Duration { return time.Minute }

func (w *canaryWorker) Work(ctx context.Context, job *river.Job[CanaryArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		key := "canary:" + job.Args.At.UTC().Format(time.RFC3339)
		tr.Logf("A/A canary %s", key)
		return complete(ctx, b, job, func(tx *sql.Tx) error {
			_, _, err := b.enqueueTest(ctx, tx, store.Test{Key: key, Kind: store.KindCanary}, flow.Origin{Kind: "canary"})
			return err
		})
	})
}

// canaryBase is the commit a canary compares with itself: the base a
// series that names none would get.
func (b *Bot) canaryBase(ctx context.Context, t *store.Test, tr *Trace) error {
	base, err := b.stages.Build.SelectBase(ctx, flow.Series{})
	if err != nil {
		// No tree in the store is the operator's gap: retried, never a verdict.
		return flow.MarkInfra(fmt.Errorf("canary: no default base: %w", err))
	}
	t.Tree, t.Base, t.Candidate, t.BaseBranch = base.Tree, base.Commit, base.Commit, base.Branch
	t.BaseReason = "A/A canary: the default base against itself"
	tr.Logf("A/A canary: %s %s against itself", base.Tree, short(base.Commit))
	return nil
}

// canaryOutcome records a canary's verdict; nothing is mailed.
func (b *Bot) canaryOutcome(ctx context.Context, job *river.Job[ReportArgs], t store.Test, d flow.Decision, tr *Trace) error {
	metric := ""
	if t.Verdict == flow.Regression || t.Verdict == flow.Improvement {
		// A transport fault names no throughput metric.
		if metric = d.Metric; metric == "" {
			metric = "transport"
		}
		tr.Logf("A/A canary false alarm: %s on %s: %s", t.Verdict, metric, t.Summary)
	} else {
		tr.Logf("A/A canary: %s", t.Verdict)
	}
	t.State = store.StateDone
	return complete(ctx, b, job, func(tx *sql.Tx) error {
		if err := b.st.AddCanary(ctx, tx, store.Canary{TestID: t.ID, Tree: t.Tree, Commit: t.Base, Lab: t.Lab,
			Verdict: t.Verdict, Metric: metric, Summary: t.Summary}); err != nil {
			return err
		}
		return b.st.UpdateTest(ctx, tx, t)
	})
}

// FalseAlarms is the canary's account of one metric over the window.
type FalseAlarms struct {
	Metric      string
	Alarms      int // REGRESSION or IMPROVEMENT on this metric
	Comparisons int // canaries that reached a verdict on the lab
	Muted       bool
}

// Rate is the metric's false alarms per comparison.
func (f FalseAlarms) Rate() float64 {
	if f.Comparisons == 0 {
		return 0
	}
	return float64(f.Alarms) / float64(f.Comparisons)
}

// measuredVerdict says whether a canary's verdict measured something;
// INFRA, a build or boot failure say nothing of false alarms.
func measuredVerdict(v flow.Outcome) bool {
	switch v {
	case flow.Pass, flow.Regression, flow.Improvement, flow.Inconclusive:
		return true
	}
	return false
}

// FalseAlarmRates are the canary's false alarms per metric over
// bot.canary.window, and which of them are muted. Every metric that had
// an alarm is listed.
func (b *Bot) FalseAlarmRates(ctx context.Context) ([]FalseAlarms, []store.Canary, error) {
	cs, err := b.st.Canaries(ctx, b.st.DB, b.st.Now().Add(-b.cfg.Canary.Window.Duration))
	if err != nil {
		return nil, nil, err
	}
	n := 0
	alarms := map[string]int{}
	for _, c := range cs {
		if !measuredVerdict(c.Verdict) {
			continue
		}
		n++
		if c.Metric != "" {
			alarms[c.Metric]++
		}
	}
	var out []FalseAlarms
	for m, a := range alarms {
		f := FalseAlarms{Metric: m, Alarms: a, Comparisons: n}
		f.Muted = f.Rate() > b.cfg.Canary.MaxFalseAlarmRate
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Metric < out[j].Metric })
	return out, cs, nil
}

// unmuted drops the muted metrics from the samples before the decision
// sees them, and says so in the trace. A muted "transport" drops the
// transport counts.
func (b *Bot) unmuted(ctx context.Context, base, cand []flow.Sample, tr *Trace) ([]flow.Sample, []flow.Sample, error) {
	rates, _, err := b.FalseAlarmRates(ctx)
	if err != nil {
		return nil, nil, flow.MarkInfra(err)
	}
	muted := map[string]bool{}
	var why []string
	for _, f := range rates {
		if f.Muted {
			muted[f.Metric] = true
			why = append(why, fmt.Sprintf("%s (%d false alarms in %d canary comparisons)", f.Metric, f.Alarms, f.Comparisons))
		}
	}
	if len(muted) == 0 {
		return base, cand, nil
	}
	tr.Logf("muted, not decided on: %s", strings.Join(why, ", "))
	strip := func(in []flow.Sample) []flow.Sample {
		out := make([]flow.Sample, len(in))
		for i, s := range in {
			s.Metrics, s.Iterations = without(s.Metrics, muted), without(s.Iterations, muted)
			if muted["transport"] {
				s.Health = nil
			}
			out[i] = s
		}
		return out
	}
	return strip(base), strip(cand), nil
}

func without[V any](m map[string]V, drop map[string]bool) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m))
	for k, v := range m {
		if !drop[k] {
			out[k] = v
		}
	}
	return out
}
