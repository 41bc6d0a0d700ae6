package realstage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/reports"
	"github.com/rdmabot/rdmabot/reports/outbox"
	"github.com/rdmabot/rdmabot/reports/stats"
)

// decided are the metrics a verdict rests on, in the order reports
// show them: both copies' throughput together (about 2.5 % boot-to-boot
// spread in quiet mode, where write and read alone spread 4-6 %) and the
// whole loop's seconds (under 1 %). Write and read alone stay in the
// samples for the run page. A fio run has only read bandwidth.
var decided = []struct {
	name, unit string
	higher     bool
}{
	{"copy_MBps", "MB/s", true},
	{"loop_s", "s", false},
	{"read_MBps", "MB/s", true},
}

// metrics turns samples (one per boot) into reports' per-run,
// per-iteration series of the decided metrics.
func metrics(base, cand []store.Sample) []stats.Metric {
	has := map[string]bool{}
	for _, s := range append(append([]store.Sample(nil), base...), cand...) {
		for k := range s.Metrics {
			has[k] = true
		}
	}
	runs := func(samples []store.Sample, k string) [][]float64 {
		var out [][]float64
		for _, s := range samples {
			if s.Crash != "" {
				continue
			}
			if it := s.Iterations[k]; len(it) > 0 {
				out = append(out, it)
			} else if v, ok := s.Metrics[k]; ok {
				out = append(out, []float64{v})
			}
		}
		return out
	}
	var out []stats.Metric
	for _, d := range decided {
		if !has[d.name] || (d.name == "read_MBps" && has["copy_MBps"]) {
			continue
		}
		out = append(out, stats.Metric{Name: d.name, Unit: d.unit, HigherIsBetter: d.higher, Base: runs(base, d.name), Cand: runs(cand, d.name)})
	}
	return out
}

func crashes(samples []store.Sample) []reports.Crash {
	var out []reports.Crash
	for _, s := range samples {
		if s.Crash != "" {
			out = append(out, reports.Crash{Title: s.Crash, Console: s.Log})
		}
	}
	return out
}

// Reports is the reports package behind bot.Decider and bot.Reporter.
type Reports struct {
	Cfg    reports.Config
	Outbox *outbox.Outbox
	Lists  []lore.ListConfig
	Lab    string
	Params string
	Now    func() time.Time
}

// Decide judges candidate against base samples with reports' statistics.
func (r *Reports) Decide(base, cand []store.Sample) bot.Decision {
	in := &reports.Input{Metrics: metrics(base, cand), BaseCrashes: crashes(base), CandCrashes: crashes(cand)}
	v := reports.Judge(reports.Rand(reports.Thread{}), r.Cfg.Policy(), in)
	d := bot.Decision{Verdict: v.Outcome.String(), NeedMore: v.NeedMore(), Summary: reports.Sentence(&r.Cfg, &v)}
	return d
}

// thread describes the posting a series reply answers.
func (r *Reports) thread(s *bot.Series) (reports.Thread, error) {
	raw := s.Cover
	if len(raw) == 0 && len(s.Patches) > 0 {
		raw = s.Patches[0]
	}
	root, err := lore.ParseMessage(raw)
	if err != nil {
		return reports.Thread{}, err
	}
	t := reports.Thread{Subject: root.Subject, MessageID: root.MessageID, References: root.References,
		Author: reports.Address{Name: root.From.Name, Email: root.From.Email}, Version: s.Version, LoreURL: s.Link}
	if t.Version == 0 {
		t.Version = 1
	}
	for _, p := range s.Patches {
		if m, err := lore.ParseMessage(p); err == nil {
			t.PatchIDs = append(t.PatchIDs, m.MessageID)
		}
	}
	seen := map[string]bool{}
	for _, a := range append(append([]lore.Address(nil), root.To...), root.Cc...) {
		for _, l := range r.Lists {
			if strings.EqualFold(a.Email, l.Address) && !seen[l.Address] {
				t.Lists = append(t.Lists, l.Address)
				seen[l.Address] = true
			}
		}
	}
	return t, nil
}

// Deliver renders the reply and hands it to the outbox, whose ledger
// records it once per series version before anything is sent.
func (r *Reports) Deliver(ctx context.Context, rep bot.Report) error {
	if rep.Bisect != nil {
		return r.deliverBisection(ctx, rep)
	}
	if rep.Series == nil {
		return nil // a tree ref tested from the CLI: the dashboard has it
	}
	th, err := r.thread(rep.Series)
	if err != nil {
		return err
	}
	if rep.Verdict == bot.VerdictIncomplete || rep.Verdict == bot.VerdictRefused {
		return r.deliverNotice(ctx, rep, th)
	}
	in := &reports.Input{
		Thread: th,
		Base:   reports.Base{Tree: rep.Tree, SHA: rep.Base, Reason: rep.BaseReason},
		Test: reports.TestInfo{Lab: r.Lab, Params: r.Params, RunURL: rep.URL,
			Reproduce: reproduce(th.MessageID)},
		Metrics: metrics(rep.BaseSamples, rep.CandSamples),
	}
	in.BaseCrashes, in.CandCrashes = crashes(rep.BaseSamples), crashes(rep.CandSamples)
	switch rep.Verdict {
	case bot.VerdictNotApplied:
		in.Apply = &reports.ApplyFailure{Output: rep.Log}
		if e, ok := builder.ParseApplyError(rep.Log); ok {
			in.Apply.Index, in.Apply.Patch, in.Apply.File = e.Index, e.Subject, e.File
			if e.Hunk > 0 {
				in.Apply.Hunk = fmt.Sprintf("#%d %s", e.Hunk, e.HunkHeader)
			}
			in.Apply.Output = fmt.Sprintf("patch %d/%d: %s", e.Index, e.Total, e.Reason)
		}
	case bot.VerdictBuildFailed:
		in.BuildFail = &reports.BuildFailure{New: []string{firstLine(rep.Log)}, Log: rep.Log}
	case bot.VerdictBootFailed:
		in.Boot = &reports.BootFailure{Title: firstLine(rep.Log), Console: rep.Log}
	}
	v := reports.Judge(reports.Rand(th), r.Cfg.Policy(), in)
	if !v.Outcome.Mailed() {
		return nil
	}
	now := r.Now()
	idThread := th
	if req := rep.Origin.Request; req != nil {
		// Several answers in one thread within a second must not share
		// a Message-ID.
		idThread.MessageID += "|" + req.MsgID
	}
	id, err := reports.NewMessageID(now, reports.Rand(idThread), r.Cfg.From)
	if err != nil {
		return err
	}
	m, err := reports.RenderEmail(&r.Cfg, &v, id, now)
	if err != nil {
		return err
	}
	reply := outbox.FromMail(m, th)
	if req := rep.Origin.Request; req != nil {
		// Asked for by a reply: an answer of its own, not a second
		// verdict on the version the outbox would refuse as a duplicate.
		reply.Key += "|" + req.MsgID
	}
	return r.enqueue(ctx, reply)
}

// deliverNotice answers without a test: which patches of a series never
// came (to its author, in its thread), or why a command is not done (to
// its sender, in reply to the command).
func (r *Reports) deliverNotice(ctx context.Context, rep bot.Report, th reports.Thread) error {
	n := &reports.Notice{Thread: th, To: th.Author, Text: rep.Summary}
	key := outbox.Key("email", th.MessageID, th.Version)
	if rep.Verdict == bot.VerdictIncomplete {
		n.Outcome = reports.Incomplete
		n.Text = "This series is incomplete: " + rep.Summary + ", so it was not tested.\n" +
			"Please post the missing patches in this thread, or the whole series again."
		key += "|incomplete"
	} else {
		req := rep.Origin.Request
		if req == nil {
			return fmt.Errorf("refusal without its command")
		}
		n.Outcome, n.Quote, n.InReplyTo, n.References = reports.Refused, req.Line, req.MsgID, req.References
		n.To = reports.Address{Name: req.Name, Email: req.From}
		key += "|" + req.MsgID
	}
	now := r.Now()
	idThread := th
	idThread.MessageID = key // unique per answer, as the outbox key is
	id, err := reports.NewMessageID(now, reports.Rand(idThread), r.Cfg.From)
	if err != nil {
		return err
	}
	m, err := reports.RenderNotice(&r.Cfg, n, id, now)
	if err != nil {
		return err
	}
	reply := outbox.FromMail(m, th)
	reply.Key, reply.Recipient, reply.InReplyTo = key, n.To.Email, m.InReplyTo
	return r.enqueue(ctx, reply)
}

func (r *Reports) enqueue(ctx context.Context, reply outbox.Reply) error {
	if _, err := r.Outbox.Enqueue(ctx, reply); err != nil && !errors.Is(err, outbox.ErrDuplicate) && !errors.Is(err, outbox.ErrOwnMail) {
		return infra(err)
	}
	if _, err := r.Outbox.Deliver(ctx); err != nil {
		return infra(err)
	}
	return nil
}

// deliverBisection starts a new thread on the lists with the culprit, the
// good and bad heads and every step and confirmation.
func (r *Reports) deliverBisection(ctx context.Context, rep bot.Report) error {
	now := r.Now()
	th := reports.Thread{MessageID: rep.Key, Version: 1}
	id, err := reports.NewMessageID(now, reports.Rand(th), r.Cfg.From)
	if err != nil {
		return err
	}
	var to []string
	for _, l := range r.Lists {
		if l.Address != "" {
			to = append(to, l.Address)
		}
	}
	if len(to) == 0 {
		return fmt.Errorf("no list address to report %s to", rep.Title)
	}
	b := rep.Bisect
	var body bytes.Buffer
	if b.Confirmed {
		fmt.Fprintf(&body, "A scheduled run found %s on %s %+.0f%% at %s compared with %s.\n\n", b.Metric, rep.Tree, b.Change*100, short(b.Bad), short(b.Good))
		n := map[string]int{}
		for _, s := range b.Steps {
			n[s.Phase]++
		}
		fmt.Fprintf(&body, "The first bad commit is %s.\nConfirmed: it fails again (%s), its parent passes again (%s), and %s with it reverted passes.\n\n",
			b.Culprit, times(n["confirm-culprit"]), times(n["confirm-parent"]), short(b.Bad))
	} else {
		fmt.Fprintf(&body, "A scheduled run found %s on %s %+.0f%% at %s compared with %s, but no culprit was confirmed:\n%s\n\n", b.Metric, rep.Tree, b.Change*100, short(b.Bad), short(b.Good), rep.Summary)
	}
	fmt.Fprintf(&body, "good: %s\nbad:  %s\n\nsteps:\n", b.Good, b.Bad)
	for _, s := range b.Steps {
		fmt.Fprintf(&body, "  %2d %-16s %s %-4s %s\n", s.N, s.Phase, short(s.Commit), s.Outcome, s.Detail)
	}
	fmt.Fprintf(&body, "\nDetails and traces: %s\n\n-- \nrdmabot %s\n", rep.URL, r.Cfg.DocsURL)
	var raw bytes.Buffer
	fmt.Fprintf(&raw, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <%s>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n",
		r.Cfg.From, strings.Join(to, ", "), rep.Title, now.Format(time.RFC1123Z), id)
	raw.WriteString(strings.ReplaceAll(body.String(), "\n", "\r\n"))
	return r.enqueue(ctx, outbox.Reply{MessageID: id, Key: outbox.Key("email", rep.Key, 1), Channel: "email",
		Outcome: bot.VerdictRegression, Recipient: to[0], Envelope: to, Raw: raw.Bytes()})
}

// reproduce is the mailed command line that runs the same series through
// the same stages on any rdmabot. The Message-ID is the sender's text:
// it is quoted for the shell, so pasting the line passes it unchanged.
func reproduce(msgID string) string {
	return "rdmabot test -config config.toml -msgid " + shellQuote(msgID) + " -wait"
}

// shellQuote makes s one word for a POSIX shell: as is when it holds
// only characters no shell treats specially, else in single quotes,
// inside which nothing is special but the quote itself, written as
// quote, backslash, quote, quote.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
