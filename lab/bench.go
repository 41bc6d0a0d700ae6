package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ReferenceSecs is the reference lab's whole run of 32 MiB x 3 on plain
// TCG on this class of machine (shared/lab/REPORT.md): the figure a full
// pair run is compared with.
const ReferenceSecs = 24.0

// BenchOptions says what the lab benchmark measures.
type BenchOptions struct {
	Kernel Kernel
	Image  Image
	QEMU   QEMUConfig // its Icount is the quiet mode measured
	// Boots per mode for the spread (plain TCG and quiet).
	Boots int
	// NoiseDir receives every run's Result as JSON, for the reports
	// package's noise model.
	NoiseDir string
	Out      io.Writer
	Log      *slog.Logger
}

// Spread is the boot-to-boot variation of one metric.
type Spread struct {
	Metric string    `json:"metric"`
	Values []float64 `json:"values"`
	Mean   float64   `json:"mean"`
	CV     float64   `json:"cv"` // standard deviation / mean
}

func spread(metric string, v []float64) Spread {
	s := Spread{Metric: metric, Values: v}
	if len(v) == 0 {
		return s
	}
	for _, x := range v {
		s.Mean += x
	}
	s.Mean /= float64(len(v))
	if len(v) > 1 && s.Mean != 0 {
		ss := 0.0
		for _, x := range v {
			ss += (x - s.Mean) * (x - s.Mean)
		}
		s.CV = math.Sqrt(ss/float64(len(v)-1)) / s.Mean
	}
	return s
}

// Bench runs the lab benchmark under the heavy lock: one full run against
// the reference figure, two pairs at once against one, and the spread of
// every metric over o.Boots boots in each mode. The caller holds no lock;
// the pairs inside take none, so two can run together.
func Bench(ctx context.Context, o BenchOptions) error {
	release, err := lockHeavy(ctx, o.QEMU.HeavyLock)
	if err != nil {
		return err
	}
	defer release()
	plainCfg, quietCfg := o.QEMU, o.QEMU
	plainCfg.HeavyLock, quietCfg.HeavyLock = "", ""
	plainCfg.Icount = ""
	if quietCfg.Icount == "" {
		quietCfg.Icount = DefaultConfig().QEMU.Icount
	}
	ref := DefaultTest() // 32 MiB x 3, rxe, the reference mount
	stamp := time.Now().UTC().Format("20060102T150405Z")
	if err := os.MkdirAll(o.NoiseDir, 0o755); err != nil {
		return err
	}
	one := func(cfg QEMUConfig, t Test) (*Result, float64, error) {
		start := time.Now()
		res, err := NewQEMUPair(cfg, o.Image, o.Log).Run(ctx, o.Kernel, t)
		wall := time.Since(start).Seconds()
		if err == nil && !res.Passed {
			err = fmt.Errorf("run failed: %s", res.Failure)
		}
		return res, wall, err
	}

	// 1. One full run, as the reference ran it (plain TCG).
	_, single, err := one(plainCfg, ref)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "full pair run, 32 MiB x 3, plain TCG: %.1f s (reference %.0f s: %.2fx)\n", single, ReferenceSecs, single/ReferenceSecs)
	_, quietWall, err := one(quietCfg, ref)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "full pair run, 32 MiB x 3, quiet (icount %s): %.1f s (%.2fx plain)\n", quietCfg.Icount, quietWall, quietWall/single)

	// 2. Two pairs at once on this machine.
	var wg sync.WaitGroup
	walls := make([]float64, 2)
	errs := make([]error, 2)
	start := time.Now()
	for i := range walls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, walls[i], errs[i] = one(plainCfg, ref)
		}()
	}
	wg.Wait()
	both := time.Since(start).Seconds()
	for _, e := range errs {
		if e != nil {
			return fmt.Errorf("two pairs at once: %w", e)
		}
	}
	fmt.Fprintf(o.Out, "two pairs at once: %.1f s and %.1f s, both done in %.1f s: slowdown %.2fx per run, throughput %.2fx of serial\n",
		walls[0], walls[1], both, (walls[0]+walls[1])/2/single, 2*single/both)

	// 3. The spread, interleaving the modes so drift hits both alike.
	runs := map[string][]*Result{}
	for i := 0; i < o.Boots; i++ {
		for _, m := range []struct {
			name string
			cfg  QEMUConfig
		}{{"quiet", quietCfg}, {"plain", plainCfg}} {
			res, wall, err := one(m.cfg, ref)
			if err != nil {
				return fmt.Errorf("%s boot %d: %w", m.name, i+1, err)
			}
			runs[m.name] = append(runs[m.name], res)
			b, _ := json.MarshalIndent(res, "", "  ")
			name := filepath.Join(o.NoiseDir, fmt.Sprintf("%s-%s-%02d.json", stamp, m.name, i+1))
			if err := os.WriteFile(name, b, 0o644); err != nil {
				return err
			}
			o.Log.Info("lab bench: boot", "mode", m.name, "n", i+1, "wall_s", fmt.Sprintf("%.1f", wall),
				"write", fmt.Sprintf("%.2f", res.Mean(func(it Iteration) float64 { return it.WriteMBps })),
				"read", fmt.Sprintf("%.2f", res.Mean(func(it Iteration) float64 { return it.ReadMBps })), "loop_s", res.LoopSecs)
		}
	}
	fmt.Fprintf(o.Out, "spread over %d boots of one kernel (CV = sd/mean), raw results in %s/%s-*.json:\n", o.Boots, o.NoiseDir, stamp)
	fmt.Fprintf(o.Out, "%-8s %-12s %10s %8s\n", "mode", "metric", "mean", "CV")
	summary := map[string][]Spread{}
	for _, mode := range []string{"quiet", "plain"} {
		metrics := map[string][]float64{}
		for _, r := range runs[mode] {
			metrics["write_MBps"] = append(metrics["write_MBps"], r.Mean(func(it Iteration) float64 { return it.WriteMBps }))
			metrics["read_MBps"] = append(metrics["read_MBps"], r.Mean(func(it Iteration) float64 { return it.ReadMBps }))
			metrics["loop_s"] = append(metrics["loop_s"], r.LoopSecs)
			metrics["wall_s"] = append(metrics["wall_s"], r.Phases.Total)
			metrics["boot_s"] = append(metrics["boot_s"], r.Phases.Boot)
		}
		for _, name := range []string{"write_MBps", "read_MBps", "loop_s", "boot_s", "wall_s"} {
			s := spread(name, metrics[name])
			summary[mode] = append(summary[mode], s)
			fmt.Fprintf(o.Out, "%-8s %-12s %10.2f %7.1f%%\n", mode, name, s.Mean, 100*s.CV)
		}
	}
	b, _ := json.MarshalIndent(map[string]any{
		"kernel": o.Kernel, "boots": o.Boots, "quiet_icount": quietCfg.Icount, "spread": summary,
		"single_plain_s": single, "single_quiet_s": quietWall, "two_pairs_s": walls, "two_pairs_both_s": both,
	}, "", "  ")
	return os.WriteFile(filepath.Join(o.NoiseDir, stamp+"-summary.json"), b, 0o644)
}
