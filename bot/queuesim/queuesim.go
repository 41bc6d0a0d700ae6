// Package queuesim replays a year of real postings through a model of
// the bot's queue, to say how long an author waits for a reply: the
// posting is seen at the next poll of its list, waits for a free lab
// pair (pairs are granted in posting order), and is then built and
// measured, each taking a time drawn from what was measured on the lab
// machine. A machine with one pair builds and measures one series at a
// time (the heavy lock); each further pair is another such machine.
package queuesim

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"
)

// Model is what the replay needs.
type Model struct {
	// Arrivals are the postings' times (any order).
	Arrivals []time.Time
	// Poll is the list's poll interval: a posting is seen after a
	// uniform share of it.
	Poll time.Duration
	// Build and Lab are measured stage times, drawn from with
	// replacement for each series: the build of a series on a warm slot,
	// and the lab's time to a verdict (all its rounds).
	Build, Lab []time.Duration
	// Pairs is how many lab pairs (machines) serve the queue.
	Pairs int
}

// Result is a replay's waits, posting to reply.
type Result struct {
	Pairs              int
	Series             int
	P50, P95, Max      time.Duration
	Utilization        float64 // the pairs' busy share of the replayed span
	BusiestDay         time.Time
	BusiestDayPostings int
}

// Run replays the arrivals reps times with fresh draws and returns the
// waits' quantiles over all of them.
func (m Model) Run(rng *rand.Rand, reps int) (Result, error) {
	switch {
	case len(m.Arrivals) == 0:
		return Result{}, fmt.Errorf("no arrivals")
	case len(m.Lab) == 0:
		return Result{}, fmt.Errorf("no measured lab times")
	case m.Pairs < 1:
		return Result{}, fmt.Errorf("pairs %d: want at least 1", m.Pairs)
	case reps < 1:
		reps = 1
	}
	arr := append([]time.Time(nil), m.Arrivals...)
	sort.Slice(arr, func(i, j int) bool { return arr[i].Before(arr[j]) })
	span := arr[len(arr)-1].Sub(arr[0])
	var waits []time.Duration
	var busy time.Duration
	for range reps {
		free := make([]time.Time, m.Pairs) // when each pair is next free
		// Seen at the next poll; granted in posting order.
		seen := make([]time.Time, len(arr))
		for i, a := range arr {
			seen[i] = a
			if m.Poll > 0 {
				seen[i] = a.Add(time.Duration(rng.Int64N(int64(m.Poll))))
			}
		}
		for i, a := range arr {
			k := 0
			for j := range free {
				if free[j].Before(free[k]) {
					k = j
				}
			}
			start := seen[i]
			if free[k].After(start) {
				start = free[k]
			}
			service := draw(rng, m.Lab)
			if len(m.Build) > 0 {
				service += draw(rng, m.Build)
			}
			free[k] = start.Add(service)
			busy += service
			waits = append(waits, free[k].Sub(a))
		}
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	r := Result{Pairs: m.Pairs, Series: len(arr), P50: quantile(waits, 0.5), P95: quantile(waits, 0.95), Max: waits[len(waits)-1]}
	if span > 0 {
		r.Utilization = busy.Seconds() / float64(reps) / (span.Seconds() * float64(m.Pairs))
	}
	days := map[time.Time]int{}
	for _, a := range arr {
		d := a.UTC().Truncate(24 * time.Hour)
		days[d]++
		if days[d] > r.BusiestDayPostings || (days[d] == r.BusiestDayPostings && d.Before(r.BusiestDay)) {
			r.BusiestDay, r.BusiestDayPostings = d, days[d]
		}
	}
	return r, nil
}

func draw(rng *rand.Rand, d []time.Duration) time.Duration { return d[rng.IntN(len(d))] }

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(q*float64(len(sorted)-1)+0.5)]
}
