package stats

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
}

// NoiseModel is the noise of every metric and where it was measured.
type NoiseModel struct {
	Source  string
	Metrics []MetricNoise
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
	one := func(v ...float64) [][]float64 {
		out := make([][]float64, len(v))
		for i, x := range v {
			out[i] = []float64{x}
		}
		return out
	}
	return NoiseModel{
		Source: "lab REPORT.md §9 (-icount shift=2,sleep=on, 4 boots)",
		Metrics: []MetricNoise{
			FitNoise("write", "MB/s", true, one(15.9, 16.5, 17.1, 16.1)),
			FitNoise("read", "MB/s", true, one(14.5, 14.8, 15.6, 14.4)),
			FitNoise("loop", "s", false, one(50.67, 50.23, 49.53, 50.63)),
		},
	}
}

// PlainTCGNoise is the same study without instruction counting (5 boots):
// about ten times noisier, shown so the bench can say what it would cost.
func PlainTCGNoise() NoiseModel {
	one := func(v ...float64) [][]float64 {
		out := make([][]float64, len(v))
		for i, x := range v {
			out[i] = []float64{x}
		}
		return out
	}
	return NoiseModel{
		Source: "lab REPORT.md §9 (plain TCG, 5 boots)",
		Metrics: []MetricNoise{
			FitNoise("write", "MB/s", true, one(23.4, 15.6, 20.0, 18.7, 19.4)),
			FitNoise("read", "MB/s", true, one(23.1, 16.2, 19.5, 17.9, 19.6)),
			FitNoise("loop", "s", false, one(19.6, 26.6, 21.9, 22.7, 22.2)),
		},
	}
}

// LoadNoiseDir fits a model to the per-run JSON files the lab saves for
// one fixed kernel (one file per boot). A file is a JSON object holding
// either an "iterations" array of objects with numeric fields, or those
// numeric fields at the top level (one iteration). Every numeric field
// is a metric; names ending in "_s" or "seconds" are lower-is-better,
// all others (MB/s, bandwidth) higher-is-better.
func LoadNoiseDir(dir string) (NoiseModel, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return NoiseModel{}, err
	}
	if len(files) == 0 {
		return NoiseModel{}, fmt.Errorf("%s: no *.json runs", dir)
	}
	sort.Strings(files)
	runs := map[string][][]float64{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return NoiseModel{}, err
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(b, &doc); err != nil {
			return NoiseModel{}, fmt.Errorf("%s: %w", f, err)
		}
		var iters []map[string]any
		if raw, ok := doc["iterations"]; ok {
			if err := json.Unmarshal(raw, &iters); err != nil {
				return NoiseModel{}, fmt.Errorf("%s: iterations: %w", f, err)
			}
		} else {
			var top map[string]any
			_ = json.Unmarshal(b, &top) // already known to be an object
			iters = []map[string]any{top}
		}
		perRun := map[string][]float64{}
		for _, it := range iters {
			for k, v := range it {
				if x, ok := v.(float64); ok && x > 0 {
					perRun[k] = append(perRun[k], x)
				}
			}
		}
		for k, v := range perRun {
			runs[k] = append(runs[k], v)
		}
	}
	names := make([]string, 0, len(runs))
	for k := range runs {
		names = append(names, k)
	}
	sort.Strings(names)
	model := NoiseModel{Source: fmt.Sprintf("%s (%d runs)", dir, len(files))}
	for _, k := range names {
		lower := strings.HasSuffix(k, "_s") || strings.HasSuffix(k, "seconds")
		unit := "MB/s"
		if lower {
			unit = "s"
		}
		model.Metrics = append(model.Metrics, FitNoise(k, unit, !lower, runs[k]))
	}
	if len(model.Metrics) == 0 {
		return NoiseModel{}, fmt.Errorf("%s: no numeric metrics in the runs", dir)
	}
	return model, nil
}
