package lab

import (
	"context"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/rdmabot/rdmabot/flow"
)

// Lossy is the lab's lossy link profile (bot.Profile, lab.lossy).
type Lossy struct {
	lab     *Runner
	touches *regexp.Regexp
}

// NewLossy is the profile of l's configuration; nil when lab.lossy.netem
// is empty (off).
func NewLossy(l *Runner) (*Lossy, error) {
	if l.Cfg.Lossy.Netem == "" {
		return nil, nil
	}
	re, err := regexp.Compile(l.Cfg.Lossy.Touches)
	if err != nil {
		return nil, fmt.Errorf("lab.lossy.touches: %w", err)
	}
	return &Lossy{lab: l, touches: re}, nil
}

// Name implements bot.Profile.
func (p *Lossy) Name() string { return flow.ProfileLossy }

// Boots implements bot.Profile.
func (p *Lossy) Boots() int { return p.lab.Cfg.Lossy.Boots }

// Run implements bot.Profile: the configured test over the shaped link.
func (p *Lossy) Run(ctx context.Context, pair string, k flow.Boot, _ int, trace io.Writer) ([]flow.Sample, error) {
	return p.lab.RunTest(ctx, pair, k, 1, p.lab.Cfg.LossyTest(), trace)
}

// Shapes implements bot.Profile. Only the QEMU pair's soft RDMA runs over
// the shaped link: on a real pair's HCA the RDMA traffic never passes the
// netdev's qdisc.
func (p *Lossy) Shapes(pair string) bool { return pair == "qemu" }

// Why implements bot.Profile: the words of lab.lossy.touches the series'
// changed lines and the functions of their hunks hold, with their files.
func (p *Lossy) Why(s flow.Series) string {
	return touched(s.Changes, p.touches, false)
}

// touched names what of a series re matches: the words of its changed
// lines and of the functions their hunks are in (and, withFiles, the
// changed files' paths), with the files they are in; "" when nothing.
func touched(changes []flow.Change, re *regexp.Regexp, withFiles bool) string {
	words, files := map[string]bool{}, map[string]bool{}
	for _, c := range changes {
		// A changed comment changes no code in the file.
		if withFiles && !c.Context && !isComment(c.Text) && re.MatchString(c.File) {
			words[path.Base(c.File)] = true
			files[c.File] = true
		}
		// A hunk's context is the function it changes, or only the
		// last line git took for one (a label, a struct) when the
		// change is between functions.
		if c.Context && !strings.Contains(c.Text, "(") {
			continue
		}
		for _, w := range re.FindAllString(c.Text, -1) {
			words[strings.ToLower(w)] = true
			files[c.File] = true
		}
	}
	if len(words) == 0 {
		return ""
	}
	return fmt.Sprintf("%s code (%s)", strings.Join(slices.Sorted(maps.Keys(words)), "/"), strings.Join(slices.Sorted(maps.Keys(files)), ", "))
}

// isComment says a changed C line is only comment or blank: a line of a
// block comment ("/*", " *", "*/") or a line comment.
func isComment(line string) bool {
	t := strings.TrimSpace(line)
	return t == "" || strings.HasPrefix(t, "*") || strings.HasPrefix(t, "/*") || strings.HasPrefix(t, "//")
}

// Pressure is the lab's Send Queue pressure profile (bot.Profile,
// lab.pressure): its boots run lab.pressure's load on each provider in
// turn, and each sample names its provider ("pressure-rxe").
type Pressure struct {
	lab     *Runner
	touches *regexp.Regexp
}

// NewPressure is the profile of l's configuration; nil when
// lab.pressure.providers is empty (off).
func NewPressure(l *Runner) (*Pressure, error) {
	if len(l.Cfg.Pressure.Providers) == 0 {
		return nil, nil
	}
	re, err := regexp.Compile(l.Cfg.Pressure.Touches)
	if err != nil {
		return nil, fmt.Errorf("lab.pressure.touches: %w", err)
	}
	return &Pressure{lab: l, touches: re}, nil
}

// Name implements bot.Profile.
func (p *Pressure) Name() string { return flow.ProfilePressure }

// Shapes implements bot.Profile: the providers are the QEMU pair's soft
// devices; a real pair's HCA is not one of them.
func (p *Pressure) Shapes(pair string) bool { return pair == "qemu" }

// Boots implements bot.Profile: lab.pressure.boots on each provider.
func (p *Pressure) Boots() int {
	return p.lab.Cfg.Pressure.Boots * len(p.lab.Cfg.Pressure.Providers)
}

// Run implements bot.Profile: the boot-th boot goes to the providers in
// turn and to the NFS versions in turn, shifted by one each time round
// the providers, so that one boot per provider already covers two
// versions and more boots give each provider each version.
func (p *Pressure) Run(ctx context.Context, pair string, k flow.Boot, boot int, trace io.Writer) ([]flow.Sample, error) {
	provs := p.lab.Cfg.Pressure.Providers
	prov := provs[boot%len(provs)]
	smp, err := p.lab.RunTest(ctx, pair, k, 1, p.lab.Cfg.PressureTest(prov, boot+boot/len(provs)), trace)
	for i := range smp {
		smp[i].Profile = flow.ProfilePressure + "-" + prov
	}
	return smp, err
}

// Why implements bot.Profile: the files, words and functions of
// lab.pressure.touches the series changes.
func (p *Pressure) Why(s flow.Series) string {
	return touched(s.Changes, p.touches, true)
}

// Debug is the lab's debug profile (bot.Stages.Debug, lab.debug): boots
// of each side's kernel built with KASAN, lockdep and line tables
// (Boot.Debug), running the configured test, where a use-after-free or a
// lock misuse on a teardown, drain or error path shows as a report the
// lab kernel cannot print. Only its crashes count.
type Debug struct {
	lab     *Runner
	touches *regexp.Regexp
}

// NewDebug is the profile of l's configuration; nil when lab.debug.boots
// is 0 (off).
func NewDebug(l *Runner) (*Debug, error) {
	if l.Cfg.Debug.Boots == 0 {
		return nil, nil
	}
	re, err := regexp.Compile(l.Cfg.Debug.Touches)
	if err != nil {
		return nil, fmt.Errorf("lab.debug.touches: %w", err)
	}
	return &Debug{lab: l, touches: re}, nil
}

// Name implements bot.Profile.
func (p *Debug) Name() string { return flow.ProfileDebug }

// Boots implements bot.Profile.
func (p *Debug) Boots() int { return p.lab.Cfg.Debug.Boots }

// Shapes implements bot.Profile: the debug kernel is the QEMU guests'
// (kbuild lab qemu-debug).
func (p *Debug) Shapes(pair string) bool { return pair == "qemu" }

// Why implements bot.Profile: the words of lab.debug.touches the series'
// changed lines and the functions of their hunks hold.
func (p *Debug) Why(s flow.Series) string { return touched(s.Changes, p.touches, false) }

// Run implements bot.Profile: the debug profile's test on k's debug
// kernel, beside k's trusted peer when it has one.
func (p *Debug) Run(ctx context.Context, pair string, k flow.Boot, _ int, trace io.Writer) ([]flow.Sample, error) {
	if k.Debug == "" {
		return nil, flow.MarkInfra(fmt.Errorf("the %s profile has no debug kernel to boot", p.Name()))
	}
	return p.lab.RunTest(ctx, pair, flow.Boot{Dir: k.Debug, Trusted: k.Trusted, Side: k.Side}, 1, p.lab.Cfg.DebugTest(), trace)
}

// ClientSide is the lab's client-side profile (bot.Profile,
// lab.client_side): a series' kernel that boots on the server boots on
// the client, beside the trusted base on the server, which takes the
// times and checks every file the client wrote. It is for code both
// sides run (ib_core, the soft providers), whose client-side uses the
// default boots never give the series' kernel.
type ClientSide struct {
	lab     *Runner
	touches *regexp.Regexp
}

// NewClientSide is the profile of l's configuration; nil when
// lab.client_side.boots is 0 (off).
func NewClientSide(l *Runner) (*ClientSide, error) {
	if l.Cfg.ClientSide.Boots == 0 {
		return nil, nil
	}
	re, err := regexp.Compile(l.Cfg.ClientSide.Touches)
	if err != nil {
		return nil, fmt.Errorf("lab.client_side.touches: %w", err)
	}
	return &ClientSide{lab: l, touches: re}, nil
}

// Name implements bot.Profile.
func (p *ClientSide) Name() string { return flow.ProfileClientSide }

// Boots implements bot.Profile.
func (p *ClientSide) Boots() int { return p.lab.Cfg.ClientSide.Boots }

// Shapes implements bot.Profile: every pair has a client.
func (p *ClientSide) Shapes(string) bool { return true }

// SeriesOnly says a new mainline head has nothing for the profile: it
// boots on both sides already.
func (p *ClientSide) SeriesOnly() bool { return true }

// Why implements bot.Profile: the changed files of lab.client_side.touches,
// for a series whose kernel boots on the server.
func (p *ClientSide) Why(s flow.Series) string {
	if SideOf(s.Changes) != SideServer {
		return ""
	}
	return touched(s.Changes, p.touches, true)
}

// Run implements bot.Profile: the configured test with k's kernel on the
// client, beside k's trusted peer on the server, or beside itself (the
// base, timed the same way).
func (p *ClientSide) Run(ctx context.Context, pair string, k flow.Boot, _ int, trace io.Writer) ([]flow.Sample, error) {
	trusted := k.Trusted
	if trusted == "" {
		trusted = k.Dir
	}
	smp, err := p.lab.RunTest(ctx, pair, flow.Boot{Dir: k.Dir, Trusted: trusted, Side: SideClient}, 1, p.lab.Cfg.Test, trace)
	for i := range smp {
		smp[i].Profile = flow.ProfileClientSide
	}
	return smp, err
}

// Fstests is the lab's fstests profile (bot.Profile, lab.fstests): its
// boots run fstests' check on the client against the server's exports
// over NFS/RDMA, on each provider in turn, and each sample names its
// provider ("fstests-rxe") and holds the tests' results.
type Fstests struct {
	lab     *Runner
	touches *regexp.Regexp
}

// NewFstests is the profile of l's configuration; nil when
// lab.fstests.providers is empty (off).
func NewFstests(l *Runner) (*Fstests, error) {
	if len(l.Cfg.Fstests.Providers) == 0 {
		return nil, nil
	}
	re, err := regexp.Compile(l.Cfg.Fstests.Touches)
	if err != nil {
		return nil, fmt.Errorf("lab.fstests.touches: %w", err)
	}
	return &Fstests{lab: l, touches: re}, nil
}

// Name implements bot.Profile.
func (p *Fstests) Name() string { return flow.ProfileFstests }

// Shapes implements bot.Profile: the providers are the QEMU pair's soft
// devices.
func (p *Fstests) Shapes(pair string) bool { return pair == "qemu" }

// Boots implements bot.Profile: lab.fstests.boots on each provider.
func (p *Fstests) Boots() int {
	return p.lab.Cfg.Fstests.Boots * len(p.lab.Cfg.Fstests.Providers)
}

// Why implements bot.Profile: the files, words and functions of
// lab.fstests.touches the series changes.
func (p *Fstests) Why(s flow.Series) string {
	return touched(s.Changes, p.touches, true)
}

// Run implements bot.Profile: the boot-th boot goes to the providers and
// the NFS versions in turn, as the pressure profile's do, and runs the
// group, or the large group when k asks for it.
func (p *Fstests) Run(ctx context.Context, pair string, k flow.Boot, boot int, trace io.Writer) ([]flow.Sample, error) {
	return p.run(ctx, pair, k, boot, nil, trace)
}

// Confirm implements bot.Confirmer: the boot-th boot's provider and NFS
// version again, running only tests (of its group), in the group's
// order.
func (p *Fstests) Confirm(ctx context.Context, pair string, k flow.Boot, boot int, tests []string, trace io.Writer) ([]flow.Sample, error) {
	if len(tests) == 0 {
		return nil, flow.MarkInfra(fmt.Errorf("lab: fstests: nothing to confirm"))
	}
	return p.run(ctx, pair, k, boot, tests, trace)
}

// run is the boot-th boot, of the group's tests that only names (all
// when only is nil).
func (p *Fstests) run(ctx context.Context, pair string, k flow.Boot, boot int, only []string, trace io.Writer) ([]flow.Sample, error) {
	provs := p.lab.Cfg.Fstests.Providers
	prov := provs[boot%len(provs)]
	t := p.lab.Cfg.FstestsTest(prov, boot+boot/len(provs), k.Thorough)
	if only != nil {
		var tests []string
		for _, name := range t.Fstests.Tests {
			if slices.Contains(only, name) {
				tests = append(tests, name)
			}
		}
		if len(tests) != len(only) {
			// The bot's mistake, never the kernel's.
			return nil, flow.MarkInfra(fmt.Errorf("lab: fstests: %v are not all in the group %v", only, t.Fstests.Tests))
		}
		run := *t.Fstests
		run.Tests = tests
		t.Fstests = &run
	}
	smp, err := p.lab.RunTest(ctx, pair, k, 1, t, trace)
	for i := range smp {
		smp[i].Profile = flow.ProfileFstests + "-" + prov
		smp[i].Confirming = only != nil
	}
	return smp, err
}
