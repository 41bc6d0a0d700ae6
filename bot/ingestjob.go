package bot

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// The ingest job: poll every list, store new mail, queue relevant series.

type ingestWorker struct {
	river.WorkerDefaults[IngestArgs]
	b *Bot
}

func (w *ingestWorker) Timeout(*river.Job[IngestArgs]) time.Duration { return 30 * time.Minute }

func (w *ingestWorker) Work(ctx context.Context, job *river.Job[IngestArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		if b.stages.Ingest == nil {
			tr.Logf("no mail sources on this worker")
			return complete(ctx, b, job, nil)
		}
		series, err := b.stages.Ingest.Poll(ctx)
		if err != nil {
			return flow.MarkInfra(fmt.Errorf("ingest: %w", err))
		}
		tr.Logf("%d new series", len(series))
		// Nothing inside the transaction may write the trace: on SQLite
		// the transaction holds the one connection.
		var queued []string
		err = complete(ctx, b, job, func(tx *sql.Tx) error {
			queued = queued[:0]
			bound := &dailyBound{authorLimit: b.cfg.AuthorDailyTests, listLimit: b.cfg.ListDailyTests}
			for _, s := range series {
				what := "test"
				var id int64
				var created bool
				var err error
				switch c := s.Command; {
				case c != nil:
					own := ownTestCommand(*c, s)
					if own {
						var over string
						if over, err = bound.over(ctx, b.st, tx, s.Author, ""); err != nil {
							return err
						} else if over != "" {
							c.Refused = "Not tested: " + over + "."
						}
					}
					var a flow.Acted
					a, err = b.act(ctx, tx, *c, &s, flow.Origin{Kind: "mail"})
					if own && a.What == flow.ActedTest && a.New {
						bound.count(s.Author, "")
					}
					id, created, what = a.ID, a.New, c.Line+" from "+c.From
					if a.What == flow.ActedRefused {
						what = "refused " + what
					}
				case s.Incomplete != "":
					what = "incomplete"
					id, created, err = b.enqueueNotice(ctx, tx, s, fmt.Sprintf("incomplete:%s:v%d", s.MsgID, s.Version), flow.Incomplete, s.Incomplete, flow.Origin{Kind: "mail"})
				default:
					var over string
					if over, err = bound.over(ctx, b.st, tx, s.Author, s.List); err == nil && over != "" {
						what = "not tested: " + over
						id, created, err = b.holdSeries(ctx, tx, s, over)
					} else if err == nil {
						if id, created, err = b.enqueueSeries(ctx, tx, s, flow.Origin{Kind: "mail"}, store.CausePosting); created {
							bound.count(s.Author, s.List)
						}
					}
				}
				if err != nil {
					return err
				}
				queued = append(queued, fmt.Sprintf("series %s v%d %q: %s: test %d (new: %v)", s.MsgID, s.Version, s.Subject, what, id, created))
			}
			return nil
		})
		for _, l := range queued {
			tr.Logf("%s", l)
		}
		return err
	})
}

// watchMail looks at the local inboxes every MailWatch and polls at
// once when one holds mail no poll has read: a posting to a local inbox
// is read in seconds, not at the next lore.poll_interval (set for
// lore.kernel.org's sake). A poll queued or running already is left to
// read it (River's unique insert), and looked at again next time; each
// newest mail starts one poll at most, so mail a poll could not read
// waits for the periodic one rather than polling every few seconds.
func (b *Bot) watchMail(ctx context.Context, w mailWatcher) {
	tick := time.NewTicker(b.opts.MailWatch)
	defer tick.Stop()
	polled := map[string]bool{}
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		tips, err := w.UnreadLocal(ctx)
		if err != nil {
			// The poll reads the same inbox and records why it fails
			// in the list's health: said here once, not every tick.
			if e := err.Error(); e != lastErr && ctx.Err() == nil {
				b.log.Warn("mail watch", "err", err)
				lastErr = e
			}
			continue
		}
		lastErr = ""
		var fresh []string
		for _, tip := range tips {
			if !polled[tip] {
				fresh = append(fresh, tip)
			}
		}
		clear(polled)
		for _, tip := range tips {
			polled[tip] = true
		}
		if len(fresh) == 0 {
			continue
		}
		res, err := b.river.Insert(ctx, IngestArgs{}, nil)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				b.log.Warn("mail watch: queue a poll", "err", err)
			}
		case res.UniqueSkippedAsDuplicate:
		default:
			b.log.Info("mail watch: new mail, polling now", "inboxes", fresh, "job", res.Job.ID)
			continue
		}
		// Not queued now: look again next time.
		for _, tip := range fresh {
			delete(polled, tip)
		}
	}
}

// dailyBound is bot.author_daily_tests and bot.list_daily_tests over one
// ingest transaction: the tests each sender's postings and own commands
// (ownTestCommand), and each list's postings, started in the last 24
// hours, read once when a posting or command first asks and counted on
// as tests are queued.
type dailyBound struct {
	authorLimit, listLimit int
	byAuthor, byList       map[string]int // by senderOf, by list; nil until read
}

// over says why a posting by author to list is not tested ("": it is).
// A sender is its address, whatever name it gives.
func (a *dailyBound) over(ctx context.Context, st *store.Store, tx *sql.Tx, author, list string) (string, error) {
	if a.authorLimit <= 0 && (a.listLimit <= 0 || list == "") {
		return "", nil
	}
	if a.byAuthor == nil {
		posts, err := st.PostingsSince(ctx, tx, st.Now().Add(-24*time.Hour))
		if err != nil {
			return "", err
		}
		a.byAuthor, a.byList = map[string]int{}, map[string]int{}
		for _, p := range posts {
			a.byAuthor[senderOf(p.Author)]++
			a.byList[strings.ToLower(p.List)]++
		}
		own, err := ownCommandsSince(ctx, st, tx, st.Now().Add(-24*time.Hour))
		if err != nil {
			return "", err
		}
		for sender, n := range own {
			a.byAuthor[sender] += n
		}
	}
	if n := a.byAuthor[senderOf(author)]; a.authorLimit > 0 && n >= a.authorLimit {
		return fmt.Sprintf("its sender's postings and own commands started %d tests in 24 hours, bot.author_daily_tests (rdmabot test runs it)", n), nil
	}
	if n := a.byList[strings.ToLower(list)]; a.listLimit > 0 && list != "" && n >= a.listLimit {
		return fmt.Sprintf("postings to %s started %d tests in 24 hours, bot.list_daily_tests (rdmabot test runs it)", list, n), nil
	}
	return "", nil
}

// count adds a test queued for a posting by author to list.
func (a *dailyBound) count(author, list string) {
	if a.byAuthor != nil {
		a.byAuthor[senderOf(author)]++
		a.byList[strings.ToLower(list)]++
	}
}

// senderOf is the address of an author as series store it ("Name
// <addr>"), lower case; the whole text when it holds no address.
func senderOf(author string) string {
	if a, err := mail.ParseAddress(author); err == nil {
		return strings.ToLower(a.Address)
	}
	return strings.ToLower(strings.TrimSpace(author))
}

// holdSeries records a posting that is not tested: its series, and its
// test ended at once (canceled, why in its summary) so the dashboard and
// status show it; nothing is built, booted or mailed.
func (b *Bot) holdSeries(ctx context.Context, tx *sql.Tx, s flow.Series, why string) (int64, bool, error) {
	t, err := b.seriesTest(ctx, tx, s, flow.Origin{Kind: "mail"}, store.CausePosting)
	if err != nil {
		return 0, false, err
	}
	t, created, err := b.addTest(ctx, tx, t, flow.Origin{Kind: "mail"})
	if err != nil || !created {
		return t.ID, created, err
	}
	t.State, t.Summary = store.StateCanceled, "not tested: "+why
	return t.ID, true, b.st.UpdateTest(ctx, tx, t)
}

// enqueueSeries records a series and its test once per (Message-ID,
// version, tree, request), started for cause.
func (b *Bot) enqueueSeries(ctx context.Context, tx *sql.Tx, s flow.Series, o flow.Origin, cause string) (int64, bool, error) {
	t, err := b.seriesTest(ctx, tx, s, o, cause)
	if err != nil {
		return 0, false, err
	}
	return b.enqueueTest(ctx, tx, t, o)
}

// seriesTest records a series and names its test, started for cause:
// once per (Message-ID, version, tree, request).
func (b *Bot) seriesTest(ctx context.Context, tx *sql.Tx, s flow.Series, o flow.Origin, cause string) (store.Test, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return store.Test{}, err
	}
	rowTree := s.Tree
	if s.Branch != "" {
		rowTree += "/" + s.Branch
	}
	sid, err := b.st.AddSeries(ctx, tx, store.SeriesRow{MsgID: s.MsgID, Version: s.Version, Tree: rowTree,
		Subject: s.Subject, Author: s.Author, Link: s.Link, Root: s.Root, List: s.List, Data: data})
	if err != nil {
		return store.Test{}, err
	}
	if err := b.st.AddSeriesReviews(ctx, tx, sid, s.Reviews); err != nil {
		return store.Test{}, err
	}
	key := fmt.Sprintf("series:%s:v%d:%s", s.MsgID, s.Version, rowTree)
	if o.Command != nil {
		// Asked for in a reply: a test of its own, once per command mail.
		key += ":cmd:" + o.Command.MsgID
	}
	if o.Kind == "github" {
		// Asked for in an issue: tested (and answered) there, even when
		// the list already had its reply.
		key += ":" + threadOf(o)
	}
	if len(o.Asked) > 0 {
		// With more profiles: another test than the one without.
		key += ":" + strings.Join(o.Asked, "+")
	}
	return store.Test{Key: key, Kind: store.KindSeries, SeriesID: sid, Tree: s.Tree, Cause: cause}, nil
}

// enqueueNotice records an answer that needs no test (a refused command,
// an incomplete series): a test row that is done at once with its
// verdict, whose report job renders and delivers the answer. The key
// makes it happen once.
func (b *Bot) enqueueNotice(ctx context.Context, tx *sql.Tx, s flow.Series, key string, verdict flow.Outcome, summary string, o flow.Origin) (int64, bool, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return 0, false, err
	}
	// Its own series row: the posting may still be completed, and its
	// test must then read the complete series, not this snapshot.
	sid, err := b.st.AddSeries(ctx, tx, store.SeriesRow{MsgID: s.MsgID, Version: s.Version, Tree: key,
		Subject: s.Subject, Author: s.Author, Link: s.Link, Data: data})
	if err != nil {
		return 0, false, err
	}
	t := store.Test{Key: key, Kind: store.KindSeries, SeriesID: sid, Tree: s.Tree, Lab: b.opts.Lab, Params: b.opts.Params, Origin: mustJSON(o)}
	id, created, err := b.st.AddTest(ctx, tx, t)
	if err != nil || !created {
		return id, created, err
	}
	t.ID = id
	return id, true, finishWithVerdictTx(ctx, b, tx, t, verdict, summary)
}

func (b *Bot) enqueueTest(ctx context.Context, tx *sql.Tx, t store.Test, o flow.Origin) (int64, bool, error) {
	t, created, err := b.addTest(ctx, tx, t, o)
	if err != nil || !created {
		return t.ID, created, err
	}
	_, err = b.river.InsertTx(ctx, tx, BaseArgs{TestID: t.ID}, nil)
	return t.ID, true, err
}

// addTest records test t asked for from o (the default lab, the test's
// parameters, o's thread), once per key; created says it is new.
func (b *Bot) addTest(ctx context.Context, tx *sql.Tx, t store.Test, o flow.Origin) (store.Test, bool, error) {
	if t.Lab == "" {
		t.Lab = b.opts.Lab
	}
	t.Params = b.opts.Params
	t.Origin = mustJSON(o)
	if t.Thread == "" {
		t.Thread = threadOf(o)
	}
	id, created, err := b.st.AddTest(ctx, tx, t)
	t.ID = id
	return t, created, err
}

func threadOf(o flow.Origin) string {
	if o.Kind == "github" {
		return fmt.Sprintf("github:%s#%d", o.Repo, o.Issue)
	}
	return ""
}
