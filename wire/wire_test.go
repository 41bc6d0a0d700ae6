package wire

import (
	"context"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/internal/cfgtype"
	"github.com/rdmabot/rdmabot/lab"
)

// The kernel is configured for the pair lab.default names: a real
// Omni-Path pair gets the opa configuration, a real pair with other
// adapters the hw one, the QEMU pair its own; a name that is no pair is a
// configuration error at start, not a failing build per series.
func TestNewConfiguresTheDefaultPairsKernel(t *testing.T) {
	for _, tool := range []string{"bwrap", "make", "gcc", "ccache"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	host := lab.SSHHostConfig{Address: "127.0.0.1:22", User: "root", KeyFile: "/k", KnownHosts: "/h",
		TestIP: "192.0.2.1", Netdev: "ib0", Boot: "kexec"}
	for _, c := range []struct{ pair, rdma, want string }{
		{"qemu", "", "qemu"},
		{"opa1", "opa", "opa"},
		{"cx7", "hw", "hw"},
	} {
		t.Run(c.pair, func(t *testing.T) {
			cfg := Default()
			cfg.DataDir, cfg.CacheDir = t.TempDir(), t.TempDir()
			cfg.Builder.HeavyLock = ""
			if c.rdma != "" {
				cfg.Lab.Pairs = []lab.SSHPairConfig{{Name: c.pair, RDMA: c.rdma, Lease: cfgtype.D(time.Hour), Server: host, Client: host, Disposable: true}}
			}
			cfg.Lab.Default = c.pair
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			st, err := store.Open(context.Background(), "", cfg.DataDir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			stages, err := New(context.Background(), cfg, st, "all", nil, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if got := stages.Build.(buildStage).Lab; got != c.want {
				t.Errorf("lab.default %s builds the %q kernel, want %q", c.pair, got, c.want)
			}
		})
	}
	cfg := Default()
	cfg.DataDir, cfg.CacheDir = t.TempDir(), t.TempDir()
	cfg.Lab.Default = "nowhere" // not validated: New must still refuse it
	st, err := store.Open(context.Background(), "", filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := New(context.Background(), cfg, st, "all", nil, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "lab.default") {
		t.Errorf("an unknown lab.default: %v, want a configuration error naming it", err)
	}
}
