package bot_test

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
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/clients/dashboard"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/cfgtype"
	"github.com/rdmabot/rdmabot/internal/fakestage"
	"github.com/rdmabot/rdmabot/internal/testenv"
)

type harness struct {
	t      testing.TB
	bot    *bot.Bot
	st     *store.Store
	calls  *fakestage.Calls
	ingest *fakestage.Ingest
	build  *fakestage.Builder
	trees  *fakestage.Trees
	lab    *fakestage.Lab
	report *fakestage.Reporter
	// skew moves the store's clock forward (base-result staleness).
	skew atomic.Int64
}

func testConfig() bot.Config {
	c := bot.DefaultConfig()
	c.Runs = 3
	c.IngestInterval = cfgtype.D(time.Second)
	c.Mainline.Schedules = nil
	c.LeaseTTL = cfgtype.D(3 * time.Second)
	c.Mainline.Metric = "write_MBps" // what the fake lab measures
	c.AuthorDailyTests = 0           // the tests post many series from one sender; TestAuthorDailyTests bounds them
	return c
}

func newHarness(t testing.TB, cfg bot.Config, repo string) *harness {
	return newHarnessDB(t, cfg, repo, "")
}

func newHarnessDB(t testing.TB, cfg bot.Config, repo, dbURL string) *harness {
	return newHarnessWith(t, cfg, repo, dbURL, nil)
}

// newHarnessWith lets a test adjust the bot's options before it starts.
func newHarnessWith(t testing.TB, cfg bot.Config, repo, dbURL string, adjust func(*bot.Options)) *harness {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := &harness{t: t, st: st, calls: &fakestage.Calls{}}
	h.ingest = &fakestage.Ingest{Calls: h.calls}
	h.build = &fakestage.Builder{Dir: t.TempDir(), Repo: repo, Calls: h.calls}
	h.trees = &fakestage.Trees{Repo: repo, Calls: h.calls}
	h.lab = &fakestage.Lab{Calls: h.calls, Delay: 20 * time.Millisecond}
	h.report = &fakestage.Reporter{Calls: h.calls}
	st.SetClock(func() time.Time { return time.Now().Add(time.Duration(h.skew.Load())) })
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	opts := bot.Options{
		Config:   cfg,
		CacheDir: t.TempDir(),
		Role:     bot.RoleAll,
		Lab:      "qemu",
		Params:   "nfs-rdma-write-256M",
		Branches: map[string][]string{"mainline": {"master"}},
		Stages: bot.Stages{Ingest: h.ingest, Build: h.build, Trees: h.trees, Lab: h.lab,
			Decide: fakestage.Decider{}, Report: h.report},
		Log:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		ID:           "test/" + t.Name(),
		PollInterval: 250 * time.Millisecond,
		LeaseWait:    100 * time.Millisecond,
		Quick:        true,
	}
	if adjust != nil {
		adjust(&opts)
	}
	b, err := bot.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.Stop(ctx)
	})
	h.bot = b
	return h
}

// wait polls cond until it holds or the deadline passes.
func (h *harness) wait(what string, d time.Duration, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; calls:\n%s", what, strings.Join(h.calls.List(), "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func series(id, subject string) flow.Series {
	return flow.Series{MsgID: id, Version: 1, Subject: subject, Author: "Dev <dev@example.org>",
		Patches: []*flow.Message{fakestage.Mail("From: dev\nSubject: " + subject + "\n\n---\n")}}
}

// Series from the lists go through every stage and get one reply each,
// with the verdict their change deserves; the base is measured once and
// then served from the cache.
func TestSeriesVerdicts(t *testing.T) {
	h := newHarness(t, testConfig(), "")
	cases := map[string]string{
		"<pass@x>":    "[PATCH] svcrdma: harmless",
		"<slow@x>":    "[PATCH] svcrdma: slow send",
		"<broken@x>":  "[PATCH] svcrdma: build-fails",
		"<noapply@x>": "[PATCH] svcrdma: does-not-apply",
		"<hang@x>":    "[PATCH] svcrdma: crash on teardown",
	}
	want := map[string]string{"<pass@x>": "PASS", "<slow@x>": "REGRESSION", "<broken@x>": "BUILD_FAILED",
		"<noapply@x>": "APPLY_FAILED", "<hang@x>": "CRASH"}
	for id, subj := range cases {
		h.ingest.Add(series(id, subj))
	}
	h.wait("five replies", 60*time.Second, func() bool { return h.report.Count() == 5 })
	for id, v := range want {
		r, ok := h.report.Get("series:" + id + ":v1:")
		if !ok || r.Verdict.String() != v {
			t.Errorf("%s: got %+v, want %s", id, r.Verdict, v)
		}
		if !strings.HasPrefix(r.URL, "http://127.0.0.1:8480/tests/") {
			t.Errorf("%s: reply links %q", id, r.URL)
		}
	}
	if r, _ := h.report.Get("series:<broken@x>:v1:"); !strings.Contains(r.Log, "expected ';'") {
		t.Errorf("build failure reply lacks the compiler error: %q", r.Log)
	}
	// The base was built once, and booted beside every candidate boot:
	// each round measures both sides.
	if n := h.calls.Count("build mainline " + strings.Repeat("b", 40)); n != 1 {
		t.Errorf("base built %d times", n)
	}
	baseRuns, candRuns := 0, 0
	for _, c := range h.calls.List() {
		switch {
		case strings.HasPrefix(c, "run qemu mainline-bbbb"):
			baseRuns++
		case strings.HasPrefix(c, "run "):
			candRuns++
			// A series' kernel boots on one side, beside the base.
			if !strings.Contains(c, " on the server beside mainline-bbbb") {
				t.Errorf("candidate boot %q is not beside the trusted base", c)
			}
		}
	}
	if baseRuns != candRuns || baseRuns == 0 {
		t.Errorf("base booted %d times for %d candidate boots, want as many", baseRuns, candRuns)
	}
	if h.lab.Overlap != 0 {
		t.Errorf("%d overlapping runs on one pair", h.lab.Overlap)
	}
	// The same series again, from the lists or a command, is not retested.
	applied := h.calls.Count("apply <pass@x>")
	h.ingest.Add(series("<pass@x>", cases["<pass@x>"]))
	dup := series("<pass@x>", cases["<pass@x>"])
	a, err := h.bot.Act(context.Background(), flow.Command{Verb: flow.CommandTest}, &dup, flow.Origin{Kind: "cli"})
	if err != nil || a.New {
		t.Fatalf("duplicate series queued again: %+v %v", a, err)
	}
	time.Sleep(500 * time.Millisecond)
	if n := h.calls.Count("apply <pass@x>"); n != applied {
		t.Errorf("series applied %d times, %d before it came again", n, applied)
	}
	// Every job left a trace.
	tt, _ := h.st.TestByKey(context.Background(), h.st.DB, "series:<slow@x>:v1:")
	jobs, _ := h.bot.JobsOfTest(context.Background(), tt.ID)
	if len(jobs) < 4 {
		t.Fatalf("slow series ran %d jobs", len(jobs))
	}
	for _, j := range jobs {
		tr, _ := h.st.Trace(context.Background(), j.ID)
		if len(tr) == 0 {
			t.Errorf("job %d (%s) has no trace", j.ID, j.Kind)
		}
	}
}

// The reporter is told a series' testing started (the patchwork pending
// check) once the base is chosen, with the test's page, before the
// verdict is delivered; a failure to record it retries the base job.
func TestStartedBeforeDeliver(t *testing.T) {
	h := newHarness(t, testConfig(), "")
	h.report.FailStarts = 1
	h.ingest.Add(series("<p@x>", "[PATCH] svcrdma: harmless"))
	h.wait("reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	key := "series:<p@x>:v1:"
	var started, delivered = -1, -1
	for i, c := range h.calls.List() {
		if c == "started "+key {
			started = i
		}
		if strings.HasPrefix(c, "deliver "+key) && delivered < 0 {
			delivered = i
		}
	}
	if n := h.calls.Count("started " + key); n != 2 || started < 0 || delivered < started {
		t.Fatalf("started %d times (want 2: one failed), last at call %d, delivered at %d:\n%s", n, started, delivered, strings.Join(h.calls.List(), "\n"))
	}
	r, _ := h.report.Get(key)
	b := h.report.Begun[key]
	if b.URL == "" || b.URL != r.URL || b.Series == nil || b.Series.MsgID != "<p@x>" || b.Base == "" || b.Verdict != flow.None {
		t.Errorf("started with %+v; the verdict's URL %q", b, r.URL)
	}
}

// A lab fault is retried with backoff and no reply blames the series;
// builds failing on infrastructure are retried too.
func TestInfraFaultsRetried(t *testing.T) {
	h := newHarness(t, testConfig(), "")
	h.lab.FailRuns = 1
	h.build.FailBuilds = 1
	h.ingest.Add(series("<p@x>", "[PATCH] svcrdma: harmless"))
	h.wait("reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	r, _ := h.report.Get("series:<p@x>:v1:")
	if r.Verdict != flow.Pass {
		t.Fatalf("verdict %s after a lab fault, want PASS", r.Verdict)
	}
	if h.report.Attempts != 1 {
		t.Fatalf("%d delivery attempts", h.report.Attempts)
	}
}

// A lab pair is leased: two tests at once never overlap on it.
func TestLeaseSerializesPair(t *testing.T) {
	cfg := testConfig()
	// A waiter silent for 3 LeaseWaits and a third of the TTL loses its
	// turn: with 3 s that is 1.3 s, which a job snoozed on a saturated
	// machine can outlast, and the pair would go out of order.
	cfg.LeaseTTL = cfgtype.D(30 * time.Second)
	h := newHarness(t, cfg, "")
	h.lab.Delay = 200 * time.Millisecond
	// The first test keeps the pair until the three others wait for it:
	// the order is the pair's to decide, not which build ended first.
	h.lab.Hold = make(chan struct{})
	for i := range 4 {
		h.ingest.Add(series(fmt.Sprintf("<s%d@x>", i), "[PATCH] svcrdma: harmless"))
	}
	h.wait("three tests waiting for the pair", 60*time.Second, func() bool {
		var n int
		err := h.st.DB.QueryRow(`SELECT COUNT(*) FROM lab_waiters`).Scan(&n)
		return err == nil && n == 3
	})
	close(h.lab.Hold)
	h.wait("four replies", 90*time.Second, func() bool { return h.report.Count() == 4 })
	if h.lab.Overlap != 0 {
		t.Fatalf("%d overlapping runs", h.lab.Overlap)
	}
	// The pair went to the three tests waiting for it in posting order,
	// so they were answered in that order after the one that held it
	// (whichever build was ready first: the first may wait for its
	// base's kernels in the base lane).
	var order []string
	for _, c := range h.calls.List() {
		if strings.HasPrefix(c, "deliver ") {
			order = append(order, strings.Fields(c)[1])
		}
	}
	if len(order) != 4 {
		t.Fatalf("replies %v", order)
	}
	var waiters []string
	for i := range 4 {
		if key := fmt.Sprintf("series:<s%d@x>:v1:", i); key != order[0] {
			waiters = append(waiters, key)
		}
	}
	if !slices.Equal(order[1:], waiters) {
		t.Errorf("replies after the holder's %s: %v, want %v (posting order)", order[0], order[1:], waiters)
	}
}

// Cancel stops a test before its lab runs.
func TestCancel(t *testing.T) {
	h := newHarness(t, testConfig(), "")
	h.build.Delay = time.Second
	s := series("<c@x>", "[PATCH] svcrdma: harmless")
	a, err := h.bot.Act(context.Background(), flow.Command{Verb: flow.CommandTest}, &s, flow.Origin{Kind: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	id := a.ID
	h.wait("build start", 10*time.Second, func() bool { return h.calls.Count("build") > 0 })
	if err := h.bot.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if n := h.calls.Count("run "); n != 0 {
		t.Fatalf("%d lab runs after cancel", n)
	}
	if h.report.Count() != 0 {
		t.Fatal("canceled test replied")
	}
	tt, _ := h.st.Test(context.Background(), h.st.DB, id)
	if tt.State != store.StateCanceled {
		t.Fatalf("state %s", tt.State)
	}
}

// gitIn runs git in dir (testenv.Git), returning its trimmed output.
func gitIn(t *testing.T, dir string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		return testenv.Git(t, dir, args...)
	}
}

// gitRepo makes a history of n commits on master; commit number slowAt
// adds SLOW (every later commit inherits it), nobuild commits fail to
// build. It returns the repository and its commits, oldest first.
func gitRepo(t *testing.T, n, slowAt int, nobuild map[int]bool) (string, []string) {
	dir := t.TempDir()
	run := gitIn(t, dir)
	run("init", "-q", "-b", "master")
	var commits []string
	for i := range n {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d", i)), []byte("x"), 0o644)
		if i == slowAt {
			os.WriteFile(filepath.Join(dir, "SLOW"), []byte("delay each Send"), 0o644)
		}
		msg := fmt.Sprintf("commit %d", i)
		if nobuild[i] {
			msg += " nobuild"
		}
		run("add", "-A")
		run("commit", "-q", "-m", msg)
		commits = append(commits, run("rev-parse", "HEAD"))
	}
	return dir, commits
}

// The motivating regression: a scheduled run measures the good head,
// a later one finds the new head slower, bisects on its own (skipping a
// commit that does not build), confirms, and reports a new thread.
func TestMainlineRegressionBisected(t *testing.T) {
	repo, commits := gitRepo(t, 24, 13, map[int]bool{7: true})
	// Start with master at the good commit.
	git := gitIn(t, repo)
	git("branch", "-f", "good", commits[0])
	git("update-ref", "refs/heads/master", commits[0])
	cfg := testConfig()
	cfg.ConfirmRuns = 3 // the cautious setting: every repeat is recorded
	h := newHarness(t, cfg, repo)
	ctx := context.Background()
	insertMainline := func() {
		if _, err := h.bot.River().Insert(ctx, bot.MainlineArgs{Tree: "mainline", Branch: "master"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	insertMainline()
	h.wait("first head measured", 30*time.Second, func() bool {
		hist, _ := h.st.MainlineHistory(ctx, h.st.DB, "mainline", "master")
		return len(hist) == 1 && hist[0].State == "good"
	})
	git("update-ref", "refs/heads/master", commits[len(commits)-1])
	insertMainline()
	h.wait("bisection report", 120*time.Second, func() bool { return h.report.Count() == 1 })
	hist, _ := h.st.MainlineHistory(ctx, h.st.DB, "mainline", "master")
	if len(hist) != 2 || hist[1].State != "bad" {
		t.Fatalf("history %+v", hist)
	}
	var r flow.Report
	for _, v := range h.report.Delivered {
		r = v
	}
	if r.Bisect == nil || r.Bisect.Culprit != commits[13] || !r.Bisect.Confirmed {
		t.Fatalf("bisect report %+v, want culprit %s confirmed", r.Bisect, commits[13])
	}
	if r.Bisect.CulpritTitle != "commit 13" || r.Bisect.CulpritAuthor != "t <t@example.org>" {
		t.Errorf("culprit %q by %q, want \"commit 13\" by t <t@example.org>", r.Bisect.CulpritTitle, r.Bisect.CulpritAuthor)
	}
	// Its files, whose lists hear of it: commit 13 added f13 and SLOW.
	if got := strings.Join(r.Bisect.CulpritFiles, " "); got != "SLOW f13" {
		t.Errorf("culprit files %q, want SLOW f13", got)
	}
	// The fake slow kernel writes at 52 against 100, each boot +-2: the
	// title names the commit, the metric and a change of about -48 %.
	wantTitle := regexp.MustCompile(`^\[mainline\] ` + commits[13][:12] + `: nfs-rdma write_MBps -(4[5-9]|5[01])% regression$`)
	if !wantTitle.MatchString(r.Title) {
		t.Fatalf("title %q, want %s", r.Title, wantTitle)
	}
	phases := map[string]int{}
	for _, s := range r.Bisect.Steps {
		phases[s.Phase+":"+s.Outcome]++
	}
	if phases["confirm-culprit:bad"] != 3 || phases["confirm-parent:good"] != 3 || phases["confirm-revert:good"] != 1 {
		t.Fatalf("confirmations %v", phases)
	}
	t.Logf("bisection steps: %d (%v)", len(r.Bisect.Steps), phases)
	// The table of culprit against parent is what their confirmation
	// runs measured: the fake kernels' 100 and 52.
	if r.Bisect.Parent != commits[12] || len(r.Bisect.ParentSamples) == 0 || len(r.Bisect.CulpritSamples) == 0 ||
		r.Bisect.ParentSamples[0].Metrics["write_MBps"] < 90 || r.Bisect.CulpritSamples[0].Metrics["write_MBps"] > 60 {
		t.Errorf("confirmation samples: parent %s (want %s), %d and %d boots %+v %+v", r.Bisect.Parent, commits[12],
			len(r.Bisect.ParentSamples), len(r.Bisect.CulpritSamples), r.Bisect.ParentSamples, r.Bisect.CulpritSamples)
	}
	mux := http.NewServeMux()
	dashboard.New(h.st, h.bot, slog.New(slog.DiscardHandler)).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	if page := get(t, srv, "/mainline"); !strings.Contains(page, "<svg") || !strings.Contains(page, "write_MBps") {
		t.Fatalf("mainline page lacks the chart:\n%s", page)
	}
	if page := get(t, srv, "/bisect/1"); !strings.Contains(page, commits[13][:12]) {
		t.Fatalf("bisection page lacks the culprit")
	}
	// Asking for the same head again does nothing.
	insertMainline()
	time.Sleep(500 * time.Millisecond)
	if n := h.report.Count(); n != 1 {
		t.Fatalf("%d reports", n)
	}
	// A fix whose Fixes: names the culprit reruns the regressed head's
	// test with it: on the last good head's results, the fix applied on
	// the bad head.
	h.build.Base = commits[0]
	fix := series("<mfix@x>", "[PATCH] svcrdma: fix-slow send")
	fix.Fixes = []string{"0123456789ab", commits[13][:12]}
	h.ingest.Add(fix)
	h.wait("the fix's reply", 60*time.Second, func() bool { return h.report.Count() == 2 })
	fr, _ := h.report.Get("series:<mfix@x>:v1:")
	f := fr.Fix
	if fr.Verdict != flow.Pass || f == nil || f.Culprit != commits[13][:12] || f.Head != "mainline "+commits[23][:12] || !f.OnTop || !f.Confirmed || f.Reply != "" {
		t.Fatalf("the fix's reply: %s %+v", fr.Verdict, f)
	}
	ft := h.testDone("series:<mfix@x>:v1:")
	if orig, err := h.st.Test(ctx, h.st.DB, ft.FixOf); err != nil || orig.Kind != store.KindMainline || orig.Candidate != commits[23] ||
		ft.Base != commits[0] || ft.ApplyOn != commits[23] {
		t.Fatalf("the fix's test: fix of %+v (%v), base %s, applied on %s", orig, err, ft.Base, ft.ApplyOn)
	}
}

func get(t *testing.T, srv *httptest.Server, path string) string {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", path, resp.Status, b)
	}
	return string(b)
}

var metricLine = regexp.MustCompile(`^[a-z_]+(\{([a-z_]+="[^"]*",?)*\})? [-+0-9.eE]+$`)

// The dashboard shows tests with verdicts and traces, the JSON API says
// the same, and /metrics is valid exposition format.
func TestDashboard(t *testing.T) {
	h := newHarness(t, testConfig(), "")
	h.ingest.Add(series("<slow@x>", "[PATCH] svcrdma: slow send"))
	h.wait("test done", 60*time.Second, func() bool {
		tt, _ := h.st.TestByKey(context.Background(), h.st.DB, "series:<slow@x>:v1:")
		return tt.State == store.StateDone
	})
	mux := http.NewServeMux()
	dashboard.New(h.st, h.bot, slog.New(slog.DiscardHandler)).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	index := get(t, srv, "/")
	if !strings.Contains(index, "svcrdma: slow send") || !strings.Contains(index, "REGRESSION") {
		t.Fatalf("index lacks the test:\n%s", index)
	}
	tt, _ := h.st.TestByKey(context.Background(), h.st.DB, "series:<slow@x>:v1:")
	page := get(t, srv, fmt.Sprintf("/tests/%d", tt.ID))
	for _, want := range []string{"applied: ", "write_MBps", "lab: 1 runs of slow done"} {
		if !strings.Contains(page, want) {
			t.Errorf("test page lacks %q:\n%s", want, page)
		}
	}
	// The fake slow kernel writes at about half the speed.
	if !regexp.MustCompile(`write_MBps [0-9.]+ -&gt; [0-9.]+ \(-4[0-9]%\)`).MatchString(page) {
		t.Errorf("test page lacks the write_MBps drop of about 48 %%:\n%s", page)
	}
	var api struct {
		Verdict string `json:"Verdict"`
		Jobs    []struct {
			ID       int64  `json:"id"`
			TraceURL string `json:"trace_url"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(get(t, srv, fmt.Sprintf("/api/tests/%d", tt.ID))), &api); err != nil {
		t.Fatal(err)
	}
	if api.Verdict != "REGRESSION" || len(api.Jobs) < 4 {
		t.Fatalf("API: %+v", api)
	}
	if tr := get(t, srv, api.Jobs[0].TraceURL); !strings.Contains(tr, "base job") {
		t.Fatalf("trace: %q", tr)
	}
	metrics := get(t, srv, "/metrics")
	for _, l := range strings.Split(strings.TrimSpace(metrics), "\n") {
		if !strings.HasPrefix(l, "#") && !metricLine.MatchString(l) {
			t.Errorf("bad metric line %q", l)
		}
	}
	for _, want := range []string{`rdmabot_jobs{queue="lab",state="completed"} 1`, `rdmabot_lab_busy_seconds_total{pair="qemu"}`,
		// Two build jobs: the first handed the base to the base lane.
		`rdmabot_job_duration_seconds_count{kind="build",outcome="ok"} 2`, `rdmabot_job_duration_seconds_count{kind="base_kernels",outcome="ok"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
}

// Base results are reused while fresh and measured again once stale.
func TestBaseResultsGoStale(t *testing.T) {
	cfg := testConfig()
	h := newHarness(t, cfg, "")
	ctx := context.Background()
	cachedRuns := func(id string) int {
		tt, err := h.st.TestByKey(ctx, h.st.DB, "series:"+id+":v1:")
		if err != nil {
			t.Fatal(err)
		}
		s, _, err := h.st.BaseResults(ctx, h.st.DB, store.BaseKey{Tree: tt.Tree, Commit: tt.Base, Lab: tt.Lab, Params: "nfs-rdma-write-256M"}, 100*365*24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return len(s)
	}
	h.ingest.Add(series("<a@x>", "[PATCH] svcrdma: harmless"))
	h.wait("first reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	h.ingest.Add(series("<b@x>", "[PATCH] svcrdma: harmless too"))
	h.wait("second reply", 60*time.Second, func() bool { return h.report.Count() == 2 })
	// Both tests booted the base beside their candidate; the cache holds
	// both measurements, since they agree.
	if n := cachedRuns("<b@x>"); n != 2*cfg.Runs {
		t.Fatalf("cached base runs after two tests: %d, want %d", n, 2*cfg.Runs)
	}
	h.skew.Store(int64(cfg.BaseMaxAge.Duration + time.Hour))
	h.ingest.Add(series("<c@x>", "[PATCH] svcrdma: harmless three"))
	h.wait("third reply", 60*time.Second, func() bool { return h.report.Count() == 3 })
	if n := cachedRuns("<c@x>"); n != cfg.Runs {
		t.Fatalf("a stale cache was kept: %d base runs, want the %d fresh ones", n, cfg.Runs)
	}
	// Base and candidate boots alternate: base, candidate, base,
	// candidate ... so that drift hits both alike.
	var runs []string
	for _, c := range h.calls.List() {
		if strings.HasPrefix(c, "run ") {
			runs = append(runs, c)
		}
	}
	for i, c := range runs {
		if isBase := strings.HasPrefix(c, "run qemu mainline-bbbb"); isBase != (i%2 == 0) {
			t.Fatalf("the rounds do not alternate at boot %d: %q", i, runs)
		}
	}
}

// A machine that slowed down since the base was cached (another program
// took the CPU) does not make a harmless series a regression: the
// round's fresh base boots are as slow as its candidate's, the cached
// runs disagree with them and are dropped.
func TestDriftedCacheIsNoRegression(t *testing.T) {
	cfg := testConfig()
	h := newHarness(t, cfg, "")
	h.ingest.Add(series("<a@x>", "[PATCH] svcrdma: harmless"))
	h.wait("first reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	h.lab.SetSlowdown(0.2)
	h.ingest.Add(series("<b@x>", "[PATCH] svcrdma: harmless too"))
	h.wait("second reply", 60*time.Second, func() bool { return h.report.Count() == 2 })
	r, _ := h.report.Get("series:<b@x>:v1:")
	if r.Verdict != flow.Pass {
		t.Fatalf("harmless series on a slowed machine: %s (%s), want PASS", r.Verdict, r.Summary)
	}
	tt, _ := h.st.TestByKey(context.Background(), h.st.DB, "series:<b@x>:v1:")
	jobs, _ := h.bot.JobsOfTest(context.Background(), tt.ID)
	var trace strings.Builder
	for _, j := range jobs {
		lines, _ := h.st.Trace(context.Background(), j.ID)
		for _, l := range lines {
			fmt.Fprintln(&trace, l)
		}
	}
	if !strings.Contains(trace.String(), "disagree with this round's") {
		t.Errorf("the trace does not say the cache was dropped:\n%s", trace.String())
	}
	// A seeded slowdown is still caught on the slowed machine.
	h.ingest.Add(series("<s@x>", "[PATCH] svcrdma: slow send"))
	h.wait("third reply", 60*time.Second, func() bool { return h.report.Count() == 3 })
	if r, _ := h.report.Get("series:<s@x>:v1:"); r.Verdict != flow.Regression {
		t.Errorf("slow series on a slowed machine: %s, want REGRESSION", r.Verdict)
	}
}

// Mainline runs come from cron specs through River's periodic jobs.
func TestCronSchedulesMainline(t *testing.T) {
	repo, _ := gitRepo(t, 3, 99, nil)
	cfg := testConfig()
	cfg.Mainline.Schedules = []string{"@every 1s"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := cfg
	bad.Mainline.Schedules = []string{"CRON_TZ=Europe/Berlin 0 3 * *"}
	if err := bad.Validate(); err == nil {
		t.Fatal("a four-field spec was accepted")
	}
	bad.Mainline.Schedules = []string{"CRON_TZ=Europe/Berlin 0 3 * * *"}
	if err := bad.Validate(); err != nil {
		t.Fatalf("CRON_TZ spec refused: %v", err)
	}
	h := newHarness(t, cfg, repo)
	h.wait("a scheduled head measured", 30*time.Second, func() bool {
		hist, _ := h.st.MainlineHistory(context.Background(), h.st.DB, "mainline", "master")
		return len(hist) == 1 && hist[0].State == "good"
	})
	// Later ticks find the same head and test nothing more.
	time.Sleep(2500 * time.Millisecond)
	if n := h.calls.Count("build "); n != 1 {
		t.Fatalf("%d builds for one head", n)
	}
	if h.calls.Count("head mainline master") < 2 {
		t.Fatal("the schedule ticked once only")
	}
}

// A request from a GitHub issue reaches the reporter with its origin
// (the issue it is answered in: see reply.Replier).
func TestGitHubOriginAnsweredInIssue(t *testing.T) {
	repo, commits := gitRepo(t, 3, 99, nil)
	h := newHarness(t, testConfig(), repo)
	o := flow.Origin{Kind: "github", Repo: "o/r", Issue: 12, Comment: 99, User: "chuck"}
	a, err := h.bot.Act(context.Background(), flow.Command{Verb: flow.CommandTest, Tree: "mainline", Ref: "master"}, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	id := a.ID
	h.wait("comment", 30*time.Second, func() bool { return h.report.Count() == 1 })
	tt, _ := h.st.Test(context.Background(), h.st.DB, id)
	if r, ok := h.report.Get(tt.Key); !ok || !reflect.DeepEqual(r.Origin, o) {
		t.Fatalf("report %+v, want origin %+v", r, o)
	}
	if tt.Candidate != commits[2] || tt.Thread != "github:o/r#12" {
		t.Fatalf("test %+v", tt)
	}
	var ce *flow.CommandError
	if _, err := h.bot.Act(context.Background(), flow.Command{Verb: flow.CommandTest, Tree: "nope", Ref: "master"}, nil, o); !errors.As(err, &ce) {
		t.Fatalf("unknown tree: %v, want the asker told", err)
	}
	// /rdmabot retest in the same issue makes a new test of the same thing.
	a2, err := h.bot.Act(context.Background(), flow.Command{Verb: flow.CommandRetest}, nil, flow.Origin{Kind: "github", Repo: "o/r", Issue: 12, Comment: 100})
	if err != nil || a2.ID == id {
		t.Fatalf("retest: %+v %v", a2, err)
	}
	h.wait("second comment", 30*time.Second, func() bool { return h.report.Count() == 2 })
}

// A borderline change makes the statistics ask for more runs: a second
// lab round measures base and candidate again before the verdict.
func TestMoreRuns(t *testing.T) {
	h := newHarness(t, testConfig(), "")
	h.ingest.Add(series("<m@x>", "[PATCH] svcrdma: slightly-slow"))
	h.wait("reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	r, _ := h.report.Get("series:<m@x>:v1:")
	if r.Verdict != flow.Pass || len(r.CandSamples) != 6 || len(r.BaseSamples) != 6 {
		t.Fatalf("verdict %s on %d base and %d candidate samples, want PASS on 6 and 6", r.Verdict, len(r.BaseSamples), len(r.CandSamples))
	}
	tt, _ := h.st.TestByKey(context.Background(), h.st.DB, "series:<m@x>:v1:")
	if tt.Rounds != 2 {
		t.Fatalf("%d rounds", tt.Rounds)
	}
}

// A worker that panics does not leave its series unanswered: the job is
// retried (whatever the panic held, here the lab lease, is released) and
// the series gets the verdict it deserves.
func TestPanicsAreRetriedAndReleaseTheirHold(t *testing.T) {
	h := newHarness(t, testConfig(), "")
	h.build.PanicBuilds = 1
	h.lab.PanicRuns = 1
	h.ingest.Add(series("<panic@x>", "[PATCH] svcrdma: harmless"))
	h.wait("reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	r, _ := h.report.Get("series:<panic@x>:v1:")
	if r.Verdict != flow.Pass {
		t.Fatalf("verdict %s after a panic in build and in the lab, want PASS", r.Verdict)
	}
}

// An operator's gap (no base in the store) is never the author's fault:
// no APPLY_FAILED, no reply; once the retries are spent the test ends as
// INFRA, visible, not stuck in a running state.
func TestNoBaseIsInfraNeverAReply(t *testing.T) {
	cfg := testConfig()
	cfg.MaxAttempts = 2
	h := newHarness(t, cfg, "")
	h.build.NoBase = true
	h.ingest.Add(series("<nobase@x>", "[PATCH] svcrdma: harmless"))
	var got store.Test
	h.wait("the test to fail on infrastructure", 60*time.Second, func() bool {
		ts, err := h.st.Tests(context.Background(), h.st.DB, 10)
		if err != nil || len(ts) != 1 {
			return false
		}
		got = ts[0]
		return got.State == store.StateFailed
	})
	if !strings.HasPrefix(got.Summary, "INFRA: ") || !strings.Contains(got.Summary, "tree fetch") || got.Verdict != flow.None {
		t.Errorf("test ended as %q verdict %q, want an INFRA summary naming the missing tree and no verdict", got.Summary, got.Verdict)
	}
	if n := h.calls.Count("base "); n != 2 {
		t.Errorf("%d base selections, want 2 (max_attempts)", n)
	}
	if h.report.Count() != 0 {
		t.Errorf("a reply was sent for the operator's gap")
	}
}

// serve fetches every tree with a URL at start and on schedule, records
// how it went (a dead tree does not stop the others), and fetches a stale
// tree again before choosing a base; a fresh one is not fetched twice.
func TestTreesFetchedOnScheduleAndWhenStale(t *testing.T) {
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		o.FetchTrees, o.FetchInterval = []string{"unreachable", "mainline"}, time.Hour
	})
	ctx := context.Background()
	healths := func() map[string]store.Health {
		hs, err := h.st.Healths(ctx, h.st.DB)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]store.Health{}
		for _, x := range hs {
			out[x.Kind+"/"+x.Name] = x
		}
		return out
	}
	h.wait("both trees fetched at start", 30*time.Second, func() bool { return len(healths()) == 2 })
	hs := healths()
	if m := hs["tree/mainline"]; !m.OK || m.LastOK.IsZero() {
		t.Errorf("mainline: %+v, want fetched", m)
	}
	if u := hs["tree/unreachable"]; u.OK || u.Failures != 1 || !strings.Contains(u.Err, "Could not resolve host") {
		t.Errorf("unreachable: %+v, want one recorded failure", u)
	}
	// Fresh: a series' base selection fetches nothing.
	h.ingest.Add(series("<fresh@x>", "[PATCH] svcrdma: harmless"))
	h.wait("reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	if n := h.calls.Count("fetch "); n != 2 {
		t.Errorf("%d fetches with fresh trees, want the 2 at start", n)
	}
	// Two hours later both are stale: fetched again before the base.
	h.skew.Store(int64(2 * time.Hour))
	h.ingest.Add(series("<stale@x>", "[PATCH] svcrdma: harmless too"))
	h.wait("second reply", 60*time.Second, func() bool { return h.report.Count() == 2 })
	if n := h.calls.Count("fetch "); n != 4 {
		t.Errorf("%d fetches after the trees went stale, want 4", n)
	}
	if u := healths()["tree/unreachable"]; u.Failures != 2 || u.Since.IsZero() {
		t.Errorf("unreachable after a second failure: %+v", u)
	}
}

// A kernel is reused only when everything that decides it is the same: a
// changed configuration (a config fragment, a compiler) builds the base
// again instead of answering with the old kernel.
func TestKernelReusedOnlyForTheSameConfig(t *testing.T) {
	h := newHarness(t, testConfig(), "")
	base := "build mainline " + strings.Repeat("b", 40)
	h.ingest.Add(series("<k1@x>", "[PATCH] svcrdma: harmless"))
	h.wait("first reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	h.ingest.Add(series("<k2@x>", "[PATCH] svcrdma: harmless too"))
	h.wait("second reply", 60*time.Second, func() bool { return h.report.Count() == 2 })
	if n := h.calls.Count(base); n != 1 {
		t.Fatalf("base built %d times with one configuration, want 1", n)
	}
	h.build.Config = "rdma-hw.config"
	h.ingest.Add(series("<k3@x>", "[PATCH] svcrdma: harmless three"))
	h.wait("third reply", 60*time.Second, func() bool { return h.report.Count() == 3 })
	if n := h.calls.Count(base); n != 2 {
		t.Errorf("base built %d times after the configuration changed, want 2", n)
	}
}

// Replies that wait (approved later, held by the daily limit) are sent by
// a periodic job of their own, not only when another verdict comes.
func TestDueRepliesFlushedOnSchedule(t *testing.T) {
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) { o.DeliverInterval = 200 * time.Millisecond })
	h.wait("three deliveries of what is due", 30*time.Second, func() bool { return h.calls.Count("flush") >= 3 })
	if h.report.Count() != 0 {
		t.Errorf("flushing sent a verdict")
	}
}

// A test whose stored origin cannot be read is the bot's failure: the
// job that reads it next (the lab job, for the profiles the request
// asked for, or the report job, for where the reply goes) retries it as
// INFRA and the test ends failed, visible, never with a reply sent to a
// zero origin.
func TestUnreadableOriginIsInfra(t *testing.T) {
	cfg := testConfig()
	cfg.MaxAttempts = 2
	h := newHarness(t, cfg, "")
	h.lab.Delay = 300 * time.Millisecond // time to spoil the origin before the report
	h.ingest.Add(series("<origin@x>", "[PATCH] svcrdma: harmless"))
	ctx := context.Background()
	h.wait("the test", 30*time.Second, func() bool {
		ts, err := h.st.Tests(ctx, h.st.DB, 10)
		if err != nil || len(ts) != 1 {
			return false
		}
		_, err = h.st.DB.ExecContext(ctx, `UPDATE tests SET origin = '{not json' WHERE id = $1`, ts[0].ID)
		return err == nil
	})
	var got store.Test
	h.wait("the test to fail on infrastructure", 60*time.Second, func() bool {
		ts, err := h.st.Tests(ctx, h.st.DB, 10)
		if err != nil || len(ts) != 1 {
			return false
		}
		got = ts[0]
		return got.State == store.StateFailed
	})
	if !regexp.MustCompile(`^INFRA: (lab|report) job`).MatchString(got.Summary) || !strings.Contains(got.Summary, "stored origin unreadable") {
		t.Errorf("test ended as %q, want an INFRA summary of the lab or report job naming the unreadable origin", got.Summary)
	}
	if h.report.Count() != 0 {
		t.Errorf("a reply was sent with an unreadable origin")
	}
}

// A sender's postings start at most bot.author_daily_tests tests a day,
// counted by address whatever name it gives, and whatever its Message-IDs
// hold (":retest" is in a retest's key): past it a posting is kept
// and shown as not tested, never built, booted or answered; others'
// postings and commands are not held by it.
func TestAuthorDailyTests(t *testing.T) {
	cfg := testConfig()
	cfg.AuthorDailyTests = 2
	h := newHarness(t, cfg, "")
	flood := []flow.Series{series("<f1:retest:1@x>", "[PATCH] svcrdma: harmless one"), series("<f2@x>", "[PATCH] svcrdma: harmless two"),
		series("<f3@x>", "[PATCH] svcrdma: harmless three"), series("<f4@x>", "[PATCH] svcrdma: harmless four")}
	flood[1].Author = "Someone Else <DEV@example.org>" // the same address
	other := series("<o1@x>", "[PATCH] svcrdma: harmless other")
	other.Author = "Other <other@example.org>"
	// The first two in a poll of their own: the later polls count them
	// from the database.
	h.ingest.Add(flood[0])
	h.ingest.Add(flood[1])
	h.wait("two replies", 60*time.Second, func() bool { return h.report.Count() == 2 })
	for _, s := range append(flood[2:], other) {
		h.ingest.Add(s)
	}
	h.wait("three replies", 60*time.Second, func() bool { return h.report.Count() == 3 })
	time.Sleep(2 * time.Second) // a fourth reply would come now
	if n := h.report.Count(); n != 3 {
		t.Fatalf("%d replies, want the sender's first 2 and the other's", n)
	}
	ctx := context.Background()
	for _, id := range []string{"<f3@x>", "<f4@x>"} {
		tt, err := h.st.TestByKey(ctx, h.st.DB, "series:"+id+":v1:")
		if err != nil {
			t.Fatalf("%s was not kept: %v", id, err)
		}
		if tt.State != store.StateCanceled || !strings.Contains(tt.Summary, "not tested: its sender's postings and own commands started 2 tests in 24 hours") {
			t.Errorf("%s: %s %q, want canceled, not tested", id, tt.State, tt.Summary)
		}
		if _, ok := h.report.Get("series:" + id + ":v1:"); ok {
			t.Errorf("%s was answered", id)
		}
	}
	if _, ok := h.report.Get("series:<o1@x>:v1:"); !ok {
		t.Error("another sender's posting was held")
	}
	// A day later the sender is tested again.
	h.skew.Store(int64(25 * time.Hour))
	h.ingest.Add(series("<f5@x>", "[PATCH] svcrdma: harmless five"))
	h.wait("the next day's reply", 60*time.Second, func() bool { _, ok := h.report.Get("series:<f5@x>:v1:"); return ok })
}

// A list's postings start at most bot.list_daily_tests tests a day,
// whoever sends them (many forged senders are still one list's flood);
// another list's postings and those naming no list are not counted.
func TestListDailyTests(t *testing.T) {
	cfg := testConfig()
	cfg.ListDailyTests = 2
	h := newHarness(t, cfg, "")
	var posts []flow.Series
	for i := range 4 {
		s := series(fmt.Sprintf("<l%d@x>", i), fmt.Sprintf("[PATCH] svcrdma: harmless %d", i))
		s.Author = fmt.Sprintf("Sender %d <s%d@example.org>", i, i)
		s.List = "linux-rdma@vger.kernel.org"
		posts = append(posts, s)
	}
	posts[1].List = "Linux-RDMA@vger.kernel.org" // the same list
	other := series("<nfs@x>", "[PATCH] svcrdma: harmless nfs")
	other.List = "linux-nfs@vger.kernel.org"
	for _, s := range append(posts, other) {
		h.ingest.Add(s)
	}
	h.wait("three replies", 60*time.Second, func() bool { return h.report.Count() == 3 })
	time.Sleep(2 * time.Second) // a fourth reply would come now
	if n := h.report.Count(); n != 3 {
		t.Fatalf("%d replies, want the list's first 2 and the other list's", n)
	}
	ctx := context.Background()
	for _, id := range []string{"<l2@x>", "<l3@x>"} {
		tt, err := h.st.TestByKey(ctx, h.st.DB, "series:"+id+":v1:")
		if err != nil {
			t.Fatalf("%s was not kept: %v", id, err)
		}
		if tt.State != store.StateCanceled || !strings.Contains(tt.Summary, "postings to linux-rdma@vger.kernel.org started 2 tests in 24 hours, bot.list_daily_tests") {
			t.Errorf("%s: %s %q, want canceled, not tested", id, tt.State, tt.Summary)
		}
	}
	if _, ok := h.report.Get("series:<nfs@x>:v1:"); !ok {
		t.Error("another list's posting was held")
	}
}

// The dashboard's strip reads River's job table and the lease table as
// they are: a series' lab round running on the pair it holds, and the
// mainline job that cannot read its branch's head failing on the bot's
// side and waiting to be retried, with its error (the job /mainline did
// not show); the cron jobs' next runs follow the configured specs.
func TestDashboardShowsWhatIsHappening(t *testing.T) {
	cfg := testConfig()
	cfg.Mainline.Schedules = []string{"@every 1s", "CRON_TZ=UTC 0 */6 * * *"}
	h := newHarnessWith(t, cfg, "", "", func(o *bot.Options) { o.Branches = map[string][]string{"mainline": {"no-such-branch"}} })
	h.lab.Hold = make(chan struct{})
	defer close(h.lab.Hold)
	h.ingest.Add(series("<held@x>", "[PATCH] svcrdma: harmless"))
	mux := http.NewServeMux()
	dashboard.New(h.st, h.bot, slog.New(slog.DiscardHandler)).Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var v dashboard.NowView
	var lab, mainline dashboard.NowJob
	h.wait("the lab round running on its pair and the mainline job retrying", 60*time.Second, func() bool {
		v = dashboard.NowView{}
		if err := json.Unmarshal([]byte(get(t, srv, "/api/now")), &v); err != nil {
			t.Fatal(err)
		}
		lab, mainline = dashboard.NowJob{}, dashboard.NowJob{}
		for _, j := range v.Running {
			if j.Kind == "lab" {
				lab = j
			}
		}
		for _, j := range v.Waiting {
			if j.Kind == "mainline" && j.Retrying() {
				mainline = j
			}
		}
		return lab.ID != 0 && mainline.ID != 0 && len(v.Leases) == 1
	})
	tt, err := h.st.TestByKey(context.Background(), h.st.DB, "series:<held@x>:v1:")
	if err != nil {
		t.Fatal(err)
	}
	if lab.Link != fmt.Sprintf("/tests/%d", tt.ID) || !strings.Contains(lab.What, "round 1: [PATCH] svcrdma: harmless") || lab.By != "test/"+t.Name() {
		t.Errorf("the running lab round: %+v", lab)
	}
	if l := v.Leases[0]; l.Pair != "qemu" || l.JobID != lab.ID || l.Expired || l.Link != lab.Link || l.Holder != fmt.Sprintf("test/%s#%d", t.Name(), lab.ID) {
		t.Errorf("the lease: %+v, lab job %d", l, lab.ID)
	}
	if mainline.What != "mainline no-such-branch" || mainline.Errors < 1 || mainline.Errors != mainline.Attempt ||
		!strings.Contains(mainline.LastError, "fetch mainline no-such-branch: no ref no-such-branch") || !mainline.Since.After(v.At.Add(-time.Minute)) {
		t.Errorf("the retrying mainline job: %+v", mainline)
	}
	var ids []string
	for i, n := range v.Next {
		ids = append(ids, n.ID)
		if i > 0 && n.Spec != "" && n.Next.Before(v.Next[i-1].Next) {
			t.Errorf("next runs out of order: %+v", v.Next)
		}
		if n.ID == "mainline-1-mainline-no-such-branch" {
			if n.Next.Before(v.At) || n.Next.After(v.At.Add(6*time.Hour)) || n.Next.UTC().Hour()%6 != 0 || n.Next.Minute() != 0 {
				t.Errorf("the six-hourly run is next at %v (now %v)", n.Next, v.At)
			}
		}
	}
	sort.Strings(ids)
	if strings.Join(ids, " ") != "canary deliver ingest mainline-0-mainline-no-such-branch mainline-1-mainline-no-such-branch" || v.Next[0].ID != "mainline-0-mainline-no-such-branch" {
		t.Errorf("next runs: %v", ids)
	}
	page := get(t, srv, "/")
	for _, want := range []string{`<section id="now">`, "fetch mainline no-such-branch: no ref no-such-branch", `<b>qemu</b> held by`} {
		if !strings.Contains(page, want) {
			t.Errorf("/ lacks %q:\n%s", want, page)
		}
	}
}
