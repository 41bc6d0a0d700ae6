// Package reproduce makes a test's reproducer: a tar of its series, its
// base on the tree's URL, the kernel's .config and build logs, the lab's
// settings and the guest scripts, that reruns the test with no rdmabot
// (run.sh) or with this binary. The dashboard serves it.
package reproduce

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rdmabot/rdmabot/bot/artifact"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/redact"
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/reports/bundle"
	"github.com/rdmabot/rdmabot/reports/reply"
)

// Maker makes a test's reproducer bundle from what the bot stored: the
// series, the base, the base kernel's .config from the artifact store,
// the configured lab and statistics, and this binary.
type Maker struct {
	St        *store.Store
	Artifacts artifact.Dir
	// Repo is the tree store's repository: a series applied on its base
	// comes from it as a git bundle.
	Repo string
	// Settings is the lab.toml the bundle's run loads: the QEMU lab, its
	// test, the statistics and the rounds.
	Settings []byte
	// TreeURLs give each base's tree its URL.
	TreeURLs map[string]string
	// Side is where a series' kernel boots (lab.Runner.CandidateSide).
	Side func(flow.Series) string
	// CommandLines are the guests' QEMU command lines of a base boot and
	// of the candidate's on a side (lab.CommandLines); nil: none shown.
	CommandLines func(side string) (base, candidate []string)
	// Binary is the rdmabot executable put in the bundle ("": none).
	Binary, Version string
	// Archives keeps the bundles as downloaded, each made once.
	Archives *bundle.Cache
}

// ErrNone is a test that has nothing to reproduce: no series
// (a mainline run), or no base chosen yet. It is a not-found: the
// dashboard answers 404.
var ErrNone = fmt.Errorf("no reproducer: %w", store.ErrNotFound)

// appliedOn are the patches a fix follow-up's series went on top of (the
// reported series'), to apply first on the base; none for other tests.
// A fix applied on a mainline head cannot be redone from the base and
// patches a bundle holds.
func (r *Maker) appliedOn(ctx context.Context, t store.Test) ([]*flow.Message, error) {
	if t.FixOf == 0 || t.ApplyOn == "" {
		return nil, nil
	}
	orig, err := r.St.Test(ctx, r.St.DB, t.FixOf)
	if err != nil {
		return nil, err
	}
	if orig.SeriesID == 0 {
		return nil, fmt.Errorf("test %d applied its series on %s %s, a head no base and patches redo: %w", t.ID, orig.Tree, t.ApplyOn, ErrNone)
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

// raws are the mails as they were posted: what git am reads.
func raws(mails []*flow.Message) [][]byte {
	out := make([][]byte, 0, len(mails))
	for _, m := range mails {
		out = append(out, m.Raw)
	}
	return out
}

// Bundle is test id's reproducer.
func (r *Maker) Bundle(ctx context.Context, id int64) (*bundle.Bundle, error) {
	t, err := r.St.Test(ctx, r.St.DB, id)
	if err != nil {
		return nil, err
	}
	if t.SeriesID == 0 {
		return nil, fmt.Errorf("test %d tests a branch, not a series: %w", id, ErrNone)
	}
	if t.Base == "" {
		return nil, fmt.Errorf("test %d has no base yet: %w", id, ErrNone)
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
	in := bundle.Input{TestID: id, Subject: row.Subject, Link: row.Link, Tree: t.Tree, Branch: t.BaseBranch, Base: t.Base,
		Patches: raws(append(patches, s.Patches...)), Settings: r.Settings, Binary: r.Binary, Version: r.Version, Side: r.side(s)}
	if r.CommandLines != nil {
		in.QEMUBase, in.QEMUCandidate = r.CommandLines(in.Side)
	}
	in.TreeURL = redact.URLs(r.TreeURLs[t.Tree]) // the bundle is public
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
			in.ClientSide = in.ClientSide || s.Profile == flow.ProfileClientSide
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

// Archive is test id's reproducer as a gzipped tar, open to be served,
// and the name to download it as: made (dated now) once for what the
// bundle holds, not once per download.
func (r *Maker) Archive(ctx context.Context, id int64, now time.Time) (*os.File, string, error) {
	b, err := r.Bundle(ctx, id)
	if err != nil {
		return nil, "", err
	}
	f, err := r.Archives.Open(ctx, b, now)
	if err != nil {
		return nil, "", err
	}
	return f, b.Dir + ".tar.gz", nil
}

// artifactFile is the path of a file of a stored artifact; "" when the
// artifact or the file is not (or no longer) here.
func (r *Maker) artifactFile(key, name string) string {
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
func (r *Maker) gitBundle(ctx context.Context, t store.Test) []byte {
	if t.Candidate == "" || t.Base == "" {
		return nil
	}
	st, err := builder.OpenRepo(r.Repo)
	if err != nil {
		return nil
	}
	b, err := st.GitBundle(ctx, t.Base, t.Candidate, reply.SeriesBranch)
	if err != nil {
		return nil
	}
	return b
}

// side is where s's kernel booted: the server when no one says.
func (r *Maker) side(s flow.Series) string {
	if r.Side == nil {
		return "server"
	}
	return r.Side(s)
}
