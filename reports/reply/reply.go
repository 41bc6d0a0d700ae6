// Package reply is the reply policy: it judges a test's samples with
// reports' statistics (the verdict and its stored judgement), decides
// who hears of a verdict (the thread, the one who asked, nobody), renders
// the reply with reports (mail, GitHub comment, notice, bisection,
// patchwork checks) and hands it to the outbox, which sends it once.
// What it needs of the other stages it asks through small interfaces:
// the lab's and the kernels' words, a series' thread, MAINTAINERS.
package reply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/redact"
	"github.com/rdmabot/rdmabot/reports"
	"github.com/rdmabot/rdmabot/reports/outbox"
	"github.com/rdmabot/rdmabot/reports/stats"
)

// sampleKey is the sample name of a decided metric's label.
func sampleKey(label string) string {
	for _, d := range reports.DecidedMetrics() {
		if d.Label == label {
			return d.Name
		}
	}
	return label
}

// metrics turns samples (one per boot) into reports' per-run,
// per-iteration series of the decided metrics.
func metrics(base, cand []flow.Sample) []stats.Metric {
	has := map[string]bool{}
	for _, s := range append(append([]flow.Sample(nil), base...), cand...) {
		for k := range s.Metrics {
			has[k] = true
		}
	}
	runs := func(samples []flow.Sample, k string) [][]float64 {
		var out [][]float64
		for _, s := range samples {
			// A boot of another profile (the lossy link) only tells
			// whether the kernel crashes.
			if s.Crash != "" || s.Profile != "" {
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
	for _, d := range reports.DecidedMetrics() {
		if !has[d.Name] || (d.Name == "read_MBps" && has["copy_MBps"]) {
			continue
		}
		out = append(out, stats.Metric{Name: d.Label, Unit: d.Unit, HigherIsBetter: d.HigherIsBetter, Base: runs(base, d.Name), Cand: runs(cand, d.Name)})
	}
	return out
}

// health is the transport counts of the default test's boots that
// reported them.
func health(samples []flow.Sample) []map[string]int {
	// The client-side boots run the default test, only on other sides.
	return healthOf(samples, func(s flow.Sample) bool { return s.Profile == "" || s.Profile == flow.ProfileClientSide })
}

// healthOf is the transport counts of the boots keep takes (over a lossy
// link retransmissions are the point, not a fault: never those).
func healthOf(samples []flow.Sample, keep func(flow.Sample) bool) []map[string]int {
	var out []map[string]int
	for _, s := range samples {
		if s.Health != nil && keep(s) {
			out = append(out, s.Health)
		}
	}
	return out
}

// pressureWords says what the pressure profile ran, for a reply.
func (r *Replier) pressureWords(samples []flow.Sample) string {
	var provs []string
	for _, s := range samples {
		if p, ok := strings.CutPrefix(s.Profile, flow.ProfilePressure+"-"); ok && !slices.Contains(provs, p) {
			provs = append(provs, p)
		}
	}
	return r.Lab.PressureWords(provs)
}

// pressure is the pressure profile's counts of both sides, nil when no
// boot of it reported any.
func (r *Replier) pressure(base, cand []flow.Sample) *reports.PressureRuns {
	b, c := healthOf(base, flow.Sample.IsPressure), healthOf(cand, flow.Sample.IsPressure)
	if len(b) == 0 && len(c) == 0 {
		return nil
	}
	return &reports.PressureRuns{Base: b, Cand: c, Words: r.pressureWords(cand)}
}

// fstests is the fstests profile's boots of both sides, nil when none
// ran.
func (r *Replier) fstests(base, cand []flow.Sample) *reports.FstestsRuns {
	boots := func(samples []flow.Sample) []reports.FstestsBoot {
		var out []reports.FstestsBoot
		for _, s := range samples {
			// A boot that crashed is the crash's to tell.
			if s.IsFstests() && s.Crash == "" {
				out = append(out, reports.FstestsBoot{Tests: s.Tests, ServerOps: s.ServerOps, Confirming: s.Confirming})
			}
		}
		return out
	}
	b, c := boots(base), boots(cand)
	if len(b) == 0 && len(c) == 0 {
		return nil
	}
	var words []string
	for _, s := range cand {
		if w := r.Lab.LinkWords(s.Profile); s.IsFstests() && !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	return &reports.FstestsRuns{Base: b, Cand: c, Words: strings.Join(words, "; "), Flaky: r.Cfg.FstestsFlaky}
}

func (r *Replier) crashes(samples, base []flow.Sample) []reports.Crash {
	var out []reports.Crash
	for _, s := range samples {
		if s.Crash == "" {
			continue
		}
		c := reports.Crash{Title: s.Crash, Console: s.Log, Stall: s.Stall, Boots: sameCrash(samples, s.Crash),
			Crashed: count(samples, func(s flow.Sample) bool { return s.Crash != "" })}
		if s.Profile != "" {
			c.Link, c.Load, c.Debug = r.Lab.LinkWords(s.Profile), s.IsPressure(), s.Profile == flow.ProfileDebug
			c.Client = s.Profile == flow.ProfileClientSide
			for _, b := range base {
				if b.Profile == s.Profile {
					c.LinkBaseRuns++
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// sameCrash counts the boots whose crash has title's signature.
func sameCrash(samples []flow.Sample, title string) int {
	return count(samples, func(s flow.Sample) bool {
		return s.Crash != "" && reports.Signature(s.Crash) == reports.Signature(title)
	})
}

// corruption is the first boot whose data did not survive the round
// trip: a base boot's first (the lab's problem, whatever the candidate
// did), else the candidate's; nil when none. A lab profile's boot says
// how it was booted.
func (r *Replier) corruption(base, cand []flow.Sample) *reports.Corruption {
	detail := func(s flow.Sample) string {
		if s.Profile == "" {
			return s.Corrupt
		}
		return s.Corrupt + "\n(booted with " + r.Lab.LinkWords(s.Profile) + ")"
	}
	for _, s := range base {
		if s.Corrupt != "" {
			return &reports.Corruption{Base: true, Detail: detail(s)}
		}
	}
	for _, s := range cand {
		if s.Corrupt != "" {
			return &reports.Corruption{Detail: detail(s)}
		}
	}
	return nil
}

// profiled counts the boots of a lab profile other than the default.
func profiled(samples []flow.Sample) int {
	return count(samples, func(s flow.Sample) bool { return s.Profile != "" })
}

// count counts the samples that are what.
func count(samples []flow.Sample, what func(flow.Sample) bool) int {
	n := 0
	for _, s := range samples {
		if what(s) {
			n++
		}
	}
	return n
}

// Replier is the reply policy behind bot.Decider and bot.Reporter: it
// judges samples with reports' statistics, chooses who hears of a
// verdict, renders the reply with reports and hands it to the outbox.
type Replier struct {
	Cfg    reports.Config
	Outbox *outbox.Outbox
	// Lists are the list addresses a bisection's report goes to.
	Lists []string
	// MaintainersOnly are the lists whose habit is to hear of a bot's
	// reply through their maintainers only (lore.lists reply =
	// "maintainers"): never Cc'd on a reply to a posting.
	MaintainersOnly []string
	// TreeURLs give each base's tree its URL.
	TreeURLs map[string]string
	// Lab describes the pairs and the test every reply names.
	Lab Lab
	// Kernels describes how the lab's kernels are configured and built.
	Kernels Kernels
	// Sides says where a series' kernel booted (nil: the server), for
	// the reproducer's commands.
	Sides Sides
	// Limits names what the pair could not exercise (nil: nothing said).
	Limits Limits
	// ListsOf names a culprit's lists, which its bisection report goes
	// to (nil: every configured list).
	ListsOf ListLookup
	// Maintainers reads MAINTAINERS for the Cc line; nil where no tree
	// is (a process without the build role).
	Maintainers MaintainerLookup
	Log         *slog.Logger
	Now         func() time.Time
}

// thread is the series' thread as its replies answer it: its root's
// subject, Message-ID, References and author, each patch's Message-ID
// and subject, and the configured lists its root was sent to.
func (r *Replier) thread(s *flow.Series) (reports.Thread, error) {
	root := s.RootMail()
	if root == nil {
		return reports.Thread{}, fmt.Errorf("series %s has no mail", s.MsgID)
	}
	t := reports.Thread{Subject: root.Subject, MessageID: root.MessageID, References: root.References,
		Author: reports.Address{Name: root.From.Name, Email: root.From.Email}, Version: max(s.Version, 1), LoreURL: s.Link}
	for _, p := range s.Patches {
		t.Patches = append(t.Patches, reports.Patch{MessageID: p.MessageID, Subject: p.Subject})
	}
	seen := map[string]bool{}
	for _, a := range append(append([]flow.Address(nil), root.To...), root.Cc...) {
		for _, l := range r.Lists {
			if strings.EqualFold(a.Email, l) && !seen[l] {
				t.Lists = append(t.Lists, l)
				seen[l] = true
			}
		}
	}
	t.Addressed = r.mailable(addressed(s, r.Cfg.From))
	r.listHabits(&t)
	for _, rv := range s.Reviews {
		u := rv.URL
		if u == "" {
			u = "https://lore.kernel.org/r/" + url.PathEscape(rv.MessageID) + "/"
		}
		t.Reviews = append(t.Reviews, [2]string{rv.By, u})
	}
	return t, nil
}

// listHabits keeps each list's habit for a bot's reply (lore.lists
// reply): a list that hears only through its maintainers is not Cc'd,
// and a posting that went to no list taking replies is answered to its
// author and the maintainers of its files alone (Thread.Cc), not to the
// others it addressed.
func (r *Replier) listHabits(t *reports.Thread) {
	quiet := func(a string) bool {
		box, err := reports.Mailbox(a)
		return err == nil && slices.ContainsFunc(r.MaintainersOnly, func(l string) bool { return strings.EqualFold(l, box) })
	}
	keep := slices.DeleteFunc(slices.Clone(t.Lists), quiet)
	if len(keep) == len(t.Lists) {
		return
	}
	t.Lists = keep
	if len(keep) == 0 {
		t.Addressed = nil
		return
	}
	t.Addressed = slices.DeleteFunc(t.Addressed, quiet)
}

// mailable drops the addresses that opted out (reports.opt_out) from a
// reply's Cc: someone the author copied, or a maintainer, who asked
// never to hear from the bot is left out, not the author's whole reply
// (the outbox suppresses a reply to any opted-out recipient).
func (r *Replier) mailable(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if box, err := reports.Mailbox(a); err == nil && !outbox.OptedOut(r.Cfg.OptOut, box) {
			out = append(out, a)
		}
	}
	return out
}

// addressed are the lists and people the series' mails were sent To and
// Cc (the cover letter's first, then each patch's, each address once),
// but its author and the bot: whom a reply-all in its thread copies. An
// address that is not one plain mailbox is left out, not the reply.
func addressed(s *flow.Series, bot string) []string {
	seen := map[string]bool{}
	if root := s.RootMail(); root != nil {
		seen[strings.ToLower(root.From.Email)] = true
	}
	if a, err := mail.ParseAddress(bot); err == nil {
		seen[strings.ToLower(a.Address)] = true
	}
	var out []string
	for _, m := range s.Mails() {
		for _, a := range append(append([]flow.Address(nil), m.To...), m.Cc...) {
			box, err := reports.Mailbox(a.Email)
			if err != nil || seen[strings.ToLower(box)] {
				continue
			}
			seen[strings.ToLower(box)] = true
			out = append(out, (&mail.Address{Name: a.Name, Address: box}).String())
		}
	}
	return out
}

// SeriesBranch is the branch a test's series.bundle holds (the
// reproducer's): the series applied on its base.
const SeriesBranch = "rdmabot/series"

// Lab is the lab in a reply's words (lab.Config).
type Lab interface {
	// TestWords names the default test and says what one boot of it does.
	TestWords() (name, test string)
	// PairWords describes a pair: emulated or real, and its RDMA.
	PairWords(pair string) string
	DefaultPair() string
	// LinkWords names a lab profile's link or kernel ("lossy", "debug",
	// "pressure-rxe").
	LinkWords(profile string) string
	// PressureWords says what the pressure profile ran on providers.
	PressureWords(providers []string) string
	DebugIterations() int
}

// Kernels is how the lab's kernels are configured and built, in words:
// the configuration of the default and of the debug build, and the
// compiler ("" on a process that builds nothing).
type Kernels struct {
	Config, DebugConfig, Compiler string
}

// Limits says what a pair cannot exercise of a series' changes (the
// QEMU pair's soft providers: no IOMMU, no MR hardware), one sentence
// per limit.
type Limits interface {
	EmulationLimits(pair string, changes []flow.Change) []string
}

// Sides says which side of the pair a series' kernel boots on
// (lab.Runner).
type Sides interface {
	CandidateSide(s flow.Series) string
}

// ListLookup names the mailing lists MAINTAINERS gives (L:) for files
// at a commit.
type ListLookup interface {
	ListsAt(ctx context.Context, commit string, files []string) ([]string, error)
}

// MaintainerLookup lists the maintainers and reviewers MAINTAINERS
// names for files at a commit: the base the series was tested on.
type MaintainerLookup interface {
	MaintainersAt(ctx context.Context, commit string, files []string) ([]string, error)
}

// Decide judges candidate against base samples with reports' statistics,
// once: the judgement goes into the decision's Detail, which the bot
// stores and every reply renders. A cancelled ctx judges nothing (the
// judgement itself is one bounded computation: reports.Judge takes no
// context).
func (r *Replier) Decide(ctx context.Context, id string, base, cand []flow.Sample) (flow.Decision, error) {
	if err := ctx.Err(); err != nil {
		return flow.Decision{}, err
	}
	v := r.judge(id, base, cand)
	d := flow.Decision{Verdict: v.Outcome, NeedMore: v.NeedMore(), Summary: reports.Summary(&r.Cfg, &v)}
	if h := reports.Headline(&v); h != nil {
		d.Metric, d.Change = sampleKey(h.Name), h.CI.Ratio-1
	}
	j := v.Judgement()
	if b, err := json.Marshal(reports.Detail{Judgement: &j}); err == nil {
		d.Detail = b
	}
	return d, nil
}

// judge is the judgement of test id (bot.Decider), its bootstrap seeded
// from id: the same test's same samples give the same interval.
func (r *Replier) judge(id string, base, cand []flow.Sample) reports.Verdict {
	in := &reports.Input{Test: r.testInfo(nil, "", base, cand), Metrics: metrics(base, cand),
		BaseCrashes: r.crashes(base, base), CandCrashes: r.crashes(cand, base), BaseHealth: health(base), CandHealth: health(cand),
		Pressure: r.pressure(base, cand), Fstests: r.fstests(base, cand), Corruption: r.corruption(base, cand)}
	return reports.Judge(reports.Rand(reports.Thread{MessageID: id}), r.Cfg.Policy(), in)
}

// Text is the judgement of test id (judge) as a reply
// words it: the verdict's sentence, then what was measured.
func (r *Replier) Text(id string, base, cand []flow.Sample) string {
	v := r.judge(id, base, cand)
	return reports.Results(&r.Cfg, &v)
}

// thread describes the posting a series reply answers.
// maintainersCc are the maintainers and reviewers MAINTAINERS lists for
// the files of s (reports.cc_maintainers): none when it is off, when no
// tree is readable here, or when MAINTAINERS cannot be read (logged: the
// reply goes to the lists all the same).
func (r *Replier) maintainersCc(ctx context.Context, s *flow.Series, base string) []string {
	if !r.Cfg.CCMaintainers || r.Maintainers == nil || base == "" {
		return nil
	}
	addrs, err := r.Maintainers.MaintainersAt(ctx, base, s.Files)
	if err != nil {
		if r.Log != nil {
			r.Log.Warn("reports: MAINTAINERS not read; no maintainers in Cc", "series", s.MsgID, "err", err)
		}
		return nil
	}
	return r.mailable(addrs)
}

// Deliver renders the reply and hands it to the outbox, whose ledger
// records it once per series version before anything is sent.
func (r *Replier) Deliver(ctx context.Context, rep flow.Report) error {
	if rep.Origin.Kind == "github" {
		return r.deliverComment(ctx, rep)
	}
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
	if rep.Verdict == flow.Incomplete || rep.Verdict == flow.Refused {
		return r.deliverNotice(ctx, rep, th)
	}
	if err := r.finalChecks(ctx, rep, th); err != nil {
		return err
	}
	v, err := r.verdict(rep, th)
	if err != nil {
		return err
	}
	req := rep.Origin.Command
	aud := r.Cfg.Audience(v.Outcome, reports.Occasion{
		GuessedBase:  guessedBase(rep.BaseReason),
		Asked:        req != nil,
		ClosesReport: rep.Fix != nil,
		Unconfirmed:  v.Unconfirmed() != nil,
	})
	switch aud {
	case reports.Nobody:
		if r.Log != nil && reports.Mailed(v.Outcome) {
			r.Log.Info("reports: not mailed; the dashboard has it", "series", rep.Series.MsgID, "outcome", v.Outcome,
				"base", rep.BaseReason)
		}
		return nil
	case reports.Asker:
		// Only the one who asked hears of it, in reply to the command.
		v.In.Thread.Author = reports.Address{Name: req.Name, Email: req.From}
		v.In.Thread.Lists, v.In.Thread.Addressed, v.In.Thread.Cc = nil, nil, nil
	case reports.InThread:
		v.In.Thread.Cc = r.maintainersCc(ctx, rep.Series, rep.Base)
	}
	now := r.Now()
	idThread := th
	if req != nil {
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
	if aud == reports.Asker {
		m.InReplyTo = req.MsgID
		m.References = append(append([]string{}, req.References...), req.MsgID)
	}
	reply := outbox.FromMail(m, v.In.Thread)
	if req != nil {
		// Asked for by a reply: an answer of its own, not a second
		// verdict on the version the outbox would refuse as a duplicate.
		reply.Key += "|" + req.MsgID
	}
	if aud == reports.Asker {
		reply.InReplyTo = req.MsgID
	}
	return r.enqueue(ctx, reply)
}

// Answered tells which series version a reply of the bot's answered,
// from the outbox's ledger: a mail reply that reported a failure to fix
// (the ones offering Reported-by and Closes:).
func (r *Replier) Answered(ctx context.Context, replyID string) (string, int, bool, error) {
	e, err := r.Outbox.Ledger().Get(ctx, replyID)
	if errors.Is(err, outbox.ErrNotFound) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, err
	}
	channel, thread, version, ok := outbox.ParseKey(e.Key)
	if o, err := flow.ParseOutcome(e.Outcome); !ok || channel != "email" || err != nil || !reports.OffersTags(o) {
		return "", 0, false, nil
	}
	return thread, version, true, nil
}

// deliverNotice answers without a test: which patches of a series never
// came (to its author, in its thread), or why a command is not done (to
// its sender, in reply to the command).
func (r *Replier) deliverNotice(ctx context.Context, rep flow.Report, th reports.Thread) error {
	n := &reports.Notice{Thread: th, To: th.Author, Text: rep.Summary}
	key := outbox.Key("email", th.MessageID, th.Version)
	if rep.Verdict == flow.Incomplete {
		n.Outcome = flow.Incomplete
		n.Text = "This series is incomplete: " + rep.Summary + ", so it was not tested.\n" +
			"Please post the missing patches in this thread, or the whole series again."
		key += "|incomplete"
	} else {
		req := rep.Origin.Command
		if req == nil {
			return fmt.Errorf("refusal without its command")
		}
		n.Outcome, n.Quote, n.InReplyTo, n.References = flow.Refused, req.Line, req.MsgID, req.References
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
	if n.Outcome == flow.Refused {
		reply.Lists = nil // not Cc the lists, so not counted against theirs
	}
	return r.enqueue(ctx, reply)
}

// checkState is the patchwork state of a verdict ("" = no check).
func checkState(verdict flow.Outcome) string {
	switch {
	case verdict == flow.Pass:
		return outbox.CheckSuccess
	case verdict == flow.ApplyFailed || verdict.Failing():
		return outbox.CheckFail
	case verdict == flow.Inconclusive:
		return outbox.CheckWarning
	}
	return ""
}

// Started records the pending patchwork check of every patch of the
// series as its testing starts (once per series version, however often
// the test job retries) and sends what is due; the final check follows
// it (the outbox posts a final check only after its pending one).
func (r *Replier) Started(ctx context.Context, rep flow.Report) error {
	if r.Cfg.Patchwork.URL == "" || rep.Series == nil {
		return nil
	}
	th, err := r.thread(rep.Series)
	if err != nil {
		return err
	}
	desc := "Testing"
	if rep.Tree != "" {
		desc += " on " + rep.Tree
		if rep.BaseBranch != "" {
			desc += "/" + rep.BaseBranch
		}
	}
	if rep.Base != "" {
		desc += " at " + reports.Short(rep.Base)
	}
	if rep.BaseReason != "" {
		desc += " (base chosen by " + rep.BaseReason + ")"
	}
	c := outbox.Check{State: outbox.CheckPending, TargetURL: rep.URL, Context: r.Cfg.Patchwork.Context, Description: oneLine(desc)}
	if err := r.enqueueChecks(ctx, th, outbox.PhasePending, c); err != nil {
		return err
	}
	if _, err := r.Outbox.Deliver(ctx); err != nil && r.Log != nil {
		// Recorded: the deliver job sends it; testing need not wait.
		r.Log.Warn("reports: delivery after the pending checks", "err", err)
	}
	return nil
}

// finalChecks records the final patchwork check of every patch of the
// series (once per series version); Deliver sends them with the reply.
func (r *Replier) finalChecks(ctx context.Context, rep flow.Report, th reports.Thread) error {
	state := checkState(rep.Verdict)
	if r.Cfg.Patchwork.URL == "" || state == "" {
		return nil
	}
	desc := rep.Verdict.String()
	if s := firstLine(rep.Summary); s != "" {
		desc += ": " + s
	}
	c := outbox.Check{State: state, TargetURL: rep.URL, Context: r.Cfg.Patchwork.Context, Description: oneLine(desc)}
	return r.enqueueChecks(ctx, th, outbox.PhaseFinal, c)
}

// oneLine keeps a check's description to patchwork's one line.
func oneLine(s string) string {
	s = firstLine(s)
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// enqueueChecks records check c on every patch of the series, in phase.
func (r *Replier) enqueueChecks(ctx context.Context, th reports.Thread, phase string, c outbox.Check) error {
	for _, p := range th.Patches {
		if p.MessageID == "" {
			continue
		}
		reply, err := outbox.FromCheck(p.MessageID, th.MessageID, th.Version, phase, th.Author.Email, c)
		if err != nil {
			return err
		}
		if _, err := r.Outbox.Enqueue(ctx, reply); err != nil && !errors.Is(err, outbox.ErrDuplicate) && !errors.Is(err, outbox.ErrOwnMail) {
			return flow.MarkInfra(err)
		}
	}
	return nil
}

// Flush sends the replies that are due: approved ones, ones the daily
// limit held, sends to retry. serve runs it every minute.
func (r *Replier) Flush(ctx context.Context) (int, error) {
	return r.Outbox.Deliver(ctx)
}

func (r *Replier) enqueue(ctx context.Context, reply outbox.Reply) error {
	if _, err := r.Outbox.Enqueue(ctx, reply); err != nil && !errors.Is(err, outbox.ErrDuplicate) && !errors.Is(err, outbox.ErrOwnMail) {
		return flow.MarkInfra(err)
	}
	if _, err := r.Outbox.Deliver(ctx); err != nil {
		return flow.MarkInfra(err)
	}
	return nil
}

// bisection is a bisection report as reports renders it, To the lists.
func (r *Replier) bisection(rep flow.Report) *reports.Bisection {
	b := rep.Bisect
	out := &reports.Bisection{Title: rep.Title, Scheduled: rep.Origin.Kind == "mainline", Tree: rep.Tree, Metric: b.Metric,
		Change: b.Change, Good: b.Good, Bad: b.Bad, Culprit: b.Culprit, Confirmed: b.Confirmed, Summary: rep.Summary, URL: rep.URL,
		CulpritTitle: b.CulpritTitle, CulpritAuthor: b.CulpritAuthor, CulpritSignoffs: b.CulpritSignoffs}
	for _, s := range b.Steps {
		out.Steps = append(out.Steps, reports.BisectStep{N: s.N, Phase: s.Phase, Commit: s.Commit, Outcome: s.Outcome, Detail: s.Detail})
	}
	pair := rep.Lab
	if pair == "" {
		pair = r.Lab.DefaultPair()
	}
	name, test := r.Lab.TestWords()
	out.Config, out.Compiler, out.Lab, out.Test = r.Kernels.Config, r.Kernels.Compiler, r.Lab.PairWords(pair), name+": "+test
	for _, l := range r.Lists {
		if l != "" {
			out.To = append(out.To, l)
		}
	}
	r.against(rep.Key, b, out)
	return out
}

// against judges the culprit's confirmation boots against its parent's
// as a series' test is judged, seeded from the report's key, for the
// report's table of one against the other; nothing when either side
// has no boots.
func (r *Replier) against(key string, b *flow.BisectReport, out *reports.Bisection) {
	if len(b.ParentSamples) == 0 || len(b.CulpritSamples) == 0 {
		return
	}
	v := r.judge(key, b.ParentSamples, b.CulpritSamples)
	out.Parent, out.Against = b.Parent, &v
	out.ParentBoots = reports.BisectBoots{Boots: len(b.ParentSamples)}
	out.CulpritBoots = reports.BisectBoots{Boots: len(b.CulpritSamples)}
	if v.Crash != nil {
		out.ParentBoots.Crashed = sameCrash(b.ParentSamples, v.Crash.Title)
		out.CulpritBoots.Crashed = sameCrash(b.CulpritSamples, v.Crash.Title)
	}
}

// deliverBisection starts a new thread on the lists with the culprit, the
// good and bad heads and every step and confirmation.
func (r *Replier) deliverBisection(ctx context.Context, rep flow.Report) error {
	if rep.Bisect != nil && !rep.Bisect.Confirmed {
		// A culprit its confirmation runs did not bear out is no news
		// for a list: the dashboard has the bisection.
		if r.Log != nil {
			r.Log.Info("reports: an unconfirmed bisection is not mailed; the dashboard has it", "key", rep.Key)
		}
		return nil
	}
	now := r.Now()
	th := reports.Thread{MessageID: rep.Key, Version: 1}
	id, err := reports.NewMessageID(now, reports.Rand(th), r.Cfg.From)
	if err != nil {
		return err
	}
	b := r.bisection(rep)
	b.To = r.culpritLists(ctx, rep, b.To)
	m, err := reports.RenderBisection(&r.Cfg, b, id, now)
	if err != nil {
		return err
	}
	// The author's limit counts what the first addressee gets: the
	// culprit's author, or a list.
	th.Author.Email = b.To[0]
	if a, err := mail.ParseAddress(m.To[0]); err == nil {
		th.Author.Email = a.Address
	}
	reply := outbox.FromMail(m, th)
	reply.InReplyTo = "" // a new thread
	return r.enqueue(ctx, reply)
}

// culpritLists are the lists a bisection report goes to: of the
// configured lists (all), those the culprit's files belong to
// (MAINTAINERS L: at the culprit), when it names any; else all of them;
// never one whose domain never resolves (the local inbox's).
func (r *Replier) culpritLists(ctx context.Context, rep flow.Report, all []string) []string {
	var routable []string
	for _, l := range all {
		if a, err := mail.ParseAddress(l); err == nil {
			if _, domain, _ := strings.Cut(a.Address, "@"); !reports.LocalHost(domain) {
				routable = append(routable, l)
			}
		}
	}
	b := rep.Bisect
	if r.ListsOf == nil || b == nil || b.Culprit == "" || len(b.CulpritFiles) == 0 {
		return routable
	}
	theirs, err := r.ListsOf.ListsAt(ctx, b.Culprit, b.CulpritFiles)
	if err != nil {
		if r.Log != nil {
			r.Log.Warn("reports: the culprit's lists not read; the report goes to every list", "culprit", b.Culprit, "err", err)
		}
		return routable
	}
	var keep []string
	for _, l := range routable {
		if slices.ContainsFunc(theirs, func(t string) bool { return strings.EqualFold(t, l) }) {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		return routable
	}
	return keep
}

// deliverComment answers a request made in a GitHub issue there: the
// verdict's (or the bisection's) comment, recorded in the outbox once
// per report, moderated, limited and opted out like mail.
func (r *Replier) deliverComment(ctx context.Context, rep flow.Report) error {
	o := rep.Origin
	owner, repo, ok := strings.Cut(o.Repo, "/")
	if !ok || o.Issue <= 0 {
		return fmt.Errorf("report %s: GitHub origin %q #%d names no issue", rep.Key, o.Repo, o.Issue)
	}
	var body, outcome string
	if rep.Bisect != nil {
		body, outcome = reports.RenderBisectionComment(&r.Cfg, r.bisection(rep), o.User), flow.Regression.String()
	} else {
		var th reports.Thread
		if rep.Series != nil {
			var err error
			if th, err = r.thread(rep.Series); err != nil {
				return err
			}
		}
		v, err := r.verdict(rep, th)
		if err != nil {
			return err
		}
		body, outcome = reports.RenderComment(&r.Cfg, &v, o.User), v.Outcome.String()
	}
	now := r.Now()
	id, err := reports.NewMessageID(now, reports.Rand(reports.Thread{MessageID: rep.Key + "|" + outbox.GitHubChannel(owner, repo, o.Issue)}), r.Cfg.From)
	if err != nil {
		return err
	}
	return r.enqueue(ctx, outbox.FromComment(body, id, owner, repo, o.Issue, rep.Key, o.User, outcome))
}

// errNoJudgement is a measured verdict stored without its judgement
// (by a bot older than the detail column): judging it again could give
// another answer than the one on the dashboard, so nothing is mailed.
var errNoJudgement = errors.New("the verdict has no stored judgement to render")

// verdict is the stored judgement of a report (flow.Report.Detail),
// answering its thread: nothing is judged again.
func (r *Replier) verdict(rep flow.Report, th reports.Thread) (reports.Verdict, error) {
	in := &reports.Input{
		Thread: th,
		Base: reports.Base{Tree: rep.Tree, Branch: rep.BaseBranch, SHA: rep.Base, Reason: rep.BaseReason,
			URL: r.treeURL(rep.Tree)},
		Build:   r.buildInfo(rep.CandSamples),
		Test:    r.testInfo(&rep, th.MessageID, rep.BaseSamples, rep.CandSamples),
		Metrics: metrics(rep.BaseSamples, rep.CandSamples),
	}
	in.BaseCrashes, in.CandCrashes = r.crashes(rep.BaseSamples, rep.BaseSamples), r.crashes(rep.CandSamples, rep.BaseSamples)
	in.BaseHealth, in.CandHealth = health(rep.BaseSamples), health(rep.CandSamples)
	in.Pressure = r.pressure(rep.BaseSamples, rep.CandSamples)
	in.Corruption = r.corruption(rep.BaseSamples, rep.CandSamples)
	if f := rep.FirstBad; f != nil {
		in.FirstBad = &reports.FirstBad{Patch: f.Patch, Of: len(th.Patches), Note: f.Summary, Steps: f.Steps, Boots: f.Boots, Minutes: f.Took.Minutes()}
		if f.Patch > 0 && f.Patch <= len(th.Patches) {
			in.FirstBad.Subject = th.Patches[f.Patch-1].Subject
			in.Patch = f.Patch // the reply answers the first bad patch
		}
	}
	if f := rep.Fix; f != nil {
		in.Fix = &reports.FixFollowUp{Test: f.Test, Verdict: f.Verdict, Now: rep.Verdict, URL: f.URL, OnTop: f.OnTop, Confirmed: f.Confirmed,
			Culprit: f.Culprit, Head: f.Head}
		if f.Reply != "" {
			in.Fix.ReplyURL = r.Cfg.CloseURL(f.Reply)
		}
	}
	var d reports.Detail
	if len(rep.Detail) > 0 {
		if err := json.Unmarshal(rep.Detail, &d); err != nil {
			return reports.Verdict{}, fmt.Errorf("report %s: stored detail: %w", rep.Key, err)
		}
	}
	if d.Judgement != nil {
		return d.Judgement.Verdict(in)
	}
	o := rep.Verdict
	if o == flow.Measured || o == flow.None {
		// Never mailed; a comment says what it is.
		return reports.Verdict{Outcome: flow.Infra, In: in, Reason: strings.TrimSpace(o.String() + " " + firstLine(rep.Summary))}, nil
	}
	switch o {
	case flow.Incomplete:
		return reports.Verdict{Outcome: o, In: in, Reason: firstLine(rep.Summary)}, nil
	case flow.ApplyFailed:
		if in.Apply = d.Apply; in.Apply == nil {
			in.Apply = &reports.ApplyFailure{Output: rep.Log}
		}
		in.Patch = in.Apply.Index
	case flow.BuildFailed:
		if in.BuildFail = d.Build; in.BuildFail == nil {
			in.BuildFail = &reports.BuildFailure{New: []reports.Diagnostic{{Text: firstLine(rep.Log)}}}
		}
		if rep.Series != nil && in.Patch == 0 {
			in.Patch = culprit(rep.Series, in.BuildFail.New)
		}
	case flow.BootFailed:
		in.Boot = &reports.BootFailure{Title: firstLine(rep.Log), Console: rep.Log}
	case flow.Pass:
		// Decided before any boot, so without a judgement.
		if in.Unchanged = d.Unchanged; in.Unchanged == nil {
			return reports.Verdict{}, fmt.Errorf("report %s (%s): %w", rep.Key, rep.Verdict, errNoJudgement)
		}
	default:
		return reports.Verdict{}, fmt.Errorf("report %s (%s): %w", rep.Key, rep.Verdict, errNoJudgement)
	}
	return reports.Verdict{Outcome: o, In: in}, nil
}

// culprit is the patch a build failure answers: the one patch of the
// series that touches every file with a new error; 0 (the series) when
// none or several do.
func culprit(s *flow.Series, errs []reports.Diagnostic) int {
	if len(s.Patches) < 2 {
		return 0
	}
	found := 0
	for _, e := range errs {
		file, _, ok := strings.Cut(e.Text, ":")
		if !ok {
			return 0
		}
		n := 0
		for i, p := range s.Patches {
			if strings.Contains(p.Body, "\n+++ b/"+file+"\n") {
				if n != 0 {
					return 0
				}
				n = i + 1
			}
		}
		if n == 0 || (found != 0 && n != found) {
			return 0
		}
		found = n
	}
	return found
}

func (r *Replier) treeURL(tree string) string {
	return redact.URLs(r.TreeURLs[tree]) // replies are public
}

// buildInfo is how the kernel a reply is about was configured and
// built: the debug build's configuration after a debug crash.
func (r *Replier) buildInfo(cand []flow.Sample) reports.BuildInfo {
	b := reports.BuildInfo{Config: r.Kernels.Config, Compiler: r.Kernels.Compiler}
	if debugCrashed(cand) {
		b.Config = r.Kernels.DebugConfig
	}
	return b
}

// iterations counts a test's iterations in words.
func iterations(n int) string {
	if n == 1 {
		return "1 iteration"
	}
	return fmt.Sprintf("%d iterations", n)
}

// debugCrashed says the candidate crashed under the debug profile: the
// crash is its debug build's, which the reply describes.
func debugCrashed(cand []flow.Sample) bool {
	return slices.ContainsFunc(cand, func(s flow.Sample) bool { return s.Crash != "" && s.Profile == flow.ProfileDebug })
}

// configFile is the reproducer's .config of the kernel a reply is about
// (reproduce.Maker's files): the debug build's after a debug crash; ""
// when no kernel was configured.
func configFile(rep *flow.Report) string {
	switch {
	case debugCrashed(rep.CandSamples):
		return "kernel-debug.config"
	case rep.BaseArtifact != "":
		return "kernel.config"
	}
	return ""
}

// fstestsGroup names the fstests group the samples' boots ran, by its
// tests.
func fstestsGroup(samples []flow.Sample) string {
	var names []string
	for _, s := range samples {
		if !s.IsFstests() || s.Confirming {
			continue
		}
		for _, t := range s.Tests {
			if !slices.Contains(names, t.Name) {
				names = append(names, t.Name)
			}
		}
	}
	if len(names) == 0 {
		return "group"
	}
	return "group of " + strings.Join(names, ", ")
}

// testInfo describes the lab and the test in words, from the
// configuration; rep is nil when deciding (no reply yet).
func (r *Replier) testInfo(rep *flow.Report, msgID string, base, cand []flow.Sample) reports.TestInfo {
	lossyBase, lossyCand := profiled(base), profiled(cand)
	baseRuns, candRuns := len(base)-lossyBase, len(cand)-lossyCand
	var info reports.TestInfo
	info.Name, info.Test = r.Lab.TestWords()
	if candRuns > 0 {
		info.Test += fmt.Sprintf("; %d boots of the patched kernel and %d of the base, alternating", candRuns, baseRuns)
	}
	lossyOnly := func(s flow.Sample) bool { return s.Profile == flow.ProfileLossy }
	if n := count(cand, lossyOnly); n > 0 {
		info.Test += fmt.Sprintf("; %s of the patched kernel and %d of the base with %s, for crashes only", reports.Boots(n), count(base, lossyOnly), r.Lab.LinkWords(flow.ProfileLossy))
	}
	debugOnly := func(s flow.Sample) bool { return s.Profile == flow.ProfileDebug }
	if n := count(cand, debugOnly); n > 0 {
		info.Test += fmt.Sprintf("; %s of the patched kernel's and %d of the base's %s, %s each, for crashes only", reports.Boots(n), count(base, debugOnly), r.Lab.LinkWords(flow.ProfileDebug), iterations(r.Lab.DebugIterations()))
	}
	clientOnly := func(s flow.Sample) bool { return s.Profile == flow.ProfileClientSide }
	if n := count(cand, clientOnly); n > 0 {
		info.Test += fmt.Sprintf("; %s of the patched kernel on the client and %d of the base, each beside the base kernel on the server, which timed and checked the transfer, for crashes, data corruption and transport errors", reports.Boots(n), count(base, clientOnly))
	}
	if n := count(cand, flow.Sample.IsPressure); n > 0 {
		info.Test += fmt.Sprintf("; %s of the patched kernel and %d of the base under Send Queue pressure (%s; soft RDMA under TCG: the queue depths are rxe's and siw's, not a real HCA's, and rdmavt's exact-size queue and latched CQ overflow behind the original Omni-Path hang are not emulated), for crashes and transport errors",
			reports.Boots(n), count(base, flow.Sample.IsPressure), r.pressureWords(cand))
	}
	if n := count(cand, flow.Sample.IsFstests); n > 0 {
		info.Test += fmt.Sprintf("; %s of the patched kernel and %d of the base running fstests' %s (the table below), for functional failures and bad data read back",
			reports.Boots(n), count(base, flow.Sample.IsFstests), fstestsGroup(cand))
	}
	if rep == nil {
		return info
	}
	pair := rep.Lab
	if pair == "" {
		pair = r.Lab.DefaultPair()
	}
	info.Lab = r.Lab.PairWords(pair)
	if r.Limits != nil && rep.Series != nil {
		info.Limits = r.Limits.EmulationLimits(pair, rep.Series.Changes)
	}
	info.RunURL = rep.URL
	if rep.Series != nil && rep.URL != "" {
		// The dashboard serves it (reproduce.Maker): no rdmabot needed.
		info.Reproduce = rep.URL + "/reproducer.tar.gz (./run.sh in it; no rdmabot needed)"
		// The reproducer's files, each alone (reproduce.Maker): what was
		// made, for what got that far.
		file := func(label, name string) {
			info.Files = append(info.Files, [2]string{label, rep.URL + "/files/" + name})
		}
		info.ByHand = r.byHand(rep)
		file("series", "series.mbox")
		if rep.Candidate != "" && rep.Verdict != flow.ApplyFailed {
			// The series applied on the base: a url to fetch, not only
			// patches to apply.
			info.Files = append(info.Files, [2]string{"git bundle", rep.URL + "/files/series.bundle (git fetch series.bundle " + SeriesBranch + ")"})
		}
		if name := configFile(rep); name != "" {
			file(".config", name)
		}
		if rep.CandArtifact != "" {
			file("build log", "candidate-build.log")
		}
		if len(rep.BaseSamples)+len(rep.CandSamples) > 0 {
			file("boots", "boots.json")
		}
		// Every boot's guest consoles, in one text (dashboard).
		if keptConsoles(rep.BaseSamples) || keptConsoles(rep.CandSamples) {
			info.Files = append(info.Files, [2]string{"consoles", rep.URL + "/consoles"})
		}
	}
	return info
}

// byHand is the run as plain commands on the reproducer's files.
func (r *Replier) byHand(rep *flow.Report) reports.ByHand {
	side := "server"
	if rep.Series != nil && r.Sides != nil {
		side = r.Sides.CandidateSide(*rep.Series)
	}
	// What decided showed with the patched kernel on the client: so it
	// boots there by hand too.
	if slices.ContainsFunc(rep.CandSamples, func(s flow.Sample) bool {
		return s.Profile == flow.ProfileClientSide && (s.Crash != "" || s.Corrupt != "")
	}) {
		side = "client"
	}
	return reports.NewByHand(r.treeURL(rep.Tree), rep.BaseBranch, rep.Base, rep.URL+"/files/", side, configFile(rep))
}

func keptConsoles(samples []flow.Sample) bool {
	for _, s := range samples {
		if len(s.Consoles) > 0 {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// guessedBase: the base was the default branch, nothing of the series
// named it; the phrase may go on to name the tree the series' files
// belong to, which the store lacked (offline).
func guessedBase(reason string) bool { return strings.HasPrefix(reason, flow.BaseByDefault) }
