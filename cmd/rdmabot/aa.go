package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rdmabot/rdmabot/clients/aa"
	"github.com/rdmabot/rdmabot/flow"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/reports/stats"
	"github.com/rdmabot/rdmabot/wire"
)

// runLabAA runs real A/A comparisons through the bot's lab rounds and
// decision, or summarises those stored.
func runLabAA(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "lab aa")
	cfgPath := fs.String("config", "", "config file (default: built-in defaults)")
	kernel := fs.String("kernel", "", "the kernel both sides boot: its bzImage, or a directory holding bzImage (and modules/)")
	n := fs.Int("comparisons", 20, "A/A comparisons to make")
	condition := fs.String("condition", "", `what the machine is doing, stored with each result: "idle", or "busy" (default: busy with --neighbour, else idle)`)
	neighbourCmd := fs.String("neighbour", "", `a CPU-heavy program and its arguments (no shell), run on and off at random during the comparisons, e.g. "sha256sum /dev/zero" (one core; refused when not installed)`)
	pair := fs.String("pair", "", "lab pair (default: lab.default)")
	candidate := fs.String("candidate", "", "the power bench: a kernel (bzImage or its directory) that is --kernel with a slowdown of our own making, booted as the candidate")
	seeded := fs.String("seeded", "", `what the --candidate kernel adds, stored with each result, e.g. "udelay(60) per svc_rdma_post_send" (results in <cache_dir>/aa/power.jsonl)`)
	results := fs.String("results", "", "JSON-lines file of results (default: <cache_dir>/aa/aa.jsonl, the power bench's <cache_dir>/aa/power.jsonl)")
	lock := fs.String("lock", "", "a file flock'ed around each comparison, to take turns with other heavy work")
	summary := fs.Bool("summary", false, "print the stored results' outcome table and exit")
	profileList := fs.String("profiles", "", `lab profiles each comparison boots first, as the bot's lab job does: "lossy", "client-side", "pressure", "fstests", comma-separated`)
	profilesOnly := fs.Bool("profiles-only", false, "decide on the --profiles boots alone (a failing decision, as a series gets it, else PASS): the profiles' own A/A")
	side := fs.String("side", "server", `where the candidate boots beside the base kernel, as a series' kernel does: "server" (the client takes the times) or "client" (the server takes them, and the base boots the same way)`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *side != "server" && *side != "client" {
		return fmt.Errorf("%w: --side %q: want server or client", errUsage, *side)
	}
	c, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	var names []string
	if *profileList != "" {
		names = strings.Split(*profileList, ",")
	}
	if *profilesOnly && len(names) == 0 {
		return fmt.Errorf("%w: --profiles-only needs --profiles", errUsage)
	}
	if *results == "" {
		name := "aa.jsonl"
		if *seeded != "" {
			name = "power.jsonl"
		}
		if *profilesOnly {
			name = "aa-" + strings.Join(names, "-") + ".jsonl"
		}
		*results = filepath.Join(aa.Dir(c.CacheDir), name)
	}
	if *summary {
		rs, err := aa.Read(*results)
		if err != nil {
			return err
		}
		printAASummary(e, rs)
		return nil
	}
	if *kernel == "" {
		return fmt.Errorf("%w: --kernel is required\nrdmabot lab aa --kernel DIR|BZIMAGE [--comparisons 20] [--condition idle|busy] [--neighbour CMD] [--candidate DIR|BZIMAGE --seeded WHAT] [--pair NAME] [--lock FILE] [--results FILE] [--summary] [--config FILE]", errUsage)
	}
	if (*candidate == "") != (*seeded == "") {
		return fmt.Errorf("%w: the power bench needs both --candidate (the seeded kernel) and --seeded (what it adds)", errUsage)
	}
	var candDir string
	if *candidate != "" {
		if candDir, err = kernelDir("--candidate", *candidate); err != nil {
			return err
		}
	}
	dir, err := kernelDir("--kernel", *kernel)
	if err != nil {
		return err
	}
	if *condition == "" {
		*condition = "idle"
		if *neighbourCmd != "" {
			*condition = "busy"
		}
	}
	if *pair == "" {
		*pair = c.Lab.Default
	}
	r := wire.NewReplier(c, nil, e.log)
	l := wire.NewRunner(c, nil, e.log)
	profiles, err := labProfiles(l, names)
	if err != nil {
		return err
	}
	runner := &aa.Runner{
		Lab: l, Profiles: profiles, ProfilesOnly: *profilesOnly,
		Decide: r,
		Pair:   *pair, Kernel: dir, Runs: c.Reports.Runs, Rounds: c.Bot.MaxRounds, Results: *results,
		Condition: *condition, Neighbour: *neighbourCmd, Candidate: candDir, Seeded: *seeded, Commit: readVersion().Revision, Lock: *lock, Side: *side,
		Rand: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)), Out: e.stdout,
	}
	kind := "A/A"
	if *seeded != "" {
		kind = fmt.Sprintf("power bench (candidate %s: %s)", candDir, *seeded)
	}
	fmt.Fprintf(e.stdout, "%s: %d comparisons of %s on %s (%s), budget %d/%d/%d, min effect %.0f%%; results in %s\n",
		kind, *n, dir, *pair, *condition, c.Reports.Runs, c.Reports.RunsStep, c.Reports.MaxRuns, 100*c.Reports.MinEffect, *results)
	rs, err := runner.Run(ctx, *n)
	printAASummary(e, rs)
	return err
}

// labProfiles are the named lab profiles of l's configuration, in the
// order the lab job boots them; a profile the configuration turns off,
// or an unknown name, is a usage error.
func labProfiles(l *lab.Runner, names []string) ([]bot.Profile, error) {
	all, err := wire.Profiles(l)
	if err != nil {
		return nil, err
	}
	var known []string
	var ps []bot.Profile
	for _, p := range all {
		known = append(known, p.Name)
		if !slices.Contains(names, p.Name) {
			continue
		}
		if p.On == nil {
			return nil, fmt.Errorf("%w: the %s profile is off (%s)", errUsage, p.Name, p.Off)
		}
		ps = append(ps, p.On)
	}
	for _, n := range names {
		if !slices.Contains(known, n) {
			return nil, fmt.Errorf("%w: profile %q: want one of %s", errUsage, n, strings.Join(known, ", "))
		}
	}
	return ps, nil
}

// kernelDir is the directory of a kernel named by flag: the directory
// itself, or the one holding the named bzImage.
func kernelDir(flag, path string) (string, error) {
	dir := path
	if st, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	} else if !st.IsDir() {
		dir = filepath.Dir(dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "bzImage")); err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	return dir, nil
}

// runLabCompare boots a base and a candidate kernel alternately, round
// after round as the bot's lab job does, and prints the verdict as the
// bot's reply words it. It needs no server and no database: it is what
// a reproducer bundle runs.
func runLabCompare(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "lab compare")
	cfgPath := fs.String("config", "", "config file (default: built-in defaults)")
	baseFlag := fs.String("base", "", "the base kernel: its bzImage, or a directory holding bzImage (and modules/)")
	candFlag := fs.String("candidate", "", "the patched kernel, likewise")
	pair := fs.String("pair", "", "lab pair (default: lab.default)")
	lossy := fs.Bool("lossy", false, "first lab.lossy.boots boots of each kernel over the lossy link, as the bot does for a series touching error, flush, drain or teardown code")
	pressure := fs.Bool("pressure", false, "first lab.pressure's boots of each kernel under Send Queue pressure, as the bot does for a series touching Send Queue code")
	clientSide := fs.Bool("client-side", false, "first lab.client_side's boots of each kernel on the client beside the base on the server, as the bot does for a series touching code both sides run")
	side := fs.String("side", "server", `where the patched kernel boots beside the base, as the bot booted it: "server", or "client" for a series changing client code alone`)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *baseFlag == "" || *candFlag == "" {
		return fmt.Errorf("%w: --base and --candidate are required\nrdmabot lab compare --base DIR|BZIMAGE --candidate DIR|BZIMAGE [--lossy] [--client-side] [--pressure] [--pair NAME] [--side server|client] [--config FILE]", errUsage)
	}
	if *side != "server" && *side != "client" {
		return fmt.Errorf("%w: --side %q: want server or client", errUsage, *side)
	}
	c, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	l := wire.NewRunner(c, nil, e.log)
	var names []string
	if *lossy {
		names = append(names, "lossy")
	}
	if *clientSide {
		names = append(names, "client-side")
	}
	if *pressure {
		names = append(names, "pressure")
	}
	profiles, err := labProfiles(l, names)
	if err != nil {
		return err
	}
	base, err := kernelDir("--base", *baseFlag)
	if err != nil {
		return err
	}
	cand, err := kernelDir("--candidate", *candFlag)
	if err != nil {
		return err
	}
	if *pair == "" {
		*pair = c.Lab.Default
	}
	r := wire.NewReplier(c, nil, e.log)
	cmp := &aa.Runner{
		Lab:    l,
		Decide: r, Pair: *pair, Kernel: base, Candidate: cand, Profiles: profiles, Side: *side,
		Runs: c.Reports.Runs, Rounds: c.Bot.MaxRounds, Out: e.stdout,
	}
	fmt.Fprintf(e.stdout, "comparing %s (base) with %s (candidate) on %s: %d boots of each at first, up to %d rounds (budget %d/%d/%d)\n",
		base, cand, *pair, c.Reports.Runs, c.Bot.MaxRounds, c.Reports.Runs, c.Reports.RunsStep, c.Reports.MaxRuns)
	res, baseRuns, candRuns := cmp.Compare(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	if res.Error != "" {
		return fmt.Errorf("lab compare: INFRA after %d rounds (the lab's fault, not the kernels'): %s", res.Rounds, res.Error)
	}
	fmt.Fprintf(e.stdout, "\n%d rounds, %d base and %d candidate boots, %.0f s\n\n%s", res.Rounds, len(baseRuns), len(candRuns), time.Since(res.Time).Seconds(), r.Text(res.ID(), baseRuns, candRuns))
	return nil
}

// printAASummary counts outcomes per condition: the bot's decision
// (fresh base boots, with the cache when it agrees), the comparison's
// own boots alone, and the cached base alone (the bot before every round
// booted the base), with the time per comparison.
func printAASummary(e *env, rs []aa.Result) {
	var same, power []aa.Result
	for _, r := range rs {
		if r.Seeded != "" {
			power = append(power, r)
		} else {
			same = append(same, r)
		}
	}
	if len(power) > 0 {
		printPowerSummary(e, power)
		if len(same) == 0 {
			return
		}
	}
	printOutcomes(e, same)
	printHostLoad(e, same)
	printTestOutcomes(e, same)
}

// printTestOutcomes is the table of each functional test's results over
// the profile boots of healthy kernels (base and candidate alike, every
// condition): a test that fails on some of them is flaky at that rate.
func printTestOutcomes(e *env, rs []aa.Result) {
	type tally struct {
		pass, fail, notrun int
		secs               []float64
	}
	byTest := map[string]*tally{}
	var names []string
	for _, r := range rs {
		for _, boot := range r.ProfileTests {
			for _, t := range boot {
				c := byTest[t.Name]
				if c == nil {
					c = &tally{}
					byTest[t.Name] = c
					names = append(names, t.Name)
				}
				switch t.Status {
				case flow.TestPass:
					c.pass++
					c.secs = append(c.secs, t.Secs)
				case flow.TestFail:
					c.fail++
				default:
					c.notrun++
				}
			}
		}
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TEST	BOOTS	PASS	FAIL	NOTRUN	PASS P50 S	PASS MAX S")
	for _, n := range names {
		c := byTest[n]
		p50, hi := "-", "-"
		if len(c.secs) > 0 {
			sort.Float64s(c.secs)
			p50, hi = fmt.Sprintf("%.0f", c.secs[(len(c.secs)-1)/2]), fmt.Sprintf("%.0f", c.secs[len(c.secs)-1])
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", n, c.pass+c.fail+c.notrun, c.pass, c.fail, c.notrun, p50, hi)
	}
	w.Flush()
}

// printOutcomes is the table of outcomes per condition and mode, with
// the time per comparison.
func printOutcomes(e *env, rs []aa.Result) {
	type key struct{ cond, mode string }
	counts := map[key]map[string]int{}
	secs := map[string][]float64{}
	for _, r := range rs {
		for _, m := range []struct{ mode, v string }{{"bot", r.Verdict.String()}, {"own boots only", r.Fresh.String()}, {"cached only (before)", r.Cached.String()}} {
			if m.v == "" {
				continue
			}
			k := key{r.Condition, m.mode}
			if counts[k] == nil {
				counts[k] = map[string]int{}
			}
			counts[k][m.v]++
		}
		if r.Error == "" {
			secs[r.Condition] = append(secs[r.Condition], r.Seconds)
		}
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].cond != keys[j].cond {
			return keys[i].cond > keys[j].cond
		}
		return keys[i].mode < keys[j].mode
	})
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CONDITION\tBASE\tN\tREGRESSION\tIMPROVEMENT\tPASS\tINCONCLUSIVE\tINFRA\tOTHER\tP50 S\tP95 S")
	for _, k := range keys {
		c := counts[k]
		total, other := 0, 0
		for v, x := range c {
			total += x
			switch v {
			case "REGRESSION", "IMPROVEMENT", "PASS", "INCONCLUSIVE", "INFRA":
			default:
				other += x
			}
		}
		s := secs[k.cond]
		sort.Float64s(s)
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", k.cond, k.mode, total, c["REGRESSION"], c["IMPROVEMENT"], c["PASS"],
			c["INCONCLUSIVE"], c["INFRA"], other, quantile(s, 0.5), quantile(s, 0.95))
	}
	w.Flush()
	if len(rs) == 0 {
		fmt.Fprintln(e.stdout, "(no comparisons)")
	}
}

// printHostLoad says, per condition, what the host's other programs
// held per boot (the figure the lab sets contended boots aside by,
// lab.qemu.busy_guest_wait) and how often a boot of one healthy kernel
// counted a transport fault.
func printHostLoad(e *env, rs []aa.Result) {
	used, waits, busy := map[string][]float64{}, map[string][]float64{}, map[string]int{}
	reported, counted := map[string]int{}, map[string]int{}
	conds := []string{}
	for _, r := range rs {
		if _, ok := used[r.Condition]; !ok {
			conds = append(conds, r.Condition)
			used[r.Condition] = nil
		}
		for _, c := range r.HostCores {
			if c >= 0 {
				used[r.Condition] = append(used[r.Condition], c)
			}
		}
		waits[r.Condition] = append(waits[r.Condition], r.GuestWait...)
		busy[r.Condition] += len(r.Busy)
		for _, h := range r.Health {
			if h == nil {
				continue
			}
			reported[r.Condition]++
			for k, v := range h {
				if v > 0 {
					counted[r.Condition+" "+k]++
				}
			}
		}
	}
	sort.Strings(conds)
	for _, c := range conds {
		u := used[c]
		if len(u) == 0 && busy[c] == 0 {
			continue
		}
		w := waits[c]
		sort.Float64s(u)
		sort.Float64s(w)
		fmt.Fprintf(e.stdout, "%s: per boot used, other programs held p50 %s, p95 %s, max %s host cores and the guests' threads waited for a CPU p50 %s, p95 %s, max %s; %d boots used, %d set aside as contended\n",
			c, cores(u, 0.5), cores(u, 0.95), cores(u, 1), cores(w, 0.5), cores(w, 0.95), cores(w, 1), len(u), busy[c])
	}
	// How often a boot of one healthy kernel counts a transport fault:
	// what the transport rule (two patched boots, none in the base) risks.
	for _, c := range conds {
		if reported[c] == 0 {
			continue
		}
		var nz []string
		for k, n := range counted {
			if name, ok := strings.CutPrefix(k, c+" "); ok {
				nz = append(nz, fmt.Sprintf("%s in %d", name, n))
			}
		}
		sort.Strings(nz)
		if len(nz) == 0 {
			nz = []string{"none"}
		}
		fmt.Fprintf(e.stdout, "%s: transport counts not zero, of %d boots that reported them: %s\n", c, reported[c], strings.Join(nz, ", "))
	}
}

func quantile(sorted []float64, q float64) string {
	if len(sorted) == 0 {
		return "-"
	}
	i := int(q*float64(len(sorted)-1) + 0.5)
	return strings.TrimSuffix(fmt.Sprintf("%.0f", sorted[i]), ".0")
}

func cores(sorted []float64, q float64) string {
	if len(sorted) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", sorted[int(q*float64(len(sorted)-1)+0.5)])
}

// printPowerSummary is the power table: per seeded slowdown and
// condition, the effect the boots measured (median over comparisons of
// the candidate's median copy against the base's) and how often the
// bot's decision called it a REGRESSION.
func printPowerSummary(e *env, rs []aa.Result) {
	type key struct{ seeded, cond string }
	var keys []key
	by := map[key][]aa.Result{}
	for _, r := range rs {
		k := key{r.Seeded, r.Condition}
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], r)
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SEEDED\tCONDITION\tN\tCOPY EFFECT\tREGRESSION\tPOWER\tPASS\tINCONCLUSIVE\tINFRA\tOTHER\tP50 S\tP95 S")
	for _, k := range keys {
		c := map[string]int{}
		var effects, secs []float64
		for _, r := range by[k] {
			c[r.Verdict.String()]++
			if r.Error == "" {
				effects = append(effects, r.Effect())
				secs = append(secs, r.Seconds)
			}
		}
		sort.Float64s(secs)
		measured := c["REGRESSION"] + c["PASS"] + c["INCONCLUSIVE"] + c["IMPROVEMENT"]
		other := len(by[k]) - measured - c["INFRA"]
		power := "-"
		if measured > 0 {
			power = fmt.Sprintf("%.0f%%", 100*float64(c["REGRESSION"])/float64(measured))
		}
		effect := "-"
		if len(effects) > 0 {
			effect = fmt.Sprintf("%+.1f%%", 100*stats.Median(effects))
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", k.seeded, k.cond, len(by[k]), effect, c["REGRESSION"], power,
			c["PASS"], c["INCONCLUSIVE"], c["INFRA"], other, quantile(secs, 0.5), quantile(secs, 0.95))
	}
	w.Flush()
}
