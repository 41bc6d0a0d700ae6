// Package migrate brings a database's tables up to an append-only list
// of versions, the one way rdmabot changes a schema: the bot's store and
// the outbox's ledger both keep their versions with it.
package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Apply runs the migrations not yet recorded in table (created when
// missing: version, applied_at), in order, each once in its own
// transaction: its statements, separated by ";\n", then its record,
// version i+1 for migrations[i], at now. Statements use plain SQL both
// SQLite and PostgreSQL accept ($N placeholders).
func Apply(ctx context.Context, db *sql.DB, table string, migrations []string, now func() time.Time) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return err
	}
	have, err := Version(ctx, db, table)
	if err != nil {
		return err
	}
	for i := have; i < len(migrations); i++ {
		if err := apply(ctx, db, table, i+1, migrations[i], now); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	return nil
}

// Version is the last version recorded in table (0: none).
func Version(ctx context.Context, db *sql.DB, table string) (int, error) {
	var have int
	err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM `+table).Scan(&have)
	return have, err
}

// Record notes versions 1 to n in table as applied without running them:
// for tables an older program made before it recorded its versions.
func Record(ctx context.Context, db *sql.DB, table string, n int, now func() time.Time) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return err
	}
	for v := 1; v <= n; v++ {
		if err := apply(ctx, db, table, v, "", now); err != nil {
			return err
		}
	}
	return nil
}

func apply(ctx context.Context, db *sql.DB, table string, version int, migration string, now func() time.Time) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, stmt := range strings.Split(migration, ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			tx.Rollback()
			return fmt.Errorf("%w\n%s", err, stmt)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (version, applied_at) VALUES ($1, $2)`, version, now().Unix()); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
