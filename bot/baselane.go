package bot

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// The base lane. A base kernel nothing has built yet (a fresh machine,
// a new configuration such as the debug profile's KASAN kernel) takes
// many minutes; a candidate builds incrementally on its base's output in
// seconds to a few minutes, and a build break fails in seconds. Builds
// share the machine's cores, the tree's slot and the heavy lock, so they
// cannot run side by side: instead base kernels are built by jobs of
// their own in a lane (QueueBaseBuild) that only works while the build
// lane (QueueBuild) has nothing to do, and that stops its build as soon
// as a job appears there. make resumes a stopped build where it was, so
// giving way costs seconds, and no verdict waits for a base it does not
// need.

// BaseKernelsArgs builds a test's base kernels in the base lane.
type BaseKernelsArgs struct {
	TestID int64 `json:"test_id"`
}

func (BaseKernelsArgs) Kind() string { return "base_kernels" }
func (BaseKernelsArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBaseBuild, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

type baseKernelsWorker struct {
	river.WorkerDefaults[BaseKernelsArgs]
	b *Bot
}

func (w *baseKernelsWorker) Timeout(*river.Job[BaseKernelsArgs]) time.Duration { return 3 * time.Hour }

func (w *baseKernelsWorker) Work(ctx context.Context, job *river.Job[BaseKernelsArgs]) error {
	b := w.b
	return testJob(ctx, b, job, job.Args.TestID, func(tr *Trace, t store.Test) error {
		err := b.buildBases(ctx, func(ctx context.Context) ([]baseKernel, error) { return b.missingBases(ctx, t) }, b.baseBusy(job.CreatedAt), tr)
		if err != nil {
			return err
		}
		// The build job again, which finds the bases built (or, for one
		// that does not build, says so as it always did).
		return complete(ctx, b, job, func(tx *sql.Tx) error {
			_, err := b.river.InsertTx(ctx, tx, BuildArgs{TestID: t.ID, Based: true}, nil)
			return err
		})
	})
}

// baseKernel is one base kernel to build: tree at commit with a
// configuration's builder.
type baseKernel struct {
	build        Builder
	tree, commit string
	what         string // for the trace: "base", "debug base"
}

// buildBases builds the kernels list names, giving way to work that
// busy sees (the build lane, and for the warm-up the lab lane too):
// before it starts and whenever such a job appears, it stops and the job
// is snoozed (errSnoozed) to try again later. A kernel that does not
// build is left for the job that needs it to report.
func (b *Bot) buildBases(ctx context.Context, list func(context.Context) ([]baseKernel, error), busy func(context.Context) (bool, error), tr *Trace) error {
	ks, err := list(ctx)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if busy, err := busy(ctx); err != nil || busy {
			if err == nil {
				tr.Logf("the build or lab lane has work: the %s kernel %s %s waits", k.what, k.tree, short(k.commit))
				err = errSnoozed
			}
			return err
		}
		yctx, stop := b.giveWay(ctx, busy)
		_, err := b.buildKernelWith(yctx, k.build, k.tree, k.commit, tr)
		// A build that ended as the lane filled up is kept all the same.
		yielded := err != nil && errors.Is(context.Cause(yctx), errGaveWay)
		stop()
		switch {
		case yielded:
			tr.Logf("stopped the %s kernel %s %s: the build or lab lane has work; it resumes after", k.what, k.tree, short(k.commit))
			return errSnoozed
		case err != nil && infraOrInterrupted(ctx, err):
			return err
		case err != nil:
			tr.Logf("the %s kernel %s %s does not build (left to the test that needs it): %v", k.what, k.tree, short(k.commit), err)
		}
	}
	return nil
}

var errGaveWay = errors.New("gave way to the build or lab lane")

// giveWay is ctx cancelled (cause errGaveWay) as soon as busy says a job
// waits or runs; stop ends the watch.
func (b *Bot) giveWay(ctx context.Context, busy func(context.Context) (bool, error)) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	every := b.opts.PollInterval
	if every == 0 {
		every = time.Second
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if busy, err := busy(ctx); err == nil && busy {
					cancel(errGaveWay)
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// buildLaneBusy says whether the build or the check lane has a job due
// or running. The check lane's compile runs on idle CPU only, which a
// cold build at full speed leaves none of: beside one, a build break or
// a comment fix would wait for the whole cold build (or the check's
// bound) for an answer that takes seconds.
func (b *Bot) buildLaneBusy(ctx context.Context) (bool, error) {
	return b.lanesBusy(ctx, QueueBuild, QueueCheck)
}

// foregroundBusy says whether the build, check or lab lane has a job due
// or running. The warm-up gives way to all three: a build holds the heavy
// lock every boot takes, so a round beside a cold build waits for it (a
// fresh install's first verdict waited 18 min for the debug base's cold
// build).
func (b *Bot) foregroundBusy(ctx context.Context) (bool, error) {
	return b.lanesBusy(ctx, QueueBuild, QueueCheck, QueueLab)
}

// baseBusy is what a test's cold base build, queued at queued, gives way
// to: builds always; lab rounds too until bot.base_yield_max has passed.
// Other series' rounds need none of its kernels (a debug base held every
// lab verdict for 21 minutes on a warm install), but on a pair that is
// never idle the series that needs it would wait for ever; past the
// bound its build runs and the rounds wait for it instead.
func (b *Bot) baseBusy(queued time.Time) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		if b.st.Now().Sub(queued) >= b.cfg.BaseYieldMax.Duration {
			return b.buildLaneBusy(ctx)
		}
		return b.foregroundBusy(ctx)
	}
}

func (b *Bot) lanesBusy(ctx context.Context, queues ...string) (bool, error) {
	res, err := b.river.JobList(ctx, river.NewJobListParams().Queues(queues...).
		States(rivertype.JobStateAvailable, rivertype.JobStateRunning).First(1))
	if err != nil {
		return false, flow.MarkInfra(fmt.Errorf("%s lane: %w", strings.Join(queues, " and "), err))
	}
	return len(res.Jobs) > 0, nil
}

// debugWhy is what in a series asks for the debug profile's kernels
// ("" = nothing, or no profile, or not a series' test).
func (b *Bot) debugWhy(ctx context.Context, t store.Test) (string, error) {
	if b.stages.Debug == nil || b.stages.DebugBuild == nil || t.Kind != store.KindSeries || t.Base == "" || t.SeriesID == 0 {
		return "", nil
	}
	s, err := b.series(ctx, t.SeriesID)
	if err != nil {
		return "", flow.MarkInfra(err)
	}
	return b.stages.Debug.Why(s), nil
}

// WarmArgs prepares, at start, the kernels of the base a series naming
// none gets (the first configured branch the store holds) in every
// configuration a profile boots (the lab's, the debug profile's), in the
// base lane, so that the first series waits for none of them.
type WarmArgs struct{}

func (WarmArgs) Kind() string { return "warm_bases" }
func (WarmArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBaseBuild, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: pending}}
}

type warmWorker struct {
	river.WorkerDefaults[WarmArgs]
	b *Bot
}

func (w *warmWorker) Timeout(*river.Job[WarmArgs]) time.Duration { return 3 * time.Hour }

func (w *warmWorker) Work(ctx context.Context, job *river.Job[WarmArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		if err := b.buildBases(ctx, b.warmKernels, b.foregroundBusy, tr); err != nil {
			return err
		}
		return complete(ctx, b, job, nil)
	})
}

// warmKernels are the default base's kernels not built yet: the lab's
// configuration and, with the debug profile on, its debug one.
func (b *Bot) warmKernels(ctx context.Context) ([]baseKernel, error) {
	base, err := b.stages.Build.SelectBase(ctx, flow.Series{})
	if err != nil {
		// No tree in the store yet is the operator's gap (infra,
		// retried); a builder that finds no default base has nothing to
		// prepare.
		return nil, err
	}
	ks := []baseKernel{{b.stages.Build, base.Tree, base.Commit, "default base"}}
	if b.stages.Debug != nil && b.stages.DebugBuild != nil {
		ks = append(ks, baseKernel{b.stages.DebugBuild, base.Tree, base.Commit, "debug default base"})
	}
	return b.notBuilt(ctx, ks)
}

// missingBases are the base kernels a test needs that are not in the
// artifact store: its base, and the base's debug kernel when the debug
// profile asks for the series.
func (b *Bot) missingBases(ctx context.Context, t store.Test) ([]baseKernel, error) {
	if t.Base == "" {
		return nil, nil
	}
	ks := []baseKernel{{b.stages.Build, t.Tree, t.Base, "base"}}
	why, err := b.debugWhy(ctx, t)
	if err != nil {
		return nil, err
	}
	if why != "" {
		ks = append(ks, baseKernel{b.stages.DebugBuild, t.Tree, t.Base, "debug base"})
	}
	return b.notBuilt(ctx, ks)
}

// notBuilt are the kernels of ks not in the artifact store.
func (b *Bot) notBuilt(ctx context.Context, ks []baseKernel) ([]baseKernel, error) {
	var out []baseKernel
	for _, k := range ks {
		kk, err := k.build.KernelKey(ctx, k.tree, k.commit)
		if err != nil {
			return nil, flow.MarkInfra(err)
		}
		if !b.art.Has(artifactKey(k.tree, kk)) {
			out = append(out, k)
		}
	}
	return out, nil
}
