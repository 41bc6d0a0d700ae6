package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/mail"
	"os"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/lore/feed"
	"github.com/rdmabot/rdmabot/reports/outbox"
)

const latencyUsage = `rdmabot latency [--config FILE] [--post CMD] [--timeout 90m] [--poll 5s] NAME=MBOX...
  posts each mbox in turn to the list a running serve watches (CMD with the mbox's path
  appended, RDMABOT_CONFIG=FILE), then waits until every series is answered: its test
  decided, and its reply in the outbox where the verdict is one reports.mail_outcomes
  mails. Prints posting -> verdict and -> reply per series, and p50/p95 per verdict
  (scripts/latency.sh runs it on a fresh serve)`

// latencySeries is one posted series of the latency benchmark and what
// became of it.
type latencySeries struct {
	Name string
	Mbox string
	// IDs are its mails' Message-IDs (no angle brackets): the series is
	// stored under one of them, and its reply answers one.
	IDs    []string
	Posted time.Time
	// Verdict is its test's, or its state when it ended with none
	// (failed, canceled); Decided is when, zero while it runs.
	Verdict string
	Decided time.Time
	// Replied is when its reply was put in the outbox; zero for none.
	Replied time.Time
}

// answered says whether s needs nothing more: decided, and replied to
// when its verdict is mailed.
func (s latencySeries) answered(mailed []string) bool {
	return !s.Decided.IsZero() && (!s.Replied.IsZero() || !slices.Contains(mailed, s.Verdict))
}

// answerTime is when s was answered for its author: the reply, or the
// verdict where none is mailed.
func (s latencySeries) answerTime() time.Time {
	if !s.Replied.IsZero() {
		return s.Replied
	}
	return s.Decided
}

// runLatency is the latency benchmark's posting and waiting.
func runLatency(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "latency")
	path := fs.String("config", "config.toml", "config file of the running serve")
	post := fs.String("post", "bash scripts/post.sh", "command that posts an mbox to the list serve watches")
	timeout := fs.Duration("timeout", 90*time.Minute, "stop waiting this long after the first posting")
	poll := fs.Duration("poll", 5*time.Second, "how often the store is read")
	if err := parseFlagsArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: %s", errUsage, latencyUsage)
	}
	series, err := latencyArgs(ctx, fs.Args())
	if err != nil {
		return err
	}
	cfg, st, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer st.Close()
	ob, err := outbox.Open(ctx, st.DB, &cfg.Reports, cfg.DataDir, nil, time.Now, e.log)
	if err != nil {
		return err
	}
	for i, s := range series {
		cmd := exec.CommandContext(ctx, "sh", "-c", *post+` "$1"`, "post", s.Mbox)
		cmd.Env = append(os.Environ(), "RDMABOT_CONFIG="+*path)
		cmd.Stdout, cmd.Stderr = e.stderr, e.stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("posting %s: %w", s.Mbox, err)
		}
		series[i].Posted = time.Now()
	}
	deadline := series[0].Posted.Add(*timeout)
	for {
		if err := observe(ctx, st, ob.Ledger(), series); err != nil {
			return err
		}
		if !slices.ContainsFunc(series, func(s latencySeries) bool { return !s.answered(cfg.Reports.MailOutcomes) }) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(*poll):
		}
	}
	if !writeLatency(e.stdout, series, cfg.Reports.MailOutcomes) {
		return needsAttention(fmt.Errorf("not every series was answered within %s", *timeout))
	}
	return nil
}

// latencyArgs are the NAME=MBOX arguments with each mbox's Message-IDs.
func latencyArgs(ctx context.Context, args []string) ([]latencySeries, error) {
	var out []latencySeries
	for _, a := range args {
		name, path, ok := strings.Cut(a, "=")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("%w: %q is not NAME=MBOX", errUsage, a)
		}
		s := latencySeries{Name: name, Mbox: path}
		_, err := (&feed.Mbox{Path: path}).Read(ctx, "", func(it feed.Item) error {
			m, err := mail.ReadMessage(bytes.NewReader(it.Raw))
			if err != nil {
				return err
			}
			if id := strings.Trim(m.Header.Get("Message-Id"), "<> "); id != "" {
				s.IDs = append(s.IDs, id)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(s.IDs) == 0 {
			return nil, fmt.Errorf("%s: no mail with a Message-ID", path)
		}
		out = append(out, s)
	}
	return out, nil
}

// latencyTest is a test as the benchmark matches it: the Message-IDs
// its series is stored under.
type latencyTest struct {
	Test          store.Test
	MsgID, RootID string
}

// observe reads the store's tests and the outbox's replies into series.
func observe(ctx context.Context, st *store.Store, l *outbox.Ledger, series []latencySeries) error {
	tests, err := st.Tests(ctx, st.DB, 500)
	if err != nil {
		return err
	}
	var rows []latencyTest
	for _, t := range tests {
		s, err := seriesOf(ctx, st, t)
		if err != nil {
			return err
		}
		if s == nil {
			continue // a mainline test
		}
		rows = append(rows, latencyTest{Test: t, MsgID: s.MsgID, RootID: s.Root})
	}
	replies, err := l.List(ctx)
	if err != nil {
		return err
	}
	matchAnswers(series, rows, replies)
	return nil
}

// matchAnswers fills in each series' verdict from its first test (the
// lowest id: later ones are retests) once that one has ended, and its
// reply from the earliest outbox entry In-Reply-To one of its mails.
func matchAnswers(series []latencySeries, tests []latencyTest, replies []*outbox.Entry) {
	for i := range series {
		s := &series[i]
		var first *store.Test
		for j := range tests {
			t := &tests[j]
			if (slices.Contains(s.IDs, t.MsgID) || t.RootID != "" && slices.Contains(s.IDs, t.RootID)) && (first == nil || t.Test.ID < first.ID) {
				first = &t.Test
			}
		}
		if first != nil && (first.State == store.StateDone || first.State == store.StateFailed || first.State == store.StateCanceled) {
			s.Verdict, s.Decided = cmp.Or(first.Verdict.String(), strings.ToUpper(string(first.State))), first.UpdatedAt
		}
		for _, r := range replies {
			m, err := mail.ReadMessage(bytes.NewReader(r.Raw))
			if err != nil {
				continue
			}
			if slices.Contains(s.IDs, strings.Trim(m.Header.Get("In-Reply-To"), "<> ")) && (s.Replied.IsZero() || r.Created.Before(s.Replied)) {
				s.Replied = r.Created
			}
		}
	}
}

// writeLatency prints each series' posting -> verdict and -> reply, and
// the 50th and 95th percentiles (nearest rank) of posting -> answer per
// verdict. It says whether every series was answered.
func writeLatency(w io.Writer, series []latencySeries, mailed []string) bool {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERIES\tPOSTED\tVERDICT\tTO VERDICT\tTO REPLY")
	byVerdict := map[string][]time.Duration{}
	all := true
	for _, s := range series {
		verdict, toVerdict, toReply := "(none yet)", "-", "-"
		if !s.Decided.IsZero() {
			verdict, toVerdict = s.Verdict, s.Decided.Sub(s.Posted).Round(time.Second).String()
		}
		switch {
		case !s.Replied.IsZero():
			toReply = s.Replied.Sub(s.Posted).Round(time.Second).String()
		case !s.Decided.IsZero() && !slices.Contains(mailed, s.Verdict):
			toReply = "not mailed"
		}
		if s.answered(mailed) {
			byVerdict[s.Verdict] = append(byVerdict[s.Verdict], s.answerTime().Sub(s.Posted))
		} else {
			all = false
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Posted.UTC().Format(time.TimeOnly), verdict, toVerdict, toReply)
	}
	fmt.Fprintln(tw, "\nVERDICT\tSERIES\tP50\tP95")
	for _, v := range slices.Sorted(maps.Keys(byVerdict)) {
		d := byVerdict[v]
		slices.Sort(d)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", v, len(d), nearestRank(d, 50).Round(time.Second), nearestRank(d, 95).Round(time.Second))
	}
	tw.Flush()
	return all
}

// nearestRank is the p-th percentile of sorted d: its
// ceil(p/100*len(d))-th value.
func nearestRank(d []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(d)))) - 1
	return d[max(i, 0)]
}
