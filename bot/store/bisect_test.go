package store

import (
	"context"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// A series bisection is found by its test; a mainline one (test 0) never
// is; steps keep their boots and the first of two with the same number.
func TestBisections(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, ok, err := s.BisectionOfTest(ctx, s.DB, 7); ok || err != nil {
			t.Fatalf("no bisection yet: %v %v", ok, err)
		}
		main, _, err := s.AddBisection(ctx, s.DB, Bisection{Key: "mainline:x", Tree: "mainline", Good: "g", Bad: "b", Metric: "copy_MBps"})
		if err != nil {
			t.Fatal(err)
		}
		id, created, err := s.AddBisection(ctx, s.DB, Bisection{Key: "series-test:7", Tree: "nfsd", Good: "g", Bad: "b", Metric: "crash", TestID: 7})
		if err != nil || !created {
			t.Fatalf("add: %v %v", created, err)
		}
		if again, created, err := s.AddBisection(ctx, s.DB, Bisection{Key: "series-test:7", TestID: 7}); err != nil || created || again != id {
			t.Fatalf("the same key twice: %d %v %v", again, created, err)
		}
		b, ok, err := s.BisectionOfTest(ctx, s.DB, 7)
		if err != nil || !ok || b.ID != id || b.TestID != 7 || b.Metric != "crash" || b.State != BisectionRunning {
			t.Fatalf("of test 7: %+v %v %v", b, ok, err)
		}
		b.State, b.Culprit, b.CulpritPatch, b.Summary = BisectionDone, "c2", 2, "first bad: patch 2/3"
		if err := s.UpdateBisection(ctx, s.DB, b); err != nil {
			t.Fatal(err)
		}
		if b, _, err := s.BisectionOfTest(ctx, s.DB, 7); err != nil || b.CulpritPatch != 2 || b.Culprit != "c2" || b.State != BisectionDone {
			t.Fatalf("updated: %+v %v", b, err)
		}
		if _, ok, err := s.BisectionOfTest(ctx, s.DB, 0); ok || err != nil {
			t.Fatalf("test 0 finds the mainline bisection %d: %v %v", main, ok, err)
		}
		for _, st := range []flow.BisectStep{{N: 1, Phase: "bisect", Commit: "c1", Outcome: "good", Boots: 10}, {N: 1, Phase: "bisect", Commit: "c2", Outcome: "bad", Boots: 3}, {N: 2, Phase: "bisect", Commit: "c3", Outcome: "skip"}} {
			if err := s.AddBisectStep(ctx, s.DB, id, st); err != nil {
				t.Fatal(err)
			}
		}
		steps, err := s.BisectSteps(ctx, s.DB, id)
		if err != nil || len(steps) != 2 || steps[0].Commit != "c1" || steps[0].Boots != 10 || steps[1].Boots != 0 {
			t.Fatalf("steps: %+v %v", steps, err)
		}
	})
}
