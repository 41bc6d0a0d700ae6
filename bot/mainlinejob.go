package bot

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// The mainline job: test each new branch head.

type mainlineWorker struct {
	river.WorkerDefaults[MainlineArgs]
	b *Bot
}

func (w *mainlineWorker) Timeout(*river.Job[MainlineArgs]) time.Duration { return time.Hour }

func (w *mainlineWorker) Work(ctx context.Context, job *river.Job[MainlineArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		a := job.Args
		if b.stages.Trees == nil {
			return fmt.Errorf("this worker has the build queue but no trees")
		}
		head, err := b.stages.Trees.Head(ctx, a.Tree, a.Branch)
		if err != nil {
			return flow.MarkInfra(fmt.Errorf("fetch %s %s: %w", a.Tree, a.Branch, err))
		}
		hist, err := b.st.MainlineHistory(ctx, b.st.DB, a.Tree, a.Branch)
		if err != nil {
			return flow.MarkInfra(err)
		}
		lastGood := ""
		for _, r := range hist {
			if r.Commit == head {
				tr.Logf("%s %s head %s already tested (%s)", a.Tree, a.Branch, short(head), r.State)
				return complete(ctx, b, job, nil)
			}
			if r.State == store.MainlineGood {
				lastGood = r.Commit
			}
		}
		tr.Logf("%s %s: new head %s, last good %s", a.Tree, a.Branch, short(head), short(lastGood))
		return complete(ctx, b, job, func(tx *sql.Tx) error {
			id, _, err := b.enqueueTest(ctx, tx, store.Test{Key: fmt.Sprintf("mainline:%s:%s:%s", a.Tree, a.Branch, head), Kind: store.KindMainline,
				Tree: a.Tree, Ref: a.Branch, Base: lastGood, Candidate: head}, flow.Origin{Kind: "mainline"})
			if err != nil {
				return err
			}
			_, err = b.st.AddMainlineRun(ctx, tx, store.MainlineRun{Tree: a.Tree, Branch: a.Branch, Commit: head, TestID: id, State: store.MainlineTesting, Metrics: "{}"})
			return err
		})
	})
}

// mainlineOutcome records a head's result in the history and, when it
// regressed against the last good head, starts a bisection.
func (b *Bot) mainlineOutcome(ctx context.Context, job *river.Job[ReportArgs], t store.Test, d flow.Decision, tr *Trace) error {
	_, cand, err := b.samples(ctx, t)
	if err != nil {
		return err
	}
	// The lossy link's boots count for crashes only: they are neither the
	// next head's base nor the history's figures.
	cand = slices.DeleteFunc(cand, func(s flow.Sample) bool { return s.Profile != "" })
	state := store.MainlineGood
	switch v := t.Verdict; {
	case v.Failing():
		state = store.MainlineBad
	case v == flow.Pass || v == flow.Measured || v == flow.Improvement:
	default:
		state = store.MainlineFailed
	}
	metric := b.cfg.Mainline.Metric
	// A regression only a profile showed (the pressure profile's
	// evidence, with no default boot) is a bad head, not bisected: the
	// bisection boots the default test, where it need not show.
	bisect := state == store.MainlineBad && t.Verdict == flow.Regression && t.Base != "" && len(cand) > 0
	tr.Logf("mainline %s %s %s: %s", t.Tree, t.Ref, short(t.Candidate), t.Verdict)
	return complete(ctx, b, job, func(tx *sql.Tx) error {
		t.State = store.StateDone
		if err := b.st.UpdateTest(ctx, tx, t); err != nil {
			return err
		}
		// A head's own results are the base for the next head.
		if len(cand) > 0 {
			if err := b.st.PutBaseResults(ctx, tx, b.baseKey(t.Tree, t.Candidate, t.Lab), cand); err != nil {
				return err
			}
		}
		if err := b.st.SetMainlineResult(ctx, tx, t.ID, state, mustJSON(medians(cand))); err != nil {
			return err
		}
		if !bisect {
			return nil
		}
		if d.Metric != "" {
			metric = d.Metric
		}
		_, err := b.startBisection(ctx, tx, store.Bisection{Key: "mainline:" + t.Tree + ":" + t.Base + ".." + t.Candidate, Tree: t.Tree,
			Good: t.Base, Bad: t.Candidate, Lab: t.Lab, Metric: metric, Origin: mustJSON(flow.Origin{Kind: "mainline"})})
		return err
	})
}

func (b *Bot) startBisection(ctx context.Context, tx *sql.Tx, bis store.Bisection) (int64, error) {
	if bis.Lab == "" {
		bis.Lab = b.opts.Lab
	}
	id, created, err := b.st.AddBisection(ctx, tx, bis)
	if err != nil || !created {
		return id, err
	}
	_, err = b.river.InsertTx(ctx, tx, BisectArgs{BisectionID: id, Step: 1}, nil)
	return id, err
}

// medians are each metric's median over samples without a crash.
func medians(samples []flow.Sample) map[string]float64 {
	vals := map[string][]float64{}
	for _, s := range samples {
		if s.Crash != "" {
			continue
		}
		for k, v := range s.Metrics {
			vals[k] = append(vals[k], v)
		}
	}
	out := map[string]float64{}
	for k, v := range vals {
		sort.Float64s(v)
		if len(v)%2 == 1 {
			out[k] = v[len(v)/2]
		} else {
			out[k] = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
	}
	return out
}
