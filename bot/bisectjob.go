package bot

import (
	"context"
	"database/sql"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/bot/bisect"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
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

func (w *bisectWorker) Timeout(*river.Job[BisectArgs]) time.Duration { return maxJobTime }

// Work runs one step: it picks the next commit from the recorded steps
// (so a crash loses at most the step in progress), tests it, and records
// the outcome together with the next step's job.
func (w *bisectWorker) Work(ctx context.Context, job *river.Job[BisectArgs]) error {
	b := w.b
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		bis, err := b.st.Bisection(ctx, b.st.DB, job.Args.BisectionID)
		if err != nil {
			return flow.MarkInfra(err)
		}
		if bis.State != store.BisectionRunning && bis.State != store.BisectionConfirming {
			tr.Logf("bisection %d is %s", bis.ID, bis.State)
			return complete(ctx, b, job, nil)
		}
		steps, err := b.st.BisectSteps(ctx, b.st.DB, bis.ID)
		if err != nil {
			return flow.MarkInfra(err)
		}
		r := &bisectStep{b: b, job: job, bis: bis, steps: steps, n: len(steps) + 1, tr: tr}
		if r.repo, err = b.openRepo(bis.Tree); err != nil {
			return err
		}
		if bis.Metric != MetricBuild {
			_, side, err := b.bisectSide(ctx, bis)
			if err != nil {
				return err
			}
			key := b.bisectKey(bis, side, bis.Good)
			if r.ref, _, err = b.st.BaseResults(ctx, b.st.DB, key, 100*365*24*time.Hour); err != nil {
				return flow.MarkInfra(err)
			}
			if len(r.ref) == 0 {
				tr.Logf("no results for good commit %s: measuring it", short(bis.Good))
				m, err := b.measure(ctx, bis, bis.Good, nil, tr)
				if err != nil {
					return err
				}
				if m.outcome != bisect.Good || len(m.samples) == 0 {
					return b.endBisection(ctx, job, bis, store.BisectionFailed, "", "the good commit "+short(bis.Good)+" could not be measured: "+m.detail)
				}
				return r.record(ctx, phaseReference, bis.Good, m)
			}
		}
		if bis.Culprit == "" {
			return r.search(ctx)
		}
		return r.confirm(ctx)
	})
}

// bisectStep is one step of a bisection: one job, one commit measured
// (or the end), the next step queued in the transaction that records it.
type bisectStep struct {
	b     *Bot
	job   *river.Job[BisectArgs]
	bis   store.Bisection
	steps []flow.BisectStep // the steps so far
	n     int               // this step's number
	tr    *Trace
	repo  *git.Repository
	ref   []flow.Sample // the good commit's samples
}

func (r *bisectStep) next(ctx context.Context, tx *sql.Tx) error {
	_, err := r.b.river.InsertTx(ctx, tx, BisectArgs{BisectionID: r.bis.ID, Step: r.job.Args.Step + 1}, nil)
	return err
}

func (r *bisectStep) record(ctx context.Context, phase, commit string, m measured) error {
	r.tr.Logf("step %d %s %s: %s %s", r.n, phase, short(commit), m.outcome, m.detail)
	return complete(ctx, r.b, r.job, func(tx *sql.Tx) error {
		if err := r.b.st.AddBisectStep(ctx, tx, r.bis.ID, flow.BisectStep{N: r.n, Phase: phase, Commit: commit, Outcome: string(m.outcome),
			Detail: m.detail, JobID: r.job.ID, Boots: m.boots}); err != nil {
			return err
		}
		return r.next(ctx, tx)
	})
}

// measureAndRecord measures commit against the good commit and records it.
func (r *bisectStep) measureAndRecord(ctx context.Context, phase, commit string) error {
	m, err := r.b.measure(ctx, r.bis, commit, r.ref, r.tr)
	if err != nil {
		return err
	}
	return r.record(ctx, phase, commit, m)
}

// search is a step of the search for the first bad commit.
func (r *bisectStep) search(ctx context.Context) error {
	b, bis := r.b, r.bis
	st := bisect.State{Good: []string{bis.Good}, Bad: bis.Bad}
	for _, s := range r.steps {
		if s.Phase == phaseBisect {
			st.Record(s.Commit, bisect.Outcome(s.Outcome))
		}
	}
	step, err := bisect.Next(ctx, r.repo, st)
	if err != nil {
		if infraOrInterrupted(ctx, err) {
			return err
		}
		return b.endBisection(ctx, r.job, bis, store.BisectionFailed, "", err.Error())
	}
	if !step.Done {
		r.tr.Logf("%d candidates left, about %d steps: testing %s", step.Remaining, step.StepsLeft, short(step.Commit))
		return r.measureAndRecord(ctx, phaseBisect, step.Commit)
	}
	if step.Culprit == "" {
		return b.endBisection(ctx, r.job, bis, store.BisectionFailed, "", "only untestable commits are left; the first bad commit is one of:\n"+strings.Join(step.Candidates, "\n"))
	}
	if bis.TestID != 0 {
		// A series' own patches: both ends were measured with the whole
		// budget by the test itself and every step with the whole budget
		// too, so there is no other history to confirm against; the
		// patch is named.
		k, of, err := seriesPatch(r.repo, bis.Good, bis.Bad, step.Culprit)
		if flow.IsInfra(err) {
			return err
		}
		if err != nil {
			return b.endBisection(ctx, r.job, bis, store.BisectionFailed, step.Culprit, err.Error())
		}
		r.tr.Logf("first bad patch: %d/%d (%s)", k, of, short(step.Culprit))
		bis.CulpritPatch = k
		return b.endBisection(ctx, r.job, bis, store.BisectionDone, step.Culprit, fmt.Sprintf("first bad: patch %d/%d", k, of))
	}
	r.tr.Logf("first bad commit %s; confirming", short(step.Culprit))
	bis.Culprit, bis.State = step.Culprit, store.BisectionConfirming
	return complete(ctx, b, r.job, func(tx *sql.Tx) error {
		if err := b.st.UpdateBisection(ctx, tx, bis); err != nil {
			return err
		}
		return r.next(ctx, tx)
	})
}

// confirm is a step of a mainline culprit's confirmation: the culprit
// again, its parent, and the bad head with the culprit reverted, then
// the verdict on all of them.
func (r *bisectStep) confirm(ctx context.Context) error {
	b, bis := r.b, r.bis
	done := map[string]int{}
	for _, s := range r.steps {
		done[s.Phase]++
	}
	switch {
	case done[phaseCulprit] < b.cfg.ConfirmRuns:
		return r.measureAndRecord(ctx, phaseCulprit, bis.Culprit)
	case done[phaseParent] < b.cfg.ConfirmRuns:
		c, err := r.repo.CommitObject(plumbing.NewHash(bis.Culprit))
		if err != nil || c.NumParents() == 0 {
			return b.endBisection(ctx, r.job, bis, store.BisectionFailed, bis.Culprit, fmt.Sprintf("culprit %s has no parent to confirm against: %v", short(bis.Culprit), err))
		}
		return r.measureAndRecord(ctx, phaseParent, c.ParentHashes[0].String())
	case done[phaseRevert] < 1:
		reverted, err := b.stages.Trees.Revert(ctx, bis.Tree, bis.Bad, bis.Culprit)
		if err != nil {
			if infraOrInterrupted(ctx, err) {
				return err
			}
			return r.record(ctx, phaseRevert, bis.Bad, measured{outcome: bisect.Bad, detail: "the revert does not apply: " + err.Error()})
		}
		return r.measureAndRecord(ctx, phaseRevert, reverted)
	}
	for _, s := range r.steps {
		want := map[string]bisect.Outcome{phaseCulprit: bisect.Bad, phaseParent: bisect.Good, phaseRevert: bisect.Good}[s.Phase]
		if want != "" && bisect.Outcome(s.Outcome) != want {
			return b.endBisection(ctx, r.job, bis, "unconfirmed", bis.Culprit, "the confirmation runs disagree: not blaming "+short(bis.Culprit))
		}
	}
	return b.endBisection(ctx, r.job, bis, store.BisectionDone, bis.Culprit, "confirmed")
}

func (b *Bot) endBisection(ctx context.Context, job *river.Job[BisectArgs], bis store.Bisection, state store.BisectionState, culprit, summary string) error {
	bis.State, bis.Culprit, bis.Summary = state, culprit, summary
	return complete(ctx, b, job, func(tx *sql.Tx) error {
		if err := b.st.UpdateBisection(ctx, tx, bis); err != nil {
			return err
		}
		// A series' bisection ends in its test's reply, which waited.
		args := ReportArgs{BisectionID: bis.ID}
		if bis.TestID != 0 {
			args = ReportArgs{TestID: bis.TestID, Bisected: bis.ID}
		}
		_, err := b.river.InsertTx(ctx, tx, args, nil)
		return err
	})
}

// openRepo opens the git store holding tree's commits (and the series
// applied on them).
func (b *Bot) openRepo(tree string) (*git.Repository, error) {
	gitDir, err := b.stages.Trees.GitDir(tree)
	if err != nil {
		return nil, flow.MarkInfra(err)
	}
	// A bare store opens only without DetectDotGit (which looks for a
	// .git above it and fails); a work tree's path needs it.
	repo, err := git.PlainOpenWithOptions(gitDir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		repo, err = git.PlainOpenWithOptions(gitDir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
	}
	if err != nil {
		return nil, flow.MarkInfra(fmt.Errorf("open %s: %w", gitDir, err))
	}
	return repo, nil
}

// seriesPatch says which patch of a series applied on base as the
// commits base..head (one per patch, as git am makes them) commit is:
// k of n, 1-based.
func seriesPatch(repo *git.Repository, base, head, commit string) (k, n int, err error) {
	var chain []string
	for h := plumbing.NewHash(head); h.String() != base; {
		if len(chain) > 1000 {
			return 0, 0, fmt.Errorf("%s is not within 1000 commits above %s", short(head), short(base))
		}
		c, err := repo.CommitObject(h)
		if err != nil {
			return 0, 0, flow.MarkInfra(fmt.Errorf("series commit %s: %w", h, err))
		}
		chain = append(chain, h.String())
		if c.NumParents() != 1 {
			return 0, 0, fmt.Errorf("%s is not a series applied on %s: %s has %d parents", short(head), short(base), short(h.String()), c.NumParents())
		}
		h = c.ParentHashes[0]
	}
	for i, h := range chain {
		if h == commit {
			return len(chain) - i, len(chain), nil
		}
	}
	return 0, 0, fmt.Errorf("%s is not one of the series' commits", short(commit))
}

// MetricBuild is the metric of a bisection that only builds: the first
// patch of a series that does not compile.
const MetricBuild = flow.MetricBuild

// bisectRank puts mainline bisection steps behind every test waiting
// for a pair; a series' own bisection keeps its test's place.
const bisectRank = 1 << 40

// measured is one commit's outcome in a bisection.
type measured struct {
	samples []flow.Sample
	outcome bisect.Outcome
	detail  string
	boots   int
}

// measure builds commit and, unless the bisection only builds, runs it on
// the bisection's lab pair, judging it against the good commit's samples
// (ref; nil only measures) with the whole budget: when the statistics ask
// for more boots it gives them, up to bot.max_rounds rounds, as a test
// would. A commit that does not build is skipped (bad when the build is
// what is bisected); one that does not boot is bad.
func (b *Bot) measure(ctx context.Context, bis store.Bisection, commit string, ref []flow.Sample, tr *Trace) (measured, error) {
	key, err := b.buildKernel(ctx, bis.Tree, commit, tr)
	if err != nil {
		if infraOrInterrupted(ctx, err) {
			return measured{}, err
		}
		if bis.Metric == MetricBuild {
			return measured{outcome: bisect.Bad, detail: "does not build: " + firstLine(err.Error())}, nil
		}
		return measured{outcome: bisect.Skip, detail: "does not build: " + firstLine(err.Error())}, nil
	}
	if bis.Metric == MetricBuild {
		return measured{outcome: bisect.Good, detail: "builds"}, nil
	}
	dir, err := b.fetchArtifact(ctx, key, tr)
	if err != nil {
		return measured{}, err
	}
	// The series' test and side, read once for the boot and the key.
	t, side, err := b.bisectSide(ctx, bis)
	if err != nil {
		return measured{}, err
	}
	boot, err := b.bisectBoot(ctx, t, side, dir, tr)
	if err != nil {
		return measured{}, err
	}
	var m measured
	var runErr error
	var d flow.Decision
	rank := bisectRank + bis.ID
	if bis.TestID != 0 {
		rank = bis.TestID
	}
	err = b.withLease(ctx, bis.Lab, 0, rank, tr, func(ctx context.Context) error {
		n := b.cfg.Runs
		for round := 1; ; round++ {
			var s []flow.Sample
			s, runErr = b.stages.Lab.Run(ctx, bis.Lab, boot, n, tr)
			m.samples = append(m.samples, s...)
			m.boots += len(s)
			if runErr != nil || ref == nil {
				return nil
			}
			var err error
			if d, err = b.stages.Decide.Decide(ctx, fmt.Sprintf("bisection %d %s", bis.ID, commit), ref, m.samples); err != nil {
				return flow.MarkInfra(err)
			}
			if n = b.policy().MoreRuns(d, round); n == 0 || crashed(m.samples) {
				return nil
			}
			tr.Logf("%s: %s after %d boots; %d more", short(commit), d.Verdict, m.boots, n)
		}
	})
	if err != nil {
		return measured{}, err
	}
	if runErr != nil {
		if infraOrInterrupted(ctx, runErr) {
			return measured{}, runErr
		}
		m.outcome, m.detail = bisect.Bad, "does not boot: "+firstLine(runErr.Error())
		return m, nil
	}
	// Every measured commit is a cached base for later tests.
	if err := b.st.PutBaseResults(ctx, b.st.DB, b.bisectKey(bis, side, commit), m.samples); err != nil {
		return measured{}, flow.MarkInfra(err)
	}
	if ref == nil {
		m.outcome, m.detail = bisect.Good, fmt.Sprintf("%s %.1f", bis.Metric, medians(m.samples)[bis.Metric])
		return m, nil
	}
	m.detail = fmt.Sprintf("%s %.1f (good %.1f): %s", bis.Metric, medians(m.samples)[bis.Metric], medians(ref)[bis.Metric], d.Verdict)
	if bis.Metric == metricCrash {
		m.detail = d.Verdict.String()
		if c := firstCrash(m.samples); c != "" {
			m.detail += ": " + c
		}
	}
	m.outcome = bisect.Good
	if d.Verdict.Failing() {
		m.outcome = bisect.Bad
	}
	return m, nil
}

// metricCrash is the metric of a bisection for a crash.
const metricCrash = flow.MetricCrash

// regressed names what a bisection found: "copy -48%", or "crash".
func regressed(metric string, change float64) string {
	if metric == metricCrash || metric == MetricBuild {
		return metric
	}
	return fmt.Sprintf("%s %+.0f%%", metric, change*100)
}

func firstCrash(samples []flow.Sample) string {
	for _, s := range samples {
		if s.Crash != "" {
			return s.Crash
		}
	}
	return ""
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
		return flow.MarkInfra(err)
	}
	steps, err := b.st.BisectSteps(ctx, b.st.DB, bis.ID)
	if err != nil {
		return flow.MarkInfra(err)
	}
	forever := 100 * 365 * 24 * time.Hour
	_, side, err := b.bisectSide(ctx, bis)
	if err != nil {
		return err
	}
	goodKey, badKey := b.bisectKey(bis, side, bis.Good), b.bisectKey(bis, side, bis.Bad)
	good, _, err := b.st.BaseResults(ctx, b.st.DB, goodKey, forever)
	if err != nil {
		return flow.MarkInfra(err)
	}
	bad, _, err := b.st.BaseResults(ctx, b.st.DB, badKey, forever)
	if err != nil {
		return flow.MarkInfra(err)
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
	rb := &flow.BisectReport{Good: bis.Good, Bad: bis.Bad, Culprit: bis.Culprit, Metric: bis.Metric, Change: change,
		Steps: steps, Confirmed: bis.State == store.BisectionDone}
	if rb.Confirmed && rb.Culprit != "" {
		// The report goes to the culprit's author: the tree says who. A
		// tree that cannot say costs the To:, never the report: it goes
		// to the lists alone.
		repo, err := b.openRepo(bis.Tree)
		if err == nil {
			rb.CulpritTitle, rb.CulpritAuthor, rb.CulpritSignoffs, err = commitPeople(repo, bis.Culprit)
		}
		if err == nil {
			rb.CulpritFiles, err = commitFiles(repo, bis.Culprit)
		}
		if err != nil {
			tr.Logf("the report goes to the lists alone: %v", err)
		}
	}
	if rb.Parent, rb.ParentSamples, rb.CulpritSamples, err = b.confirmSamples(ctx, bis, side, steps); err != nil {
		return err
	}
	r := flow.Report{
		Key:       fmt.Sprintf("bisect:%d", bis.ID),
		Kind:      "bisect",
		Title:     fmt.Sprintf("[mainline] %s: nfs-rdma %s regression", short(blame), regressed(bis.Metric, change)),
		Verdict:   flow.Regression,
		Summary:   bis.Summary,
		Tree:      bis.Tree,
		Base:      bis.Good,
		Candidate: bis.Bad,
		URL:       fmt.Sprintf("%s/bisect/%d", b.cfg.URL, bis.ID),
		TraceURL:  fmt.Sprintf("%s/bisect/%d", b.cfg.URL, bis.ID),
		Origin:    o,
		Bisect:    rb,
	}
	if rep := b.stages.Report; rep != nil {
		if err := rep.Deliver(ctx, r); err != nil {
			return flow.MarkInfra(fmt.Errorf("deliver: %w", err))
		}
		tr.Logf("delivered %q", r.Title)
	}
	return complete(ctx, b, job, nil)
}

// confirmSamples are what the confirmation measured of a culprit's
// parent and of the culprit, for the report's table of one against the
// other: the commits' cached results, which each confirmation run
// replaced with its boots. None before a parent was measured.
func (b *Bot) confirmSamples(ctx context.Context, bis store.Bisection, side string, steps []flow.BisectStep) (parent string, ps, cs []flow.Sample, err error) {
	for _, s := range steps {
		if s.Phase == phaseParent {
			parent = s.Commit
		}
	}
	if parent == "" || bis.Culprit == "" || bis.Metric == MetricBuild {
		return "", nil, nil, nil
	}
	forever := 100 * 365 * 24 * time.Hour
	if ps, _, err = b.st.BaseResults(ctx, b.st.DB, b.bisectKey(bis, side, parent), forever); err != nil {
		return "", nil, nil, flow.MarkInfra(err)
	}
	if cs, _, err = b.st.BaseResults(ctx, b.st.DB, b.bisectKey(bis, side, bis.Culprit), forever); err != nil {
		return "", nil, nil, flow.MarkInfra(err)
	}
	return parent, ps, cs, nil
}

// commitPeople reads a commit's subject, its author as an address and
// the other addresses its Signed-off-by: lines name, in order.
func commitPeople(repo *git.Repository, sha string) (title, author string, signoffs []string, err error) {
	c, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return "", "", nil, fmt.Errorf("culprit %s: %w", short(sha), err)
	}
	title, _, _ = strings.Cut(strings.TrimSpace(c.Message), "\n")
	author = plainAddress(c.Author.Name, c.Author.Email)
	seen := map[string]bool{strings.ToLower(c.Author.Email): true}
	for _, line := range strings.Split(c.Message, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "Signed-off-by:")
		if !ok {
			continue
		}
		s, err := mail.ParseAddress(strings.TrimSpace(v))
		if err != nil || seen[strings.ToLower(s.Address)] {
			continue
		}
		seen[strings.ToLower(s.Address)] = true
		signoffs = append(signoffs, plainAddress(s.Name, s.Address))
	}
	return title, author, signoffs, nil
}

// commitFiles are the files commit sha changes against its first
// parent (both names of a rename).
func commitFiles(repo *git.Repository, sha string) ([]string, error) {
	c, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return nil, fmt.Errorf("culprit %s: %w", short(sha), err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, err
	}
	var ptree *object.Tree
	if c.NumParents() > 0 {
		p, err := c.Parent(0)
		if err != nil {
			return nil, err
		}
		if ptree, err = p.Tree(); err != nil {
			return nil, err
		}
	}
	changes, err := object.DiffTree(ptree, tree)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, ch := range changes {
		for _, n := range []string{ch.From.Name, ch.To.Name} {
			if n != "" && !slices.Contains(files, n) {
				files = append(files, n)
			}
		}
	}
	return files, nil
}

// plainAddress writes name and addr as a reply's body shows them: UTF-8
// as it is (mail.Address.String would encode it for a header), quoted
// only when the name holds a character an address gives meaning to.
func plainAddress(name, addr string) string {
	if name == "" {
		return "<" + addr + ">"
	}
	if strings.ContainsAny(name, `,;:"()<>@[]\.`) {
		name = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
	}
	return name + " <" + addr + ">"
}

// bisectSide is the side a bisection boots each commit on beside its
// test's trusted base: a series' own bisection measures its prefixes as
// the test measured the whole series; a mainline one boots each commit
// on both sides ("").
func (b *Bot) bisectSide(ctx context.Context, bis store.Bisection) (store.Test, string, error) {
	if bis.TestID == 0 {
		return store.Test{}, "", nil
	}
	t, err := b.st.Test(ctx, b.st.DB, bis.TestID)
	if err != nil {
		return t, "", flow.MarkInfra(err)
	}
	side, err := b.candidateSide(ctx, t)
	return t, side, err
}

// bisectKey is the base cache's key for commit of bis, timed as its test.
func (b *Bot) bisectKey(bis store.Bisection, side, commit string) store.BaseKey {
	return b.testBaseKey(store.Test{Tree: bis.Tree, Base: commit, Lab: bis.Lab}, side)
}

// bisectBoot is what a bisection boots for the kernel in dir.
// t and side are its test's (bisectSide).
func (b *Bot) bisectBoot(ctx context.Context, t store.Test, side, dir string, tr *Trace) (flow.Boot, error) {
	if side == "" || t.BaseArtifact == "" {
		return flow.Boot{Dir: dir}, nil
	}
	baseDir, err := b.fetchArtifact(ctx, t.BaseArtifact, tr)
	if err != nil {
		return flow.Boot{}, err
	}
	return flow.Boot{Dir: dir, Trusted: baseDir, Side: side}, nil
}
