package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rdmabot/rdmabot/clients/aa"

	"github.com/rdmabot/rdmabot/clients/queuesim"
)

const queueUsage = `rdmabot lab queue --scan FILE [--scan FILE ...] [--aa FILE] [--condition idle] [--build 15s,60s] [--pairs 1,2] [--reps 200] [--seed N]
    [--cold-base 23m [--base-every 168h] [--one-lane]] [--config FILE]
  --scan: the JSON of "rdmabot lore scan --relevant --json" (one per list; a series on both lists counts once)`

// runLabQueue replays real postings through the queue model: when each
// relevant series was posted, against the lab's measured time to a
// verdict (the A/A comparisons' own-boot rounds, which are what a
// harmless series costs) and the build's, for each number of pairs.
func runLabQueue(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "lab queue")
	cfgPath := fs.String("config", "", "config file (default: built-in defaults)")
	var scans multiFlag
	fs.Var(&scans, "scan", "lore scan --relevant --json output (repeatable)")
	aaPath := fs.String("aa", "", "A/A results whose times are the lab's (default: <cache_dir>/aa/aa.jsonl)")
	condition := fs.String("condition", "idle", "which A/A condition's times to use")
	builds := fs.String("build", "15s", "measured build times of a series, comma-separated, drawn from")
	pairs := fs.String("pairs", "1,2", "pair counts to replay, comma-separated")
	reps := fs.Int("reps", 200, "replays, each with fresh draws")
	seed := fs.Uint64("seed", 1, "random seed")
	coldBase := fs.String("cold-base", "", "measured cold builds of a base kernel, comma-separated: the first series waits for one")
	baseEvery := fs.Duration("base-every", 0, "with --cold-base: the first series after each such period needs a cold base too")
	oneLane := fs.Bool("one-lane", false, "with --cold-base: build a cold base in its series' turn (no base lane)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(scans) == 0 {
		return fmt.Errorf("%w: %s", errUsage, queueUsage)
	}
	c, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *aaPath == "" {
		*aaPath = filepath.Join(aa.Dir(c.CacheDir), "aa.jsonl")
	}
	arrivals, err := readArrivals(scans)
	if err != nil {
		return err
	}
	aa, err := aa.Read(*aaPath)
	if err != nil {
		return err
	}
	var labTimes []time.Duration
	for _, r := range aa {
		if r.Condition == *condition && r.Error == "" {
			labTimes = append(labTimes, time.Duration(r.Seconds*float64(time.Second)))
		}
	}
	if len(labTimes) == 0 {
		return fmt.Errorf("%s: no %s A/A comparison to take the lab's time from (rdmabot lab aa)", *aaPath, *condition)
	}
	buildTimes, err := durations(*builds)
	if err != nil {
		return fmt.Errorf("%w: --build: %v", errUsage, err)
	}
	var coldTimes []time.Duration
	if *coldBase != "" {
		if coldTimes, err = durations(*coldBase); err != nil {
			return fmt.Errorf("%w: --cold-base: %v", errUsage, err)
		}
		lanes := "the base lane"
		if *oneLane {
			lanes = "one lane"
		}
		fmt.Fprintf(e.stdout, "cold base builds %s (the first series, then the first after each %s), in %s\n", *coldBase, *baseEvery, lanes)
	}
	fmt.Fprintf(e.stdout, "%d relevant series posted %s..%s; lab time to a verdict from %d %s A/A comparisons (%s); build %s; poll every %s; %d replays\n",
		len(arrivals), slices.MinFunc(arrivals, time.Time.Compare).Format("2006-01-02"), slices.MaxFunc(arrivals, time.Time.Compare).Format("2006-01-02"), len(labTimes), *condition, *aaPath, *builds, c.Lore.PollInterval.Duration, *reps)
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PAIRS\tSERIES\tP50\tP95\tMAX\tUTILIZATION\tBUSIEST DAY")
	for _, f := range strings.Split(*pairs, ",") {
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(f), "%d", &n); err != nil {
			return fmt.Errorf("%w: --pairs %q: %v", errUsage, f, err)
		}
		m := queuesim.Model{Arrivals: arrivals, Poll: c.Lore.PollInterval.Duration, Build: buildTimes, Lab: labTimes, Pairs: n,
			ColdBase: coldTimes, BaseEvery: *baseEvery, OneLane: *oneLane}
		r, err := m.Run(rand.New(rand.NewPCG(*seed, uint64(n))), *reps)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%.1f%%\t%s (%d series)\n", r.Pairs, r.Series, r.P50.Round(time.Second), r.P95.Round(time.Second),
			r.Max.Round(time.Second), 100*r.Utilization, r.BusiestDay.Format("2006-01-02"), r.BusiestDayPostings)
	}
	return w.Flush()
}

// readArrivals takes each series' posting date from lore scan's JSON; a
// series posted to several lists is one posting.
func readArrivals(files []string) ([]time.Time, error) {
	seen := map[string]bool{}
	var out []time.Time
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var scan struct {
			Series []struct {
				Root string    `json:"root_message_id"`
				Date time.Time `json:"date"`
			} `json:"series"`
		}
		if err := json.Unmarshal(b, &scan); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, s := range scan.Series {
			if seen[s.Root] || s.Date.IsZero() {
				continue
			}
			seen[s.Root] = true
			out = append(out, s.Date)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no series with a date in %s", strings.Join(files, ", "))
	}
	return out, nil
}

func durations(list string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(list, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }
