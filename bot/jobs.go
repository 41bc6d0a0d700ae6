package bot

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/rdmabot/rdmabot/bot/store"
)

// The job kinds. Each job does one stage and, in the transaction that
// completes it, inserts the next: ingest -> test -> build -> lab ->
// report (-> lab for more runs); mainline -> test ...; bisect -> bisect.
// Args carry ids only; the state is in our tables.

// pending are the states in which a second insert is a duplicate for
// jobs that may legitimately run again later (ticks).
var pending = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}

// IngestArgs polls the lists.
type IngestArgs struct{}

func (IngestArgs) Kind() string { return "ingest" }
func (IngestArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueIngest, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: pending}}
}

// TestArgs starts a test: base selection.
type TestArgs struct {
	TestID int64 `json:"test_id"`
}

func (TestArgs) Kind() string { return "test" }
func (TestArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBuild, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// BuildArgs applies and builds a test's kernels.
type BuildArgs struct {
	TestID int64 `json:"test_id"`
}

func (BuildArgs) Kind() string { return "build" }
func (BuildArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBuild, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// LabArgs runs one round of a test on its lab pair.
type LabArgs struct {
	TestID int64 `json:"test_id"`
	Round  int   `json:"round"`
	Runs   int   `json:"runs"`
}

func (LabArgs) Kind() string { return "lab" }
func (LabArgs) InsertOpts() river.InsertOpts {
	// Unique while pending only: a retest after stale base results may
	// run round 1 of the same test again.
	return river.InsertOpts{Queue: QueueLab, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: pending}}
}

// ReportArgs decides and replies, for a test or a bisection.
type ReportArgs struct {
	TestID      int64 `json:"test_id,omitempty"`
	Round       int   `json:"round,omitempty"`
	BisectionID int64 `json:"bisection_id,omitempty"`
}

func (ReportArgs) Kind() string { return "report" }
func (ReportArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueIngest, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// MainlineArgs tests a branch head if it is new.
type MainlineArgs struct {
	Tree   string `json:"tree"`
	Branch string `json:"branch"`
}

func (MainlineArgs) Kind() string { return "mainline" }
func (MainlineArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBuild, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: pending}}
}

// BisectArgs is one step of a bisection.
type BisectArgs struct {
	BisectionID int64 `json:"bisection_id"`
	Step        int   `json:"step"`
}

func (BisectArgs) Kind() string { return "bisect" }
func (BisectArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueBuild, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// GitHubPollArgs polls issue comments.
type GitHubPollArgs struct{}

func (GitHubPollArgs) Kind() string { return "github_poll" }
func (GitHubPollArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueIngest, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: pending}}
}

// Verdicts the bot decides itself; the statistics decide the others.
const (
	VerdictNotApplied  = "APPLY_FAILED"
	VerdictBuildFailed = "BUILD_FAILED"
	VerdictBootFailed  = "BOOT_FAILED" // the candidate kernel did not come up
	VerdictCrash       = "CRASH"
	VerdictMeasured    = "MEASURED" // a first mainline head: nothing to compare with
	VerdictPass        = "PASS"
	VerdictRegression  = "REGRESSION"
	VerdictImprovement = "IMPROVEMENT"
	VerdictIncomplete  = "INCOMPLETE" // patches missing after lore.grace_period: answered, not tested
	VerdictRefused     = "REFUSED"    // a mail command from someone who may not ask
)

// --- ingest

type ingestWorker struct {
	river.WorkerDefaults[IngestArgs]
	b *Bot
}

func (w *ingestWorker) Timeout(*river.Job[IngestArgs]) time.Duration { return 30 * time.Minute }

func (w *ingestWorker) Work(ctx context.Context, job *river.Job[IngestArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		if b.stages.Ingest == nil {
			tr.Logf("no mail sources on this worker")
			return complete(ctx, b, job, nil)
		}
		cp := &pendingCheckpoints{st: b.st, set: map[string]string{}}
		series, err := b.stages.Ingest.Poll(ctx, cp)
		if err != nil {
			return infra(fmt.Errorf("ingest: %w", err))
		}
		tr.Logf("%d new series", len(series))
		// Nothing inside the transaction may write the trace: on SQLite
		// the transaction holds the one connection.
		var queued []string
		err = complete(ctx, b, job, func(tx *sql.Tx) error {
			queued = queued[:0]
			for _, s := range series {
				what := "test"
				var id int64
				var created bool
				var err error
				switch r := s.Request; {
				case r != nil && r.Refused != "":
					what = "refused " + r.Line + " from " + r.From
					id, created, err = b.enqueueNotice(ctx, tx, s, "refused:"+r.MsgID, VerdictRefused, r.Refused, Origin{Kind: "mail", Request: r})
				case r != nil:
					what = r.Line + " from " + r.From
					id, created, err = b.enqueueSeries(ctx, tx, s, Origin{Kind: "mail", Request: r}, 0)
				case s.Incomplete != "":
					what = "incomplete"
					id, created, err = b.enqueueNotice(ctx, tx, s, fmt.Sprintf("incomplete:%s:v%d", s.MsgID, s.Version), VerdictIncomplete, s.Incomplete, Origin{Kind: "mail"})
				default:
					id, created, err = b.enqueueSeries(ctx, tx, s, Origin{Kind: "mail"}, 0)
				}
				if err != nil {
					return err
				}
				queued = append(queued, fmt.Sprintf("series %s v%d %q: %s: test %d (new: %v)", s.MsgID, s.Version, s.Subject, what, id, created))
			}
			// Checkpoints move with the series they led to.
			for src, v := range cp.set {
				if err := b.st.SetCheckpoint(ctx, tx, src, v); err != nil {
					return err
				}
			}
			return nil
		})
		for _, l := range queued {
			tr.Logf("%s", l)
		}
		return err
	})
}

// pendingCheckpoints reads the stored checkpoints and holds new ones
// until the ingest job commits them with the series.
type pendingCheckpoints struct {
	st  *store.Store
	set map[string]string
}

func (c *pendingCheckpoints) Checkpoint(ctx context.Context, source string) (string, error) {
	if v, ok := c.set[source]; ok {
		return v, nil
	}
	return c.st.Checkpoint(ctx, c.st.DB, source)
}

func (c *pendingCheckpoints) SetCheckpoint(ctx context.Context, source, value string) error {
	c.set[source] = value
	return nil
}

// enqueueSeries records a series and its test once per (Message-ID,
// version, tree, retest number).
func (b *Bot) enqueueSeries(ctx context.Context, tx *sql.Tx, s Series, o Origin, retest int) (int64, bool, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return 0, false, err
	}
	rowTree := s.Tree
	if s.Branch != "" {
		rowTree += "/" + s.Branch
	}
	sid, err := b.st.AddSeries(ctx, tx, store.SeriesRow{MsgID: s.MsgID, Version: s.Version, Tree: rowTree,
		Subject: s.Subject, Author: s.Author, Link: s.Link, Data: data})
	if err != nil {
		return 0, false, err
	}
	key := fmt.Sprintf("series:%s:v%d:%s", s.MsgID, s.Version, rowTree)
	if o.Request != nil {
		// Asked for in a reply: a test of its own, once per command mail.
		key += ":cmd:" + o.Request.MsgID
	}
	if o.Kind == "github" {
		// Asked for in an issue: tested (and answered) there, even when
		// the list already had its reply.
		key += ":" + threadOf(o)
	}
	if retest > 0 {
		key += fmt.Sprintf(":retest%d", retest)
	}
	return b.enqueueTest(ctx, tx, store.Test{Key: key, Kind: store.KindSeries, SeriesID: sid, Tree: s.Tree}, o)
}

// enqueueNotice records an answer that needs no test (a refused command,
// an incomplete series): a test row that is done at once with its
// verdict, whose report job renders and delivers the answer. The key
// makes it happen once.
func (b *Bot) enqueueNotice(ctx context.Context, tx *sql.Tx, s Series, key, verdict, summary string, o Origin) (int64, bool, error) {
	data, err := json.Marshal(s)
	if err != nil {
		return 0, false, err
	}
	// Its own series row: the posting may still be completed, and its
	// test must then read the complete series, not this snapshot.
	sid, err := b.st.AddSeries(ctx, tx, store.SeriesRow{MsgID: s.MsgID, Version: s.Version, Tree: key,
		Subject: s.Subject, Author: s.Author, Link: s.Link, Data: data})
	if err != nil {
		return 0, false, err
	}
	t := store.Test{Key: key, Kind: store.KindSeries, SeriesID: sid, Tree: s.Tree, Lab: b.opts.Lab, Params: b.opts.Params, Origin: mustJSON(o)}
	id, created, err := b.st.AddTest(ctx, tx, t)
	if err != nil || !created {
		return id, created, err
	}
	t.ID = id
	return id, true, finishWithVerdictTx(ctx, b, tx, t, verdict, summary)
}

func (b *Bot) enqueueTest(ctx context.Context, tx *sql.Tx, t store.Test, o Origin) (int64, bool, error) {
	if t.Lab == "" {
		t.Lab = b.opts.Lab
	}
	t.Params = b.opts.Params
	t.Origin = mustJSON(o)
	if t.Thread == "" {
		t.Thread = threadOf(o)
	}
	id, created, err := b.st.AddTest(ctx, tx, t)
	if err != nil || !created {
		return id, created, err
	}
	_, err = b.river.InsertTx(ctx, tx, TestArgs{TestID: id}, nil)
	return id, true, err
}

func threadOf(o Origin) string {
	if o.Kind == "github" {
		return fmt.Sprintf("github:%s#%d", o.Repo, o.Issue)
	}
	return ""
}

// --- test: choose the base

type testWorker struct {
	river.WorkerDefaults[TestArgs]
	b *Bot
}

func (w *testWorker) Timeout(*river.Job[TestArgs]) time.Duration { return time.Hour }

func (w *testWorker) Work(ctx context.Context, job *river.Job[TestArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		t, err := b.st.Test(ctx, b.st.DB, job.Args.TestID)
		if err != nil {
			return infra(err)
		}
		if t.State == store.StateCanceled {
			tr.Logf("test %d was canceled", t.ID)
			return complete(ctx, b, job, nil)
		}
		switch t.Kind {
		case store.KindSeries:
			s, err := b.series(ctx, t.SeriesID)
			if err != nil {
				return err
			}
			if err := b.refreshStaleTrees(ctx, tr); err != nil {
				return err
			}
			base, err := b.stages.Build.SelectBase(ctx, s)
			if err != nil {
				// No base in the store (trees not fetched) is infra; any
				// other error is the series' (mail that does not parse).
				if infraOrInterrupted(ctx, err) {
					return err
				}
				tr.Logf("no base: %v", err)
				t.Detail = detailOf(err)
				return b.finishWithVerdict(ctx, job, t, VerdictNotApplied, fmt.Sprintf("The series cannot be read: %v", err))
			}
			t.Tree, t.Base, t.BaseReason, t.BaseBranch = base.Tree, base.Commit, base.Reason, base.Branch
			tr.Logf("base %s %s (%s)", t.Tree, t.Base, t.BaseReason)
			if err := b.started(ctx, t, s, tr); err != nil {
				return err
			}
		case store.KindRef:
			cand, err := b.stages.Trees.Head(ctx, t.Tree, t.Ref)
			if err != nil {
				if infraOrInterrupted(ctx, err) {
					return err
				}
				return b.finishWithVerdict(ctx, job, t, VerdictNotApplied, fmt.Sprintf("%s %s: %v", t.Tree, t.Ref, err))
			}
			t.Candidate = cand
			if br := b.opts.Branches[t.Tree]; len(br) > 0 {
				base, err := b.stages.Trees.Head(ctx, t.Tree, br[0])
				if err != nil {
					return infra(err)
				}
				if base != cand {
					t.Base, t.BaseReason = base, "head of "+t.Tree+"/"+br[0]
				}
			}
			tr.Logf("%s %s is %s, base %s", t.Tree, t.Ref, t.Candidate, t.Base)
		case store.KindMainline:
			t.BaseReason = "last good mainline run"
			tr.Logf("%s %s head %s against last good %s", t.Tree, t.Ref, t.Candidate, t.Base)
		}
		t.State = store.StateBuilding
		return complete(ctx, b, job, func(tx *sql.Tx) error {
			if err := b.st.UpdateTest(ctx, tx, t); err != nil {
				return err
			}
			_, err := b.river.InsertTx(ctx, tx, BuildArgs{TestID: t.ID}, nil)
			return err
		})
	})
}

func (b *Bot) series(ctx context.Context, id int64) (Series, error) {
	row, err := b.st.Series(ctx, b.st.DB, id)
	if err != nil {
		return Series{}, infra(err)
	}
	var s Series
	if err := json.Unmarshal(row.Data, &s); err != nil {
		return Series{}, fmt.Errorf("series %d: %w", id, err)
	}
	return s, nil
}

// finishWithVerdictTx ends a test early (does not apply, build failed,
// boot failed) and queues its report. t.Detail, when set, is the failing
// stage's structured account.
func finishWithVerdictTx(ctx context.Context, b *Bot, tx *sql.Tx, t store.Test, verdict, summary string) error {
	t.State, t.Verdict, t.Summary = store.StateDone, verdict, summary
	if err := b.st.UpdateTest(ctx, tx, t); err != nil {
		return err
	}
	_, err := b.river.InsertTx(ctx, tx, ReportArgs{TestID: t.ID, Round: t.Rounds}, nil)
	return err
}

func (b *Bot) finishWithVerdict(ctx context.Context, job *river.Job[TestArgs], t store.Test, verdict, summary string) error {
	return complete(ctx, b, job, func(tx *sql.Tx) error { return finishWithVerdictTx(ctx, b, tx, t, verdict, summary) })
}

// --- build: apply, build base (unless its results are cached) and candidate

type buildWorker struct {
	river.WorkerDefaults[BuildArgs]
	b *Bot
}

func (w *buildWorker) Timeout(*river.Job[BuildArgs]) time.Duration { return 3 * time.Hour }

func (w *buildWorker) Work(ctx context.Context, job *river.Job[BuildArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		t, err := b.st.Test(ctx, b.st.DB, job.Args.TestID)
		if err != nil {
			return infra(err)
		}
		if t.State == store.StateCanceled {
			return complete(ctx, b, job, nil)
		}
		verdict := func(v string, err error) error {
			t.Detail = detailOf(err)
			return complete(ctx, b, job, func(tx *sql.Tx) error { return finishWithVerdictTx(ctx, b, tx, t, v, err.Error()) })
		}
		if t.Kind == store.KindSeries {
			s, err := b.series(ctx, t.SeriesID)
			if err != nil {
				return err
			}
			cand, err := b.stages.Build.Apply(ctx, Base{Tree: t.Tree, Commit: t.Base}, s, tr)
			if err != nil {
				if infraOrInterrupted(ctx, err) {
					return err
				}
				tr.Logf("does not apply: %v", err)
				return verdict(VerdictNotApplied, err)
			}
			t.Candidate = cand
			tr.Logf("applied: %s", cand)
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
			return verdict(VerdictBuildFailed, err)
		}
		t.CandArtifact = key
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

// buildKernel builds tree at commit and files the kernel in the artifact
// store, recording which worker holds it.
func (b *Bot) buildKernel(ctx context.Context, tree, commit string, tr *Trace) (string, error) {
	kk, err := b.stages.Build.KernelKey(ctx, tree, commit)
	if err != nil {
		return "", infra(err)
	}
	key := artifactKey(tree, kk)
	if b.art.Has(key) {
		tr.Logf("kernel %s already built", key)
		return key, nil
	}
	tr.Logf("building %s %s", tree, short(commit))
	start := time.Now()
	dir, err := b.stages.Build.Build(ctx, tree, commit, tr)
	if err != nil {
		return "", err
	}
	if err := b.art.Put(ctx, key, dir); err != nil {
		return "", infra(err)
	}
	if err := b.st.PutArtifact(ctx, key, b.cfg.URL); err != nil {
		return "", infra(err)
	}
	tr.Logf("built %s in %s", key, time.Since(start).Round(time.Second))
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
		return b.art.Path(key), nil
	}
	url, err := b.st.ArtifactWorker(ctx, key)
	if err != nil {
		return "", infra(err)
	}
	tr.Logf("pulling %s from %s", key, url)
	p, err := b.art.Pull(ctx, b.http, url, key)
	return p, infra(err)
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

// --- lab: one round on a leased pair

type labWorker struct {
	river.WorkerDefaults[LabArgs]
	b *Bot
}

func (w *labWorker) Timeout(*river.Job[LabArgs]) time.Duration { return 3 * time.Hour }

func (w *labWorker) Work(ctx context.Context, job *river.Job[LabArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		t, err := b.st.Test(ctx, b.st.DB, job.Args.TestID)
		if err != nil {
			return infra(err)
		}
		if t.State == store.StateCanceled {
			return complete(ctx, b, job, nil)
		}
		var basePath, candPath string
		bk := b.baseKey(t.Tree, t.Base, t.Lab)
		var cached []store.Sample
		if t.Base != "" {
			// Every round boots the base beside the candidate, so that a
			// machine busier or quieter than when the cached runs were
			// measured moves both sides alike. The cache only adds
			// evidence, once it agrees with the fresh boots (below).
			if cached, _, err = b.st.BaseResults(ctx, b.st.DB, bk, b.cfg.BaseMaxAge.Duration); err != nil {
				return infra(err)
			}
			if basePath, err = b.fetchArtifact(ctx, t.BaseArtifact, tr); err != nil {
				return err
			}
			if len(cached) > 0 && job.Args.Round == 1 {
				tr.Logf("base %s: %d cached samples, to be checked against this round's fresh base boots", short(t.Base), len(cached))
			}
		}
		if candPath, err = b.fetchArtifact(ctx, t.CandArtifact, tr); err != nil {
			return err
		}
		return b.withLease(ctx, t.Lab, job.ID, t.ID, tr, func(ctx context.Context) error {
			n := job.Args.Runs
			start := time.Now()
			// Base and candidate boots alternate, so that a drift of the
			// machine during the round hits both sides alike.
			var baseSamples, candSamples []store.Sample
			if basePath != "" {
				tr.Logf("round %d: %d runs each of base %s and candidate %s on %s, alternating", job.Args.Round, n, short(t.Base), short(t.Candidate), t.Lab)
			} else {
				tr.Logf("round %d: %d candidate runs of %s on %s", job.Args.Round, n, short(t.Candidate), t.Lab)
			}
			for i := range n {
				if basePath != "" {
					tr.Logf("base %d/%d", i+1, n)
					s, err := b.stages.Lab.Run(ctx, t.Lab, basePath, 1, tr)
					if err != nil {
						if infraOrInterrupted(ctx, err) {
							return err
						}
						tr.Logf("base kernel failed in the lab: %v", err)
						t.State, t.Summary = store.StateFailed, "base kernel failed in the lab: "+err.Error()
						return complete(ctx, b, job, func(tx *sql.Tx) error { return b.st.UpdateTest(ctx, tx, t) })
					}
					baseSamples = append(baseSamples, s...)
				}
				tr.Logf("candidate %d/%d", i+1, n)
				s, err := b.stages.Lab.Run(ctx, t.Lab, candPath, 1, tr)
				if err != nil {
					if infraOrInterrupted(ctx, err) {
						return err
					}
					tr.Logf("candidate kernel failed: %v", err)
					t.Detail = detailOf(err)
					return complete(ctx, b, job, func(tx *sql.Tx) error {
						return finishWithVerdictTx(ctx, b, tx, t, VerdictBootFailed, err.Error())
					})
				}
				candSamples = append(candSamples, s...)
				// A crash is the answer already; more boots would only
				// crash again.
				if crashed(baseSamples) || crashed(candSamples) {
					break
				}
			}
			fin := time.Now()
			// The base's cache: this round's boots, after the cached ones
			// unless those disagree with them (the machine drifted).
			all := baseSamples
			drift := false
			if len(cached) > 0 && job.Args.Round == 1 {
				if drift, err = b.drifted(ctx, cached, baseSamples); err != nil {
					return err
				}
			}
			switch {
			case len(cached) == 0:
			case drift:
				tr.Logf("the %d cached base samples disagree with this round's %d fresh ones (the machine drifted): the cache is replaced", len(cached), len(baseSamples))
			default:
				all = append(append([]store.Sample(nil), cached...), baseSamples...)
			}
			return complete(ctx, b, job, func(tx *sql.Tx) error {
				if basePath != "" {
					if err := b.st.SaveRun(ctx, tx, store.Run{TestID: t.ID, JobID: job.ID, Round: job.Args.Round, Role: "base", Commit: t.Base,
						Lab: t.Lab, Samples: baseSamples, StartedAt: start, FinishedAt: fin}); err != nil {
						return err
					}
					if err := b.st.PutBaseResults(ctx, tx, bk, all); err != nil {
						return err
					}
				}
				if err := b.st.SaveRun(ctx, tx, store.Run{TestID: t.ID, JobID: job.ID, Round: job.Args.Round, Role: "candidate", Commit: t.Candidate,
					Lab: t.Lab, Samples: candSamples, StartedAt: start, FinishedAt: fin}); err != nil {
					return err
				}
				t.Rounds = job.Args.Round
				if err := b.st.UpdateTest(ctx, tx, t); err != nil {
					return err
				}
				_, err := b.river.InsertTx(ctx, tx, ReportArgs{TestID: t.ID, Round: job.Args.Round}, nil)
				return err
			})
		})
	})
}

// drifted says whether cached base runs and fresh boots of the same base
// kernel differ as a regression or an improvement would: the decision's
// own test, with its effect floor, run on the base against itself.
func (b *Bot) drifted(ctx context.Context, cached, fresh []store.Sample) (bool, error) {
	if crashed(fresh) || len(fresh) == 0 {
		return false, nil
	}
	d, err := b.stages.Decide.Decide(ctx, cached, fresh)
	if err != nil {
		return false, infra(err)
	}
	return d.Verdict == VerdictRegression || d.Verdict == VerdictImprovement, nil
}

func crashed(samples []store.Sample) bool {
	for _, s := range samples {
		if s.Crash != "" {
			return true
		}
	}
	return false
}

// withLease runs f holding the lab pair's lease, renewing it while f
// runs. A busy pair snoozes the job; a lost lease cancels f.
func (b *Bot) withLease(ctx context.Context, pair string, jobID, rank int64, tr *Trace, f func(ctx context.Context) error) error {
	ttl := b.cfg.LeaseTTL.Duration
	holder := fmt.Sprintf("%s#%d", sanitizeID(b.opts.ID), jobID)
	// In posting order: the oldest test waiting for the pair gets it. A
	// waiter asks every LeaseWait; one silent for three is gone.
	ok, err := b.st.AcquireLeaseInTurn(ctx, pair, holder, jobID, rank, ttl, 3*b.opts.LeaseWait+ttl/3)
	if err != nil {
		return infra(err)
	}
	if !ok {
		tr.Logf("lab pair %s is busy; waiting", pair)
		return errSnoozed
	}
	defer func() {
		if err := b.st.ReleaseLease(context.WithoutCancel(ctx), pair, holder); err != nil {
			b.log.Warn("lease release", "pair", pair, "err", err)
		}
	}()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if ok, err := b.st.RenewLease(ctx, pair, holder, ttl); err == nil && !ok {
					cancel(&InfraError{fmt.Errorf("lease on %s lost", pair)})
					return
				}
			}
		}
	}()
	err = f(ctx)
	if cause := context.Cause(ctx); err != nil && cause != nil && IsInfra(cause) {
		return cause
	}
	return err
}

// --- report: decide, ask for more runs, reply

type reportWorker struct {
	river.WorkerDefaults[ReportArgs]
	b *Bot
}

func (w *reportWorker) Timeout(*river.Job[ReportArgs]) time.Duration { return 30 * time.Minute }

func (w *reportWorker) Work(ctx context.Context, job *river.Job[ReportArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		if job.Args.BisectionID != 0 {
			return b.reportBisection(ctx, job, tr)
		}
		t, err := b.st.Test(ctx, b.st.DB, job.Args.TestID)
		if err != nil {
			return infra(err)
		}
		if t.State == store.StateCanceled {
			return complete(ctx, b, job, nil)
		}
		var d Decision
		if t.Verdict == "" {
			base, cand, err := b.samples(ctx, t)
			if err != nil {
				return err
			}
			if t.Base == "" {
				d = Decision{Verdict: VerdictMeasured, Summary: fmt.Sprintf("first measurement of %s %s: nothing to compare with", t.Tree, t.Ref)}
			} else {
				if d, err = b.stages.Decide.Decide(ctx, base, cand); err != nil {
					return infra(err)
				}
			}
			tr.Logf("decision after round %d: %s (need %d more) %s", job.Args.Round, d.Verdict, d.NeedMore, d.Summary)
			if d.NeedMore > 0 && job.Args.Round < b.cfg.MaxRounds {
				return complete(ctx, b, job, func(tx *sql.Tx) error {
					_, err := b.river.InsertTx(ctx, tx, LabArgs{TestID: t.ID, Round: job.Args.Round + 1, Runs: d.NeedMore}, nil)
					return err
				})
			}
			t.Verdict, t.Summary, t.Detail = d.Verdict, d.Summary, string(d.Detail)
		}
		if t.Kind == store.KindMainline {
			return b.mainlineOutcome(ctx, job, t, d, tr)
		}
		o, err := b.storedOrigin(fmt.Sprintf("test %d", t.ID), t.Origin, tr)
		if err != nil {
			return err
		}
		if err := b.deliver(ctx, t, o, tr); err != nil {
			return err
		}
		t.State = store.StateDone
		return complete(ctx, b, job, func(tx *sql.Tx) error { return b.st.UpdateTest(ctx, tx, t) })
	})
}

// storedOrigin reads the origin stored with a test or a bisection (what):
// where its reply goes. An unreadable one is the bot's own failure, an
// INFRA error of the job, logged; never a zero Origin that would send
// the reply nowhere.
func (b *Bot) storedOrigin(what, raw string, tr *Trace) (Origin, error) {
	var o Origin
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		err = fmt.Errorf("%s: stored origin unreadable: %w", what, err)
		tr.Logf("%v", err)
		b.log.Error("stored origin unreadable", "of", what, "err", err)
		return Origin{}, infra(err)
	}
	return o, nil
}

// samples are a test's candidate samples and its base's samples. The
// base's come from the cache, which holds every run of that base kernel
// (this test's rounds appended to what an earlier test measured).
func (b *Bot) samples(ctx context.Context, t store.Test) (base, cand []store.Sample, err error) {
	runs, err := b.st.Runs(ctx, b.st.DB, t.ID)
	if err != nil {
		return nil, nil, infra(err)
	}
	var own []store.Sample
	for _, r := range runs {
		if r.Role == "base" {
			own = append(own, r.Samples...)
		} else {
			cand = append(cand, r.Samples...)
		}
	}
	if t.Base != "" {
		// Any age: it was fresh when the lab round started.
		base, _, err = b.st.BaseResults(ctx, b.st.DB, b.baseKey(t.Tree, t.Base, t.Lab), 100*365*24*time.Hour)
		if err != nil {
			return nil, nil, infra(err)
		}
	}
	if len(base) == 0 {
		base = own
	}
	return base, cand, nil
}

// deliver sends a test's reply to where the request came from. Delivery
// is idempotent by key, so a crash after sending and before this job
// completes does not send it twice.
func (b *Bot) deliver(ctx context.Context, t store.Test, o Origin, tr *Trace) error {
	r := Report{Key: t.Key, Kind: t.Kind, Verdict: t.Verdict, Summary: t.Summary, Tree: t.Tree, Base: t.Base, BaseReason: t.BaseReason,
		BaseBranch: t.BaseBranch, Lab: t.Lab, Candidate: t.Candidate, URL: b.testURL(t.ID),
		TraceURL: b.cfg.URL + "/tests/" + fmt.Sprint(t.ID) + "#traces", Origin: o}
	if t.Detail != "" {
		r.Detail = json.RawMessage(t.Detail)
	}
	if t.Verdict == VerdictBuildFailed || t.Verdict == VerdictNotApplied || t.Verdict == VerdictBootFailed {
		r.Log = t.Summary
	}
	base, cand, err := b.samples(ctx, t)
	if err != nil {
		return err
	}
	r.BaseSamples, r.CandSamples = base, cand
	if t.SeriesID != 0 {
		s, err := b.series(ctx, t.SeriesID)
		if err != nil {
			return err
		}
		r.Series = &s
	}
	rep := b.stages.Report
	if rep == nil {
		tr.Logf("no reporter: verdict %s kept on the dashboard only", t.Verdict)
		return nil
	}
	if err := rep.Deliver(ctx, r); err != nil {
		return infra(fmt.Errorf("deliver: %w", err))
	}
	tr.Logf("delivered %s reply %s", t.Verdict, t.Key)
	return nil
}

// started tells the series' reporter that its testing starts, on the
// base just chosen, when it wants to know (a Starter). A failure is the
// infrastructure's: the test job is retried, and the reporter acts once.
func (b *Bot) started(ctx context.Context, t store.Test, s Series, tr *Trace) error {
	var o Origin
	json.Unmarshal([]byte(t.Origin), &o)
	st, ok := b.stages.Report.(Starter)
	if !ok {
		return nil
	}
	r := Report{Key: t.Key, Kind: t.Kind, Series: &s, Tree: t.Tree, Base: t.Base, BaseReason: t.BaseReason, BaseBranch: t.BaseBranch,
		Lab: t.Lab, URL: b.testURL(t.ID), TraceURL: b.cfg.URL + "/tests/" + fmt.Sprint(t.ID) + "#traces", Origin: o}
	if err := st.Started(ctx, r); err != nil {
		return infra(fmt.Errorf("testing started: %w", err))
	}
	tr.Logf("told the reporter testing started")
	return nil
}

func (b *Bot) testURL(id int64) string { return fmt.Sprintf("%s/tests/%d", b.cfg.URL, id) }

// --- mainline: test each new branch head

type mainlineWorker struct {
	river.WorkerDefaults[MainlineArgs]
	b *Bot
}

func (w *mainlineWorker) Timeout(*river.Job[MainlineArgs]) time.Duration { return time.Hour }

func (w *mainlineWorker) Work(ctx context.Context, job *river.Job[MainlineArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		a := job.Args
		if b.stages.Trees == nil {
			return fmt.Errorf("this worker has the build queue but no trees")
		}
		head, err := b.stages.Trees.Head(ctx, a.Tree, a.Branch)
		if err != nil {
			return infra(fmt.Errorf("fetch %s %s: %w", a.Tree, a.Branch, err))
		}
		hist, err := b.st.MainlineHistory(ctx, b.st.DB, a.Tree, a.Branch)
		if err != nil {
			return infra(err)
		}
		lastGood := ""
		for _, r := range hist {
			if r.Commit == head {
				tr.Logf("%s %s head %s already tested (%s)", a.Tree, a.Branch, short(head), r.State)
				return complete(ctx, b, job, nil)
			}
			if r.State == store.MainlineGood {
				lastGood = r.Commit
			}
		}
		tr.Logf("%s %s: new head %s, last good %s", a.Tree, a.Branch, short(head), short(lastGood))
		return complete(ctx, b, job, func(tx *sql.Tx) error {
			id, _, err := b.enqueueTest(ctx, tx, store.Test{Key: fmt.Sprintf("mainline:%s:%s:%s", a.Tree, a.Branch, head), Kind: store.KindMainline,
				Tree: a.Tree, Ref: a.Branch, Base: lastGood, Candidate: head}, Origin{Kind: "mainline"})
			if err != nil {
				return err
			}
			_, err = b.st.AddMainlineRun(ctx, tx, store.MainlineRun{Tree: a.Tree, Branch: a.Branch, Commit: head, TestID: id, State: store.MainlineTesting, Metrics: "{}"})
			return err
		})
	})
}

// mainlineOutcome records a head's result in the history and, when it
// regressed against the last good head, starts a bisection.
func (b *Bot) mainlineOutcome(ctx context.Context, job *river.Job[ReportArgs], t store.Test, d Decision, tr *Trace) error {
	_, cand, err := b.samples(ctx, t)
	if err != nil {
		return err
	}
	state := store.MainlineGood
	switch t.Verdict {
	case VerdictRegression, VerdictCrash, VerdictBuildFailed, VerdictBootFailed:
		state = store.MainlineBad
	case VerdictPass, VerdictMeasured, VerdictImprovement:
	default:
		state = store.MainlineFailed
	}
	metric := b.cfg.Mainline.Metric
	bisect := state == store.MainlineBad && t.Verdict == VerdictRegression && t.Base != ""
	tr.Logf("mainline %s %s %s: %s", t.Tree, t.Ref, short(t.Candidate), t.Verdict)
	return complete(ctx, b, job, func(tx *sql.Tx) error {
		t.State = store.StateDone
		if err := b.st.UpdateTest(ctx, tx, t); err != nil {
			return err
		}
		// A head's own results are the base for the next head.
		if len(cand) > 0 {
			if err := b.st.PutBaseResults(ctx, tx, b.baseKey(t.Tree, t.Candidate, t.Lab), cand); err != nil {
				return err
			}
		}
		if err := b.st.SetMainlineResult(ctx, tx, t.ID, state, mustJSON(medians(cand))); err != nil {
			return err
		}
		if !bisect {
			return nil
		}
		if d.Metric != "" {
			metric = d.Metric
		}
		_, err := b.startBisection(ctx, tx, store.Bisection{Key: "mainline:" + t.Tree + ":" + t.Base + ".." + t.Candidate, Tree: t.Tree,
			Good: t.Base, Bad: t.Candidate, Lab: t.Lab, Metric: metric, Origin: mustJSON(Origin{Kind: "mainline"})})
		return err
	})
}

func (b *Bot) startBisection(ctx context.Context, tx *sql.Tx, bis store.Bisection) (int64, error) {
	if bis.Lab == "" {
		bis.Lab = b.opts.Lab
	}
	id, created, err := b.st.AddBisection(ctx, tx, bis)
	if err != nil || !created {
		return id, err
	}
	_, err = b.river.InsertTx(ctx, tx, BisectArgs{BisectionID: id, Step: 1}, nil)
	return id, err
}

// medians are each metric's median over samples without a crash.
func medians(samples []store.Sample) map[string]float64 {
	vals := map[string][]float64{}
	for _, s := range samples {
		if s.Crash != "" {
			continue
		}
		for k, v := range s.Metrics {
			vals[k] = append(vals[k], v)
		}
	}
	out := map[string]float64{}
	for k, v := range vals {
		sort.Float64s(v)
		if len(v)%2 == 1 {
			out[k] = v[len(v)/2]
		} else {
			out[k] = (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
	}
	return out
}

// --- cancellation

// Cancel stops a test: its state says canceled (so queued jobs end at
// once) and its running jobs are cancelled through River.
func (b *Bot) Cancel(ctx context.Context, testID int64) error {
	t, err := b.st.Test(ctx, b.st.DB, testID)
	if err != nil {
		return err
	}
	if t.State == store.StateDone || t.State == store.StateCanceled {
		return fmt.Errorf("test %d is already %s", testID, t.State)
	}
	t.State = store.StateCanceled
	if err := b.st.UpdateTest(ctx, b.st.DB, t); err != nil {
		return err
	}
	res, err := b.river.JobList(ctx, river.NewJobListParams().Kinds("test", "build", "lab", "report").
		States(pending...).First(1000))
	if err != nil {
		return err
	}
	for _, j := range res.Jobs {
		var a struct {
			TestID int64 `json:"test_id"`
		}
		if json.Unmarshal(j.EncodedArgs, &a) == nil && a.TestID == testID {
			if _, err := b.river.JobCancel(ctx, j.ID); err != nil && !errors.Is(err, river.ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

// JobsOfTest lists the River jobs that worked on a test, for its page.
func (b *Bot) JobsOfTest(ctx context.Context, testID int64) ([]*rivertype.JobRow, error) {
	res, err := b.river.JobList(ctx, river.NewJobListParams().Kinds("test", "build", "lab", "report").
		States(append(pending, rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded)...).First(10000))
	if err != nil {
		return nil, err
	}
	var out []*rivertype.JobRow
	for _, j := range res.Jobs {
		var a struct {
			TestID int64 `json:"test_id"`
		}
		if json.Unmarshal(j.EncodedArgs, &a) == nil && a.TestID == testID {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
