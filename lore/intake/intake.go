// Package intake reads the lists into the bot's database and turns
// their mail into the series the bot tests: the window's complete,
// relevant series, the incomplete ones past their grace period, and the
// "#rdmabot" commands in their threads, each decided here (who may ask,
// DKIM). It also fetches one thread by reference and reads an mbox.
package intake

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/redact"
	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/lore/feed"
)

// Reader reads the lists into the bot's database and assembles series
// from the mail of a recent window (bot.Ingester, bot.SeriesFetcher,
// bot.MboxReader). Mail is stored before the source's checkpoint moves,
// so a crash loses none; the series are recomputed from the stored mail,
// so a restart finds the same ones.
type Reader struct {
	St      Store
	Cfg     lore.Config
	DataDir string
	Log     *slog.Logger
	Now     func() time.Time
	// Window is how far back mail is assembled into series.
	Window time.Duration
	HTTP   *feed.HTTPClient
	// Maintainers looks up who MAINTAINERS lists for a series' files, on
	// the base it would be tested on; nil where the trees are not (an
	// ingest-only machine): then only the author and lore.command_allow
	// may ask, and other commands wait.
	Maintainers MaintainerLookup
	// Auth proves that a command's mail comes from its From: (DKIM);
	// nil when lore.command_dkim is off and From: is taken at its word.
	Auth Authenticator

	mu sync.Mutex
	// cache holds the window's mail parsed, by list and position.
	cache map[string]*flow.Message
}

// MaintainerLookup chooses the base a series would be tested on and
// returns the addresses (M: and R:) MAINTAINERS lists for files at a
// commit. An Infra error means the answer is not known yet (no tree in
// the store).
type MaintainerLookup interface {
	SelectBase(ctx context.Context, s flow.Series) (flow.Base, error)
	MaintainersOf(ctx context.Context, commit string, files []string) ([]string, error)
}

// Authenticator says whether m proves that it comes from its From:
// address: nil when it does, *lore.UnverifiedError when it does not, any
// other error when that cannot be known yet.
type Authenticator interface {
	Authenticate(ctx context.Context, m *flow.Message) error
}

// parsed returns the stored mail at key parsed, parsing it only the first
// time: every poll assembles the whole window again, and a message is
// parsed once, not once per poll (a mail with 40,000 References took
// seconds each time).
func (l *Reader) parsed(key string, raw []byte) (*flow.Message, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m, ok := l.cache[key]; ok {
		return m, nil
	}
	m, err := lore.ParseMessage(raw)
	if err != nil {
		return nil, err
	}
	if l.cache == nil {
		l.cache = map[string]*flow.Message{}
	}
	l.cache[key] = m
	return m, nil
}

// forgetParsed drops the parsed mail that left the window.
func (l *Reader) forgetParsed(keep map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.cache {
		if !keep[k] {
			delete(l.cache, k)
		}
	}
}

// listBackoff is how long a list that failed n times in a row is left
// alone: doubling from half a minute up to an hour.
func listBackoff(n int) time.Duration {
	if n < 1 {
		return 0
	}
	d := 30 * time.Second << min(n-1, 7)
	return min(d, time.Hour)
}

// sources are one public-inbox reader per list: a local inbox when the
// URL is a path, public-inbox-imapd's mailboxes for imap:// and
// imaps:// URLs, else a go-git mirror of the remote inbox.
func (l *Reader) sources() map[string]feed.Source {
	out := map[string]feed.Source{}
	for _, li := range l.Cfg.Lists {
		if feed.IsIMAPURL(li.URL) {
			src, err := feed.ParseIMAPURL(li.URL, li.Name, l.Log)
			if err != nil {
				out[li.Name] = badSource{li.Name, err}
			} else {
				out[li.Name] = src
			}
			continue
		}
		if dir, ok := localPath(li.URL); ok {
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(l.DataDir, dir)
			}
			out[li.Name] = &feed.Git{List: li.Name, Dir: dir, Log: l.Log}
			continue
		}
		out[li.Name] = &feed.Git{List: li.Name, Dir: filepath.Join(l.DataDir, "lore", li.Name), URL: li.URL, HTTP: l.HTTP, Log: l.Log}
	}
	return out
}

// UnreadLocal names the local inboxes (lore.lists whose URL is a path)
// that hold mail the bot has not read, each as "<list> <newest tip>". It
// reads their refs alone, so bot can look every few seconds and poll at
// once when a posting comes, rather than at lore.poll_interval.
func (l *Reader) UnreadLocal(ctx context.Context) ([]string, error) {
	srcs := l.sources()
	var out []string
	for _, li := range l.Cfg.Lists {
		g, ok := srcs[li.Name].(*feed.Git)
		if !ok || g.URL != "" {
			continue
		}
		after, err := l.St.Load(ctx, g.Key())
		if err != nil {
			return nil, err
		}
		tip, unread, err := g.Unread(after)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", li.Name, err)
		}
		if unread {
			out = append(out, li.Name+" "+tip)
		}
	}
	return out, nil
}

// badSource is a list whose URL cannot be read: every read fails with
// why, recorded in its health like any other failing list.
type badSource struct {
	list string
	err  error
}

func (b badSource) Key() string { return "bad " + b.list }
func (b badSource) Read(context.Context, string, func(feed.Item) error) (string, error) {
	return "", fmt.Errorf("lore.lists %s: %w", b.list, b.err)
}

// localPath says whether a list URL is a local inbox: a path (relative
// ones are in data_dir) or file://.
func localPath(u string) (string, bool) {
	if p, ok := strings.CutPrefix(u, "file://"); ok {
		return p, true
	}
	if !strings.Contains(u, "://") {
		return u, true
	}
	return "", false
}

// Store keeps the lists' mail and the intake's state: the bot's
// database. Its checkpoints (Load, Save: lore/feed's Checkpoints) move
// only after the mail before them is stored.
type Store interface {
	Load(ctx context.Context, source string) (string, error)
	Save(ctx context.Context, source, value string) error
	AddMail(ctx context.Context, m Mail) error
	// MailSince is the mail received since t, oldest first.
	MailSince(ctx context.Context, t time.Time) ([]Mail, error)
	// State and SetState keep a small value by key (a command's DKIM
	// answer).
	State(ctx context.Context, key string) (string, error)
	SetState(ctx context.Context, key, value string) error
	// ListHealth is a list's last reads; RecordRead notes one.
	ListHealth(ctx context.Context, list string) (Health, error)
	RecordRead(ctx context.Context, list string, took time.Duration, err error) (Health, error)
}

// Mail is one stored message of a list.
type Mail struct {
	List     string
	Pos      string // its place in the list's source
	Deleted  bool   // the archive removed it
	Received time.Time
	// Ingested is when the bot first read it (the first copy stored
	// keeps its time); Received when unknown.
	Ingested time.Time
	Raw      []byte
}

// Health is how a list's reads went: the last one's outcome and time,
// and how many failed in a row.
type Health struct {
	OK       bool
	Failures int
	At       time.Time
}

// Poll reads every list and returns the complete, relevant series of the
// window. Series already tested are filtered by the bot's unique keys.
func (l *Reader) Poll(ctx context.Context) ([]flow.Series, error) {
	if err := l.fetch(ctx); err != nil {
		return nil, err
	}
	// The window is in the archive's time: mail older than it is not
	// news, however recently the bot first read it (a first start on an
	// old epoch).
	cut := l.Now().Add(-l.Window)
	asm, err := l.assemble(ctx, cut)
	if err != nil {
		return nil, err
	}
	return l.decide(ctx, asm, cut)
}

// fetch stores every due list's new mail; a list that fails is recorded
// and backs off, and only every list failing fails the poll.
func (l *Reader) fetch(ctx context.Context) error {
	// The mail itself is the durable state, so checkpoints are saved as
	// lore/feed saves them, not held for the ingest transaction.
	srcs := l.sources()
	var errs []string
	for _, li := range l.Cfg.Lists {
		due, err := l.due(ctx, li.Name)
		if err != nil {
			return err
		}
		if !due {
			errs = append(errs, li.Name+": backing off")
			continue
		}
		start := time.Now()
		_, err = feed.Pump(ctx, srcs[li.Name], l.St, feed.PumpOptions{Log: l.Log}, func(ctx context.Context, it feed.Item) error {
			return l.St.AddMail(ctx, Mail{List: it.List, Pos: it.Pos, Deleted: it.Deleted, Received: it.Received, Ingested: l.Now(), Raw: it.Raw})
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Logged, recorded and returned: without the URLs' passwords.
		err = redact.Error(err)
		if rerr := l.record(ctx, li.Name, time.Since(start), err); rerr != nil {
			return rerr
		}
		if err != nil {
			errs = append(errs, li.Name+": "+err.Error())
		}
	}
	if len(errs) > 0 && len(errs) == len(l.Cfg.Lists) {
		// Not one list could be read: the poll itself failed, and says why.
		return flow.MarkInfra(fmt.Errorf("lore: every list failed: %s", strings.Join(errs, "; ")))
	}
	return nil
}

// assemble groups the stored mail received since cut into series and
// commands, each mail parsed once across polls.
func (l *Reader) assemble(ctx context.Context, cut time.Time) (*lore.Assembly, error) {
	mail, err := l.St.MailSince(ctx, cut)
	if err != nil {
		return nil, flow.MarkInfra(err)
	}
	a, err := lore.NewAssembler(l.Cfg.Assembler(l.Now))
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(mail))
	for _, m := range mail {
		if m.Deleted {
			if err := a.ForgetRaw(m.Raw); err != nil {
				l.Log.Debug("lore: bad deletion", "pos", m.Pos, "err", err)
			}
			continue
		}
		key := m.List + "\x00" + m.Pos
		seen[key] = true
		msg, err := l.parsed(key, m.Raw)
		if err != nil {
			l.Log.Debug("lore: bad mail", "pos", m.Pos, "err", err)
			continue
		}
		msg.ReadFrom = m.List
		a.AddSeen(msg, m.Received, m.Ingested)
	}
	l.forgetParsed(seen)
	return a.Assemble(), nil
}

// decide is what the bot hears of an assembly: the relevant series no
// maintainer applied, complete or answered as incomplete, and the
// commands whose senders are known to be allowed or refused.
func (l *Reader) decide(ctx context.Context, asm *lore.Assembly, cut time.Time) ([]flow.Series, error) {
	var out []flow.Series
	byID := map[string]*lore.Series{}
	for _, s := range byArrival(asm.Series) {
		byID[s.ID] = s
		if !s.Relevant() {
			continue
		}
		applied, err := l.applied(ctx, s)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// A maintainer's note whose DKIM key cannot be looked up
			// yet: the series waits for a later poll, as a command does.
			l.Log.Warn("lore: applied note not decided yet", "series", s.ID, "err", err)
			continue
		}
		if applied {
			continue
		}
		switch {
		case s.Complete:
			out = append(out, convert(s, l.Cfg))
		case s.Incomplete != "" && s.Date.Before(cut.Add(l.Cfg.GracePeriod.Duration)):
			// Begun at the window's edge: the patches missing may be
			// the mail older than the window, not news.
			l.Log.Debug("lore: incomplete series at the window's edge not answered", "series", s.ID, "date", s.Date)
		case s.Incomplete != "":
			// Past the grace period since the bot first read its newest
			// mail: answered once with what is missing.
			bs := convert(s, l.Cfg)
			bs.Incomplete = s.Incomplete
			out = append(out, bs)
		}
	}
	for _, c := range asm.Commands {
		s := byID[c.SeriesID]
		if s == nil {
			continue // a command in a thread without a series
		}
		bs, ok, err := l.command(ctx, c, s)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// Who may ask is not known yet (no tree to read MAINTAINERS
			// from, no DNS answer for a DKIM key): the command waits for
			// a later poll.
			l.Log.Warn("lore: command not decided yet", "message_id", c.MessageID, "line", c.Line, "err", err)
			continue
		}
		if ok {
			out = append(out, bs)
		}
	}
	return out, nil
}

// byArrival orders series as the archive received them whole (the
// newest patch's arrival), not by their Date headers: the bot queues
// them in this order, and a Date is the sender's word, so a backdated
// posting would jump the queue.
func byArrival(series []*lore.Series) []*lore.Series {
	out := slices.Clone(series)
	slices.SortStableFunc(out, func(x, y *lore.Series) int {
		if c := x.LastArrival.Compare(y.LastArrival); c != 0 {
			return c
		}
		return x.Date.Compare(y.Date)
	})
	return out
}

// applied says whether a maintainer said the series was applied: one of
// lore.maintainers, or one MAINTAINERS lists (M:, R:) for its files on
// the base it would be tested on, in a mail that proves its From: as a
// command's must (authenticate). Anyone else's "Applied, thanks!", or an
// unsigned one in a maintainer's name, changes nothing. When MAINTAINERS
// cannot be read yet, only the configured ones count. An error means a
// note's proof is not known yet.
func (l *Reader) applied(ctx context.Context, s *lore.Series) (bool, error) {
	if len(s.Applied) == 0 {
		return false, nil
	}
	if ok, err := l.appliedBy(ctx, s, l.Cfg.Maintainers); ok || err != nil {
		return ok, err
	}
	if l.Maintainers == nil {
		return false, nil
	}
	addrs, err := l.maintainersOf(ctx, s, convert(s, l.Cfg))
	if err != nil {
		l.Log.Debug("lore: MAINTAINERS not read for an applied note", "series", s.ID, "err", err)
		return false, nil
	}
	return l.appliedBy(ctx, s, addrs)
}

// appliedBy says whether one of maintainers sent one of s's applied
// notes in a mail that proves it; an error when no note is proven and
// one's proof is not known yet.
func (l *Reader) appliedBy(ctx context.Context, s *lore.Series, maintainers []string) (bool, error) {
	var undecided error
	for _, a := range s.AppliedBy(maintainers) {
		why, err := l.authenticate(ctx, a.Mail)
		if err != nil {
			undecided = err
			continue
		}
		if why == "" {
			return true, nil
		}
		l.Log.Debug("lore: an applied note is not proven", "series", s.ID, "message_id", a.MessageID, "why", why)
	}
	return false, undecided
}

// command turns a "#rdmabot" line in a reply into the series it asks
// for, with the request attached and, when it is not done, why.
func (l *Reader) command(ctx context.Context, c lore.Command, s *lore.Series) (flow.Series, bool, error) {
	bs := convert(s, l.Cfg)
	cmd := &flow.Command{Verb: c.Verb, Tree: c.Tree, Branch: c.Branch, Profiles: c.Profiles, Note: c.Note, Line: c.Line,
		MsgID: c.MessageID, References: c.References, From: strings.ToLower(c.From.Email), Name: c.From.Name}
	if cmd.MsgID == "" || cmd.From == "" {
		return bs, false, nil
	}
	bs.Command = cmd
	refuse := func(why string) (flow.Series, bool, error) {
		cmd.Refused = why
		return bs, true, nil
	}
	if c.Err != "" {
		return refuse("I did not understand that: " + c.Err + ". Commands, one per line: " +
			"\"#rdmabot test\", \"#rdmabot test <tree> [<branch>]\", \"#rdmabot test fstests\", \"#rdmabot retest\", " +
			"\"#rdmabot invalid [<why>]\", \"#rdmabot dup <link or Message-ID>\".")
	}
	if !s.Complete && (cmd.Verb == flow.CommandTest || cmd.Verb == flow.CommandRetest) {
		return refuse(fmt.Sprintf("The series is incomplete (patch %s of %d missing), so there is nothing to test yet.", joinInts(s.Missing), s.Total))
	}
	author, allowed := cmd.From == strings.ToLower(s.Author.Email), slices.Contains(l.Cfg.CommandAllow, cmd.From)
	if author && !allowed && (cmd.Verb == flow.CommandInvalid || cmd.Verb == flow.CommandDup) {
		// A report is not disputed by whom it is about, even one
		// MAINTAINERS lists.
		return refuse("The author of a series may not dispute my report on it; the maintainers and reviewers MAINTAINERS lists " +
			"for its files, and the addresses the operator allows, may.")
	}
	if !author && !allowed {
		why, err := l.maintainerOnly(ctx, bs, s, cmd.From)
		if err != nil {
			return bs, false, err
		}
		if why != "" {
			return refuse(why)
		}
	}
	why, err := l.authenticate(ctx, c.Mail)
	if err != nil {
		return bs, false, err
	}
	if why != "" {
		return refuse(why)
	}
	return bs, true, nil
}

// maintainerOnly says why from may not ask for a test of s unless
// MAINTAINERS lists it for s's files ("": it does). An error means that
// is not known yet.
func (l *Reader) maintainerOnly(ctx context.Context, bs flow.Series, s *lore.Series, from string) (string, error) {
	if l.Maintainers == nil {
		return "", fmt.Errorf("%s is neither the author nor in lore.command_allow, and MAINTAINERS cannot be read on this machine", from)
	}
	addrs, err := l.maintainersOf(ctx, s, bs)
	if err != nil {
		if flow.IsInfra(err) {
			return "", err
		}
		// The series cannot be read for a base: not the sender's fault,
		// and nothing MAINTAINERS can say.
		addrs = nil
	}
	if slices.Contains(addrs, from) {
		return "", nil
	}
	return fmt.Sprintf("Only the series' author, the maintainers and reviewers MAINTAINERS lists for its files, "+
		"and the addresses the operator allows may ask me to test it; %s is none of them.", from), nil
}

// maintainersOf is who MAINTAINERS lists for s's files on the base chosen
// for the series the first time one of its commands or applied notes
// was decided: the choice is kept in the store, as a mail's DKIM answer
// is, so that every poll decides them on the same base, and the base is
// not looked for again on every poll. A series still missing patches
// gets no kept base: the ones to come may move it.
func (l *Reader) maintainersOf(ctx context.Context, s *lore.Series, bs flow.Series) ([]string, error) {
	var files []string
	for _, p := range s.Patches {
		files = append(files, p.Files...)
	}
	key := "authbase:" + s.ID
	commit, err := l.St.State(ctx, key)
	if err != nil {
		return nil, flow.MarkInfra(err)
	}
	if commit == "" {
		base, err := l.Maintainers.SelectBase(ctx, bs)
		if err != nil {
			return nil, err
		}
		commit = base.Commit
		if s.Complete {
			if err := l.St.SetState(ctx, key, commit); err != nil {
				return nil, flow.MarkInfra(err)
			}
		}
	}
	return l.Maintainers.MaintainersOf(ctx, commit, files)
}

// authenticate says why m (a command, an applied note) does not prove
// that it comes from its From: ("": it does, or lore.command_dkim is off). The first answer is
// kept in the store: DKIM signatures expire (x=, a week for Gmail's) and
// keys are rotated, and every poll decides the window's commands again,
// so a command obeyed on arrival would be refused a week later. A key
// that cannot be looked up yet is an Infra error and decides nothing.
func (l *Reader) authenticate(ctx context.Context, m *flow.Message) (string, error) {
	if l.Auth == nil {
		return "", nil
	}
	key := DKIMKey(m)
	kept, err := l.St.State(ctx, key)
	if err == nil && kept == "" {
		// What an older bot kept per Message-ID, for the mail it read
		// then: still that mail's answer, so a command it obeyed is not
		// refused once its signature expires. Mail read since has its
		// own key: a forgery under a signed mail's Message-ID is
		// decided on its own bytes.
		kept, err = l.St.State(ctx, "dkim:"+m.MessageID)
	}
	if err != nil {
		return "", flow.MarkInfra(err)
	}
	if v, ok := strings.CutPrefix(kept, "refused: "); ok {
		return v, nil
	}
	if kept == "verified" {
		return "", nil
	}
	verdict, why := "verified", ""
	var u *lore.UnverifiedError
	switch err := l.Auth.Authenticate(ctx, m); {
	case errors.As(err, &u):
		why = fmt.Sprintf("I could not verify that this mail comes from %s: no DKIM signature of %s verifies (%s). "+
			"I act on commands only from mail whose sender's domain signed it.", u.Addr, u.Domain, u.Why)
		verdict = "refused: " + why
	case err != nil:
		return "", flow.MarkInfra(err)
	}
	if err := l.St.SetState(ctx, key, verdict); err != nil {
		return "", flow.MarkInfra(err)
	}
	return why, nil
}

// DKIMKey is where the store keeps the DKIM verdict on m: per mail (its
// Message-ID and a hash of its bytes), not per Message-ID, which anyone
// may give a mail.
func DKIMKey(m *flow.Message) string {
	sum := sha256.Sum256(m.Raw)
	return fmt.Sprintf("dkim:%s:%x", m.MessageID, sum[:12])
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// due says whether a list is read at this poll: always, unless its last
// reads failed and its backoff has not ended.
func (l *Reader) due(ctx context.Context, list string) (bool, error) {
	h, err := l.St.ListHealth(ctx, list)
	if err != nil {
		return false, flow.MarkInfra(err)
	}
	return h.OK || h.Failures == 0 || !l.Now().Before(h.At.Add(listBackoff(h.Failures))), nil
}

// record notes the outcome of a list's read.
func (l *Reader) record(ctx context.Context, list string, took time.Duration, err error) error {
	h, serr := l.St.RecordRead(ctx, list, took, err)
	if serr != nil {
		return flow.MarkInfra(serr)
	}
	if err != nil {
		l.Log.Warn("lore: list failed; the others go on", "list", list, "failures", h.Failures,
			"next", h.At.Add(listBackoff(h.Failures)), "err", err)
	}
	return nil
}

// convert carries a lore series as the bot does.
func convert(s *lore.Series, cfg lore.Config) flow.Series {
	out := flow.Series{MsgID: s.ID, Version: s.Version, Subject: s.Subject, Author: s.Author.String(), Tree: ""}
	if s.RootMessageID != "" {
		out.List = listOf(s, cfg)
		out.Link = archiveLink(s, cfg)
	}
	out.Cover = s.Cover
	for _, p := range s.Patches {
		out.Patches = append(out.Patches, p.Message)
	}
	readDiffs(&out)
	readHints(&out)
	out.Closes, out.Fixes = closesAndFixes(out.Patches)
	out.Reviews = s.Reviews
	// The Message-ID replies answer, as the replies' thread finds it.
	if root := out.RootMail(); root != nil {
		out.Root = root.MessageID
	}
	return out
}

// listOf is the address of the list a series is filed under: the first
// configured list it was posted to, unless its mail was read elsewhere
// only (a local inbox, an IMAP folder: it was posted there, whatever its
// To says), then the first list it was read from; "" when neither is a
// configured list.
func listOf(s *lore.Series, cfg lore.Config) string {
	name := ""
	if len(s.Lists) > 0 {
		name = s.Lists[0]
	}
	if len(s.ReadFrom) > 0 && !slices.Contains(s.ReadFrom, name) {
		name = s.ReadFrom[0]
	}
	for _, li := range cfg.Lists {
		if li.Name == name {
			return li.Address
		}
	}
	return ""
}

// archiveLink is the page of the series' root in a web archive that
// holds it: the first list it was posted to, when its mail was read
// there or where it was read is not known (an mbox). Only a web archive
// has a page per message, and a series read from a local inbox or an
// IMAP folder was never in the archive its To names: "" then.
func archiveLink(s *lore.Series, cfg lore.Config) string {
	for _, li := range cfg.Lists {
		if len(s.Lists) == 0 || li.Name != s.Lists[0] {
			continue
		}
		if !strings.HasPrefix(li.URL, "https://") && !strings.HasPrefix(li.URL, "http://") {
			return ""
		}
		if len(s.ReadFrom) > 0 && !slices.Contains(s.ReadFrom, li.Name) {
			return ""
		}
		return strings.TrimSuffix(li.URL, "/") + "/" + url.PathEscape(s.RootMessageID) + "/"
	}
	return ""
}

// readDiffs reads what a series' patches change, once, for the stages
// after intake: the lines (the lab's side) and the files (the reply's
// MAINTAINERS).
func readDiffs(s *flow.Series) {
	s.Changes, s.Files = nil, nil
	seen := map[string]bool{}
	for _, p := range s.Patches {
		s.Changes = append(s.Changes, lore.DiffChanges(p.Body)...)
		for _, f := range lore.DiffFiles(p.Body) {
			if !seen[f] {
				seen[f] = true
				s.Files = append(s.Files, f)
			}
		}
	}
}

// readHints reads what a series' mails say of its base, once, for the
// builder: the base-commit line (b4's rule) and its subjects' tags.
func readHints(s *flow.Series) {
	s.BaseHint = lore.BaseCommit(s.Cover, s.Patches)
	s.Tags = nil
	for _, m := range s.Mails() {
		for _, tag := range lore.ParseSubject(m.Subject).Tags {
			if !slices.Contains(s.Tags, tag) {
				s.Tags = append(s.Tags, tag)
			}
		}
	}
}

// messageRef reads a reference to a message: a lore URL
// (https://lore.kernel.org/<list>/<message-id>/, whose inbox it gives)
// or a Message-ID, with or without <>.
func messageRef(ref string) (inbox *lore.ListConfig, msgID string, err error) {
	u, err := url.Parse(ref)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, strings.Trim(ref, "<> "), nil
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) < 2 {
		return nil, "", fmt.Errorf("%s is not a lore message URL (https://lore.kernel.org/<list>/<message-id>/)", ref)
	}
	if msgID, err = url.PathUnescape(parts[len(parts)-1]); err != nil {
		return nil, "", fmt.Errorf("%s: %w", ref, err)
	}
	base := u.Scheme + "://" + u.Host + "/" + strings.Join(parts[:len(parts)-1], "/")
	return &lore.ListConfig{Name: parts[len(parts)-2], URL: base}, msgID, nil
}

// closesAndFixes read the Closes: and Fixes: trailers of a series'
// patches: the Message-IDs Closes: names (a lore URL or a Message-ID)
// and the commits Fixes: names (the abbreviated hash before the title).
// What names no message or commit is left out.
func closesAndFixes(patches []*flow.Message) (closes, fixes []string) {
	for _, p := range patches {
		for _, t := range lore.CommitTrailers(p.Body) {
			switch v := strings.TrimSpace(t.Value); strings.ToLower(t.Name) {
			case "closes":
				if _, id, err := messageRef(v); err == nil && strings.Contains(id, "@") && !slices.Contains(closes, id) {
					closes = append(closes, id)
				}
			case "fixes":
				c, _, _ := strings.Cut(v, " ")
				if len(c) >= 8 && strings.Trim(strings.ToLower(c), "0123456789abcdef") == "" && !slices.Contains(fixes, c) {
					fixes = append(fixes, strings.ToLower(c))
				}
			}
		}
	}
	return closes, fixes
}

// Fetch fetches one thread over HTTP from the inbox the reference names
// (a lore URL) or from each configured list (a bare Message-ID).
func (l *Reader) Fetch(ctx context.Context, ref string) (flow.Series, error) {
	inboxes := l.Cfg.Lists
	inbox, msgID, err := messageRef(ref)
	if err != nil {
		return flow.Series{}, err
	}
	if inbox != nil {
		inboxes = []lore.ListConfig{*inbox}
	}
	var lastErr error
	for _, li := range inboxes {
		if _, local := localPath(li.URL); local {
			continue
		}
		items, err := l.HTTP.FetchThread(ctx, li.URL, li.Name, msgID)
		if err != nil {
			lastErr = err
			continue
		}
		s, err := l.assembleOne(items, msgID)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	// Offline, or not on the server: the mail already read from the lists.
	mail, err := l.St.MailSince(ctx, l.Now().Add(-l.Window))
	if err != nil {
		return flow.Series{}, flow.MarkInfra(err)
	}
	items := make([]feed.Item, 0, len(mail))
	for _, m := range mail {
		items = append(items, feed.Item{List: m.List, Raw: m.Raw, Received: m.Received, Deleted: m.Deleted})
	}
	if s, err := l.assembleOne(items, msgID); err == nil {
		return s, nil
	} else if lastErr == nil {
		lastErr = err
	}
	return flow.Series{}, fmt.Errorf("thread %s: %w", msgID, lastErr)
}

// ReadMbox assembles the series in an mbox file's bytes.
func (l *Reader) ReadMbox(ctx context.Context, mbox []byte) (flow.Series, error) {
	f, err := os.CreateTemp("", "rdmabot-mbox-")
	if err != nil {
		return flow.Series{}, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(mbox); err != nil {
		f.Close()
		return flow.Series{}, err
	}
	f.Close()
	var items []feed.Item
	_, err = (&feed.Mbox{List: "mbox", Path: f.Name(), Log: l.Log}).Read(ctx, "", func(it feed.Item) error {
		items = append(items, it)
		return nil
	})
	if err != nil {
		return flow.Series{}, err
	}
	return l.assembleOne(items, "")
}

// assembleOne returns the series holding msgID, or the only complete one.
func (l *Reader) assembleOne(items []feed.Item, msgID string) (flow.Series, error) {
	a, err := lore.NewAssembler(l.Cfg.Assembler(l.Now))
	if err != nil {
		return flow.Series{}, err
	}
	for _, it := range items {
		if !it.Deleted {
			a.AddRaw(it.Raw, it.Received)
		}
	}
	var found []*lore.Series
	for _, s := range a.Assemble().Series {
		if msgID == "" && s.Complete {
			found = append(found, s)
			continue
		}
		if s.RootMessageID == msgID {
			found = append(found, s)
			continue
		}
		for _, p := range s.Patches {
			if p.Message.MessageID == msgID {
				found = append(found, s)
				break
			}
		}
	}
	switch {
	case len(found) == 0:
		return flow.Series{}, fmt.Errorf("no patch series found")
	case len(found) > 1 && msgID == "":
		return flow.Series{}, fmt.Errorf("%d series found; give one", len(found))
	case !found[0].Complete:
		return flow.Series{}, fmt.Errorf("series %q is incomplete: missing %v", found[0].Subject, found[0].Missing)
	}
	return convert(found[0], l.Cfg), nil
}

// schemeLike is how a URL starts ("htps:", "https:"): a local path never
// does in practice, a mistyped URL always.
var schemeLike = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// CheckListURL accepts what the reader reads: imap:// and imaps://
// (public-inbox-imapd), http:// and https:// (a git mirror), file:// and
// paths (a local inbox).
func CheckListURL(u string) error {
	if u == "" {
		return errors.New("is empty")
	}
	if feed.IsIMAPURL(u) {
		_, err := feed.ParseIMAPURL(u, "", nil)
		return err
	}
	if p, ok := localPath(u); ok {
		if p == "" {
			return errors.New("names no directory")
		}
		if !strings.HasPrefix(u, "file://") && schemeLike.MatchString(p) {
			return errors.New("want https://host/inbox, imap(s)://host/newsgroup, file:///dir or a directory")
		}
		return nil
	}
	pu, err := url.Parse(u)
	if err != nil {
		return err
	}
	if pu.Scheme != "http" && pu.Scheme != "https" {
		return fmt.Errorf("scheme %q: want https://host/inbox, imap(s)://host/newsgroup, file:///dir or a directory", pu.Scheme)
	}
	if pu.Host == "" {
		return errors.New("has no host")
	}
	return nil
}

// Reread fills what intake reads of a series' mails where a series row
// an older bot stored lacks it: each message parsed from its raw bytes,
// the lines and files its diffs change, the Message-ID its replies
// answer, its base-commit hint and subject tags. It says whether it
// changed anything; a mail that no longer parses is an error, and s is
// then left as it was.
func Reread(s *flow.Series) (bool, error) {
	if !slices.ContainsFunc(s.Mails(), func(m *flow.Message) bool { return m != nil && !m.Parsed() }) {
		before := slices.Clone(s.Tags)
		hint, files := s.BaseHint, len(s.Files)
		readHints(s)
		if files == 0 {
			readDiffs(s)
			s.Closes, s.Fixes = closesAndFixes(s.Patches)
		}
		return hint != s.BaseHint || !slices.Equal(before, s.Tags) || files != len(s.Files), nil
	}
	parse := func(m *flow.Message) (*flow.Message, error) {
		if m == nil || m.Parsed() {
			return m, nil
		}
		return lore.ParseMessage(m.Raw)
	}
	out := *s
	var err error
	if out.Cover, err = parse(s.Cover); err != nil {
		return false, fmt.Errorf("cover letter: %w", err)
	}
	out.Patches = make([]*flow.Message, len(s.Patches))
	for i, p := range s.Patches {
		if out.Patches[i], err = parse(p); err != nil {
			return false, fmt.Errorf("patch %d: %w", i+1, err)
		}
	}
	readDiffs(&out)
	readHints(&out)
	out.Closes, out.Fixes = closesAndFixes(out.Patches)
	if root := out.RootMail(); out.Root == "" && root != nil {
		out.Root = root.MessageID
	}
	*s = out
	return true, nil
}
