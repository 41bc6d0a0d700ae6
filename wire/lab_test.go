package wire

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rdmabot/rdmabot/bot/store"
)

// serve with config.toml runs the fstests profile, after the pressure
// profile, built from the snapshot beside the checkout (a relative
// source is the config file's neighbour, wherever serve starts); which
// series ask for it is lab.TestFstestsWhy's.
func TestFstestsProfileWired(t *testing.T) {
	for _, tool := range []string{"bwrap", "make", "gcc", "ccache"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	cfg, err := Load(filepath.Join("..", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.Abs(filepath.Join("..", "..", "shared", "peer", "fstests-63a29724a85f.tar.gz"))
	if cfg.Lab.Fstests.Source != want || cfg.Lab.Fstests.Commit != "63a29724a85f" {
		t.Errorf("lab.fstests.source %q commit %q, want %q", cfg.Lab.Fstests.Source, cfg.Lab.Fstests.Commit, want)
	}
	cfg.DataDir, cfg.CacheDir = t.TempDir(), t.TempDir()
	cfg.Builder.HeavyLock, cfg.Lab.QEMU.HeavyLock = "", ""
	st, err := store.Open(context.Background(), "", cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stages, err := New(context.Background(), cfg, st, "all", nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range stages.Profiles {
		names = append(names, p.Name())
	}
	if i := slices.Index(names, "fstests"); i < 0 || i < slices.Index(names, "pressure") {
		t.Fatalf("profiles %v: want fstests after pressure", names)
	}
}
