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
