package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/pgtest"
)

// Both databases run the same checks: the SQL is shared.
func forEachDB(t *testing.T, f func(t *testing.T, s *Store)) {
	t.Run("sqlite", func(t *testing.T) {
		s, err := Open(context.Background(), "", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		f(t, s)
	})
	t.Run("postgres", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short: no PostgreSQL")
		}
		url := pgtest.Start(t)
		s, err := Open(context.Background(), url, "")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		f(t, s)
	})
}

func TestStore(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
		s.SetClock(func() time.Time { return now })

		// Migrations are idempotent: a second open is a no-op.
		if err := s.migrate(ctx); err != nil {
			t.Fatal(err)
		}

		id1, err := s.AddSeries(ctx, s.DB, SeriesRow{MsgID: "a@b", Version: 2, Tree: "nfsd", Subject: "s", Data: []byte("{}")})
		if err != nil {
			t.Fatal(err)
		}
		id2, err := s.AddSeries(ctx, s.DB, SeriesRow{MsgID: "a@b", Version: 2, Tree: "nfsd", Subject: "s", Data: []byte("{}")})
		if err != nil || id1 != id2 {
			t.Fatalf("same series twice: %d %d %v", id1, id2, err)
		}
		// A series reads back with the list it was posted to and its root.
		id3, err := s.AddSeries(ctx, s.DB, SeriesRow{MsgID: "p1@b", Version: 3, Tree: "nfsd", Subject: "s", Root: "cover@b", List: "linux-nfs@vger.kernel.org", Data: []byte("{}")})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := s.Series(ctx, s.DB, id3); err != nil || r.Root != "cover@b" || r.List != "linux-nfs@vger.kernel.org" || r.Version != 3 {
			t.Fatalf("series read back: %+v %v", r, err)
		}

		tid, created, err := s.AddTest(ctx, s.DB, Test{Key: "k", Kind: KindSeries, SeriesID: id1, Tree: "nfsd", Lab: "qemu"})
		if err != nil || !created {
			t.Fatalf("add test: %v %v", created, err)
		}
		if _, created, _ := s.AddTest(ctx, s.DB, Test{Key: "k"}); created {
			t.Fatal("test created twice")
		}
		tt, _ := s.Test(ctx, s.DB, tid)
		tt.Verdict, tt.State = flow.Pass, StateDone
		if err := s.UpdateTest(ctx, s.DB, tt); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.TestByKey(ctx, s.DB, "k"); got.Verdict != flow.Pass {
			t.Fatalf("update lost: %+v", got)
		}

		// Base cache: fresh, then stale.
		k := BaseKey{"nfsd", "abc", "qemu", "p"}
		if err := s.PutBaseResults(ctx, s.DB, k, []flow.Sample{{Metrics: map[string]float64{"write_MBps": 100}}}); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := s.BaseResults(ctx, s.DB, k, time.Hour); err != nil || !ok || got[0].Metrics["write_MBps"] != 100 {
			t.Fatalf("base cache: %v %v %v", got, ok, err)
		}
		now = now.Add(2 * time.Hour)
		if _, ok, _ := s.BaseResults(ctx, s.DB, k, time.Hour); ok {
			t.Fatal("stale base result served")
		}

		// Leases: one holder at a time; expiry frees the pair.
		if ok, _ := s.AcquireLease(ctx, "qemu", "w1", 1, time.Minute); !ok {
			t.Fatal("free pair not acquired")
		}
		if ok, _ := s.AcquireLease(ctx, "qemu", "w2", 2, time.Minute); ok {
			t.Fatal("held pair acquired by another")
		}
		now = now.Add(2 * time.Minute)
		if ok, _ := s.AcquireLease(ctx, "qemu", "w2", 2, time.Minute); !ok {
			t.Fatal("expired lease not retaken")
		}
		if ok, _ := s.RenewLease(ctx, "qemu", "w1", time.Minute); ok {
			t.Fatal("lost lease renewed")
		}
		now = now.Add(30 * time.Second)
		if err := s.ReleaseLease(ctx, "qemu", "w2"); err != nil {
			t.Fatal(err)
		}
		u, _ := s.LabUsages(ctx)
		if len(u) != 1 || u[0].Busy != 30*time.Second {
			t.Fatalf("usage %+v", u)
		}

		// In turn: the pair goes to the oldest waiting test, not to
		// whoever asks first; a waiter that stopped asking is skipped.
		const stale = time.Minute
		turn := func(holder string, rank int64) bool {
			ok, err := s.AcquireLeaseInTurn(ctx, "turn", holder, rank, rank, time.Minute, stale)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !turn("t5", 5) {
			t.Fatal("free pair, no one waiting: not acquired")
		}
		if turn("t9", 9) || turn("t7", 7) {
			t.Fatal("held pair acquired")
		}
		s.ReleaseLease(ctx, "turn", "t5")
		if turn("t9", 9) {
			t.Fatal("a newer test took the pair while an older one (7) waits")
		}
		if !turn("t7", 7) {
			t.Fatal("the oldest waiter did not get the free pair")
		}
		s.ReleaseLease(ctx, "turn", "t7")
		now = now.Add(2 * stale) // t9 stopped asking
		if !turn("t20", 20) {
			t.Fatal("a waiter that stopped asking (t9) still holds the queue")
		}

		if err := s.AppendTrace(ctx, 7, "one", "two"); err != nil {
			t.Fatal(err)
		}
		s.AppendTrace(ctx, 7, "three")
		tr, _ := s.Trace(ctx, 7)
		if len(tr) != 3 || tr[2].Line != "three" {
			t.Fatalf("trace %+v", tr)
		}

		if seen, err := s.Seen(ctx, "c1"); seen || err != nil {
			t.Fatalf("seen before any sighting: %v", err)
		}
		if seen, _ := s.Seen(ctx, "c1"); seen {
			t.Fatal("Seen recorded the key")
		}
		if first, _ := s.FirstSeen(ctx, "c1"); !first {
			t.Fatal("first sighting")
		}
		if seen, err := s.Seen(ctx, "c1"); !seen || err != nil {
			t.Fatalf("not seen after FirstSeen: %v", err)
		}
		if first, _ := s.FirstSeen(ctx, "c1"); first {
			t.Fatal("second sighting")
		}
	})
}

// SQLite syncs every commit (synchronous=FULL): the outbox ledger's
// "sent" lives in this database, and a commit lost to a power cut would
// send the reply again.
func TestSQLiteSynchronousFull(t *testing.T) {
	s, err := Open(context.Background(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 2 { // and on a connection opened later
		var mode int
		if err := s.DB.QueryRow("PRAGMA synchronous").Scan(&mode); err != nil || mode != 2 {
			t.Fatalf("synchronous = %d (%v), want 2 (FULL)", mode, err)
		}
		s.DB.SetMaxIdleConns(0)
		s.DB.SetMaxIdleConns(2)
	}
}

// Many goroutines race for one pair: exactly one wins.
func TestLeaseRace(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := s.AcquireLease(ctx, "pair", string(rune('a'+i)), int64(i), time.Minute)
				if err != nil {
					t.Error(err)
				}
				if ok {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d holders of one pair", wins)
		}
	})
}

// Two processes on one SQLite file (serve, and `rdmabot outbox list`
// beside it): a transaction that reads and then writes must wait for the
// other's write, not fail at once with SQLITE_BUSY. A deferred BEGIN
// fails: its read snapshot cannot become a write while another writer
// holds the lock, and SQLite does not call the busy handler then (a
// serve died of it at start while a test polled its outbox).
func TestSQLiteWriteWaitsForAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	a, err := Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.DB.Exec("CREATE TABLE t (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	held, err := b.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.Exec("INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	release := time.AfterFunc(300*time.Millisecond, func() { held.Commit() })
	defer release.Stop()

	tx, err := a.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT INTO t VALUES (2)"); err != nil {
		t.Fatalf("write after read, beside another writer: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := a.DB.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows = %d (%v), want 2", n, err)
	}
}
