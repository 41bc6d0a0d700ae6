package wire

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
)

// A reproducer carries settings that load as a configuration with this
// machine's paths and real pairs left out, each tree's URL, and the
// running executable; its archives are kept in cache_dir (clients/reproduce
// tests what a bundle holds).
func TestReproducerSettings(t *testing.T) {
	st := openStore(t)
	cfg := Default()
	cfg.Lab.QEMU.HeavyLock = "/var/cache/rdmabot/heavy.lock" // resolved, as Load leaves it
	cfg.Lab.Pairs = append(cfg.Lab.Pairs, cfg.Lab.Pairs...)
	cfg.CacheDir = t.TempDir()
	r, err := NewReproducer(cfg, st, "v")
	if err != nil {
		t.Fatal(err)
	}
	if r.Binary == "" || r.Version != "v" || r.Archives == nil || r.TreeURLs["rdma"] != "https://git.kernel.org/pub/scm/linux/kernel/git/rdma/rdma.git" {
		t.Errorf("binary %q, version %q, archives %v, tree URLs %v", r.Binary, r.Version, r.Archives, r.TreeURLs)
	}
	c, err := Parse([]byte("cache_dir = \"/elsewhere\"\n" + string(r.Settings)))
	if err != nil {
		t.Fatalf("lab.toml does not load: %v\n%s", err, r.Settings)
	}
	if c.Lab.QEMU.HeavyLock != "/elsewhere/heavy.lock" || len(c.Lab.Pairs) != 0 || c.Lab.Default != "qemu" ||
		c.Reports.Runs != cfg.Reports.Runs || c.Reports.MaxRuns != cfg.Reports.MaxRuns || c.Bot.MaxRounds != cfg.Bot.MaxRounds || c.Lab.Test != cfg.Lab.Test {
		t.Errorf("lab.toml loads as %+v %+v %+v", c.Lab, c.Reports, c.Bot)
	}
	if strings.Contains(string(r.Settings), "/var/cache/rdmabot") {
		t.Errorf("lab.toml names this machine's cache:\n%s", r.Settings)
	}
	ctx := context.Background()
	patch, err := lore.ParseMessage([]byte("From: a@x\nSubject: [PATCH] svcrdma: x\nMessage-ID: <p@x>\n\nbody\n"))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(flow.Series{MsgID: "p@x", Patches: []*flow.Message{patch}})
	sid, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: "p@x", Version: 1, Tree: "rdma", Subject: "svcrdma: x", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	tst := store.Test{Key: "s", Kind: "series", SeriesID: sid, Tree: "rdma", Base: strings.Repeat("1a", 20), State: "done"}
	if tst.ID, _, err = st.AddTest(ctx, st.DB, tst); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateTest(ctx, st.DB, tst); err != nil {
		t.Fatal(err)
	}
	f, _, err := r.Archive(ctx, tst.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if filepath.Dir(f.Name()) != filepath.Join(cfg.CacheDir, "reproducers") {
		t.Errorf("archive at %s, want it in cache_dir/reproducers", f.Name())
	}
}
