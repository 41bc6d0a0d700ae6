package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
)

// The artifacts a job may still boot: those of every test not finished,
// and of a finished test while its own bisection runs; a finished test's
// are free, as are a mainline bisection's (it names no test).
func TestArtifactsInUse(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		add := func(name string, st State) int64 {
			id, _, err := s.AddTest(ctx, s.DB, Test{Key: name, Kind: KindSeries, Tree: "nfsd", Lab: "qemu"})
			if err != nil {
				t.Fatal(err)
			}
			tt, _ := s.Test(ctx, s.DB, id)
			tt.State, tt.BaseArtifact, tt.CandArtifact = st, "base-"+name, "cand-"+name
			if name == "queued" {
				tt.BaseArtifact = "" // not built yet
			}
			if err := s.UpdateTest(ctx, s.DB, tt); err != nil {
				t.Fatal(err)
			}
			return id
		}
		for _, st := range []State{StateQueued, StateBuilding, StateTesting, StateDone, StateFailed, StateCanceled} {
			add(string(st), st)
		}
		bisected := add("bisected", StateDone)
		bis, _, err := s.AddBisection(ctx, s.DB, Bisection{Key: "series-test", Tree: "nfsd", TestID: bisected})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.AddBisection(ctx, s.DB, Bisection{Key: "mainline", Tree: "mainline"}); err != nil {
			t.Fatal(err)
		}
		got, err := s.ArtifactsInUse(ctx, s.DB)
		want := []string{"base-bisected", "base-building", "base-testing", "cand-bisected", "cand-building", "cand-queued", "cand-testing"}
		if err != nil || !slices.Equal(slices.Sorted(maps.Keys(got)), want) {
			t.Fatalf("in use: %v, %v; want %v", slices.Sorted(maps.Keys(got)), err, want)
		}
		// The bisection done, its test's kernels are free too.
		b, _ := s.Bisection(ctx, s.DB, bis)
		b.State = BisectionDone
		if err := s.UpdateBisection(ctx, s.DB, b); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.ArtifactsInUse(ctx, s.DB); got["base-bisected"] || len(got) != 5 {
			t.Errorf("after the bisection: %v", fmt.Sprint(slices.Sorted(maps.Keys(got))))
		}
	})
}

func TestArtifactsInUseClosedDB(t *testing.T) {
	s, err := Open(context.Background(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.ArtifactsInUse(context.Background(), s.DB); err == nil {
		t.Error("a closed database answered")
	}
}
