package store

import (
	"context"
	"path/filepath"
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
