package bot

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// The build job: apply, build base (unless its results are cached) and candidate.

type buildWorker struct {
	river.WorkerDefaults[BuildArgs]
	b *Bot
}

func (w *buildWorker) Timeout(*river.Job[BuildArgs]) time.Duration { return 3 * time.Hour }

func (w *buildWorker) Work(ctx context.Context, job *river.Job[BuildArgs]) error {
	b := w.b
	return testJob(ctx, b, job, job.Args.TestID, func(tr *Trace, t store.Test) error {
		verdict := func(v flow.Outcome, err error) error {
			return finishWithVerdict(ctx, b, job, t, v, err)
		}
		// Applied first, before any kernel is built: a series that does
		// not apply is answered without waiting for one. The check job
		// and a second build job (Based) apply it again: cheap, and the
		// same tree.
		if t.Kind == store.KindSeries {
			cand, err := b.applySeries(ctx, &t, tr)
			if err != nil {
				if infraOrInterrupted(ctx, err) {
					return err
				}
				tr.Logf("does not apply: %v", err)
				return verdict(flow.ApplyFailed, err)
			}
			t.Candidate = cand
			tr.Logf("applied: %s", cand)
		}
		if t.Base != "" && !job.Args.Based {
			missing, err := b.missingBases(ctx, t)
			if err != nil {
				return err
			}
			if len(missing) > 0 {
				tr.Logf("%d base kernels of %s %s are not built yet: the base lane builds them, giving way to candidate builds", len(missing), t.Tree, short(t.Base))
				return complete(ctx, b, job, func(tx *sql.Tx) error {
					if err := b.st.UpdateTest(ctx, tx, t); err != nil {
						return err
					}
					_, err := b.river.InsertTx(ctx, tx, BaseKernelsArgs{TestID: t.ID}, nil)
					return err
				})
			}
		}
		if t.Base != "" {
			// Built even when its results are cached: they may be stale by
			// the time the lab runs, or the statistics may ask for more
			// runs. A kernel is never built twice (artifact store, kbuild).
			key, err := b.buildKernel(ctx, t.Tree, t.Base, tr)
			if err != nil {
				if infraOrInterrupted(ctx, err) {
					return err
				}
				// Not the patch's fault: no verdict, no reply blaming it.
				tr.Logf("base does not build: %v", err)
				t.State, t.Summary = store.StateFailed, "base does not build: "+err.Error()
				return complete(ctx, b, job, func(tx *sql.Tx) error { return b.st.UpdateTest(ctx, tx, t) })
			}
			t.BaseArtifact = key
		}
		key, err := b.buildKernel(ctx, t.Tree, t.Candidate, tr)
		if err != nil {
			if infraOrInterrupted(ctx, err) {
				return err
			}
			tr.Logf("build failed: %v", err)
			return verdict(flow.BuildFailed, err)
		}
		t.CandArtifact = key
		if err := b.buildDebug(ctx, &t, tr); err != nil {
			if infraOrInterrupted(ctx, err) {
				return err
			}
			tr.Logf("build failed with the debug profile's configuration: %v", err)
			return verdict(flow.BuildFailed, fmt.Errorf("with the debug profile's configuration (KASAN, lockdep): %w", err))
		}
		t.State = store.StateTesting
		return complete(ctx, b, job, func(tx *sql.Tx) error {
			if err := b.st.UpdateTest(ctx, tx, t); err != nil {
				return err
			}
			_, err := b.river.InsertTx(ctx, tx, LabArgs{TestID: t.ID, Round: 1, Runs: b.cfg.Runs}, nil)
			return err
		})
	})
}

// applySeries applies a series test's patches onto its base (a fix
// test's onto the candidate it fixes) and returns the candidate commit.
func (b *Bot) applySeries(ctx context.Context, t *store.Test, tr *Trace) (string, error) {
	s, err := b.series(ctx, t.SeriesID)
	if err != nil {
		return "", err
	}
	cand, err := b.applyFix(ctx, t, s, tr)
	if err == nil && cand == "" {
		cand, err = b.stages.Build.Apply(ctx, flow.Base{Tree: t.Tree, Commit: t.Base}, s, tr)
	}
	return cand, err
}

// buildDebug builds the debug profile's kernels of a series' base and
// candidate (Stages.DebugBuild) when the profile names a reason for the
// series. A base that does not build so leaves the test without them
// (not the series' fault); an error is the candidate's (or infra).
func (b *Bot) buildDebug(ctx context.Context, t *store.Test, tr *Trace) error {
	why, err := b.debugWhy(ctx, *t)
	if err != nil || why == "" {
		return err
	}
	tr.Logf("the series changes %s: building base and candidate for the %s profile too", why, b.stages.Debug.Name())
	base, err := b.buildKernelWith(ctx, b.stages.DebugBuild, t.Tree, t.Base, tr)
	if err != nil {
		if infraOrInterrupted(ctx, err) {
			return err
		}
		tr.Logf("base does not build for the %s profile, which is left out: %v", b.stages.Debug.Name(), err)
		return nil
	}
	cand, err := b.buildKernelWith(ctx, b.stages.DebugBuild, t.Tree, t.Candidate, tr)
	if err != nil {
		return err
	}
	t.BaseDebugArtifact, t.CandDebugArtifact = base, cand
	return nil
}

// buildKernel builds tree at commit and files the kernel in the artifact
// store, recording which worker holds it.
func (b *Bot) buildKernel(ctx context.Context, tree, commit string, tr *Trace) (string, error) {
	return b.buildKernelWith(ctx, b.stages.Build, tree, commit, tr)
}

// built names the kernel build would make of tree at commit and says
// whether the artifact store holds it.
func (b *Bot) built(ctx context.Context, build Builder, tree, commit string) (key string, ok bool, err error) {
	kk, err := build.KernelKey(ctx, tree, commit)
	if err != nil {
		return "", false, flow.MarkInfra(err)
	}
	key = artifactKey(tree, kk)
	return key, b.art.Has(key), nil
}

// buildKernelWith is buildKernel with another configuration's builder.
func (b *Bot) buildKernelWith(ctx context.Context, build Builder, tree, commit string, tr *Trace) (string, error) {
	key, ok, err := b.built(ctx, build, tree, commit)
	if err != nil {
		return "", err
	}
	if ok {
		b.useArtifact(key)
		tr.Logf("kernel %s already built", key)
		return key, nil
	}
	tr.Logf("building %s %s", tree, short(commit))
	start := time.Now()
	dir, err := build.Build(ctx, tree, commit, tr)
	if err != nil {
		return "", err
	}
	if err := b.art.Put(ctx, key, dir); err != nil {
		return "", flow.MarkInfra(err)
	}
	if err := b.st.PutArtifact(ctx, key, b.cfg.URL); err != nil {
		return "", flow.MarkInfra(err)
	}
	tr.Logf("built %s in %s", key, time.Since(start).Round(time.Second))
	b.pruneArtifacts(ctx, tr)
	return key, nil
}

// artifactKey names a kernel in the artifact store: the tree for the
// reader, the builder's key for what it is.
func artifactKey(tree, kernel string) string {
	return fmt.Sprintf("%s-%s", tree, kernel)
}

// fetchArtifact returns a local directory holding key, pulling it from
// the worker that built it when that is another machine.
func (b *Bot) fetchArtifact(ctx context.Context, key string, tr *Trace) (string, error) {
	if b.art.Has(key) {
		b.useArtifact(key)
		return b.art.Path(key), nil
	}
	url, err := b.st.ArtifactWorker(ctx, key)
	if err != nil {
		return "", flow.MarkInfra(err)
	}
	tr.Logf("pulling %s from %s", key, url)
	p, err := b.art.Pull(ctx, b.http, url, key)
	if err != nil {
		return "", flow.MarkInfra(err)
	}
	b.pruneArtifacts(ctx, tr)
	return p, nil
}

func (b *Bot) baseKey(tree, commit, lab string) store.BaseKey {
	return store.BaseKey{Tree: tree, Commit: commit, Lab: lab, Params: b.opts.Params}
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
