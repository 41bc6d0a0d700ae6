package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// Querier is *sql.DB or *sql.Tx: every method takes one so that a job can
// change our tables and complete itself in one transaction.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("not found")

func ms(t time.Time) int64 { return t.UnixMilli() }

// Time converts a stored millisecond timestamp.
func Time(v int64) time.Time { return time.UnixMilli(v).UTC() }

// SeriesRow is an ingested series; Data is the bot's JSON of its patches.
type SeriesRow struct {
	ID      int64
	MsgID   string
	Version int
	Tree    string
	Subject string
	Author  string
	Link    string
	// Root is the Message-ID replies answer (the cover letter's, or the
	// first patch's); "" where the series' ID already is it.
	Root string
	// List is the list address the series was posted to ("" for none).
	List      string
	Data      []byte
	CreatedAt time.Time
}

// MessageID is the Message-ID of the mail that names the series (its
// cover letter's, else its first patch's), as a reader finds it in the
// thread: Root when MsgID is lore's key for the series rather than a
// mail's.
func (r SeriesRow) MessageID() string { return cmp.Or(r.Root, r.MsgID) }

// MailList is the list address the series was posted to: its row's, or
// for a row stored before the row kept it, its JSON's.
func (r SeriesRow) MailList() string {
	if r.List != "" {
		return r.List
	}
	var ser flow.Series
	if json.Unmarshal(r.Data, &ser) == nil {
		return ser.List
	}
	return ""
}

// AddSeries stores a series once per (msgid, version, tree) and returns its id.
func (s *Store) AddSeries(ctx context.Context, q Querier, r SeriesRow) (int64, error) {
	_, err := q.ExecContext(ctx, `INSERT INTO series (msgid, version, tree, subject, author, link, data, created_at, root, mail_list)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (msgid, version, tree) DO NOTHING`,
		r.MsgID, r.Version, r.Tree, r.Subject, r.Author, r.Link, r.Data, ms(s.now()), r.Root, r.List)
	if err != nil {
		return 0, fmt.Errorf("store: add series: %w", err)
	}
	var id int64
	err = q.QueryRowContext(ctx, `SELECT id FROM series WHERE msgid = $1 AND version = $2 AND tree = $3`, r.MsgID, r.Version, r.Tree).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("store: add series: %w", err)
	}
	return id, nil
}

// AddSeriesReviews adds to a stored series the reviews it lacks (other
// bots' reviews in its thread, flow.Series.Reviews): every poll reads the
// thread again, and a review often comes after the series was stored.
func (s *Store) AddSeriesReviews(ctx context.Context, q Querier, id int64, reviews []flow.Review) error {
	if len(reviews) == 0 {
		return nil
	}
	row, err := s.Series(ctx, q, id)
	if err != nil {
		return err
	}
	var ser flow.Series
	if err := json.Unmarshal(row.Data, &ser); err != nil {
		return fmt.Errorf("store: series %d: %w", id, err)
	}
	n := len(ser.Reviews)
	for _, r := range reviews {
		if !slices.ContainsFunc(ser.Reviews, func(o flow.Review) bool { return o.MessageID == r.MessageID }) {
			ser.Reviews = append(ser.Reviews, r)
		}
	}
	if len(ser.Reviews) == n {
		return nil
	}
	data, err := json.Marshal(ser)
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, `UPDATE series SET data = $1 WHERE id = $2`, data, id); err != nil {
		return fmt.Errorf("store: series %d reviews: %w", id, err)
	}
	return nil
}

// Series reads one series.
func (s *Store) Series(ctx context.Context, q Querier, id int64) (SeriesRow, error) {
	var r SeriesRow
	var at int64
	err := q.QueryRowContext(ctx, `SELECT id, msgid, version, tree, subject, author, link, data, created_at, root, mail_list FROM series WHERE id = $1`, id).
		Scan(&r.ID, &r.MsgID, &r.Version, &r.Tree, &r.Subject, &r.Author, &r.Link, &r.Data, &at, &r.Root, &r.List)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("series %d: %w", id, ErrNotFound)
	}
	r.CreatedAt = Time(at)
	return r, err
}

// Test kinds.
const (
	KindSeries   = "series"   // a series from the lists or a GitHub command
	KindRef      = "ref"      // a tree ref, no patches
	KindMainline = "mainline" // a scheduled branch head against the last good one
	KindCanary   = "canary"   // the A/A canary: the default base against itself
)

// State is where a test is in its life.
type State string

const (
	StateQueued   State = "queued"
	StateBuilding State = "building"
	StateTesting  State = "testing"
	StateDone     State = "done"
	StateCanceled State = "canceled"
	StateFailed   State = "failed" // infrastructure gave up: no verdict on the patch
)

// Test is one comparison of a candidate against its base.
type Test struct {
	ID         int64
	Key        string // unique: what makes a test the same test
	Kind       string
	SeriesID   int64
	Tree       string
	Ref        string // branch or ref for KindRef/KindMainline
	Base       string // base commit
	BaseReason string // how the base was chosen, for the report
	BaseBranch string // the branch of Tree the base is on ("" if unknown)
	Candidate  string // candidate commit (after apply)
	Lab        string
	Params     string
	Origin     string // JSON: where the request came from, where the reply goes
	Thread     string // the conversation it belongs to (github:o/r#N, a Message-ID)
	State      State
	Verdict    flow.Outcome
	Summary    string
	// Detail is the deciding stage's structured account of the verdict
	// (JSON: the statistics' judgement, where a patch failed to apply,
	// the compiler's diagnostics), stored once and handed to the reply.
	Detail       string
	Rounds       int
	BaseArtifact string
	CandArtifact string
	// BaseDebugArtifact and CandDebugArtifact are the same commits built
	// for the debug profile (lab.debug); "" when the test has none.
	BaseDebugArtifact string
	CandDebugArtifact string
	// FixOf is the test whose report this series closes (a fix
	// follow-up: the same test rerun with the fix), 0 for none.
	FixOf int64
	// ApplyOn is the commit the series was applied on when it is not
	// Base: the fixed test's candidate, the fix on top of its series.
	ApplyOn string
	// Cause is why the test was started (CausePosting, CauseCommand,
	// CauseRetest; "" for the bot's own), set once: what the daily
	// bounds count, never read back out of the key, which carries a
	// Message-ID the sender chose.
	Cause     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Why a test was started.
const (
	CausePosting = "posting" // a series posted to a list
	CauseCommand = "command" // asked for in a reply, an issue or on the command line
	CauseRetest  = "retest"  // a retest command: another run of a test
)

// AddTest creates a test unless one with its key exists; it returns the
// id and whether this call created it.
func (s *Store) AddTest(ctx context.Context, q Querier, t Test) (int64, bool, error) {
	now := ms(s.now())
	res, err := q.ExecContext(ctx, `INSERT INTO tests (key, kind, series_id, tree, ref, base, candidate, lab, params, origin, thread, state, verdict, summary, rounds, base_artifact, cand_artifact, created_at, updated_at, cause)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, '', '', 0, '', '', $13, $13, $14) ON CONFLICT (key) DO NOTHING`,
		t.Key, t.Kind, t.SeriesID, t.Tree, t.Ref, t.Base, t.Candidate, t.Lab, t.Params, t.Origin, t.Thread, StateQueued, now, t.Cause)
	if err != nil {
		return 0, false, fmt.Errorf("store: add test: %w", err)
	}
	n, _ := res.RowsAffected()
	var id int64
	if err := q.QueryRowContext(ctx, `SELECT id FROM tests WHERE key = $1`, t.Key).Scan(&id); err != nil {
		return 0, false, fmt.Errorf("store: add test: %w", err)
	}
	return id, n == 1, nil
}

const testCols = `id, key, kind, series_id, tree, ref, base, candidate, lab, params, origin, thread, state, verdict, summary, rounds, base_artifact, cand_artifact, created_at, updated_at, base_reason, base_branch, detail, fix_of, apply_on, base_debug_artifact, cand_debug_artifact, cause`

func scanTest(sc interface{ Scan(...any) error }) (Test, error) {
	var t Test
	var c, u int64
	err := sc.Scan(&t.ID, &t.Key, &t.Kind, &t.SeriesID, &t.Tree, &t.Ref, &t.Base, &t.Candidate, &t.Lab, &t.Params, &t.Origin, &t.Thread,
		&t.State, &t.Verdict, &t.Summary, &t.Rounds, &t.BaseArtifact, &t.CandArtifact, &c, &u, &t.BaseReason, &t.BaseBranch, &t.Detail, &t.FixOf, &t.ApplyOn, &t.BaseDebugArtifact, &t.CandDebugArtifact, &t.Cause)
	t.CreatedAt, t.UpdatedAt = Time(c), Time(u)
	return t, err
}

// Test reads one test.
func (s *Store) Test(ctx context.Context, q Querier, id int64) (Test, error) {
	t, err := scanTest(q.QueryRowContext(ctx, `SELECT `+testCols+` FROM tests WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("test %d: %w", id, ErrNotFound)
	}
	return t, err
}

// TestByKey reads the test with a key.
func (s *Store) TestByKey(ctx context.Context, q Querier, key string) (Test, error) {
	t, err := scanTest(q.QueryRowContext(ctx, `SELECT `+testCols+` FROM tests WHERE key = $1`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("test %q: %w", key, ErrNotFound)
	}
	return t, err
}

// LatestInThread returns the newest test of a conversation.
func (s *Store) LatestInThread(ctx context.Context, q Querier, thread string) (Test, error) {
	t, err := scanTest(q.QueryRowContext(ctx, `SELECT `+testCols+` FROM tests WHERE thread = $1 ORDER BY id DESC LIMIT 1`, thread))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("no test in %s: %w", thread, ErrNotFound)
	}
	return t, err
}

// UpdateTest writes a test's mutable fields, unless the test was
// canceled meanwhile: a job finishing after a cancel must not revive it.
func (s *Store) UpdateTest(ctx context.Context, q Querier, t Test) error {
	_, err := q.ExecContext(ctx, `UPDATE tests SET base = $2, candidate = $3, state = $4, verdict = $5, summary = $6, rounds = $7,
		base_artifact = $8, cand_artifact = $9, updated_at = $10, tree = $11, base_reason = $12, base_branch = $13, detail = $14,
		fix_of = $15, apply_on = $16, base_debug_artifact = $17, cand_debug_artifact = $18 WHERE id = $1 AND state <> 'canceled'`,
		t.ID, t.Base, t.Candidate, t.State, t.Verdict, t.Summary, t.Rounds, t.BaseArtifact, t.CandArtifact, ms(s.now()), t.Tree, t.BaseReason,
		t.BaseBranch, t.Detail, t.FixOf, t.ApplyOn, t.BaseDebugArtifact, t.CandDebugArtifact)
	if err != nil {
		return fmt.Errorf("store: update test %d: %w", t.ID, err)
	}
	return nil
}

// ReportedTest is the newest test of a series version (the Message-ID
// its replies answer, SeriesRow.Root, or its ID where that is the
// Message-ID, and its version) whose verdict the reply asked the author
// to fix: what a later series' Closes: naming that reply closes. ok is
// false when there is none.
func (s *Store) ReportedTest(ctx context.Context, q Querier, root string, version int) (t Test, ok bool, err error) {
	t, err = scanTest(q.QueryRowContext(ctx, `SELECT `+testCols+` FROM tests
		WHERE kind = $1 AND verdict IN ('REGRESSION', 'CRASH', 'BUILD_FAILED')
		AND series_id IN (SELECT id FROM series WHERE (root = $2 OR msgid = $2) AND version = $3) ORDER BY id DESC LIMIT 1`, KindSeries, root, version))
	if errors.Is(err, sql.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, fmt.Errorf("store: reported test of %s v%d: %w", root, version, err)
	}
	return t, true, nil
}

// CulpritTest is the mainline test whose regression a finished
// bisection blamed on a commit starting with prefix (a Fixes: hash,
// at least 8 hex digits): the newest, ok false when there is none.
func (s *Store) CulpritTest(ctx context.Context, q Querier, prefix string) (t Test, ok bool, err error) {
	if len(prefix) < 8 || strings.Trim(strings.ToLower(prefix), "0123456789abcdef") != "" {
		return t, false, nil
	}
	t, err = scanTest(q.QueryRowContext(ctx, `SELECT `+testCols+` FROM tests
		WHERE kind = $1 AND verdict IN ('REGRESSION', 'CRASH') AND candidate IN
		(SELECT bad FROM bisections WHERE test_id = 0 AND state = 'done' AND culprit LIKE $2) ORDER BY id DESC LIMIT 1`,
		KindMainline, strings.ToLower(prefix)+"%"))
	if errors.Is(err, sql.ErrNoRows) {
		return t, false, nil
	}
	if err != nil {
		return t, false, fmt.Errorf("store: test blaming %s: %w", prefix, err)
	}
	return t, true, nil
}

// FixesOf lists the fix follow-ups of a test, oldest first.
func (s *Store) FixesOf(ctx context.Context, q Querier, id int64) ([]Test, error) {
	return queryTests(ctx, q, fmt.Sprintf("fixes of test %d", id), `SELECT `+testCols+` FROM tests WHERE fix_of = $1 ORDER BY id`, id)
}

// Tests lists the newest tests first.
func (s *Store) Tests(ctx context.Context, q Querier, limit int) ([]Test, error) {
	return queryTests(ctx, q, "tests", `SELECT `+testCols+` FROM tests ORDER BY id DESC LIMIT $1`, limit)
}

// queryTests runs a query of testCols; what names it in errors.
func queryTests(ctx context.Context, q Querier, what, query string, args ...any) ([]Test, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	defer rows.Close()
	var out []Test
	for rows.Next() {
		t, err := scanTest(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Run is one lab invocation for one side of a test.
type Run struct {
	ID         int64
	TestID     int64
	JobID      int64
	Round      int
	Role       string // "base" or "candidate" (a lossy boot says so in Sample.Profile)
	Commit     string
	Lab        string
	Samples    []flow.Sample
	Error      string
	StartedAt  time.Time
	FinishedAt time.Time
}

// SaveRun records a run, replacing a crashed attempt of the same round.
func (s *Store) SaveRun(ctx context.Context, q Querier, r Run) error {
	b, err := json.Marshal(r.Samples)
	if err != nil {
		return err
	}
	_, err = q.ExecContext(ctx, `INSERT INTO runs (test_id, job_id, round, role, commit_sha, lab, samples, error, started_at, finished_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (test_id, round, role) DO UPDATE SET job_id = excluded.job_id, commit_sha = excluded.commit_sha, lab = excluded.lab,
		samples = excluded.samples, error = excluded.error, started_at = excluded.started_at, finished_at = excluded.finished_at`,
		r.TestID, r.JobID, r.Round, r.Role, r.Commit, r.Lab, string(b), r.Error, ms(r.StartedAt), ms(r.FinishedAt))
	if err != nil {
		return fmt.Errorf("store: save run: %w", err)
	}
	return nil
}

// Runs lists a test's runs in round order.
func (s *Store) Runs(ctx context.Context, q Querier, testID int64) ([]Run, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, test_id, job_id, round, role, commit_sha, lab, samples, error, started_at, finished_at
		FROM runs WHERE test_id = $1 ORDER BY round, role`, testID)
	if err != nil {
		return nil, fmt.Errorf("store: runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var r Run
		var samples string
		var st, fin int64
		if err := rows.Scan(&r.ID, &r.TestID, &r.JobID, &r.Round, &r.Role, &r.Commit, &r.Lab, &samples, &r.Error, &st, &fin); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(samples), &r.Samples); err != nil {
			return nil, fmt.Errorf("store: run %d samples: %w", r.ID, err)
		}
		r.StartedAt, r.FinishedAt = Time(st), Time(fin)
		out = append(out, r)
	}
	return out, rows.Err()
}

// BaseKey is what a cached base result is valid for.
type BaseKey struct{ Tree, Commit, Lab, Params string }

// BaseResults returns the cached base samples measured within maxAge.
func (s *Store) BaseResults(ctx context.Context, q Querier, k BaseKey, maxAge time.Duration) ([]flow.Sample, bool, error) {
	var samples string
	var at int64
	err := q.QueryRowContext(ctx, `SELECT samples, measured_at FROM base_results WHERE tree = $1 AND commit_sha = $2 AND lab = $3 AND params = $4`,
		k.Tree, k.Commit, k.Lab, k.Params).Scan(&samples, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: base results: %w", err)
	}
	if s.now().Sub(Time(at)) > maxAge {
		return nil, false, nil
	}
	var out []flow.Sample
	if err := json.Unmarshal([]byte(samples), &out); err != nil {
		return nil, false, fmt.Errorf("store: base results: %w", err)
	}
	return out, true, nil
}

// PutBaseResults caches base samples, replacing stale ones.
func (s *Store) PutBaseResults(ctx context.Context, q Querier, k BaseKey, samples []flow.Sample) error {
	b, err := json.Marshal(samples)
	if err != nil {
		return err
	}
	_, err = q.ExecContext(ctx, `INSERT INTO base_results (tree, commit_sha, lab, params, samples, measured_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (tree, commit_sha, lab, params) DO UPDATE SET samples = excluded.samples, measured_at = excluded.measured_at`,
		k.Tree, k.Commit, k.Lab, k.Params, string(b), ms(s.now()))
	if err != nil {
		return fmt.Errorf("store: put base results: %w", err)
	}
	return nil
}

// TraceLine is one line of a job's trace.
type TraceLine struct {
	At   time.Time
	Line string
}

// AppendTrace adds lines to a job's trace, after any earlier attempt's.
func (s *Store) AppendTrace(ctx context.Context, jobID int64, lines ...string) error {
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var seq int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM job_traces WHERE job_id = $1`, jobID).Scan(&seq); err != nil {
		return err
	}
	now := ms(s.now())
	for _, l := range lines {
		seq++
		if _, err := tx.ExecContext(ctx, `INSERT INTO job_traces (job_id, seq, at, line) VALUES ($1, $2, $3, $4)`, jobID, seq, now, l); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// LastTraceLine is the last line of a job's trace ("" while it has none).
func (s *Store) LastTraceLine(ctx context.Context, jobID int64) (string, error) {
	var line string
	err := s.DB.QueryRowContext(ctx, `SELECT line FROM job_traces WHERE job_id = $1 ORDER BY seq DESC LIMIT 1`, jobID).Scan(&line)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return line, err
}

// Trace reads a job's trace.
func (s *Store) Trace(ctx context.Context, jobID int64) ([]TraceLine, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT at, line FROM job_traces WHERE job_id = $1 ORDER BY seq`, jobID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TraceLine
	for rows.Next() {
		var at int64
		var l TraceLine
		if err := rows.Scan(&at, &l.Line); err != nil {
			return nil, err
		}
		l.At = Time(at)
		out = append(out, l)
	}
	return out, rows.Err()
}

// RecordJob adds one finished job attempt to the duration statistics.
func (s *Store) RecordJob(ctx context.Context, kind, outcome string, d time.Duration) error {
	_, err := s.DB.ExecContext(ctx, `INSERT INTO job_stats (kind, outcome, count, total_ms) VALUES ($1, $2, 1, $3)
		ON CONFLICT (kind, outcome) DO UPDATE SET count = job_stats.count + 1, total_ms = job_stats.total_ms + excluded.total_ms`,
		kind, outcome, d.Milliseconds())
	return err
}

// JobStat is the count and total duration of job attempts by outcome.
type JobStat struct {
	Kind, Outcome string
	Count         int64
	Total         time.Duration
}

// JobStats lists the duration statistics.
func (s *Store) JobStats(ctx context.Context) ([]JobStat, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT kind, outcome, count, total_ms FROM job_stats ORDER BY kind, outcome`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []JobStat
	for rows.Next() {
		var j JobStat
		var total int64
		if err := rows.Scan(&j.Kind, &j.Outcome, &j.Count, &total); err != nil {
			return nil, err
		}
		j.Total = time.Duration(total) * time.Millisecond
		out = append(out, j)
	}
	return out, rows.Err()
}

// Checkpoint reads where a mail source stopped ("" when never read).
func (s *Store) Checkpoint(ctx context.Context, q Querier, source string) (string, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM checkpoints WHERE source = $1`, source).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// SetCheckpoint records where a mail source stopped.
func (s *Store) SetCheckpoint(ctx context.Context, q Querier, source, value string) error {
	_, err := q.ExecContext(ctx, `INSERT INTO checkpoints (source, value, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (source) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, source, value, ms(s.now()))
	return err
}

// PutArtifact records which worker holds an artifact.
func (s *Store) PutArtifact(ctx context.Context, key, workerURL string) error {
	_, err := s.DB.ExecContext(ctx, `INSERT INTO artifacts (key, worker_url, created_at) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET worker_url = excluded.worker_url, created_at = excluded.created_at`, key, workerURL, ms(s.now()))
	return err
}

// ArtifactsInUse are the artifact keys a job may still boot: those of
// tests not finished (queued, building, testing: a lab round is queued
// or running), and those of finished tests whose own bisection runs (it
// boots each step beside the test's base kernel).
func (s *Store) ArtifactsInUse(ctx context.Context, q Querier) (map[string]bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT base_artifact, cand_artifact, base_debug_artifact, cand_debug_artifact FROM tests
		WHERE state IN ($1, $2, $3) OR id IN (SELECT test_id FROM bisections WHERE state IN ($4, $5))`,
		StateQueued, StateBuilding, StateTesting, BisectionRunning, BisectionConfirming)
	if err != nil {
		return nil, fmt.Errorf("store: artifacts in use: %w", err)
	}
	defer rows.Close()
	keys := map[string]bool{}
	for rows.Next() {
		var base, cand, baseDebug, candDebug string
		if err := rows.Scan(&base, &cand, &baseDebug, &candDebug); err != nil {
			return nil, fmt.Errorf("store: artifacts in use: %w", err)
		}
		for _, k := range []string{base, cand, baseDebug, candDebug} {
			if k != "" {
				keys[k] = true
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: artifacts in use: %w", err)
	}
	return keys, nil
}

// ArtifactWorker says which worker holds an artifact.
func (s *Store) ArtifactWorker(ctx context.Context, key string) (string, error) {
	var u string
	err := s.DB.QueryRowContext(ctx, `SELECT worker_url FROM artifacts WHERE key = $1`, key).Scan(&u)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("artifact %s: %w", key, ErrNotFound)
	}
	return u, err
}

// FirstSeen records key and reports whether this is its first sighting:
// a webhook delivery and a poll seeing the same comment act once.
func (s *Store) FirstSeen(ctx context.Context, key string) (bool, error) {
	res, err := s.DB.ExecContext(ctx, `INSERT INTO github_seen (key, at) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, key, ms(s.now()))
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// Seen reports whether FirstSeen recorded key, recording nothing.
func (s *Store) Seen(ctx context.Context, key string) (bool, error) {
	var n int
	err := s.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM github_seen WHERE key = $1`, key).Scan(&n)
	return n > 0, err
}

// State reads a small persistent value (ETags, poll cursors, a mail
// command's DKIM verdict).
func (s *Store) State(ctx context.Context, key string) (string, error) {
	var v string
	err := s.DB.QueryRowContext(ctx, `SELECT value FROM github_state WHERE key = $1`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// SetState writes a small persistent value.
func (s *Store) SetState(ctx context.Context, key, value string) error {
	_, err := s.DB.ExecContext(ctx, `INSERT INTO github_state (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
	return err
}

// Mail is one archived message kept for series assembly.
type Mail struct {
	List     string
	Pos      string
	Deleted  bool
	Received time.Time
	// Ingested is when the bot first read it (the first copy stored
	// keeps its time); Received when unknown.
	Ingested time.Time
	Raw      []byte
}

// AddMail keeps a message durably (once per list, position and kind), so
// the mail source's checkpoint may move past it.
func (s *Store) AddMail(ctx context.Context, m Mail) error {
	del := 0
	if m.Deleted {
		del = 1
	}
	ingested := int64(0)
	if !m.Ingested.IsZero() {
		ingested = ms(m.Ingested)
	}
	_, err := s.DB.ExecContext(ctx, `INSERT INTO lore_mail (list, pos, deleted, received, ingested, raw) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (list, pos, deleted) DO NOTHING`, m.List, m.Pos, del, ms(m.Received), ingested, m.Raw)
	if err != nil {
		return fmt.Errorf("store: add mail: %w", err)
	}
	return nil
}

// MailSince lists the messages received since t, in arrival order.
func (s *Store) MailSince(ctx context.Context, t time.Time) ([]Mail, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT list, pos, deleted, received, ingested, raw FROM lore_mail WHERE received >= $1 ORDER BY id`, ms(t))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Mail
	for rows.Next() {
		var m Mail
		var del int
		var at, ingested int64
		if err := rows.Scan(&m.List, &m.Pos, &del, &at, &ingested, &m.Raw); err != nil {
			return nil, err
		}
		m.Deleted, m.Received, m.Ingested = del == 1, Time(at), Time(at)
		if ingested != 0 {
			m.Ingested = Time(ingested)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Posting is who posted a tested series, and to which list.
type Posting struct{ Author, List string }

// PostingsSince lists the author and list of each series test created
// since t from a posting (CausePosting: no command, no GitHub request, no
// retest, none held or canceled), one entry per test: what the daily test
// bounds of a sender and of a list count.
func (s *Store) PostingsSince(ctx context.Context, q Querier, t time.Time) ([]Posting, error) {
	rows, err := q.QueryContext(ctx, `SELECT s.author, s.mail_list FROM tests t JOIN series s ON s.id = t.series_id
		WHERE t.kind = $1 AND t.cause = $2 AND t.created_at >= $3 AND t.state <> 'canceled'`, KindSeries, CausePosting, ms(t))
	if err != nil {
		return nil, fmt.Errorf("store: postings: %w", err)
	}
	defer rows.Close()
	var out []Posting
	for rows.Next() {
		var p Posting
		if err := rows.Scan(&p.Author, &p.List); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// CommandTest is a series test a command started: the series' author
// and the test's origin (the command, with its authenticated sender).
type CommandTest struct {
	Author string
	Origin []byte
}

// CommandTestsSince lists the series tests that commands and retests
// started since t (cause CauseCommand or CauseRetest), canceled ones
// aside: what an author's own commands add to their daily bound.
func (s *Store) CommandTestsSince(ctx context.Context, q Querier, t time.Time) ([]CommandTest, error) {
	rows, err := q.QueryContext(ctx, `SELECT s.author, t.origin FROM tests t JOIN series s ON s.id = t.series_id
		WHERE t.kind = $1 AND t.cause IN ($2, $3) AND t.created_at >= $4 AND t.state <> 'canceled'`, KindSeries, CauseCommand, CauseRetest, ms(t))
	if err != nil {
		return nil, fmt.Errorf("store: command tests: %w", err)
	}
	defer rows.Close()
	var out []CommandTest
	for rows.Next() {
		var c CommandTest
		var origin string
		if err := rows.Scan(&c.Author, &origin); err != nil {
			return nil, fmt.Errorf("store: command tests: %w", err)
		}
		c.Origin = []byte(origin)
		out = append(out, c)
	}
	return out, rows.Err()
}

// RewriteSeries passes every stored series' data through fix, in one
// transaction, and stores what fix changed: how a bot upgrades the rows
// an older one wrote. It returns how many rows changed; an error from
// fix names its row and changes none.
func (s *Store) RewriteSeries(ctx context.Context, fix func(data []byte) ([]byte, bool, error)) (int, error) {
	tx, err := s.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("store: rewrite series: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT id, data FROM series ORDER BY id`)
	if err != nil {
		return 0, fmt.Errorf("store: rewrite series: %w", err)
	}
	type row struct {
		id   int64
		data []byte
	}
	var changed []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.data); err != nil {
			rows.Close()
			return 0, fmt.Errorf("store: rewrite series: %w", err)
		}
		data, ok, err := fix(r.data)
		if err != nil {
			rows.Close()
			return 0, fmt.Errorf("series %d: %w", r.id, err)
		}
		if ok {
			changed = append(changed, row{r.id, data})
		}
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("store: rewrite series: %w", err)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("store: rewrite series: %w", err)
	}
	for _, r := range changed {
		if _, err := tx.ExecContext(ctx, `UPDATE series SET data = $1 WHERE id = $2`, r.data, r.id); err != nil {
			return 0, fmt.Errorf("store: rewrite series %d: %w", r.id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("store: rewrite series: %w", err)
	}
	return len(changed), nil
}
