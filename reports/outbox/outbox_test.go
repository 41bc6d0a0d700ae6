package outbox

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/migrate"
	"github.com/rdmabot/rdmabot/internal/pgtest"
	"github.com/rdmabot/rdmabot/reports"
)

// databases yields the dialects the ledger must work on: SQLite always,
// PostgreSQL: a throwaway server (or RDMABOT_TEST_PG_URL).
func databases(t *testing.T) map[string]func(t *testing.T) *sql.DB {
	dbs := map[string]func(t *testing.T) *sql.DB{
		"sqlite": func(t *testing.T) *sql.DB {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "ledger.db")+"?_pragma=busy_timeout(5000)")
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			t.Cleanup(func() { db.Close() })
			return db
		},
	}
	dbs["postgres"] = func(t *testing.T) *sql.DB {
		db, err := sql.Open("pgx", pgtest.Start(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			db.Exec("DROP TABLE IF EXISTS rdmabot_replies")
			db.Close()
		})
		if _, err := db.Exec("DROP TABLE IF EXISTS rdmabot_replies"); err != nil {
			t.Fatal(err)
		}
		return db
	}
	return dbs
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// recorder is a Sender that keeps what it was given; fail scripts the
// next results.
type recorder struct {
	mu   sync.Mutex
	got  []string // Message-IDs, in order
	fail []error
}

func (r *recorder) Send(ctx context.Context, e *Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.fail) > 0 {
		err := r.fail[0]
		r.fail = r.fail[1:]
		if err != nil && !errors.Is(err, ErrNotDelivered) {
			var rej *Rejected
			if !errors.As(err, &rej) {
				r.got = append(r.got, e.MessageID) // reached the peer, answer lost
			}
		}
		return err
	}
	r.got = append(r.got, e.MessageID)
	return nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func reply(id, thread string, version int) Reply {
	return Reply{MessageID: id, Key: Key("email", thread, version), Channel: "email", Outcome: "REGRESSION",
		Recipient: "cel@kernel.org", InReplyTo: thread, Envelope: []string{"cel@kernel.org", "linux-rdma@vger.kernel.org"},
		Raw: []byte("Message-ID: <" + id + ">\n\nbody\n")}
}

func newOutbox(t *testing.T, db *sql.DB, dir string, p Policy, s Sender, c *clock) *Outbox {
	t.Helper()
	l, err := OpenLedger(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	o, err := New(l, dir, p, map[string]Sender{"email": s}, c.Now, quiet())
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOutbox(t *testing.T) {
	for name, open := range databases(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("ExactlyOnce", func(t *testing.T) { testExactlyOnce(t, open(t)) })
			t.Run("Policy", func(t *testing.T) { testPolicy(t, open(t)) })
			t.Run("Addresses", func(t *testing.T) { testAddresses(t, open(t)) })
			t.Run("ListLimit", func(t *testing.T) { testListLimit(t, open(t)) })
			t.Run("LedgerBeforeLists", func(t *testing.T) { testLedgerBeforeLists(t, open(t)) })
			t.Run("LedgerUnversioned", func(t *testing.T) { testLedgerUnversioned(t, open(t)) })
			t.Run("ForThread", func(t *testing.T) { testForThread(t, open(t)) })
		})
	}
}

func testExactlyOnce(t *testing.T, db *sql.DB) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)}
	rec := &recorder{}
	dir := t.TempDir()
	p := Policy{Send: true, DailyLimit: 100, Self: "rdmabot <rdmabot@rdmabot.example.org>"}
	o := newOutbox(t, db, dir, p, rec, c)

	// Recorded before sent; a second verdict for the version is refused.
	if _, err := o.Enqueue(ctx, reply("a-rdmabot@rdmabot.example.org", "series-1@x", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Enqueue(ctx, reply("b-rdmabot@rdmabot.example.org", "series-1@x", 1)); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second verdict for v1: want ErrDuplicate, got %v", err)
	}
	if _, err := o.Enqueue(ctx, reply("c-rdmabot@rdmabot.example.org", "series-1@x", 2)); err != nil {
		t.Fatalf("v2 is a new verdict: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new", "a-rdmabot@rdmabot.example.org.eml")); err != nil {
		t.Fatalf("the reply must be in the Maildir before it is sent: %v", err)
	}
	if n, err := o.Deliver(ctx); err != nil || n != 2 {
		t.Fatalf("deliver: %d %v", n, err)
	}
	if n, err := o.Deliver(ctx); err != nil || n != 0 {
		t.Fatalf("second deliver must send nothing: %d %v", n, err)
	}
	if strings.Join(rec.got, " ") != "a-rdmabot@rdmabot.example.org c-rdmabot@rdmabot.example.org" {
		t.Fatalf("sent %v", rec.got)
	}
	if _, err := os.Stat(filepath.Join(dir, "cur", "a-rdmabot@rdmabot.example.org.eml:2,S")); err != nil {
		t.Errorf("a sent reply moves to cur/ flagged Seen: %v", err)
	}

	// A crash after marking Sending and before the send: the restarted
	// outbox resends once, with the same Message-ID.
	if _, err := o.Enqueue(ctx, reply("d-rdmabot@rdmabot.example.org", "series-2@x", 1)); err != nil {
		t.Fatal(err)
	}
	if ok, err := o.ledger.transition(ctx, "d-rdmabot@rdmabot.example.org", Ready, Sending, "", 1, c.Now()); !ok || err != nil {
		t.Fatalf("simulated crash: %v %v", ok, err)
	}
	rec.got = nil
	restarted := newOutbox(t, db, dir, p, rec, c)
	// Until StaleAfter has passed, another process may still be sending.
	c.Advance(DefaultStaleAfter - time.Minute)
	if n, _ := restarted.Deliver(ctx); n != 0 || len(rec.got) != 0 {
		t.Fatalf("resent a reply that may still be in flight")
	}
	c.Advance(2 * time.Minute)
	if n, err := restarted.Deliver(ctx); err != nil || n != 1 || len(rec.got) != 1 || rec.got[0] != "d-rdmabot@rdmabot.example.org" {
		t.Fatalf("resend after crash: n=%d err=%v sent=%v", n, err, rec.got)
	}
	e, _ := restarted.ledger.Get(ctx, "d-rdmabot@rdmabot.example.org")
	if e.State != Sent || e.Attempts != 2 {
		t.Errorf("after the resend: %s, %d attempts", e.State, e.Attempts)
	}

	// The answer is lost twice: sent once, resent once, then Failed,
	// never a third copy.
	if _, err := o.Enqueue(ctx, reply("e-rdmabot@rdmabot.example.org", "series-3@x", 1)); err != nil {
		t.Fatal(err)
	}
	rec.got = nil
	lost := errors.New("connection reset after DATA")
	rec.fail = []error{lost, lost}
	for range 4 {
		o.Deliver(ctx)
		c.Advance(DefaultStaleAfter)
	}
	if len(rec.got) != 2 {
		t.Errorf("lost answers: sent %d times, want 2 (once and one resend)", len(rec.got))
	}
	if e, _ := o.ledger.Get(ctx, "e-rdmabot@rdmabot.example.org"); e.State != Failed {
		t.Errorf("after two unknown sends: %s, want failed", e.State)
	}

	// Provably undelivered: back to Ready, attempt not counted.
	if _, err := o.Enqueue(ctx, reply("f-rdmabot@rdmabot.example.org", "series-4@x", 1)); err != nil {
		t.Fatal(err)
	}
	rec.fail = []error{ErrNotDelivered, ErrNotDelivered, ErrNotDelivered}
	for range 3 {
		o.Deliver(ctx)
	}
	if e, _ := o.ledger.Get(ctx, "f-rdmabot@rdmabot.example.org"); e.State != Ready || e.Attempts != 0 {
		t.Errorf("undelivered: %s after %d attempts, want ready/0", e.State, e.Attempts)
	}
	o.Deliver(ctx)
	if e, _ := o.ledger.Get(ctx, "f-rdmabot@rdmabot.example.org"); e.State != Sent {
		t.Errorf("undelivered then delivered: %s", e.State)
	}
	// Rejected: Failed at once.
	if _, err := o.Enqueue(ctx, reply("g-rdmabot@rdmabot.example.org", "series-5@x", 1)); err != nil {
		t.Fatal(err)
	}
	rec.fail = []error{&Rejected{Err: errors.New("550 no such user")}}
	o.Deliver(ctx)
	if e, _ := o.ledger.Get(ctx, "g-rdmabot@rdmabot.example.org"); e.State != Failed || !strings.Contains(e.Reason, "550") {
		t.Errorf("rejected: %s %q", e.State, e.Reason)
	}
}

func testPolicy(t *testing.T, db *sql.DB) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)}
	rec := &recorder{}
	dir := t.TempDir()
	p := Policy{Send: false, Moderate: true, DailyLimit: 2, OptOut: []string{"@opted.example", "someone@else.example"},
		Self: "rdmabot <rdmabot@rdmabot.example.org>"}
	o := newOutbox(t, db, dir, p, rec, c)

	// Our own mail: never answered, by address or by our Message-IDs.
	own := reply("x-rdmabot@rdmabot.example.org", "s@x", 1)
	own.Recipient = "RDMABOT@rdmabot.example.org"
	if _, err := o.Enqueue(ctx, own); !errors.Is(err, ErrOwnMail) {
		t.Errorf("own address: %v", err)
	}
	own = reply("y-rdmabot@rdmabot.example.org", "20261130.abc-rdmabot@rdmabot.example.org", 1)
	if _, err := o.Enqueue(ctx, own); !errors.Is(err, ErrOwnMail) {
		t.Errorf("own Message-ID: %v", err)
	}
	// Opt-out: recorded, never sent.
	opt := reply("o-rdmabot@rdmabot.example.org", "s2@x", 1)
	opt.Recipient = "dev@opted.example"
	if e, err := o.Enqueue(ctx, opt); err != nil || e.State != Suppressed {
		t.Errorf("opt-out: %v %v", e, err)
	}
	// Moderation: held until approved; mail off: nothing leaves.
	for _, id := range []string{"m1", "m2", "m3"} {
		if e, err := o.Enqueue(ctx, reply(id+"-rdmabot@rdmabot.example.org", id+"@x", 1)); err != nil || e.State != Held {
			t.Fatalf("moderated: %v %v", e, err)
		}
	}
	if err := o.Approve(ctx, "m1-rdmabot@rdmabot.example.org"); err != nil {
		t.Fatal(err)
	}
	if err := o.Approve(ctx, "m1-rdmabot@rdmabot.example.org"); err == nil {
		t.Error("approving twice must fail")
	}
	if n, _ := o.Deliver(ctx); n != 0 || len(rec.got) != 0 {
		t.Fatalf("mail disabled: sent %d", n)
	}
	// Mail on: only the approved reply goes.
	o.policy.Send = true
	if n, err := o.Deliver(ctx); n != 1 || err != nil {
		t.Fatalf("approved: sent %d %v", n, err)
	}
	// Daily limit 2: after approving both, one more today, the third
	// waits a day.
	o.Approve(ctx, "m2-rdmabot@rdmabot.example.org")
	o.Approve(ctx, "m3-rdmabot@rdmabot.example.org")
	if n, _ := o.Deliver(ctx); n != 1 {
		t.Fatalf("limit: sent %d, want 1", n)
	}
	c.Advance(23 * time.Hour)
	if n, _ := o.Deliver(ctx); n != 0 {
		t.Fatalf("limit within 24h: sent %d", n)
	}
	c.Advance(2 * time.Hour)
	if n, _ := o.Deliver(ctx); n != 1 {
		t.Fatalf("next day: sent %d, want 1", n)
	}
	held, _ := o.ledger.List(ctx, Held, Ready)
	if len(held) != 0 {
		t.Errorf("left waiting: %d", len(held))
	}
	if strings.Join(rec.got, " ") != "m1-rdmabot@rdmabot.example.org m2-rdmabot@rdmabot.example.org m3-rdmabot@rdmabot.example.org" {
		t.Errorf("sent %v", rec.got)
	}
	// One author's cap: two to cel@ a day, whatever the daily limit;
	// another author is not held back by it.
	c.Advance(25 * time.Hour)
	o.policy.Moderate, o.policy.DailyLimit, o.policy.AuthorDailyLimit = false, 100, 2
	for _, id := range []string{"a1", "a2", "a3"} {
		o.Enqueue(ctx, reply(id+"-rdmabot@rdmabot.example.org", id+"@x", 1))
	}
	other := reply("b1-rdmabot@rdmabot.example.org", "b1@x", 1)
	other.Recipient, other.Envelope = "Other@Example.org", []string{"Other@Example.org"}
	o.Enqueue(ctx, other)
	rec.got = nil
	if n, _ := o.Deliver(ctx); n != 3 {
		t.Errorf("author cap 2: sent %d, want 2 to cel@ and 1 to other@: %v", n, rec.got)
	}
	c.Advance(25 * time.Hour)
	if n, _ := o.Deliver(ctx); n != 1 {
		t.Errorf("next day: sent %d, want cel@'s third", n)
	}
}

// testAddresses: an author that is not one plain mailbox is kept as
// Failed (undeliverable) and never sent; opt-out holds for every
// envelope recipient; the envelope is stored as a list, so an address
// with a comma stays one address.
func testAddresses(t *testing.T, db *sql.DB) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)}
	rec := &recorder{}
	p := Policy{Send: true, DailyLimit: 100, OptOut: []string{"b@y.example", "@opted.example"}, Self: "rdmabot <rdmabot@rdmabot.example.org>"}
	o := newOutbox(t, db, t.TempDir(), p, rec, c)

	// `From: Evil <a@x,b@y,c@z>`, rendered as RenderEmail renders the
	// author: one quoted To, formerly three envelope recipients.
	evil := "a@x.example,b@y.example,c@z.example"
	m := &reports.Mail{MessageID: "evil-rdmabot@rdmabot.example.org", From: p.Self, Subject: "Re: x", InReplyTo: "evil@x",
		To: []string{(&mail.Address{Name: "Evil", Address: evil}).String()}, Cc: []string{"linux-rdma@vger.kernel.org"}, Outcome: flow.Regression}
	r := FromMail(m, reports.Thread{MessageID: "evil@x", Version: 1, Author: reports.Address{Name: "Evil", Email: evil}})
	if r.Undeliverable == "" || len(r.Envelope) != 0 {
		t.Fatalf("FromMail: envelope %q, undeliverable %q", r.Envelope, r.Undeliverable)
	}
	e, err := o.Enqueue(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if e.State != Failed || !strings.Contains(e.Reason, "undeliverable") || !strings.Contains(e.Reason, "b@y.example") {
		t.Errorf("bad author: %s %q, want failed/undeliverable naming the address", e.State, e.Reason)
	}
	// A caller handing a comma-joined envelope address is refused too.
	joined := reply("j-rdmabot@rdmabot.example.org", "j@x", 1)
	joined.Envelope = []string{evil}
	if e, err := o.Enqueue(ctx, joined); err != nil || e.State != Failed {
		t.Errorf("joined envelope address: %v %v", e, err)
	}
	// Opt-out per recipient: the author is fine, a Cc opted out.
	cc := reply("cc-rdmabot@rdmabot.example.org", "cc@x", 1)
	cc.Envelope = append(cc.Envelope, "list@opted.example")
	if e, err := o.Enqueue(ctx, cc); err != nil || e.State != Suppressed || !strings.Contains(e.Reason, "list@opted.example") {
		t.Errorf("opted-out Cc: %v %v", e, err)
	}
	if n, _ := o.Deliver(ctx); n != 0 || len(rec.got) != 0 {
		t.Errorf("sent %v", rec.got)
	}
	// The envelope column holds a list.
	l := o.Ledger()
	in := &Entry{MessageID: "l-rdmabot@rdmabot.example.org", Key: "k", Channel: "email", Outcome: "PASS", Recipient: "x@y",
		Envelope: []string{`"a,b"@x.example`, "c@y.example"}, State: Held, Created: c.Now()}
	if err := l.insert(ctx, in); err != nil {
		t.Fatal(err)
	}
	got, err := l.Get(ctx, in.MessageID)
	if err != nil || len(got.Envelope) != 2 || got.Envelope[0] != in.Envelope[0] {
		t.Errorf("envelope round trip: %q %v, want %q", got.Envelope, err, in.Envelope)
	}
	// Rows written before the list (comma-joined) still read.
	if _, err := db.ExecContext(ctx, `UPDATE rdmabot_replies SET envelope = $1 WHERE message_id = $2`, "a@x.example,c@y.example", in.MessageID); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Get(ctx, in.MessageID); err != nil || strings.Join(got.Envelope, " ") != "a@x.example c@y.example" {
		t.Errorf("old row: %q %v", got.Envelope, err)
	}
}

// testListLimit: one list's cap holds back its replies only; a reply to
// two lists waits while either is full; the next day they go.
func testListLimit(t *testing.T, db *sql.DB) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)}
	rec := &recorder{}
	o := newOutbox(t, db, t.TempDir(), Policy{Send: true, DailyLimit: 100, ListDailyLimit: 2}, rec, c)
	to := func(id, list string, lists ...string) {
		r := reply(id+"-rdmabot@rdmabot.example.org", id+"@x", 1)
		r.Recipient = id + "@example.org"
		r.Envelope = append([]string{r.Recipient}, lists...)
		r.Lists = lists
		if _, err := o.Enqueue(ctx, r); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second) // the ledger lists replies oldest first
	}
	for _, id := range []string{"r1", "r2", "r3"} {
		to(id, "", "linux-rdma@vger.kernel.org")
	}
	to("n1", "", "linux-nfs@vger.kernel.org")
	to("b1", "", "Linux-RDMA@vger.kernel.org", "linux-nfs@vger.kernel.org")
	to("none", "")
	if n, err := o.Deliver(ctx); err != nil || n != 4 {
		t.Fatalf("first day: sent %d (%v), want r1 r2 n1 none: %v", n, err, rec.got)
	}
	if got := strings.Join(rec.got, " "); got != "r1-rdmabot@rdmabot.example.org r2-rdmabot@rdmabot.example.org n1-rdmabot@rdmabot.example.org none-rdmabot@rdmabot.example.org" {
		t.Errorf("sent %s", got)
	}
	if n, _ := o.ledger.SentToListSince(ctx, "LINUX-RDMA@vger.kernel.org", c.Now().Add(-time.Hour)); n != 2 {
		t.Errorf("sent to linux-rdma: %d, want 2", n)
	}
	c.Advance(23 * time.Hour)
	if n, _ := o.Deliver(ctx); n != 0 {
		t.Errorf("within 24h: sent %d more: %v", n, rec.got)
	}
	c.Advance(2 * time.Hour)
	rec.got = nil
	if n, _ := o.Deliver(ctx); n != 2 {
		t.Errorf("next day: sent %d, want r3 and b1: %v", n, rec.got)
	}
	waiting, _ := o.ledger.List(ctx, Ready)
	if len(waiting) != 0 {
		t.Errorf("still waiting: %d", len(waiting))
	}
}

// testLedgerBeforeLists: a ledger made before the lists column (and
// before the ledger recorded its versions) opens, keeps its rows, and
// takes new ones.
func testLedgerBeforeLists(t *testing.T, db *sql.DB) {
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, migrations[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO rdmabot_replies (message_id, verdict_key, channel, outcome, recipient, envelope, state, reason, attempts, created, attempted, sent, raw)
		VALUES ('old@x', 'k', 'email', 'PASS', 'a@x', '["a@x"]', 'sent', '', 1, 1, 1, 1, 'raw')`); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	e, err := l.Get(ctx, "old@x")
	if err != nil || e.State != Sent || len(e.Lists) != 0 {
		t.Fatalf("old row: %+v, %v", e, err)
	}
	if _, err := OpenLedger(ctx, db); err != nil {
		t.Fatalf("opened twice: %v", err)
	}
	if v, err := migrate.Version(ctx, db, migrationTable); err != nil || v != len(migrations) {
		t.Errorf("ledger version %d, %v; want %d", v, err, len(migrations))
	}
	if err := l.insert(ctx, &Entry{MessageID: "new@x", Key: "k2", Channel: "email", State: Ready, Lists: []string{"l@x"}, Created: time.Unix(5, 0)}); err != nil {
		t.Fatal(err)
	}
	if e, err := l.Get(ctx, "new@x"); err != nil || len(e.Lists) != 1 || e.Lists[0] != "l@x" {
		t.Fatalf("new row: %+v, %v", e, err)
	}
}

// testLedgerUnversioned: a ledger a bot made with the lists column but
// before the ledger recorded its versions opens as it is, its versions
// recorded without running them again.
func testLedgerUnversioned(t *testing.T, db *sql.DB) {
	ctx := context.Background()
	for _, m := range migrations {
		if _, err := db.ExecContext(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := OpenLedger(ctx, db); err != nil {
		t.Fatal(err)
	}
	if v, err := migrate.Version(ctx, db, migrationTable); err != nil || v != len(migrations) {
		t.Errorf("ledger version %d, %v; want %d", v, err, len(migrations))
	}
}

// ForThread finds a series version's reply and its patchwork checks,
// and nothing of another version or of a thread whose id the first's
// % and _ would match as LIKE wildcards.
func testForThread(t *testing.T, db *sql.DB) {
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
	o := newOutbox(t, db, t.TempDir(), Policy{Moderate: true}, &recorder{}, c)
	thread := "a%_b@x"
	check, err := FromCheck("<p1@x>", thread, 1, PhasePending, "cel@kernel.org", Check{State: "pending", Context: "rdmabot"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Reply{reply("r1@bot", thread, 1), check, reply("r10@bot", thread, 10), reply("other@bot", "aXYb@x", 1)} {
		if _, err := o.Enqueue(ctx, r); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
	}
	es, err := o.Ledger().ForThread(ctx, thread, 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.MessageID+" "+string(e.State))
	}
	if want := []string{"r1@bot held", check.MessageID + " ready"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("thread %s v1: %q, want %q", thread, got, want)
	}
}

// A key reads back as Key made it, with an answer's suffix; what Key
// did not make is refused.
func TestParseKey(t *testing.T) {
	for _, c := range []struct {
		key, channel, thread string
		version              int
		ok                   bool
	}{
		{Key("email", "a@x", 2), "email", "a@x", 2, true},
		{Key("email", "a@x", 1) + "|cmd@y", "email", "a@x", 1, true},
		{Key("github:o/r#3", "a@x", 1), "github:o/r#3", "a@x", 1, true},
		{"email|a@x", "", "", 0, false},
		{"email|a@x|2", "", "", 0, false},
		{"email|a@x|vX", "", "", 0, false},
		{"email|a@x|v0", "", "", 0, false},
		{"", "", "", 0, false},
	} {
		ch, th, v, ok := ParseKey(c.key)
		if ch != c.channel || th != c.thread || v != c.version || ok != c.ok {
			t.Errorf("ParseKey(%q) = %q %q %d %v, want %q %q %d %v", c.key, ch, th, v, ok, c.channel, c.thread, c.version, c.ok)
		}
	}
}
