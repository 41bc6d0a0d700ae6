package bot

import (
	"context"
	"fmt"
	"io"

	"github.com/rdmabot/rdmabot/flow"
)

// RunRound is the one round of default-test boots: n boots each of base
// and candidate, alternating base first (no base boots when base.Dir is
// empty), so that a drift of the machine during the round hits both
// sides alike, until a boot crashes: a crash is the answer already, and
// more boots would only crash again. A crash or stall of the candidate
// alone in one boot is booted once more on both sides before the round
// ends (needsConfirming), past n when it came in the round's last boot:
// without a second boot it is never evidence to mail
// (reports.Crash.Confirmed). The lab job, mainline heads, `lab aa`, the
// canary and the power bench all measure through it. An error is the
// lab's (Infra), or a *RoundError naming the side whose kernel did not
// come up; the samples are those booted before it.
func RunRound(ctx context.Context, l Lab, pair string, base, cand flow.Boot, n int, trace io.Writer) (bs, cs []flow.Sample, err error) {
	for i := 0; i < n; i++ {
		before := len(cs)
		for _, side := range []struct {
			name string
			boot flow.Boot
			out  *[]flow.Sample
		}{{"base", base, &bs}, {"candidate", cand, &cs}} {
			if side.boot.Dir == "" {
				continue
			}
			fmt.Fprintf(trace, "%s %d/%d\n", side.name, i+1, n)
			s, err := l.Run(ctx, pair, side.boot, 1, trace)
			if err != nil {
				if flow.IsInfra(err) {
					return bs, cs, err
				}
				return bs, cs, &RoundError{Side: side.name, Err: err}
			}
			*side.out = append(*side.out, s...)
		}
		if !crashed(bs) && !crashed(cs) {
			continue
		}
		if !needsConfirming(bs, cs) {
			break
		}
		// The one failure came in this boot: one more of each side,
		// whatever n says. A clean boot after it lets the round go on.
		if crashed(cs[before:]) {
			fmt.Fprintf(trace, "the candidate failed in one boot (%s): booting both once more to confirm it\n", firstCrash(cs[before:]))
			if i+1 == n {
				n++
			}
		}
	}
	return bs, cs, nil
}

// needsConfirming says the round's only failure is one boot of the
// candidate that crashed (the kernel reported it: oops, WARN, KASAN, hung
// task) or stalled (the lab saw it, flow.Sample.Stall): a starved or
// unlucky emulated guest fails too, so one more boot confirms it or not
// before it is mailed (reports.Crash.Confirmed). A crashing base is the
// lab's or the base's problem, not the series': nothing to confirm.
func needsConfirming(bs, cs []flow.Sample) bool {
	if crashed(bs) {
		return false
	}
	failed := 0
	for _, s := range cs {
		if s.Crash != "" {
			failed++
		}
	}
	return failed == 1
}

// RoundError is a kernel of a round that did not come up: the base's is
// the test's failure, the candidate's its BOOT_FAILED.
type RoundError struct {
	Side string // "base" or "candidate"
	Err  error
}

func (e *RoundError) Error() string { return e.Err.Error() }
func (e *RoundError) Unwrap() error { return e.Err }

// RoundPolicy is the one policy around RunRound, followed by the lab
// and report jobs for a test and by the A/A bench (clients/aa) for each of
// its comparisons, so that what the bench measures is what a series
// gets: the profiles' boots first, whose failing decision is the verdict
// with no default boot (ProfilesDecide); each round's fresh base boots
// joining the cached ones unless the machine drifted (BaseCache); and
// another round while the decision asks for more boots and the rounds
// last (MoreRuns). id is the test's identity (Decider).
type RoundPolicy struct {
	Decide    Decider
	MaxRounds int // bot.max_rounds
}

// ProfilesDecide is the decision on the profiles' boots, and stop says
// it ends the test: a failing one (flow.Outcome.Failing) is the answer
// already, and default boots would only add to it. Without candidate
// boots under a profile there is nothing to decide.
func (p RoundPolicy) ProfilesDecide(ctx context.Context, id string, base, cand []flow.Sample) (d flow.Decision, stop bool, err error) {
	if len(cand) == 0 {
		return flow.Decision{}, false, nil
	}
	if d, err = p.Decide.Decide(ctx, id, base, cand); err != nil {
		return flow.Decision{}, false, flow.MarkInfra(err)
	}
	return d, d.Verdict.Failing(), nil
}

// BaseCache is the base's cache after a round: its fresh boots after the
// cached ones, unless in the first round the cached ones disagree with
// the fresh (drifted: the machine changed since; the cache is replaced).
func (p RoundPolicy) BaseCache(ctx context.Context, id string, cached, fresh []flow.Sample, round int) (cache []flow.Sample, drifted bool, err error) {
	if len(cached) == 0 || len(fresh) == 0 {
		return fresh, false, nil
	}
	if round == 1 {
		if drifted, err = p.drifted(ctx, id, cached, fresh); err != nil || drifted {
			return fresh, drifted, err
		}
	}
	return append(append([]flow.Sample(nil), cached...), fresh...), false, nil
}

// drifted says whether cached base runs and fresh boots of the same base
// kernel differ as a regression or an improvement would: the decision's
// own test, with its effect floor, run on the base against itself.
func (p RoundPolicy) drifted(ctx context.Context, id string, cached, fresh []flow.Sample) (bool, error) {
	if crashed(fresh) {
		return false, nil
	}
	d, err := p.Decide.Decide(ctx, id, cached, fresh)
	if err != nil {
		return false, flow.MarkInfra(err)
	}
	return d.Verdict == flow.Regression || d.Verdict == flow.Improvement, nil
}

// MoreRuns is how many runs of each side another round boots after
// round's decision d: what d asks for while rounds are left, else 0.
func (p RoundPolicy) MoreRuns(d flow.Decision, round int) int {
	if d.NeedMore > 0 && round < p.MaxRounds {
		return d.NeedMore
	}
	return 0
}
