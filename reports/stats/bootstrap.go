package stats

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
)

// Interval is a point estimate of the candidate/base median ratio with a
// confidence interval around it.
type Interval struct {
	Ratio, Lo, Hi float64
}

// MarshalJSON writes a NaN bound (an empty side) as null: JSON has no NaN,
// and a stored decision must keep every interval.
func (iv Interval) MarshalJSON() ([]byte, error) {
	f := func(x float64) *float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return &x
	}
	return json.Marshal(struct{ Ratio, Lo, Hi *float64 }{f(iv.Ratio), f(iv.Lo), f(iv.Hi)})
}

// UnmarshalJSON reads what MarshalJSON wrote, null as NaN.
func (iv *Interval) UnmarshalJSON(b []byte) error {
	var v struct{ Ratio, Lo, Hi *float64 }
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	f := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	iv.Ratio, iv.Lo, iv.Hi = f(v.Ratio), f(v.Lo), f(v.Hi)
	return nil
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
	// A resample's median only needs how often each observation was
	// drawn: counting and one walk in sorted order is O(n) per resample,
	// where sorting the resample would be O(n log n). The draws and the
	// medians are exactly those of the plain method.
	ob, oc := argsort(base), argsort(cand)
	nb, nc := make([]int, len(base)), make([]int, len(cand))
	ratios := make([]float64, resamples)
	for i := range ratios {
		clear(nb)
		clear(nc)
		for range base {
			nb[rng.IntN(len(base))]++
		}
		for range cand {
			nc[rng.IntN(len(cand))]++
		}
		ratios[i] = countedMedian(cand, oc, nc) / countedMedian(base, ob, nb)
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

// argsort returns the indices of v in ascending order of value.
func argsort(v []float64) []int {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case v[a] < v[b]:
			return -1
		case v[a] > v[b]:
			return 1
		}
		return 0
	})
	return idx
}

// countedMedian is the median of the multiset holding v[i] counts[i]
// times, walking v in the order given by order.
func countedMedian(v []float64, order, counts []int) float64 {
	n := 0
	for _, c := range counts {
		n += c
	}
	lo, hi := (n-1)/2, n/2 // the middle positions (equal when n is odd)
	var a float64
	seen := 0
	for _, i := range order {
		c := counts[i]
		if c == 0 {
			continue
		}
		if seen <= lo && lo < seen+c {
			a = v[i]
		}
		if seen <= hi && hi < seen+c {
			return (a + v[i]) / 2
		}
		seen += c
	}
	return math.NaN()
}
