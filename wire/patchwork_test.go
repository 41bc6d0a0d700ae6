package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/reports/outbox"
	"github.com/rdmabot/rdmabot/reports/reply"
)

// Testing that starts posts one pending check per patch, once however
// often the test job retries, with the test's page and a one-line
// description; a delivered verdict then posts one final check per patch,
// once, after the pending one: while a pending check waits for a retry
// (patchwork answered 502), its final check waits too.
func TestDeliverPostsPatchworkChecks(t *testing.T) {
	sh := shared(t)
	ctx := context.Background()
	var mu sync.Mutex
	var posted []map[string]any
	fail502 := 0
	ids := map[string]int{} // patch ids by msgid
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.URL.Path == "/api/patches/":
			id := r.URL.Query().Get("msgid")
			if ids[id] == 0 {
				ids[id] = len(ids) + 1
			}
			json.NewEncoder(w).Encode([]map[string]any{{"id": ids[id], "msgid": "<" + id + ">"}})
		case r.Method == http.MethodGet:
			w.Write([]byte("[]"))
		case fail502 > 0 && r.URL.Path == "/api/patches/1/checks/":
			fail502--
			w.WriteHeader(http.StatusBadGateway)
		default:
			var c map[string]any
			json.NewDecoder(r.Body).Decode(&c)
			c["auth"] = r.Header.Get("Authorization")
			c["patch"] = r.URL.Path
			posted = append(posted, c)
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(c)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	st, err := store.Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := Default()
	cfg.DataDir = dir
	cfg.Reports.Patchwork.URL = srv.URL
	cfg.Reports.Patchwork.TokenFile = filepath.Join(dir, "pw-token")
	if err := os.WriteFile(cfg.Reports.Patchwork.TokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.Open(ctx, st.DB, &cfg.Reports, dir, nil, time.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	l := NewLore(cfg, st, slog.New(slog.DiscardHandler))
	s, err := l.ReadMbox(ctx, mboxOf(t, filepath.Join(sh, "corpus", "threads", "svcrdma-v2")))
	if err != nil {
		t.Fatal(err)
	}
	r := NewReplier(cfg, ob, nil)
	base, cand := samples(2*cfg.Reports.Runs, 100, 2), samples(2*cfg.Reports.Runs, 52, 2)
	d := decide(t, r, base, cand)
	rep := flow.Report{Key: "series:x", Kind: "series", Verdict: d.Verdict, Summary: d.Summary, Detail: d.Detail, Series: &s, Tree: "nfsd",
		Base: "0123456789abcdef0123456789abcdef01234567", URL: "http://127.0.0.1:8480/tests/1", BaseSamples: base, CandSamples: cand}
	start := rep
	start.Verdict, start.Summary, start.Detail, start.BaseSamples, start.CandSamples = flow.None, "", nil, nil, nil
	start.BaseBranch, start.BaseReason = "for-next", "base-commit trailer"
	mu.Lock()
	fail502 = 4 // the first patch's checks fail until the Flush
	mu.Unlock()
	for range 2 { // the test job retried
		if err := r.Started(ctx, start); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := r.Deliver(ctx, rep); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posted) != 2*len(s.Patches) || len(posted) == 0 {
		t.Fatalf("%d checks for %d patches, want a pending and a final each: %v", len(posted), len(s.Patches), posted)
	}
	states := map[string][]string{}
	for _, c := range posted {
		id := fmt.Sprint(c["patch"])
		states[id] = append(states[id], fmt.Sprint(c["state"]))
		if c["context"] != "rdmabot" || c["target_url"] != rep.URL || c["auth"] != "Token tok" {
			t.Errorf("check %v", c)
		}
		switch d := fmt.Sprint(c["description"]); c["state"] {
		case "pending":
			if d != "Testing on nfsd/for-next at 0123456789ab (base chosen by base-commit trailer)" {
				t.Errorf("pending description %q", d)
			}
		case "fail":
			if !strings.HasPrefix(d, "REGRESSION: ") || strings.Contains(d, "\n") {
				t.Errorf("final description %q", d)
			}
		default:
			t.Errorf("check state %v", c["state"])
		}
	}
	for id, st := range states {
		if fmt.Sprint(st) != "[pending fail]" {
			t.Errorf("patch %v: checks %v, want pending then fail", id, st)
		}
	}
	t.Log(posted[0]["description"], " / ", posted[len(posted)-1]["description"])
}

// samples are n boots of the decided metrics: copy throughput around
// copy (spread wide) and a loop time that follows it.
func samples(n int, copy float64, spread float64) []flow.Sample {
	var out []flow.Sample
	for i := range n {
		var it []float64
		for j := range 4 {
			it = append(it, copy+spread*float64((i*5+j*3)%7-3)/3)
		}
		loop := 2000 / (copy + spread*float64(i%3-1)/3)
		out = append(out, flow.Sample{Metrics: map[string]float64{"copy_MBps": copy, "loop_s": loop}, Iterations: map[string][]float64{"copy_MBps": it},
			Health: lab.Health{Reported: true}.Counters()})
	}
	return out
}

// decide is Reports.Decide with a live context, which never fails it.
func decide(t *testing.T, r *reply.Replier, base, cand []flow.Sample) flow.Decision {
	t.Helper()
	d, err := r.Decide(context.Background(), "series:<test@example.org>:v1:", base, cand)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
