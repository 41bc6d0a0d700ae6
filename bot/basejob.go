package bot

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// The base job: the first of a test's jobs chooses its base.

type baseWorker struct {
	river.WorkerDefaults[BaseArgs]
	b *Bot
}

func (w *baseWorker) Timeout(*river.Job[BaseArgs]) time.Duration { return time.Hour }

func (w *baseWorker) Work(ctx context.Context, job *river.Job[BaseArgs]) error {
	b := w.b
	return testJob(ctx, b, job, job.Args.TestID, func(tr *Trace, t store.Test) error {
		switch t.Kind {
		case store.KindSeries:
			s, err := b.series(ctx, t.SeriesID)
			if err != nil {
				return err
			}
			if err := b.refreshStaleTrees(ctx, tr); err != nil {
				return err
			}
			orig, how, isFix, err := b.reportedTest(ctx, s, tr)
			if err != nil {
				return err
			}
			if isFix {
				// The reported test again, with the fix, on its base.
				t.FixOf, t.Tree, t.Base, t.BaseBranch = orig.ID, orig.Tree, orig.Base, orig.BaseBranch
				t.BaseReason = fmt.Sprintf("the reported test %d", orig.ID)
				tr.Logf("%s: a fix of test %d (%s): rerunning it with the fix on %s %s", how, orig.ID, orig.Verdict, t.Tree, t.Base)
				if err := b.started(ctx, t, s, tr); err != nil {
					return err
				}
				break
			}
			base, err := b.stages.Build.SelectBase(ctx, s)
			if err != nil {
				// No base in the store (trees not fetched) is infra; any
				// other error is the series' (mail that does not parse).
				if infraOrInterrupted(ctx, err) {
					return err
				}
				tr.Logf("no base: %v", err)
				t.Detail = detailOf(err)
				return finishWithSummary(ctx, b, job, t, flow.ApplyFailed, fmt.Sprintf("The series cannot be read: %v", err))
			}
			t.Tree, t.Base, t.BaseReason, t.BaseBranch = base.Tree, base.Commit, base.Reason, base.Branch
			tr.Logf("base %s %s (%s)", t.Tree, t.Base, t.BaseReason)
			if err := b.started(ctx, t, s, tr); err != nil {
				return err
			}
		case store.KindRef:
			cand, err := b.stages.Trees.Head(ctx, t.Tree, t.Ref)
			if err != nil {
				if infraOrInterrupted(ctx, err) {
					return err
				}
				return finishWithSummary(ctx, b, job, t, flow.ApplyFailed, fmt.Sprintf("%s %s: %v", t.Tree, t.Ref, err))
			}
			t.Candidate = cand
			if br := b.opts.Branches[t.Tree]; len(br) > 0 {
				base, err := b.stages.Trees.Head(ctx, t.Tree, br[0])
				if err != nil {
					return flow.MarkInfra(err)
				}
				if base != cand {
					t.Base, t.BaseReason = base, "head of "+t.Tree+"/"+br[0]
				}
			}
			tr.Logf("%s %s is %s, base %s", t.Tree, t.Ref, t.Candidate, t.Base)
		case store.KindCanary:
			if err := b.canaryBase(ctx, &t, tr); err != nil {
				return err
			}
		case store.KindMainline:
			t.BaseReason = "last good mainline run"
			tr.Logf("%s %s head %s against last good %s", t.Tree, t.Ref, t.Candidate, t.Base)
		}
		t.State = store.StateBuilding
		var next river.JobArgs = BuildArgs{TestID: t.ID}
		if t.Kind == store.KindSeries && t.Base != "" && b.stages.Check != nil {
			next = CheckArgs{TestID: t.ID}
		}
		return complete(ctx, b, job, func(tx *sql.Tx) error {
			if err := b.st.UpdateTest(ctx, tx, t); err != nil {
				return err
			}
			_, err := b.river.InsertTx(ctx, tx, next, nil)
			return err
		})
	})
}

func (b *Bot) series(ctx context.Context, id int64) (flow.Series, error) {
	row, err := b.st.Series(ctx, b.st.DB, id)
	if err != nil {
		return flow.Series{}, flow.MarkInfra(err)
	}
	var s flow.Series
	if err := json.Unmarshal(row.Data, &s); err != nil {
		return flow.Series{}, fmt.Errorf("series %d: %w", id, err)
	}
	return s, nil
}

// finishWithVerdictTx ends a test early (does not apply, build failed,
// boot failed) and queues its report. t.Detail, when set, is the failing
// stage's structured account.
func finishWithVerdictTx(ctx context.Context, b *Bot, tx *sql.Tx, t store.Test, verdict flow.Outcome, summary string) error {
	t.State, t.Verdict, t.Summary = store.StateDone, verdict, summary
	if err := b.st.UpdateTest(ctx, tx, t); err != nil {
		return err
	}
	_, err := b.river.InsertTx(ctx, tx, ReportArgs{TestID: t.ID, Round: t.Rounds}, nil)
	return err
}

// finishWithSummary ends a test early with verdict and the reply's
// summary, and completes job in the same transaction.
func finishWithSummary[T river.JobArgs](ctx context.Context, b *Bot, job *river.Job[T], t store.Test, verdict flow.Outcome, summary string) error {
	return complete(ctx, b, job, func(tx *sql.Tx) error { return finishWithVerdictTx(ctx, b, tx, t, verdict, summary) })
}

// finishWithVerdict ends a test with the verdict err says (does not
// apply, does not build) and completes job in the same transaction.
func finishWithVerdict[T river.JobArgs](ctx context.Context, b *Bot, job *river.Job[T], t store.Test, v flow.Outcome, err error) error {
	t.Detail = detailOf(err)
	return finishWithSummary(ctx, b, job, t, v, err.Error())
}
