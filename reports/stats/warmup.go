package stats

// Warm-up rule. A run boots a kernel and repeats the transfer a few
// times; the first repetition can pay for cold caches, connection setup
// and page-cache population. We drop it only where the data show it:
// among all runs of both kernels that have at least MinIterations
// iterations, the first iteration must be the worst one of its run in at
// least WarmupShare of them, and there must be at least MinWarmupRuns
// such runs. Without a warm-up effect the first of k iterations is the
// worst with chance 1/k, so the rule rarely fires by accident (about 0.5 %
// for 6 runs of 4 iterations). The rule is applied to base and candidate
// alike, so it cannot create a difference between them.
const (
	MinIterations = 3
	MinWarmupRuns = 3
	WarmupShare   = 0.8
)

// HasWarmup reports whether the first iteration of each run is a warm-up
// by the rule above. higherIsBetter says which end is "worst".
func HasWarmup(higherIsBetter bool, runs ...[][]float64) bool {
	eligible, firstWorst := 0, 0
	for _, set := range runs {
		for _, it := range set {
			if len(it) < MinIterations {
				continue
			}
			eligible++
			worst := true
			for _, v := range it[1:] {
				if (higherIsBetter && v <= it[0]) || (!higherIsBetter && v >= it[0]) {
					worst = false
					break
				}
			}
			if worst {
				firstWorst++
			}
		}
	}
	return eligible >= MinWarmupRuns && float64(firstWorst) >= WarmupShare*float64(eligible)
}

// RunMeans reduces each run to the mean of its iterations, skipping the
// first when dropFirst is set and the run has more than one.
func RunMeans(runs [][]float64, dropFirst bool) []float64 {
	out := make([]float64, 0, len(runs))
	for _, it := range runs {
		if dropFirst && len(it) > 1 {
			it = it[1:]
		}
		if len(it) == 0 {
			continue
		}
		var s float64
		for _, v := range it {
			s += v
		}
		out = append(out, s/float64(len(it)))
	}
	return out
}
