package stats

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

var (
	noiseDir  = flag.String("noise", "/var/cache/rdmabot/lab/noise", "per-run JSON of one fixed kernel saved by the lab")
	simTrials = flag.Int("trials", 2000, "simulated comparisons per scenario")
	simSeed   = flag.Uint64("seed", 1, "simulation seed")
	simPlain  = flag.Bool("plain-tcg", false, "without lab runs, also prove the policy on REPORT.md's plain-TCG noise")
	simScale  = flag.Float64("noise-scale", 1, "multiply the fitted noise (sensitivity: how much worse may the lab get)")
	noSearch  = flag.Bool("no-search", false, "do not search for the budget needed when the default misses (the search is the slow part)")
	fitOnly   = flag.Bool("fit-only", false, "print the fitted noise model and stop (no simulation: cheap)")
	simSearch = flag.Int("search-trials", 500, "simulated comparisons per scenario while searching for the budget needed")
	simBudget = flag.String("budget", "", "runs/step/max to prove instead of the default policy's, e.g. 6/6/30")
	aaResults = flag.String("aa", "../../measurements/aa.jsonl", "real A/A comparisons (rdmabot lab aa): the drift each condition measured is added to the first model")
	effects   = flag.String("effects", "", "also print each model's power at these drops, e.g. 0.025,0.03,0.04,0.05,0.1, and the smallest with 90 % power (the real power bench's seeded kernels check points of it)")
)

// BenchmarkVerdictPolicy proves the default policy on the lab's noise:
// it prints the false alarm rate (no change) and the power to catch a
// 5 % drop of each metric, and the budget needed when the default does
// not reach 1 % and 95 %. Run it under the heavy lock:
//
//	flock /var/cache/rdmabot/heavy.lock go test ./reports/stats -run '^$' -bench VerdictPolicy -benchtime 1x
func BenchmarkVerdictPolicy(b *testing.B) {
	models, err := LoadNoiseDir(*noiseDir)
	if err != nil {
		fmt.Printf("noise model: %v; using the documented starting model\n", err)
		models = []NoiseModel{ReferenceNoise()}
		if *simPlain {
			models = append(models, PlainTCGNoise())
		}
	}
	if *simScale != 1 {
		for i := range models {
			models[i] = models[i].Scaled(*simScale)
		}
	}
	models = append(models, driftModels(models[0])...)
	if *fitOnly {
		for _, m := range models {
			printModel(m)
		}
		b.Skip("fit only")
	}
	targets := Targets{Effect: 0.05, MaxFalseAlarm: 0.01, MinPower: 0.95}
	curve, err := parseEffects(*effects)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		for i, m := range models {
			r := prove(b, m, targets)
			if i == 0 { // the lab's own mode (or the documented model) is the headline
				b.ReportMetric(100*r.FalseAlarm, "false-alarm-%")
				b.ReportMetric(100*r.MinPower, "power-%")
			}
			if len(curve) > 0 {
				powerCurve(b, m, curve)
			}
		}
	}
}

// parseEffects reads -effects: drops between 0 and 1, in rising order.
func parseEffects(s string) ([]float64, error) {
	if s == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		e, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || e <= 0 || e >= 1 || (len(out) > 0 && e <= out[len(out)-1]) {
			return nil, fmt.Errorf("-effects %q: want rising drops between 0 and 1, e.g. 0.03,0.05,0.1", s)
		}
		out = append(out, e)
	}
	return out, nil
}

// powerCurve prints each metric's power at each drop under the budget
// proven (-budget, else the default), and the smallest drop it catches in 90 % of trials: with the
// decision's floor (half of MinEffect) no drop much below it can be.
func powerCurve(b *testing.B, m NoiseModel, drops []float64) {
	p := benchPolicy(b)
	smallest := make([]float64, len(m.Metrics))
	fmt.Printf("  power curve (%d trials per point):\n", *simTrials)
	for _, e := range drops {
		r, err := Simulate(context.Background(), p, m, e, *simTrials, *simSeed)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("    %4.1f %% worse:", 100*e)
		for i, mn := range m.Metrics {
			fmt.Printf("  %s %5.1f %%", mn.Name, 100*r.Power[i])
			if r.Power[i] >= 0.9 && smallest[i] == 0 {
				smallest[i] = e
			}
		}
		fmt.Println()
	}
	for i, mn := range m.Metrics {
		if smallest[i] == 0 {
			fmt.Printf("    %s: below 90 %% power at every drop tried\n", mn.Name)
			continue
		}
		fmt.Printf("    %s: smallest drop caught with 90 %% power: %.1f %%\n", mn.Name, 100*smallest[i])
	}
}

// driftModels are m with the drift each machine condition of the real
// A/A comparisons measured (FitDrift over their boots in boot order),
// so that the budget is proven on drift a real machine showed, not only
// on independent boots.
func driftModels(m NoiseModel) []NoiseModel {
	byCond, err := LoadAA(*aaResults)
	if err != nil {
		fmt.Printf("A/A comparisons: %v; no drift modelled\n", err)
		return nil
	}
	conds := make([]string, 0, len(byCond))
	for c := range byCond {
		conds = append(conds, c)
	}
	sort.Strings(conds)
	var out []NoiseModel
	for _, c := range conds {
		drift, sigma, pairs := FitDrift(byCond[c], 6)
		fmt.Printf("A/A %s: %d comparisons, drift %.2f %% per boot, boot noise %.2f %% (%d boot pairs, lags 1-6)\n",
			c, len(byCond[c]), 100*drift, 100*sigma, pairs)
		if len(byCond[c]) < 3 {
			fmt.Printf("  (too few to model: the drift of %s is left out)\n", c)
			continue
		}
		src := fmt.Sprintf("A/A %s, %d comparisons", c, len(byCond[c]))
		out = append(out, m.WithDrift(drift, src))
		// The same with copy's boot noise as those boots measured it
		// (loop is not in the A/A records: it keeps m's).
		own := m.WithDrift(drift, src+", copy's boot noise from them")
		for i := range own.Metrics {
			if own.Metrics[i].Name == "copy" {
				own.Metrics[i].RunSigma, own.Metrics[i].IterSigma, own.Metrics[i].Iterations = sigma, 0, 1
			}
		}
		out = append(out, own)
	}
	return out
}

// benchPolicy is the default policy, with -budget's runs when given.
func benchPolicy(b *testing.B) Policy {
	p := DefaultPolicy()
	if *simBudget != "" {
		if _, err := fmt.Sscanf(*simBudget, "%d/%d/%d", &p.Runs, &p.RunsStep, &p.MaxRuns); err != nil {
			b.Fatalf("-budget %q: want runs/step/max: %v", *simBudget, err)
		}
	}
	return p
}

func prove(b *testing.B, model NoiseModel, t Targets) SimResult {
	ctx := context.Background()
	p := benchPolicy(b)
	printModel(model)
	r, err := Simulate(ctx, p, model, t.Effect, *simTrials, *simSeed)
	if err != nil {
		b.Fatal(err)
	}
	report(os.Stdout, "default", p, model, r, t)
	if t.Meets(r) || *noSearch {
		return r
	}
	q, rq, ok, err := BudgetFor(ctx, p, model, t, *simSearch, *simSeed, 600)
	if err != nil {
		b.Fatal(err)
	}
	if ok {
		report(os.Stdout, "needed", q, model, rq, t)
	} else {
		fmt.Printf("  not reached within %d runs per kernel (last tried: false alarm %.2f %%, power %.1f %%)\n",
			q.MaxRuns, 100*rq.FalseAlarm, 100*rq.MinPower)
	}
	return r
}

func report(w *os.File, label string, p Policy, m NoiseModel, r SimResult, t Targets) {
	fmt.Fprintf(w, "  %s budget: %d runs per kernel first, +%d per look, at most %d (%d looks; alpha %.3g, per test %.2g; min effect %.0f %%)\n",
		label, p.Runs, p.RunsStep, p.MaxRuns, p.Looks(), p.Alpha, p.TestAlpha(len(m.Metrics)), 100*p.MinEffect)
	fmt.Fprintf(w, "    false alarm rate: %.2f %% (95 %% upper bound %.2f %%; target <= %.0f %%), %d trials; inconclusive %.1f %%, mean runs %.1f, passed at the first look %.1f %%\n",
		100*r.FalseAlarm, 100*r.FalseAlarmHi, 100*t.MaxFalseAlarm, r.Trials, 100*r.InconclusiveNull, r.MeanRunsNull, 100*r.FirstLookPassNull)
	for i, mn := range m.Metrics {
		fmt.Fprintf(w, "    power, %.0f %% worse %-6s %.1f %%\n", 100*t.Effect, mn.Name+":", 100*r.Power[i])
	}
	verdict := "meets"
	if !t.Meets(r) {
		verdict = "MISSES"
	}
	fmt.Fprintf(w, "    power (smallest): %.1f %% (95 %% lower bound %.1f %%; target >= %.0f %%): %s the targets\n",
		100*r.MinPower, 100*r.MinPowerLo, 100*t.MinPower, verdict)
}

func printModel(model NoiseModel) {
	fmt.Printf("\nnoise model: %s\n", model.Source)
	for _, m := range model.Metrics {
		fmt.Printf("  %-10s mean %8.2f %-4s run CV %5.2f %%  iteration CV %5.2f %%  drift %5.2f %% per boot  (%d iterations, %d runs fitted)\n",
			m.Name, m.Mean, m.Unit, 100*m.RunSigma, 100*m.IterSigma, 100*m.Drift, m.Iterations, m.Runs)
	}
}

func TestParseEffects(t *testing.T) {
	if got, err := parseEffects("0.03, 0.05,0.1"); err != nil || len(got) != 3 || got[0] != 0.03 || got[2] != 0.1 {
		t.Errorf("parseEffects: %v %v", got, err)
	}
	if got, err := parseEffects(""); got != nil || err != nil {
		t.Errorf("no -effects: %v %v, want no curve", got, err)
	}
	for _, bad := range []string{"5", "0.05,0.03", "0.05,x", "0,0.1", "0.05,0.05"} {
		if _, err := parseEffects(bad); err == nil {
			t.Errorf("-effects %q accepted", bad)
		}
	}
}
