package queuesim

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC)

func at(min ...int) []time.Time {
	var out []time.Time
	for _, m := range min {
		out = append(out, t0.Add(time.Duration(m)*time.Minute))
	}
	return out
}

// Postings far apart never wait: the reply takes the build and the lab.
func TestNoQueueIsServiceTime(t *testing.T) {
	m := Model{Arrivals: at(0, 60, 120), Build: []time.Duration{time.Minute}, Lab: []time.Duration{9 * time.Minute}, Pairs: 1}
	r, err := m.Run(rand.New(rand.NewPCG(1, 2)), 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.P50 != 10*time.Minute || r.Max != 10*time.Minute || r.Series != 3 {
		t.Fatalf("%+v", r)
	}
}

// Three postings at once on one pair: the third waits for two; a second
// pair halves the queue.
func TestBurstQueuesInPostingOrder(t *testing.T) {
	m := Model{Arrivals: at(2, 0, 1), Lab: []time.Duration{10 * time.Minute}, Pairs: 1}
	r, _ := m.Run(rand.New(rand.NewPCG(1, 2)), 1)
	// Posted at 0, 1, 2; done at 10, 20, 30: waits 10, 19, 28.
	if r.P50 != 19*time.Minute || r.Max != 28*time.Minute {
		t.Fatalf("one pair: %+v", r)
	}
	m.Pairs = 2
	r, _ = m.Run(rand.New(rand.NewPCG(1, 2)), 1)
	// Done at 10, 11, 20: waits 10, 10, 18.
	if r.P50 != 10*time.Minute || r.Max != 18*time.Minute {
		t.Fatalf("two pairs: %+v", r)
	}
	if r.BusiestDayPostings != 3 {
		t.Fatalf("busiest day %d postings, want 3", r.BusiestDayPostings)
	}
}

// The poll delay is within one interval, drawn per posting.
func TestPollAddsUpToOneInterval(t *testing.T) {
	m := Model{Arrivals: at(0, 100, 200, 300, 400, 500), Lab: []time.Duration{time.Minute}, Poll: 2 * time.Minute, Pairs: 1}
	r, _ := m.Run(rand.New(rand.NewPCG(3, 4)), 50)
	if r.P50 <= time.Minute || r.Max >= 3*time.Minute {
		t.Fatalf("%+v", r)
	}
}

func TestBadModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, m := range []Model{
		{Lab: []time.Duration{time.Minute}, Pairs: 1},
		{Arrivals: at(0), Pairs: 1},
		{Arrivals: at(0), Lab: []time.Duration{time.Minute}},
	} {
		if _, err := m.Run(rng, 1); err == nil {
			t.Errorf("%+v: no error", m)
		}
	}
}

// A series that needs a cold base no longer holds the ones behind it:
// the base lane builds only while the machine has nothing else to do,
// so two quick series posted a minute apart behind it are answered in a
// minute each (p50), where one lane made them wait for the 30-minute
// build; the series that needed it waits for it and its own minute
// either way.
func TestColdBaseIsOvertaken(t *testing.T) {
	m := Model{Arrivals: at(0, 1, 2), Build: []time.Duration{time.Minute}, Lab: []time.Duration{0},
		ColdBase: []time.Duration{30 * time.Minute}, Pairs: 1}
	r, err := m.Run(rand.New(rand.NewPCG(1, 2)), 1)
	// The base 0-1 and 3-32 (stopped for the two others, 1-2 and 2-3),
	// its series 32-33: waits 1, 1 and 33 min.
	if err != nil || r.P50 != time.Minute || r.Max != 33*time.Minute {
		t.Fatalf("base lane: %+v %v", r, err)
	}
	if r.Utilization <= 0.99*33/2 || r.Utilization > 33.0/2 {
		t.Errorf("utilization %v: the machine was busy 33 min of the 2 between postings, the stopped build counted once", r.Utilization)
	}
	m.OneLane = true
	r, _ = m.Run(rand.New(rand.NewPCG(1, 2)), 1)
	// Done at 31, 32, 33: waits 31, 31, 31 min.
	if r.P50 != 31*time.Minute || r.Max != 31*time.Minute {
		t.Fatalf("one lane: %+v", r)
	}
}

// The first series posted after each BaseEvery needs a cold base (its
// base branch moved); the others find it built.
func TestBaseMovesEveryPeriod(t *testing.T) {
	m := Model{Arrivals: at(0, 30, 90), Build: []time.Duration{time.Minute}, Lab: []time.Duration{0},
		ColdBase: []time.Duration{10 * time.Minute}, BaseEvery: time.Hour, Pairs: 1}
	r, _ := m.Run(rand.New(rand.NewPCG(1, 2)), 1)
	// Waits 11, 1 and 11 min: the posting at 90 min is past the hour.
	if r.P50 != 11*time.Minute || r.Max != 11*time.Minute {
		t.Fatalf("%+v", r)
	}
	m.BaseEvery = 0 // only a fresh machine's first base
	if r, _ = m.Run(rand.New(rand.NewPCG(1, 2)), 1); r.P50 != time.Minute || r.Max != 11*time.Minute {
		t.Fatalf("one cold base: %+v", r)
	}
}
