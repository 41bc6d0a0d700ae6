package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lab"
	"github.com/rdmabot/rdmabot/reports"
	"github.com/rdmabot/rdmabot/reports/reply"
)

// boots are n boots copying at about copy MB/s, spread apart.
func boots(n int, copy float64) []flow.Sample {
	var out []flow.Sample
	for i := range n {
		c := copy * (1 + 0.02*float64(i%5-2)/2)
		out = append(out, flow.Sample{Metrics: map[string]float64{"copy_MBps": c, "loop_s": 2000 / c}})
	}
	return out
}

// A test's page has the reply's metric table, cell for cell, from the
// judgement the decision stored (reply.Replier.Decide, as serve stores
// it): nothing is judged again. A detail that does not parse says so; a
// failure's detail has no table.
func TestJudgementTableInChromium(t *testing.T) {
	st, ids := seed(t)
	ctx := context.Background()
	r := &reply.Replier{Cfg: reports.DefaultConfig(), Lab: lab.DefaultConfig()}
	d, err := r.Decide(ctx, "series:<test@example.org>:v1:", boots(10, 100), boots(10, 52))
	if err != nil || d.Verdict != flow.Regression {
		t.Fatalf("decide: %+v %v", d, err)
	}
	set := func(name, detail string) string {
		t.Helper()
		tt, err := st.Test(ctx, st.DB, ids[name])
		if err != nil {
			t.Fatal(err)
		}
		tt.Detail = detail
		if err := st.UpdateTest(ctx, st.DB, tt); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("/tests/%d", tt.ID)
	}
	page := set("regressed", string(d.Detail))
	srv := server(t, st)
	dom := chromium(t, srv.URL+page)
	// The reply's table, as reports renders it from the same judgement.
	var stored struct{ Judgement reports.Judgement }
	if err := json.Unmarshal(d.Detail, &stored); err != nil {
		t.Fatal(err)
	}
	v, err := stored.Judgement.Verdict(&reports.Input{})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(reports.Measurements(&v), "\n")
	if !strings.HasPrefix(lines[0], "metric ") || !strings.Contains(lines[0], "99% interval") {
		t.Fatalf("the reply's table:\n%s", reports.Measurements(&v))
	}
	cells := regexp.MustCompile(`\s{2,}`)
	rows := 0
	for _, l := range lines[1:] {
		if strings.TrimSpace(l) == "" {
			break
		}
		rows++
		want := "<tr><td>" + strings.Join(cells.Split(strings.TrimSpace(html.EscapeString(l)), -1), "</td><td>") + "</td></tr>"
		// The verdict cell carries its class.
		want = regexp.MustCompile(`<td>(worse|same|better|open)</td></tr>$`).ReplaceAllString(want, `<td class="$1">$1</td></tr>`)
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks the reply's row\n%s\nin\n%s", want, dom)
		}
	}
	if rows != 2 {
		t.Errorf("%d metric rows in the reply", rows)
	}
	for _, want := range []string{`<h2 id="judgement">Judgement</h2>`, "<th>99% interval</th>", `<td class="worse">worse</td>`,
		`Decided: <span class="regression">REGRESSION</span>.`, "held to 0.0"} {
		if !strings.Contains(dom, want) {
			t.Errorf("no %q in\n%s", want, dom)
		}
	}
	// The API has the judgement itself.
	if body := getBody(t, srv.URL+"/api"+page); !strings.Contains(body, `"judgement": {`) || !strings.Contains(body, `"outcome": "REGRESSION"`) {
		t.Errorf("/api%s:\n%s", page, body)
	}

	broken := set("crashed", `{"judgement": {"outcome": 7`)
	if dom := chromium(t, srv.URL+broken); !strings.Contains(dom, "The stored judgement cannot be read: unexpected end of JSON input") {
		t.Errorf("%s:\n%s", broken, dom)
	}
	// One figure per metric: a page with the judgement shows no second
	// median of other boots beside it (the page of a test without one
	// still has its medians: TestPagesInChromium).
	measured := set("measured", string(d.Detail))
	if body := getBody(t, srv.URL+measured); !strings.Contains(body, `<h2 id="judgement">`) || strings.Contains(body, "<h2>Medians</h2>") {
		t.Errorf("%s shows the medians beside the judgement:\n%s", measured, body)
	}
	apply := set("apply", `{"apply": {"patch": "svcrdma: chain the Write WRs", "index": 2}}`)
	if body := getBody(t, srv.URL+apply); strings.Contains(body, "Judgement") {
		t.Errorf("%s shows a judgement:\n%s", apply, body)
	}
}

// A test that ran the fstests profile shows the reply's fstests table
// and the evidence of the test that decided, from the stored judgement.
func TestJudgementFstestsInChromium(t *testing.T) {
	st, ids := seed(t)
	ctx := context.Background()
	r := &reply.Replier{Cfg: reports.DefaultConfig(), Lab: lab.DefaultConfig()}
	fst := func(status, why string) flow.Sample {
		return flow.Sample{Profile: flow.ProfileFstests + "-rxe", ServerOps: 1200, Tests: []flow.TestResult{
			{Name: "generic/013", Status: flow.TestPass, Secs: 41},
			{Name: "generic/075", Status: status, Secs: 63, Why: why},
		}}
	}
	base := append(boots(10, 100), fst(flow.TestPass, ""))
	cand := append(boots(10, 100), fst(flow.TestFail, "+fsx: operation 112 failed: short read 0x1ff3"))
	d, err := r.Decide(ctx, "series:<test@example.org>:v1:", base, cand)
	if err != nil || d.Verdict != flow.Regression {
		t.Fatalf("decide: %+v %v", d, err)
	}
	tt, err := st.Test(ctx, st.DB, ids["regressed"])
	if err != nil {
		t.Fatal(err)
	}
	tt.Detail = string(d.Detail)
	if err := st.UpdateTest(ctx, st.DB, tt); err != nil {
		t.Fatal(err)
	}
	dom := chromium(t, server(t, st).URL+fmt.Sprintf("/tests/%d", tt.ID))
	for _, want := range []string{`<h3 id="fstests">fstests</h3>`,
		"<tr><td>generic/075</td><td>pass</td><td>fail</td><td>63s</td><td>regressed</td></tr>",
		"<tr><td>generic/013</td><td>pass</td><td>pass</td><td>41s</td><td></td></tr>",
		"<p>generic/075 on the patched kernel:</p><pre>+fsx: operation 112 failed: short read 0x1ff3</pre>",
		`Decided: <span class="regression">REGRESSION</span>.`} {
		if !strings.Contains(dom, want) {
			t.Errorf("no %q in\n%s", want, dom)
		}
	}
}
