package stats

import (
	"fmt"
	"math/rand/v2"
)

// Policy says how sure a verdict must be and how many runs it may cost.
type Policy struct {
	// MinEffect is the smallest relative change that matters (0.05).
	MinEffect float64
	// Alpha is the false alarm rate allowed for one whole comparison:
	// it is split evenly (Bonferroni) over the metrics and over the
	// looks the run schedule allows, so repeated looks at growing
	// samples and several metrics cannot add up to more than Alpha.
	Alpha float64
	// Runs is the number of runs per kernel before the first look,
	// RunsStep how many more each further look adds, MaxRuns the budget.
	Runs, RunsStep, MaxRuns int
	// Resamples is the number of bootstrap resamples per interval.
	Resamples int
}

// Validate reports the first setting that cannot work.
func (p Policy) Validate() error {
	switch {
	case p.MinEffect <= 0 || p.MinEffect >= 1:
		return fmt.Errorf("min effect must be in (0, 1), got %v", p.MinEffect)
	case p.Alpha <= 0 || p.Alpha >= 0.5:
		return fmt.Errorf("alpha must be in (0, 0.5), got %v", p.Alpha)
	case p.Runs < 3:
		return fmt.Errorf("runs must be at least 3, got %d", p.Runs)
	case p.RunsStep < 1:
		return fmt.Errorf("runs step must be at least 1, got %d", p.RunsStep)
	case p.MaxRuns < p.Runs:
		return fmt.Errorf("max runs %d is below runs %d", p.MaxRuns, p.Runs)
	case p.Resamples < 100:
		return fmt.Errorf("resamples must be at least 100, got %d", p.Resamples)
	}
	return nil
}

// Looks is how many times the schedule compares: at Runs, then every
// RunsStep more, and at MaxRuns.
func (p Policy) Looks() int {
	return 1 + (p.MaxRuns-p.Runs+p.RunsStep-1)/p.RunsStep
}

// TestAlpha is the level each single rank test is held to.
func (p Policy) TestAlpha(metrics int) float64 {
	return p.Alpha / float64(max(metrics, 1)*p.Looks())
}

// Metric is one measured quantity with its raw samples: per run, per
// iteration within the run.
type Metric struct {
	Name, Unit     string
	HigherIsBetter bool
	Base, Cand     [][]float64
}

// Change is what a comparison concluded about one metric.
type Change int

const (
	// Open: the data cannot yet tell; more runs may.
	Open Change = iota
	// Same: the interval rules out a loss as large as MinEffect (what a
	// PASS promises); a gain that is not significant is still Same.
	Same
	// Worse: significant and possibly at least MinEffect in the bad direction.
	Worse
	// Better: significant and possibly at least MinEffect in the good direction.
	Better
)

func (c Change) String() string {
	return [...]string{"open", "same", "worse", "better"}[c]
}

// Comparison is the full evidence for one metric.
type Comparison struct {
	Name, Unit     string
	HigherIsBetter bool
	// Base and Cand are the per-run values compared (warm-up removed).
	Base, Cand []float64
	Warmup     bool
	Test       RankTest
	// TestAlpha is the level Test.P was held to; Level the confidence
	// of CI.
	TestAlpha, Level float64
	CI               Interval
	Change           Change
}

// Decision is either final or asks for More runs of each kernel.
type Decision struct {
	Comparisons []Comparison
	// More > 0 asks the lab for that many more runs per kernel, then a
	// new Decide over all runs so far.
	More int
	// Runs is the number of runs per kernel that was compared.
	Runs int
}

// Final reports whether no more runs are wanted.
func (d Decision) Final() bool { return d.More == 0 }

// Decide compares candidate against base on every metric and says
// whether the evidence suffices. A clear regression on any metric ends
// the comparison at once; otherwise every metric must be settled (same
// or better) or the budget spent. The rng draws the bootstrap resamples.
func Decide(rng *rand.Rand, p Policy, metrics []Metric) Decision {
	runs := -1
	for _, m := range metrics {
		n := min(len(m.Base), len(m.Cand))
		if runs < 0 || n < runs {
			runs = n
		}
	}
	if runs < 0 {
		runs = 0
	}
	d := Decision{Runs: runs}
	if runs < p.Runs {
		d.More = p.Runs - runs
		return d
	}
	// Compare only at the points of the schedule: a look in between
	// (the lab delivered fewer or more runs than asked) would spend alpha
	// the Bonferroni split did not budget for.
	if runs < p.MaxRuns && (runs-p.Runs)%p.RunsStep != 0 {
		d.More = p.nextLook(runs) - runs
		return d
	}
	alpha := p.TestAlpha(len(metrics))
	level := 1 - p.Alpha
	worse, open := false, false
	for _, m := range metrics {
		c := compare(rng, p, m, alpha, level)
		d.Comparisons = append(d.Comparisons, c)
		switch c.Change {
		case Worse:
			worse = true
		case Open:
			open = true
		}
	}
	if !worse && open && runs < p.MaxRuns {
		d.More = p.nextLook(runs) - runs
	}
	return d
}

// nextLook is the first point of the schedule after runs.
func (p Policy) nextLook(runs int) int {
	next := p.Runs + ((runs-p.Runs)/p.RunsStep+1)*p.RunsStep
	return min(next, p.MaxRuns)
}

func compare(rng *rand.Rand, p Policy, m Metric, alpha, level float64) Comparison {
	warm := HasWarmup(m.HigherIsBetter, m.Base, m.Cand)
	c := Comparison{
		Name: m.Name, Unit: m.Unit, HigherIsBetter: m.HigherIsBetter,
		Base: RunMeans(m.Base, warm), Cand: RunMeans(m.Cand, warm),
		Warmup: warm, TestAlpha: alpha, Level: level,
	}
	c.Test = MannWhitney(c.Base, c.Cand)
	c.CI = MedianRatioCI(rng, c.Base, c.Cand, level, p.Resamples)
	c.Change = classify(c, p.MinEffect)
	return c
}

// classify turns the evidence into a Change. In "goodness" terms (the
// relative change, sign flipped for lower-is-better metrics):
//   - Worse: significant, estimate bad, and the interval reaches past
//     -MinEffect: a change of the size we care about is plausible.
//   - Better: the mirror image.
//   - Same: the interval's bad end lies short of -MinEffect: a loss of
//     the size we care about is ruled out (a significant but smaller
//     change is also Same: it is real but does not matter). Only the bad
//     end counts: a PASS promises "no regression", and asking the good
//     end to be tight too would cost runs and tell nobody anything.
//   - Open: anything else.
//
// Worse and Better also ask the estimate itself to reach half of
// MinEffect, not only the interval's far end: a machine whose load drifts
// between base and candidate boots makes small shifts significant (a
// comment-only change was once called +2.9 %, p=0.002, on a busy host),
// and a change too small to matter is no news for a maintainer.
func classify(c Comparison, minEffect float64) Change {
	g, lo, hi := c.CI.Ratio-1, c.CI.Lo-1, c.CI.Hi-1
	if !c.HigherIsBetter {
		g, lo, hi = -g, -hi, -lo
	}
	sig := c.Test.P < c.TestAlpha
	floor := minEffect / 2
	switch {
	case sig && g <= -floor && lo <= -minEffect:
		return Worse
	case sig && g >= floor && hi >= minEffect:
		return Better
	case lo > -minEffect:
		return Same
	}
	return Open
}

// DefaultPolicy is what config.toml ships: 5 % at alpha 0.01, looks every
// 5 runs per kernel up to 30, 2000 bootstrap resamples. A short first look
// answers most harmless series after one lab round; BenchmarkVerdictPolicy
// proves the error rates on the lab's measured noise.
func DefaultPolicy() Policy {
	return Policy{MinEffect: 0.05, Alpha: 0.01, Runs: 5, RunsStep: 5, MaxRuns: 30, Resamples: 2000}
}
