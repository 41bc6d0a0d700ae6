package store

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// Canary is one A/A canary comparison: a kernel against itself on a lab
// pair. Metric names what a REGRESSION or IMPROVEMENT rested on (a false
// alarm of that metric); it is empty for other verdicts.
type Canary struct {
	TestID    int64
	Tree      string
	Commit    string
	Lab       string
	Verdict   flow.Outcome
	Metric    string
	Summary   string
	CreatedAt time.Time
}

// AddCanary records a canary's outcome once (a repeated report job
// records nothing more).
func (s *Store) AddCanary(ctx context.Context, q Querier, c Canary) error {
	_, err := q.ExecContext(ctx, `INSERT INTO canaries (test_id, tree, commit_sha, lab, verdict, metric, summary, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (test_id) DO NOTHING`,
		c.TestID, c.Tree, c.Commit, c.Lab, c.Verdict, c.Metric, c.Summary, s.now().UnixMilli())
	if err != nil {
		return fmt.Errorf("store: add canary: %w", err)
	}
	return nil
}

// Canaries are the canary comparisons since a time, newest first.
func (s *Store) Canaries(ctx context.Context, q Querier, since time.Time) ([]Canary, error) {
	rows, err := q.QueryContext(ctx, `SELECT test_id, tree, commit_sha, lab, verdict, metric, summary, created_at FROM canaries
		WHERE created_at >= $1 ORDER BY created_at DESC, test_id DESC`, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("store: canaries: %w", err)
	}
	defer rows.Close()
	var out []Canary
	for rows.Next() {
		var c Canary
		var at int64
		if err := rows.Scan(&c.TestID, &c.Tree, &c.Commit, &c.Lab, &c.Verdict, &c.Metric, &c.Summary, &at); err != nil {
			return nil, fmt.Errorf("store: canaries: %w", err)
		}
		c.CreatedAt = time.UnixMilli(at).UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}
