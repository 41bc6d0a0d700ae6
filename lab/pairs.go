package lab

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Dirs are where the lab keeps its files.
type Dirs struct {
	// Cache holds rebuildable things: guest images, noise measurements
	// (<cache_dir>/lab).
	Cache string
	// Leases holds the reservations of real hosts; every bot sharing the
	// hosts must use the same directory.
	Leases string
}

// Image returns the guest image of the default recipe, from the cache or
// built now.
func (d Dirs) Image(ctx context.Context, log *slog.Logger) (Image, error) {
	return EnsureImage(ctx, filepath.Join(d.Cache, "images"), DefaultRecipe(), log)
}

// NewPair returns the pair called name ("" for the configured default):
// the QEMU pair, with its guest image built if need be, or a real pair.
func NewPair(ctx context.Context, c Config, dirs Dirs, name string, log *slog.Logger) (Pair, error) {
	if name == "" {
		name = c.Default
	}
	if name == "qemu" {
		img, err := dirs.Image(ctx, log)
		if err != nil {
			return nil, err
		}
		p := NewQEMUPair(c.QEMU, img, log)
		p.WithFstests(dirs, c.Fstests)
		return p, nil
	}
	for _, p := range c.Pairs {
		if p.Name == name {
			host, _ := os.Hostname()
			return NewSSHPair(p, &Leases{Dir: dirs.Leases, Now: time.Now}, fmt.Sprintf("rdmabot@%s/%d", host, os.Getpid()), log), nil
		}
	}
	return nil, fmt.Errorf("lab: no pair named %q", name)
}
