package stats

// The noise model of the lab, fitted to its saved runs: only the
// VerdictPolicy benchmark (bench_test.go) and its tests use it.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// MetricNoise is a log-normal model of one metric of one fixed kernel:
// each boot draws a run level around Mean with log-sd RunSigma, each
// iteration within the boot scatters around it with log-sd IterSigma.
type MetricNoise struct {
	Name, Unit     string
	HigherIsBetter bool
	Mean           float64
	RunSigma       float64
	IterSigma      float64
	Iterations     int
	Runs           int // how many runs the fit saw
	// Drift is the log-sd of one boot's step of a random walk the
	// machine's speed takes, boot after boot, base and candidate alike
	// (a neighbour starting, the host warming): what makes boots measured
	// far apart disagree more than boots measured side by side.
	Drift float64
}

// WithDrift is the model with every metric drifting by drift per boot
// (a slower machine lowers a higher-is-better metric and raises the
// others).
func (m NoiseModel) WithDrift(drift float64, source string) NoiseModel {
	out := NoiseModel{Source: fmt.Sprintf("%s, drift %.2f %% per boot (%s)", m.Source, 100*drift, source)}
	for _, x := range m.Metrics {
		x.Drift = drift
		out.Metrics = append(out.Metrics, x)
	}
	return out
}

// FitDrift estimates the per-boot drift and the boot-to-boot noise from
// series of one kernel's figures in boot order (an A/A comparison's
// boots, base and candidate interleaved): a random walk of step drift
// under independent noise sigma makes Var(log x[t+k] - log x[t]) =
// 2 sigma^2 + k drift^2, so the slope of that variance over the lag k
// is drift^2 and its intercept 2 sigma^2 (least squares over lags 1 to
// maxLag, pooled over the series, each lag weighted by its pairs).
func FitDrift(series [][]float64, maxLag int) (drift, sigma float64, pairs int) {
	var ks, vs, ws []float64
	for k := 1; k <= maxLag; k++ {
		var sum float64
		n := 0
		for _, x := range series {
			for t := 0; t+k < len(x); t++ {
				if x[t] <= 0 || x[t+k] <= 0 {
					continue
				}
				d := math.Log(x[t+k]) - math.Log(x[t])
				sum += d * d
				n++
			}
		}
		if n == 0 {
			continue
		}
		ks, vs, ws = append(ks, float64(k)), append(vs, sum/float64(n)), append(ws, float64(n))
		pairs += n
	}
	if len(ks) < 2 {
		return 0, 0, pairs
	}
	var sw, sk, sv, skk, skv float64
	for i := range ks {
		sw += ws[i]
		sk += ws[i] * ks[i]
		sv += ws[i] * vs[i]
		skk += ws[i] * ks[i] * ks[i]
		skv += ws[i] * ks[i] * vs[i]
	}
	slope := (sw*skv - sk*sv) / (sw*skk - sk*sk)
	icept := (sv - slope*sk) / sw
	return math.Sqrt(math.Max(0, slope)), math.Sqrt(math.Max(0, icept/2)), pairs
}

// aaRecord is what FitDrift reads of a stored A/A comparison
// (aa.Result): each side's per-boot copy rate, boots alternating
// base then candidate.
type aaRecord struct {
	Condition string    `json:"condition"`
	Base      []float64 `json:"base_copy_MBps"`
	Cand      []float64 `json:"cand_copy_MBps"`
	Error     string    `json:"error"`
}

// LoadAA reads stored A/A comparisons (JSON lines) and returns, per
// condition, each comparison's boots in the order they were booted.
func LoadAA(path string) (map[string][][]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string][][]float64{}
	for i, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r aaRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		if r.Error != "" || len(r.Base) != len(r.Cand) {
			continue
		}
		var x []float64
		for j := range r.Base {
			x = append(x, r.Base[j], r.Cand[j])
		}
		out[r.Condition] = append(out[r.Condition], x)
	}
	return out, nil
}

// NoiseModel is the noise of every metric and where it was measured.
type NoiseModel struct {
	Source  string
	Metrics []MetricNoise
}

// Scaled is the model with every sigma multiplied by k: what if the lab
// were k times noisier.
func (m NoiseModel) Scaled(k float64) NoiseModel {
	out := NoiseModel{Source: fmt.Sprintf("%s, noise x%g", m.Source, k)}
	for _, x := range m.Metrics {
		x.RunSigma *= k
		x.IterSigma *= k
		out.Metrics = append(out.Metrics, x)
	}
	return out
}

// FitNoise fits MetricNoise to runs of one kernel (per run, per
// iteration). The run-level variance is what is left of the variance of
// the run means once the iteration noise averaged within a run is taken
// out, never below zero.
func FitNoise(name, unit string, higherIsBetter bool, runs [][]float64) MetricNoise {
	m := MetricNoise{Name: name, Unit: unit, HigherIsBetter: higherIsBetter, Runs: len(runs)}
	var logMeans []float64
	var within, withinDF float64
	iters := 0
	for _, it := range runs {
		if len(it) == 0 {
			continue
		}
		iters += len(it)
		var lm float64
		for _, v := range it {
			lm += math.Log(v)
		}
		lm /= float64(len(it))
		logMeans = append(logMeans, lm)
		for _, v := range it {
			within += (math.Log(v) - lm) * (math.Log(v) - lm)
		}
		withinDF += float64(len(it) - 1)
	}
	if len(logMeans) == 0 {
		return m
	}
	m.Iterations = max(1, int(math.Round(float64(iters)/float64(len(logMeans)))))
	if withinDF > 0 {
		m.IterSigma = math.Sqrt(within / withinDF)
	}
	mu, sd := MeanStd(logMeans)
	m.Mean = math.Exp(mu)
	m.RunSigma = math.Sqrt(math.Max(0, sd*sd-m.IterSigma*m.IterSigma/float64(m.Iterations)))
	return m
}

// ReferenceNoise is the starting model until the lab has saved its own
// runs: REPORT.md §9 of the lab feasibility study (../shared/lab), 6.12
// lab kernel, rxe, NFSv3, 32 MiB x 4 iterations per boot, QEMU with
// -icount shift=2,sleep=on, 4 boots, per-boot means only (no
// per-iteration figures were published, so the iteration noise is folded
// into the run noise).
func ReferenceNoise() NoiseModel {
	return NoiseModel{
		Source: "lab REPORT.md §9 (-icount shift=2,sleep=on, 4 boots)",
		Metrics: []MetricNoise{
			FitNoise("copy", "MB/s", true, perBoot(copyMBps([]float64{15.9, 16.5, 17.1, 16.1}, []float64{14.5, 14.8, 15.6, 14.4})...)),
			FitNoise("loop", "s", false, perBoot(50.67, 50.23, 49.53, 50.63)),
		},
	}
}

// perBoot are runs known only by their means: one figure per boot.
func perBoot(v ...float64) [][]float64 {
	out := make([][]float64, len(v))
	for i, x := range v {
		out[i] = []float64{x}
	}
	return out
}

// copyMBps is both copies' throughput from write and read throughputs
// of equal sizes: twice the size over the sum of the two times.
func copyMBps(write, read []float64) []float64 {
	out := make([]float64, len(write))
	for i := range write {
		out[i] = 2 / (1/write[i] + 1/read[i])
	}
	return out
}

// PlainTCGNoise is the same study without instruction counting (5 boots):
// about ten times noisier, shown so the bench can say what it would cost.
func PlainTCGNoise() NoiseModel {
	return NoiseModel{
		Source: "lab REPORT.md §9 (plain TCG, 5 boots)",
		Metrics: []MetricNoise{
			FitNoise("copy", "MB/s", true, perBoot(copyMBps([]float64{23.4, 15.6, 20.0, 18.7, 19.4}, []float64{23.1, 16.2, 19.5, 17.9, 19.6})...)),
			FitNoise("loop", "s", false, perBoot(19.6, 26.6, 21.9, 22.7, 22.2)),
		},
	}
}

// labRun is the part of the lab's per-boot result JSON (lab.Result) the
// noise model reads: the lab mode, whether the run passed, and the
// figures the lab derived from the boot (lab.Figures: the metrics are
// the lab's to define, not recomputed here).
type labRun struct {
	Mode    string `json:"mode"`
	Passed  bool   `json:"passed"`
	Figures *struct {
		PerIteration map[string][]float64 `json:"per_iteration"`
		Means        map[string]float64   `json:"means"`
	} `json:"figures"`
}

// LoadNoiseDir fits one model per lab mode (plain TCG, icount, ...) to
// the per-boot result files the lab bench saves for one fixed kernel
// (rdmabot lab bench, NoiseDir), over the metrics the bot decides on:
// both copies' throughput per iteration (copy, MB/s) and the whole
// loop's seconds; a fio run has read bandwidth instead of copy. Failed
// runs are left out.
func LoadNoiseDir(dir string) ([]NoiseModel, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no *.json runs", dir)
	}
	sort.Strings(files)
	type perMode struct{ copy, read, loop [][]float64 }
	modes := map[string]*perMode{}
	for _, f := range files {
		if strings.HasSuffix(f, "-summary.json") {
			continue // the bench's own summary, not a run
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var r labRun
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if !r.Passed {
			continue
		}
		if r.Figures == nil {
			return nil, fmt.Errorf("%s: no figures (saved before the lab wrote them): run rdmabot lab bench again", f)
		}
		m := modes[r.Mode]
		if m == nil {
			m = &perMode{}
			modes[r.Mode] = m
		}
		c, rd := r.Figures.PerIteration["copy_MBps"], []float64(nil)
		if len(c) == 0 {
			rd = r.Figures.PerIteration["read_MBps"] // fio: read bandwidth only
		}
		if len(c) > 0 {
			m.copy = append(m.copy, c)
		}
		if len(rd) > 0 {
			m.read = append(m.read, rd)
		}
		if l := r.Figures.Means["loop_s"]; l > 0 {
			m.loop = append(m.loop, []float64{l})
		}
	}
	names := make([]string, 0, len(modes))
	for k := range modes {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []NoiseModel
	for _, k := range names {
		m := modes[k]
		model := NoiseModel{Source: fmt.Sprintf("%s, lab mode %q (%d passed runs)", dir, k, max(len(m.copy), len(m.read), len(m.loop)))}
		if len(m.copy) >= 3 {
			model.Metrics = append(model.Metrics, FitNoise("copy", "MB/s", true, m.copy))
		} else if len(m.read) >= 3 {
			model.Metrics = append(model.Metrics, FitNoise("read", "MB/s", true, m.read))
		}
		if len(m.loop) >= 3 {
			model.Metrics = append(model.Metrics, FitNoise("loop", "s", false, m.loop))
		}
		if len(model.Metrics) > 0 {
			out = append(out, model)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no mode with 3 or more passed runs", dir)
	}
	return out, nil
}
