package bot_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/flow"
)

// scriptLab answers each boot from a script keyed by "dir#count".
type scriptLab struct {
	boots []string
	plan  map[string]func() ([]flow.Sample, error)
}

func (l *scriptLab) CandidateSide(flow.Series) string { return "server" }

func (l *scriptLab) Run(ctx context.Context, pair string, b flow.Boot, n int, trace io.Writer) ([]flow.Sample, error) {
	l.boots = append(l.boots, b.Dir)
	key := fmt.Sprintf("%s#%d", b.Dir, strings.Count(strings.Join(l.boots, " "), b.Dir))
	if f := l.plan[key]; f != nil {
		return f()
	}
	return []flow.Sample{{Metrics: map[string]float64{"copy_MBps": 8}}}, nil
}

// The one round: base first, alternating, stopping at a crash of
// either side; a kernel that does not come up is named by its side, and
// the lab's fault stays the lab's.
func TestRunRound(t *testing.T) {
	base, cand := flow.Boot{Dir: "base"}, flow.Boot{Dir: "cand", Trusted: "base", Side: "server"}
	crash := func() ([]flow.Sample, error) { return []flow.Sample{{Crash: "WARNING in __ib_drain_sq"}}, nil }
	noBoot := func() ([]flow.Sample, error) { return nil, errors.New("server did not come up") }
	stall := func() ([]flow.Sample, error) {
		return []flow.Sample{{Crash: "transfer stalled: 1 of 4 iterations in 97 s on siw, NFS 4.1", Stall: true}}, nil
	}
	infra := func() ([]flow.Sample, error) { return nil, flow.MarkInfra(errors.New("qemu died")) }
	for name, c := range map[string]struct {
		base      flow.Boot
		plan      map[string]func() ([]flow.Sample, error)
		boots     string
		wantSide  string
		wantInfra bool
	}{
		"clean":             {base, nil, "base cand base cand base cand", "", false},
		"no base":           {flow.Boot{}, nil, "cand cand cand", "", false},
		"candidate crash":   {base, map[string]func() ([]flow.Sample, error){"cand#2": crash}, "base cand base cand", "", false},
		"base crash":        {base, map[string]func() ([]flow.Sample, error){"base#1": crash}, "base cand", "", false},
		"candidate no boot": {base, map[string]func() ([]flow.Sample, error){"cand#1": noBoot}, "base cand", "candidate", false},
		"base no boot":      {base, map[string]func() ([]flow.Sample, error){"base#2": noBoot}, "base cand base", "base", false},
		"lab fault":         {base, map[string]func() ([]flow.Sample, error){"cand#3": infra}, "base cand base cand base cand", "", true},
		// A stall the kernel did not report is booted once more: a
		// second stall (or a crash) ends the round, a clean boot lets
		// it go on.
		"a stall confirmed":           {base, map[string]func() ([]flow.Sample, error){"cand#1": stall, "cand#2": stall}, "base cand base cand", "", false},
		"a stall not seen again":      {base, map[string]func() ([]flow.Sample, error){"cand#1": stall}, "base cand base cand base cand", "", false},
		"a stall in the last boot":    {base, map[string]func() ([]flow.Sample, error){"cand#3": stall}, "base cand base cand base cand", "", false},
		"a stall beside a base crash": {base, map[string]func() ([]flow.Sample, error){"base#1": crash, "cand#1": stall}, "base cand", "", false},
	} {
		l := &scriptLab{plan: c.plan}
		_, _, err := bot.RunRound(context.Background(), l, "qemu", c.base, cand, 3, io.Discard)
		if got := strings.Join(l.boots, " "); got != c.boots {
			t.Errorf("%s: boots %q, want %q", name, got, c.boots)
		}
		var re *bot.RoundError
		switch {
		case c.wantInfra && !flow.IsInfra(err):
			t.Errorf("%s: %v, want the lab's fault", name, err)
		case c.wantSide != "" && (!errors.As(err, &re) || re.Side != c.wantSide || flow.IsInfra(err)):
			t.Errorf("%s: %v, want the %s's failure", name, err, c.wantSide)
		case c.wantSide == "" && !c.wantInfra && err != nil:
			t.Errorf("%s: %v", name, err)
		}
	}
}

// scriptProfile is a lab profile whose boots scriptLab answers.
type scriptProfile struct{ l *scriptLab }

func (p scriptProfile) Name() string           { return "pressure-siw" }
func (p scriptProfile) Shapes(string) bool     { return true }
func (p scriptProfile) Why(flow.Series) string { return "it asks" }
func (p scriptProfile) Boots() int             { return 2 }
func (p scriptProfile) Run(ctx context.Context, pair string, k flow.Boot, i int, trace io.Writer) ([]flow.Sample, error) {
	return p.l.Run(ctx, pair, k, 1, trace)
}

// A profile's candidate boot that stalls (the kernel reported nothing)
// is booted once more before the profiles end; a crash the kernel
// reported, or a stall of the base, is not.
func TestRunProfilesConfirmsAStall(t *testing.T) {
	base, cand := flow.Boot{Dir: "base"}, flow.Boot{Dir: "cand"}
	stall := func() ([]flow.Sample, error) {
		return []flow.Sample{{Crash: "pressure load stalled: not done 97 s after the mount (30 s of load) on siw, NFS 4.1", Stall: true}}, nil
	}
	crash := func() ([]flow.Sample, error) { return []flow.Sample{{Crash: "WARNING in __ib_drain_sq"}}, nil }
	for name, c := range map[string]struct {
		plan  map[string]func() ([]flow.Sample, error)
		boots string
		cand  int
	}{
		"stall confirmed":     {map[string]func() ([]flow.Sample, error){"cand#1": stall, "cand#2": stall}, "base cand cand", 2},
		"stall once":          {map[string]func() ([]flow.Sample, error){"cand#1": stall}, "base cand cand", 2},
		"a reported crash":    {map[string]func() ([]flow.Sample, error){"cand#1": crash}, "base cand", 1},
		"a stall of the base": {map[string]func() ([]flow.Sample, error){"base#1": stall}, "base", 0},
	} {
		l := &scriptLab{plan: c.plan}
		_, cs, err := bot.RunProfiles(context.Background(), []bot.Profile{scriptProfile{l}}, "qemu", base, cand, "b", "c",
			func(bot.Profile) string { return "the series asks" }, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := strings.Join(l.boots, " "); got != c.boots || len(cs) != c.cand {
			t.Errorf("%s: boots %q, %d candidate samples; want %q, %d", name, got, len(cs), c.boots, c.cand)
		}
		for _, s := range cs {
			if s.Profile != "pressure-siw" {
				t.Errorf("%s: a candidate sample of profile %q", name, s.Profile)
			}
		}
	}
}
