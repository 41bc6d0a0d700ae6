// Package queuesim replays a year of real postings through a model of
// the bot's queue, to say how long an author waits for a reply: the
// posting is seen at the next poll of its list, waits for a free lab
// machine (the waiting series take it in posting order), and is then
// built and measured, each taking a time drawn from what was measured
// on the lab machine. A machine builds or measures one series at a time
// (the heavy lock); each further pair is another such machine. A series
// whose base kernel nothing has built yet waits for that cold build,
// which the base lane runs only while a machine has nothing else to do,
// stopping for any series that is ready: the others overtake it.
package queuesim

import (
	"fmt"
	"math/rand/v2"
	"slices"
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
	// ColdBase, when given, is the cold build of a base kernel nothing
	// has built yet (drawn from): the first series needs one (a fresh
	// machine), and with BaseEvery the first series posted after each
	// further BaseEvery since the first posting (its base branch moved).
	ColdBase  []time.Duration
	BaseEvery time.Duration
	// OneLane builds a series' cold base in its own turn, first come
	// first served, as the bot did before its base lane: every series
	// behind it waits for the build too.
	OneLane bool
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
		w, b := m.replay(rng, arr)
		waits, busy = append(waits, w...), busy+b
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

// job is work for a machine: series i's build and lab, or the cold
// build of its base (base), with what is left of it.
type job struct {
	i    int
	work time.Duration
	base bool
}

// machine is one lab machine: the job it runs and until when.
type machine struct {
	job   *job
	until time.Time
}

// replay is one pass over the sorted arrivals: each series' wait,
// posting to reply, and the machines' busy time.
func (m Model) replay(rng *rand.Rand, arr []time.Time) (waits []time.Duration, busy time.Duration) {
	seen, order := make([]time.Time, len(arr)), make([]int, len(arr))
	for i, a := range arr {
		seen[i], order[i] = a, i
		if m.Poll > 0 {
			seen[i] = a.Add(time.Duration(rng.Int64N(int64(m.Poll))))
		}
	}
	sort.SliceStable(order, func(x, y int) bool { return seen[order[x]].Before(seen[order[y]]) })
	cold := m.coldBases(arr)
	service := make([]time.Duration, len(arr))
	machines := make([]machine, m.Pairs)
	var ready, bases []*job // ready: in posting order; bases: first come first served
	enqueue := func(j *job) {
		k, _ := slices.BinarySearchFunc(ready, j.i, func(x *job, i int) int { return x.i - i })
		ready = slices.Insert(ready, k, j)
	}
	for next := 0; len(waits) < len(arr); {
		now := time.Time{}
		if next < len(order) {
			now = seen[order[next]]
		}
		for _, mc := range machines {
			if mc.job != nil && (now.IsZero() || mc.until.Before(now)) {
				now = mc.until
			}
		}
		for k := range machines {
			mc := &machines[k]
			switch {
			case mc.job == nil || mc.until.After(now):
			case mc.job.base:
				enqueue(&job{i: mc.job.i, work: service[mc.job.i]})
				mc.job = nil
			default:
				waits = append(waits, now.Sub(arr[mc.job.i]))
				mc.job = nil
			}
		}
		for ; next < len(order) && !seen[order[next]].After(now); next++ {
			i := order[next]
			service[i] = draw(rng, m.Lab)
			if len(m.Build) > 0 {
				service[i] += draw(rng, m.Build)
			}
			switch {
			case cold[i] && m.OneLane:
				enqueue(&job{i: i, work: service[i] + draw(rng, m.ColdBase)})
			case cold[i]:
				bases = append(bases, &job{i: i, work: draw(rng, m.ColdBase), base: true})
			default:
				enqueue(&job{i: i, work: service[i]})
			}
		}
		busy += m.dispatch(machines, now, &ready, &bases)
	}
	return waits, busy
}

// dispatch gives the idle machines work at now, a ready series before
// any base build: a base build stops (what is left of it waits first in
// its lane) for a ready series no idle machine takes. It returns the
// busy time this adds.
func (m Model) dispatch(machines []machine, now time.Time, ready, bases *[]*job) (busy time.Duration) {
	idle := 0
	for _, mc := range machines {
		if mc.job == nil {
			idle++
		}
	}
	for k := range machines {
		if mc := &machines[k]; len(*ready) > idle && mc.job != nil && mc.job.base {
			left := mc.until.Sub(now)
			busy -= left
			*bases = slices.Insert(*bases, 0, &job{i: mc.job.i, work: left, base: true})
			mc.job, idle = nil, idle+1
		}
	}
	for k := range machines {
		mc := &machines[k]
		if mc.job != nil {
			continue
		}
		switch {
		case len(*ready) > 0:
			mc.job, *ready = (*ready)[0], (*ready)[1:]
		case len(*bases) > 0:
			mc.job, *bases = (*bases)[0], (*bases)[1:]
		default:
			continue
		}
		mc.until = now.Add(mc.job.work)
		busy += mc.job.work
	}
	return busy
}

// coldBases says which of the sorted arrivals need a cold base build.
func (m Model) coldBases(arr []time.Time) []bool {
	cold := make([]bool, len(arr))
	if len(m.ColdBase) == 0 {
		return cold
	}
	cold[0] = true
	for i := 1; i < len(arr) && m.BaseEvery > 0; i++ {
		cold[i] = arr[i].Sub(arr[0])/m.BaseEvery > arr[i-1].Sub(arr[0])/m.BaseEvery
	}
	return cold
}

func draw(rng *rand.Rand, d []time.Duration) time.Duration { return d[rng.IntN(len(d))] }

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(q*float64(len(sorted)-1)+0.5)]
}
