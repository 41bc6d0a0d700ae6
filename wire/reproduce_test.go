package wire

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/bot/reproduce"

	"github.com/rdmabot/rdmabot/bot/artifact"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// A series test's reproducer holds its patches, its base on the tree's
// URL, the base kernel's .config from the artifact store and settings
// that load as a configuration with this machine's paths and real pairs
// left out; a branch test and a test with no base yet have none.
func TestReproducerBundle(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	patch := []byte("From: a@x\nSubject: [PATCH] svcrdma: x\nMessage-ID: <p@x>\n\nbody\n")
	data, _ := json.Marshal(flow.Series{MsgID: "p@x", Patches: readSeries(t, patch).Patches})
	sid, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: "p@x", Version: 1, Tree: "rdma", Subject: "[PATCH] svcrdma: x", Link: "https://lore.kernel.org/r/p@x/", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	base := strings.Repeat("1a", 20)
	add := func(tst store.Test) int64 {
		id, _, err := st.AddTest(ctx, st.DB, tst)
		if err != nil {
			t.Fatal(err)
		}
		tst.ID = id
		if err := st.UpdateTest(ctx, st.DB, tst); err != nil {
			t.Fatal(err)
		}
		return id
	}
	series := add(store.Test{Key: "s", Kind: "series", SeriesID: sid, Tree: "rdma", BaseBranch: "for-next", Base: base, BaseArtifact: "k1", State: "done"})
	pruned := add(store.Test{Key: "p", Kind: "series", SeriesID: sid, Tree: "rdma", Base: base, BaseArtifact: "gone", State: "done"})
	branch := add(store.Test{Key: "m", Kind: "mainline", Tree: "mainline", Base: base, State: "done"})
	waiting := add(store.Test{Key: "w", Kind: "series", SeriesID: sid, Tree: "rdma", State: "queued"})
	// Fix follow-ups: on top of the series above (the bundle applies
	// both), in its place, and on a mainline head (no bundle can).
	fixPatch := []byte("From: a@x\nSubject: [PATCH] svcrdma: fix x\nMessage-ID: <f@x>\n\nbody\n")
	fixData, _ := json.Marshal(flow.Series{MsgID: "f@x", Patches: readSeries(t, fixPatch).Patches})
	fsid, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: "f@x", Version: 1, Tree: "rdma", Subject: "[PATCH] svcrdma: fix x", Data: fixData})
	if err != nil {
		t.Fatal(err)
	}
	onTop := add(store.Test{Key: "f1", Kind: "series", SeriesID: fsid, Tree: "rdma", Base: base, State: "done", FixOf: series, ApplyOn: "c0ffee"})
	inPlace := add(store.Test{Key: "f2", Kind: "series", SeriesID: fsid, Tree: "rdma", Base: base, State: "done", FixOf: series})
	onHead := add(store.Test{Key: "f3", Kind: "series", SeriesID: fsid, Tree: "mainline", Base: base, State: "done", FixOf: branch, ApplyOn: "bad0"})

	cfg := Default()
	cfg.Lab.QEMU.HeavyLock = "/var/cache/rdmabot/heavy.lock" // resolved, as Load leaves it
	cfg.Lab.Pairs = append(cfg.Lab.Pairs, cfg.Lab.Pairs...)
	art := artifact.Dir{Root: t.TempDir()}
	os.MkdirAll(art.Path("k1"), 0o755)
	os.WriteFile(filepath.Join(art.Path("k1"), "config"), []byte("CONFIG_INFINIBAND=y\n"), 0o644)
	os.WriteFile(filepath.Join(art.Path("k1"), "build.log"), []byte("  CC      net/sunrpc/xprtrdma/svc_rdma.o\n"), 0o644)
	if err := st.SaveRun(ctx, st.DB, store.Run{TestID: series, Round: 1, Role: "base", Commit: base, Lab: "qemu",
		Samples: []flow.Sample{{Metrics: map[string]float64{"copy_MBps": 8.25}}}}); err != nil {
		t.Fatal(err)
	}
	r, err := NewReproducer(cfg, st, "v")
	if err != nil {
		t.Fatal(err)
	}
	r.Artifacts, r.Binary = art, ""

	b, err := r.Bundle(ctx, series)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range b.Files {
		files[f.Name] = string(f.Data)
		if f.Path != "" && f.Name != "rdmabot" {
			data, err := os.ReadFile(f.Path)
			if err != nil {
				t.Fatal(err)
			}
			files[f.Name] = string(data)
		}
	}
	if files["kernel.config"] != "CONFIG_INFINIBAND=y\n" {
		t.Errorf("kernel.config %q", files["kernel.config"])
	}
	if files["base-build.log"] != "  CC      net/sunrpc/xprtrdma/svc_rdma.o\n" || !strings.Contains(files["boots.json"], `"copy_MBps": 8.25`) {
		t.Errorf("kept: base-build.log %q, boots.json %q", files["base-build.log"], files["boots.json"])
	}
	if _, ok := files["candidate-build.log"]; ok {
		t.Error("a candidate build log with no candidate artifact")
	}
	if !strings.Contains(files["series.mbox"], "Subject: [PATCH] svcrdma: x") {
		t.Errorf("series.mbox:\n%s", files["series.mbox"])
	}
	if !strings.Contains(files["run.sh"], "tree_url='https://git.kernel.org/pub/scm/linux/kernel/git/rdma/rdma.git'") ||
		!strings.Contains(files["run.sh"], "branch='for-next'") || !strings.Contains(files["run.sh"], "base="+base) {
		t.Errorf("run.sh does not name the base:\n%s", files["run.sh"])
	}
	c, err := Parse([]byte("cache_dir = \"/elsewhere\"\n" + files["lab.toml"]))
	if err != nil {
		t.Fatalf("lab.toml does not load: %v\n%s", err, files["lab.toml"])
	}
	if c.Lab.QEMU.HeavyLock != "/elsewhere/heavy.lock" || len(c.Lab.Pairs) != 0 || c.Lab.Default != "qemu" ||
		c.Reports.Runs != cfg.Reports.Runs || c.Reports.MaxRuns != cfg.Reports.MaxRuns || c.Bot.MaxRounds != cfg.Bot.MaxRounds || c.Lab.Test != cfg.Lab.Test {
		t.Errorf("lab.toml loads as %+v %+v %+v", c.Lab, c.Reports, c.Bot)
	}
	if strings.Contains(files["lab.toml"], "/var/cache/rdmabot") {
		t.Errorf("lab.toml names this machine's cache:\n%s", files["lab.toml"])
	}

	b, err = r.Bundle(ctx, pruned)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range b.Files {
		if f.Name == "kernel.config" {
			t.Error("a pruned artifact gave a kernel.config")
		}
	}
	for id, want := range map[int64][]string{onTop: {"Subject: [PATCH] svcrdma: x", "Subject: [PATCH] svcrdma: fix x"}, inPlace: {"Subject: [PATCH] svcrdma: fix x"}} {
		b, err := r.Bundle(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range b.Files {
			if f.Name != "series.mbox" {
				continue
			}
			found = true
			var got []string
			for _, l := range strings.Split(string(f.Data), "\n") {
				if strings.HasPrefix(l, "Subject: ") {
					got = append(got, l)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("fix test %d: series.mbox applies %q, want %q", id, got, want)
			}
		}
		if !found {
			t.Errorf("fix test %d: no series.mbox", id)
		}
	}
	for _, id := range []int64{branch, waiting, onHead} {
		if _, err := r.Bundle(ctx, id); !errors.Is(err, reproduce.ErrNone) {
			t.Errorf("test %d: %v, want reproduce.ErrNone", id, err)
		}
	}
	if _, err := r.Bundle(ctx, 999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no such test: %v", err)
	}
}
