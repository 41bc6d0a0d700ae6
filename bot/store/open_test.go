package store

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestOpenConcurrently: serve and a CLI command (rdmabot test) open a
// new database at once. Before the open ran under the migration lock,
// about one round in twenty failed with SQLITE_BUSY, and serve exited.
func TestOpenConcurrently(t *testing.T) {
	for round := 0; round < 60; round++ {
		dir := filepath.Join(t.TempDir(), "d")
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := Open(context.Background(), "", dir)
				if err != nil {
					errs <- err
					return
				}
				s.Close()
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
	}
}

// TestOpenBesideAWriter: a CLI command opens the database while serve
// writes to it.
func TestOpenBesideAWriter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	w, err := Open(context.Background(), "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.DB.Exec(`CREATE TABLE IF NOT EXISTS probe (x INTEGER)`); err != nil {
				t.Error(err)
			}
			tx, err := w.DB.Begin()
			if err != nil {
				t.Error(err)
				continue
			}
			tx.Exec(`INSERT INTO probe VALUES ($1)`, i)
			tx.Commit()
		}
	}()
	for i := 0; i < 100; i++ {
		s, err := Open(context.Background(), "", dir)
		if err != nil {
			t.Errorf("%d: %v", i, err)
			continue
		}
		var n int
		if err := s.DB.QueryRow(`SELECT count(*) FROM rdmabot_migration`).Scan(&n); err != nil {
			t.Error(err)
		}
		s.Close()
	}
	close(stop)
	wg.Wait()
}

// The job that chooses a test's base was named "test": a database made
// before it was renamed keeps its queued jobs, as the "base" job's.
func TestMigrationRenamesTheBaseJob(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rename := slices.Index(migrations, `UPDATE river_job SET kind = 'base' WHERE kind = 'test'`)
	if rename < 0 {
		t.Fatal("no migration renames the job")
	}
	// The database as the bot before the rename left it.
	s := openAt(t, dir, rename)
	if _, err := s.DB.ExecContext(ctx, `INSERT INTO river_job (args, kind, max_attempts) VALUES ('{"test_id":7}', 'test', 8)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openAt(t, dir, len(migrations))
	defer s.Close()
	var kind, state string
	if err := s.DB.QueryRowContext(ctx, `SELECT kind, state FROM river_job WHERE args LIKE '%"test_id":7%'`).Scan(&kind, &state); err != nil || kind != "base" || state != "available" {
		t.Errorf("the queued job: kind %q state %q, %v; want a base job still to run", kind, state, err)
	}
}
