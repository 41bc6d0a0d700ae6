package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/reports/outbox"
	"github.com/rdmabot/rdmabot/wire"
)

// TestOutboxCommand lists, shows and approves a held reply through the
// real binary entry point, on the SQLite database the bot uses.
func TestOutboxCommand(t *testing.T) {
	cfgPath, cfg, st := shippedStore(t)
	ctx := context.Background()
	ob, err := outbox.Open(ctx, st.DB, &cfg.Reports, cfg.DataDir, nil, time.Now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	id := "20261130040506.abcdef-rdmabot@rdmabot.invalid"
	if _, err := ob.Enqueue(ctx, outbox.Reply{MessageID: id, Key: outbox.Key("email", "s@x", 1), Channel: "email",
		Outcome: "REGRESSION", Recipient: "cel@kernel.org", Envelope: []string{"cel@kernel.org"},
		Raw: []byte("Subject: Re: [PATCH] x\n\nHi Chuck,\n")}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	cli := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(ctx, args, &out, &errb); code != 0 {
			t.Fatalf("rdmabot %v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	if out := cli("outbox", "list", "-config", cfgPath); !strings.Contains(out, "held") || !strings.Contains(out, id) {
		t.Errorf("list:\n%s", out)
	}
	if out := cli("outbox", "show", "-config", cfgPath, id); !strings.Contains(out, "Hi Chuck,") {
		t.Errorf("show:\n%s", out)
	}
	if out := cli("outbox", "approve", "-config", cfgPath, id); !strings.Contains(out, "approved "+id) || !strings.Contains(out, "reports.mail is off") {
		t.Errorf("approve:\n%s", out)
	}
	if out := cli("outbox", "list", "-config", cfgPath); !strings.Contains(out, "ready") {
		t.Errorf("after approve:\n%s", out)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(cli("outbox", "list", "--json", "--config", cfgPath)), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0]["message_id"] != id || list[0]["state"] != "ready" || list[0]["outcome"] != "REGRESSION" || list[0]["channel"] != "email" {
		t.Errorf("list --json: %v", list)
	}
	if out := cli("status", "--json", "--config", cfgPath); !json.Valid([]byte(out)) {
		t.Errorf("status --json:\n%s", out)
	} else {
		var s map[string]any
		json.Unmarshal([]byte(out), &s)
		for _, k := range []string{"sources", "tests", "bisections", "queues", "leases"} {
			if _, ok := s[k].([]any); !ok {
				t.Errorf("status --json: %q is not a list: %s", k, out)
			}
		}
	}
	var errb bytes.Buffer
	if code := run(ctx, []string{"outbox", "approve", "-config", cfgPath, id}, io.Discard, &errb); code == 0 {
		t.Error("approving a ready reply again must fail")
	}
}

// shippedStore is config.toml as shipped with its data_dir in a
// temporary folder, and the bot's database there.
func shippedStore(t *testing.T) (cfgPath string, cfg wire.Config, st *store.Store) {
	t.Helper()
	shipped, err := os.ReadFile(filepath.Join("..", "..", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgText := strings.Replace(string(shipped), `data_dir = "/var/lib/rdmabot"`, `data_dir = "`+dir+`"`, 1)
	cfgPath = filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err = wire.Load(cfgPath); err != nil {
		t.Fatal(err)
	}
	if st, err = store.Open(context.Background(), cfg.Bot.DBURL, cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	return cfgPath, cfg, st
}
