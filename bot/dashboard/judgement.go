package dashboard

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/rdmabot/rdmabot/reports"
	"github.com/rdmabot/rdmabot/reports/stats"
)

// storedJudgement is a test's Detail as the decision stored it (wire's
// Reports.Decide): the statistics' judgement that every reply renders.
type storedJudgement struct {
	Judgement *reports.Judgement `json:"judgement"`
}

// JudgementView is a test's stored judgement as its page shows it: the
// reply's metric table, row by row, and what the decision said.
type JudgementView struct {
	Outcome string
	Reason  string
	// Level is the intervals' confidence (0.99), Alpha the level each
	// rank test was held to.
	Level, Alpha float64
	// More is the runs per kernel it still wanted (an undecided end).
	More int
	Rows []MetricRow
	// Err says why a stored detail could not be read.
	Err string
}

// MetricRow is one metric's comparison: each kernel's mean ± sd over its
// runs, the change of the median with its bootstrap interval, the rank
// test's p, the runs per kernel and what the comparison concluded.
type MetricRow struct {
	Metric, Base, Change, Interval, Patched, P, Runs, Verdict string
}

// judgementView reads a test's stored detail: nil when it holds no
// judgement (a failure's detail, or none), Err when it cannot be read.
func judgementView(detail string) (*reports.Judgement, *JudgementView) {
	if detail == "" {
		return nil, nil
	}
	var d storedJudgement
	if err := json.Unmarshal([]byte(detail), &d); err != nil {
		return nil, &JudgementView{Err: err.Error()}
	}
	j := d.Judgement
	if j == nil {
		return nil, nil
	}
	v := &JudgementView{Outcome: j.Outcome, Reason: j.Reason, More: j.Decision.More, Level: 0.99}
	for _, c := range j.Decision.Comparisons {
		v.Level, v.Alpha = c.Level, c.TestAlpha
		label := c.Name
		if c.Unit != "" {
			label += " " + c.Unit
		}
		v.Rows = append(v.Rows, MetricRow{Metric: label, Base: meanSD(c.Base), Change: change(c.CI.Ratio),
			Interval: change(c.CI.Lo) + ".." + change(c.CI.Hi), Patched: meanSD(c.Cand), P: pValue(c.Test.P),
			Runs: fmt.Sprintf("%d/%d", len(c.Base), len(c.Cand)), Verdict: c.Change.String()})
	}
	return j, v
}

// The cells are written as the reply writes them (reports' metric table),
// so that the page and the mail agree to the digit.

func meanSD(v []float64) string {
	m, s := stats.MeanStd(v)
	return fmt.Sprintf("%.2f ± %.2f", m, s)
}

func change(ratio float64) string {
	if math.IsNaN(ratio) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*(ratio-1))
}

func pValue(p float64) string {
	if p < 0.0001 {
		return "<0.0001"
	}
	return fmt.Sprintf("%.4f", p)
}
