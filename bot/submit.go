package bot

import (
	"context"
	"database/sql"

	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/flow"
)

func (b *Bot) inTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	tx, err := b.st.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// treeNames lists the known tree names.
func (b *Bot) treeNames() []string {
	var out []string
	for t := range b.opts.Branches {
		out = append(out, t)
	}
	return out
}

// Poller is GitHub polling as the bot runs it from a periodic job.
type Poller interface {
	Poll(ctx context.Context) error
}

type githubPollWorker struct {
	river.WorkerDefaults[GitHubPollArgs]
	b *Bot
}

func (w *githubPollWorker) Work(ctx context.Context, job *river.Job[GitHubPollArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		if b.opts.GitHub == nil {
			return complete(ctx, b, job, nil)
		}
		if err := b.opts.GitHub.Poll(ctx); err != nil {
			return flow.MarkInfra(err)
		}
		return complete(ctx, b, job, nil)
	})
}
