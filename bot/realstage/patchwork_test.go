package realstage

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/internal/config"
	"github.com/rdmabot/rdmabot/reports/outbox"
)

// A delivered verdict posts one final check per patch, once.
func TestDeliverPostsPatchworkChecks(t *testing.T) {
	sh := shared(t)
	ctx := context.Background()
	var mu sync.Mutex
	var posted []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.URL.Path == "/api/patches/":
			json.NewEncoder(w).Encode([]map[string]any{{"id": len(r.URL.Query().Get("msgid")), "msgid": "<" + r.URL.Query().Get("msgid") + ">"}})
		case r.Method == http.MethodGet:
			w.Write([]byte("[]"))
		default:
			var c map[string]any
			json.NewDecoder(r.Body).Decode(&c)
			c["auth"] = r.Header.Get("Authorization")
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
	cfg := config.Default()
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
	r := &Reports{Cfg: cfg.Reports, Outbox: ob, Lists: cfg.Lore.Lists, Trees: cfg.Builder.Trees, Lab: cfg.Lab, Now: time.Now}
	base, cand := samples(2*cfg.Reports.Runs, 100, 2), samples(2*cfg.Reports.Runs, 52, 2)
	d := decide(t, r, base, cand)
	rep := bot.Report{Key: "series:x", Kind: "series", Verdict: d.Verdict, Summary: d.Summary, Detail: d.Detail, Series: &s, Tree: "nfsd",
		Base: "0123456789abcdef0123456789abcdef01234567", URL: "http://127.0.0.1:8480/tests/1", BaseSamples: base, CandSamples: cand}
	for range 2 {
		if err := r.Deliver(ctx, rep); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posted) != len(s.Patches) || len(posted) == 0 {
		t.Fatalf("%d checks for %d patches: %v", len(posted), len(s.Patches), posted)
	}
	for _, c := range posted {
		if c["state"] != "fail" || c["context"] != "rdmabot" || c["target_url"] != rep.URL || c["auth"] != "Token tok" {
			t.Errorf("check %v", c)
		}
		t.Log(fmt.Sprint(c["description"]))
	}
}
