package stats

// The simulation that proves the verdict policy and sizes its budget
// (bench_test.go); the bot itself only calls Decide.

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
)

// SimResult is what a simulation of the whole adaptive procedure found.
type SimResult struct {
	Trials int
	// FalseAlarm is the share of no-change trials that ended with any
	// metric Worse or Better (a mailed verdict that is wrong);
	// FalseAlarmHi its 95 % Wilson upper bound.
	FalseAlarm, FalseAlarmHi float64
	// Power[i] is the share of trials with metric i made Effect worse
	// that ended with metric i Worse; PowerLo the 95 % Wilson lower
	// bound of the smallest.
	Power            []float64
	MinPower         float64
	MinPowerLo       float64
	MeanRunsNull     float64
	InconclusiveNull float64
	// FirstLookPassNull is the share of no-change trials that passed at
	// the first look: how often a harmless series is answered after the
	// first lab round, which sets the usual time to a verdict.
	FirstLookPassNull float64
}

// Simulate runs the adaptive Decide loop on data drawn from the noise
// model: trials with no change (false alarms) and, for each metric,
// trials where only that metric is worse by effect (power). Each trial
// has its own seeded generator, so results do not depend on scheduling.
func Simulate(ctx context.Context, p Policy, model NoiseModel, effect float64, trials int, seed uint64) (SimResult, error) {
	k := len(model.Metrics)
	res := SimResult{Trials: trials, Power: make([]float64, k)}
	// Job j < trials: null; then trials per metric under the effect.
	type outcome struct {
		alarm, inconclusive bool
		hit                 bool
		runs                int
	}
	jobs := trials * (k + 1)
	out := make([]outcome, jobs)
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range next {
				target := j/trials - 1 // -1: null
				rng := rand.New(rand.NewPCG(seed, uint64(j)))
				d := simulateOne(rng, p, model, target, effect)
				o := outcome{runs: d.Runs}
				for i, c := range d.Comparisons {
					switch c.Change {
					case Worse, Better:
						o.alarm = true
					case Open:
						o.inconclusive = true
					}
					if i == target && c.Change == Worse {
						o.hit = true
					}
				}
				out[j] = o
			}
		})
	}
	var err error
feed:
	for j := range jobs {
		select {
		case next <- j:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err != nil {
		return res, err
	}
	var alarms, incon, runs, firstLook int
	for _, o := range out[:trials] {
		if o.alarm {
			alarms++
		}
		if o.inconclusive && !o.alarm {
			incon++
		}
		if !o.alarm && !o.inconclusive && o.runs <= p.Runs {
			firstLook++
		}
		runs += o.runs
	}
	res.FalseAlarm = float64(alarms) / float64(trials)
	_, res.FalseAlarmHi = wilson(alarms, trials)
	res.InconclusiveNull = float64(incon) / float64(trials)
	res.MeanRunsNull = float64(runs) / float64(trials)
	res.FirstLookPassNull = float64(firstLook) / float64(trials)
	res.MinPower = 1
	minHits := trials
	for i := range k {
		hits := 0
		for _, o := range out[(i+1)*trials : (i+2)*trials] {
			if o.hit {
				hits++
			}
		}
		res.Power[i] = float64(hits) / float64(trials)
		if hits <= minHits {
			minHits = hits
			res.MinPower = res.Power[i]
		}
	}
	res.MinPowerLo, _ = wilson(minHits, trials)
	return res, nil
}

// simulateOne plays one comparison: the lab delivers runs as Decide asks.
func simulateOne(rng *rand.Rand, p Policy, model NoiseModel, target int, effect float64) Decision {
	metrics := make([]Metric, len(model.Metrics))
	for i, mn := range model.Metrics {
		metrics[i] = Metric{Name: mn.Name, Unit: mn.Unit, HigherIsBetter: mn.HigherIsBetter}
	}
	// walk is the machine's drift so far, in steps of one boot: base and
	// candidate boots alternate, as the lab's rounds boot them.
	// A model with no drift draws nothing for it: its trials stay the
	// ones proven before drift was modelled.
	walk, drifts := 0.0, false
	for _, mn := range model.Metrics {
		drifts = drifts || mn.Drift > 0
	}
	step := func() float64 {
		if drifts {
			walk += rng.NormFloat64()
		}
		return walk
	}
	for {
		d := Decide(rng, p, metrics)
		if d.Final() {
			return d
		}
		for range d.More {
			wb, wc := step(), step()
			for i, mn := range model.Metrics {
				factor := 1.0
				if i == target {
					if mn.HigherIsBetter {
						factor = 1 - effect
					} else {
						factor = 1 + effect
					}
				}
				metrics[i].Base = append(metrics[i].Base, drawRun(rng, mn, drifted(mn, wb)))
				metrics[i].Cand = append(metrics[i].Cand, drawRun(rng, mn, factor*drifted(mn, wc)))
			}
		}
	}
}

// drifted is the factor a walk of w unit steps makes of metric mn: a
// slower machine lowers what is better higher and raises the rest.
func drifted(mn MetricNoise, w float64) float64 {
	if mn.HigherIsBetter {
		return math.Exp(-mn.Drift * w)
	}
	return math.Exp(mn.Drift * w)
}

func drawRun(rng *rand.Rand, mn MetricNoise, factor float64) []float64 {
	level := mn.Mean * factor * math.Exp(mn.RunSigma*rng.NormFloat64()-mn.RunSigma*mn.RunSigma/2)
	it := make([]float64, max(1, mn.Iterations))
	for i := range it {
		it[i] = level * math.Exp(mn.IterSigma*rng.NormFloat64()-mn.IterSigma*mn.IterSigma/2)
	}
	return it
}

// wilson is the 95 % Wilson score interval of a binomial share.
func wilson(hits, n int) (lo, hi float64) {
	if n == 0 {
		return 0, 1
	}
	const z = 1.959963984540054
	ph := float64(hits) / float64(n)
	nn := float64(n)
	den := 1 + z*z/nn
	c := (ph + z*z/(2*nn)) / den
	h := z * math.Sqrt(ph*(1-ph)/nn+z*z/(4*nn*nn)) / den
	return math.Max(0, c-h), math.Min(1, c+h)
}

// Targets are the figures the policy must reach on the lab's noise.
type Targets struct {
	Effect        float64 // the change to catch (0.05)
	MaxFalseAlarm float64 // 0.01
	MinPower      float64 // 0.95
}

// Meets reports whether a simulation reached the targets (point values).
func (t Targets) Meets(r SimResult) bool {
	return r.FalseAlarm <= t.MaxFalseAlarm && r.MinPower >= t.MinPower
}

// BudgetFor grows the schedule by half at a time, keeping its number of
// looks (so the alpha per test stays put), until the simulated procedure
// meets the targets or MaxRuns would pass limit. It returns the first
// policy that meets them, or the last one tried and false.
func BudgetFor(ctx context.Context, p Policy, model NoiseModel, t Targets, trials int, seed uint64, limit int) (Policy, SimResult, bool, error) {
	for {
		r, err := Simulate(ctx, p, model, t.Effect, trials, seed)
		if err != nil || t.Meets(r) {
			return p, r, err == nil, err
		}
		looks := p.Looks()
		grown := p.MaxRuns + max(p.MaxRuns/2, looks)
		if grown > limit {
			return p, r, false, nil
		}
		// Same number of looks, spread evenly up to the new budget.
		p.RunsStep = (grown + looks - 1) / looks
		p.Runs = max(3, grown-(looks-1)*p.RunsStep)
		p.MaxRuns = p.Runs + (looks-1)*p.RunsStep
	}
}
