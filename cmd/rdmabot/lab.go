package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/wire"
)

const labUsage = `rdmabot lab image [--config FILE]
rdmabot lab fstests [--config FILE] [--cache-dir DIR]
rdmabot lab bench --kernel BZIMAGE [--boots 10] [--icount shift=3,sleep=on] [--spread-only] [--quiet-only] [--size 32M] [--iters 3]
rdmabot lab compare --base DIR|BZIMAGE --candidate DIR|BZIMAGE [--lossy] [--client-side] [--pressure] [--pair NAME] [--side server|client] [--config FILE]
rdmabot lab aa --kernel DIR|BZIMAGE [--comparisons 20] [--condition idle|busy] [--neighbour CMD] [--candidate DIR --seeded WHAT] [--summary]
rdmabot lab queue --scan FILE [--scan FILE] [--aa FILE] [--build 15s] [--pairs 1,2]
rdmabot lab run --kernel BZIMAGE [--test transfer|fio|pressure|fstests] [--size 32M] [--iters 3] [--rdma rxe|siw]
                [--tests generic/075,generic/091 | --large] (fstests: default lab.fstests.group)
                [--transport rdma|tcp] [--vers auto|3|4.2] [--quiet=true] [--json FILE] [--selftest KIND]
                [--netem ARGS | --lossy] [--config FILE]`

func runLab(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, labUsage)
	}
	switch args[0] {
	case "image":
		return runLabImage(ctx, e, args[1:])
	case "fstests":
		return runLabFstests(ctx, e, args[1:])
	case "run":
		return runLabRun(ctx, e, args[1:])
	case "bench":
		return runLabBench(ctx, e, args[1:])
	case "aa":
		return runLabAA(ctx, e, args[1:])
	case "compare":
		return runLabCompare(ctx, e, args[1:])
	case "queue":
		return runLabQueue(ctx, e, args[1:])
	}
	return fmt.Errorf("%w: %s", errUsage, labUsage)
}

func loadConfig(path string) (wire.Config, error) {
	if path == "" {
		return wire.Default(), nil
	}
	return wire.Load(path)
}

// cacheConfig parses the --config and --cache-dir flags of a command
// that fills the cache, and is the config with the cache dir given.
func cacheConfig(e *env, name string, args []string) (wire.Config, error) {
	fs := newFlags(e, name)
	cfgPath := fs.String("config", "", "config file (default: built-in defaults)")
	cacheDir := fs.String("cache-dir", "", "cache directory (default: cache_dir from the config)")
	if err := parseFlags(fs, args); err != nil {
		return wire.Config{}, err
	}
	c, err := loadConfig(*cfgPath)
	if err != nil {
		return wire.Config{}, err
	}
	if *cacheDir != "" {
		c.CacheDir = *cacheDir
	}
	return c, nil
}

func runLabImage(ctx context.Context, e *env, args []string) error {
	c, err := cacheConfig(e, "lab image", args)
	if err != nil {
		return err
	}
	img, err := c.LabDirs().Image(ctx, e.log)
	if err != nil {
		return err
	}
	state := "cached"
	if img.Built {
		state = "built"
	}
	fmt.Fprintf(e.stdout, "%s\t%s\t%d bytes\trecipe %s\n", img.Path, state, img.Bytes, img.Hash)
	return nil
}

// runLabFstests builds fstests from lab.fstests' source into the cache
// (or finds it there) and prints the archive's path.
func runLabFstests(ctx context.Context, e *env, args []string) error {
	c, err := cacheConfig(e, "lab fstests", args)
	if err != nil {
		return err
	}
	path, err := lab.EnsureFstests(ctx, filepath.Join(c.LabDirs().Cache, "fstests"), c.Lab.Fstests, e.log)
	if err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s\t%d bytes\t%s %s\n", path, fi.Size(), c.Lab.Fstests.Source, c.Lab.Fstests.Commit)
	return nil
}

// parseSize reads "32M", "1G" or a plain number of MiB.
func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "G"):
		mult, s = 1024, strings.TrimSuffix(s, "G")
	case strings.HasSuffix(s, "M"):
		s = strings.TrimSuffix(s, "M")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: size %q: want e.g. 32M or 1G", errUsage, s)
	}
	return n * mult, nil
}

func runLabRun(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "lab run")
	cfgPath := fs.String("config", "", "config file (default: built-in defaults)")
	kernel := fs.String("kernel", "", "bzImage to boot on both guests")
	def := lab.DefaultTest()
	kind := fs.String("test", def.Kind, "transfer, fio, or pressure (lab.pressure's load on --rdma's provider; --size and --iters do not apply)")
	size := fs.String("size", strconv.Itoa(def.SizeMiB)+"M", "file size per iteration")
	iters := fs.Int("iters", def.Iterations, "iterations")
	rdma := fs.String("rdma", def.RDMA, "rxe or siw")
	transport := fs.String("transport", def.Transport, "rdma or tcp")
	vers := fs.String("vers", def.NFSVersion, "NFS version: auto, 3, 4.0, 4.1, 4.2")
	quiet := fs.Bool("quiet", true, "instruction counting (-icount) for low-noise timings")
	jsonOut := fs.String("json", "", "also write the result as JSON to this file")
	selftest := fs.String("selftest", "", "crash on purpose to check detection: panic, hang, or warn|oops|bug (self-test kernels)")
	netem := fs.String("netem", "", `shape the test link with tc netem, e.g. "delay 1ms 500us loss 0.1%"`)
	lossy := fs.Bool("lossy", false, "the lossy profile: the test over lab.lossy.netem's link, hung-task timeout as the bot sets it")
	tests := fs.String("tests", "", "fstests: the tests to run, comma-separated (default: lab.fstests.group)")
	large := fs.Bool("large", false, "fstests: lab.fstests.large_group")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *kernel == "" {
		return fmt.Errorf("%w: --kernel is required\n%s", errUsage, labUsage)
	}
	mib, err := parseSize(*size)
	if err != nil {
		return err
	}
	c, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	test := lab.Test{Kind: *kind, SizeMiB: mib, Iterations: *iters, NFSVersion: *vers, Transport: *transport, RDMA: *rdma, Netem: *netem}
	if *kind == "pressure" {
		test = c.Lab.PressureTest(*rdma, 0)
		test.NFSVersion, test.Netem = *vers, *netem
		if *vers == def.NFSVersion {
			test.NFSVersion = c.Lab.PressureTest(*rdma, 0).NFSVersion
		}
	}
	if *kind == "fstests" {
		test = c.Lab.FstestsTest(*rdma, 0, *large)
		test.Netem = *netem
		if *vers != def.NFSVersion {
			test.NFSVersion = *vers
		}
		if *tests != "" {
			test.Fstests.Tests = strings.Split(*tests, ",")
		}
	}
	if *lossy {
		if c.Lab.Lossy.Netem == "" {
			return fmt.Errorf("%w: --lossy: lab.lossy.netem is empty (the profile is off)", errUsage)
		}
		test.Netem, test.HungTaskSecs = c.Lab.Lossy.Netem, c.Lab.Test.HungTaskSecs
	}
	if err := test.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	img, err := c.LabDirs().Image(ctx, e.log)
	if err != nil {
		return err
	}
	qc := c.Lab.QEMU
	if !*quiet {
		qc.Icount = ""
	}
	pair := lab.NewQEMUPair(qc, img, e.log)
	pair.WithFstests(c.LabDirs(), c.Lab.Fstests)
	pair.SelfTest = *selftest
	if *selftest == "hang" && test.HungTaskSecs == 0 {
		test.HungTaskSecs = 10
	}
	res, err := pair.Run(ctx, lab.Kernel{BzImage: *kernel}, test)
	if res != nil {
		printResult(e, res)
		if *jsonOut != "" {
			b, _ := json.MarshalIndent(res, "", "  ")
			if werr := os.WriteFile(*jsonOut, b, 0o644); werr != nil && err == nil {
				err = werr
			}
		}
	}
	if err != nil {
		return err
	}
	if !res.Passed {
		return fmt.Errorf("test failed: %s", res.Failure)
	}
	return nil
}

func printResult(e *env, r *lab.Result) {
	w := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(e.stdout, "kernel %s (%s, build id %.12s) mode %s, %s %d MiB x %d, %s over %s, NFS %s\n",
		r.Kernel.BzImage, r.Client.Release, r.Client.BuildID, r.Mode, r.Test.Kind, r.Test.SizeMiB, r.Test.Iterations,
		r.Test.RDMA, r.Transport, r.Test.NFSVersion)
	fmt.Fprintln(w, "iter\twrite MB/s\tread MB/s\twrite s\tread s\tcmp\t")
	for _, it := range r.Iterations {
		fmt.Fprintf(w, "%d\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t\n", it.N, it.WriteMBps, it.ReadMBps, it.WriteSecs, it.ReadSecs, it.Cmp)
	}
	fmt.Fprintf(w, "mean\t%.2f\t%.2f\t\t\t\t\n",
		r.Mean(func(i lab.Iteration) float64 { return i.WriteMBps }), r.Mean(func(i lab.Iteration) float64 { return i.ReadMBps }))
	w.Flush()
	p := r.Phases
	fmt.Fprintf(e.stdout, "phases (s): boot %.1f  rdma-up %.1f  mount %.1f  test %.1f  shutdown %.1f  total %.1f  (guest loop %.2f s)\n",
		p.Boot, p.RDMAUp, p.Mount, p.Test, p.Shutdown, p.Total, r.LoopSecs)
	if h := r.Health; h.Reported {
		fmt.Fprintf(e.stdout, "transport: %d retransmissions, %d timeouts, %d reconnects, %d bad replies, %d Send Queue full, %d CQ overflows; %d Write and %d Read chunks, %d Send Queue waits on the server\n",
			h.Retrans, h.Timeouts, h.Reconnects, h.BadReplies, h.SQFull, h.CQFull, h.WriteChunks, h.ReadChunks, h.SQStarve)
	}
	for _, h := range []lab.Host{r.Server, r.Client} {
		for _, c := range h.Crashes {
			fmt.Fprintf(e.stdout, "%s console: %s (%s, lines %d-%d)\n", h.Role, c.Title, c.Kind, c.StartLine, c.EndLine)
		}
	}
	for _, t := range r.Tests {
		fmt.Fprintf(e.stdout, "fstests %s: %s in %.1f s", t.Name, t.Status, t.Secs)
		if t.Corrupt {
			fmt.Fprint(e.stdout, " (bad data read back)")
		}
		if t.Why != "" {
			fmt.Fprintf(e.stdout, ": %s", strings.ReplaceAll(t.Why, "\n", "\n    "))
		}
		fmt.Fprintln(e.stdout)
	}
	if r.Test.Kind == "fstests" {
		fmt.Fprintf(e.stdout, "trusted server's RPC count: %d\n", r.ServerOps)
	}
	verdict := "PASSED"
	if !r.Passed {
		verdict = "FAILED: " + r.Failure
	}
	fmt.Fprintln(e.stdout, verdict)
}

func runLabBench(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "lab bench")
	cfgPath := fs.String("config", "", "config file (default: built-in defaults)")
	kernel := fs.String("kernel", "", "bzImage to boot")
	boots := fs.Int("boots", 10, "boots per mode for the spread")
	icount := fs.String("icount", "", "quiet mode's -icount (default: the config's)")
	spreadOnly := fs.Bool("spread-only", false, "skip the full run and the two-pairs measurement")
	quietOnly := fs.Bool("quiet-only", false, "measure the spread of the quiet mode only")
	refDir := fs.String("reference", filepath.Join("..", "shared", "lab"), "the reference lab (run-pair.sh, build-rootfs.sh), timed beside the full runs; skipped when absent")
	rounds := fs.Int("rounds", 3, "full runs, each followed by one of the reference lab's")
	size := fs.String("size", strconv.Itoa(lab.DefaultTest().SizeMiB)+"M", "file size per iteration for the spread")
	iters := fs.Int("iters", lab.DefaultTest().Iterations, "iterations per boot for the spread")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	mib, err := parseSize(*size)
	if err != nil {
		return err
	}
	test := lab.DefaultTest()
	test.SizeMiB, test.Iterations = mib, *iters
	if *kernel == "" {
		return fmt.Errorf("%w: --kernel is required\n%s", errUsage, labUsage)
	}
	c, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	img, err := c.LabDirs().Image(ctx, e.log)
	if err != nil {
		return err
	}
	qc := c.Lab.QEMU
	if *icount != "" {
		qc.Icount = *icount
	}
	var peer *lab.Peer
	if _, err := os.Stat(filepath.Join(*refDir, "run-pair.sh")); err == nil {
		peer = &lab.Peer{Dir: *refDir, Work: filepath.Join(c.LabDirs().Cache, "reference")}
	} else if !*spreadOnly {
		fmt.Fprintf(e.stdout, "no reference lab at %s: full runs are compared with its published figure only\n", *refDir)
	}
	return lab.Bench(ctx, lab.BenchOptions{
		Kernel: lab.Kernel{BzImage: *kernel}, Image: img, QEMU: qc, Boots: *boots, Test: test,
		SpreadOnly: *spreadOnly, QuietOnly: *quietOnly, Peer: peer, Rounds: *rounds,
		NoiseDir: filepath.Join(c.LabDirs().Cache, "noise"), Out: e.stdout, Log: e.log,
	})
}
