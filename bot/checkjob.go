package bot

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// CheckArgs checks a series before its build job joins the build lane:
// it applies the series and compiles alone the files it changes
// (Stages.Check), in the check lane, which waits for no full build and
// no lab boot. A series that does not apply or compile is answered
// here; any other goes on to its build job.
type CheckArgs struct {
	TestID int64 `json:"test_id"`
}

func (CheckArgs) Kind() string { return "check" }
func (CheckArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueCheck, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

type checkWorker struct {
	river.WorkerDefaults[CheckArgs]
	b *Bot
}

func (w *checkWorker) Timeout(*river.Job[CheckArgs]) time.Duration { return time.Hour }

func (w *checkWorker) Work(ctx context.Context, job *river.Job[CheckArgs]) error {
	b := w.b
	return testJob(ctx, b, job, job.Args.TestID, func(tr *Trace, t store.Test) error {
		cand, err := b.applySeries(ctx, &t, tr)
		if err != nil {
			if infraOrInterrupted(ctx, err) {
				return err
			}
			tr.Logf("does not apply: %v", err)
			return finishWithVerdict(ctx, b, job, t, flow.ApplyFailed, err)
		}
		t.Candidate = cand
		tr.Logf("applied: %s", cand)
		_, built, err := b.built(ctx, b.stages.Build, t.Tree, cand)
		if err != nil {
			return err
		}
		start := time.Now()
		var checked flow.Checked
		if built {
			// A series seen before (a retest, a RESEND): its kernel is in
			// the artifact store, and the build job takes it from there.
			tr.Logf("the candidate's kernel is built already: no quick check")
		} else {
			checked, err = b.stages.Check.Check(ctx, t.Tree, t.Base, cand, tr)
		}
		switch {
		case ctx.Err() != nil:
			// Stopped (serve shutting down): the job runs again.
			return errors.Join(ctx.Err(), err)
		case flow.IsInfra(err):
			// The check only saves time: the full build decides.
			tr.Logf("the quick check failed on the bot's side, the build decides: %v", err)
		case err != nil:
			tr.Logf("build failed in the quick check of the changed files: %v", err)
			// The reply's reproducer configures as the base was: its
			// .config is the base kernel's, when that is built.
			if key, ok, kerr := b.built(ctx, b.stages.Build, t.Tree, t.Base); kerr == nil && ok {
				t.BaseArtifact = key
			}
			return finishWithVerdict(ctx, b, job, t, flow.BuildFailed, err)
		case len(checked.Compiled) > 0:
			tr.Logf("the changed files compile alone (%d objects, %s)", len(checked.Compiled), time.Since(start).Round(time.Millisecond))
			if !checked.Unchanged {
				break
			}
			why, err := b.bootsAnyway(ctx, t)
			if err != nil {
				return err
			}
			if why != "" {
				tr.Logf("no change in the lab kernel's generated code, but %s: built and booted as any series", why)
				break
			}
			tr.Logf("no change in generated code: the kernel is the base's, nothing to build or boot")
			t.Detail = string(checked.Detail)
			return finishWithSummary(ctx, b, job, t, flow.Pass, fmt.Sprintf("the series changes no generated code: the files it changes compile to the base's objects, byte for byte (%s); not booted",
				strings.Join(checked.Compiled, ", ")))
		}
		return complete(ctx, b, job, func(tx *sql.Tx) error {
			_, err := b.river.InsertTx(ctx, tx, BuildArgs{TestID: t.ID}, nil)
			return err
		})
	})
}

// bootsAnyway says why a series whose changed files compile to the base's
// objects is still built and booted ("" when nothing asks for it): a
// follow-up of a reported test asks whether that test's failure is gone,
// and the debug profile's kernels are compiled in a configuration the
// check did not compare.
func (b *Bot) bootsAnyway(ctx context.Context, t store.Test) (string, error) {
	switch {
	case t.Kind != store.KindSeries:
		return "it is a " + t.Kind + " test", nil
	case t.FixOf != 0:
		return "it follows up a reported test", nil
	}
	why, err := b.debugWhy(ctx, t)
	if err != nil || why == "" {
		return "", err
	}
	return fmt.Sprintf("it changes %s, which the %s profile's kernels (another configuration) are built for", why, b.stages.Debug.Name()), nil
}
