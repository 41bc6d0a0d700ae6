package stats

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// Reference values: scipy.stats.mannwhitneyu's documented example
// (males vs females, U=17, exact p=1/9, asymptotic p=0.11134688653314041)
// and closed forms for fully separated samples (p = 2/C(m+n, m)).
func TestMannWhitneyKnownValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		x, y  []float64
		u, p  float64
		exact bool
	}{
		{"scipy docs", []float64{19, 22, 16, 29, 24}, []float64{20, 11, 17, 12}, 17, 1.0 / 9, true},
		{"separated 3v3", []float64{1, 2, 3}, []float64{4, 5, 6}, 0, 2.0 / 20, true},
		{"separated 5v5", []float64{6, 7, 8, 9, 10}, []float64{1, 2, 3, 4, 5}, 25, 2.0 / 252, true},
		{"identical", []float64{1, 2, 3}, []float64{1, 2, 3}, 4.5, 1, true},
		{"all tied", []float64{5, 5, 5}, []float64{5, 5}, 3, 1, true},
		// With ties: 2 of C(4,2)=6 splits give rank sums as extreme as
		// {1.5,1.5} vs {3.5,3.5}.
		{"ties 2v2", []float64{1, 1}, []float64{2, 2}, 0, 2.0 / 6, true},
	} {
		got := MannWhitney(tc.x, tc.y)
		if got.U != tc.u || !near(got.P, tc.p, 1e-12) || got.Exact != tc.exact {
			t.Errorf("%s: got U=%v p=%.15g exact=%v, want U=%v p=%.15g", tc.name, got.U, got.P, got.Exact, tc.u, tc.p)
		}
	}
	ranks, ties := doubledMidranks([]float64{19, 22, 16, 29, 24}, []float64{20, 11, 17, 12})
	var w2 int
	for _, r := range ranks[:5] {
		w2 += r
	}
	if p := normalP(float64(w2)/2-15, 5, 4, ties); !near(p, 0.11134688653314041, 1e-12) {
		t.Errorf("asymptotic p = %.17g, want scipy's 0.11134688653314041", p)
	}
}

// The exact p-value must equal brute-force enumeration of every split of
// the pooled sample, ties included.
func TestMannWhitneyMatchesEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		m, n := 1+rng.IntN(6), 1+rng.IntN(6)
		x, y := make([]float64, m), make([]float64, n)
		for i := range x {
			x[i] = float64(rng.IntN(5)) // few values: many ties
		}
		for i := range y {
			y[i] = float64(rng.IntN(5)) + float64(rng.IntN(2))
		}
		got := MannWhitney(x, y)
		want := enumerateP(x, y)
		if !near(got.P, want, 1e-12) {
			t.Fatalf("trial %d: x=%v y=%v: p=%v, enumeration %v", trial, x, y, got.P, want)
		}
	}
}

// enumerateP is an independent implementation: it computes U (as pair
// counts) for every way to choose which pooled values belong to x.
func enumerateP(x, y []float64) float64 {
	pool := append(append([]float64{}, x...), y...)
	m, N := len(x), len(pool)
	uOf := func(in []bool) float64 {
		var u float64
		for i := range N {
			for j := range N {
				if in[i] && !in[j] {
					switch {
					case pool[i] > pool[j]:
						u++
					case pool[i] == pool[j]:
						u += 0.5
					}
				}
			}
		}
		return u
	}
	mu := float64(m*(N-m)) / 2
	obs := math.Abs(MannWhitney(x, y).U - mu)
	var hit, total float64
	in := make([]bool, N)
	var rec func(i, k int)
	rec = func(i, k int) {
		if k == m {
			total++
			if math.Abs(uOf(in)-mu) >= obs-1e-9 {
				hit++
			}
			return
		}
		if i == N || N-i < m-k {
			return
		}
		in[i] = true
		rec(i+1, k+1)
		in[i] = false
		rec(i+1, k)
	}
	rec(0, 0)
	return hit / total
}

// Above ExactLimit the normal approximation takes over; near the limit
// the two agree closely.
func TestMannWhitneyLargeSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x, y := make([]float64, 25), make([]float64, 25)
	for i := range x {
		x[i] = rng.NormFloat64()
		y[i] = rng.NormFloat64() + 0.6
	}
	exact := MannWhitney(x, y)
	ranks, ties := doubledMidranks(x, y)
	_ = ranks
	approx := normalP(exact.U, 25, 25, ties)
	if !exact.Exact || math.Abs(exact.P-approx) > 0.1*exact.P {
		t.Errorf("exact %v vs normal %v differ by more than 10%%", exact.P, approx)
	}
	big := MannWhitney(append(x, 0), y)
	if big.Exact {
		t.Errorf("51 values: want the normal approximation")
	}
}

func TestMedianRatioCI(t *testing.T) {
	base := []float64{100, 101, 99, 100.5, 99.5, 100.2, 99.8}
	cand := []float64{90, 91, 89, 90.5, 89.5, 90.2, 89.8}
	a := MedianRatioCI(rand.New(rand.NewPCG(7, 7)), base, cand, 0.99, 2000)
	b := MedianRatioCI(rand.New(rand.NewPCG(7, 7)), base, cand, 0.99, 2000)
	if a != b {
		t.Fatalf("same seed, different intervals: %v %v", a, b)
	}
	if !near(a.Ratio, 0.9, 1e-12) {
		t.Errorf("ratio %v, want 0.9 (90/100)", a.Ratio)
	}
	if !(a.Lo <= a.Ratio && a.Ratio <= a.Hi) || a.Lo < 89.0/101 || a.Hi > 91.0/99 {
		t.Errorf("interval %v not around the ratio within the data's range", a)
	}
}

// Coverage: for a true ratio of 1 the 90 % interval should contain 1 in
// roughly 90 % of samples (the percentile bootstrap of a median is a bit
// off at n=15; we accept 80-98 %).
func TestMedianRatioCICoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	in := 0
	const trials = 300
	for range trials {
		b, c := make([]float64, 15), make([]float64, 15)
		for i := range b {
			b[i] = 100 * math.Exp(0.03*rng.NormFloat64())
			c[i] = 100 * math.Exp(0.03*rng.NormFloat64())
		}
		iv := MedianRatioCI(rng, b, c, 0.90, 500)
		if iv.Lo <= 1 && 1 <= iv.Hi {
			in++
		}
	}
	if f := float64(in) / trials; f < 0.80 || f > 0.98 {
		t.Errorf("coverage %.3f, want about 0.90", f)
	}
}

func TestWarmup(t *testing.T) {
	slowFirst := [][]float64{{10, 15, 15.2, 14.9}, {11, 15.1, 14.8, 15}, {9, 14.7, 15, 15.3}}
	if !HasWarmup(true, slowFirst, slowFirst) {
		t.Error("a slow first iteration in every run is a warm-up")
	}
	if HasWarmup(false, slowFirst) {
		t.Error("for a lower-is-better metric a low first value is not a warm-up")
	}
	mixed := [][]float64{{10, 15, 15, 15}, {15, 10, 15.1, 15}, {15, 15.2, 10, 15}, {15, 15, 15.3, 10}}
	if HasWarmup(true, mixed) {
		t.Error("the worst iteration moves around: no warm-up")
	}
	short := [][]float64{{10, 15}, {10, 15}, {10, 15}}
	if HasWarmup(true, short) {
		t.Error("two iterations are too few to tell")
	}
	if got := RunMeans(slowFirst, true); !near(got[0], (15+15.2+14.9)/3, 1e-12) {
		t.Errorf("run means without warm-up: %v", got)
	}
	if got := RunMeans([][]float64{{4}}, true); got[0] != 4 {
		t.Errorf("a one-iteration run keeps its only value: %v", got)
	}
}

func runsOf(rng *rand.Rand, n int, mean, cv float64) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		out[i] = []float64{mean * math.Exp(cv*rng.NormFloat64())}
	}
	return out
}

func TestDecide(t *testing.T) {
	p := Policy{MinEffect: 0.05, Alpha: 0.01, Runs: 10, RunsStep: 10, MaxRuns: 30, Resamples: 1000}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.Looks() != 3 || !near(p.TestAlpha(2), 0.01/6, 1e-15) {
		t.Fatalf("looks %d, test alpha %v", p.Looks(), p.TestAlpha(2))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	mk := func(n int, writeDrop, loopRise float64) []Metric {
		return []Metric{
			{Name: "write", Unit: "MB/s", HigherIsBetter: true, Base: runsOf(rng, n, 16, 0.01), Cand: runsOf(rng, n, 16*(1-writeDrop), 0.01)},
			{Name: "loop", Unit: "s", Base: runsOf(rng, n, 50, 0.01), Cand: runsOf(rng, n, 50*(1+loopRise), 0.01)},
		}
	}
	if d := Decide(rng, p, mk(4, 0, 0)); d.More != 6 || len(d.Comparisons) != 0 {
		t.Errorf("4 runs: want 6 more before any look, got %+v", d)
	}
	d := Decide(rng, p, mk(10, 0, 0))
	if !d.Final() || d.Comparisons[0].Change != Same || d.Comparisons[1].Change != Same {
		t.Errorf("no change at 1%% noise: want final Same, got more=%d %v %v", d.More, d.Comparisons[0].Change, d.Comparisons[1].Change)
	}
	d = Decide(rng, p, mk(10, 0.10, 0))
	if !d.Final() || d.Comparisons[0].Change != Worse {
		t.Errorf("10%% write drop: want Worse, got %v more=%d", d.Comparisons[0].Change, d.More)
	}
	d = Decide(rng, p, mk(10, 0, -0.10))
	if !d.Final() || d.Comparisons[1].Change != Better {
		t.Errorf("loop 10%% faster: want Better, got %v", d.Comparisons[1].Change)
	}
	// A noisy metric cannot settle at 10 runs: ask for the next step.
	noisy := []Metric{{Name: "read", HigherIsBetter: true, Base: runsOf(rng, 10, 15, 0.15), Cand: runsOf(rng, 10, 15, 0.15)}}
	if d := Decide(rng, p, noisy); d.More != 10 || d.Comparisons[0].Change != Open {
		t.Errorf("15%% noise at 10 runs: want 10 more, got more=%d %v", d.More, d.Comparisons[0].Change)
	}
	noisy[0].Base, noisy[0].Cand = runsOf(rng, 13, 15, 0.15), runsOf(rng, 14, 15, 0.15)
	if d := Decide(rng, p, noisy); d.More != 7 || d.Runs != 13 || len(d.Comparisons) != 0 {
		t.Errorf("13 runs: want 7 more to reach 20 without a look, got %d (runs %d, %d comparisons)", d.More, d.Runs, len(d.Comparisons))
	}
	noisy[0].Base, noisy[0].Cand = runsOf(rng, 30, 15, 0.15), runsOf(rng, 30, 15, 0.15)
	if d := Decide(rng, p, noisy); !d.Final() {
		t.Errorf("budget spent: want final, got more=%d", d.More)
	}
}

// The counting bootstrap must give exactly the medians of sorting each
// resample.
func TestCountedMedian(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for range 500 {
		n := 1 + rng.IntN(12)
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(rng.IntN(6)) // ties
		}
		counts := make([]int, n)
		var sample []float64
		for range n {
			i := rng.IntN(n)
			counts[i]++
			sample = append(sample, v[i])
		}
		if got, want := countedMedian(v, argsort(v), counts), Median(sample); got != want {
			t.Fatalf("v=%v counts=%v: %v, want %v", v, counts, got, want)
		}
	}
}

func BenchmarkMedianRatioCI30(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	base, cand := make([]float64, 30), make([]float64, 30)
	for i := range base {
		base[i], cand[i] = rng.NormFloat64()+10, rng.NormFloat64()+10
	}
	for b.Loop() {
		MedianRatioCI(rng, base, cand, 0.99, 2000)
	}
}

func TestLoadNoiseDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The shape of lab.Result, trimmed: the figures are the lab's
	// (lab.Result.Figures), 2 x 8 MiB over write_s + read_s per iteration.
	for i, v := range []float64{16.0, 16.5, 17.0, 16.2} {
		c1, c2 := 16/(8/v+2.2), 16/(8/(v+0.2)+2.1)
		write(fmt.Sprintf("s-quiet-%02d.json", i), fmt.Sprintf(`{"pair":"qemu","mode":"qemu-tcg-icount2","passed":true,"loop_s":%v,"test":{"size_mib":8},
			"iterations":[{"n":1,"write_mbps":%v,"read_mbps":14.5,"write_s":%v,"read_s":2.2,"cmp":"ok"},{"n":2,"write_mbps":%v,"read_mbps":14.9,"write_s":%v,"read_s":2.1,"cmp":"ok"}],
			"figures":{"per_iteration":{"copy_MBps":[%v,%v],"read_MBps":[14.5,14.9]},"means":{"copy_MBps":%v,"loop_s":%v}}}`,
			50+i, v, 8/v, v+0.2, 8/(v+0.2), c1, c2, (c1+c2)/2, 50+i))
	}
	write("s-summary.json", `{"kernel":{"path":"bzImage"},"boots":4,"spread":{"quiet":[{"metric":"loop_s","values":[1,2],"mean":1.5,"cv":0.4}]}}`)
	write("s-plain-01.json", `{"mode":"qemu-tcg","passed":true,"loop_s":20,"figures":{"per_iteration":{"read_MBps":[19]},"means":{"loop_s":20}}}`)
	write("s-quiet-99.json", `{"mode":"qemu-tcg-icount2","passed":false,"loop_s":500,"iterations":[{"write_mbps":1,"read_mbps":1}]}`)
	models, err := LoadNoiseDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 1 || len(models[0].Metrics) != 2 {
		t.Fatalf("want one mode (plain has too few runs) with copy and loop: %+v", models)
	}
	// copy = 2 x 8 MiB over write_s + read_s of each iteration: about 6.07.
	c := models[0].Metrics[0]
	if c.Name != "copy" || c.Runs != 4 || c.Iterations != 2 || c.IterSigma <= 0 || math.Abs(c.Mean-6.07) > 0.05 {
		t.Errorf("copy fit: %+v", c)
	}
	if l := models[0].Metrics[1]; l.HigherIsBetter || l.Runs != 4 {
		t.Errorf("loop fit: %+v", l)
	}
	if _, err := LoadNoiseDir(t.TempDir()); err == nil {
		t.Error("an empty directory is an error")
	}
	old := t.TempDir()
	os.WriteFile(filepath.Join(old, "s-quiet-01.json"), []byte(`{"mode":"qemu-tcg-icount2","passed":true,"loop_s":50}`), 0o644)
	if _, err := LoadNoiseDir(old); err == nil || !strings.Contains(err.Error(), "no figures") {
		t.Errorf("a run saved without the lab's figures: %v", err)
	}
}

// A PASS promises no loss of MinEffect or more: only the interval's bad
// end decides Same; the good end may be wide.
func TestClassifyOneSided(t *testing.T) {
	for _, c := range []struct {
		name          string
		higher        bool
		p             float64
		ratio, lo, hi float64
		want          Change
	}{
		{"tight around 1", true, 0.5, 1.0, 0.97, 1.03, Same},
		{"wide on the good side only", true, 0.3, 1.06, 0.97, 1.20, Same},
		{"wide on the bad side", true, 0.3, 0.99, 0.93, 1.02, Open},
		{"significant loss past the effect", true, 0.001, 0.90, 0.85, 0.95, Worse},
		{"significant small loss", true, 0.001, 0.98, 0.97, 0.99, Same},
		{"significant gain", true, 0.001, 1.10, 1.05, 1.15, Better},
		{"lower is better: slower is worse", false, 0.001, 1.10, 1.05, 1.15, Worse},
		{"lower is better: wide on the good side", false, 0.3, 0.95, 0.80, 1.03, Same},
		// The busy-machine false alarm: significant, the interval reaching
		// past the effect, but the estimate itself small.
		{"drift-sized gain is no verdict", true, 0.0019, 1.02, 1.004, 1.09, Same},
		{"drift-sized loss is no verdict", true, 0.0019, 0.98, 0.91, 0.996, Open},
		{"loss past half the effect", true, 0.001, 0.97, 0.94, 0.99, Worse},
	} {
		cmp := Comparison{HigherIsBetter: c.higher, Test: RankTest{P: c.p}, TestAlpha: 0.0025, CI: Interval{c.ratio, c.lo, c.hi}}
		if got := classify(cmp, 0.05); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A decision survives JSON, the form it is stored in, NaN bounds too.
func TestDecisionJSONRoundTrip(t *testing.T) {
	d := Decision{Runs: 5, Comparisons: []Comparison{{Name: "copy", Unit: "MB/s", Base: []float64{1, 2}, Cand: []float64{3},
		CI: Interval{Ratio: 0.9, Lo: math.NaN(), Hi: 1.1}, Test: RankTest{U: 2, P: 0.5}, Change: Worse}}}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var got Decision
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Comparisons[0]
	if got.Runs != 5 || c.CI.Ratio != 0.9 || !math.IsNaN(c.CI.Lo) || c.CI.Hi != 1.1 || c.Change != Worse || c.Test.P != 0.5 || len(c.Base) != 2 {
		t.Errorf("round trip: %s -> %+v", b, got)
	}
}

// FitDrift recovers a random walk's step and the boots' own noise from
// series drawn with them, and finds no drift in independent noise.
func TestFitDrift(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	draw := func(drift, sigma float64) [][]float64 {
		var out [][]float64
		for range 200 {
			w := 0.0
			var x []float64
			for range 10 {
				w += drift * rng.NormFloat64()
				x = append(x, 8*math.Exp(w+sigma*rng.NormFloat64()))
			}
			out = append(out, x)
		}
		return out
	}
	for _, tc := range []struct{ drift, sigma float64 }{{0.01, 0.02}, {0.03, 0.01}, {0, 0.02}} {
		d, s, n := FitDrift(draw(tc.drift, tc.sigma), 6)
		if math.Abs(d-tc.drift) > 0.004 || math.Abs(s-tc.sigma) > 0.003 || n == 0 {
			t.Errorf("drawn with drift %.3f, sigma %.3f: fitted %.4f, %.4f (%d pairs)", tc.drift, tc.sigma, d, s, n)
		}
	}
	if d, s, n := FitDrift([][]float64{{1}}, 6); d != 0 || s != 0 || n != 0 {
		t.Errorf("one boot: %v %v %v", d, s, n)
	}
}

// Drift in the noise model is drift in the simulated boots: the same
// seed with drift spreads the base boots of a long comparison further.
func TestSimulateDrifts(t *testing.T) {
	m := ReferenceNoise()
	p := DefaultPolicy()
	calm := simulateOne(rand.New(rand.NewPCG(1, 1)), p, m, -1, 0)
	drifting := simulateOne(rand.New(rand.NewPCG(1, 1)), p, m.WithDrift(0.05, "test"), -1, 0)
	spread := func(d Decision) float64 {
		c := d.Comparisons[0]
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range c.Base {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
		return hi / lo
	}
	if spread(drifting) <= spread(calm) {
		t.Errorf("base spread with drift %.3f, without %.3f", spread(drifting), spread(calm))
	}
}
