package bot

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// Commands from people: "/rdmabot" comments on GitHub, "#rdmabot" lines
// in replies on the lists, the command line's test and bisect. Each
// transport parses its syntax and decides who sent the command; what is
// done for it is decided here, once for all of them.

// Act does what c asks, from o, and says what it did. s is the series c
// is about when its transport has it (a reply in the series' thread, a
// series read from a file); a test naming c.Link fetches it. A command
// the bot cannot do as asked is a *flow.CommandError, whose text is for
// the asker. Each command is recorded once: the same request again
// yields the same test.
func (b *Bot) Act(ctx context.Context, c flow.Command, s *flow.Series, o flow.Origin) (flow.Acted, error) {
	if c.Refused == "" && s == nil && c.Link != "" {
		if b.stages.Fetch == nil {
			return flow.Acted{}, fmt.Errorf("no lore fetcher configured")
		}
		fetched, err := b.stages.Fetch.Fetch(ctx, c.Link)
		if err != nil {
			return flow.Acted{}, fmt.Errorf("fetch %s: %w", c.Link, err)
		}
		s = &fetched
	}
	if c.Verb == flow.CommandCancel && c.Refused == "" {
		// Canceling stops the test's jobs, outside any transaction of ours.
		return b.cancelThread(ctx, o)
	}
	var a flow.Acted
	err := b.inTx(ctx, func(tx *sql.Tx) (err error) {
		a, err = b.act(ctx, tx, c, s, o)
		return err
	})
	return a, err
}

// act is Act in tx, as the ingest job runs it for the commands it read
// off the lists. A command by mail that is refused, by its transport or
// here, is answered as a test of its own that is done at once: its reply
// goes to the sender through the outbox like every other.
func (b *Bot) act(ctx context.Context, tx *sql.Tx, c flow.Command, s *flow.Series, o flow.Origin) (flow.Acted, error) {
	if o.Kind == "mail" {
		o.Command = &c // answered in place, with its refusal if any
	}
	o.Asked = c.Profiles
	if c.Refused == "" {
		a, err := b.do(ctx, tx, c, s, o)
		var ce *flow.CommandError
		if !errors.As(err, &ce) || o.Kind != "mail" {
			return a, err
		}
		c.Refused = ce.Why
	}
	if o.Kind != "mail" || s == nil {
		return flow.Acted{}, &flow.CommandError{Why: c.Refused}
	}
	id, created, err := b.enqueueNotice(ctx, tx, *s, "refused:"+c.MsgID, flow.Refused, c.Refused, o)
	return flow.Acted{What: flow.ActedRefused, ID: id, New: created}, err
}

// do acts on a command nobody refused.
func (b *Bot) do(ctx context.Context, tx *sql.Tx, c flow.Command, s *flow.Series, o flow.Origin) (flow.Acted, error) {
	switch c.Verb {
	case flow.CommandInvalid, flow.CommandDup:
		if s == nil {
			return flow.Acted{}, &flow.CommandError{Why: "there is no series here to dispute a report of"}
		}
		return b.dispute(ctx, tx, *s, c)
	case flow.CommandBisect:
		if err := b.knownTree(c.Tree, ""); err != nil {
			return flow.Acted{}, err
		}
		id, err := b.startBisection(ctx, tx, store.Bisection{Key: fmt.Sprintf("%s:%s:%s..%s:%d", o.Kind, c.Tree, c.Good, c.Bad, o.Comment),
			Tree: c.Tree, Good: c.Good, Bad: c.Bad, Metric: b.cfg.Mainline.Metric, Origin: mustJSON(o)})
		return flow.Acted{What: flow.ActedBisection, ID: id, New: true}, err
	case flow.CommandTest, flow.CommandRetest:
		if err := b.knownProfiles(c.Profiles); err != nil {
			return flow.Acted{}, err
		}
	default:
		return flow.Acted{}, &flow.CommandError{Why: fmt.Sprintf("unknown command %q", c.Verb)}
	}
	switch {
	case s != nil:
		if s.MsgID == "" || len(s.Patches) == 0 {
			return flow.Acted{}, &flow.CommandError{Why: "the series has no Message-ID or no patches"}
		}
		if c.Tree != "" {
			if err := b.knownTree(c.Tree, c.Branch); err != nil {
				return flow.Acted{}, err
			}
			s.Tree, s.Branch = c.Tree, c.Branch
		}
		id, created, err := b.enqueueSeries(ctx, tx, *s, o, store.CauseCommand)
		return flow.Acted{What: flow.ActedTest, ID: id, New: created}, err
	case c.Ref != "":
		if err := b.knownTree(c.Tree, ""); err != nil {
			return flow.Acted{}, err
		}
		key := fmt.Sprintf("ref:%s:%s:%s:%d", c.Tree, c.Ref, threadOf(o), o.Comment)
		id, created, err := b.enqueueTest(ctx, tx, store.Test{Key: key, Kind: store.KindRef, Tree: c.Tree, Ref: c.Ref, Cause: store.CauseCommand}, o)
		return flow.Acted{What: flow.ActedTest, ID: id, New: created}, err
	case c.Verb == flow.CommandRetest:
		return b.retestThread(ctx, tx, o)
	}
	return flow.Acted{}, &flow.CommandError{Why: "say what to test"}
}

// knownProfiles is nil when every profile asked for is on in the lab.
func (b *Bot) knownProfiles(asked []string) error {
	var on []string
	for _, p := range b.stages.Profiles {
		on = append(on, p.Name())
	}
	for _, a := range asked {
		if !slices.Contains(on, a) {
			return &flow.CommandError{Why: fmt.Sprintf("The %s profile is off on this bot (on: %s).", a, strings.Join(append(on, "the default test"), ", "))}
		}
	}
	return nil
}

// knownTree is nil when tree is configured, with branch when that is
// not "".
func (b *Bot) knownTree(tree, branch string) error {
	branches, ok := b.opts.Branches[tree]
	if !ok {
		names := b.treeNames()
		slices.Sort(names)
		return &flow.CommandError{Why: fmt.Sprintf("I know no tree %q (known: %s).", tree, strings.Join(names, ", "))}
	}
	if branch != "" && !slices.Contains(branches, branch) {
		return &flow.CommandError{Why: fmt.Sprintf("Tree %s has no branch %q here (known: %s).", tree, branch, strings.Join(branches, ", "))}
	}
	return nil
}

// retestThread queues the newest test of o's thread again, as a new test.
func (b *Bot) retestThread(ctx context.Context, tx *sql.Tx, o flow.Origin) (flow.Acted, error) {
	thread := threadOf(o)
	if thread == "" {
		return flow.Acted{}, &flow.CommandError{Why: "there is no test here to run again"}
	}
	old, err := b.st.LatestInThread(ctx, tx, thread)
	if errors.Is(err, store.ErrNotFound) {
		return flow.Acted{}, &flow.CommandError{Why: "there is no test here to run again"}
	}
	if err != nil {
		return flow.Acted{}, err
	}
	t := store.Test{Key: fmt.Sprintf("%s:retest:%d:%d", strings.SplitN(old.Key, ":retest:", 2)[0], o.Comment, b.st.Now().UnixNano()),
		Kind: old.Kind, SeriesID: old.SeriesID, Tree: old.Tree, Ref: old.Ref, Thread: thread, Cause: store.CauseRetest}
	if old.Kind == store.KindMainline {
		t.Base, t.Candidate = old.Base, old.Candidate
	}
	id, created, err := b.enqueueTest(ctx, tx, t, o)
	return flow.Acted{What: flow.ActedTest, ID: id, New: created}, err
}

// cancelThread cancels the newest unfinished test of o's thread.
func (b *Bot) cancelThread(ctx context.Context, o flow.Origin) (flow.Acted, error) {
	thread := threadOf(o)
	if thread == "" {
		return flow.Acted{}, &flow.CommandError{Why: "there is no test here to cancel"}
	}
	t, err := b.st.LatestInThread(ctx, b.st.DB, thread)
	if errors.Is(err, store.ErrNotFound) {
		return flow.Acted{}, &flow.CommandError{Why: "there is no test here to cancel"}
	}
	if err != nil {
		return flow.Acted{}, err
	}
	if err := b.Cancel(ctx, t.ID); err != nil {
		return flow.Acted{}, err
	}
	return flow.Acted{What: flow.ActedCanceled, ID: t.ID, New: true}, nil
}

// dispute records a maintainer's "invalid" or "dup" against the newest
// report on the series version: the report stands, marked, on the
// dashboard. With no report to dispute, the sender is told so.
func (b *Bot) dispute(ctx context.Context, tx *sql.Tx, s flow.Series, c flow.Command) (flow.Acted, error) {
	t, ok, err := b.st.DisputableTest(ctx, tx, s.MsgID, s.Version)
	if err != nil {
		return flow.Acted{}, err
	}
	if !ok {
		return flow.Acted{}, &flow.CommandError{Why: fmt.Sprintf("There is no report of mine on this series (v%d) to call %s.", s.Version, c.Verb)}
	}
	added, err := b.st.AddDispute(ctx, tx, store.Dispute{MsgID: c.MsgID, TestID: t.ID, Kind: c.Verb, Note: c.Note, By: c.From})
	return flow.Acted{What: flow.ActedDispute, ID: t.ID, New: added}, err
}
