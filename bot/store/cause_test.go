package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// openAt opens the database in dir migrated to version n only, as a bot
// of that time left it.
func openAt(t *testing.T, dir string, n int) *Store {
	t.Helper()
	all := migrations
	migrations = migrations[:n]
	defer func() { migrations = all }()
	s, err := Open(context.Background(), "", dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The daily bounds count the tests postings started by the test's
// cause, never by its key, which holds the sender's Message-ID: a
// posting whose Message-ID says ":retest" is counted; commands and
// retests are not. Rows an older bot wrote are given their cause from
// their origin, which holds no text of the sender's.
func TestPostingsCountedByCause(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	before := slices.IndexFunc(migrations, func(m string) bool { return strings.HasPrefix(m, "ALTER TABLE tests ADD COLUMN cause ") })
	if before < 0 {
		t.Fatal("no migration adds tests.cause")
	}
	s := openAt(t, dir, before)
	sid, err := s.AddSeries(ctx, s.DB, SeriesRow{MsgID: "<a:retest:1@x>", Version: 1, Tree: "nfsd", Subject: "s", Author: "A <a@x>", List: "l@x", Data: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]string{ // key: origin, as an older bot stored them
		"series:<a:retest:1@x>:v1:nfsd":              `{"kind":"mail"}`,
		"series:<a:retest:1@x>:v1:nfsd:cmd:<c@x>":    `{"kind":"mail","request":{"verb":"test","line":"#rdmabot test"}}`,
		"series:<a:retest:1@x>:v1:nfsd:retest:0:1":   `{"kind":"mail","request":{"verb":"retest","line":"#rdmabot retest"}}`,
		"series:<a:retest:1@x>:v1:nfsd:github:o/r#1": `{"kind":"github","repo":"o/r","issue":1}`,
		"refused:<r@x>":                                         `{"kind":"mail","request":{"verb":"test","line":"#rdmabot test"}}`,
		"incomplete:<a:retest:1@x>:v1":                          `{"kind":"mail"}`,
		"mainline:nfsd:main:abc":                                `{"kind":"mainline"}`,
		"series:<a:retest:1@x>:v1:nfsd:cmd:<c2@x>:retest:0:1":   `{"kind":"mail","request":{"verb":"retest","line":"#rdmabot retest"}}`,
		"series:<a:retest:1@x>:v1:nfsd:cli":                     `{"kind":"cli"}`,
		"series:<a:retest:1@x>:v1:nfsd:github:o/r#2:retest:3:4": `{"kind":"github","repo":"o/r","issue":2,"comment":3}`,
	}
	for key, origin := range old {
		kind := KindSeries
		if key[:8] == "mainline" {
			kind = KindMainline
		}
		if _, err := s.DB.ExecContext(ctx, `INSERT INTO tests (key, kind, series_id, tree, ref, base, candidate, lab, params, origin, thread, state, verdict, summary, rounds, base_artifact, cand_artifact, created_at, updated_at)
			VALUES ($1, $2, $3, 'nfsd', '', '', '', '', '', $4, '', 'done', '', '', 0, '', '', $5, $5)`, key, kind, sid, origin, ms(time.Now())); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = openAt(t, dir, len(migrations))
	defer s.Close()
	want := map[string]string{
		"series:<a:retest:1@x>:v1:nfsd":              CausePosting,
		"series:<a:retest:1@x>:v1:nfsd:cmd:<c@x>":    CauseCommand,
		"series:<a:retest:1@x>:v1:nfsd:retest:0:1":   CauseRetest,
		"series:<a:retest:1@x>:v1:nfsd:github:o/r#1": CauseRetest, // an older GitHub row is told by its key: uncounted alike
		"refused:<r@x>":                                         "",
		"incomplete:<a:retest:1@x>:v1":                          "",
		"mainline:nfsd:main:abc":                                "",
		"series:<a:retest:1@x>:v1:nfsd:cmd:<c2@x>:retest:0:1":   CauseRetest,
		"series:<a:retest:1@x>:v1:nfsd:cli":                     CauseCommand,
		"series:<a:retest:1@x>:v1:nfsd:github:o/r#2:retest:3:4": CauseRetest,
	}
	for key, cause := range want {
		tt, err := s.TestByKey(ctx, s.DB, key)
		if err != nil || tt.Cause != cause {
			t.Errorf("%s: cause %q, %v; want %q", key, tt.Cause, err, cause)
		}
	}
	// New rows carry the cause they were started for.
	for _, tt := range []Test{{Key: "series:<b:retest@x>:v1:nfsd", Cause: CausePosting}, {Key: "series:<b:retest@x>:v1:nfsd:cmd:<d@x>", Cause: CauseCommand},
		{Key: "series:<b:retest@x>:v1:nfsd:retest:0:2", Cause: CauseRetest}} {
		tt.Kind, tt.SeriesID, tt.Origin = KindSeries, sid, `{"kind":"mail"}`
		if _, _, err := s.AddTest(ctx, s.DB, tt); err != nil {
			t.Fatal(err)
		}
	}
	posts, err := s.PostingsSince(ctx, s.DB, time.Now().Add(-time.Hour))
	if err != nil || len(posts) != 2 || posts[0] != (Posting{Author: "A <a@x>", List: "l@x"}) {
		t.Errorf("postings %+v, %v; want the old posting and the new one", posts, err)
	}
}
