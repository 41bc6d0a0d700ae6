package dashboard

import (
	"encoding/json"

	"github.com/rdmabot/rdmabot/reports"
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
	// Fstests is the fstests boots' account as the reply gives it.
	Fstests *FstestsView
	// Err says why a stored detail could not be read.
	Err string
}

// FstestsView is the fstests boots of a judgement: the reply's sentence,
// its table's rows (test, base, patched, time, class) and the patched
// kernel's evidence of each test that decided.
type FstestsView struct {
	Para     string
	Rows     [][]string
	Evidence [][2]string
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
	v := &JudgementView{Outcome: j.Outcome.String(), Reason: j.Reason, More: j.Decision.More, Level: 0.99}
	for _, c := range j.Decision.Comparisons {
		v.Level, v.Alpha = c.Level, c.TestAlpha
	}
	// The reply's own cells, so that the page and the mail agree to the
	// digit.
	rows := reports.MetricRows(j.Decision)
	for _, r := range rows[1:] {
		v.Rows = append(v.Rows, MetricRow{Metric: r[0], Base: r[1], Change: r[2], Interval: r[3], Patched: r[4], P: r[5], Runs: r[6], Verdict: r[7]})
	}
	if j.Fstests != nil {
		para, rows, evidence := reports.FstestsText(j.Fstests)
		v.Fstests = &FstestsView{Para: para, Rows: rows[1:], Evidence: evidence}
	}
	return j, v
}
