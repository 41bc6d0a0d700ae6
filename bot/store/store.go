// Package store is the bot's database: River's job tables plus our own
// (series, tests, runs, results, the base-result cache, lab leases, job
// traces, mainline history, bisections), on embedded SQLite for one
// machine or PostgreSQL for several, with the same SQL for both.
package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdmabot/rdmabot/internal/flock"
	"github.com/rdmabot/rdmabot/internal/migrate"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", no cgo
)

// Dialect names the database behind a Store.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// Store is the open database. Its SQL uses $N placeholders, which both
// modernc.org/sqlite and pgx accept.
type Store struct {
	DB      *sql.DB
	Dialect Dialect
	now     func() time.Time
}

// Open opens dbURL (a postgres:// URL) or, when it is empty, the SQLite
// file rdmabot.db in dataDir, and migrates River's tables and ours.
func Open(ctx context.Context, dbURL, dataDir string) (*Store, error) {
	var s *Store
	if dbURL == "" {
		if err := os.MkdirAll(dataDir, 0o755); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		path := filepath.Join(dataDir, "rdmabot.db")
		// The server and a CLI command may open a new database at once:
		// creating it switches it to WAL, which SQLite does without
		// waiting on busy_timeout (SQLITE_BUSY at once), and then both
		// migrate. Both steps run under one lock file.
		unlock, err := flock.Exclusive(ctx, path+".migrate-lock")
		if err != nil {
			return nil, fmt.Errorf("store: migration lock: %w", err)
		}
		defer unlock()
		// WAL lets readers run beside the one writer; busy_timeout rides
		// out a second process (rdmabot status) touching the file. It comes
		// first: the pragmas run in order, and switching to WAL takes a lock
		// that a starting serve may hold (SQLITE_BUSY at once otherwise).
		// synchronous FULL syncs the WAL at every commit: the outbox
		// ledger's "sent" is in this file, and NORMAL may lose the last
		// commits on power loss, so a reply would be sent again.
		// _txlock=immediate: a transaction takes the write lock at BEGIN,
		// where busy_timeout applies. A deferred one that has read cannot
		// wait for another process's write: SQLite fails it at once with
		// SQLITE_BUSY (River's transactions read, then write).
		dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, fmt.Errorf("store: open %s: %w", path, err)
		}
		// One connection: SQLite has one writer, and River's SQLite driver
		// returns SQLITE_BUSY under concurrent connections.
		db.SetMaxOpenConns(1)
		s = &Store{DB: db, Dialect: SQLite}
	} else {
		db, err := sql.Open("pgx", dbURL)
		if err != nil {
			return nil, fmt.Errorf("store: open postgres: %w", err)
		}
		db.SetMaxOpenConns(16)
		s = &Store{DB: db, Dialect: Postgres}
	}
	s.now = time.Now
	if err := s.DB.PingContext(ctx); err != nil {
		s.DB.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := s.migrate(ctx); err != nil {
		s.DB.Close()
		return nil, err
	}
	return s, nil
}

// SetClock injects the clock used for leases, caches and timestamps.
func (s *Store) SetClock(now func() time.Time) { s.now = now }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// Close closes the database.
func (s *Store) Close() error { return s.DB.Close() }

// Driver is River's driver for this database; both are over *sql.Tx.
func (s *Store) Driver() riverdriver.Driver[*sql.Tx] {
	if s.Dialect == SQLite {
		return riversqlite.New(s.DB)
	}
	return riverdatabasesql.New(s.DB)
}

func (s *Store) migrate(ctx context.Context) error {
	m, err := rivermigrate.New(s.Driver(), nil)
	if err != nil {
		return fmt.Errorf("store: river migrator: %w", err)
	}
	if s.Dialect == Postgres {
		// Several processes may start at once: serialize migrations.
		if _, err := s.DB.ExecContext(ctx, "SELECT pg_advisory_lock(4845)"); err != nil {
			return fmt.Errorf("store: migration lock: %w", err)
		}
		defer s.DB.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(4845)")
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("store: river migrations: %w", err)
	}
	dialected := make([]string, len(migrations))
	for i, m := range migrations {
		dialected[i] = s.dialectSQL(m)
	}
	if err := migrate.Apply(ctx, s.DB, "rdmabot_migration", dialected, s.now); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// dialectSQL fills the two spots where SQLite and PostgreSQL DDL differ.
func (s *Store) dialectSQL(q string) string {
	if s.Dialect == SQLite {
		return strings.NewReplacer("{{pk}}", "INTEGER PRIMARY KEY AUTOINCREMENT", "{{blob}}", "BLOB").Replace(q)
	}
	return strings.NewReplacer("{{pk}}", "BIGSERIAL PRIMARY KEY", "{{blob}}", "BYTEA").Replace(q)
}

// migrations are append-only; each runs once in its own transaction
// (migrate.Apply).
// Times are Unix milliseconds in BIGINT so both databases agree.
var migrations = []string{`
CREATE TABLE series (
	id {{pk}},
	msgid TEXT NOT NULL,
	version INTEGER NOT NULL,
	tree TEXT NOT NULL,
	subject TEXT NOT NULL,
	author TEXT NOT NULL,
	link TEXT NOT NULL,
	data {{blob}} NOT NULL,
	created_at BIGINT NOT NULL,
	UNIQUE (msgid, version, tree)
);
CREATE TABLE tests (
	id {{pk}},
	key TEXT NOT NULL UNIQUE,
	kind TEXT NOT NULL,
	series_id BIGINT,
	tree TEXT NOT NULL,
	ref TEXT NOT NULL,
	base TEXT NOT NULL,
	candidate TEXT NOT NULL,
	lab TEXT NOT NULL,
	params TEXT NOT NULL,
	origin TEXT NOT NULL,
	thread TEXT NOT NULL,
	state TEXT NOT NULL,
	verdict TEXT NOT NULL,
	summary TEXT NOT NULL,
	rounds INTEGER NOT NULL,
	base_artifact TEXT NOT NULL,
	cand_artifact TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE INDEX tests_thread ON tests (thread);
CREATE TABLE runs (
	id {{pk}},
	test_id BIGINT NOT NULL,
	job_id BIGINT NOT NULL,
	round INTEGER NOT NULL,
	role TEXT NOT NULL,
	commit_sha TEXT NOT NULL,
	lab TEXT NOT NULL,
	samples TEXT NOT NULL,
	error TEXT NOT NULL,
	started_at BIGINT NOT NULL,
	finished_at BIGINT NOT NULL,
	UNIQUE (test_id, round, role)
);
CREATE TABLE base_results (
	tree TEXT NOT NULL,
	commit_sha TEXT NOT NULL,
	lab TEXT NOT NULL,
	params TEXT NOT NULL,
	samples TEXT NOT NULL,
	measured_at BIGINT NOT NULL,
	PRIMARY KEY (tree, commit_sha, lab, params)
);
CREATE TABLE lab_leases (
	pair TEXT PRIMARY KEY,
	holder TEXT NOT NULL,
	job_id BIGINT NOT NULL,
	acquired_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL
);
CREATE TABLE lab_usage (
	pair TEXT PRIMARY KEY,
	busy_ms BIGINT NOT NULL,
	runs BIGINT NOT NULL
);
CREATE TABLE job_traces (
	job_id BIGINT NOT NULL,
	seq INTEGER NOT NULL,
	at BIGINT NOT NULL,
	line TEXT NOT NULL,
	PRIMARY KEY (job_id, seq)
);
CREATE TABLE job_stats (
	kind TEXT NOT NULL,
	outcome TEXT NOT NULL,
	count BIGINT NOT NULL,
	total_ms BIGINT NOT NULL,
	PRIMARY KEY (kind, outcome)
);
CREATE TABLE mainline_runs (
	id {{pk}},
	tree TEXT NOT NULL,
	branch TEXT NOT NULL,
	commit_sha TEXT NOT NULL,
	test_id BIGINT NOT NULL,
	state TEXT NOT NULL,
	metrics TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	UNIQUE (tree, branch, commit_sha)
);
CREATE TABLE bisections (
	id {{pk}},
	key TEXT NOT NULL UNIQUE,
	tree TEXT NOT NULL,
	good TEXT NOT NULL,
	bad TEXT NOT NULL,
	lab TEXT NOT NULL,
	metric TEXT NOT NULL,
	origin TEXT NOT NULL,
	state TEXT NOT NULL,
	culprit TEXT NOT NULL,
	summary TEXT NOT NULL,
	created_at BIGINT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE TABLE bisect_steps (
	bisection_id BIGINT NOT NULL,
	n INTEGER NOT NULL,
	phase TEXT NOT NULL,
	commit_sha TEXT NOT NULL,
	outcome TEXT NOT NULL,
	detail TEXT NOT NULL,
	job_id BIGINT NOT NULL,
	at BIGINT NOT NULL,
	PRIMARY KEY (bisection_id, n)
);
CREATE TABLE checkpoints (
	source TEXT PRIMARY KEY,
	value TEXT NOT NULL,
	updated_at BIGINT NOT NULL
);
CREATE TABLE artifacts (
	key TEXT PRIMARY KEY,
	worker_url TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE github_seen (
	key TEXT PRIMARY KEY,
	at BIGINT NOT NULL
);
CREATE TABLE github_state (
	key TEXT PRIMARY KEY,
	value TEXT NOT NULL
)`,
	`
CREATE TABLE lore_mail (
	id {{pk}},
	list TEXT NOT NULL,
	pos TEXT NOT NULL,
	deleted INTEGER NOT NULL,
	received BIGINT NOT NULL,
	raw {{blob}} NOT NULL,
	UNIQUE (list, pos, deleted)
);
CREATE INDEX lore_mail_received ON lore_mail (received)`,
	// How the base was chosen: every report states it.
	`ALTER TABLE tests ADD COLUMN base_reason TEXT NOT NULL DEFAULT ''`,
	// The base's branch, and the verdict's structured account (JSON),
	// decided once and read back by every reply.
	`ALTER TABLE tests ADD COLUMN base_branch TEXT NOT NULL DEFAULT '';
ALTER TABLE tests ADD COLUMN detail TEXT NOT NULL DEFAULT ''`,
	// Each serve process beats here; the running jobs of one that stopped
	// beating are taken over within a minute, not after rescue_after.
	`
CREATE TABLE workers (
	id TEXT PRIMARY KEY,
	beat_at BIGINT NOT NULL
)`,
	// Jobs waiting for a lab pair: the pair goes to the oldest test first.
	`
CREATE TABLE lab_waiters (
	pair TEXT NOT NULL,
	holder TEXT NOT NULL,
	rank BIGINT NOT NULL,
	seen_at BIGINT NOT NULL,
	PRIMARY KEY (pair, holder)
)`,
	// When the bot first read each mail: an incomplete series' grace
	// period runs from it (0 for mail stored before: its received).
	`ALTER TABLE lore_mail ADD COLUMN ingested BIGINT NOT NULL DEFAULT 0`,
	// The A/A canary's comparisons: one kernel against itself, so every
	// REGRESSION or IMPROVEMENT is a false alarm of the metric named.
	`
CREATE TABLE canaries (
	test_id BIGINT PRIMARY KEY,
	tree TEXT NOT NULL,
	commit_sha TEXT NOT NULL,
	lab TEXT NOT NULL,
	verdict TEXT NOT NULL,
	metric TEXT NOT NULL,
	summary TEXT NOT NULL,
	created_at BIGINT NOT NULL
)`,
	// Each boot's whole serial consoles, gzipped, named by their hash;
	// a sample holds the names (Sample.Consoles).
	`
CREATE TABLE consoles (
	id TEXT PRIMARY KEY,
	gz {{blob}} NOT NULL,
	created_at BIGINT NOT NULL
)`,
	// A bisection over a series' own patches belongs to its test and
	// names the patch it blames; each step counts the boots it took.
	`ALTER TABLE bisections ADD COLUMN test_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE bisections ADD COLUMN culprit_patch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bisect_steps ADD COLUMN boots INTEGER NOT NULL DEFAULT 0`,
	// A fix follow-up reruns the test whose report it closes (fix_of)
	// with the fix applied on apply_on (that test's candidate, or "":
	// on its base, as a new version).
	`ALTER TABLE tests ADD COLUMN fix_of BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tests ADD COLUMN apply_on TEXT NOT NULL DEFAULT ''`,
	// The Message-ID a series' replies answer: how the outbox names it.
	`ALTER TABLE series ADD COLUMN root TEXT NOT NULL DEFAULT ''`,
	// The list a series was posted to: what a list's daily test bound
	// counts.
	`ALTER TABLE series ADD COLUMN mail_list TEXT NOT NULL DEFAULT ''`,
	// A maintainer's "#rdmabot invalid" or "dup" on a report: kept beside
	// the test, once per command mail.
	`
CREATE TABLE disputes (
	msgid TEXT PRIMARY KEY,
	test_id BIGINT NOT NULL,
	kind TEXT NOT NULL,
	note TEXT NOT NULL,
	by_addr TEXT NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE INDEX disputes_test ON disputes (test_id)`,
	// The debug profile's kernels (lab.debug) of a test's base and
	// candidate, when its series asked for them.
	`ALTER TABLE tests ADD COLUMN base_debug_artifact TEXT NOT NULL DEFAULT '';
ALTER TABLE tests ADD COLUMN cand_debug_artifact TEXT NOT NULL DEFAULT ''`,
	// The job that chooses a test's base was named "test": its jobs,
	// queued ones above all, are the "base" job's now.
	`UPDATE river_job SET kind = 'base' WHERE kind = 'test'`,
	// Why a test was started: the daily bounds count postings by it, not
	// by a pattern of the key, which holds the sender's Message-ID. A
	// posting's origin is exactly {"kind":"mail"} (no text of the
	// sender's); a mail command's holds "request", with its verb first.
	// A GitHub retest before this is told by its key: retests and other
	// commands are uncounted alike.
	`ALTER TABLE tests ADD COLUMN cause TEXT NOT NULL DEFAULT '';
UPDATE tests SET cause = 'posting' WHERE kind = 'series' AND key LIKE 'series:%' AND origin = '{"kind":"mail"}';
UPDATE tests SET cause = 'command' WHERE key NOT LIKE 'refused:%'
	AND (origin LIKE '%"request"%' OR origin LIKE '{"kind":"github"%' OR origin LIKE '{"kind":"cli"%');
UPDATE tests SET cause = 'retest' WHERE cause = 'command'
	AND (origin LIKE '%"request":{"verb":"retest"%' OR (origin LIKE '{"kind":"github"%' AND key LIKE '%:retest:%'))`,
}
