package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/testenv"
)

// TestStatusNamesTheSeries: rdmabot status and status --json name the
// series each test is of (subject, Message-ID, list; the list from the
// series' JSON for a row stored before rows kept it), and a mainline
// test by its branch. Both outputs are golden files (-update).
func TestStatusNamesTheSeries(t *testing.T) {
	cfgPath, _, st := shippedStore(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 6, 0, 22, 32, 0, time.UTC)
	st.SetClock(func() time.Time { return at })
	oldJSON, _ := json.Marshal(flow.Series{MsgID: "old-1@example.org", List: "linux-nfs@vger.kernel.org"})
	rows := []store.SeriesRow{
		// As lore stores a series: keyed by a hash of its thread, its
		// cover letter's Message-ID in Root.
		{MsgID: "590c3f17500b0dac", Root: "cover-1@example.org", Version: 2, Tree: "rdma", Subject: "[PATCH v2 0/2] svcrdma: fewer Send WRs",
			List: "linux-rdma@vger.kernel.org", Data: []byte(`{}`)},
		{MsgID: "old-1@example.org", Version: 1, Tree: "nfsd", Subject: "[PATCH] xprtrdma: a typo", Data: oldJSON},
	}
	tests := []store.Test{
		{Key: "k1", Kind: store.KindSeries, Tree: "rdma", Base: "0123456789abcdef0123", State: store.StateDone, Verdict: flow.BuildFailed},
		{Key: "k2", Kind: store.KindSeries, Tree: "nfsd", State: store.StateFailed, Summary: "INFRA: build job 3 gave up\nsecond line"},
		{Key: "k3", Kind: store.KindMainline, Tree: "rdma", Ref: "for-next", State: store.StateBuilding},
	}
	var err error
	for i := range tests {
		if i < len(rows) {
			if tests[i].SeriesID, err = st.AddSeries(ctx, st.DB, rows[i]); err != nil {
				t.Fatal(err)
			}
		}
		if tests[i].ID, _, err = st.AddTest(ctx, st.DB, tests[i]); err != nil {
			t.Fatal(err)
		}
		if err := st.UpdateTest(ctx, st.DB, tests[i]); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	for _, c := range []struct{ golden, arg string }{{"status.golden", ""}, {"status-json.golden", "--json"}} {
		args := []string{"status", "--config", cfgPath}
		if c.arg != "" {
			args = append(args, c.arg)
		}
		var out, errb bytes.Buffer
		if code := run(ctx, args, &out, &errb); code != 0 {
			t.Fatalf("rdmabot %v: exit %d: %s", args, code, errb.String())
		}
		testenv.Golden(t, filepath.Join("testdata", c.golden), out.Bytes(), *updateGolden)
	}
}
