package dashboard

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// fakeAA is `rdmabot lab aa`'s results as a test sets them.
type fakeAA struct {
	cs  []AAComparison
	err error
}

func (f fakeAA) AAComparisons(context.Context) ([]AAComparison, error) { return f.cs, f.err }
func (fakeAA) Where() string                                           { return "/var/cache/rdmabot/aa/aa*.jsonl" }

// /canary shows the lab's A/A comparisons beside the scheduled canary's:
// per file and condition the verdicts and the false alarms among the
// measured ones (INFRA measured nothing), then every comparison, newest
// first; a results file that fails to read is said, the rest shown.
func TestCanaryShowsLabAAInChromium(t *testing.T) {
	st, _ := seed(t)
	at := time.Date(2026, 12, 2, 2, 47, 0, 0, time.UTC)
	var cs []AAComparison
	for i := range 3 {
		cs = append(cs, AAComparison{File: "aa.jsonl", Time: at.Add(time.Duration(i) * time.Hour), Condition: "idle", Pair: "qemu", Verdict: flow.Pass,
			Summary: "no change of 5% or more in any metric", Rounds: 1, Seconds: 240})
	}
	cs = append(cs,
		AAComparison{File: "aa.jsonl", Time: at.Add(5 * time.Hour), Condition: "busy", Pair: "qemu", Side: "client", Verdict: flow.Regression, Summary: "copy -6.1%", Rounds: 2, Seconds: 480},
		AAComparison{File: "aa.jsonl", Time: at.Add(4 * time.Hour), Condition: "busy", Pair: "qemu", Verdict: flow.Infra, Error: "lab: guest 2 died", Seconds: 30},
		AAComparison{File: "aa-pressure.jsonl", Time: at.Add(6 * time.Hour), Condition: "idle", Pair: "qemu", Verdict: flow.Pass, Profiles: []string{"pressure-rxe", "pressure-siw"}, Seconds: 300})
	srv := serverWith(t, st, fakeJobs{}, func(d *Server) {
		d.AA = fakeAA{cs: cs, err: errors.New("A/A results: aa-lossy.jsonl: invalid character 'x'")}
	})
	dom := chromium(t, srv.URL+"/canary")
	for _, want := range []string{`<h2 id="lab-aa">`, "<code>/var/cache/rdmabot/aa/aa*.jsonl</code>",
		"<td>aa-pressure.jsonl</td><td>idle</td><td>1</td><td>1</td><td>0</td><td>0</td><td>0</td><td>0</td><td>0 of 1 measured (0.0%)</td>",
		"<td>aa.jsonl</td><td>busy</td><td>2</td><td>0</td><td>1</td><td>0</td><td>0</td><td>1</td><td>1 of 1 measured (100.0%)</td>",
		"<td>aa.jsonl</td><td>idle</td><td>3</td><td>3</td><td>0</td><td>0</td><td>0</td><td>0</td><td>0 of 3 measured (0.0%)</td>",
		`<td>2026-12-02 07:47:00</td><td>aa.jsonl</td><td>busy</td><td>qemu</td><td>client</td><td class="regression">REGRESSION</td><td>2</td><td>480 s</td><td>copy -6.1%</td>`,
		`<span class="infra">lab: guest 2 died</span>`, "(profiles pressure-rxe, pressure-siw)",
		"Not all of them could be read: A/A results: aa-lossy.jsonl: invalid character"} {
		if !strings.Contains(dom, want) {
			t.Errorf("no %q in\n%s", want, dom)
		}
	}
	// Newest first: the pressure file's comparison, then the busy ones.
	if a, b := strings.Index(dom, "<td>2026-12-02 08:47:00</td><td>aa-pressure.jsonl"), strings.Index(dom, "<td>2026-12-02 07:47:00</td>"); a < 0 || b < a {
		t.Errorf("not newest first:\n%s", dom)
	}
	// Nothing stored yet; and no reader: no section.
	if body := getBody(t, serverWith(t, st, fakeJobs{}, func(d *Server) { d.AA = fakeAA{} }).URL+"/canary"); !strings.Contains(body, "No A/A comparison stored there yet.") {
		t.Errorf("empty:\n%s", body)
	}
	if body := getBody(t, server(t, st).URL+"/canary"); strings.Contains(body, "lab-aa") {
		t.Errorf("no reader, yet a section:\n%s", body)
	}
}
