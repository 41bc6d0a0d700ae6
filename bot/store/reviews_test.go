package store

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// A review that comes after the series was stored is added to it once,
// the rest of the series kept; a series that is not stored is an error.
func TestAddSeriesReviews(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		data, _ := json.Marshal(flow.Series{MsgID: "a@b", Version: 1, Subject: "[PATCH] x"})
		id, err := s.AddSeries(ctx, s.DB, SeriesRow{MsgID: "a@b", Version: 1, Tree: "", Subject: "[PATCH] x", Data: data})
		if err != nil {
			t.Fatal(err)
		}
		sashiko := flow.Review{By: "Sashiko AI review", MessageID: "s1@kernel.org", URL: "https://sashiko.dev/#/patchset/a%40b"}
		for range 2 {
			if err := s.AddSeriesReviews(ctx, s.DB, id, []flow.Review{sashiko}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddSeriesReviews(ctx, s.DB, id, []flow.Review{sashiko, {By: "syzbot", MessageID: "z@x"}}); err != nil {
			t.Fatal(err)
		}
		row, err := s.Series(ctx, s.DB, id)
		if err != nil {
			t.Fatal(err)
		}
		var got flow.Series
		if err := json.Unmarshal(row.Data, &got); err != nil {
			t.Fatal(err)
		}
		if got.Subject != "[PATCH] x" || len(got.Reviews) != 2 || got.Reviews[0] != sashiko || got.Reviews[1].MessageID != "z@x" {
			t.Errorf("stored %+v", got)
		}
		if err := s.AddSeriesReviews(ctx, s.DB, id+100, []flow.Review{sashiko}); err == nil {
			t.Error("reviews of a series not stored: no error")
		}
		if err := s.AddSeriesReviews(ctx, s.DB, id+100, nil); err != nil {
			t.Errorf("no reviews: %v", err)
		}
	})
}
