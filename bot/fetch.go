package bot

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/redact"
)

// FetchArgs fetches every tree that has a URL.
type FetchArgs struct{}

func (FetchArgs) Kind() string { return "fetch" }
func (FetchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBuild, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: pending}}
}

type fetchWorker struct {
	river.WorkerDefaults[FetchArgs]
	b *Bot
}

// A first clone of mainline takes long; the builder bounds each fetch.
func (w *fetchWorker) Timeout(*river.Job[FetchArgs]) time.Duration { return 7 * time.Hour }

func (w *fetchWorker) Work(ctx context.Context, job *river.Job[FetchArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		if b.stages.Trees == nil {
			tr.Logf("no trees on this worker")
			return complete(ctx, b, job, nil)
		}
		for _, tree := range b.opts.FetchTrees {
			// A tree that cannot be fetched is recorded and shown; the
			// others are fetched all the same, and the store keeps what
			// it had.
			if err := b.fetchTree(ctx, tree, tr); err != nil && ctx.Err() != nil {
				return err
			}
		}
		return complete(ctx, b, job, nil)
	})
}

// fetchTree fetches one tree and records how it went.
func (b *Bot) fetchTree(ctx context.Context, tree string, tr *Trace) error {
	tr.Logf("fetching tree %s", tree)
	b.log.Info("tree fetch", "tree", tree)
	start := time.Now()
	// Traced, logged and recorded: without the URLs' passwords.
	err := redact.Error(b.stages.Trees.Fetch(ctx, tree))
	took := time.Since(start)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	h, serr := b.st.RecordHealth(context.WithoutCancel(ctx), b.st.DB, "tree", tree, took, err)
	if serr != nil {
		return flow.MarkInfra(serr)
	}
	if err != nil {
		tr.Logf("tree %s: fetch failed after %s (%d in a row): %v", tree, took.Round(time.Millisecond), h.Failures, err)
		b.log.Warn("tree fetch failed", "tree", tree, "took", took, "failures", h.Failures, "err", err)
		return err
	}
	tr.Logf("tree %s fetched in %s", tree, took.Round(time.Millisecond))
	b.log.Info("tree fetched", "tree", tree, "took", took)
	return nil
}

// refreshStaleTrees fetches, before a base is chosen, the trees whose
// last fetch attempt is older than the fetch interval (or that were never
// fetched). A failure is recorded, not fatal: the base comes from what the
// store holds, and an empty store is the operator's gap (NoBaseError).
func (b *Bot) refreshStaleTrees(ctx context.Context, tr *Trace) error {
	if b.stages.Trees == nil || b.opts.FetchInterval <= 0 {
		return nil
	}
	for _, tree := range b.opts.FetchTrees {
		h, found, err := b.st.HealthOf(ctx, b.st.DB, "tree", tree)
		if err != nil {
			return flow.MarkInfra(err)
		}
		if found && b.st.Now().Sub(h.At) < b.opts.FetchInterval {
			continue
		}
		if err := b.fetchTree(ctx, tree, tr); err != nil && ctx.Err() != nil {
			return err
		}
	}
	return nil
}
