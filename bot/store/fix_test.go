package store

import (
	"context"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// The test a reply reported is the newest failing test of its series
// version; a passing or other version's test is not; fix follow-ups
// keep what they fix and where they were applied.
func TestReportedTestAndFixes(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		series := func(msgid string, version int) int64 {
			id, err := s.AddSeries(ctx, s.DB, SeriesRow{MsgID: msgid, Version: version, Subject: "svcrdma: x", Data: []byte("{}")})
			if err != nil {
				t.Fatal(err)
			}
			return id
		}
		test := func(key string, sid int64, verdict flow.Outcome) Test {
			id, _, err := s.AddTest(ctx, s.DB, Test{Key: key, Kind: KindSeries, SeriesID: sid, Tree: "nfsd"})
			if err != nil {
				t.Fatal(err)
			}
			tt, err := s.Test(ctx, s.DB, id)
			if err != nil {
				t.Fatal(err)
			}
			tt.State, tt.Verdict, tt.Base, tt.Candidate = StateDone, verdict, "b", "c-"+key
			if err := s.UpdateTest(ctx, s.DB, tt); err != nil {
				t.Fatal(err)
			}
			return tt
		}
		if _, ok, err := s.ReportedTest(ctx, s.DB, "<a@x>", 1); ok || err != nil {
			t.Fatalf("nothing stored: %v %v", ok, err)
		}
		// A lore series' ID is a hash; its replies answer its root.
		if id, err := s.AddSeries(ctx, s.DB, SeriesRow{MsgID: "79ce98b08c497d76", Version: 1, Root: "p1@x", Subject: "svcrdma: y", Data: []byte("{}")}); err != nil {
			t.Fatal(err)
		} else if lore := test("l1", id, flow.BuildFailed); true {
			if got, ok, err := s.ReportedTest(ctx, s.DB, "p1@x", 1); err != nil || !ok || got.ID != lore.ID {
				t.Fatalf("by root: %+v %v %v, want test %d", got, ok, err, lore.ID)
			}
		}
		v1 := series("<a@x>", 1)
		first := test("a1", v1, flow.Regression)
		crash := test("a1-retest", v1, flow.Crash)
		test("a1-pass", v1, flow.Pass)
		test("a2", series("<a@x>", 2), flow.BuildFailed)
		got, ok, err := s.ReportedTest(ctx, s.DB, "<a@x>", 1)
		if err != nil || !ok || got.ID != crash.ID {
			t.Fatalf("reported test of v1: %+v %v %v (want the newest failing, %d; the first was %d)", got, ok, err, crash.ID, first.ID)
		}
		if _, ok, _ := s.ReportedTest(ctx, s.DB, "<a@x>", 3); ok {
			t.Fatal("v3 was never tested")
		}
		fix := test("fix", series("<fix@x>", 1), flow.Pass)
		fix.FixOf, fix.ApplyOn = crash.ID, crash.Candidate
		if err := s.UpdateTest(ctx, s.DB, fix); err != nil {
			t.Fatal(err)
		}
		fixes, err := s.FixesOf(ctx, s.DB, crash.ID)
		if err != nil || len(fixes) != 1 || fixes[0].ID != fix.ID || fixes[0].FixOf != crash.ID || fixes[0].ApplyOn != "c-a1-retest" {
			t.Fatalf("fixes: %+v %v", fixes, err)
		}
		if fixes, err := s.FixesOf(ctx, s.DB, first.ID); err != nil || len(fixes) != 0 {
			t.Fatalf("fixes of the first: %+v %v", fixes, err)
		}
	})
}

// The mainline test a bisection blamed on a commit is found by the
// commit's abbreviated hash; an unfinished or series bisection, a short
// or non-hex prefix, is not.
func TestCulpritTest(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		head := func(key, cand string, verdict flow.Outcome) Test {
			id, _, err := s.AddTest(ctx, s.DB, Test{Key: key, Kind: KindMainline, Tree: "mainline", Ref: "master"})
			if err != nil {
				t.Fatal(err)
			}
			tt, _ := s.Test(ctx, s.DB, id)
			tt.State, tt.Verdict, tt.Base, tt.Candidate = StateDone, verdict, "good0", cand
			if err := s.UpdateTest(ctx, s.DB, tt); err != nil {
				t.Fatal(err)
			}
			return tt
		}
		bisect := func(key, bad, culprit string, state BisectionState, testID int64) {
			id, _, err := s.AddBisection(ctx, s.DB, Bisection{Key: key, Tree: "mainline", Good: "good0", Bad: bad, Metric: "copy_MBps", TestID: testID})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.UpdateBisection(ctx, s.DB, Bisection{ID: id, State: state, Culprit: culprit}); err != nil {
				t.Fatal(err)
			}
		}
		reg := head("m1", "bad1", flow.Regression)
		bisect("b1", "bad1", "0123456789abcdef0123456789abcdef01234567", BisectionDone, 0)
		head("m2", "bad2", flow.Regression)
		bisect("b2", "bad2", "fedcba9876543210fedcba9876543210fedcba98", BisectionRunning, 0)
		bisect("b3", "bad1", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", BisectionDone, 7)
		for prefix, want := range map[string]int64{"0123456789ab": reg.ID, "0123456789AB": reg.ID, "01234567": reg.ID, "0123456": 0,
			"fedcba987654": 0, "aaaaaaaaaaaa": 0, "0123456789zz": 0, "%": 0} {
			got, ok, err := s.CulpritTest(ctx, s.DB, prefix)
			if err != nil || ok != (want != 0) || (ok && got.ID != want) {
				t.Errorf("%q: test %d %v %v, want %d", prefix, got.ID, ok, err, want)
			}
		}
	})
}
