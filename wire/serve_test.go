package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/cgroup"
	"github.com/rdmabot/rdmabot/lab"
)

// The kernels and the JSON API take the token; the pages do not; an
// empty token file is refused (bot.TestListenOffLoopbackNeedsToken: no
// token off loopback).
func TestTokenGuardsArtifactsAndAPI(t *testing.T) {
	mux := http.NewServeMux()
	for _, p := range []string{"/", "/api/tests", "/artifacts/x.tar"} {
		mux.HandleFunc("GET "+p, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	}
	srv := httptest.NewServer(requireToken(mux, "s3cret"))
	defer srv.Close()
	get := func(path, auth string) int {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, auth string
		want       int
	}{
		{"/", "", 200},
		{"/api/tests", "", 401},
		{"/api/tests", "Bearer wrong", 401},
		{"/api/tests", "Bearer s3cret", 200},
		{"/artifacts/x.tar", "", 401},
		{"/artifacts/x.tar", "Bearer s3cret", 200},
	} {
		if got := get(c.path, c.auth); got != c.want {
			t.Errorf("GET %s with %q: %d, want %d", c.path, c.auth, got, c.want)
		}
	}

	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	if _, err := readToken(empty); err == nil {
		t.Error("an empty token file accepted")
	}
	good := filepath.Join(dir, "token")
	os.WriteFile(good, []byte("s3cret\n"), 0o600)
	if tok, err := readToken(good); err != nil || tok != "s3cret" {
		t.Errorf("token %q, %v", tok, err)
	}
}

// legacySeries is a series row as a bot before the parsed series wrote
// it: its mails raw (base64 in the JSON), nothing read from them.
func legacySeries(t *testing.T, msgID string, cover []byte, patches ...[]byte) []byte {
	t.Helper()
	data, err := json.Marshal(struct {
		MsgID   string   `json:"msgid"`
		Version int      `json:"version"`
		Subject string   `json:"subject"`
		Patches [][]byte `json:"patches"`
		Cover   []byte   `json:"cover,omitempty"`
	}{msgID, 1, "[PATCH] svcrdma: x", patches, cover})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Serve rereads the series rows an older bot stored with raw mails,
// once (a later start reads none of them): the stages then find them
// parsed. A row that does not decode or
// whose mail no longer parses is left byte for byte, and serve still
// starts.
func TestUpgradeSeries(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	patch := []byte("From: Dev <dev@x>\nSubject: [PATCH] xprtrdma: x\nMessage-ID: <p@x>\n\n---\n" +
		"diff --git a/net/sunrpc/xprtrdma/verbs.c b/net/sunrpc/xprtrdma/verbs.c\n" +
		"--- a/net/sunrpc/xprtrdma/verbs.c\n+++ b/net/sunrpc/xprtrdma/verbs.c\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n")
	rows := map[string][]byte{
		"old@x":       legacySeries(t, "old@x", nil, patch),
		"broken@x":    legacySeries(t, "broken@x", nil, patch, []byte("\n\nno header")),
		"undecoded@x": []byte(`{"patches": 7}`),
	}
	ids := map[string]int64{}
	for id, data := range rows {
		sid, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: id, Version: 1, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = sid
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	if err := upgradeSeries(ctx, st, log); err != nil {
		t.Fatal(err)
	}
	row, _ := st.Series(ctx, st.DB, ids["old@x"])
	var s flow.Series
	if err := json.Unmarshal(row.Data, &s); err != nil || !s.Patches[0].Parsed() || s.Patches[0].MessageID != "p@x" ||
		s.Root != "p@x" || len(s.Files) != 1 || lab.SideOf(s.Changes) != lab.SideClient {
		t.Errorf("the old row: %+v %v", s, err)
	}
	for _, id := range []string{"broken@x", "undecoded@x"} {
		if row, _ := st.Series(ctx, st.DB, ids[id]); !bytes.Equal(row.Data, rows[id]) {
			t.Errorf("%s was changed: %s", id, row.Data)
		}
	}
	if !strings.Contains(logged.String(), "rows=1") || strings.Count(logged.String(), "left as it is") != 2 {
		t.Errorf("log:\n%s", logged.String())
	}
	logged.Reset()
	if err := upgradeSeries(ctx, st, log); err != nil || strings.Contains(logged.String(), "reread") || strings.Contains(logged.String(), "left as it is") {
		t.Errorf("a second start read the rows again: %v\n%s", err, logged.String())
	}
}

// A build role whose builds go without their cgroup limits says so: an
// ERROR in the log and a failing source the dashboard and status show;
// a later start where they apply clears it.
func TestCheckLimitsSaysSoLoudly(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	missing := &cgroup.LostError{Missing: []string{"memory", "pids"}, Under: "4:memory:/"}
	if err := checkLimits(ctx, st, func() error { return missing }, log); err != nil {
		t.Fatal(err)
	}
	h, found, err := st.HealthOf(ctx, st.DB, "sandbox", "build-limits")
	if err != nil || !found || h.OK || !strings.Contains(h.Err, "without their memory and pids limits") {
		t.Errorf("health after a start without limits: %+v %v %v", h, found, err)
	}
	if !strings.Contains(logged.String(), "level=ERROR") || !strings.Contains(logged.String(), "scripts/run.sh") {
		t.Errorf("log:\n%s", logged.String())
	}
	if err := checkLimits(ctx, st, func() error { return nil }, log); err != nil {
		t.Fatal(err)
	}
	if h, _, _ := st.HealthOf(ctx, st.DB, "sandbox", "build-limits"); !h.OK || h.Failures != 0 {
		t.Errorf("health after a start with limits: %+v", h)
	}
	st.Close()
	if err := checkLimits(ctx, st, func() error { return nil }, log); err == nil {
		t.Error("a record that cannot be stored was not an error")
	}
}

// openStore is an empty store of the test's own, closed when it ends.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
