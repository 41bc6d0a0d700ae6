package wire

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pelletier/go-toml/v2"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/artifact"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/clients/reproduce"
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/reports/bundle"
)

// NewReproducer is the reproducer of the bot configured by cfg, with the
// running executable in its bundles, their archives kept in cache_dir.
func NewReproducer(cfg Config, st *store.Store, version string) (*reproduce.Maker, error) {
	settings, err := Settings(cfg)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		exe = ""
	}
	urls := map[string]string{}
	for _, t := range cfg.Builder.Trees {
		urls[t.Name] = t.URL
	}
	return &reproduce.Maker{St: st, Artifacts: artifact.Dir{Root: bot.ArtifactRoot(cfg.Bot, cfg.CacheDir)}, Repo: builder.StorePath(cfg.DataDir),
		Settings: settings, TreeURLs: urls, Side: seriesSide, Binary: exe, Version: version,
		CommandLines: func(side string) ([]string, []string) { return lab.CommandLines(cfg.Lab, side) },
		Archives:     bundle.NewCache(filepath.Join(cfg.CacheDir, "reproducers"), 0)}, nil
}

// Settings is what a reproducer needs of cfg, as TOML: the QEMU lab
// and its test, the statistics and the rounds. Real pairs stay out (a
// reproducer runs where they are not), and so do paths of this machine:
// the heavy lock is made relative again, to the reader's cache_dir.
func Settings(cfg Config) ([]byte, error) {
	l := cfg.Lab
	l.Pairs, l.Default = nil, "qemu"
	l.QEMU.HeavyLock = ""
	if cfg.Lab.QEMU.HeavyLock != "" {
		l.QEMU.HeavyLock = "heavy.lock"
	}
	type stats struct {
		MinEffect float64 `toml:"min_effect"`
		Alpha     float64 `toml:"alpha"`
		Runs      int     `toml:"runs"`
		RunsStep  int     `toml:"runs_step"`
		MaxRuns   int     `toml:"max_runs"`
		Resamples int     `toml:"resamples"`
	}
	type rounds struct {
		MaxRounds int `toml:"max_rounds"`
	}
	rc := cfg.Reports
	b, err := toml.Marshal(struct {
		Lab     lab.Config `toml:"lab"`
		Reports stats      `toml:"reports"`
		Bot     rounds     `toml:"bot"`
	}{l, stats{rc.MinEffect, rc.Alpha, rc.Runs, rc.RunsStep, rc.MaxRuns, rc.Resamples}, rounds{cfg.Bot.MaxRounds}})
	if err != nil {
		return nil, fmt.Errorf("reproducer settings: %w", err)
	}
	// The result must load as a configuration, as run.sh loads it.
	if _, err := Parse(append([]byte("cache_dir = \"/x\"\n"), b...)); err != nil {
		return nil, fmt.Errorf("reproducer settings do not load: %w", err)
	}
	return b, nil
}
