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
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/reports"
	"github.com/rdmabot/rdmabot/reports/reply"
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
		"base crash":        {base, map[string]func() ([]flow.Sample, error){"base#1": crash}, "base cand", "", false},
		"candidate no boot": {base, map[string]func() ([]flow.Sample, error){"cand#1": noBoot}, "base cand", "candidate", false},
		"base no boot":      {base, map[string]func() ([]flow.Sample, error){"base#2": noBoot}, "base cand base", "base", false},
		"lab fault":         {base, map[string]func() ([]flow.Sample, error){"cand#3": infra}, "base cand base cand base cand", "", true},
		// A stall the kernel did not report, or a crash it reported, in
		// one candidate boot is booted once more on both sides: a second
		// failure ends the round, a clean boot lets it go on, and in
		// the round's last boot it adds a boot past n.
		"a stall confirmed":           {base, map[string]func() ([]flow.Sample, error){"cand#1": stall, "cand#2": stall}, "base cand base cand", "", false},
		"a stall not seen again":      {base, map[string]func() ([]flow.Sample, error){"cand#1": stall}, "base cand base cand base cand", "", false},
		"a stall in the last boot":    {base, map[string]func() ([]flow.Sample, error){"cand#3": stall}, "base cand base cand base cand base cand", "", false},
		"a stall beside a base crash": {base, map[string]func() ([]flow.Sample, error){"base#1": crash, "cand#1": stall}, "base cand", "", false},
		"a crash confirmed":           {base, map[string]func() ([]flow.Sample, error){"cand#1": crash, "cand#2": crash}, "base cand base cand", "", false},
		"a crash, then a stall":       {base, map[string]func() ([]flow.Sample, error){"cand#1": crash, "cand#2": stall}, "base cand base cand", "", false},
		"a crash not seen again":      {base, map[string]func() ([]flow.Sample, error){"cand#2": crash}, "base cand base cand base cand", "", false},
		"a crash in the last boot":    {base, map[string]func() ([]flow.Sample, error){"cand#3": crash}, "base cand base cand base cand base cand", "", false},
		"a crash, no base":            {flow.Boot{}, map[string]func() ([]flow.Sample, error){"cand#1": crash}, "cand cand cand", "", false},
		"a crash beside a base crash": {base, map[string]func() ([]flow.Sample, error){"base#1": crash, "cand#1": crash}, "base cand", "", false},
		"a crash, then no boot":       {base, map[string]func() ([]flow.Sample, error){"cand#1": crash, "cand#2": noBoot}, "base cand base cand", "candidate", false},
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

// A round of one boot (a profile's default, a later round asking for
// one more run) still confirms a failure of its one candidate boot, with
// one more boot of each side; a clean boot stays one.
func TestRunRoundOfOneBootConfirms(t *testing.T) {
	base, cand := flow.Boot{Dir: "base"}, flow.Boot{Dir: "cand", Trusted: "base", Side: "server"}
	crash := func() ([]flow.Sample, error) {
		return []flow.Sample{{Crash: "BUG: KASAN: slab-use-after-free in svc_rdma_free"}}, nil
	}
	for name, c := range map[string]struct {
		plan  map[string]func() ([]flow.Sample, error)
		boots string
		cand  int
	}{
		"clean":                  {nil, "base cand", 1},
		"a crash confirmed":      {map[string]func() ([]flow.Sample, error){"cand#1": crash, "cand#2": crash}, "base cand base cand", 2},
		"a crash not seen again": {map[string]func() ([]flow.Sample, error){"cand#1": crash}, "base cand base cand", 2},
		"a base crash":           {map[string]func() ([]flow.Sample, error){"base#1": crash}, "base cand", 1},
	} {
		l := &scriptLab{plan: c.plan}
		_, cs, err := bot.RunRound(context.Background(), l, "qemu", base, cand, 1, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := strings.Join(l.boots, " "); got != c.boots || len(cs) != c.cand {
			t.Errorf("%s: boots %q, %d candidate samples; want %q, %d", name, got, len(cs), c.boots, c.cand)
		}
	}
}

// A crash of one candidate boot reaches the thread only when the boot
// the round adds for it crashes too: the reply's judgement of the
// round's samples is CRASH either way, but unconfirmed it says "not
// mailed" (reports.Crash.Confirmed decides the audience). A crash in
// the first two boots of a round of two is confirmed with no boot more.
func TestRoundConfirmsACrashBeforeAMail(t *testing.T) {
	base, cand := flow.Boot{Dir: "base"}, flow.Boot{Dir: "cand", Trusted: "base", Side: "server"}
	crash := func() ([]flow.Sample, error) {
		return []flow.Sample{{Crash: "WARNING in __ib_drain_sq", Log: "WARNING: CPU: 0 PID: 7 at drivers/infiniband/core/verbs.c:2745"}}, nil
	}
	oops := func() ([]flow.Sample, error) {
		return []flow.Sample{{Crash: "BUG: unable to handle page fault in svc_rdma_recvfrom"}}, nil
	}
	r := &reply.Replier{Cfg: reports.DefaultConfig(), Lab: lab.DefaultConfig()}
	for name, c := range map[string]struct {
		n      int
		plan   map[string]func() ([]flow.Sample, error)
		boots  string
		mailed bool
	}{
		"confirmed by the second boot":   {3, map[string]func() ([]flow.Sample, error){"cand#1": crash, "cand#2": crash}, "base cand base cand", true},
		"confirmed by another crash":     {3, map[string]func() ([]flow.Sample, error){"cand#1": crash, "cand#2": oops}, "base cand base cand", true},
		"not reproduced":                 {3, map[string]func() ([]flow.Sample, error){"cand#1": crash}, "base cand base cand base cand", false},
		"not reproduced, one-boot round": {1, map[string]func() ([]flow.Sample, error){"cand#1": crash}, "base cand base cand", false},
		"confirmed in a round of one":    {1, map[string]func() ([]flow.Sample, error){"cand#1": crash, "cand#2": crash}, "base cand base cand", true},
		"both boots of a round of two":   {2, map[string]func() ([]flow.Sample, error){"cand#1": crash, "cand#2": crash}, "base cand base cand", true},
	} {
		l := &scriptLab{plan: c.plan}
		bs, cs, err := bot.RunRound(context.Background(), l, "qemu", base, cand, c.n, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := strings.Join(l.boots, " "); got != c.boots {
			t.Errorf("%s: boots %q, want %q", name, got, c.boots)
		}
		d, err := r.Decide(context.Background(), "series:<c@x>:v1:", bs, cs)
		if err != nil {
			t.Fatal(err)
		}
		if d.Verdict != flow.Crash || strings.Contains(d.Summary, "not mailed") == c.mailed {
			t.Errorf("%s: %s %q, want CRASH mailed %v", name, d.Verdict, d.Summary, c.mailed)
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
// or crashes (it did) is booted once more before the profiles end, once
// only; a failure of the base is not.
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
		"a reported crash":    {map[string]func() ([]flow.Sample, error){"cand#1": crash}, "base cand cand", 2},
		"crash confirmed":     {map[string]func() ([]flow.Sample, error){"cand#1": crash, "cand#2": crash}, "base cand cand", 2},
		"a crash in boot 2":   {map[string]func() ([]flow.Sample, error){"cand#2": crash}, "base cand base cand cand", 3},
		"a stall of the base": {map[string]func() ([]flow.Sample, error){"base#1": stall}, "base", 0},
		"a crash of the base": {map[string]func() ([]flow.Sample, error){"base#1": crash}, "base", 0},
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
