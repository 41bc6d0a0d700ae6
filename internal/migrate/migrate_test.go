package migrate

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// Each migration runs once, in order; one that fails leaves nothing of
// itself and stops the rest; versions recorded without running are
// skipped.
func TestApply(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := func() time.Time { return time.Unix(5, 0) }
	ms := []string{"CREATE TABLE a (x INTEGER);\nINSERT INTO a (x) VALUES (1)", "INSERT INTO a (x) VALUES (2)"}
	for range 2 {
		if err := Apply(ctx, db, "m", ms, now); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM a").Scan(&n); err != nil || n != 2 {
		t.Errorf("rows %d, %v: want each migration once", n, err)
	}
	bad := append(ms, "INSERT INTO a (x) VALUES (3);\nINSERT INTO nosuch (x) VALUES (4)", "INSERT INTO a (x) VALUES (5)")
	if err := Apply(ctx, db, "m", bad, now); err == nil || !strings.Contains(err.Error(), "migration 3") || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("a failing migration: %v", err)
	}
	if v, _ := Version(ctx, db, "m"); v != 2 {
		t.Errorf("version %d after a failed migration, want 2", v)
	}
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM a").Scan(&n); err != nil || n != 2 {
		t.Errorf("rows %d, %v: the failed migration left some", n, err)
	}
	if err := Record(ctx, db, "r", 2, now); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, db, "r", ms, now); err != nil {
		t.Errorf("recorded versions ran again: %v", err)
	}
}
