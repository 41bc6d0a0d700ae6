package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/reports"
)

// The index puts a series' versions together under one header, newest
// first, and filters by verdict, list (by name), kind, state and
// subject through a plain GET form; /api/tests takes the same query.
func TestIndexGroupsAndFiltersInChromium(t *testing.T) {
	st, ids := seed(t)
	ctx := context.Background()
	ann := map[int]int64{}
	for _, c := range []struct {
		v       int
		subject string
		verdict flow.Outcome
	}{{1, "xprtrdma: fix the reconnect", flow.Regression}, {2, "xprtrdma: fix the reconnect", flow.Pass},
		{3, "xprtrdma: Fix the reconnect", flow.Crash}} {
		data, _ := json.Marshal(flow.Series{MsgID: fmt.Sprintf("x%d@ann", c.v), Version: c.v})
		sid, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: fmt.Sprintf("x%d@ann", c.v), Version: c.v, Tree: "nfs", Subject: c.subject,
			Author: "Ann <ann@example.org>", List: "linux-nfs@vger.kernel.org", Data: data})
		if err != nil {
			t.Fatal(err)
		}
		id, _, err := st.AddTest(ctx, st.DB, store.Test{Key: fmt.Sprintf("ann%d", c.v), Kind: "series", SeriesID: sid, Tree: "nfs"})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.UpdateTest(ctx, st.DB, store.Test{ID: id, Tree: "nfs", State: store.StateDone, Verdict: c.verdict}); err != nil {
			t.Fatal(err)
		}
		ann[c.v] = id
	}
	srv := server(t, st)
	row := func(id int64) string { return fmt.Sprintf(`<tr><td><a href="/tests/%d">%d</a></td>`, id, id) }

	dom := chromium(t, srv.URL+"/")
	header := `<tr class="group"><th colspan="8">xprtrdma: Fix the reconnect (Ann &lt;ann@example.org&gt;): 3 tests of v1, v2, v3</th></tr>`
	h, v3, v2, v1 := strings.Index(dom, header), strings.Index(dom, row(ann[3])), strings.Index(dom, row(ann[2])), strings.Index(dom, row(ann[1]))
	if h < 0 || !(h < v3 && v3 < v2 && v2 < v1) {
		t.Errorf("the versions are not together under their header, newest first (%d %d %d %d):\n%s", h, v3, v2, v1, dom)
	}
	// The seed's v3 to v5 (posted without an author) are one group.
	if !strings.Contains(dom, `<th colspan="8">svcrdma: fix the send path: 3 tests of v3, v4, v5</th>`) ||
		!strings.Contains(dom, `<form method="get" action="/" id="filter">`) || strings.Contains(dom, "shown)") {
		t.Errorf("index:\n%s", dom)
	}

	dom = chromium(t, srv.URL+"/?verdict=REGRESSION&list=linux-rdma")
	for _, want := range []string{row(ids["regressed"]), row(ids["reported"]), "<option selected=\"\">REGRESSION</option>", "<option selected=\"\">linux-rdma</option>",
		fmt.Sprintf("(2 of %d shown)", len(ids)-2+3)} {
		if !strings.Contains(dom, want) {
			t.Errorf("?verdict=REGRESSION&list=linux-rdma: no %q in\n%s", want, dom)
		}
	}
	for _, not := range []string{row(ann[1]), row(ids["measured"]), row(ids["crashed"])} {
		if strings.Contains(dom, not) {
			t.Errorf("?verdict=REGRESSION&list=linux-rdma shows %q:\n%s", not, dom)
		}
	}
	body := getBody(t, srv.URL+"/?list=linux-nfs@vger.kernel.org&q=RECONNECT&kind=series&state=done")
	if !strings.Contains(body, header) || strings.Contains(body, row(ids["measured"])) || !strings.Contains(body, "(3 of ") {
		t.Errorf("by list address and subject:\n%s", body)
	}
	if body := getBody(t, srv.URL+"/?verdict=NOPE"); !strings.Contains(body, "no test matches") || !strings.Contains(body, "<option selected>NOPE</option>") {
		t.Errorf("?verdict=NOPE:\n%s", body)
	}
	var api []TestView
	if err := json.Unmarshal([]byte(getBody(t, srv.URL+"/api/tests?verdict=REGRESSION&list=linux-rdma")), &api); err != nil {
		t.Fatal(err)
	}
	if len(api) != 2 || api[0].List != "linux-rdma@vger.kernel.org" || api[0].Version != 5 {
		t.Errorf("/api/tests?verdict=REGRESSION&list=linux-rdma: %+v", api)
	}
	if body := getBody(t, srv.URL+"/api/tests?verdict=NOPE"); strings.TrimSpace(body) != "[]" {
		t.Errorf("/api/tests?verdict=NOPE: %s", body)
	}
}

// /reports groups the crashes by title: the judgement's crash, else the
// summary's first line, so that one bug met by two series is one row.
func TestCrashesByTitleInChromium(t *testing.T) {
	st, ids := seed(t)
	ctx := context.Background()
	detail, _ := json.Marshal(storedJudgement{&reports.Judgement{Outcome: flow.Crash, Crash: &reports.Crash{Title: "hung in __ib_drain_sq", Console: "INFO: task hung"}}})
	add := func(key, summary, detail string) int64 {
		id, _, err := st.AddTest(ctx, st.DB, store.Test{Key: key, Kind: "ref", Tree: "rdma", Ref: key})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.UpdateTest(ctx, st.DB, store.Test{ID: id, Tree: "rdma", State: store.StateDone, Verdict: flow.Crash, Summary: summary, Detail: detail}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	same := add("for-next", "the patched kernel crashed where the base did not", string(detail))
	other := add("for-rc", "BUG: KASAN: use-after-free in svc_rdma_send\nmore", "")
	dom := chromium(t, server(t, st).URL+"/reports")
	for _, want := range []string{`<h2 id="crashes">Crashes by title: 2</h2>`,
		fmt.Sprintf(`<td class="crash">hung in __ib_drain_sq</td><td>2</td><td><a href="/tests/%d">test %d</a> rdma for-next<br><a href="/tests/%d">test %d</a> svcrdma: fix the send path</td>`, same, same, ids["crashed"], ids["crashed"]),
		fmt.Sprintf(`<td class="crash">BUG: KASAN: use-after-free in svc_rdma_send</td><td>1</td><td><a href="/tests/%d">test %d</a> rdma for-rc</td>`, other, other)} {
		if !strings.Contains(dom, want) {
			t.Errorf("no %q in\n%s", want, dom)
		}
	}
}
