package bot

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// Requests from the CLI and GitHub. Each records its test and first job
// in one transaction; the same request twice yields the same test.

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

// SubmitSeries queues a series; created is false when it was already tested.
func (b *Bot) SubmitSeries(ctx context.Context, s flow.Series, o flow.Origin) (id int64, created bool, err error) {
	if s.MsgID == "" || len(s.Patches) == 0 {
		return 0, false, fmt.Errorf("series has no Message-ID or no patches")
	}
	err = b.inTx(ctx, func(tx *sql.Tx) error {
		id, created, err = b.enqueueSeries(ctx, tx, s, o, 0)
		return err
	})
	return id, created, err
}

// SubmitThread fetches a thread from lore (a Message-ID or a lore URL)
// and queues its series.
func (b *Bot) SubmitThread(ctx context.Context, ref string, o flow.Origin) (int64, error) {
	if b.stages.Fetch == nil {
		return 0, fmt.Errorf("no lore fetcher configured")
	}
	s, err := b.stages.Fetch.Fetch(ctx, ref)
	if err != nil {
		return 0, fmt.Errorf("fetch %s: %w", ref, err)
	}
	id, _, err := b.SubmitSeries(ctx, s, o)
	return id, err
}

// SubmitRef queues a test of a tree's ref against the tree's first branch.
func (b *Bot) SubmitRef(ctx context.Context, tree, ref string, o flow.Origin) (id int64, err error) {
	if _, ok := b.opts.Branches[tree]; !ok {
		return 0, fmt.Errorf("unknown tree %q (known: %s)", tree, strings.Join(b.treeNames(), ", "))
	}
	key := fmt.Sprintf("ref:%s:%s:%s:%d", tree, ref, threadOf(o), o.Comment)
	err = b.inTx(ctx, func(tx *sql.Tx) error {
		id, _, err = b.enqueueTest(ctx, tx, store.Test{Key: key, Kind: store.KindRef, Tree: tree, Ref: ref}, o)
		return err
	})
	return id, err
}

// SubmitBisect starts a bisection of tree between good and bad.
func (b *Bot) SubmitBisect(ctx context.Context, tree, good, bad string, o flow.Origin) (id int64, err error) {
	if _, ok := b.opts.Branches[tree]; !ok {
		return 0, fmt.Errorf("unknown tree %q (known: %s)", tree, strings.Join(b.treeNames(), ", "))
	}
	err = b.inTx(ctx, func(tx *sql.Tx) error {
		id, err = b.startBisection(ctx, tx, store.Bisection{Key: fmt.Sprintf("%s:%s:%s..%s:%d", o.Kind, tree, good, bad, o.Comment),
			Tree: tree, Good: good, Bad: bad, Metric: b.cfg.Mainline.Metric, Origin: mustJSON(o)})
		return err
	})
	return id, err
}

// Retest queues the newest test of a thread again, as a new test.
func (b *Bot) Retest(ctx context.Context, thread string, o flow.Origin) (id int64, err error) {
	err = b.inTx(ctx, func(tx *sql.Tx) error {
		old, err := b.st.LatestInThread(ctx, tx, thread)
		if err != nil {
			return err
		}
		t := store.Test{Key: fmt.Sprintf("%s:retest:%d:%d", strings.SplitN(old.Key, ":retest:", 2)[0], o.Comment, b.st.Now().UnixNano()),
			Kind: old.Kind, SeriesID: old.SeriesID, Tree: old.Tree, Ref: old.Ref, Thread: thread}
		if old.Kind == store.KindMainline {
			t.Base, t.Candidate = old.Base, old.Candidate
		}
		id, _, err = b.enqueueTest(ctx, tx, t, o)
		return err
	})
	return id, err
}

// CancelThread cancels the newest unfinished test of a thread.
func (b *Bot) CancelThread(ctx context.Context, thread string) (int64, error) {
	t, err := b.st.LatestInThread(ctx, b.st.DB, thread)
	if err != nil {
		return 0, err
	}
	return t.ID, b.Cancel(ctx, t.ID)
}

// Trees lists the known tree names.
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
