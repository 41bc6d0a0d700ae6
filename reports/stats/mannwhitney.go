// Package stats compares base and candidate runs of a kernel: a rank
// test for "did it change", a bootstrap interval for "by how much", a
// warm-up rule, and the adaptive decision that asks for more runs while
// the answer is still open.
package stats

import (
	"math"
	"slices"
	"sort"
)

// ExactLimit is the largest pooled sample size (m+n) for which
// MannWhitney enumerates the exact permutation distribution; above it the
// normal approximation with tie and continuity corrections is within a
// few percent of the exact p-value and the enumeration gets slow.
const ExactLimit = 50

// RankTest is the outcome of a two-sided Mann-Whitney U test.
type RankTest struct {
	// U counts the (x, y) pairs with x > y, ties counting one half.
	U float64
	// P is the two-sided p-value.
	P float64
	// Exact says whether P comes from the exact permutation distribution
	// (ties included) rather than the normal approximation.
	Exact bool
}

// MannWhitney tests whether x and y come from the same distribution
// against a shift in either direction. Ties get midranks; the exact
// distribution is the one of the rank sum conditional on those midranks,
// so ties are handled exactly too, unlike the classic tables.
func MannWhitney(x, y []float64) RankTest {
	m, n := len(x), len(y)
	if m == 0 || n == 0 {
		return RankTest{P: 1, Exact: true}
	}
	ranks2, tieTerm := doubledMidranks(x, y)
	var w2 int // doubled rank sum of x
	for _, r := range ranks2[:m] {
		w2 += r
	}
	u := float64(w2)/2 - float64(m*(m+1))/2
	if m+n <= ExactLimit {
		return RankTest{U: u, P: exactP(ranks2, m, w2), Exact: true}
	}
	return RankTest{U: u, P: normalP(u, m, n, tieTerm)}
}

// doubledMidranks ranks x followed by y together and returns twice each
// midrank (an integer) in input order, plus sum(t^3 - t) over tie groups.
func doubledMidranks(x, y []float64) ([]int, float64) {
	N := len(x) + len(y)
	type item struct {
		v   float64
		idx int
	}
	all := make([]item, 0, N)
	for i, v := range x {
		all = append(all, item{v, i})
	}
	for i, v := range y {
		all = append(all, item{v, len(x) + i})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	ranks2 := make([]int, N)
	var tieTerm float64
	for i := 0; i < N; {
		j := i
		for j < N && all[j].v == all[i].v {
			j++
		}
		// positions i..j-1 have ranks i+1..j; their mean doubled is i+1+j.
		for k := i; k < j; k++ {
			ranks2[all[k].idx] = i + 1 + j
		}
		t := float64(j - i)
		tieTerm += t*t*t - t
		i = j
	}
	return ranks2, tieTerm
}

// exactP counts, over all C(N, m) ways to give m of the pooled doubled
// ranks to x, those whose rank sum is at least as far from its mean as
// the observed one. Counts are float64: C(50, 25) < 2^53.
func exactP(ranks2 []int, m, w2 int) float64 {
	N := len(ranks2)
	maxSum := 0
	sorted := slices.Clone(ranks2)
	slices.Sort(sorted)
	for _, r := range sorted[N-m:] {
		maxSum += r
	}
	// ways[j][s]: subsets of size j of the ranks seen so far with sum s.
	ways := make([][]float64, m+1)
	for j := range ways {
		ways[j] = make([]float64, maxSum+1)
	}
	ways[0][0] = 1
	for i, r := range ranks2 {
		for j := min(i+1, m); j >= 1; j-- {
			prev, cur := ways[j-1], ways[j]
			for s := maxSum; s >= r; s-- {
				if prev[s-r] != 0 {
					cur[s] += prev[s-r]
				}
			}
		}
	}
	mean2 := m * (N + 1) // the mean doubled rank sum, an integer
	dev := abs(w2 - mean2)
	var tail, total float64
	for s, c := range ways[m] {
		total += c
		if abs(s-mean2) >= dev {
			tail += c
		}
	}
	return math.Min(1, tail/total)
}

// normalP is the large-sample two-sided p-value with the tie correction
// of the variance and a continuity correction of one half.
func normalP(u float64, m, n int, tieTerm float64) float64 {
	N := float64(m + n)
	mu := float64(m*n) / 2
	v := float64(m*n) / 12 * ((N + 1) - tieTerm/(N*(N-1)))
	if v <= 0 {
		return 1 // every value tied: no evidence of any shift
	}
	z := (math.Abs(u-mu) - 0.5) / math.Sqrt(v)
	if z <= 0 {
		return 1
	}
	return math.Erfc(z / math.Sqrt2)
}

func abs(a int) int {
	if a < 0 {
		return -a
	}
	return a
}
