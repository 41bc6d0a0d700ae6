// Package outbox delivers replies exactly once. Every reply is recorded
// in a ledger table (and, for mail, a Maildir an operator can read)
// before anything is sent; sending marks the row first, so a crash
// between marking and sending is seen on restart and the reply is resent
// once, with the same Message-ID, which list archives deduplicate on.
//
// Policy lives here too, at the last point before the wire: a daily
// limit, moderation (replies wait for `rdmabot outbox approve`), an
// opt-out list, never a reply to our own mail, never a second verdict
// for the same series version.
package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/internal/migrate"
)

// State of a reply in the ledger.
type State string

const (
	// Held waits for an operator's approval (moderation).
	Held State = "held"
	// Ready is approved and waits for the sender (or for mail to be
	// enabled, or for the daily limit).
	Ready State = "ready"
	// Sending was handed to the wire; it stays so if we crash.
	Sending State = "sending"
	// Sent is done.
	Sent State = "sent"
	// Failed needs an operator: rejected, or unknown after a resend.
	Failed State = "failed"
	// Suppressed is recorded but never sent (opt-out).
	Suppressed State = "suppressed"
)

// Entry is one row of the ledger.
type Entry struct {
	MessageID string
	// Key identifies the verdict: one per channel and series version.
	Key       string
	Channel   string
	Outcome   string
	Recipient string // the person answered
	// Envelope holds the SMTP recipients.
	Envelope []string
	// Lists are the mailing lists the reply goes to (Cc): each has its
	// own daily limit.
	Lists    []string
	State    State
	Reason   string
	Attempts int
	Created  time.Time
	// Attempted is when the last send began.
	Attempted time.Time
	SentAt    time.Time
	Raw       []byte
}

// migrations are the ledger's schema, append-only (migrate.Apply), in
// plain SQL both SQLite and PostgreSQL accept: TEXT, BIGINT and INTEGER
// columns, times as Unix seconds, $N placeholders below.
var migrations = []string{`CREATE TABLE IF NOT EXISTS rdmabot_replies (
	message_id TEXT PRIMARY KEY,
	verdict_key TEXT NOT NULL UNIQUE,
	channel TEXT NOT NULL,
	outcome TEXT NOT NULL,
	recipient TEXT NOT NULL,
	envelope TEXT NOT NULL,
	state TEXT NOT NULL,
	reason TEXT NOT NULL,
	attempts INTEGER NOT NULL,
	created BIGINT NOT NULL,
	attempted BIGINT NOT NULL,
	sent BIGINT NOT NULL,
	raw TEXT NOT NULL
)`,
	// Replies record the lists they were sent to.
	`ALTER TABLE rdmabot_replies ADD COLUMN lists TEXT NOT NULL DEFAULT '[]'`,
}

// migrationTable records the ledger's versions.
const migrationTable = "rdmabot_replies_migration"

// Ledger is the table of replies.
type Ledger struct{ db *sql.DB }

// OpenLedger creates the table when missing and brings it up to date.
func OpenLedger(ctx context.Context, db *sql.DB) (*Ledger, error) {
	if err := adoptUnversioned(ctx, db); err != nil {
		return nil, fmt.Errorf("outbox: ledger: %w", err)
	}
	if err := migrate.Apply(ctx, db, migrationTable, migrations, time.Now); err != nil {
		return nil, fmt.Errorf("outbox: ledger: %w", err)
	}
	return &Ledger{db: db}, nil
}

// adoptUnversioned records the versions of a ledger a bot made before
// the ledger recorded them: its table exists with the lists column when
// the versions table does not (one made before the lists column has
// version 1 only, and the rest runs).
func adoptUnversioned(ctx context.Context, db *sql.DB) error {
	if rows, err := db.QueryContext(ctx, `SELECT version FROM `+migrationTable+` WHERE 1 = 0`); err == nil {
		rows.Close()
		return nil // versioned
	}
	rows, err := db.QueryContext(ctx, `SELECT message_id FROM rdmabot_replies WHERE 1 = 0`)
	if err != nil {
		return nil // no ledger yet: every version runs
	}
	rows.Close()
	n := 1
	if rows, err := db.QueryContext(ctx, `SELECT lists FROM rdmabot_replies WHERE 1 = 0`); err == nil {
		rows.Close()
		n = 2
	}
	return migrate.Record(ctx, db, migrationTable, n, time.Now)
}

// ErrDuplicate says this series version already has a verdict on this
// channel (or the Message-ID is taken).
var ErrDuplicate = errors.New("a verdict for this series version was already recorded")

// ErrNotFound is an unknown Message-ID.
var ErrNotFound = errors.New("no such reply")

const cols = `message_id, verdict_key, channel, outcome, recipient, envelope, state, reason, attempts, created, attempted, sent, raw, lists`

func (l *Ledger) insert(ctx context.Context, e *Entry) error {
	env, err := json.Marshal(e.Envelope)
	if err != nil {
		return fmt.Errorf("outbox: record %s: %w", e.MessageID, err)
	}
	if e.Envelope == nil {
		env = []byte("[]")
	}
	lists, err := json.Marshal(e.Lists)
	if err != nil {
		return fmt.Errorf("outbox: record %s: %w", e.MessageID, err)
	}
	if e.Lists == nil {
		lists = []byte("[]")
	}
	res, err := l.db.ExecContext(ctx, `INSERT INTO rdmabot_replies (`+cols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT DO NOTHING`,
		e.MessageID, e.Key, e.Channel, e.Outcome, e.Recipient, string(env),
		string(e.State), e.Reason, e.Attempts, e.Created.Unix(), unix(e.Attempted), unix(e.SentAt), string(e.Raw), string(lists))
	if err != nil {
		return fmt.Errorf("outbox: record %s: %w", e.MessageID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("%s (%s): %w", e.Key, e.MessageID, ErrDuplicate)
	}
	return nil
}

func unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// transition moves a reply from one state to another only if it is
// still in the first: the compare-and-set keeps two bot processes from
// both sending one reply. at stamps the move into Sending (attempted)
// or Sent (sent).
func (l *Ledger) transition(ctx context.Context, id string, from, to State, reason string, attemptDelta int, at time.Time) (bool, error) {
	q := `UPDATE rdmabot_replies SET state = $1, reason = $2, attempts = attempts + $3`
	args := []any{string(to), reason, attemptDelta}
	switch to {
	case Sending:
		q += `, attempted = $4`
		args = append(args, unix(at))
	case Sent:
		q += `, sent = $4`
		args = append(args, unix(at))
	}
	n := len(args)
	q += fmt.Sprintf(` WHERE message_id = $%d AND state = $%d`, n+1, n+2)
	res, err := l.db.ExecContext(ctx, q, append(args, id, string(from))...)
	if err != nil {
		return false, fmt.Errorf("outbox: %s %s -> %s: %w", id, from, to, err)
	}
	rows, err := res.RowsAffected()
	return rows == 1, err
}

// Get reads one reply.
func (l *Ledger) Get(ctx context.Context, id string) (*Entry, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT `+cols+` FROM rdmabot_replies WHERE message_id = $1`, id)
	if err != nil {
		return nil, err
	}
	es, err := scan(rows)
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	return es[0], nil
}

// List returns replies in the given states (all when none), oldest first.
func (l *Ledger) List(ctx context.Context, states ...State) ([]*Entry, error) {
	q := `SELECT ` + cols + ` FROM rdmabot_replies`
	var args []any
	if len(states) > 0 {
		ph := make([]string, len(states))
		for i, s := range states {
			ph[i] = fmt.Sprintf("$%d", i+1)
			args = append(args, string(s))
		}
		q += ` WHERE state IN (` + strings.Join(ph, ", ") + `)`
	}
	rows, err := l.db.QueryContext(ctx, q+` ORDER BY created, message_id`, args...)
	if err != nil {
		return nil, err
	}
	return scan(rows)
}

// ForThread returns every reply and patchwork check of one series
// version (threadID, the series' Message-ID, and version: what Key
// holds), whatever the channel, oldest first.
func (l *Ledger) ForThread(ctx context.Context, threadID string, version int) ([]*Entry, error) {
	// LIKE with the Message-ID's own % and _ escaped: both databases
	// take ESCAPE.
	esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace("|" + threadID + fmt.Sprintf("|v%d", version))
	rows, err := l.db.QueryContext(ctx, `SELECT `+cols+` FROM rdmabot_replies
		WHERE verdict_key LIKE $1 ESCAPE '\' OR verdict_key LIKE $2 ESCAPE '\' ORDER BY created, message_id`, "%"+esc, "%"+esc+"|%")
	if err != nil {
		return nil, err
	}
	return scan(rows)
}

// SentSince counts replies sent, or possibly sent, since t; patchwork
// checks are no replies and do not count.
func (l *Ledger) SentSince(ctx context.Context, t time.Time) (int, error) {
	var n int
	err := l.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM rdmabot_replies
		WHERE ((state = $1 AND sent >= $2) OR state = $3) AND channel NOT LIKE $4`,
		string(Sent), t.Unix(), string(Sending), "patchwork:%").Scan(&n)
	return n, err
}

// SentToSince counts the replies sent, or possibly sent, to one
// recipient (case-insensitive) since t, patchwork checks aside.
func (l *Ledger) SentToSince(ctx context.Context, recipient string, t time.Time) (int, error) {
	var n int
	err := l.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM rdmabot_replies
		WHERE ((state = $1 AND sent >= $2) OR state = $3) AND channel NOT LIKE $4 AND LOWER(recipient) = LOWER($5)`,
		string(Sent), t.Unix(), string(Sending), "patchwork:%", recipient).Scan(&n)
	return n, err
}

// SentToListSince counts the replies sent, or possibly sent, to one
// mailing list (case-insensitive) since t. The rows read are those of
// one day, which the daily limit keeps few.
func (l *Ledger) SentToListSince(ctx context.Context, list string, t time.Time) (int, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT message_id, lists FROM rdmabot_replies
		WHERE ((state = $1 AND sent >= $2) OR state = $3) AND channel NOT LIKE $4`,
		string(Sent), t.Unix(), string(Sending), "patchwork:%")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, col string
		if err := rows.Scan(&id, &col); err != nil {
			return 0, err
		}
		var lists []string
		if err := json.Unmarshal([]byte(col), &lists); err != nil {
			return 0, fmt.Errorf("outbox: %s: lists %q: %w", id, col, err)
		}
		for _, a := range lists {
			if strings.EqualFold(a, list) {
				n++
				break
			}
		}
	}
	return n, rows.Err()
}

// envelope reads the envelope column: a JSON list of addresses, or, in
// rows written before it was one, addresses joined by commas.
func envelope(col string) ([]string, error) {
	if strings.HasPrefix(col, "[") {
		var env []string
		if err := json.Unmarshal([]byte(col), &env); err != nil {
			return nil, fmt.Errorf("envelope %q: %w", col, err)
		}
		if len(env) == 0 {
			return nil, nil
		}
		return env, nil
	}
	if col == "" {
		return nil, nil
	}
	return strings.Split(col, ","), nil
}

func scan(rows *sql.Rows) ([]*Entry, error) {
	defer rows.Close()
	var out []*Entry
	for rows.Next() {
		var e Entry
		var env, state, raw, lists string
		var created, attempted, sent int64
		if err := rows.Scan(&e.MessageID, &e.Key, &e.Channel, &e.Outcome, &e.Recipient, &env,
			&state, &e.Reason, &e.Attempts, &created, &attempted, &sent, &raw, &lists); err != nil {
			return nil, err
		}
		var err error
		if e.Envelope, err = envelope(env); err != nil {
			return nil, fmt.Errorf("outbox: %s: %w", e.MessageID, err)
		}
		if err := json.Unmarshal([]byte(lists), &e.Lists); err != nil {
			return nil, fmt.Errorf("outbox: %s: lists %q: %w", e.MessageID, lists, err)
		}
		e.State, e.Raw = State(state), []byte(raw)
		e.Created = time.Unix(created, 0).UTC()
		if attempted != 0 {
			e.Attempted = time.Unix(attempted, 0).UTC()
		}
		if sent != 0 {
			e.SentAt = time.Unix(sent, 0).UTC()
		}
		out = append(out, &e)
	}
	return out, rows.Err()
}
