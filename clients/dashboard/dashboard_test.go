package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/fakestage"
	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/reports/bundle"
	"github.com/rdmabot/rdmabot/reports/outbox"
)

// fakeJobs is the bot's job table as a test sets it: the jobs not
// finished (err fails reading them) and the periodic jobs.
type fakeJobs struct {
	active []*rivertype.JobRow
	next   []bot.Schedule
	err    error
}

func (fakeJobs) JobsOfTest(context.Context, int64) ([]*rivertype.JobRow, error) { return nil, nil }
func (fakeJobs) FalseAlarmRates(context.Context) ([]bot.FalseAlarms, []store.Canary, error) {
	return nil, nil, nil
}
func (f fakeJobs) ActiveJobs(_ context.Context, limit int) ([]*rivertype.JobRow, error) {
	return f.active[:min(limit, len(f.active))], f.err
}
func (f fakeJobs) Schedules(time.Time) ([]bot.Schedule, error) { return f.next, nil }

// seed fills a SQLite store through its API: a series tested with
// APPLY_FAILED, a measured test with runs, a trace, a bisection with a
// step, a mainline history, and a failing and a healthy source.
func seed(t *testing.T) (*store.Store, map[string]int64) {
	ctx := context.Background()
	st, err := store.Open(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ids := map[string]int64{}
	// Two patches as mail, and a third that is missing from the row.
	patch := func(n int, subject string) *flow.Message {
		return fakestage.Mail(fmt.Sprintf("From: Chuck <cel@kernel.org>\nSubject: [PATCH v2 %d/3] %s\nMessage-ID: <p%d@x>\n\nbody\n", n, subject, n))
	}
	link := "https://lore.kernel.org/linux-rdma/a@x/"
	data, err := json.Marshal(flow.Series{MsgID: "a@x", Version: 2, Link: link, List: "linux-rdma@vger.kernel.org",
		Patches: []*flow.Message{patch(1, "svcrdma: count Send WRs"), patch(2, "svcrdma: chain the Write WRs"), nil}})
	if err != nil {
		t.Fatal(err)
	}
	sid, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: "a@x", Version: 2, Tree: "rdma", Subject: "svcrdma: fix the send path", Author: "cel@kernel.org", Link: link, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	add := func(name string, tst store.Test) {
		id, _, err := st.AddTest(ctx, st.DB, tst)
		if err != nil {
			t.Fatal(err)
		}
		tst.ID = id
		if err := st.UpdateTest(ctx, st.DB, tst); err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	add("apply", store.Test{Key: "k1", Kind: "series", SeriesID: sid, Tree: "rdma", Base: "0123456789abcdef0123", State: "done", Verdict: flow.ApplyFailed, Summary: "patch 2/3 does not apply"})
	add("measured", store.Test{Key: "k2", Kind: "series", SeriesID: sid, Tree: "rdma", Base: "fedcba9876543210fedc", Candidate: "1111111111112222", State: "done", Verdict: flow.Pass, Summary: "no change", Lab: "qemu",
		BaseBranch: "for-next", BaseReason: "the rdma tree's rule: a series for its files goes on for-next"})
	// Version 3 regressed (its reply is held); version 4 crashed, no reply yet.
	// Replies are keyed by the series' root message and version, as
	// wire keys them: the first patch (no cover letter), p1@x.
	version := func(v int) []byte {
		var ser flow.Series
		json.Unmarshal(data, &ser)
		ser.Version = v
		b, _ := json.Marshal(ser)
		return b
	}
	sid3, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: "a@x", Version: 3, Tree: "rdma", Subject: "svcrdma: fix the send path", Link: link, Data: version(3)})
	if err != nil {
		t.Fatal(err)
	}
	add("regressed", store.Test{Key: "k3", Kind: "series", SeriesID: sid3, Tree: "rdma", Base: "fedcba9876543210fedc", State: "done", Verdict: flow.Regression, Summary: "copy -20%"})
	sid4, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: "a@x", Version: 4, Tree: "rdma", Subject: "svcrdma: fix the send path", Link: link, Data: version(4)})
	if err != nil {
		t.Fatal(err)
	}
	add("crashed", store.Test{Key: "k4", Kind: "series", SeriesID: sid4, Tree: "rdma", Base: "fedcba9876543210fedc", State: "done", Verdict: flow.Crash, Summary: "hung in __ib_drain_sq"})
	// Version 5 regressed, and a later series closed its report: the
	// rerun with that fix passed.
	sid5, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: "a@x", Version: 5, Tree: "rdma", Subject: "svcrdma: fix the send path", Link: link, Data: version(5)})
	if err != nil {
		t.Fatal(err)
	}
	add("reported", store.Test{Key: "k5", Kind: "series", SeriesID: sid5, Tree: "rdma", Base: "fedcba9876543210fedc", Candidate: "5555555555555555", State: "done", Verdict: flow.Regression, Summary: "copy -31%"})
	fixData, _ := json.Marshal(flow.Series{MsgID: "fix@x", Version: 1, Patches: []*flow.Message{fakestage.Mail("From: Chuck <cel@kernel.org>\nSubject: [PATCH] svcrdma: post the Write WRs before the Send\nMessage-ID: <fix@x>\n\nbody\n")}})
	fixSid, err := st.AddSeries(ctx, st.DB, store.SeriesRow{MsgID: "fix@x", Version: 1, Tree: "rdma", Subject: "svcrdma: post the Write WRs before the Send", Data: fixData})
	if err != nil {
		t.Fatal(err)
	}
	add("fix", store.Test{Key: "k6", Kind: "series", SeriesID: fixSid, Tree: "rdma", Base: "fedcba9876543210fedc", State: "done", Verdict: flow.Pass, Summary: "no change",
		FixOf: ids["reported"], ApplyOn: "5555555555555555"})
	for i, role := range []string{"base", "candidate"} {
		consoles := map[string]string{}
		for _, guest := range []string{"server", "client"} {
			id, err := st.PutConsole(ctx, fmt.Sprintf("Linux version 6.12 (%s %s)\n", role, guest))
			if err != nil {
				t.Fatal(err)
			}
			consoles[guest] = id
		}
		if err := st.SaveRun(ctx, st.DB, store.Run{TestID: ids["measured"], JobID: 7, Round: 1, Role: role, Commit: "abcabcabcabc0000", Lab: "qemu",
			Samples:   []flow.Sample{{Metrics: map[string]float64{"read_mbps": 100 + float64(i)*10}, Health: map[string]int{"retrans": 7 * i, "reconnects": 0}, Consoles: consoles}},
			StartedAt: time.Now(), FinishedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AppendTrace(ctx, 7, "build: started", "build: kernel ready"); err != nil {
		t.Fatal(err)
	}
	bid, _, err := st.AddBisection(ctx, st.DB, store.Bisection{Key: "b1", Tree: "mainline", Good: "aaaaaaaaaaaaaaaa", Bad: "bbbbbbbbbbbbbbbb", Metric: "read_mbps"})
	if err != nil {
		t.Fatal(err)
	}
	ids["bisect"] = bid
	if err := st.AddBisectStep(ctx, st.DB, bid, flow.BisectStep{N: 1, Phase: "bisect", Commit: "cccccccccccccccc", Outcome: "bad", Detail: "read_mbps -12%", JobID: 7, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// The regressed series' prefixes were tested: patch 2 is first bad.
	sb, _, err := st.AddBisection(ctx, st.DB, store.Bisection{Key: "series-test:x", Tree: "rdma", Good: "fedcba9876543210fedc", Bad: "dddddddddddddddd", Metric: "copy_MBps", TestID: ids["regressed"]})
	if err != nil {
		t.Fatal(err)
	}
	ids["series-bisect"] = sb
	if err := st.UpdateBisection(ctx, st.DB, store.Bisection{ID: sb, State: store.BisectionDone, Culprit: "eeeeeeeeeeeeeeee", CulpritPatch: 2, Summary: "first bad: patch 2/3"}); err != nil {
		t.Fatal(err)
	}
	for i, c := range []string{"dddddddddddd0001", "dddddddddddd0002"} {
		if _, err := st.AddMainlineRun(ctx, st.DB, store.MainlineRun{Tree: "mainline", Branch: "master", Commit: c, TestID: int64(100 + i), State: []store.MainlineState{store.MainlineGood, store.MainlineBad}[i], Metrics: fmt.Sprintf(`{"read_mbps": %d}`, 100-i*20)}); err != nil {
			t.Fatal(err)
		}
	}
	// The measured test's reply, held for moderation, and a check.
	l, err := outbox.OpenLedger(ctx, st.DB)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := outbox.New(l, t.TempDir(), outbox.Policy{Moderate: true}, nil, time.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	check, err := outbox.FromCheck("<p1@x>", "p1@x", 2, outbox.PhaseFinal, "cel@kernel.org", outbox.Check{State: "success", Context: "rdmabot"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []outbox.Reply{{MessageID: "r1@rdmabot", Key: outbox.Key("email", "p1@x", 2), Channel: "email", Outcome: "PASS",
		Recipient: "cel@kernel.org", Envelope: []string{"cel@kernel.org"}, Lists: []string{"linux-rdma@vger.kernel.org"}, Raw: []byte("Subject: Re: [PATCH v2 0/3]\n\nrdmabot tested this series\n")},
		check, {MessageID: "r9@rdmabot", Key: outbox.Key("email", "p1@x", 3), Channel: "email", Outcome: "REGRESSION", Recipient: "cel@kernel.org",
			Envelope: []string{"cel@kernel.org"}, Raw: []byte("Subject: v3\n\nnot this version\n")}} {
		if _, err := ob.Enqueue(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.RecordHealth(ctx, st.DB, "list", "linux-rdma", time.Second, errors.New("imap: connection refused")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordHealth(ctx, st.DB, "tree", "rdma", time.Second, nil); err != nil {
		t.Fatal(err)
	}
	return st, ids
}

// testReproducer makes bundles as reproduce.Maker does, from the stored
// series, for every measured test; an APPLY_FAILED one fails to. Its
// archives are made once, as reproduce.Maker's are.
type testReproducer struct {
	st       *store.Store
	archives *bundle.Cache
}

func (r testReproducer) Archive(ctx context.Context, id int64, now time.Time) (*os.File, string, error) {
	b, err := r.Bundle(ctx, id)
	if err != nil {
		return nil, "", err
	}
	f, err := r.archives.Open(ctx, b, now)
	return f, b.Dir + ".tar.gz", err
}

func (r testReproducer) Bundle(ctx context.Context, id int64) (*bundle.Bundle, error) {
	t, err := r.st.Test(ctx, r.st.DB, id)
	if err != nil {
		return nil, err
	}
	if t.Verdict == flow.ApplyFailed {
		return nil, errors.New("reproducer: broken on purpose")
	}
	row, err := r.st.Series(ctx, r.st.DB, t.SeriesID)
	if err != nil {
		return nil, err
	}
	var s flow.Series
	if err := json.Unmarshal(row.Data, &s); err != nil {
		return nil, err
	}
	var raws [][]byte
	for _, m := range s.Patches[:min(2, len(s.Patches))] {
		raws = append(raws, m.Raw)
	}
	return bundle.Make(bundle.Input{TestID: id, Subject: row.Subject, Base: strings.Repeat("ab", 20), Patches: raws,
		Config: []byte("CONFIG_INFINIBAND=y\n"), Settings: []byte("[lab]\n")})
}

func server(t *testing.T, st *store.Store) *httptest.Server {
	return serverWith(t, st, fakeJobs{})
}

// serverWith is server over the given jobs; set changes the dashboard
// before it serves.
func serverWith(t *testing.T, st *store.Store, jobs Jobs, set ...func(*Server)) *httptest.Server {
	mux := http.NewServeMux()
	d := New(st, jobs, slog.New(slog.NewTextHandler(io.Discard, nil)))
	d.Reproducer = testReproducer{st, bundle.NewCache(t.TempDir(), 0)}
	l, err := outbox.OpenLedger(context.Background(), st.DB)
	if err != nil {
		t.Fatal(err)
	}
	d.Replies = l
	d.Lists = map[string]string{"linux-rdma": "linux-rdma@vger.kernel.org", "linux-nfs": "linux-nfs@vger.kernel.org"}
	for _, f := range set {
		f(d)
	}
	d.Register(mux)
	// /probe/...: the page at ... with a script that writes the computed
	// colour of every element with a class into the DOM, so that
	// --dump-dom shows what the CSS did.
	mux.HandleFunc("GET /probe/", func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		r2 := r.Clone(r.Context())
		r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/probe")
		mux.ServeHTTP(rec, r2)
		script := `<pre id="probe"></pre><script>
var out=[];document.querySelectorAll("[class]").forEach(function(e){out.push(e.className+"="+getComputedStyle(e).color)});
document.getElementById("probe").textContent=out.join("\n");</script></body>`
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, strings.Replace(rec.Body.String(), "</body>", script, 1))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// chromium loads url in headless Chromium and returns the DOM after
// scripts ran.
func chromium(t *testing.T, url string) string {
	t.Helper()
	bin := "/usr/bin/chromium"
	if _, err := os.Stat(bin); err != nil {
		t.Skip("no headless chromium at /usr/bin/chromium")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir="+t.TempDir(), "--dump-dom", url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, stderr.String())
	}
	return string(out)
}

// getBody is the body of a GET that must answer 200.
func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}

func TestPagesInChromium(t *testing.T) {
	st, ids := seed(t)
	srv := server(t, st)
	pages := []struct {
		path string
		want []string
	}{
		{"/", []string{"svcrdma: fix the send path", `class="apply_failed"`, "APPLY_FAILED", "<h2>Sources</h2>",
			"linux-rdma", "failing (1 in a row", "imap: connection refused", fmt.Sprintf(`href="/bisect/%d"`, ids["bisect"])}},
		{fmt.Sprintf("/tests/%d", ids["apply"]), []string{"test " + fmt.Sprint(ids["apply"]), `class="apply_failed"`, "patch 2/3 does not apply"}},
		{fmt.Sprintf("/tests/%d", ids["measured"]), []string{"<h2>Medians</h2>", "read_mbps", "+10.0%", "no change", `<span class="crash">retrans=7</span>`,
			`<a href="https://lore.kernel.org/linux-rdma/a@x/">archive</a>`, "<h2>Patches</h2>", "[PATCH v2 2/3] svcrdma: chain the Write WRs", "&lt;p2@x&gt;",
			"patch 3: ", "Replies and checks", "<td>email</td>", "held", "rdmabot tested this series", "patchwork:p1@x", "<td>ready</td>",
			`aria-label="read_mbps per boot"`, "base (1 boots)", "patched (1 boots)", "<title>patched boot 1: 110.00</title>",
			"<code>fedcba9876543210fedc</code> on rdma/for-next, chosen by the rdma tree's rule: a series for its files goes on for-next"}},
		{fmt.Sprintf("/bisect/%d", ids["bisect"]), []string{"bisection " + fmt.Sprint(ids["bisect"]), "read_mbps -12%", "cccccccccccc", `href="/jobs/7/trace"`}},
		{fmt.Sprintf("/tests/%d", ids["regressed"]), []string{`[PATCH v2 2/3] svcrdma: chain the Write WRs <code>&lt;p2@x&gt;</code> <span class="crash">first bad patch</span>`,
			fmt.Sprintf(`<a href="/bisect/%d">bisection %d</a>, done: first bad: patch 2/3.`, ids["series-bisect"], ids["series-bisect"])}},
		{fmt.Sprintf("/bisect/%d", ids["series-bisect"]), []string{fmt.Sprintf(`the patches of <a href="/tests/%d">test %d</a>: patch 2 is the first bad one`, ids["regressed"], ids["regressed"])}},
		{"/mainline", []string{"mainline master: read_mbps", "<svg", "dddddddddddd", `class="bad"`}},
		{"/jobs/7/trace", []string{"build: started", "build: kernel ready"}},
		{"/reports", []string{`<h2 id="held">held: 1</h2>`, fmt.Sprintf(`<a href="/tests/%d">`, ids["regressed"]), "copy -20%",
			`<h2 id="none">none: 1</h2>`, "hung in __ib_drain_sq", `<h2 id="sent">sent: 0</h2>`,
			`<h2 id="fixed">fixed: 1</h2>`, fmt.Sprintf(`copy -31%% Confirmed fixed by <a href="/tests/%d">test %d</a>.`, ids["fix"], ids["fix"])}},
		{fmt.Sprintf("/tests/%d", ids["reported"]), []string{fmt.Sprintf(`Fix follow-up: <a href="/tests/%d">test %d</a> (svcrdma: post the Write WRs before the Send) reran this test with its fix: <strong>confirmed fixed</strong>.`, ids["fix"], ids["fix"])}},
		{fmt.Sprintf("/tests/%d", ids["fix"]), []string{fmt.Sprintf(`This series closes the report of <a href="/tests/%d">test %d</a> (REGRESSION: svcrdma: fix the send path), and this test reran it with the series: <strong>confirmed fixed</strong>.`, ids["reported"], ids["reported"])}},
		{"/lists", []string{`<h2 id="linux-rdma">linux-rdma &lt;linux-rdma@vger.kernel.org&gt;</h2>`, "failing (1 in a row", "imap: connection refused",
			"Replies not sent yet: 1", "Series tested: 5", `<h2 id="linux-nfs">`, "not read yet"}},
	}
	for _, p := range pages {
		dom := chromium(t, srv.URL+p.path)
		for _, w := range p.want {
			if !strings.Contains(dom, w) {
				t.Errorf("%s: no %q in\n%s", p.path, w, dom)
			}
		}
	}
	// The measured test's page links its reproducer; the download and
	// each file are served, and the test whose bundle fails says so.
	measured := fmt.Sprintf("/tests/%d", ids["measured"])
	dom := chromium(t, srv.URL+measured)
	for _, w := range []string{"Reproduce without rdmabot", `href="` + measured + `/reproducer.tar.gz"`, `href="` + measured + `/files/series.mbox"`,
		`href="` + measured + `/files/kernel.config"`, `href="` + measured + `/files/run.sh"`} {
		if !strings.Contains(dom, w) {
			t.Errorf("%s: no %q in\n%s", measured, w, dom)
		}
	}
	if strings.Contains(dom, "not this version") {
		t.Errorf("%s shows another version's reply", measured)
	}
	if dom := chromium(t, srv.URL+fmt.Sprintf("/tests/%d", ids["apply"])); strings.Contains(dom, "Reproduce without rdmabot") {
		t.Errorf("a test whose bundle failed links one:\n%s", dom)
	}
	get := func(path string, code int) string {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != code {
			t.Errorf("%s: %s, want %d: %s", path, resp.Status, code, b)
		}
		return string(b)
	}
	if b := get(measured+"/files/series.mbox", 200); !strings.HasPrefix(b, "From mboxrd@z") || !strings.Contains(b, "Subject: [PATCH v2 2/3] svcrdma: chain the Write WRs") {
		t.Errorf("series.mbox:\n%s", b)
	}
	if b := get(measured+"/files/kernel.config", 200); b != "CONFIG_INFINIBAND=y\n" {
		t.Errorf("kernel.config: %q", b)
	}
	get(measured+"/files/nothing", 404)
	// Every boot's consoles: linked from the page, served in one text in
	// boot order and one by one; a test that kept none says so.
	if !strings.Contains(dom, `href="`+measured+`/consoles"`) || !strings.Contains(dom, ">client console</a>") {
		t.Errorf("%s links no consoles:\n%s", measured, dom)
	}
	all := get(measured+"/consoles", 200)
	b, c := strings.Index(all, "round 1, base boot 1 (abcabcabcabc), server console"), strings.Index(all, "Linux version 6.12 (candidate client)")
	if b < 0 || c < b || strings.Count(all, "=====\n") != 4 {
		t.Errorf("%s/consoles:\n%s", measured, all)
	}
	one := regexp.MustCompile(`/consoles/[0-9a-f]{32}`).FindString(dom)
	if got := get(one, 200); !strings.HasPrefix(got, "Linux version 6.12 (") {
		t.Errorf("%s: %q", one, got)
	}
	get("/consoles/"+strings.Repeat("0", 32), 404)
	get("/consoles/..%2f..%2fetc%2fpasswd", 404)
	get(fmt.Sprintf("/tests/%d/consoles", ids["apply"]), 404)
	get("/tests/x/consoles", 400)
	get(fmt.Sprintf("/tests/%d/reproducer.tar.gz", ids["apply"]), 500)
	get("/tests/999/reproducer.tar.gz", 404)
	names := testenv.TarNames(t, strings.NewReader(get(measured+"/reproducer.tar.gz", 200)))
	if want := fmt.Sprintf("rdmabot-test-%d/", ids["measured"]); len(names) != 6 || names[0] != want || names[2] != want+"run.sh" {
		t.Errorf("reproducer.tar.gz holds %q", names)
	}

	// The failing list is the only failing source: the healthy tree is ok.
	dom = chromium(t, srv.URL+"/")
	if i := strings.Index(dom, "<h2>Sources</h2>"); i < 0 || !strings.Contains(dom[i:], "rdma</td>") || !strings.Contains(dom[i:], "<td>ok</td>") {
		t.Errorf("sources table:\n%s", dom)
	}
}

// TestVerdictColours: every verdict class the pages use is coloured by
// the layout's CSS (APPLY_FAILED was not: the template's class is
// apply_failed).
func TestVerdictColours(t *testing.T) {
	st, ids := seed(t)
	srv := server(t, st)
	for _, path := range []string{"/probe/", fmt.Sprintf("/probe/tests/%d", ids["apply"])} {
		dom := chromium(t, srv.URL+path)
		for _, want := range []string{"apply_failed=rgb(170, 102, 0)", "pass=rgb(42, 122, 42)", "failing=rgb(187, 34, 34)"} {
			if path != "/probe/" && want != "apply_failed=rgb(170, 102, 0)" {
				continue
			}
			if !strings.Contains(dom, want) {
				t.Errorf("%s: no %q in\n%s", path, want, dom)
			}
		}
	}
}

// TestByID: the pages and the API answers about one test or bisection
// share their handling of the path's id.
func TestByID(t *testing.T) {
	st, ids := seed(t)
	srv := server(t, st)
	for _, tc := range []struct {
		path, ctype string
		code        int
		want        string
	}{
		{fmt.Sprintf("/api/tests/%d", ids["apply"]), "application/json", 200, `"subject": "svcrdma: fix the send path"`},
		{fmt.Sprintf("/api/bisect/%d", ids["bisect"]), "application/json", 200, "cccccccccccccccc"},
		{fmt.Sprintf("/tests/%d", ids["apply"]), "text/html; charset=utf-8", 200, "patch 2/3 does not apply"},
		{fmt.Sprintf("/bisect/%d", ids["bisect"]), "text/html; charset=utf-8", 200, "read_mbps -12%"},
		{"/api/tests/x", "", 404, ""},
		{"/bisect/x", "", 404, ""},
		{"/api/tests/999999", "", 404, ""},
		{"/api/bisect/999999", "", 404, ""},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || tc.ctype != "" && resp.Header.Get("Content-Type") != tc.ctype || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d %q, want %d %q with %q:\n%s", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.code, tc.ctype, tc.want, body)
		}
	}
}

// A source's error is shown without the password of any URL in it: an
// imap://user:pass@ list URL with a typo showed the password here.
func TestSourceErrorsHidePasswords(t *testing.T) {
	st, _ := seed(t)
	ctx := context.Background()
	for kind, err := range map[string]error{
		"list": fmt.Errorf(`lore.lists linux-nfs: parse "imaps://rdmabot:s3cret@lore.example:99x/org.kernel.vger.linux-nfs": invalid port ":99x" after host`),
		"tree": fmt.Errorf(`fetch https://cel:t0ken@git.example/nfsd.git: authentication required`),
	} {
		if _, err := st.RecordHealth(ctx, st.DB, kind, "linux-nfs", time.Second, err); err != nil {
			t.Fatal(err)
		}
	}
	srv := server(t, st)
	for _, path := range []string{"/", "/lists", "/metrics"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "s3cret") || strings.Contains(string(body), "t0ken") {
			t.Errorf("%s shows a password:\n%s", path, body)
		}
		if path != "/metrics" && !strings.Contains(string(body), "rdmabot:xxxxx@lore.example") {
			t.Errorf("%s does not show the list's error:\n%s", path, body)
		}
	}
}

// A maintainer's "#rdmabot invalid" moves a failing report under
// "disputed" on /reports and is said on its test page.
func TestDisputedReport(t *testing.T) {
	st, ids := seed(t)
	srv := server(t, st)
	ctx := context.Background()
	if _, err := st.AddDispute(ctx, st.DB, store.Dispute{MsgID: "<inv@x>", TestID: ids["crashed"], Kind: "invalid", Note: "a lab hiccup", By: "maint@example.org"}); err != nil {
		t.Fatal(err)
	}
	get := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	page := get("/reports")
	for _, w := range []string{`<h2 id="disputed">disputed: 1</h2>`, `<h2 id="none">none: 0</h2>`, "hung in __ib_drain_sq"} {
		if !strings.Contains(page, w) {
			t.Errorf("/reports: no %q in\n%s", w, page)
		}
	}
	if page := get(fmt.Sprintf("/tests/%d", ids["crashed"])); !strings.Contains(page, "maint@example.org called this report <strong>invalid: a lab hiccup</strong>") {
		t.Errorf("the test page does not say the dispute:\n%s", page)
	}
}
