package bot

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/bot/bisect"
	"github.com/rdmabot/rdmabot/bot/store"
)

// Bisection phases, in order. Before blaming a commit the bot confirms:
// the culprit fails and its parent passes again (bot.confirm_runs times
// each), and the bad head with the culprit reverted passes.
const (
	phaseReference = "reference" // measure the good commit when its results are gone
	phaseBisect    = "bisect"
	phaseCulprit   = "confirm-culprit"
	phaseParent    = "confirm-parent"
	phaseRevert    = "confirm-revert"
)

type bisectWorker struct {
	river.WorkerDefaults[BisectArgs]
	b *Bot
}

func (w *bisectWorker) Timeout(*river.Job[BisectArgs]) time.Duration { return 4 * time.Hour }

// Work runs one step: it picks the next commit from the recorded steps
// (so a crash loses at most the step in progress), tests it, and records
// the outcome together with the next step's job.
func (w *bisectWorker) Work(ctx context.Context, job *river.Job[BisectArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		bis, err := b.st.Bisection(ctx, b.st.DB, job.Args.BisectionID)
		if err != nil {
			return Infra(err)
		}
		if bis.State != store.BisectionRunning && bis.State != store.BisectionConfirming {
			tr.Logf("bisection %d is %s", bis.ID, bis.State)
			return complete(ctx, b, job, nil)
		}
		steps, err := b.st.BisectSteps(ctx, b.st.DB, bis.ID)
		if err != nil {
			return Infra(err)
		}
		n := len(steps) + 1
		next := func(tx *sql.Tx) error {
			_, err := b.river.InsertTx(ctx, tx, BisectArgs{BisectionID: bis.ID, Step: job.Args.Step + 1}, nil)
			return err
		}
		record := func(phase, commit string, o bisect.Outcome, detail string) error {
			tr.Logf("step %d %s %s: %s %s", n, phase, short(commit), o, detail)
			return complete(ctx, b, job, func(tx *sql.Tx) error {
				if err := b.st.AddBisectStep(ctx, tx, bis.ID, store.BisectStep{N: n, Phase: phase, Commit: commit, Outcome: string(o), Detail: detail, JobID: job.ID}); err != nil {
					return err
				}
				return next(tx)
			})
		}
		gitDir, err := b.stages.Trees.GitDir(bis.Tree)
		if err != nil {
			return Infra(err)
		}
		// A bare store opens only without DetectDotGit (which looks for a
		// .git above it and fails); a work tree's path needs it.
		repo, err := git.PlainOpenWithOptions(gitDir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
		if err != nil {
			repo, err = git.PlainOpenWithOptions(gitDir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
		}
		if err != nil {
			return Infra(fmt.Errorf("open %s: %w", gitDir, err))
		}
		ref, _, err := b.st.BaseResults(ctx, b.st.DB, b.baseKey(bis.Tree, bis.Good, bis.Lab), 100*365*24*time.Hour)
		if err != nil {
			return Infra(err)
		}
		if len(ref) == 0 {
			tr.Logf("no results for good commit %s: measuring it", short(bis.Good))
			samples, o, detail, err := b.measure(ctx, bis, bis.Good, nil, tr)
			if err != nil {
				return err
			}
			if o != bisect.Good || len(samples) == 0 {
				return b.endBisection(ctx, job, bis, store.BisectionFailed, "", "the good commit "+short(bis.Good)+" could not be measured: "+detail)
			}
			return record(phaseReference, bis.Good, o, detail)
		}

		if bis.Culprit == "" {
			st := bisect.State{Good: []string{bis.Good}, Bad: bis.Bad}
			for _, s := range steps {
				if s.Phase == phaseBisect {
					st.Record(s.Commit, bisect.Outcome(s.Outcome))
				}
			}
			step, err := bisect.Next(ctx, repo, st)
			if err != nil {
				if infraOrInterrupted(ctx, err) {
					return err
				}
				return b.endBisection(ctx, job, bis, store.BisectionFailed, "", err.Error())
			}
			if step.Done {
				if step.Culprit == "" {
					return b.endBisection(ctx, job, bis, store.BisectionFailed, "", "only untestable commits are left; the first bad commit is one of:\n"+strings.Join(step.Candidates, "\n"))
				}
				tr.Logf("first bad commit %s; confirming", short(step.Culprit))
				bis.Culprit, bis.State = step.Culprit, store.BisectionConfirming
				return complete(ctx, b, job, func(tx *sql.Tx) error {
					if err := b.st.UpdateBisection(ctx, tx, bis); err != nil {
						return err
					}
					return next(tx)
				})
			}
			tr.Logf("%d candidates left, about %d steps: testing %s", step.Remaining, step.StepsLeft, short(step.Commit))
			_, o, detail, err := b.measure(ctx, bis, step.Commit, ref, tr)
			if err != nil {
				return err
			}
			return record(phaseBisect, step.Commit, o, detail)
		}

		// Confirmation.
		done := map[string]int{}
		for _, s := range steps {
			done[s.Phase]++
		}
		switch {
		case done[phaseCulprit] < b.cfg.ConfirmRuns:
			_, o, detail, err := b.measure(ctx, bis, bis.Culprit, ref, tr)
			if err != nil {
				return err
			}
			return record(phaseCulprit, bis.Culprit, o, detail)
		case done[phaseParent] < b.cfg.ConfirmRuns:
			c, err := repo.CommitObject(plumbing.NewHash(bis.Culprit))
			if err != nil || c.NumParents() == 0 {
				return b.endBisection(ctx, job, bis, store.BisectionFailed, bis.Culprit, fmt.Sprintf("culprit %s has no parent to confirm against: %v", short(bis.Culprit), err))
			}
			parent := c.ParentHashes[0].String()
			_, o, detail, err := b.measure(ctx, bis, parent, ref, tr)
			if err != nil {
				return err
			}
			return record(phaseParent, parent, o, detail)
		case done[phaseRevert] < 1:
			reverted, err := b.stages.Trees.Revert(ctx, bis.Tree, bis.Bad, bis.Culprit)
			if err != nil {
				if infraOrInterrupted(ctx, err) {
					return err
				}
				return record(phaseRevert, bis.Bad, bisect.Bad, "the revert does not apply: "+err.Error())
			}
			_, o, detail, err := b.measure(ctx, bis, reverted, ref, tr)
			if err != nil {
				return err
			}
			return record(phaseRevert, reverted, o, detail)
		}
		confirmed := true
		for _, s := range steps {
			want := map[string]bisect.Outcome{phaseCulprit: bisect.Bad, phaseParent: bisect.Good, phaseRevert: bisect.Good}[s.Phase]
			if want != "" && bisect.Outcome(s.Outcome) != want {
				confirmed = false
			}
		}
		if confirmed {
			return b.endBisection(ctx, job, bis, store.BisectionDone, bis.Culprit, "confirmed")
		}
		return b.endBisection(ctx, job, bis, "unconfirmed", bis.Culprit, "the confirmation runs disagree: not blaming "+short(bis.Culprit))
	})
}

func (b *Bot) endBisection(ctx context.Context, job *river.Job[BisectArgs], bis store.Bisection, state store.BisectionState, culprit, summary string) error {
	bis.State, bis.Culprit, bis.Summary = state, culprit, summary
	return complete(ctx, b, job, func(tx *sql.Tx) error {
		if err := b.st.UpdateBisection(ctx, tx, bis); err != nil {
			return err
		}
		_, err := b.river.InsertTx(ctx, tx, ReportArgs{BisectionID: bis.ID}, nil)
		return err
	})
}

// measure builds commit and runs it on the bisection's lab pair, judging
// it against the good commit's samples (ref; nil only measures). A commit
// that does not build is skipped; one that does not boot is bad.
// bisectRank puts bisection steps behind every test waiting for a pair.
const bisectRank = 1 << 40

func (b *Bot) measure(ctx context.Context, bis store.Bisection, commit string, ref []store.Sample, tr *Trace) ([]store.Sample, bisect.Outcome, string, error) {
	key, err := b.buildKernel(ctx, bis.Tree, commit, tr)
	if err != nil {
		if infraOrInterrupted(ctx, err) {
			return nil, "", "", err
		}
		return nil, bisect.Skip, "does not build: " + firstLine(err.Error()), nil
	}
	dir, err := b.fetchArtifact(ctx, key, tr)
	if err != nil {
		return nil, "", "", err
	}
	var samples []store.Sample
	var runErr error
	// A bisection is background work: it waits behind every series.
	err = b.withLease(ctx, bis.Lab, 0, bisectRank+bis.ID, tr, func(ctx context.Context) error {
		samples, runErr = b.stages.Lab.Run(ctx, bis.Lab, dir, b.cfg.Runs, tr)
		return nil
	})
	if err != nil {
		return nil, "", "", err
	}
	if runErr != nil {
		if infraOrInterrupted(ctx, runErr) {
			return nil, "", "", runErr
		}
		return nil, bisect.Bad, "does not boot: " + firstLine(runErr.Error()), nil
	}
	// Every measured commit is a cached base for later tests.
	if err := b.st.PutBaseResults(ctx, b.st.DB, b.baseKey(bis.Tree, commit, bis.Lab), samples); err != nil {
		return nil, "", "", Infra(err)
	}
	if ref == nil {
		return samples, bisect.Good, fmt.Sprintf("%s %.1f", bis.Metric, medians(samples)[bis.Metric]), nil
	}
	d, err := b.stages.Decide.Decide(ctx, ref, samples)
	if err != nil {
		return nil, "", "", Infra(err)
	}
	detail := fmt.Sprintf("%s %.1f (good %.1f): %s", bis.Metric, medians(samples)[bis.Metric], medians(ref)[bis.Metric], d.Verdict)
	if d.Verdict == VerdictRegression || d.Verdict == VerdictCrash {
		return samples, bisect.Bad, detail, nil
	}
	return samples, bisect.Good, detail, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// reportBisection delivers a bisection's outcome as a new thread titled
// like "[mainline] <sha12>: nfs-rdma write_MBps -48% regression".
func (b *Bot) reportBisection(ctx context.Context, job *river.Job[ReportArgs], tr *Trace) error {
	bis, err := b.st.Bisection(ctx, b.st.DB, job.Args.BisectionID)
	if err != nil {
		return Infra(err)
	}
	steps, err := b.st.BisectSteps(ctx, b.st.DB, bis.ID)
	if err != nil {
		return Infra(err)
	}
	forever := 100 * 365 * 24 * time.Hour
	good, _, err := b.st.BaseResults(ctx, b.st.DB, b.baseKey(bis.Tree, bis.Good, bis.Lab), forever)
	if err != nil {
		return Infra(err)
	}
	bad, _, err := b.st.BaseResults(ctx, b.st.DB, b.baseKey(bis.Tree, bis.Bad, bis.Lab), forever)
	if err != nil {
		return Infra(err)
	}
	change := 0.0
	if g := medians(good)[bis.Metric]; g != 0 {
		change = medians(bad)[bis.Metric]/g - 1
	}
	o, err := b.storedOrigin(fmt.Sprintf("bisection %d", bis.ID), bis.Origin, tr)
	if err != nil {
		return err
	}
	blame := bis.Culprit
	if blame == "" || bis.State != store.BisectionDone {
		blame = bis.Bad
	}
	r := Report{
		Key:       fmt.Sprintf("bisect:%d", bis.ID),
		Kind:      "bisect",
		Title:     fmt.Sprintf("[mainline] %s: nfs-rdma %s %+.0f%% regression", short(blame), bis.Metric, change*100),
		Verdict:   VerdictRegression,
		Summary:   bis.Summary,
		Tree:      bis.Tree,
		Base:      bis.Good,
		Candidate: bis.Bad,
		URL:       fmt.Sprintf("%s/bisect/%d", b.cfg.URL, bis.ID),
		TraceURL:  fmt.Sprintf("%s/bisect/%d", b.cfg.URL, bis.ID),
		Origin:    o,
		Bisect: &BisectReport{Good: bis.Good, Bad: bis.Bad, Culprit: bis.Culprit, Metric: bis.Metric, Change: change,
			Steps: steps, Confirmed: bis.State == store.BisectionDone},
	}
	if rep := b.stages.Report; rep != nil {
		if err := rep.Deliver(ctx, r); err != nil {
			return Infra(fmt.Errorf("deliver: %w", err))
		}
		tr.Logf("delivered %q", r.Title)
	}
	return complete(ctx, b, job, nil)
}
