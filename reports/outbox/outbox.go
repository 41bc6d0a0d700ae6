package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/reports"
)

// Policy is what may leave the machine, and when.
type Policy struct {
	// Send enables mail; off, mail waits in the outbox. Other channels
	// have their own switch: a sender exists only when they are
	// configured (bot.github, reports.patchwork).
	Send bool
	// Moderate records new replies as Held until approved.
	Moderate bool
	// DailyLimit caps replies sent in any 24 hours (0: none at all).
	DailyLimit int
	// AuthorDailyLimit caps the replies sent to one author in any 24
	// hours (0: no cap of its own): a flood of series from one address, or
	// forged From: lines, cannot make the bot mail one person all day.
	AuthorDailyLimit int
	// ListDailyLimit caps the replies sent to one mailing list in any 24
	// hours (0: no cap of its own), so that one busy list cannot take
	// the whole daily limit, and a flood aimed at a list is bounded.
	ListDailyLimit int
	// OptOut holds addresses and @domains never answered.
	OptOut []string
	// Self is the bot's own address: its mail is never answered.
	Self string
	// StaleAfter is how long a send may be in flight before it is taken
	// for one a crash interrupted (another process may still be on it
	// until then); zero means DefaultStaleAfter.
	StaleAfter time.Duration
}

// DefaultStaleAfter outlasts any SMTP or GitHub exchange with its
// timeouts.
const DefaultStaleAfter = 15 * time.Minute

// Reply is what the bot asks to deliver.
type Reply struct {
	MessageID string
	// Key is the verdict's identity: see Key.
	Key     string
	Channel string
	Outcome string
	// Recipient is the person answered (the series author).
	Recipient string
	// InReplyTo is the Message-ID answered, to spot our own mail.
	InReplyTo string
	Envelope  []string
	// Lists are the mailing lists among the recipients.
	Lists []string
	Raw   []byte
	// Undeliverable says why the reply cannot go out (an author address
	// that is not one plain mailbox): it is kept in the ledger as Failed,
	// for an operator to see, and never sent.
	Undeliverable string
}

// Key is the identity of one verdict: a channel ("email",
// "github:owner/repo#12") and a series version (the cover letter's or
// single patch's Message-ID and the version number).
func Key(channel, threadID string, version int) string {
	return fmt.Sprintf("%s|%s|v%d", channel, threadID, version)
}

// ParseKey reads a Key back, with whatever an answer added after it
// ("|<command's Message-ID>"): ok is false for what Key did not make.
func ParseKey(key string) (channel, threadID string, version int, ok bool) {
	parts := strings.Split(key, "|")
	if len(parts) < 3 || !strings.HasPrefix(parts[2], "v") {
		return "", "", 0, false
	}
	v, err := strconv.Atoi(parts[2][1:])
	if err != nil || v < 1 {
		return "", "", 0, false
	}
	return parts[0], parts[1], v, true
}

// FromMail wraps a rendered email reply. A reply whose addresses are not
// each one plain mailbox comes back Undeliverable, without an envelope.
func FromMail(m *reports.Mail, t reports.Thread) Reply {
	r := Reply{
		MessageID: m.MessageID, Key: Key("email", t.MessageID, t.Version), Channel: "email",
		Outcome: m.Outcome.String(), Recipient: t.Author.Email, InReplyTo: t.MessageID,
		Lists: t.Lists, Raw: m.Bytes(),
	}
	env, err := m.Recipients()
	if err != nil {
		r.Undeliverable = err.Error()
	} else {
		r.Envelope = env
	}
	return r
}

// Sender puts one reply on the wire. Errors that prove the peer did not
// take the reply wrap ErrNotDelivered; a *Rejected is final; any other
// error leaves the reply's fate unknown.
type Sender interface {
	Send(ctx context.Context, e *Entry) error
}

// ErrNotDelivered marks a send that certainly did not reach the peer.
var ErrNotDelivered = errors.New("not delivered")

// Rejected is a permanent refusal by the peer.
type Rejected struct{ Err error }

func (r *Rejected) Error() string { return "rejected: " + r.Err.Error() }
func (r *Rejected) Unwrap() error { return r.Err }

// ErrOwnMail refuses to answer the bot's own mail.
var ErrOwnMail = errors.New("refusing to answer our own mail")

// Outbox records and delivers replies.
type Outbox struct {
	ledger  *Ledger
	maildir string
	policy  Policy
	senders map[string]Sender // by channel kind: "email", "github"
	now     func() time.Time
	log     *slog.Logger
	selfDom string
}

// New makes an outbox over a ledger and a Maildir directory. senders
// maps channel kinds to senders; a channel without one waits.
func New(l *Ledger, maildir string, p Policy, senders map[string]Sender, now func() time.Time, log *slog.Logger) (*Outbox, error) {
	for _, d := range []string{"tmp", "new", "cur"} {
		if err := os.MkdirAll(filepath.Join(maildir, d), 0o750); err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
	}
	if p.StaleAfter == 0 {
		p.StaleAfter = DefaultStaleAfter
	}
	o := &Outbox{ledger: l, maildir: maildir, policy: p, senders: senders, now: now, log: log}
	if a, err := mail.ParseAddress(p.Self); err == nil {
		o.policy.Self = strings.ToLower(a.Address)
		o.selfDom = o.policy.Self[strings.LastIndexByte(o.policy.Self, '@')+1:]
	} else if p.Self != "" {
		return nil, fmt.Errorf("outbox: bot address %q: %w", p.Self, err)
	}
	return o, nil
}

// Ledger is the outbox's table, for listing.
func (o *Outbox) Ledger() *Ledger { return o.ledger }

// Enqueue records a reply before anything is sent. It refuses our own
// mail, records undeliverable replies (see Reply.Undeliverable; for
// mail, any envelope address that is not one plain mailbox) as Failed
// and opted-out ones (the person answered or any envelope recipient) as
// Suppressed, and returns ErrDuplicate for a second verdict on the same
// series version.
func (o *Outbox) Enqueue(ctx context.Context, r Reply) (*Entry, error) {
	if o.isOwn(r) {
		return nil, fmt.Errorf("%s: %w", r.InReplyTo, ErrOwnMail)
	}
	e := &Entry{
		MessageID: r.MessageID, Key: r.Key, Channel: r.Channel, Outcome: r.Outcome,
		Recipient: r.Recipient, Envelope: r.Envelope, Lists: r.Lists, State: Ready, Created: o.now(), Raw: r.Raw,
	}
	undeliverable := r.Undeliverable
	if channelKind(r.Channel) == "email" && undeliverable == "" {
		for _, a := range r.Envelope {
			if m, err := reports.Mailbox(a); err != nil || m != a {
				undeliverable = fmt.Sprintf("envelope address %q: %v", a, reports.ErrBadAddress)
				break
			}
		}
	}
	optedOut := o.optedOut(r.Recipient)
	reason := "recipient opted out"
	for _, a := range r.Envelope {
		if !optedOut && o.optedOut(a) {
			optedOut, reason = true, "recipient "+a+" opted out"
		}
	}
	switch {
	case undeliverable != "":
		e.State, e.Reason = Failed, "undeliverable: "+undeliverable
		o.log.Error("reply undeliverable", "message_id", e.MessageID, "reason", e.Reason)
	case optedOut:
		e.State, e.Reason = Suppressed, reason
	case o.policy.Moderate && !unmoderated(r.Channel):
		e.State, e.Reason = Held, "waiting for approval"
	}
	if err := o.ledger.insert(ctx, e); err != nil {
		return nil, err
	}
	if channelKind(r.Channel) == "email" {
		// The ledger holds the message; the Maildir is the operator's
		// view of it, so a failed write is logged, not fatal.
		if err := o.writeMaildir(e); err != nil {
			o.log.Warn("outbox maildir", "message_id", e.MessageID, "err", err)
		}
	}
	o.log.Info("reply recorded", "message_id", e.MessageID, "key", e.Key, "state", e.State)
	return e, nil
}

func (o *Outbox) isOwn(r Reply) bool {
	if o.policy.Self == "" {
		return false
	}
	if strings.EqualFold(r.Recipient, o.policy.Self) {
		return true
	}
	return strings.HasSuffix(strings.ToLower(r.InReplyTo), "-rdmabot@"+o.selfDom)
}

func (o *Outbox) optedOut(addr string) bool { return OptedOut(o.policy.OptOut, addr) }

// OptedOut says whether addr (a plain address, or a GitHub recipient)
// is in optOut (reports.opt_out): the address itself, or an "@domain"
// it ends in.
func OptedOut(optOut []string, addr string) bool {
	addr = strings.ToLower(addr)
	for _, x := range optOut {
		x = strings.ToLower(x)
		if addr == x || (strings.HasPrefix(x, "@") && strings.HasSuffix(addr, x)) {
			return true
		}
	}
	return false
}

// Approve releases held replies for sending.
func (o *Outbox) Approve(ctx context.Context, id string) error {
	ok, err := o.ledger.transition(ctx, id, Held, Ready, "approved", 0, time.Time{})
	if err != nil {
		return err
	}
	if !ok {
		e, err := o.ledger.Get(ctx, id)
		if err != nil {
			return err
		}
		return fmt.Errorf("%s is %s, not held", id, e.State)
	}
	return nil
}

// Deliver sends what may be sent now: first it settles replies a crash
// left in Sending for longer than StaleAfter (resent once with the same
// Message-ID, or Failed after that), then ready replies, oldest first,
// within the daily limit. It returns how many were sent.
//
// GitHub comments are moderated and counted like mail, but go out with
// mail off (configuring bot.github is their switch). Patchwork checks are
// status, not replies to a person: they are neither moderated nor
// counted against the daily limit, and they go out even with mail off (configuring [reports.patchwork] url is their switch).
// A check that fails is logged and kept in the ledger (Failed, or Ready
// for the next Deliver), never returned as an error.
func (o *Outbox) Deliver(ctx context.Context) (int, error) {
	inflight, err := o.ledger.List(ctx, Sending)
	if err != nil {
		return 0, err
	}
	sent := 0
	var errs []error
	try := func(e *Entry, from State) {
		ok, err := o.send(ctx, e, from)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			sent++
		}
	}
	for _, e := range inflight {
		if !o.enabled(e.Channel) {
			continue
		}
		if o.now().Sub(e.Attempted) < o.policy.StaleAfter {
			continue // maybe still on the wire in another process
		}
		if e.Attempts >= 2 {
			reason := "fate unknown after a resend: check the archive, then approve again or drop"
			if _, err := o.ledger.transition(ctx, e.MessageID, Sending, Failed, reason, 0, time.Time{}); err != nil {
				errs = append(errs, err)
			}
			o.log.Error("reply failed", "message_id", e.MessageID, "reason", reason)
			continue
		}
		try(e, Sending)
	}
	ready, err := o.ledger.List(ctx, Ready)
	if err != nil {
		return sent, errors.Join(append(errs, err)...)
	}
	// A final check listed before its pending one (same second: by key)
	// waits for it and goes after it in this pass.
	var waiting []*Entry
	for _, e := range ready {
		if o.senders[channelKind(e.Channel)] == nil {
			continue
		}
		if unmoderated(e.Channel) {
			if wait, err := o.pendingFirst(ctx, e); err != nil || wait {
				if err != nil {
					errs = append(errs, err)
				} else {
					waiting = append(waiting, e)
				}
				continue
			}
			try(e, Ready)
			continue
		}
		if !o.enabled(e.Channel) {
			continue
		}
		n, err := o.ledger.SentSince(ctx, o.now().Add(-24*time.Hour))
		if err != nil {
			return sent, errors.Join(append(errs, err)...)
		}
		if n >= o.policy.DailyLimit {
			o.log.Warn("daily limit reached; replies wait", "limit", o.policy.DailyLimit, "waiting", len(ready))
			break
		}
		if o.policy.AuthorDailyLimit > 0 {
			m, err := o.ledger.SentToSince(ctx, e.Recipient, o.now().Add(-24*time.Hour))
			if err != nil {
				return sent, errors.Join(append(errs, err)...)
			}
			if m >= o.policy.AuthorDailyLimit {
				o.log.Warn("author's daily limit reached; the reply waits", "recipient", e.Recipient, "limit", o.policy.AuthorDailyLimit, "message_id", e.MessageID)
				continue
			}
		}
		if full, err := o.listFull(ctx, e); err != nil {
			return sent, errors.Join(append(errs, err)...)
		} else if full != "" {
			o.log.Warn("list's daily limit reached; the reply waits", "list", full, "limit", o.policy.ListDailyLimit, "message_id", e.MessageID)
			continue
		}
		try(e, Ready)
	}
	for _, e := range waiting {
		if wait, err := o.pendingFirst(ctx, e); err != nil || wait {
			continue // its pending check failed again: the next Deliver
		}
		try(e, Ready)
	}
	return sent, errors.Join(errs...)
}

// listFull names a list of the reply that has had its day's replies.
func (o *Outbox) listFull(ctx context.Context, e *Entry) (string, error) {
	if o.policy.ListDailyLimit <= 0 {
		return "", nil
	}
	for _, l := range e.Lists {
		n, err := o.ledger.SentToListSince(ctx, l, o.now().Add(-24*time.Hour))
		if err != nil {
			return "", err
		}
		if n >= o.policy.ListDailyLimit {
			return l, nil
		}
	}
	return "", nil
}

// pendingFirst says a final patchwork check waits: its pending check is
// still to be posted (Ready, or Sending in a retry), and patchwork shows
// the last check posted, so the final one must come after it. A pending
// check that failed for good, or was never recorded, holds nothing up.
func (o *Outbox) pendingFirst(ctx context.Context, e *Entry) (bool, error) {
	id := pendingOf(e)
	if id == "" {
		return false, nil
	}
	p, err := o.ledger.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if p.State == Ready || p.State == Sending {
		o.log.Debug("final check waits for its pending one", "key", e.Key, "pending", p.State)
		return true, nil
	}
	return false, nil
}

// send marks the reply Sending (one more attempt) before the wire, then
// records what the wire said.
func (o *Outbox) send(ctx context.Context, e *Entry, from State) (bool, error) {
	s := o.senders[channelKind(e.Channel)]
	if s == nil {
		return false, nil
	}
	ok, err := o.ledger.transition(ctx, e.MessageID, from, Sending, "", 1, o.now())
	if err != nil || !ok {
		return false, err // another process took it
	}
	e.Attempts++
	serr := s.Send(ctx, e)
	var rej *Rejected
	switch {
	case serr == nil:
		_, err = o.ledger.transition(ctx, e.MessageID, Sending, Sent, "", 0, o.now())
		if err == nil && channelKind(e.Channel) == "email" {
			o.markSeen(e)
		}
		o.log.Info("reply sent", "message_id", e.MessageID, "channel", e.Channel, "attempt", e.Attempts)
		return err == nil, err
	case errors.As(serr, &rej):
		_, err = o.ledger.transition(ctx, e.MessageID, Sending, Failed, serr.Error(), 0, time.Time{})
	case errors.Is(serr, ErrNotDelivered):
		_, err = o.ledger.transition(ctx, e.MessageID, Sending, Ready, serr.Error(), -1, time.Time{})
	case unmoderated(e.Channel):
		// Patchwork's sender looks before it posts: a resend is safe now.
		_, err = o.ledger.transition(ctx, e.MessageID, Sending, Ready, serr.Error(), -1, time.Time{})
	default:
		// Unknown: stays Sending, so the next Deliver resends it once.
		o.log.Warn("reply may or may not have been sent", "message_id", e.MessageID, "err", serr)
	}
	if unmoderated(e.Channel) {
		// Recorded in the ledger for the operator; not the reply's fault.
		o.log.Error("patchwork check not posted", "key", e.Key, "err", serr)
		return false, err
	}
	return false, errors.Join(fmt.Errorf("send %s: %w", e.MessageID, serr), err)
}

// enabled says whether a channel's replies may go out now: mail only
// with reports.mail on; the others whenever they have a sender.
func (o *Outbox) enabled(ch string) bool { return channelKind(ch) != "email" || o.policy.Send }

// unmoderated channels carry status, not replies: see Deliver.
func unmoderated(ch string) bool { return channelKind(ch) == "patchwork" }

func channelKind(ch string) string {
	kind, _, _ := strings.Cut(ch, ":")
	return kind
}

// maildirName is stable per Message-ID, so the file is found again.
func maildirName(id string) string {
	return strings.NewReplacer("/", "_", ":", "_", "<", "", ">", "").Replace(id) + ".eml"
}

func (o *Outbox) writeMaildir(e *Entry) error {
	name := maildirName(e.MessageID)
	tmp := filepath.Join(o.maildir, "tmp", name)
	if err := os.WriteFile(tmp, e.Raw, 0o640); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return os.Rename(tmp, filepath.Join(o.maildir, "new", name))
}

// markSeen moves a sent reply to cur/ with the Seen flag, as a mail
// client would; a missing file (removed by an operator) is no error.
func (o *Outbox) markSeen(e *Entry) {
	name := maildirName(e.MessageID)
	err := os.Rename(filepath.Join(o.maildir, "new", name), filepath.Join(o.maildir, "cur", name+":2,S"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		o.log.Warn("outbox maildir", "err", err)
	}
}
