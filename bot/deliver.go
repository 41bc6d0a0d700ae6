package bot

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/flow"
)

// Flusher is a reporter whose replies may wait (moderated until approved,
// held by the daily limit, a send that failed): Flush sends what is due.
type Flusher interface {
	Flush(ctx context.Context) (sent int, err error)
}

// DeliverArgs sends the replies that are due, apart from any verdict: an
// approved or rate-limited reply does not wait for an unrelated report.
type DeliverArgs struct{}

func (DeliverArgs) Kind() string { return "deliver" }
func (DeliverArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueIngest, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: pending}}
}

type deliverWorker struct {
	river.WorkerDefaults[DeliverArgs]
	b *Bot
}

func (w *deliverWorker) Timeout(*river.Job[DeliverArgs]) time.Duration { return 10 * time.Minute }

func (w *deliverWorker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		if f, ok := b.stages.Report.(Flusher); ok {
			n, err := f.Flush(ctx)
			if err != nil {
				return flow.MarkInfra(err)
			}
			if n > 0 {
				tr.Logf("sent %d replies that were due", n)
			}
		}
		return complete(ctx, b, job, nil)
	})
}
