package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/clients/dashboard"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/wire"
)

// aaBoots are n boots copying at about copy MB/s, spread apart.
func aaBoots(n int, copy float64) []flow.Sample {
	var out []flow.Sample
	for i := range n {
		c := copy * (1 + 0.02*float64(i%5-2)/2)
		out = append(out, flow.Sample{Metrics: map[string]float64{"copy_MBps": c, "loop_s": 2000 / c}})
	}
	return out
}

// dashGet reads a dashboard path of the serving process.
func (e *serveEnv) dashGet(path string) (int, string) {
	e.t.Helper()
	resp, err := http.Get("http://" + e.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// `rdmabot serve` with config.toml shows what is happening on every
// page and at /api/now: a queued series whose test job fails on the
// bot's side (no tree imported: no base) is shown retrying with its
// attempts and error, as is the warm-up of the default base's kernels, a lab pair's lease with its holder, and the next
// runs of config.toml's mainline and canary cron specs, which /mainline
// also gives for its branch before a head is tested; a measured test's
// page has the reply's metric table; /canary has the A/A comparisons
// `rdmabot lab aa` stored in cache_dir; the index filters by query;
// /reports groups crashes by title.
func TestServeDashboardShowsWhatIsHappening(t *testing.T) {
	e := newServeEnv(t,
		`url = "https://lore.kernel.org/linux-rdma"`, fmt.Sprintf("url = %q", filepath.Join(t.TempDir(), "no-inbox")),
		`url = "https://lore.kernel.org/linux-nfs"`, fmt.Sprintf("url = %q", filepath.Join(t.TempDir(), "no-inbox")))
	// The A/A comparisons measured on this repository's lab, where
	// `rdmabot lab aa` keeps them.
	aa, err := os.ReadFile(filepath.Join("..", "..", "measurements", "aa.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(e.dir, "cache", "aa"), 0o755)
	if err := os.WriteFile(filepath.Join(e.dir, "cache", "aa", "aa.jsonl"), aa, 0o644); err != nil {
		t.Fatal(err)
	}
	// A series row as an older bot stored it (its mails raw), which
	// serve rereads once as it starts.
	ctx := context.Background()
	old, err := store.Open(ctx, "", filepath.Join(e.dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	legacy := `{"msgid":"old@x","version":1,"subject":"[PATCH] xprtrdma: x","patches":["` + base64.StdEncoding.EncodeToString([]byte(
		"From: Dev <dev@x>\nSubject: [PATCH] xprtrdma: x\nMessage-ID: <old@x>\n\n---\ndiff --git a/net/sunrpc/xprtrdma/verbs.c b/net/sunrpc/xprtrdma/verbs.c\n"+
			"--- a/net/sunrpc/xprtrdma/verbs.c\n+++ b/net/sunrpc/xprtrdma/verbs.c\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n")) + `"]}`
	oldID, err := old.AddSeries(ctx, old.DB, store.SeriesRow{MsgID: "old@x", Version: 1, Tree: "old", Data: []byte(legacy)})
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	e.start()
	if out := e.rdmabot("test", "--mbox", filepath.Join("..", "..", "examples", "sample-series.mbox")); !strings.Contains(out, "test 1: ") {
		t.Fatalf("test: %s", out)
	}
	// A pair leased as a lab job leases it, through the store serve uses.
	st, err := store.Open(ctx, "", filepath.Join(e.dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// serve rereads it as it starts, which the commands above do not
	// wait for: on a busy machine that comes later.
	upgraded := func() (string, bool) {
		oldRow, err := st.Series(ctx, st.DB, oldID)
		var reread flow.Series
		if err != nil || json.Unmarshal(oldRow.Data, &reread) != nil || len(reread.Patches) != 1 || !reread.Patches[0].Parsed() || len(reread.Files) != 1 {
			return fmt.Sprintf("%s %v", oldRow.Data, err), false
		}
		return "", true
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		why, ok := upgraded()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the older bot's series row a minute after serve started: %s", why)
			break
		}
	}
	if ok, err := st.AcquireLease(ctx, "qemu", "lab-1/lab#99", 99, time.Hour); err != nil || !ok {
		t.Fatalf("lease: %v %v", ok, err)
	}
	var v dashboard.NowView
	var retrying, warm dashboard.NowJob
	e.waitFor("the base job and the warm-up retrying on /api/now", 60*time.Second, func() (bool, string) {
		code, body := e.dashGet("/api/now")
		v, retrying, warm = dashboard.NowView{}, dashboard.NowJob{}, dashboard.NowJob{}
		if code != 200 || json.Unmarshal([]byte(body), &v) != nil {
			return false, body
		}
		for _, j := range v.Waiting {
			switch {
			case j.Kind == "base" && j.Retrying():
				retrying = j
			case j.Kind == "warm_bases" && j.Retrying():
				warm = j
			}
		}
		return retrying.ID != 0 && warm.ID != 0, body
	})
	// serve prepares the default base's kernels from the start, in the
	// base lane, and says so; with no tree yet it waits for one.
	if warm.Queue != "build_base" || !strings.Contains(warm.What, "the default base's kernels") ||
		!strings.Contains(warm.LastError, "none of the configured branches is in the store") {
		t.Errorf("the warm-up job: %+v", warm)
	}
	if retrying.Link != "/tests/1" || !strings.HasPrefix(retrying.What, "test 1: ") || retrying.Errors < 1 || retrying.MaxAttempts != 8 ||
		!strings.Contains(retrying.LastError, "none of the configured branches is in the store") || strings.Contains(retrying.LastError, "\n") {
		t.Errorf("the retrying base job: %+v", retrying)
	}
	if len(v.Leases) != 1 || v.Leases[0].Pair != "qemu" || v.Leases[0].Holder != "lab-1/lab#99" || v.Leases[0].Expired {
		t.Errorf("leases: %+v", v.Leases)
	}
	next := map[string]time.Time{}
	for _, n := range v.Next {
		next[n.ID] = n.Next.UTC()
	}
	if m := next["mainline-0-mainline-master"]; m.IsZero() || m.Hour()%6 != 0 || m.Minute() != 0 || !m.After(v.At) || m.After(v.At.Add(6*time.Hour)) {
		t.Errorf("mainline next at %v (now %v): %+v", m, v.At, v.Next)
	}
	if c := next["canary"]; c.Hour() != 3 || c.Minute() != 30 || !c.After(v.At) || c.After(v.At.Add(24*time.Hour)) {
		t.Errorf("canary next at %v (now %v)", c, v.At)
	}
	// /mainline says what config.toml's schedule does with its branch
	// before any head is tested.
	if _, page := e.dashGet("/mainline"); !strings.Contains(page, `<h2 id="mainline-master">mainline master</h2>`) ||
		!strings.Contains(page, "No head tested yet.") || !strings.Contains(page, "UTC (<code>CRON_TZ=UTC 0 */6 * * *</code>).") {
		t.Errorf("/mainline:\n%s", page)
	}
	// A measured test's page has the reply's metric table from the
	// judgement the decision stored (no lab here: the decision is wire's,
	// stored as the report job stores it).
	d, err := wire.NewReplier(wire.Default(), nil, nil).Decide(ctx, "series:<test@example.org>:v1:", aaBoots(10, 100), aaBoots(10, 52))
	if err != nil || d.Verdict != flow.Regression {
		t.Fatalf("decide: %+v %v", d, err)
	}
	id, _, err := st.AddTest(ctx, st.DB, store.Test{Key: "ref:measured", Kind: store.KindRef, Tree: "mainline", Ref: "master"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateTest(ctx, st.DB, store.Test{ID: id, Tree: "mainline", State: store.StateDone, Verdict: d.Verdict, Summary: d.Summary, Detail: string(d.Detail)}); err != nil {
		t.Fatal(err)
	}
	if _, page := e.dashGet(fmt.Sprintf("/tests/%d", id)); !strings.Contains(page, "<th>99% interval</th>") || !strings.Contains(page, "<td>copy MB/s</td>") ||
		!strings.Contains(page, `<td class="worse">worse</td>`) {
		t.Errorf("test %d:\n%s", id, page)
	}
	// /reports groups crashes by title.
	crash, _, err := st.AddTest(ctx, st.DB, store.Test{Key: "ref:crashed", Kind: store.KindRef, Tree: "mainline", Ref: "next"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateTest(ctx, st.DB, store.Test{ID: crash, Tree: "mainline", State: store.StateDone, Verdict: flow.Crash, Summary: "hung in __ib_drain_sq"}); err != nil {
		t.Fatal(err)
	}
	if _, page := e.dashGet("/reports"); !strings.Contains(page, `<h2 id="crashes">Crashes by title: 1</h2>`) ||
		!strings.Contains(page, fmt.Sprintf(`<td class="crash">hung in __ib_drain_sq</td><td>1</td><td><a href="/tests/%d">`, crash)) {
		t.Errorf("/reports:\n%s", page)
	}
	// The index filters with a plain GET form: the ref test alone, then
	// the series alone.
	row := func(id int64) string { return fmt.Sprintf(`<tr><td><a href="/tests/%d">%d</a></td>`, id, id) }
	if _, page := e.dashGet("/?kind=ref&verdict=REGRESSION"); !strings.Contains(page, row(id)) || strings.Contains(page, row(1)) || !strings.Contains(page, "(1 of 3 shown)") || !strings.Contains(page, `<form method="get" action="/" id="filter">`) {
		t.Errorf("/?kind=ref&verdict=REGRESSION:\n%s", page)
	}
	if _, page := e.dashGet("/?kind=series"); !strings.Contains(page, row(1)) || strings.Contains(page, row(id)) {
		t.Errorf("/?kind=series:\n%s", page)
	}
	// /canary shows them, counted per condition as the file has them.
	counts := map[string]map[string]int{}
	for dec := json.NewDecoder(bytes.NewReader(aa)); dec.More(); {
		var r struct{ Condition, Verdict string }
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if counts[r.Condition] == nil {
			counts[r.Condition] = map[string]int{}
		}
		counts[r.Condition][r.Verdict]++
		counts[r.Condition][""]++
	}
	_, page := e.dashGet("/canary")
	for cond, c := range counts {
		row := fmt.Sprintf("<tr><td>aa.jsonl</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td>", cond, c[""],
			c["PASS"], c["REGRESSION"], c["IMPROVEMENT"], c["INCONCLUSIVE"], c["INFRA"])
		if !strings.Contains(page, row) {
			t.Errorf("/canary lacks %s:\n%s", row, page)
		}
	}
	if len(counts) < 2 || strings.Count(page, "<td>aa.jsonl</td>") != strings.Count(string(aa), "\n")+len(counts) {
		t.Errorf("/canary does not list every comparison of aa.jsonl:\n%s", page)
	}
	for _, path := range []string{"/", "/mainline", "/canary"} {
		code, page := e.dashGet(path)
		for _, want := range []string{`<section id="now">`, `<b>qemu</b> held by <code>lab-1/lab#99</code>`, "none of the configured branches is in the store",
			"mainline-0-mainline-master at <b>", "canary at <b>"} {
			if code != 200 || !strings.Contains(page, want) {
				t.Errorf("%s (%d) lacks %q:\n%s", path, code, want, page)
			}
		}
	}
}
