package dashboard

import (
	"context"
	"sort"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// AAResults reads the A/A comparisons `rdmabot lab aa` made on the lab
// (cmd/rdmabot reads its results files with aa.Read). They are the
// lab's false alarms measured off schedule, beside the canary's.
type AAResults interface {
	// AAComparisons are every A/A comparison stored; Where says where
	// they are read from. An error may come with those read before it.
	AAComparisons(ctx context.Context) ([]AAComparison, error)
	Where() string
}

// AAComparison is one A/A comparison of `rdmabot lab aa`: one kernel on
// both sides, decided as a series is.
type AAComparison struct {
	File      string       `json:"file"`
	Time      time.Time    `json:"time"`
	Condition string       `json:"condition"` // idle, busy
	Pair      string       `json:"pair"`
	Side      string       `json:"side,omitempty"`
	Profiles  []string     `json:"profiles,omitempty"`
	Verdict   flow.Outcome `json:"verdict"`
	Summary   string       `json:"summary"`
	Rounds    int          `json:"rounds"`
	Seconds   float64      `json:"seconds"`
	Error     string       `json:"error,omitempty"`
}

// AAGroup counts one results file's comparisons made in one condition.
type AAGroup struct {
	File, Condition string
	N               int
	Verdicts        map[string]int // by name: the page indexes it
}

// FalseAlarms are the REGRESSION and IMPROVEMENT verdicts: with one
// kernel on both sides each is a false alarm.
func (g AAGroup) FalseAlarms() int {
	return g.Verdicts[flow.Regression.String()] + g.Verdicts[flow.Improvement.String()]
}

// Measured are the comparisons that reached a verdict on the lab (not
// INFRA: the lab failed, nothing was compared).
func (g AAGroup) Measured() int {
	n := 0
	for _, o := range []flow.Outcome{flow.Pass, flow.Regression, flow.Improvement, flow.Inconclusive} {
		n += g.Verdicts[o.String()]
	}
	return n
}

// Rate is the false alarms per measured comparison.
func (g AAGroup) Rate() float64 {
	if g.Measured() == 0 {
		return 0
	}
	return float64(g.FalseAlarms()) / float64(g.Measured())
}

// AAView is the lab A/A part of /canary.
type AAView struct {
	Where       string
	Groups      []AAGroup
	Comparisons []AAComparison // newest first
	Err         string
}

// aaView reads the A/A comparisons; nil when no reader is set.
func (s *Server) aaView(ctx context.Context) *AAView {
	if s.AA == nil {
		return nil
	}
	cs, err := s.AA.AAComparisons(ctx)
	v := &AAView{Where: s.AA.Where()}
	if err != nil {
		v.Err = err.Error()
		s.log.Warn("dashboard: A/A results", "err", err)
	}
	groups := map[[2]string]*AAGroup{}
	for _, c := range cs {
		k := [2]string{c.File, c.Condition}
		g := groups[k]
		if g == nil {
			g = &AAGroup{File: c.File, Condition: c.Condition, Verdicts: map[string]int{}}
			groups[k] = g
		}
		g.N++
		g.Verdicts[c.Verdict.String()]++
	}
	for _, g := range groups {
		v.Groups = append(v.Groups, *g)
	}
	sort.Slice(v.Groups, func(i, j int) bool {
		if v.Groups[i].File != v.Groups[j].File {
			return v.Groups[i].File < v.Groups[j].File
		}
		return v.Groups[i].Condition < v.Groups[j].Condition
	})
	v.Comparisons = append(v.Comparisons, cs...)
	sort.SliceStable(v.Comparisons, func(i, j int) bool { return v.Comparisons[i].Time.After(v.Comparisons[j].Time) })
	return v
}
