package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Dispute is a maintainer's word against one of the bot's reports:
// "invalid" (with why) or "dup" (with the report it repeats).
type Dispute struct {
	MsgID  string // the mail that said it
	TestID int64
	Kind   string
	Note   string
	By     string
	At     time.Time
}

// AddDispute records d once per mail; added is false when that mail was
// read before.
func (s *Store) AddDispute(ctx context.Context, q Querier, d Dispute) (added bool, err error) {
	res, err := q.ExecContext(ctx, `INSERT INTO disputes (msgid, test_id, kind, note, by_addr, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (msgid) DO NOTHING`, d.MsgID, d.TestID, d.Kind, d.Note, d.By, ms(s.now()))
	if err != nil {
		return false, fmt.Errorf("store: add dispute: %w", err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// Disputes of a test, oldest first.
func (s *Store) Disputes(ctx context.Context, q Querier, testID int64) ([]Dispute, error) {
	rows, err := q.QueryContext(ctx, `SELECT msgid, test_id, kind, note, by_addr, created_at FROM disputes
		WHERE test_id = $1 ORDER BY created_at, msgid`, testID)
	if err != nil {
		return nil, fmt.Errorf("store: disputes of test %d: %w", testID, err)
	}
	defer rows.Close()
	var out []Dispute
	for rows.Next() {
		var d Dispute
		var at int64
		if err := rows.Scan(&d.MsgID, &d.TestID, &d.Kind, &d.Note, &d.By, &at); err != nil {
			return nil, err
		}
		d.At = Time(at)
		out = append(out, d)
	}
	return out, rows.Err()
}

// DisputableTest is the newest finished test of a series version (its
// root Message-ID or ID, and version) that a reply could have reported:
// one with a verdict, not a notice or the bot's own failure. ok is false
// when there is none.
func (s *Store) DisputableTest(ctx context.Context, q Querier, root string, version int) (t Test, ok bool, err error) {
	t, err = scanTest(q.QueryRowContext(ctx, `SELECT `+testCols+` FROM tests
		WHERE kind = $1 AND state = $2 AND verdict NOT IN ('', 'INFRA', 'INCOMPLETE', 'REFUSED', 'INCONCLUSIVE', 'MEASURED')
		AND series_id IN (SELECT id FROM series WHERE (root = $3 OR msgid = $3) AND version = $4) ORDER BY id DESC LIMIT 1`,
		KindSeries, StateDone, root, version))
	if errors.Is(err, sql.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, fmt.Errorf("store: disputable test of %s v%d: %w", root, version, err)
	}
	return t, true, nil
}
