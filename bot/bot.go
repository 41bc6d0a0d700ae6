package bot

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivertype"
	"github.com/robfig/cron/v3"

	"github.com/rdmabot/rdmabot/bot/artifact"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// Roles split the work between machines sharing one PostgreSQL.
const (
	RoleAll    = "all"
	RoleIngest = "ingest" // list polling, GitHub, replies
	RoleBuild  = "build"  // base selection, apply, builds, mainline, bisection
	RoleLab    = "lab"    // lab pairs
)

// Queues: each role works its own.
const (
	QueueIngest = "ingest"
	QueueBuild  = "build"
	QueueLab    = "lab"
	// QueueBaseBuild is the base lane: base kernels nothing has built
	// yet, built only while QueueBuild is idle (baselane.go).
	QueueBaseBuild = "build_base"
	// QueueCheck is the check lane: base choice and the quick compile
	// of a series' changed files, which wait for no build and no lab
	// boot (checkjob.go).
	QueueCheck = "check"
)

// Options configure a Bot.
type Options struct {
	Config Config
	// CacheDir holds the artifact store unless Config.Artifacts says otherwise.
	CacheDir string
	// Role is all, ingest, build or lab; "" makes an insert-only client
	// (the CLI enqueueing work for a running server).
	Role string
	// Lab is the pair used when a request names none (lab.default).
	Lab string
	// Params identifies the test parameters: base results are cached per
	// (tree, commit, lab, params).
	Params string
	// Branches are builder.trees' branches by tree name.
	Branches map[string][]string
	// FetchTrees are the trees with a URL, fetched every FetchInterval
	// (builder.fetch_interval) and before a base is chosen on a stale one.
	FetchTrees    []string
	FetchInterval time.Duration
	Stages        Stages
	Log           *slog.Logger
	// ID names this process in leases and job attempts. It must be unique
	// and stable across restarts: jobs a dead incarnation left running are
	// retried at once when it comes back. Default: hostname/role/listen.
	ID string
	// GitHub polls issue comments from a periodic job; nil: no polling.
	GitHub Poller
	// LeaseWait is how long a job waits before asking again for a busy
	// lab pair; default 15s.
	LeaseWait time.Duration
	// PollInterval is how often idle workers look for jobs (River's
	// FetchPollInterval); tests shorten it.
	PollInterval time.Duration
	// Quick starts River's maintenance (periodic jobs, rescues) at once
	// rather than after its random startup stagger, which spreads the
	// load of many processes starting together; tests set it.
	Quick bool
	// DeliverInterval is how often replies that are due (approved, past
	// the daily limit, retried) are sent; default a minute.
	DeliverInterval time.Duration
	// Token is sent with every artifact pull (bot.token_file's text).
	Token string
	// WarmBases prepares the default base's kernels at start, in the
	// base lane (WarmArgs), where this process builds.
	WarmBases bool
	// Heartbeat is how often this process records that it is alive
	// (default 10s). A process silent for deadBeats heartbeats is dead:
	// the jobs it left running are retried by whoever notices.
	Heartbeat time.Duration
	// MailWatch is how often a process that polls the lists looks at
	// their local inboxes for mail no poll has read (lore.watch_interval);
	// 0 leaves them to the periodic poll.
	MailWatch time.Duration
}

// deadBeats heartbeats missed make a process dead (a minute by default).
const deadBeats = 6

// Bot is the pipeline on River.
type Bot struct {
	cfg    Config
	opts   Options
	st     *store.Store
	river  *river.Client[*sql.Tx]
	art    artifact.Dir
	log    *slog.Logger
	http   *http.Client
	stages Stages
	// stopLoops ends the heartbeat and mail watch loops; loops waits
	// for them.
	stopLoops context.CancelFunc
	loops     sync.WaitGroup
	// queues are the queues this process works, by its role.
	queues map[string]river.QueueConfig
	// pruning serializes this process's prunes of art.
	pruning sync.Mutex
}

// New builds the River client over st with the workers, queues and
// periodic jobs of the role.
func New(st *store.Store, o Options) (*Bot, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ID == "" {
		host, _ := os.Hostname()
		o.ID = host + "/" + o.Role + "/" + o.Config.Listen
	}
	if o.Config.Runs < 1 && o.Role != "" {
		return nil, fmt.Errorf("bot: runs per lab round not set (bot.runs, or reports.runs when it is 0)")
	}
	if o.LeaseWait == 0 {
		o.LeaseWait = 15 * time.Second
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = 10 * time.Second
	}
	if o.DeliverInterval == 0 {
		o.DeliverInterval = time.Minute
	}
	if o.Lab == "" {
		o.Lab = "qemu"
	}
	root := ArtifactRoot(o.Config, o.CacheDir)
	b := &Bot{
		cfg:    o.Config,
		opts:   o,
		st:     st,
		art:    artifact.Dir{Root: root},
		log:    o.Log,
		http:   &http.Client{Timeout: 30 * time.Minute, Transport: bearer{token: o.Token}},
		stages: o.Stages,
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &ingestWorker{b: b})
	river.AddWorker(workers, &baseWorker{b: b})
	river.AddWorker(workers, &checkWorker{b: b})
	river.AddWorker(workers, &buildWorker{b: b})
	river.AddWorker(workers, &baseKernelsWorker{b: b})
	river.AddWorker(workers, &warmWorker{b: b})
	river.AddWorker(workers, &labWorker{b: b})
	river.AddWorker(workers, &reportWorker{b: b})
	river.AddWorker(workers, &mainlineWorker{b: b})
	river.AddWorker(workers, &canaryWorker{b: b})
	river.AddWorker(workers, &bisectWorker{b: b})
	river.AddWorker(workers, &githubPollWorker{b: b})
	river.AddWorker(workers, &fetchWorker{b: b})
	river.AddWorker(workers, &deliverWorker{b: b})

	rc := &river.Config{
		ID:                   sanitizeID(o.ID),
		Logger:               o.Log.With("component", "river"),
		Workers:              workers,
		MaxAttempts:          o.Config.MaxAttempts,
		JobTimeout:           -1, // each worker sets its own
		RescueStuckJobsAfter: o.Config.RescueAfter.Duration,
		FetchPollInterval:    o.PollInterval,
		ErrorHandler:         &errorHandler{b: b},
		TestOnly:             o.Quick,
	}
	if rc.FetchPollInterval == 0 {
		rc.FetchPollInterval = time.Second
	}
	rc.FetchCooldown = min(rc.FetchPollInterval, river.FetchCooldownDefault)
	queues := map[string]river.QueueConfig{}
	// Role is one of all, ingest, build, lab, or several joined by commas.
	for _, role := range strings.Split(o.Role, ",") {
		switch strings.TrimSpace(role) {
		case "":
		case RoleAll:
			queues[QueueIngest] = river.QueueConfig{MaxWorkers: 4}
			queues[QueueBuild] = river.QueueConfig{MaxWorkers: 1}
			queues[QueueBaseBuild] = river.QueueConfig{MaxWorkers: 1}
			queues[QueueCheck] = river.QueueConfig{MaxWorkers: 1}
			queues[QueueLab] = river.QueueConfig{MaxWorkers: 2}
		case RoleIngest:
			queues[QueueIngest] = river.QueueConfig{MaxWorkers: 4}
		case RoleBuild:
			queues[QueueBuild] = river.QueueConfig{MaxWorkers: 1}
			queues[QueueBaseBuild] = river.QueueConfig{MaxWorkers: 1}
			queues[QueueCheck] = river.QueueConfig{MaxWorkers: 1}
		case RoleLab:
			queues[QueueLab] = river.QueueConfig{MaxWorkers: 2}
		default:
			return nil, fmt.Errorf("bot: unknown role %q (all, ingest, build, lab, or a comma-separated list)", role)
		}
	}
	b.queues = queues
	if len(queues) > 0 {
		rc.Queues = queues
		pj, err := b.periodicJobs()
		if err != nil {
			return nil, err
		}
		rc.PeriodicJobs = pj
	}
	client, err := river.NewClient(st.Driver(), rc)
	if err != nil {
		return nil, fmt.Errorf("bot: %w", err)
	}
	b.river = client
	return b, nil
}

// buildsBases says whether this process works the base lane.
func (b *Bot) buildsBases() bool { return b.works(QueueBaseBuild) }

// works says whether this process works queue q (its role's).
func (b *Bot) works(q string) bool {
	_, ok := b.queues[q]
	return ok
}

func sanitizeID(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' {
			return '_'
		}
		return r
	}, s)
}

// periodic is one periodic job as declared: River gets its schedule and
// constructor (periodicJobs), the dashboard its next run (Schedules).
type periodic struct {
	Schedule
	sched      river.PeriodicSchedule
	args       func() river.JobArgs
	runOnStart bool
}

// periodics are the ingest tick, deliveries, tree fetches, GitHub
// polling, the A/A canary and the mainline cron, from the configuration.
// robfig/cron parses the specs.
func (b *Bot) periodics() ([]periodic, error) {
	var out []periodic
	every := func(id string, d time.Duration, args func() river.JobArgs) {
		a := args()
		out = append(out, periodic{Schedule: Schedule{ID: id, Kind: a.Kind(), Every: d}, sched: river.PeriodicInterval(d), args: args, runOnStart: true})
	}
	every("ingest", b.cfg.IngestInterval.Duration, func() river.JobArgs { return IngestArgs{} })
	every("deliver", b.opts.DeliverInterval, func() river.JobArgs { return DeliverArgs{} })
	if len(b.opts.FetchTrees) > 0 && b.opts.FetchInterval > 0 {
		every("fetch", b.opts.FetchInterval, func() river.JobArgs { return FetchArgs{} })
	}
	if b.opts.GitHub != nil && b.cfg.GitHub.PollInterval.Duration > 0 {
		every("github-poll", b.cfg.GitHub.PollInterval.Duration, func() river.JobArgs { return GitHubPollArgs{} })
	}
	if spec := b.cfg.Canary.Schedule; spec != "" {
		sched, err := cron.ParseStandard(spec)
		if err != nil {
			return nil, fmt.Errorf("bot.canary.schedule: %q: %w", spec, err)
		}
		out = append(out, periodic{Schedule: Schedule{ID: "canary", Kind: CanaryArgs{}.Kind(), Spec: spec}, sched: sched,
			args: func() river.JobArgs { return CanaryArgs{At: time.Now().UTC().Truncate(time.Second)} }})
	}
	for i, spec := range b.cfg.Mainline.Schedules {
		sched, err := cron.ParseStandard(spec)
		if err != nil {
			return nil, fmt.Errorf("bot.mainline.schedules: %q: %w", spec, err)
		}
		for _, tree := range b.cfg.Mainline.Trees {
			for _, br := range b.opts.Branches[tree] {
				args := MainlineArgs{Tree: tree, Branch: br}
				out = append(out, periodic{Schedule: Schedule{ID: fmt.Sprintf("mainline-%d-%s-%s", i, tree, br), Kind: args.Kind(), Spec: spec, Tree: tree, Branch: br},
					sched: sched, args: func() river.JobArgs { return args }})
			}
		}
	}
	return out, nil
}

// periodicJobs are the periodics as River runs them. River's leader
// inserts them, so with several processes each tick is enqueued once;
// every process declares them all, whatever its role, because any of
// them may be the leader.
func (b *Bot) periodicJobs() ([]*river.PeriodicJob, error) {
	ps, err := b.periodics()
	if err != nil {
		return nil, err
	}
	out := make([]*river.PeriodicJob, 0, len(ps))
	for _, p := range ps {
		out = append(out, river.NewPeriodicJob(p.sched,
			func() (river.JobArgs, *river.InsertOpts) { return p.args(), nil },
			&river.PeriodicJobOpts{ID: p.ID, RunOnStart: p.runOnStart}))
	}
	return out, nil
}

// Schedule is one periodic job as the dashboard shows it: a cron spec
// and its next run after a time, or the interval of a tick.
type Schedule struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Tree and Branch are a mainline run's.
	Tree   string `json:"tree,omitempty"`
	Branch string `json:"branch,omitempty"`
	// Spec and Next are a cron job's; Every an interval tick's (River
	// counts the interval from its own last run, which it does not
	// expose, so no time is claimed for it).
	Spec  string        `json:"spec,omitempty"`
	Next  time.Time     `json:"next,omitzero"`
	Every time.Duration `json:"every_ns,omitempty"`
}

// Schedules are the periodic jobs every process declares, with each cron
// job's next run after now: cron jobs first, soonest first.
func (b *Bot) Schedules(now time.Time) ([]Schedule, error) {
	ps, err := b.periodics()
	if err != nil {
		return nil, err
	}
	out := make([]Schedule, 0, len(ps))
	for _, p := range ps {
		s := p.Schedule
		if s.Spec != "" {
			s.Next = p.sched.Next(now)
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, c := out[i], out[j]
		if a.Next.IsZero() != c.Next.IsZero() {
			return !a.Next.IsZero()
		}
		return a.Next.Before(c.Next)
	})
	return out, nil
}

// Start rescues the jobs this process's previous incarnation left
// running (it was killed) and starts working.
func (b *Bot) Start(ctx context.Context) error {
	if err := b.rescueOwn(ctx); err != nil {
		return err
	}
	if err := b.river.Start(ctx); err != nil {
		return fmt.Errorf("bot: start: %w", err)
	}
	if b.opts.WarmBases && b.buildsBases() {
		if _, err := b.river.Insert(ctx, WarmArgs{}, nil); err != nil {
			return fmt.Errorf("bot: warm-up: %w", err)
		}
	}
	if b.opts.Role != "" {
		if err := b.st.Beat(ctx, sanitizeID(b.opts.ID)); err != nil {
			return fmt.Errorf("bot: heartbeat: %w", err)
		}
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		b.stopLoops = cancel
		b.loops.Add(1)
		go func() {
			defer b.loops.Done()
			b.heartbeat(lctx)
		}()
		if w, ok := b.stages.Ingest.(mailWatcher); ok && b.opts.MailWatch > 0 && b.works(QueueIngest) {
			b.loops.Add(1)
			go func() {
				defer b.loops.Done()
				b.watchMail(lctx, w)
			}()
		}
	}
	b.log.Info("bot started", "role", b.opts.Role, "id", b.opts.ID, "db", b.st.Dialect)
	return nil
}

// heartbeat records that this process is alive and takes over the jobs
// that dead processes left running, until ctx ends.
func (b *Bot) heartbeat(ctx context.Context) {
	tick := time.NewTicker(b.opts.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := b.st.Beat(ctx, sanitizeID(b.opts.ID)); err != nil && ctx.Err() == nil {
			b.log.Warn("heartbeat", "err", err)
		}
		if err := b.rescueDead(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("rescue", "err", err)
		}
	}
}

// rescueDead makes the running jobs of processes that stopped beating
// available again. A job whose process never beat (an older version) is
// left to River's rescuer (rescue_after).
func (b *Bot) rescueDead(ctx context.Context) error {
	beats, err := b.st.Beats(ctx)
	if err != nil {
		return err
	}
	res, err := b.river.JobList(ctx, river.NewJobListParams().States(rivertype.JobStateRunning).First(10000))
	if err != nil {
		return err
	}
	deadline := b.st.Now().Add(-deadBeats * b.opts.Heartbeat)
	for _, j := range res.Jobs {
		n := len(j.AttemptedBy)
		if n == 0 {
			continue
		}
		owner := j.AttemptedBy[n-1]
		last, known := beats[owner]
		if !known || owner == sanitizeID(b.opts.ID) || last.After(deadline) {
			continue
		}
		r, err := b.st.DB.ExecContext(ctx, `UPDATE river_job SET state = 'retryable' WHERE id = $1 AND state = 'running'`, j.ID)
		if err != nil {
			return fmt.Errorf("job %d: %w", j.ID, err)
		}
		if k, _ := r.RowsAffected(); k > 0 {
			b.log.Warn("took over a job whose process stopped beating", "job", j.ID, "kind", j.Kind, "owner", owner, "last_beat", last)
		}
	}
	return nil
}

// Stop waits for running jobs to finish, up to ctx.
func (b *Bot) Stop(ctx context.Context) error {
	if b.stopLoops != nil {
		b.stopLoops()
		b.loops.Wait()
	}
	err := b.river.Stop(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return b.river.StopAndCancel(context.Background())
	}
	return err
}

// Store is the bot's database.
func (b *Bot) Store() *store.Store { return b.st }

// ArtifactRoot is where a worker keeps the kernels it built or pulled:
// bot.artifacts, else <cache_dir>/artifacts.
func ArtifactRoot(c Config, cacheDir string) string {
	if c.Artifacts != "" {
		return c.Artifacts
	}
	return filepath.Join(cacheDir, "artifacts")
}

// Artifacts is the local artifact store (served to other workers).
func (b *Bot) Artifacts() artifact.Dir { return b.art }

// River is the job client, for the dashboard's queue figures.
func (b *Bot) River() *river.Client[*sql.Tx] { return b.river }

// rescueOwn makes jobs attempted last by this process's ID, and still
// marked running, available again: this process was killed while working
// them. River's rescuer would do the same after rescue_after; doing it at
// start means a restart resumes at once. The ID is unique per process, so
// no live worker's job is touched.
func (b *Bot) rescueOwn(ctx context.Context) error {
	if b.opts.Role == "" {
		return nil
	}
	res, err := b.river.JobList(ctx, river.NewJobListParams().States(rivertype.JobStateRunning).First(10000))
	if err != nil {
		return fmt.Errorf("bot: rescue: %w", err)
	}
	id := sanitizeID(b.opts.ID)
	for _, j := range res.Jobs {
		if n := len(j.AttemptedBy); n == 0 || j.AttemptedBy[n-1] != id {
			continue
		}
		// River's own rescuer makes the same change after rescue_after;
		// the job's scheduled_at is in the past, so it is due at once.
		_, err := b.st.DB.ExecContext(ctx, `UPDATE river_job SET state = 'retryable' WHERE id = $1 AND state = 'running'`, j.ID)
		if err != nil {
			return fmt.Errorf("bot: rescue job %d: %w", j.ID, err)
		}
		b.log.Info("rescued job left running by a previous run", "job", j.ID, "kind", j.Kind, "attempt", j.Attempt)
	}
	return nil
}

// errorHandler logs failed attempts; retry decisions are made in work.
type errorHandler struct{ b *Bot }

func (h *errorHandler) HandleError(ctx context.Context, job *rivertype.JobRow, err error) *river.ErrorHandlerResult {
	h.b.log.Warn("job failed", "job", job.ID, "kind", job.Kind, "attempt", job.Attempt, "err", err)
	return nil
}

func (h *errorHandler) HandlePanic(ctx context.Context, job *rivertype.JobRow, v any, trace string) *river.ErrorHandlerResult {
	h.b.log.Error("job panicked", "job", job.ID, "kind", job.Kind, "panic", v, "trace", trace)
	h.b.st.AppendTrace(context.WithoutCancel(ctx), job.ID, fmt.Sprintf("panic: %v", v), trace)
	h.b.giveUp(context.WithoutCancel(ctx), job, fmt.Errorf("panic: %v", v))
	return &river.ErrorHandlerResult{SetCancelled: true}
}

// work runs one attempt of a job with its trace and classifies the
// failure: infrastructure errors are retried with River's backoff; any
// other error is final (the job is cancelled with it, never retried).
func (b *Bot) work(ctx context.Context, row *rivertype.JobRow, f func(tr *Trace) error) error {
	tr := b.newTrace(ctx, row.ID)
	if row.Kind == (LabArgs{}).Kind() {
		// Until it holds the pair (withLease): another look at a busy
		// pair every LeaseWait is not written again. (A bisection step
		// builds first, and its build is traced as it goes.)
		tr.hold()
	}
	tr.Logf("%s job %d attempt %d on %s", row.Kind, row.ID, row.Attempt, b.opts.ID)
	start := time.Now()
	b.log.Info("job start", "job", row.ID, "kind", row.Kind, "attempt", row.Attempt)
	panicked, err := guard(tr, f)
	tr.Close()
	if errors.Is(err, errSnoozed) {
		tr.dropRepeat()
	}
	tr.release()
	outcome := "ok"
	switch {
	case err == nil:
	case errors.Is(err, errSnoozed):
		outcome = "snoozed"
	case ctx.Err() != nil:
		outcome = "interrupted"
		tr.Logf("interrupted: %v", err)
	case panicked && row.Attempt >= maxPanicAttempts:
		// A bug, not an outage: retrying it for hours helps nobody.
		outcome = "failed"
		tr.Logf("panicked again, giving up: %v", err)
	case flow.IsInfra(err) && row.Attempt >= row.MaxAttempts:
		outcome = "failed"
		tr.Logf("infrastructure error on the last attempt, giving up: %v", err)
	case flow.IsInfra(err):
		outcome = "retry"
		tr.Logf("infrastructure error, will retry: %v", err)
	default:
		outcome = "failed"
		tr.Logf("failed: %v", err)
	}
	tr.Close()
	if serr := b.st.RecordJob(context.WithoutCancel(ctx), row.Kind, outcome, time.Since(start)); serr != nil {
		b.log.Warn("job stats", "err", serr)
	}
	switch outcome {
	case "snoozed":
		return river.JobSnooze(b.opts.LeaseWait)
	case "failed":
		// No job follows this one: the test must not wait for ever in
		// "building" or "testing". It ends as the bot's own failure,
		// shown on the dashboard and by rdmabot status, never as a verdict.
		b.giveUp(context.WithoutCancel(ctx), row, err)
		return river.JobCancel(err)
	case "interrupted":
		if !errors.Is(context.Cause(ctx), river.ErrJobCancelledRemotely) && !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			// Shutdown: run it again at the next start without spending
			// an attempt (River's advice for interrupted work).
			return river.JobSnooze(0)
		}
	}
	return err
}

var errSnoozed = errors.New("snoozed: lab pair busy")

// maxPanicAttempts bounds the retries of a job that panics: once may be
// state another process left (a slot, a lock), twice is a bug.
const maxPanicAttempts = 2

// guard runs f and turns a panic into an infrastructure error, so the job
// is retried and then ended like any other failure. Whatever f holds is
// released by its own defers as the panic unwinds through them.
func guard(tr *Trace, f func(tr *Trace) error) (panicked bool, err error) {
	defer func() {
		if v := recover(); v != nil {
			tr.Logf("panic: %v\n%s", v, debug.Stack())
			panicked, err = true, &flow.InfraError{Err: fmt.Errorf("panic: %v", v)}
		}
	}()
	return false, f(tr)
}

// giveUp ends the test a finally failed job worked for as failed (the
// bot's fault: INFRA), unless the test already ended.
func (b *Bot) giveUp(ctx context.Context, row *rivertype.JobRow, cause error) {
	var a struct {
		TestID      int64 `json:"test_id"`
		BisectionID int64 `json:"bisection_id"`
	}
	if json.Unmarshal(row.EncodedArgs, &a) != nil {
		return
	}
	if row.Kind == (BisectArgs{}).Kind() && a.BisectionID != 0 {
		b.giveUpBisection(ctx, row, a.BisectionID, cause)
		return
	}
	if a.TestID == 0 {
		return
	}
	t, err := b.st.Test(ctx, b.st.DB, a.TestID)
	if err != nil {
		b.log.Error("give up: read test", "test", a.TestID, "err", err)
		return
	}
	if t.State == store.StateDone || t.State == store.StateCanceled || t.State == store.StateFailed {
		return
	}
	t.State, t.Summary = store.StateFailed, fmt.Sprintf("INFRA: %s job %d gave up after %d attempts: %v", row.Kind, row.ID, row.Attempt, cause)
	if err := b.st.UpdateTest(ctx, b.st.DB, t); err != nil {
		b.log.Error("give up: update test", "test", a.TestID, "err", err)
		return
	}
	b.log.Error("test failed on infrastructure", "test", t.ID, "job", row.ID, "kind", row.Kind, "err", cause)
}

// giveUpBisection ends a bisection whose step finally failed. One over
// a series' own patches held its test's reply: that reply now goes out,
// saying the first bad patch was not found and why (the verdict stands).
func (b *Bot) giveUpBisection(ctx context.Context, row *rivertype.JobRow, id int64, cause error) {
	bis, err := b.st.Bisection(ctx, b.st.DB, id)
	if err != nil {
		b.log.Error("give up: read bisection", "bisection", id, "err", err)
		return
	}
	if bis.State != store.BisectionRunning && bis.State != store.BisectionConfirming {
		return
	}
	bis.State, bis.Summary = store.BisectionFailed, fmt.Sprintf("a step failed on the bot's side (INFRA) %d times: %v", row.Attempt, firstLine(cause.Error()))
	tx, err := b.st.DB.BeginTx(ctx, nil)
	if err != nil {
		b.log.Error("give up: bisection", "bisection", id, "err", err)
		return
	}
	defer tx.Rollback()
	if err := b.st.UpdateBisection(ctx, tx, bis); err != nil {
		b.log.Error("give up: update bisection", "bisection", id, "err", err)
		return
	}
	if bis.TestID != 0 {
		if _, err := b.river.InsertTx(ctx, tx, ReportArgs{TestID: bis.TestID, Bisected: bis.ID}, nil); err != nil {
			b.log.Error("give up: the waiting reply", "bisection", id, "test", bis.TestID, "err", err)
			return
		}
	}
	if err := tx.Commit(); err != nil {
		b.log.Error("give up: bisection", "bisection", id, "err", err)
		return
	}
	b.log.Error("bisection failed on infrastructure", "bisection", id, "test", bis.TestID, "job", row.ID, "err", cause)
}

// testJob is the work of a job for one test: it loads the test and
// runs stage on it, or completes the job at once when the test was
// canceled.
func testJob[T river.JobArgs](ctx context.Context, b *Bot, job *river.Job[T], testID int64, stage func(tr *Trace, t store.Test) error) error {
	return b.work(ctx, job.JobRow, func(tr *Trace) error {
		t, err := b.st.Test(ctx, b.st.DB, testID)
		if err != nil {
			return flow.MarkInfra(err)
		}
		if t.State == store.StateCanceled {
			tr.Logf("test %d was canceled", t.ID)
			return complete(ctx, b, job, nil)
		}
		return stage(tr, t)
	})
}

// complete runs f and marks job completed in one transaction: the next
// job of the pipeline exists if and only if this one is done.
func complete[T river.JobArgs](ctx context.Context, b *Bot, job *river.Job[T], f func(tx *sql.Tx) error) error {
	tx, err := b.st.DB.BeginTx(ctx, nil)
	if err != nil {
		return flow.MarkInfra(err)
	}
	defer tx.Rollback()
	if f != nil {
		if err := f(tx); err != nil {
			return flow.MarkInfra(err)
		}
	}
	if _, err := river.JobCompleteTx[riverdriver.Driver[*sql.Tx]](ctx, tx, job); err != nil {
		return flow.MarkInfra(fmt.Errorf("complete job %d: %w", job.ID, err))
	}
	return flow.MarkInfra(tx.Commit())
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are marshalled
	}
	return string(b)
}

// bearer sends the bot's token with every request to another worker.
type bearer struct{ token string }

func (t bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.token == "" {
		return http.DefaultTransport.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return http.DefaultTransport.RoundTrip(r)
}
