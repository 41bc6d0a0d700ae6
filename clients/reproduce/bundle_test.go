package reproduce

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot/artifact"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/fakestage"
	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/reports/bundle"
)

// openStore is a store in a temporary directory, closed after the test.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// A series test's reproducer holds its patches, its base on the tree's
// URL, the base kernel's .config from the artifact store and settings
// that load as a configuration with this machine's paths and real pairs
// left out; a branch test and a test with no base yet have none.
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestReproducerBundle(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	data, _ := json.Marshal(flow.Series{MsgID: "p@x", Patches: []*flow.Message{fakestage.Mail("From: a@x\nSubject: [PATCH] svcrdma: x\nMessage-ID: <p@x>\n\nbody\n")}})
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
	fixData, _ := json.Marshal(flow.Series{MsgID: "f@x", Patches: []*flow.Message{fakestage.Mail("From: a@x\nSubject: [PATCH] svcrdma: fix x\nMessage-ID: <f@x>\n\nbody\n")}})
	fsid, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: "f@x", Version: 1, Tree: "rdma", Subject: "[PATCH] svcrdma: fix x", Data: fixData})
	if err != nil {
		t.Fatal(err)
	}
	onTop := add(store.Test{Key: "f1", Kind: "series", SeriesID: fsid, Tree: "rdma", Base: base, State: "done", FixOf: series, ApplyOn: "c0ffee"})
	inPlace := add(store.Test{Key: "f2", Kind: "series", SeriesID: fsid, Tree: "rdma", Base: base, State: "done", FixOf: series})
	onHead := add(store.Test{Key: "f3", Kind: "series", SeriesID: fsid, Tree: "mainline", Base: base, State: "done", FixOf: branch, ApplyOn: "bad0"})

	art := artifact.Dir{Root: t.TempDir()}
	os.MkdirAll(art.Path("k1"), 0o755)
	os.WriteFile(filepath.Join(art.Path("k1"), "config"), []byte("CONFIG_INFINIBAND=y\n"), 0o644)
	os.WriteFile(filepath.Join(art.Path("k1"), "build.log"), []byte("  CC      net/sunrpc/xprtrdma/svc_rdma.o\n"), 0o644)
	if err := st.SaveRun(ctx, st.DB, store.Run{TestID: series, Round: 1, Role: "base", Commit: base, Lab: "qemu",
		Samples: []flow.Sample{{Metrics: map[string]float64{"copy_MBps": 8.25}}}}); err != nil {
		t.Fatal(err)
	}
	r := &Maker{St: st, Artifacts: art, Repo: t.TempDir(), Settings: []byte("[lab]\ndefault = \"qemu\"\n"), Version: "v",
		TreeURLs:     map[string]string{"rdma": "https://git.kernel.org/pub/scm/linux/kernel/git/rdma/rdma.git"},
		CommandLines: func(side string) ([]string, []string) { return lab.CommandLines(lab.DefaultConfig(), side) }}

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
	if files["lab.toml"] != string(r.Settings) {
		t.Errorf("lab.toml %q, want the settings given", files["lab.toml"])
	}
	// The README, with the boots' QEMU command lines as the lab makes
	// them for its default configuration.
	testenv.Golden(t, filepath.Join("testdata", "README.golden"), []byte(files["README"]), *update)

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
		if _, err := r.Bundle(ctx, id); !errors.Is(err, ErrNone) {
			t.Errorf("test %d: %v, want ErrNone", id, err)
		}
	}
	if _, err := r.Bundle(ctx, 999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no such test: %v", err)
	}
}

// A reproducer's archive (this binary in it, as serve's) is gzipped once:
// a second download is the same file and costs no gzip; a boot more is
// another archive.
func TestReproducerArchiveMadeOnce(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	data, _ := json.Marshal(flow.Series{MsgID: "p@x", Patches: []*flow.Message{fakestage.Mail("From: a@x\nSubject: [PATCH] svcrdma: x\nMessage-ID: <p@x>\n\nbody\n")}})
	sid, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: "p@x", Version: 1, Tree: "rdma", Subject: "[PATCH] svcrdma: x", Data: data})
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
	// The running executable in the bundle, as serve's is.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	r := &Maker{St: st, Artifacts: artifact.Dir{Root: t.TempDir()}, Repo: t.TempDir(), Settings: []byte("[lab]\n"), Binary: exe, Version: "v",
		Archives: bundle.NewCache(cache, 0)}
	archive := func() (os.FileInfo, time.Duration) {
		t.Helper()
		before := cpuTime(t)
		f, name, err := r.Archive(ctx, tst.ID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if name != fmt.Sprintf("rdmabot-test-%d.tar.gz", tst.ID) || filepath.Dir(f.Name()) != cache {
			t.Errorf("archive %s at %s", name, f.Name())
		}
		st, _ := f.Stat()
		return st, cpuTime(t) - before
	}
	first, made := archive()
	again, served := archive()
	t.Logf("made in %v of CPU (%d bytes), served again in %v", made, first.Size(), served)
	if !os.SameFile(first, again) || served > 100*time.Millisecond {
		t.Errorf("a second download: the same file %v, %v of CPU; want the same file, no gzip", os.SameFile(first, again), served)
	}
	if err := st.SaveRun(ctx, st.DB, store.Run{TestID: tst.ID, Round: 1, Role: "base", Commit: tst.Base, Lab: "qemu"}); err != nil {
		t.Fatal(err)
	}
	if next, _ := archive(); os.SameFile(first, next) {
		t.Error("a boot more and the same archive")
	}
	if _, _, err := r.Archive(ctx, 999, time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("no such test: %v", err)
	}
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
