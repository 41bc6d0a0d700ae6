package stats

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Interval is a point estimate of the candidate/base median ratio with a
// confidence interval around it.
type Interval struct {
	Ratio, Lo, Hi float64
}

// Median of a sample; NaN when empty.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return medianSorted(s)
}

func medianSorted(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MedianRatioCI estimates median(cand)/median(base) with a percentile
// bootstrap interval at the given confidence level: both samples are
// resampled independently, which matches runs interleaved on one pair
// (the run order carries no pairing worth keeping). The generator is
// passed in so that a seed reproduces a verdict.
func MedianRatioCI(rng *rand.Rand, base, cand []float64, level float64, resamples int) Interval {
	est := Median(cand) / Median(base)
	if len(base) == 0 || len(cand) == 0 || resamples <= 0 {
		return Interval{est, math.NaN(), math.NaN()}
	}
	ratios := make([]float64, resamples)
	bs := make([]float64, len(base))
	cs := make([]float64, len(cand))
	for i := range ratios {
		for j := range bs {
			bs[j] = base[rng.IntN(len(base))]
		}
		for j := range cs {
			cs[j] = cand[rng.IntN(len(cand))]
		}
		slices.Sort(bs)
		slices.Sort(cs)
		ratios[i] = medianSorted(cs) / medianSorted(bs)
	}
	slices.Sort(ratios)
	tail := (1 - level) / 2
	return Interval{Ratio: est, Lo: quantileSorted(ratios, tail), Hi: quantileSorted(ratios, 1-tail)}
}

// quantileSorted interpolates linearly between order statistics (type 7,
// the default of R and numpy).
func quantileSorted(s []float64, q float64) float64 {
	h := q * float64(len(s)-1)
	lo := math.Floor(h)
	i := int(lo)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (h-lo)*(s[i+1]-s[i])
}

// MeanStd is the sample mean and the sample standard deviation (n-1).
func MeanStd(v []float64) (mean, std float64) {
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) < 2 {
		return mean, 0
	}
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)-1))
}
