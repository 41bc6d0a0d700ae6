package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rdmabot/rdmabot/internal/flock"
)

// ReferenceSecs is the reference lab's whole run of 32 MiB x 3 on plain
// TCG as its report published it (shared/lab/REPORT.md). It was measured
// on another day; the ratio that counts is against the reference's own
// scripts timed in the same run (Peer).
const ReferenceSecs = 24.0

// BenchOptions says what the lab benchmark measures.
type BenchOptions struct {
	Kernel Kernel
	Image  Image
	QEMU   QEMUConfig // its Icount is the quiet mode measured
	// Boots per mode for the spread (plain TCG and quiet).
	Boots int
	// SpreadOnly skips the full run and the two-pairs measurement;
	// QuietOnly measures the spread of the quiet mode alone (to compare
	// icount settings).
	SpreadOnly, QuietOnly bool
	// Test is what each boot runs; zero means 32 MiB x 3 as the reference.
	Test Test
	// Peer, when set, is the reference lab, timed beside each full run.
	Peer *Peer
	// Rounds of full runs (ours, then the peer's); at least one.
	Rounds int
	// NoiseDir receives every run's Result as JSON, for the noise model
	// reports/stats's VerdictPolicy benchmark fits.
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
	release, err := flock.Exclusive(ctx, o.QEMU.HeavyLock)
	if err != nil {
		return err
	}
	defer release()
	plainCfg, quietCfg := o.QEMU, o.QEMU
	plainCfg.HeavyLock, quietCfg.HeavyLock = "", ""
	plainCfg.Icount = ""
	// The bench measures what contention does (two pairs at once), so
	// no boot of it may be set aside for being contended.
	plainCfg.BusyGuestWait, quietCfg.BusyGuestWait = 0, 0
	if quietCfg.Icount == "" {
		quietCfg.Icount = DefaultConfig().QEMU.Icount
	}
	ref := ReferenceTest()
	spreadTest := DefaultTest()
	if o.Test.Kind != "" {
		spreadTest = o.Test
	}
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

	var full fullFigures
	if !o.SpreadOnly {
		// A failed full run is reported; the spread is still measured.
		if full, err = fullRuns(ctx, o, one, plainCfg, quietCfg, ref); err != nil {
			fmt.Fprintf(o.Out, "full runs: %v\n", err)
		}
	}

	if o.Boots == 0 {
		return nil
	}
	// 3. The spread, interleaving the modes so drift hits both alike.
	modes := []struct {
		name string
		cfg  QEMUConfig
	}{{"quiet", quietCfg}, {"plain", plainCfg}}
	if o.QuietOnly {
		modes = modes[:1]
	}
	runs := map[string][]*Result{}
	failed := map[string]int{}
	for i := 0; i < o.Boots; i++ {
		for _, m := range modes {
			res, wall, err := one(m.cfg, spreadTest)
			if err != nil {
				// Counted, not fatal: one bad boot must not lose the others.
				failed[m.name]++
				fmt.Fprintf(o.Out, "%s boot %d failed: %v\n", m.name, i+1, err)
				continue
			}
			runs[m.name] = append(runs[m.name], res)
			f := res.Figures()
			res.Saved = &f
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
	fmt.Fprintf(o.Out, "spread over %d boots of one kernel (%s %d MiB x %d; CV = sd/mean), raw results in %s/%s-*.json:\n",
		o.Boots, spreadTest.Kind, spreadTest.SizeMiB, spreadTest.Iterations, o.NoiseDir, stamp)
	var names []string
	for _, m := range modes {
		names = append(names, m.name)
	}
	summary := printSpreads(o.Out, names, runs)
	b, _ := json.MarshalIndent(map[string]any{
		"kernel": o.Kernel, "boots": o.Boots, "quiet_icount": quietCfg.Icount, "test": spreadTest, "spread": summary,
		"full": full, "failed_boots": failed,
	}, "", "  ")
	return os.WriteFile(filepath.Join(o.NoiseDir, stamp+"-summary.json"), b, 0o644)
}

// printSpreads prints, for each mode, every metric's mean and spread
// over its boots, and returns them.
func printSpreads(out io.Writer, modes []string, runs map[string][]*Result) map[string][]Spread {
	fmt.Fprintf(out, "%-8s %-12s %10s %8s\n", "mode", "metric", "mean", "CV")
	summary := map[string][]Spread{}
	for _, mode := range modes {
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
			fmt.Fprintf(out, "%-8s %-12s %10.2f %7.1f%%\n", mode, name, s.Mean, 100*s.CV)
		}
	}
	return summary
}

// fullFigures are the full-run measurements.
type fullFigures struct {
	Runs, PeerRuns []float64  // full runs, ours and the reference lab's
	Single, Peer   float64    // their means
	Quiet          float64    // one pair in quiet mode
	Walls          [2]float64 // two pairs at once, each
	Both           float64    // two pairs at once, until both are done
}

// fullRuns measures full runs against the reference lab run in the same
// session (and its published figure), quiet mode against plain, and two
// pairs at once against one.
func fullRuns(ctx context.Context, o BenchOptions, one func(QEMUConfig, Test) (*Result, float64, error), plainCfg, quietCfg QEMUConfig, ref Test) (fullFigures, error) {
	var f fullFigures
	var err error
	// 1. Full runs as the reference ran them (plain TCG), alternating with
	// the reference's own scripts so that drift of the machine hits both.
	peer := o.Peer
	for i := range max(o.Rounds, 1) {
		_, w, err := one(plainCfg, ref)
		if err != nil {
			return f, err
		}
		f.Runs = append(f.Runs, w)
		if peer == nil {
			continue
		}
		pw, err := peer.Run(ctx, o.Kernel.BzImage, i+1)
		if err != nil {
			// Our figures stand without the peer's; say why it is missing.
			fmt.Fprintf(o.Out, "reference lab run failed, compared with its published figure only: %v\n", err)
			peer = nil
			continue
		}
		f.PeerRuns = append(f.PeerRuns, pw)
	}
	f.Single, f.Peer = spread("", f.Runs).Mean, spread("", f.PeerRuns).Mean
	fmt.Fprintf(o.Out, "full pair run, 32 MiB x 3, plain TCG: %.1f s (runs %s)\n", f.Single, secs(f.Runs))
	if len(f.PeerRuns) > 0 {
		fmt.Fprintf(o.Out, "reference lab (%s/run-pair.sh), same kernel, alternating in this run: %.1f s (runs %s): ours %.2fx the reference (goal 1.1x)\n",
			o.Peer.Dir, f.Peer, secs(f.PeerRuns), f.Single/f.Peer)
	}
	fmt.Fprintf(o.Out, "reference's published figure %.0f s (measured on another day): %.2fx\n", ReferenceSecs, f.Single/ReferenceSecs)
	if _, f.Quiet, err = one(quietCfg, ref); err != nil {
		return f, err
	}
	fmt.Fprintf(o.Out, "full pair run, 32 MiB x 3, quiet (icount %s): %.1f s (%.2fx plain)\n", quietCfg.Icount, f.Quiet, f.Quiet/f.Single)

	// 2. Two pairs at once on this machine.
	var wg sync.WaitGroup
	var errs [2]error
	start := time.Now()
	for i := range f.Walls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, f.Walls[i], errs[i] = one(plainCfg, ref)
		}()
	}
	wg.Wait()
	f.Both = time.Since(start).Seconds()
	if err := errors.Join(errs[:]...); err != nil {
		return f, fmt.Errorf("two pairs at once: %w", err)
	}
	fmt.Fprintf(o.Out, "two pairs at once: %.1f s and %.1f s, both done in %.1f s: slowdown %.2fx per run, throughput %.2fx of serial\n",
		f.Walls[0], f.Walls[1], f.Both, (f.Walls[0]+f.Walls[1])/2/f.Single, 2*f.Single/f.Both)
	return f, nil
}

func secs(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(s, ", ")
}
