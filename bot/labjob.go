package bot

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// The lab job: one round on a leased pair.

type labWorker struct {
	river.WorkerDefaults[LabArgs]
	b *Bot
}

func (w *labWorker) Timeout(*river.Job[LabArgs]) time.Duration { return 3 * time.Hour }

func (w *labWorker) Work(ctx context.Context, job *river.Job[LabArgs]) error {
	b := w.b
	return testJob(ctx, b, job, job.Args.TestID, func(tr *Trace, t store.Test) error {
		var basePath, candPath string
		side, err := b.candidateSide(ctx, t)
		if err != nil {
			return err
		}
		bk := b.testBaseKey(t, side)
		var cached []flow.Sample
		if t.Base != "" {
			// Every round boots the base beside the candidate, so that a
			// machine busier or quieter than when the cached runs were
			// measured moves both sides alike. The cache only adds
			// evidence, once it agrees with the fresh boots (below).
			if cached, _, err = b.st.BaseResults(ctx, b.st.DB, bk, b.cfg.BaseMaxAge.Duration); err != nil {
				return flow.MarkInfra(err)
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
		o, err := b.storedOrigin(fmt.Sprintf("test %d", t.ID), t.Origin, tr)
		if err != nil {
			return err
		}
		baseBoot, candBoot, err := b.roundBoots(ctx, t, side, o, job.Args.Round, basePath, candPath, tr)
		if err != nil {
			return err
		}
		return b.withLease(ctx, t.Lab, job.ID, t.ID, tr, func(ctx context.Context) error {
			n := job.Args.Runs
			start := time.Now()
			var baseSamples, candSamples []flow.Sample
			// The profiles first: a crash or evidence they find decides
			// at once.
			lossyBase, lossyCand, err := b.profileBoots(ctx, t, o, job.Args.Round, baseBoot, candBoot, tr)
			if err != nil {
				if infraOrInterrupted(ctx, err) {
					return err
				}
				// Logged before the transaction: the trace is written
				// through the database too.
				tr.Logf("a kernel failed under a lab profile: %v", err)
				return complete(ctx, b, job, func(tx *sql.Tx) error { return b.lossyFailed(ctx, tx, t, err) })
			}
			d, stop, err := b.policy().ProfilesDecide(ctx, t.Key, lossyBase, lossyCand)
			if err != nil {
				return err
			}
			if stop {
				tr.Logf("the profiles decided %s: no default boots", d.Verdict)
				n = 0
			}
			switch {
			case n == 0:
			case basePath != "":
				tr.Logf("round %d: %d runs each of base %s and candidate %s on %s, alternating", job.Args.Round, n, short(t.Base), short(t.Candidate), t.Lab)
			default:
				tr.Logf("round %d: %d candidate runs of %s on %s", job.Args.Round, n, short(t.Candidate), t.Lab)
			}
			baseSamples, candSamples, err = RunRound(ctx, b.stages.Lab, t.Lab, baseBoot, candBoot, n, tr)
			var re *RoundError
			switch {
			case err == nil:
			case infraOrInterrupted(ctx, err) || !errors.As(err, &re):
				return err
			case re.Side == "base":
				tr.Logf("base kernel failed in the lab: %v", err)
				t.State, t.Summary = store.StateFailed, "base kernel failed in the lab: "+err.Error()
				return complete(ctx, b, job, func(tx *sql.Tx) error { return b.st.UpdateTest(ctx, tx, t) })
			default:
				tr.Logf("candidate kernel failed: %v", err)
				t.Detail = detailOf(err)
				return complete(ctx, b, job, func(tx *sql.Tx) error {
					return finishWithVerdictTx(ctx, b, tx, t, flow.BootFailed, err.Error())
				})
			}
			rr := roundRecord{start: start, fin: time.Now(), lossyBase: lossyBase, lossyCand: lossyCand,
				base: baseSamples, cand: candSamples, booted: basePath != ""}
			if rr.baseCache, err = b.baseCache(ctx, t.Key, cached, baseSamples, job.Args.Round, tr); err != nil {
				return err
			}
			return complete(ctx, b, job, func(tx *sql.Tx) error { return b.saveRound(ctx, tx, job, t, bk, rr) })
		})
	})
}

// roundRecord is what a lab round measured.
type roundRecord struct {
	start, fin           time.Time
	lossyBase, lossyCand []flow.Sample // the profiles' boots
	base, cand           []flow.Sample // the default test's
	booted               bool          // the base was booted
	baseCache            []flow.Sample // the base's cache after the round
}

// baseCache is the base's cache after a round (RoundPolicy.BaseCache).
func (b *Bot) baseCache(ctx context.Context, id string, cached, fresh []flow.Sample, round int, tr *Trace) ([]flow.Sample, error) {
	cache, drifted, err := b.policy().BaseCache(ctx, id, cached, fresh, round)
	if err != nil {
		return nil, err
	}
	if drifted {
		tr.Logf("the %d cached base samples disagree with this round's %d fresh ones (the machine drifted): the cache is replaced", len(cached), len(fresh))
	}
	return cache, nil
}

// policy is the round policy the bot's jobs follow.
func (b *Bot) policy() RoundPolicy {
	return RoundPolicy{Decide: b.stages.Decide, MaxRounds: b.cfg.MaxRounds}
}

// saveRound stores a round's runs and the base's cache, and queues the
// report job, in the transaction that completes the lab job.
func (b *Bot) saveRound(ctx context.Context, tx *sql.Tx, job *river.Job[LabArgs], t store.Test, bk store.BaseKey, rr roundRecord) error {
	// The lossy boots are runs of the test like the others (their
	// samples say the profile) but never base cache: their figures are
	// not the default link's.
	if rr.booted {
		if err := b.st.SaveRun(ctx, tx, store.Run{TestID: t.ID, JobID: job.ID, Round: job.Args.Round, Role: "base", Commit: t.Base,
			Lab: t.Lab, Samples: append(rr.lossyBase, rr.base...), StartedAt: rr.start, FinishedAt: rr.fin}); err != nil {
			return err
		}
		if len(rr.base) > 0 {
			if err := b.st.PutBaseResults(ctx, tx, bk, rr.baseCache); err != nil {
				return err
			}
		}
	}
	if err := b.st.SaveRun(ctx, tx, store.Run{TestID: t.ID, JobID: job.ID, Round: job.Args.Round, Role: "candidate", Commit: t.Candidate,
		Lab: t.Lab, Samples: append(rr.lossyCand, rr.cand...), StartedAt: rr.start, FinishedAt: rr.fin}); err != nil {
		return err
	}
	t.Rounds = job.Args.Round
	if err := b.st.UpdateTest(ctx, tx, t); err != nil {
		return err
	}
	_, err := b.river.InsertTx(ctx, tx, ReportArgs{TestID: t.ID, Round: job.Args.Round}, nil)
	return err
}

// candidateSide is the side of the pair a series' kernel boots on,
// beside its trusted base ("" for a test that is not a series', or has
// no base: its kernel boots on both sides).
func (b *Bot) candidateSide(ctx context.Context, t store.Test) (string, error) {
	if t.Kind != store.KindSeries || t.SeriesID == 0 || t.Base == "" {
		return "", nil
	}
	s, err := b.series(ctx, t.SeriesID)
	if err != nil {
		return "", flow.MarkInfra(err)
	}
	return b.stages.Lab.CandidateSide(s), nil
}

// testBaseKey is the base cache's key for a test whose candidate boots
// on side: on the client, the trusted server takes the times, and its
// figures are never mixed with those the client takes.
func (b *Bot) testBaseKey(t store.Test, side string) store.BaseKey {
	k := b.baseKey(t.Tree, t.Base, t.Lab)
	if side == "client" {
		k.Params += " timed-by=server"
	}
	return k
}

// boots are what a test's base and candidate boots run. A series'
// kernel boots on the side its patches act on, beside the trusted base
// on the other, so that nothing the series' kernel prints measures or
// checks the transfer that judges it. On the client, the trusted server
// takes the times, so the base boots there too, beside itself, to be
// timed the same way. A mainline head is no stranger's code: it boots
// on both sides, as does a test without a base.
func (b *Bot) boots(t store.Test, side, basePath, candPath string, tr *Trace) (base, cand flow.Boot) {
	base, cand = flow.Boot{Dir: basePath}, flow.Boot{Dir: candPath}
	if side == "" || basePath == "" {
		return base, cand
	}
	cand.Trusted, cand.Side = basePath, side
	other := "client"
	if side == "client" {
		other = "server"
		base.Trusted, base.Side = basePath, side
	}
	tr.Logf("the candidate boots on the %s, the base kernel %s on the %s, which takes the times", side, short(t.Base), other)
	return base, cand
}

// roundBoots are the boots of a test's round (boots): in a new head's
// and an asked-for test, the profiles' larger variants (a posting gets
// the ones that fit every series), and in the first round each side's
// debug build when both were built.
func (b *Bot) roundBoots(ctx context.Context, t store.Test, side string, o flow.Origin, round int, basePath, candPath string, tr *Trace) (base, cand flow.Boot, err error) {
	base, cand = b.boots(t, side, basePath, candPath, tr)
	base.Thorough = t.Kind == store.KindMainline || len(o.Asked) > 0
	cand.Thorough = base.Thorough
	if round == 1 && t.BaseDebugArtifact != "" && t.CandDebugArtifact != "" {
		if base.Debug, err = b.fetchArtifact(ctx, t.BaseDebugArtifact, tr); err != nil {
			return base, cand, err
		}
		if cand.Debug, err = b.fetchArtifact(ctx, t.CandDebugArtifact, tr); err != nil {
			return base, cand, err
		}
	}
	return base, cand, nil
}

// profileBoots are the lab profiles' boots (lab.lossy, lab.pressure) in
// a test's first round, each profile's base and candidate boots
// alternating: for a series that changes what a profile is for, and for
// every new mainline head (its merges change such code unseen), and for
// a test whose request (o) asked for a profile by name; none otherwise.
// They stop at the first crash. An error is the lab's, or a kernel that
// did not come up under a profile (lossyFailed).
func (b *Bot) profileBoots(ctx context.Context, t store.Test, o flow.Origin, round int, baseBoot, candBoot flow.Boot, tr *Trace) (base, cand []flow.Sample, err error) {
	profiles := b.stages.Profiles
	if b.stages.Debug != nil && baseBoot.Debug != "" && candBoot.Debug != "" {
		// The build job built them because the profile asked. They boot
		// first: a KASAN or lockdep report names the faulty line, where
		// the same bug under another profile is a bare hang or oops, and
		// a crash ends the round, so booted last they were often never
		// booted at all, their build wasted.
		profiles = append([]Profile{b.stages.Debug}, profiles...)
	}
	if len(profiles) == 0 || round != 1 || baseBoot.Dir == "" {
		return nil, nil, nil
	}
	var series *flow.Series
	if t.Kind == store.KindSeries && t.SeriesID != 0 {
		s, err := b.series(ctx, t.SeriesID)
		if err != nil {
			return nil, nil, flow.MarkInfra(err)
		}
		series = &s
	}
	return RunProfiles(ctx, profiles, t.Lab, baseBoot, candBoot, short(t.Base), short(t.Candidate), func(p Profile) string {
		switch {
		case t.Kind == store.KindMainline:
			// A head boots on both sides already: a profile that only
			// moves a series' kernel to the other side has nothing to do.
			if so, ok := p.(interface{ SeriesOnly() bool }); ok && so.SeriesOnly() {
				return ""
			}
			return "a new " + t.Tree + " " + t.Ref + " head"
		case o.AskedFor(p.Name()):
			return "the request asked for it"
		case series != nil:
			if w := p.Why(*series); w != "" {
				return "the series changes " + w
			}
		}
		return ""
	}, tr)
}

// RunProfiles boots base and candidate (named baseName and candName in
// trace) under each profile that can run on pair and that why names a
// reason for ("" = skip it), base and candidate alternating, until a
// boot crashes or corrupts data. It is the one round of profile boots:
// the lab job's, and the A/A and compare runners'. An error is the
// lab's, or a kernel that did not come up under a profile (saying which
// side).
func RunProfiles(ctx context.Context, profiles []Profile, pair string, baseBoot, candBoot flow.Boot, baseName, candName string, why func(Profile) string, trace io.Writer) (base, cand []flow.Sample, err error) {
	sides := []profileSide{{"base", baseBoot, &base}, {"candidate", candBoot, &cand}}
	for _, p := range profiles {
		if !p.Shapes(pair) {
			continue
		}
		reason := why(p)
		if reason == "" {
			continue
		}
		n := p.Boots()
		fmt.Fprintf(trace, "%s: first %d boots each of base %s and candidate %s under the %s profile\n", reason, n, baseName, candName, p.Name())
		for i := range n {
			var lastBase []flow.Sample // this boot's base samples
			for _, side := range sides {
				fmt.Fprintf(trace, "%s %s %d/%d\n", p.Name(), side.name, i+1, n)
				smp, err := side.run(p, func(k flow.Boot) ([]flow.Sample, error) { return p.Run(ctx, pair, k, i, trace) })
				if err != nil {
					return base, cand, err
				}
				if side.name == "base" {
					lastBase = smp
				}
				if c, ok := p.(Confirmer); ok && side.name == "candidate" && !crashed(smp) {
					boot := fmt.Sprintf("%s candidate %d/%d", p.Name(), i+1, n)
					if stop, err := confirmFailures(ctx, c, p, pair, sides, i, boot, toConfirm(lastBase, smp), trace); stop || err != nil {
						return base, cand, err
					}
				}
				if crashed(smp) {
					fmt.Fprintf(trace, "%s %s %d/%d crashed: %s\n", p.Name(), side.name, i+1, n, firstCrash(smp))
					if side.name == "candidate" && needsConfirming(base, cand) {
						fmt.Fprintf(trace, "%s candidate: booting once more to confirm the failure\n", p.Name())
						if _, err := side.run(p, func(k flow.Boot) ([]flow.Sample, error) { return p.Run(ctx, pair, k, i, trace) }); err != nil {
							return base, cand, err
						}
					}
					return base, cand, nil
				}
				if c := firstCorrupt(smp); c != "" {
					fmt.Fprintf(trace, "%s %s %d/%d corrupted data: %s\n", p.Name(), side.name, i+1, n, c)
					return base, cand, nil
				}
			}
		}
	}
	return base, cand, nil
}

// profileSide is one side of RunProfiles' boots: its kernel, and where
// its samples go.
type profileSide struct {
	name string
	boot flow.Boot
	out  *[]flow.Sample
}

// run boots the side's kernel by boot (a profile's Run or Confirm) and
// adds its samples, named by p when they name no finer profile. An
// error says the profile and the side.
func (s profileSide) run(p Profile, boot func(flow.Boot) ([]flow.Sample, error)) ([]flow.Sample, error) {
	smp, err := boot(s.boot)
	if err != nil {
		return nil, &profileError{profile: p.Name(), side: s.name, err: err}
	}
	for j := range smp {
		if smp[j].Profile == "" {
			smp[j].Profile = p.Name()
		}
	}
	*s.out = append(*s.out, smp...)
	return smp, nil
}

// confirmFailures boots each side once more, base first, running only
// the tests again that the candidate boot (named boot in trace) failed
// (none: nothing to do); stop says a boot crashed, which
// ends the profiles' boots. A functional failure seen once is not yet
// the series': a test slow under a busy host's load, or one that fails
// now and then, fails once on any kernel, so only a failure seen again
// decides. Both kernels run them, so that a load that failed them on
// both is seen, and the trusted server's count for those tests alone
// has a base to be held to.
func confirmFailures(ctx context.Context, c Confirmer, p Profile, pair string, sides []profileSide, i int, boot string, again []string, trace io.Writer) (stop bool, err error) {
	if len(again) == 0 {
		return false, nil
	}
	fmt.Fprintf(trace, "%s: %s failed on it and passed on the base: both run them once more to confirm\n", boot, strings.Join(again, ", "))
	for _, side := range sides {
		more, err := side.run(p, func(k flow.Boot) ([]flow.Sample, error) { return c.Confirm(ctx, pair, k, i, again, trace) })
		if err != nil {
			return true, err
		}
		if crashed(more) {
			fmt.Fprintf(trace, "%s %s, running %s again, crashed: %s\n", p.Name(), side.name, strings.Join(again, ", "), firstCrash(more))
			return true, nil
		}
	}
	return false, nil
}

// toConfirm are the functional tests (in the base's order) that every
// base boot beside a candidate boot ran and passed and the candidate did
// not pass: failed, not run, or not reported.
func toConfirm(base, cand []flow.Sample) []string {
	var order []string
	passedOnBase := map[string]bool{}
	for _, s := range base {
		for _, t := range s.Tests {
			prev, seen := passedOnBase[t.Name]
			if !seen {
				order = append(order, t.Name)
			}
			passedOnBase[t.Name] = (!seen || prev) && t.Status == flow.TestPass
		}
	}
	passedOnCand := map[string]bool{}
	for _, s := range cand {
		for _, t := range s.Tests {
			if t.Status == flow.TestPass {
				passedOnCand[t.Name] = true
			}
		}
	}
	var out []string
	for _, name := range order {
		if passedOnBase[name] && !passedOnCand[name] {
			out = append(out, name)
		}
	}
	return out
}

// profileError is a kernel that did not come up under a lab profile.
type profileError struct {
	profile, side string
	err           error
}

func (e *profileError) Error() string {
	if e.profile == flow.ProfileLossy {
		return "over the lossy link: " + e.err.Error()
	}
	return "under the " + e.profile + " profile: " + e.err.Error()
}
func (e *profileError) Unwrap() error { return e.err }

// lossyFailed ends a test whose kernel did not come up over the lossy
// link: the candidate's is BOOT_FAILED, the base's leaves the test
// failed, as on the default link.
func (b *Bot) lossyFailed(ctx context.Context, tx *sql.Tx, t store.Test, err error) error {
	var le *profileError
	if errors.As(err, &le) && le.side == "base" {
		t.State, t.Summary = store.StateFailed, "base kernel failed in the lab "+err.Error()
		return b.st.UpdateTest(ctx, tx, t)
	}
	t.Detail = detailOf(err)
	return finishWithVerdictTx(ctx, b, tx, t, flow.BootFailed, err.Error())
}

// firstCorrupt is the first sample's account of data that did not
// survive the transfer ("" when all did).
func firstCorrupt(samples []flow.Sample) string {
	for _, s := range samples {
		if s.Corrupt != "" {
			return s.Corrupt
		}
	}
	return ""
}

func crashed(samples []flow.Sample) bool {
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
		return flow.MarkInfra(err)
	}
	if !ok {
		tr.Logf("lab pair %s is busy; waiting", pair)
		return errSnoozed
	}
	tr.release()
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
					cancel(&flow.InfraError{Err: fmt.Errorf("lease on %s lost", pair)})
					return
				}
			}
		}
	}()
	err = f(ctx)
	if cause := context.Cause(ctx); err != nil && cause != nil && flow.IsInfra(cause) {
		return cause
	}
	return err
}
