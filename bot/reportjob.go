package bot

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// The report job: decide, ask for more runs, reply.

type reportWorker struct {
	river.WorkerDefaults[ReportArgs]
	b *Bot
}

func (w *reportWorker) Timeout(*river.Job[ReportArgs]) time.Duration { return 30 * time.Minute }

func (w *reportWorker) Work(ctx context.Context, job *river.Job[ReportArgs]) error {
	b := w.b
	if job.Args.BisectionID != 0 {
		return b.work(ctx, job.JobRow, func(tr *Trace) error { return b.reportBisection(ctx, job, tr) })
	}
	return testJob(ctx, b, job, job.Args.TestID, func(tr *Trace, t store.Test) error {
		var d flow.Decision
		if t.Verdict == flow.None {
			base, cand, err := b.samples(ctx, t)
			if err != nil {
				return err
			}
			if t.Base == "" {
				d = flow.Decision{Verdict: flow.Measured, Summary: fmt.Sprintf("first measurement of %s %s: nothing to compare with", t.Tree, t.Ref)}
			} else {
				// The canary itself judges every metric: a muted one's
				// recovery is what it measures.
				if t.Kind != store.KindCanary {
					if base, cand, err = b.unmuted(ctx, base, cand, tr); err != nil {
						return err
					}
				}
				if d, err = b.stages.Decide.Decide(ctx, t.Key, base, cand); err != nil {
					return flow.MarkInfra(err)
				}
			}
			tr.Logf("decision after round %d: %s (need %d more) %s", job.Args.Round, d.Verdict, d.NeedMore, d.Summary)
			if runs := b.policy().MoreRuns(d, job.Args.Round); runs > 0 {
				return complete(ctx, b, job, func(tx *sql.Tx) error {
					_, err := b.river.InsertTx(ctx, tx, LabArgs{TestID: t.ID, Round: job.Args.Round + 1, Runs: runs}, nil)
					return err
				})
			}
			t.Verdict, t.Summary, t.Detail = d.Verdict, d.Summary, string(d.Detail)
		}
		switch t.Kind {
		case store.KindMainline:
			return b.mainlineOutcome(ctx, job, t, d, tr)
		case store.KindCanary:
			return b.canaryOutcome(ctx, job, t, d, tr)
		}
		o, err := b.storedOrigin(fmt.Sprintf("test %d", t.ID), t.Origin, tr)
		if err != nil {
			return err
		}
		if wait, err := b.bisectSeries(ctx, job, t, d, tr); wait || err != nil {
			return err
		}
		if err := b.deliver(ctx, t, o, tr); err != nil {
			return err
		}
		t.State = store.StateDone
		return complete(ctx, b, job, func(tx *sql.Tx) error { return b.st.UpdateTest(ctx, tx, t) })
	})
}

// bisectSeries starts, when the verdict calls for it, the bisection over
// a series' own patches that its reply waits for, keeping the verdict
// with the test; wait says the job is done for now (the bisection's end
// brings it back). d is the decision just made (zero when the verdict
// was stored before).
func (b *Bot) bisectSeries(ctx context.Context, job *river.Job[ReportArgs], t store.Test, d flow.Decision, tr *Trace) (wait bool, err error) {
	// A fix follow-up asks whether the reported failure is gone, not
	// which of its patches is bad (its commits do not start at the base).
	if !b.cfg.SeriesBisect || t.Kind != store.KindSeries || t.SeriesID == 0 || t.Base == "" || t.Candidate == "" || t.FixOf != 0 {
		return false, nil
	}
	var metric string
	switch t.Verdict {
	case flow.Regression, flow.Crash:
		metric = d.Metric // "" when the verdict was stored before: unused then
		if t.Verdict == flow.Crash {
			metric = metricCrash
		}
		// The prefixes would be booted on the default test only, where a
		// failure only a lab profile showed need not show: nothing to
		// single out.
		_, cand, err := b.samples(ctx, t)
		if err != nil {
			return false, err
		}
		if onlyUnderProfiles(t.Verdict, cand) {
			tr.Logf("the %s showed under a lab profile only: the series' prefixes are not tested one by one", strings.ToLower(t.Verdict.String()))
			return false, nil
		}
	case flow.BuildFailed:
		metric = MetricBuild
	default:
		return false, nil
	}
	bis, ok, err := b.st.BisectionOfTest(ctx, b.st.DB, t.ID)
	if err != nil {
		return false, flow.MarkInfra(err)
	}
	if ok {
		if bis.State == store.BisectionRunning || bis.State == store.BisectionConfirming {
			tr.Logf("the bisection of the series' patches (%d) is still running; its end answers", bis.ID)
			return true, complete(ctx, b, job, nil)
		}
		return false, nil
	}
	s, err := b.series(ctx, t.SeriesID)
	if err != nil {
		return false, err
	}
	if len(s.Patches) < 2 {
		return false, nil
	}
	if metric == "" {
		metric = b.cfg.Mainline.Metric
	}
	tr.Logf("%s with %d patches: testing the series' prefixes for the first bad patch before replying", t.Verdict, len(s.Patches))
	return true, complete(ctx, b, job, func(tx *sql.Tx) error {
		if err := b.st.UpdateTest(ctx, tx, t); err != nil {
			return err
		}
		_, err := b.startBisection(ctx, tx, store.Bisection{Key: fmt.Sprintf("series-test:%d", t.ID), Tree: t.Tree, Good: t.Base, Bad: t.Candidate,
			Lab: t.Lab, Metric: metric, Origin: t.Origin, TestID: t.ID})
		return err
	})
}

// onlyUnderProfiles says a verdict rests on lab profile boots alone: a
// CRASH whose every crashed sample is a profile boot, any other verdict
// with no default test boot at all.
func onlyUnderProfiles(verdict flow.Outcome, samples []flow.Sample) bool {
	n := 0
	for _, s := range samples {
		if verdict == flow.Crash && s.Crash == "" {
			continue
		}
		if s.Profile == "" {
			return false
		}
		n++
	}
	return n > 0
}

// storedOrigin reads the origin stored with a test or a bisection (what):
// where its reply goes. An unreadable one is the bot's own failure, an
// INFRA error of the job, logged; never a zero Origin that would send
// the reply nowhere.
func (b *Bot) storedOrigin(what, raw string, tr *Trace) (flow.Origin, error) {
	var o flow.Origin
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		err = fmt.Errorf("%s: stored origin unreadable: %w", what, err)
		tr.Logf("%v", err)
		b.log.Error("stored origin unreadable", "of", what, "err", err)
		return flow.Origin{}, flow.MarkInfra(err)
	}
	return o, nil
}

// samples are a test's candidate samples and its base's samples. The
// base's come from the cache, which holds every run of that base kernel
// (this test's rounds appended to what an earlier test measured).
func (b *Bot) samples(ctx context.Context, t store.Test) (base, cand []flow.Sample, err error) {
	runs, err := b.st.Runs(ctx, b.st.DB, t.ID)
	if err != nil {
		return nil, nil, flow.MarkInfra(err)
	}
	if len(runs) == 0 {
		// It never reached the lab (it did not apply or build): no boots
		// of its own, and none of the base's to show with it.
		return nil, nil, nil
	}
	var own []flow.Sample
	for _, r := range runs {
		if r.Role == "base" {
			own = append(own, r.Samples...)
		} else {
			cand = append(cand, r.Samples...)
		}
	}
	if t.Base != "" {
		// Any age: it was fresh when the lab round started.
		side, err := b.candidateSide(ctx, t)
		if err != nil {
			return nil, nil, err
		}
		base, _, err = b.st.BaseResults(ctx, b.st.DB, b.testBaseKey(t, side), 100*365*24*time.Hour)
		if err != nil {
			return nil, nil, flow.MarkInfra(err)
		}
	}
	if len(base) == 0 {
		base = own
	} else {
		// The cache holds the default link's boots; the lossy ones of
		// this test are the base's evidence for crashes over that link.
		for _, s := range own {
			if s.Profile != "" {
				base = append(base, s)
			}
		}
	}
	return base, cand, nil
}

// deliver sends a test's reply to where the request came from. Delivery
// is idempotent by key, so a crash after sending and before this job
// completes does not send it twice.
func (b *Bot) deliver(ctx context.Context, t store.Test, o flow.Origin, tr *Trace) error {
	r := flow.Report{Key: t.Key, Kind: t.Kind, Verdict: t.Verdict, Summary: t.Summary, Tree: t.Tree, Base: t.Base, BaseReason: t.BaseReason,
		BaseBranch: t.BaseBranch, Lab: t.Lab, Candidate: t.Candidate, BaseArtifact: t.BaseArtifact, CandArtifact: t.CandArtifact,
		URL: b.testURL(t.ID), TraceURL: b.cfg.URL + "/tests/" + fmt.Sprint(t.ID) + "#traces", Origin: o}
	if t.Detail != "" {
		r.Detail = json.RawMessage(t.Detail)
	}
	if t.Verdict == flow.BuildFailed || t.Verdict == flow.ApplyFailed || t.Verdict == flow.BootFailed {
		r.Log = t.Summary
	}
	base, cand, err := b.samples(ctx, t)
	if err != nil {
		return err
	}
	r.BaseSamples, r.CandSamples = base, cand
	if t.Kind == store.KindSeries {
		bis, ok, err := b.st.BisectionOfTest(ctx, b.st.DB, t.ID)
		if err != nil {
			return flow.MarkInfra(err)
		}
		if ok {
			steps, err := b.st.BisectSteps(ctx, b.st.DB, bis.ID)
			if err != nil {
				return flow.MarkInfra(err)
			}
			fb := &flow.FirstBad{Summary: bis.Summary, Steps: len(steps), Took: bis.UpdatedAt.Sub(bis.CreatedAt)}
			if bis.State == store.BisectionDone {
				fb.Patch, fb.Commit = bis.CulpritPatch, bis.Culprit
			}
			for _, s := range steps {
				fb.Boots += s.Boots
			}
			r.FirstBad = fb
		}
	}
	if t.SeriesID != 0 {
		s, err := b.series(ctx, t.SeriesID)
		if err != nil {
			return err
		}
		r.Series = &s
		if t.FixOf != 0 {
			if r.Fix, err = b.fixFollowUp(ctx, t, s, tr); err != nil {
				return err
			}
		}
	}
	rep := b.stages.Report
	if rep == nil {
		tr.Logf("no reporter: verdict %s kept on the dashboard only", t.Verdict)
		return nil
	}
	if err := rep.Deliver(ctx, r); err != nil {
		return flow.MarkInfra(fmt.Errorf("deliver: %w", err))
	}
	tr.Logf("delivered %s reply %s", t.Verdict, t.Key)
	return nil
}

// started tells the series' reporter that its testing starts, on the
// base just chosen, when it wants to know (a Starter). A failure is the
// infrastructure's: the base job is retried, and the reporter acts once.
func (b *Bot) started(ctx context.Context, t store.Test, s flow.Series, tr *Trace) error {
	var o flow.Origin
	json.Unmarshal([]byte(t.Origin), &o)
	st, ok := b.stages.Report.(Starter)
	if !ok {
		return nil
	}
	r := flow.Report{Key: t.Key, Kind: t.Kind, Series: &s, Tree: t.Tree, Base: t.Base, BaseReason: t.BaseReason, BaseBranch: t.BaseBranch,
		Lab: t.Lab, URL: b.testURL(t.ID), TraceURL: b.cfg.URL + "/tests/" + fmt.Sprint(t.ID) + "#traces", Origin: o}
	if err := st.Started(ctx, r); err != nil {
		return flow.MarkInfra(fmt.Errorf("testing started: %w", err))
	}
	tr.Logf("told the reporter testing started")
	return nil
}

func (b *Bot) testURL(id int64) string { return fmt.Sprintf("%s/tests/%d", b.cfg.URL, id) }
