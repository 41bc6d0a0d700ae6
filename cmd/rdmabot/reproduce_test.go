package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
)

// rdmabot reproduce writes a series test's bundle from the database
// serve uses; a bad id is a usage error, an unknown test or one with
// nothing to reproduce an error that says so, and nothing is written.
func TestReproduceCommand(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	data := filepath.Join(dir, "data")
	os.WriteFile(cfg, fmt.Appendf(nil, "data_dir = %q\ncache_dir = %q\n", data, filepath.Join(dir, "cache")), 0o644)
	ctx := context.Background()
	st, err := store.Open(ctx, "", data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := lore.ParseMessage([]byte("From: a@x\nSubject: [PATCH] x\n\nbody\n"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(flow.Series{MsgID: "p@x", Patches: []*flow.Message{m}})
	sid, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: "p@x", Version: 1, Subject: "[PATCH] x", Data: raw})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{}
	for _, tc := range []store.Test{
		{Key: "s", Kind: "series", SeriesID: sid, Tree: "local", Base: strings.Repeat("c", 40), State: "done"},
		{Key: "m", Kind: "mainline", Tree: "mainline", Base: strings.Repeat("c", 40), State: "done"},
	} {
		id, _, err := st.AddTest(ctx, st.DB, tc)
		if err != nil {
			t.Fatal(err)
		}
		tc.ID = id
		st.UpdateTest(ctx, st.DB, tc)
		ids[tc.Key] = id
	}
	st.Close()

	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"reproduce", "--config", cfg, "--test", fmt.Sprint(ids["s"]), "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	bd := filepath.Join(out, fmt.Sprintf("rdmabot-test-%d", ids["s"]))
	for _, f := range []string{"README", "run.sh", "series.mbox", "lab.toml", "rdmabot"} {
		if _, err := os.Stat(filepath.Join(bd, f)); err != nil {
			t.Errorf("bundle: %v", err)
		}
	}
	if !strings.Contains(stdout.String(), bd+"/run.sh") {
		t.Errorf("stdout: %s", stdout.String())
	}
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--test", "x"}, 2, "usage"},
		{[]string{"--test", "999"}, 2, "not found"},
		{[]string{"--test", fmt.Sprint(ids["m"])}, 2, "tests a branch, not a series"},
	} {
		stdout.Reset()
		stderr.Reset()
		out := filepath.Join(dir, "never")
		args := append([]string{"reproduce", "--config", cfg, "--out", out}, tc.args...)
		if code := run(ctx, args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.says) {
			t.Errorf("%v: exit %d, stderr %q; want %d saying %q", tc.args, code, stderr.String(), tc.code, tc.says)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: wrote %s", tc.args, out)
		}
	}
}
