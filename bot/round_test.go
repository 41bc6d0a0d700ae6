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
