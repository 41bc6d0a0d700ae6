package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// AcquireLease takes the lab pair for holder until now+ttl, unless
// another holder has it and has not let it expire. One statement, so two
// processes racing for a free pair cannot both win.
func (s *Store) AcquireLease(ctx context.Context, pair, holder string, jobID int64, ttl time.Duration) (bool, error) {
	now := s.now()
	_, err := s.DB.ExecContext(ctx, `INSERT INTO lab_leases (pair, holder, job_id, acquired_at, expires_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (pair) DO UPDATE SET holder = excluded.holder, job_id = excluded.job_id, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
		WHERE lab_leases.expires_at < $4 OR lab_leases.holder = excluded.holder`,
		pair, holder, jobID, ms(now), ms(now.Add(ttl)))
	if err != nil {
		return false, fmt.Errorf("store: lease %s: %w", pair, err)
	}
	var h string
	if err := s.DB.QueryRowContext(ctx, `SELECT holder FROM lab_leases WHERE pair = $1`, pair).Scan(&h); err != nil {
		return false, fmt.Errorf("store: lease %s: %w", pair, err)
	}
	return h == holder, nil
}

// AcquireLeaseInTurn is AcquireLease for a pair several jobs wait for:
// the pair goes to the waiter of the lowest rank (the oldest test, so
// series are measured in posting order) among those that asked within
// stale; a waiter that stopped asking (its job died or was rescheduled)
// keeps no one waiting.
func (s *Store) AcquireLeaseInTurn(ctx context.Context, pair, holder string, jobID, rank int64, ttl, stale time.Duration) (bool, error) {
	now := s.now()
	if _, err := s.DB.ExecContext(ctx, `INSERT INTO lab_waiters (pair, holder, rank, seen_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (pair, holder) DO UPDATE SET rank = excluded.rank, seen_at = excluded.seen_at`,
		pair, holder, rank, ms(now)); err != nil {
		return false, fmt.Errorf("store: wait for %s: %w", pair, err)
	}
	var first int64
	if err := s.DB.QueryRowContext(ctx, `SELECT MIN(rank) FROM lab_waiters WHERE pair = $1 AND seen_at >= $2`,
		pair, ms(now.Add(-stale))).Scan(&first); err != nil {
		return false, fmt.Errorf("store: wait for %s: %w", pair, err)
	}
	if rank > first {
		return false, nil
	}
	ok, err := s.AcquireLease(ctx, pair, holder, jobID, ttl)
	if err != nil || !ok {
		return ok, err
	}
	if _, err := s.DB.ExecContext(ctx, `DELETE FROM lab_waiters WHERE pair = $1 AND holder = $2`, pair, holder); err != nil {
		return false, fmt.Errorf("store: wait for %s: %w", pair, err)
	}
	return true, nil
}

// RenewLease extends a held lease; false means it was lost (expired and
// taken by another holder).
func (s *Store) RenewLease(ctx context.Context, pair, holder string, ttl time.Duration) (bool, error) {
	res, err := s.DB.ExecContext(ctx, `UPDATE lab_leases SET expires_at = $3 WHERE pair = $1 AND holder = $2`, pair, holder, ms(s.now().Add(ttl)))
	if err != nil {
		return false, fmt.Errorf("store: renew lease %s: %w", pair, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// ReleaseLease frees a pair held by holder and adds the time held to the
// pair's utilization.
func (s *Store) ReleaseLease(ctx context.Context, pair, holder string) error {
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var acquired int64
	err = tx.QueryRowContext(ctx, `SELECT acquired_at FROM lab_leases WHERE pair = $1 AND holder = $2`, pair, holder).Scan(&acquired)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM lab_leases WHERE pair = $1 AND holder = $2`, pair, holder); err != nil {
		return err
	}
	busy := ms(s.now()) - acquired
	if _, err := tx.ExecContext(ctx, `INSERT INTO lab_usage (pair, busy_ms, runs) VALUES ($1, $2, 1)
		ON CONFLICT (pair) DO UPDATE SET busy_ms = lab_usage.busy_ms + excluded.busy_ms, runs = lab_usage.runs + 1`, pair, busy); err != nil {
		return err
	}
	return tx.Commit()
}

// Lease is a held (or expired, not yet retaken) lab pair.
type Lease struct {
	Pair, Holder string
	JobID        int64
	Acquired     time.Time
	Expires      time.Time
}

// Leases lists the lease table.
func (s *Store) Leases(ctx context.Context) ([]Lease, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT pair, holder, job_id, acquired_at, expires_at FROM lab_leases ORDER BY pair`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		var a, e int64
		if err := rows.Scan(&l.Pair, &l.Holder, &l.JobID, &a, &e); err != nil {
			return nil, err
		}
		l.Acquired, l.Expires = Time(a), Time(e)
		out = append(out, l)
	}
	return out, rows.Err()
}

// LabUsage is a pair's accumulated busy time.
type LabUsage struct {
	Pair string
	Busy time.Duration
	Runs int64
}

// LabUsages lists every pair's accumulated busy time.
func (s *Store) LabUsages(ctx context.Context) ([]LabUsage, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT pair, busy_ms, runs FROM lab_usage ORDER BY pair`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []LabUsage
	for rows.Next() {
		var u LabUsage
		var b int64
		if err := rows.Scan(&u.Pair, &b, &u.Runs); err != nil {
			return nil, err
		}
		u.Busy = time.Duration(b) * time.Millisecond
		out = append(out, u)
	}
	return out, rows.Err()
}

// MainlineState is what a scheduled branch head's test said.
type MainlineState string

const (
	MainlineTesting MainlineState = "testing"
	MainlineGood    MainlineState = "good"
	MainlineBad     MainlineState = "bad"
	MainlineFailed  MainlineState = "failed" // no verdict: the head is neither good nor bad
)

// MainlineRun is one tested head of a scheduled branch.
type MainlineRun struct {
	ID        int64
	Tree      string
	Branch    string
	Commit    string
	TestID    int64
	State     MainlineState
	Metrics   string // JSON: metric -> median
	CreatedAt time.Time
}

// AddMainlineRun records a head once; false when it was already known.
func (s *Store) AddMainlineRun(ctx context.Context, q Querier, r MainlineRun) (bool, error) {
	res, err := q.ExecContext(ctx, `INSERT INTO mainline_runs (tree, branch, commit_sha, test_id, state, metrics, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (tree, branch, commit_sha) DO NOTHING`, r.Tree, r.Branch, r.Commit, r.TestID, r.State, r.Metrics, ms(s.now()))
	if err != nil {
		return false, fmt.Errorf("store: mainline run: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// SetMainlineResult records the outcome of a head's test.
func (s *Store) SetMainlineResult(ctx context.Context, q Querier, testID int64, state MainlineState, metrics string) error {
	_, err := q.ExecContext(ctx, `UPDATE mainline_runs SET state = $2, metrics = $3 WHERE test_id = $1`, testID, state, metrics)
	return err
}

// MainlineHistory lists a branch's tested heads, oldest first; an empty
// tree lists every branch.
func (s *Store) MainlineHistory(ctx context.Context, q Querier, tree, branch string) ([]MainlineRun, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, tree, branch, commit_sha, test_id, state, metrics, created_at FROM mainline_runs
		WHERE ($1 = '' OR (tree = $1 AND branch = $2)) ORDER BY id`, tree, branch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []MainlineRun
	for rows.Next() {
		var r MainlineRun
		var at int64
		if err := rows.Scan(&r.ID, &r.Tree, &r.Branch, &r.Commit, &r.TestID, &r.State, &r.Metrics, &at); err != nil {
			return nil, err
		}
		r.CreatedAt = Time(at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// BisectionState is where a bisection is: searching, confirming the
// culprit, or ended.
type BisectionState string

const (
	BisectionRunning    BisectionState = "running"
	BisectionConfirming BisectionState = "confirming"
	BisectionDone       BisectionState = "done" // culprit confirmed
	BisectionFailed     BisectionState = "failed"
)

// Bisection is a search for the first bad commit.
type Bisection struct {
	ID     int64
	Key    string
	Tree   string
	Good   string
	Bad    string
	Lab    string
	Metric string
	Origin string
	// TestID is the series test whose own patches are bisected (0: a
	// mainline bisection); its reply waits for the outcome.
	TestID int64
	// CulpritPatch is the series' patch (1-based) Culprit was made from.
	CulpritPatch int
	State        BisectionState
	Culprit      string
	Summary      string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// AddBisection creates a bisection once per key.
func (s *Store) AddBisection(ctx context.Context, q Querier, b Bisection) (int64, bool, error) {
	now := ms(s.now())
	res, err := q.ExecContext(ctx, `INSERT INTO bisections (key, tree, good, bad, lab, metric, origin, test_id, state, culprit, summary, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'running', '', '', $9, $9) ON CONFLICT (key) DO NOTHING`,
		b.Key, b.Tree, b.Good, b.Bad, b.Lab, b.Metric, b.Origin, b.TestID, now)
	if err != nil {
		return 0, false, fmt.Errorf("store: add bisection: %w", err)
	}
	n, _ := res.RowsAffected()
	var id int64
	if err := q.QueryRowContext(ctx, `SELECT id FROM bisections WHERE key = $1`, b.Key).Scan(&id); err != nil {
		return 0, false, err
	}
	return id, n == 1, nil
}

const bisectCols = `id, key, tree, good, bad, lab, metric, origin, test_id, culprit_patch, state, culprit, summary, created_at, updated_at`

func scanBisection(sc interface{ Scan(...any) error }) (Bisection, error) {
	var b Bisection
	var c, u int64
	err := sc.Scan(&b.ID, &b.Key, &b.Tree, &b.Good, &b.Bad, &b.Lab, &b.Metric, &b.Origin, &b.TestID, &b.CulpritPatch, &b.State, &b.Culprit, &b.Summary, &c, &u)
	b.CreatedAt, b.UpdatedAt = Time(c), Time(u)
	return b, err
}

// BisectionOfTest is the bisection over series test id's own patches;
// ok is false when there is none.
func (s *Store) BisectionOfTest(ctx context.Context, q Querier, testID int64) (b Bisection, ok bool, err error) {
	b, err = scanBisection(q.QueryRowContext(ctx, `SELECT `+bisectCols+` FROM bisections WHERE test_id = $1 AND test_id <> 0`, testID))
	if errors.Is(err, sql.ErrNoRows) {
		return Bisection{}, false, nil
	}
	return b, err == nil, err
}

// Bisection reads one bisection.
func (s *Store) Bisection(ctx context.Context, q Querier, id int64) (Bisection, error) {
	b, err := scanBisection(q.QueryRowContext(ctx, `SELECT `+bisectCols+` FROM bisections WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("bisection %d: %w", id, ErrNotFound)
	}
	return b, err
}

// Bisections lists the newest bisections first.
func (s *Store) Bisections(ctx context.Context, limit int) ([]Bisection, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT `+bisectCols+` FROM bisections ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Bisection
	for rows.Next() {
		b, err := scanBisection(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// UpdateBisection writes a bisection's state, culprit and summary.
func (s *Store) UpdateBisection(ctx context.Context, q Querier, b Bisection) error {
	_, err := q.ExecContext(ctx, `UPDATE bisections SET state = $2, culprit = $3, summary = $4, culprit_patch = $5, updated_at = $6 WHERE id = $1`,
		b.ID, b.State, b.Culprit, b.Summary, b.CulpritPatch, ms(s.now()))
	return err
}

// AddBisectStep records a step; the same n twice keeps the first.
func (s *Store) AddBisectStep(ctx context.Context, q Querier, id int64, st flow.BisectStep) error {
	_, err := q.ExecContext(ctx, `INSERT INTO bisect_steps (bisection_id, n, phase, commit_sha, outcome, detail, job_id, at, boots) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (bisection_id, n) DO NOTHING`, id, st.N, st.Phase, st.Commit, st.Outcome, st.Detail, st.JobID, ms(s.now()), st.Boots)
	return err
}

// BisectSteps lists a bisection's steps in order.
func (s *Store) BisectSteps(ctx context.Context, q Querier, id int64) ([]flow.BisectStep, error) {
	rows, err := q.QueryContext(ctx, `SELECT n, phase, commit_sha, outcome, detail, job_id, at, boots FROM bisect_steps WHERE bisection_id = $1 ORDER BY n`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []flow.BisectStep
	for rows.Next() {
		var st flow.BisectStep
		var at int64
		if err := rows.Scan(&st.N, &st.Phase, &st.Commit, &st.Outcome, &st.Detail, &st.JobID, &at, &st.Boots); err != nil {
			return nil, err
		}
		st.At = Time(at)
		out = append(out, st)
	}
	return out, rows.Err()
}
