package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/pelletier/go-toml/v2"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/artifact"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/redact"
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/reports/bundle"
	"github.com/rdmabot/rdmabot/reports/reply"
)

// Reproducer makes a test's reproducer bundle from what the bot stored:
// the series, the base, the base kernel's .config from the artifact
// store, this configuration's lab and statistics, and this binary.
type Reproducer struct {
	St        *store.Store
	Cfg       Config
	Artifacts artifact.Dir
	// Binary is the rdmabot executable put in the bundle ("": none).
	Binary, Version string
}

// NewReproducer is the reproducer of the bot configured by cfg, with the
// running executable in its bundles.
func NewReproducer(cfg Config, st *store.Store, version string) *Reproducer {
	exe, err := os.Executable()
	if err != nil {
		exe = ""
	}
	return &Reproducer{St: st, Cfg: cfg, Artifacts: artifact.Dir{Root: bot.ArtifactRoot(cfg.Bot, cfg.CacheDir)}, Binary: exe, Version: version}
}

// ErrNoReproducer is a test that has nothing to reproduce: no series
// (a mainline run), or no base chosen yet. It is a not-found: the
// dashboard answers 404.
var ErrNoReproducer = fmt.Errorf("no reproducer: %w", store.ErrNotFound)

// appliedOn are the patches a fix follow-up's series went on top of (the
// reported series'), to apply first on the base; none for other tests.
// A fix applied on a mainline head cannot be redone from the base and
// patches a bundle holds.
func (r *Reproducer) appliedOn(ctx context.Context, t store.Test) ([][]byte, error) {
	if t.FixOf == 0 || t.ApplyOn == "" {
		return nil, nil
	}
	orig, err := r.St.Test(ctx, r.St.DB, t.FixOf)
	if err != nil {
		return nil, err
	}
	if orig.SeriesID == 0 {
		return nil, fmt.Errorf("test %d applied its series on %s %s, a head no base and patches redo: %w", t.ID, orig.Tree, t.ApplyOn, ErrNoReproducer)
	}
	row, err := r.St.Series(ctx, r.St.DB, orig.SeriesID)
	if err != nil {
		return nil, err
	}
	var s flow.Series
	if err := json.Unmarshal(row.Data, &s); err != nil {
		return nil, fmt.Errorf("test %d: stored series: %w", orig.ID, err)
	}
	return s.Patches, nil
}

// Bundle is test id's reproducer.
func (r *Reproducer) Bundle(ctx context.Context, id int64) (*bundle.Bundle, error) {
	t, err := r.St.Test(ctx, r.St.DB, id)
	if err != nil {
		return nil, err
	}
	if t.SeriesID == 0 {
		return nil, fmt.Errorf("test %d tests a branch, not a series: %w", id, ErrNoReproducer)
	}
	if t.Base == "" {
		return nil, fmt.Errorf("test %d has no base yet: %w", id, ErrNoReproducer)
	}
	row, err := r.St.Series(ctx, r.St.DB, t.SeriesID)
	if err != nil {
		return nil, err
	}
	var s flow.Series
	if err := json.Unmarshal(row.Data, &s); err != nil {
		return nil, fmt.Errorf("test %d: stored series: %w", id, err)
	}
	patches, err := r.appliedOn(ctx, t)
	if err != nil {
		return nil, err
	}
	settings, err := Settings(r.Cfg)
	if err != nil {
		return nil, err
	}
	in := bundle.Input{TestID: id, Subject: row.Subject, Link: row.Link, Tree: t.Tree, Branch: t.BaseBranch, Base: t.Base,
		Patches: append(patches, s.Patches...), Settings: settings, Binary: r.Binary, Version: r.Version, Side: seriesSide(s)}
	for _, tr := range r.Cfg.Builder.Trees {
		if tr.Name == t.Tree {
			in.TreeURL = redact.URLs(tr.URL) // the bundle is public
		}
	}
	// The .config and build logs are there while the artifacts are: a
	// pruned or remote one leaves the bundle without them, which its
	// README says. They are named by path: a page that lists the files
	// reads none of them.
	in.ConfigPath = r.artifactFile(t.BaseArtifact, "config")
	if p := r.artifactFile(t.BaseDebugArtifact, "config"); p != "" {
		// The debug profile's kernels' (a crash under it names this one).
		in.Kept = append(in.Kept, bundle.File{Name: "kernel-debug.config", Mode: 0o644, Path: p})
	}
	scripts := lab.GuestScripts()
	for _, name := range slices.Sorted(maps.Keys(scripts)) {
		in.Guest = append(in.Guest, bundle.File{Name: name, Mode: 0o644, Data: scripts[name]})
	}
	for _, a := range []struct{ key, name string }{{t.BaseArtifact, "base-build.log"}, {t.CandArtifact, "candidate-build.log"}} {
		if p := r.artifactFile(a.key, "build.log"); p != "" {
			in.Kept = append(in.Kept, bundle.File{Name: a.name, Mode: 0o644, Path: p})
		}
	}
	if b := r.gitBundle(ctx, t); b != nil {
		in.Kept = append(in.Kept, bundle.File{Name: "series.bundle", Mode: 0o644, Data: b})
	}
	runs, err := r.St.Runs(ctx, r.St.DB, id)
	if err != nil {
		return nil, err
	}
	for _, run := range runs {
		for _, s := range run.Samples {
			in.Lossy = in.Lossy || s.Profile == flow.ProfileLossy
			in.Pressure = in.Pressure || s.IsPressure()
		}
	}
	if len(runs) > 0 {
		b, err := json.MarshalIndent(runs, "", "  ")
		if err != nil {
			return nil, err
		}
		in.Kept = append(in.Kept, bundle.File{Name: "boots.json", Mode: 0o644, Data: append(b, '\n')})
	}
	return bundle.Make(in)
}

// artifactFile is the path of a file of a stored artifact; "" when the
// artifact or the file is not (or no longer) here.
func (r *Reproducer) artifactFile(key, name string) string {
	if key == "" {
		return ""
	}
	p := filepath.Join(r.Artifacts.Path(key), name)
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return p
}

// gitBundle is the series applied on its base as a git bundle, when this
// machine's tree store has the applied commits (nil otherwise: the
// reproducer's other files say the same as plain commands).
func (r *Reproducer) gitBundle(ctx context.Context, t store.Test) []byte {
	if t.Candidate == "" || t.Base == "" {
		return nil
	}
	st, err := builder.OpenRepo(builder.StorePath(r.Cfg.DataDir))
	if err != nil {
		return nil
	}
	b, err := st.GitBundle(ctx, t.Base, t.Candidate, reply.SeriesBranch)
	if err != nil {
		return nil
	}
	return b
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
