package dashboard

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
)

// A branch whose heads differ by a percent or two is drawn on an axis
// from zero in its unit: the noise is a ripple, not the chart's height,
// and the band says how large it is; a bad head is red.
func TestMainlineChartScale(t *testing.T) {
	var pts []ChartPoint
	for i, v := range []float64{9.00, 9.20, 8.90, 9.10} {
		pts = append(pts, ChartPoint{Commit: fmt.Sprintf("%040d", i), State: store.MainlineGood, Value: v})
	}
	pts = append(pts, ChartPoint{Commit: strings.Repeat("b", 40), State: store.MainlineBad, Value: 7.2})
	svg := string(svgChart("copy_MBps", pts))
	for _, want := range []string{">copy_MBps (MB/s)</text>", ">0 MB/s</text>", ">5 MB/s</text>", ">10 MB/s</text>",
		"band: last 4 good heads: 9.05 ± 0.13 MB/s (±1.4%)", `fill="#c33"><title>bbbbbbbbbbbb copy_MBps 7.20 MB/s (bad)</title>`} {
		if !strings.Contains(svg, want) {
			t.Errorf("no %q in\n%s", want, svg)
		}
	}
	var ys []float64
	for _, m := range regexp.MustCompile(`<circle cx="[0-9.]+" cy="([0-9.]+)"`).FindAllStringSubmatch(svg, -1) {
		y, _ := strconv.ParseFloat(m[1], 64)
		ys = append(ys, y)
	}
	if len(ys) != 5 {
		t.Fatalf("%d heads drawn", len(ys))
	}
	// 172 px from 0 to 10 MB/s: the good heads' 0.3 MB/s is about 5 px,
	// the bad head's 20 % drop about 33 px.
	lo, hi := ys[0], ys[0]
	for _, y := range ys[:4] {
		lo, hi = min(lo, y), max(hi, y)
	}
	if hi-lo > 8 || ys[4]-hi < 25 {
		t.Errorf("good heads spread over %.1f px, the bad head %.1f px below: %v", hi-lo, ys[4]-hi, ys)
	}
	// A metric in seconds, and one that names no unit.
	if svg := string(svgChart("loop_s", pts[:1])); !strings.Contains(svg, ">loop_s (s)</text>") || strings.Contains(svg, "band:") {
		t.Errorf("loop_s:\n%s", svg)
	}
	if svg := string(svgChart("retrans", []ChartPoint{{Commit: "c", State: store.MainlineGood}})); !strings.Contains(svg, ">retrans</text>") || !strings.Contains(svg, ">4</text>") {
		t.Errorf("a zero metric:\n%s", svg)
	}
}

// /mainline says what happens to each scheduled branch before any head
// is tested: the mainline job retrying after seven failed attempts, with
// its error, and the next cron run; a branch tested before has its
// charts; with nothing scheduled or tested it says so.
func TestMainlinePageInChromium(t *testing.T) {
	st, ids := seed(t)
	ctx := context.Background()
	for i, v := range []float64{9.0, 9.2} {
		if _, err := st.AddMainlineRun(ctx, st.DB, store.MainlineRun{Tree: "mainline", Branch: "master", Commit: fmt.Sprintf("eeeeeeeeeeee%04d", i), State: store.MainlineGood,
			Metrics: fmt.Sprintf(`{"copy_MBps": %g}`, v)}); err != nil {
			t.Fatal(err)
		}
	}
	jobs := busyJobs(ids, time.Date(2030, 12, 31, 22, 0, 0, 0, time.UTC))
	jobs.next = append(jobs.next, bot.Schedule{ID: "mainline-0-rdma-for-next", Kind: "mainline", Tree: "rdma", Branch: "for-next", Spec: "CRON_TZ=UTC 0 */6 * * *",
		Next: time.Date(2031, 1, 1, 12, 0, 0, 0, time.UTC)})
	srv := serverWith(t, st, jobs)
	dom := chromium(t, srv.URL+"/mainline")
	master := dom[strings.Index(dom, `<h2 id="mainline-master">`):]
	for _, want := range []string{"4 heads tested.", "Next run at <b>2031-01-02 06:00:00</b> UTC (<code>CRON_TZ=UTC 0 */6 * * *</code>).",
		`<td class="infra">retrying</td><td>mainline 44</td>`, "7 attempts failed, the last: infrastructure: fetch mainline master: git fetch: exit status 128 (attempt 7)",
		"<h2>mainline master: copy_MBps</h2>", ">copy_MBps (MB/s)</text>", "band: last 2 good heads: 9.10 ± 0.14 MB/s"} {
		if !strings.Contains(master, want) {
			t.Errorf("no %q in\n%s", want, master)
		}
	}
	forNext := dom[strings.Index(dom, `<h2 id="rdma-for-next">`):]
	forNext = forNext[:strings.Index(forNext, "<h2>")]
	for _, want := range []string{"No head tested yet.", "Next run at <b>2031-01-01 12:00:00</b>", "No job running or waiting for it."} {
		if !strings.Contains(forNext, want) {
			t.Errorf("no %q in\n%s", want, forNext)
		}
	}
	if strings.Contains(dom, "No scheduled runs yet") {
		t.Error("the page says nothing is scheduled")
	}
	empty, err := store.Open(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if dom := chromium(t, serverWith(t, empty, fakeJobs{}).URL+"/mainline"); !strings.Contains(dom, "No branch is scheduled (bot.mainline) and none was tested.") {
		t.Errorf("empty:\n%s", dom)
	}
}
