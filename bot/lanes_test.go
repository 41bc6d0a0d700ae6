package bot_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/cfgtype"
	"github.com/rdmabot/rdmabot/internal/fakestage"
)

// No head-of-line blocking: a series that needs the debug profile's base
// kernel, which nothing has built (a cold build, 5 s here for ~23 min on
// the 2-core machine), is posted; once that build has started, a build
// break is posted. The machine builds one kernel at a time. The base lane
// stops its cold build for the build break's candidate, whose
// BUILD_FAILED is delivered before the cold build is done; the cold
// build then resumes where it stopped and the first series gets its
// verdict with the debug kernels booted.
func TestBuildBreakIsNotHeldByAColdBase(t *testing.T) {
	machine := make(chan struct{}, 1)
	base := strings.Repeat("b", 40)
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		build := o.Stages.Build.(*fakestage.Builder)
		build.Machine = machine
		withDebug(t, o, machine, map[string]time.Duration{base: 5 * time.Second})
	})
	h.ingest.Add(teardownSeries("<teardown@x>", "[PATCH] svcrdma: tidy teardown"))
	h.wait("the cold debug base build to start", 30*time.Second, func() bool { return h.calls.Count("debug-build mainline "+base) > 0 })
	h.ingest.Add(series("<break@x>", "[PATCH] svcrdma: build-fails in the send path"))
	h.wait("both replies", 60*time.Second, func() bool { return h.report.Count() == 2 })

	list := h.calls.List()
	at := func(prefix string) int {
		return slices.IndexFunc(list, func(c string) bool { return strings.HasPrefix(c, prefix) })
	}
	broke, done, stopped := at("deliver series:<break@x>:v1: BUILD_FAILED"), at("slow-build done "+base), at("slow-build stopped "+base)
	if broke < 0 || done < 0 || broke > done {
		t.Errorf("the build break's BUILD_FAILED (call %d) came after the cold base build ended (call %d):\n%s", broke, done, strings.Join(list, "\n"))
	}
	if stopped < 0 || stopped > broke {
		t.Errorf("the cold build did not stop for the build break (call %d, BUILD_FAILED at %d)", stopped, broke)
	}
	r, _ := h.report.Get("series:<teardown@x>:v1:")
	if r.Verdict != flow.Pass || !slices.ContainsFunc(r.CandSamples, func(s flow.Sample) bool { return s.Profile == flow.ProfileDebug }) {
		t.Errorf("the series that needed the cold base: %s, debug boots %v; want PASS with its debug kernel booted", r.Verdict, r.CandSamples)
	}
	if n := h.calls.Count("debug-build mainline " + base); n < 2 {
		t.Errorf("the cold base build ran %d times: it was never resumed after giving way", n)
	}
}

// The check lane's compile takes only idle CPU, which a cold build at
// full speed leaves none of: the base lane's cold build stops while a
// series is checked, and resumes after. Here the build break's check
// (which answers it) starts while the debug base builds cold for
// another series; the cold build stops before the BUILD_FAILED is
// delivered and finishes later.
func TestColdBaseGivesWayToTheCheckLane(t *testing.T) {
	base := strings.Repeat("b", 40)
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		build := o.Stages.Build.(*fakestage.Builder)
		o.Stages.Check = &fakestage.Checker{Of: build, Calls: build.Calls, Delay: 2 * time.Second}
		withDebug(t, o, nil, map[string]time.Duration{base: 8 * time.Second})
	})
	h.ingest.Add(teardownSeries("<teardown@x>", "[PATCH] svcrdma: tidy teardown"))
	h.wait("the cold debug base build to start", 30*time.Second, func() bool { return h.calls.Count("debug-build mainline "+base) > 0 })
	h.ingest.Add(series("<break@x>", "[PATCH] svcrdma: build-fails in the send path"))
	h.wait("both replies", 60*time.Second, func() bool { return h.report.Count() == 2 })

	list := h.calls.List()
	at := func(prefix string) int {
		return slices.IndexFunc(list, func(c string) bool { return strings.HasPrefix(c, prefix) })
	}
	broke, stopped, done := at("deliver series:<break@x>:v1: BUILD_FAILED"), at("slow-build stopped "+base), at("slow-build done "+base)
	if stopped < 0 || broke < 0 || stopped > broke || done < broke {
		t.Errorf("the cold build (stopped at call %d, done at %d) did not give way to the build break's check (BUILD_FAILED at %d):\n%s",
			stopped, done, broke, strings.Join(list, "\n"))
	}
	if r, _ := h.report.Get("series:<teardown@x>:v1:"); r.Verdict != flow.Pass {
		t.Errorf("the series that needed the cold base: %s, want PASS", r.Verdict)
	}
}

// The warm-up: at start, the base lane builds the default base's kernels
// in both configurations the profiles boot, before any series; the first
// series then builds only its candidate's. A store with no base yet is
// the operator's gap: the warm-up is retried until one is there.
func TestWarmUpPreparesTheDefaultBases(t *testing.T) {
	base := strings.Repeat("b", 40)
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		build := o.Stages.Build.(*fakestage.Builder)
		build.NoBaseFirst = 1
		o.WarmBases = true
		withDebug(t, o, nil, map[string]time.Duration{base: 500 * time.Millisecond})
	})
	h.wait("the warm-up to ask for the default base again", 30*time.Second, func() bool { return h.calls.Count("base ") >= 2 })
	h.wait("both default base kernels", 60*time.Second, func() bool {
		return h.calls.Count("build mainline "+base) == 1 && h.calls.Count("slow-build done "+base) == 1
	})
	h.ingest.Add(teardownSeries("<teardown@x>", "[PATCH] svcrdma: tidy teardown"))
	h.wait("the reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	if n, d := h.calls.Count("build mainline "+base), h.calls.Count("debug-build mainline "+base); n != 1 || d != 1 {
		t.Errorf("the base was built %d times, its debug kernel %d: want once each, by the warm-up:\n%s", n, d, strings.Join(h.calls.List(), "\n"))
	}
	if r, _ := h.report.Get("series:<teardown@x>:v1:"); r.Verdict != flow.Pass || r.CandSamples[0].Profile != flow.ProfileDebug {
		t.Errorf("%s, first boot %+v: want PASS, the debug kernel booted first", r.Verdict, r.CandSamples)
	}
}

// The warm-up gives way to lab rounds as well as to builds: a series
// posted while the debug base's cold build runs has its candidate built
// and its round booted with no warm-up build beside them (on a small
// machine the round would wait for a quiet host until the build ended),
// and the warm-up resumes after the round.
func TestWarmUpGivesWayToLabRounds(t *testing.T) {
	base := strings.Repeat("b", 40)
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		o.WarmBases = true
		withDebug(t, o, nil, map[string]time.Duration{base: 3 * time.Second})
	})
	h.lab.Delay = 300 * time.Millisecond
	h.wait("the warm-up's debug base build to start", 30*time.Second, func() bool { return h.calls.Count("debug-build mainline "+base) > 0 })
	h.ingest.Add(series("<plain@x>", "[PATCH] svcrdma: a plain change"))
	h.wait("the reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	h.wait("the warm-up to finish", 60*time.Second, func() bool { return h.calls.Count("slow-build done "+base) == 1 })
	list := h.calls.List()
	firstRun := slices.IndexFunc(list, func(c string) bool { return strings.HasPrefix(c, "run ") })
	lastRun := -1
	for i, c := range list {
		if strings.HasPrefix(c, "run ") {
			lastRun = i
		}
	}
	done := slices.Index(list, "slow-build done "+base)
	if firstRun < 0 || done < lastRun {
		t.Errorf("the warm-up's build ended (call %d) before the round's last boot (call %d):\n%s", done, lastRun, strings.Join(list, "\n"))
	}
	for _, c := range list[max(firstRun, 0) : lastRun+1] {
		if strings.HasPrefix(c, "debug-build mainline "+base) {
			t.Errorf("the warm-up's build resumed during the round:\n%s", strings.Join(list, "\n"))
			break
		}
	}
}

// A base kernel that does not build in the base lane is left to the
// build job, which says so as it always did: a debug base that does not
// build leaves the debug profile out, and the series is still answered.
func TestBaseLaneLeavesABrokenBaseToTheTest(t *testing.T) {
	base := strings.Repeat("b", 40)
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		build := o.Stages.Build.(*fakestage.Builder)
		o.Stages.Debug = &fakestage.Debug{Lab: o.Stages.Lab.(*fakestage.Lab), Match: "svc_rdma_free", N: 1, Calls: build.Calls}
		o.Stages.DebugBuild = &fakestage.Builder{Dir: t.TempDir(), Debug: true, Config: "debug", Of: build, Calls: build.Calls,
			Broken: map[string]string{base: "lib/kasan.c:1:1: error: broken"}}
	})
	h.ingest.Add(teardownSeries("<teardown@x>", "[PATCH] svcrdma: tidy teardown"))
	h.wait("the reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	r, _ := h.report.Get("series:<teardown@x>:v1:")
	if r.Verdict != flow.Pass || slices.ContainsFunc(r.CandSamples, func(s flow.Sample) bool { return s.Profile == flow.ProfileDebug }) {
		t.Errorf("%s: want PASS without debug boots", r.Verdict)
	}
	tt, err := h.st.TestByKey(context.Background(), h.st.DB, "series:<teardown@x>:v1:")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the debug base kernel mainline bbbbbbbbbbbb does not build (left to the test that needs it)",
		"base does not build for the debug profile, which is left out"} {
		if !traceHas(t, h, tt.ID, want) {
			t.Errorf("the trace has no %q", want)
		}
	}
}

// A series' cold base gives way to other series' lab rounds as well as to
// builds: a series that needs the debug base nothing has built is posted,
// and once that build runs a plain series is posted. The plain series'
// round boots with no base build beside it (a build holds the heavy lock
// every boot takes, as the fake's one machine slot here, so the round
// would wait for the whole cold build), and the cold build resumes after
// it. Past bot.base_yield_max the same build gives way to builds only
// (the plain series' candidate), and the plain series' round waits for it.
func TestColdBaseGivesWayToOtherSeriesRounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		yieldMax time.Duration
		gives    bool
	}{{"within base_yield_max", time.Hour, true}, {"past base_yield_max", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			base := strings.Repeat("b", 40)
			cfg := testConfig()
			cfg.BaseYieldMax = cfgtype.D(tc.yieldMax)
			machine := make(chan struct{}, 1)
			h := newHarnessWith(t, cfg, "", "", func(o *bot.Options) {
				build := o.Stages.Build.(*fakestage.Builder)
				build.Machine = machine
				o.Stages.Lab.(*fakestage.Lab).Machine = machine
				withDebug(t, o, machine, map[string]time.Duration{base: 3 * time.Second})
			})
			h.lab.Delay = 300 * time.Millisecond
			h.ingest.Add(teardownSeries("<teardown@x>", "[PATCH] svcrdma: tidy teardown"))
			h.wait("the cold debug base build to start", 30*time.Second, func() bool { return h.calls.Count("debug-build mainline "+base) > 0 })
			h.ingest.Add(series("<plain@x>", "[PATCH] svcrdma: a plain change"))
			h.wait("both replies", 60*time.Second, func() bool { return h.report.Count() == 2 })

			list := h.calls.List()
			plain := slices.Index(list, "deliver series:<plain@x>:v1: PASS")
			done := slices.Index(list, "slow-build done "+base)
			stopped := slices.Contains(list, "slow-build stopped "+base)
			if tc.gives && (plain < 0 || done < plain || !stopped) {
				t.Errorf("the plain series' reply (call %d) waited for the cold build (done at call %d, stopped: %v):\n%s", plain, done, stopped, strings.Join(list, "\n"))
			}
			if !tc.gives && (done < 0 || done > plain) {
				t.Errorf("past the bound the cold build still gave way to the round (done at call %d, the plain reply at %d):\n%s", done, plain, strings.Join(list, "\n"))
			}
			r, _ := h.report.Get("series:<teardown@x>:v1:")
			if r.Verdict != flow.Pass || !slices.ContainsFunc(r.CandSamples, func(s flow.Sample) bool { return s.Profile == flow.ProfileDebug }) {
				t.Errorf("the series that needed the cold base: %s; want PASS with its debug kernel booted", r.Verdict)
			}
		})
	}
}

func TestBaseYieldMaxMustNotBeNegative(t *testing.T) {
	c := bot.DefaultConfig()
	c.BaseYieldMax = cfgtype.D(-time.Second)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "base_yield_max") {
		t.Errorf("a negative base_yield_max: %v", err)
	}
}

// The check lane: a series that does not compile or apply is answered
// while the machine is held (a lab boot or a cold build holding the
// heavy lock; the fake's one machine slot here, held by the test) and
// another series' build waits for it in the build lane: its base, its
// apply and the quick compile of its changed files wait for neither.
// Neither is built in full; the waiting series is answered after.
func TestCheckLaneAnswersBeforeAnyBuild(t *testing.T) {
	machine := make(chan struct{}, 1)
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		build := o.Stages.Build.(*fakestage.Builder)
		build.Machine = machine
		o.Stages.Lab.(*fakestage.Lab).Machine = machine
		o.Stages.Check = &fakestage.Checker{Of: build, Calls: build.Calls}
	})
	// A first series has the base built.
	h.ingest.Add(series("<first@x>", "[PATCH] svcrdma: a first change"))
	h.wait("the first reply", 30*time.Second, func() bool { return h.report.Count() == 1 })
	machine <- struct{}{}
	h.ingest.Add(series("<plain@x>", "[PATCH] svcrdma: a plain change"))
	h.wait("the plain series' candidate build to wait for the machine in the build lane", 30*time.Second, func() bool { return h.calls.Count("build mainline ") == 3 })
	h.ingest.Add(series("<break@x>", "[PATCH] svcrdma: build-fails in the send path"))
	h.ingest.Add(series("<stale@x>", "[PATCH] svcrdma: does-not-apply any more"))
	h.wait("the build break's and the stale series' replies", 30*time.Second, func() bool { return h.report.Count() == 3 })
	for id, want := range map[string]flow.Outcome{"<break@x>": flow.BuildFailed, "<stale@x>": flow.ApplyFailed} {
		r, _ := h.report.Get("series:" + id + ":v1:")
		if r.Verdict != want {
			t.Errorf("%s: %s, want %s", id, r.Verdict, want)
		}
	}
	if r, _ := h.report.Get("series:<break@x>:v1:"); !strings.Contains(r.Log, "expected ';'") {
		t.Errorf("the build break's reply lacks the compiler error: %q", r.Log)
	}
	for _, id := range []string{"<break@x>", "<stale@x>"} {
		tt, err := h.st.TestByKey(context.Background(), h.st.DB, "series:"+id+":v1:")
		if err != nil {
			t.Fatal(err)
		}
		if tt.Candidate != "" && h.calls.Count("build mainline "+tt.Candidate) > 0 {
			t.Errorf("%s was built in full:\n%s", id, strings.Join(h.calls.List(), "\n"))
		}
	}
	if tt, _ := h.st.TestByKey(context.Background(), h.st.DB, "series:<break@x>:v1:"); tt.Candidate == "" || tt.BaseArtifact == "" {
		t.Errorf("the build break's test names candidate %q, base kernel %q: its reply links neither the series' tree nor the base's .config", tt.Candidate, tt.BaseArtifact)
	}
	<-machine
	h.wait("the plain series' reply", 60*time.Second, func() bool { return h.report.Count() == 4 })
	if r, _ := h.report.Get("series:<plain@x>:v1:"); r.Verdict != flow.Pass {
		t.Errorf("the plain series: %s, want PASS", r.Verdict)
	}
	if n := h.calls.Count("deliver series:<break@x>"); n != 1 {
		t.Errorf("the build break was answered %d times", n)
	}
}

// What the quick check cannot settle goes on to the full build, which
// decides as before: a check that fails on the bot's side (its disk
// full) is no verdict, and the series' build gives it; a check that
// compiles nothing (a Kconfig change) or compiles cleanly hands over too.
func TestCheckLaneLeavesTheRestToTheBuild(t *testing.T) {
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		build := o.Stages.Build.(*fakestage.Builder)
		o.Stages.Check = &fakestage.Checker{Of: build, Calls: build.Calls, FailChecks: 1}
	})
	h.ingest.Add(series("<break@x>", "[PATCH] svcrdma: build-fails in the send path"))
	h.wait("the first reply", 30*time.Second, func() bool { return h.report.Count() == 1 })
	h.ingest.Add(series("<kconfig@x>", "[PATCH] svcrdma: check-skips with a new option"))
	h.ingest.Add(series("<plain@x>", "[PATCH] svcrdma: a plain change"))
	h.wait("three replies", 60*time.Second, func() bool { return h.report.Count() == 3 })
	want := map[string]struct {
		v     flow.Outcome
		trace string
	}{
		"<break@x>":   {flow.BuildFailed, "the quick check failed on the bot's side, the build decides: kbuild: check: no space left on device"},
		"<kconfig@x>": {flow.Pass, "quick check skipped: the series changes Kconfig"},
		"<plain@x>":   {flow.Pass, "the changed files compile alone (1 objects"},
	}
	for id, w := range want {
		key := "series:" + id + ":v1:"
		if r, _ := h.report.Get(key); r.Verdict != w.v {
			t.Errorf("%s: %s, want %s", id, r.Verdict, w.v)
		}
		tt, err := h.st.TestByKey(context.Background(), h.st.DB, key)
		if err != nil {
			t.Fatal(err)
		}
		if !traceHas(t, h, tt.ID, w.trace) {
			t.Errorf("%s: the trace has no %q", id, w.trace)
		}
		// Every one was built in full: the build decided.
		if h.calls.Count("build mainline "+tt.Candidate) != 1 {
			t.Errorf("%s: candidate %s built %d times, want once", id, tt.Candidate, h.calls.Count("build mainline "+tt.Candidate))
		}
	}

	// A retest: the candidate's kernel is in the artifact store, so there
	// is nothing to check, and the build takes the kernel from there.
	again := series("<plain@x>", "[PATCH] svcrdma: a plain change")
	again.Command = &flow.Command{Verb: flow.CommandRetest, MsgID: "<again@x>", From: "dev@example.org", Line: "#rdmabot retest"}
	h.ingest.Add(again)
	tt := h.testDone("series:<plain@x>:v1::cmd:<again@x>")
	if n := h.calls.Count("check mainline " + tt.Candidate); n != 1 {
		t.Errorf("the candidate was checked %d times, want once: its retest found its kernel built", n)
	}
	if !traceHas(t, h, tt.ID, "the candidate's kernel is built already: no quick check") {
		t.Error("the retest's trace does not say why it was not checked")
	}
}

// A series whose changed files compile to the base's objects changes
// nothing the lab could measure: the check lane answers PASS with the
// check's account, and its candidate is neither built nor booted. One
// the debug profile asks for is built and booted as any series, since
// the debug kernels' configuration was not compared.
func TestCheckLaneAnswersUnchangedCodeWithoutBoots(t *testing.T) {
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		build := o.Stages.Build.(*fakestage.Builder)
		o.Stages.Check = &fakestage.Checker{Of: build, Calls: build.Calls}
		withDebug(t, o, nil, nil)
	})
	h.ingest.Add(series("<comment@x>", "[PATCH] svcrdma: comment-only fix of the overview"))
	h.wait("the comment-only series' reply", 30*time.Second, func() bool { return h.report.Count() == 1 })
	tt := h.testDone("series:<comment@x>:v1:")
	r, _ := h.report.Get("series:<comment@x>:v1:")
	if r.Verdict != flow.Pass || !strings.Contains(string(r.Detail), `"unchanged"`) || !strings.Contains(r.Summary, "changes no generated code") {
		t.Errorf("the comment-only series: %s %q, detail %s; want PASS with the check's account", r.Verdict, r.Summary, r.Detail)
	}
	if len(r.BaseSamples)+len(r.CandSamples) > 0 || h.calls.Count("build mainline "+tt.Candidate) > 0 || h.calls.Count("run ") > 0 {
		t.Errorf("the comment-only series was built or booted:\n%s", strings.Join(h.calls.List(), "\n"))
	}
	if !traceHas(t, h, tt.ID, "no change in generated code: the kernel is the base's, nothing to build or boot") {
		t.Error("the trace does not say why nothing was booted")
	}

	h.ingest.Add(teardownSeries("<comment-free@x>", "[PATCH] svcrdma: comment-only fix in teardown"))
	h.wait("the second reply", 30*time.Second, func() bool { return h.report.Count() == 2 })
	tt = h.testDone("series:<comment-free@x>:v1:")
	r, _ = h.report.Get("series:<comment-free@x>:v1:")
	if r.Verdict != flow.Pass || !slices.ContainsFunc(r.CandSamples, func(s flow.Sample) bool { return s.Profile == flow.ProfileDebug }) {
		t.Errorf("the comment-only series the debug profile asks for: %s, samples %v; want PASS with its debug kernel booted", r.Verdict, r.CandSamples)
	}
	if !traceHas(t, h, tt.ID, "no change in the lab kernel's generated code, but it changes svc_rdma_free code (fake)") {
		t.Error("the trace does not say why an unchanged series was booted")
	}
}

// teardownSeries is a one-patch series that changes svc_rdma_free(), the
// code the fake debug profile (Match "svc_rdma_free") asks its kernels
// for.
func teardownSeries(id, subject string) flow.Series {
	s := series(id, subject)
	s.Patches = []*flow.Message{fakestage.Mail("From: dev\nSubject: " + subject + "\n\n---\n@@ -1 +1 @@ static void svc_rdma_free(struct svc_xprt *xprt)\n-x\n+y\n")}
	return s
}

// withDebug gives o the fake debug profile and its builder, on machine
// (nil: none), the base kernels in slow taking that long to build.
func withDebug(t *testing.T, o *bot.Options, machine chan struct{}, slow map[string]time.Duration) {
	build := o.Stages.Build.(*fakestage.Builder)
	o.Stages.Debug = &fakestage.Debug{Lab: o.Stages.Lab.(*fakestage.Lab), Match: "svc_rdma_free", N: 1, Calls: build.Calls}
	o.Stages.DebugBuild = &fakestage.Builder{Dir: t.TempDir(), Debug: true, Config: "debug", Of: build, Machine: machine, Slow: slow, Calls: build.Calls}
}
