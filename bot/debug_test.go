package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/fakestage"
)

// The debug profile: a series that changes teardown code gets its base
// and candidate built a second time with the debug configuration, in the
// build job, and its first round boots those kernels; a use-after-free
// only the debug kernel reports is a CRASH. A series touching no such
// code builds nothing more; a candidate that does not build with the
// debug configuration is BUILD_FAILED, and saying so; the debug kernels
// are not booted again in later rounds.
func TestDebugProfileFindsAUseAfterFree(t *testing.T) {
	var debugBuild *fakestage.Builder
	var debug *fakestage.Debug
	h := newHarnessWith(t, testConfig(), "", "", func(o *bot.Options) {
		debug = &fakestage.Debug{Lab: o.Stages.Lab.(*fakestage.Lab), Match: "svc_rdma_free", N: 1}
		debugBuild = &fakestage.Builder{Dir: t.TempDir(), Debug: true, Config: "debug", Of: o.Stages.Build.(*fakestage.Builder)}
		o.Stages.Debug, o.Stages.DebugBuild = debug, debugBuild
	})
	debug.Calls, debugBuild.Calls = h.calls, h.calls
	patch := func(id, subject, body string) flow.Series {
		s := series(id, subject)
		s.Patches = []*flow.Message{fakestage.Mail("From: dev\nSubject: " + subject + "\n\n---\n" + body)}
		return s
	}
	teardown := "@@ -1 +1 @@ static void svc_rdma_free(struct svc_xprt *xprt)\n-x\n+y\n"
	h.ingest.Add(patch("<uaf@x>", "[PATCH] svcrdma: uaf on teardown", teardown))
	h.ingest.Add(patch("<clean@x>", "[PATCH] svcrdma: tidy teardown", teardown))
	h.ingest.Add(patch("<elsewhere@x>", "[PATCH] svcrdma: uaf elsewhere", "@@ -1 +1 @@ int svc_rdma_post_send(void)\n-x\n+y\n"))
	h.ingest.Add(patch("<nobuild@x>", "[PATCH] svcrdma: debug-build-fails in teardown", teardown))
	h.wait("four replies", 60*time.Second, func() bool { return h.report.Count() == 4 })

	uaf, _ := h.report.Get("series:<uaf@x>:v1:")
	if uaf.Verdict != flow.Crash || !strings.Contains(uaf.Summary, "KASAN: slab-use-after-free") {
		t.Errorf("use-after-free: %s %q, want CRASH (KASAN)", uaf.Verdict, uaf.Summary)
	}
	debugBoots := func(samples []flow.Sample) (n int) {
		for _, s := range samples {
			if s.Profile == "debug" {
				n++
			}
		}
		return n
	}
	// The candidate's crash is booted once more to confirm it.
	if c, b := debugBoots(uaf.CandSamples), debugBoots(uaf.BaseSamples); c != 2 || b != 1 || len(uaf.CandSamples) != 2 {
		t.Errorf("use-after-free: %d debug boots of the candidate (of %d), %d of the base; want two and one, and no default boot", c, len(uaf.CandSamples), b)
	}
	for key, want := range map[string]string{"series:<clean@x>:v1:": "PASS", "series:<elsewhere@x>:v1:": "PASS"} {
		if r, _ := h.report.Get(key); r.Verdict.String() != want {
			t.Errorf("%s: %s, want %s", key, r.Verdict, want)
		}
	}
	nobuild, _ := h.report.Get("series:<nobuild@x>:v1:")
	if nobuild.Verdict != flow.BuildFailed || !strings.Contains(nobuild.Summary, "debug profile's configuration") {
		t.Errorf("debug build failure: %s %q, want BUILD_FAILED naming the debug configuration", nobuild.Verdict, nobuild.Summary)
	}

	// What was built and booted: the debug kernels of the three series
	// that touch teardown code (the base once, from the artifact store
	// after), and debug boots only of the two whose kernels built, the
	// crashing candidate's twice.
	builds, boots := 0, 0
	for _, c := range h.calls.List() {
		switch {
		case strings.HasPrefix(c, "debug-build "):
			builds++
		case strings.HasPrefix(c, "debug "):
			boots++
			if strings.HasSuffix(c, " ") {
				t.Errorf("a debug boot without a debug kernel: %q", c)
			}
		}
	}
	if builds != 1+3 {
		t.Errorf("%d debug builds, want 4 (the base once, three candidates):\n%s", builds, strings.Join(h.calls.List(), "\n"))
	}
	if boots != 2+3 {
		t.Errorf("%d debug boots, want 5 (base and candidate of two series, the crash confirmed):\n%s", boots, strings.Join(h.calls.List(), "\n"))
	}
	ctx := context.Background()
	for _, key := range []string{"series:<uaf@x>:v1:", "series:<clean@x>:v1:"} {
		tt, err := h.st.TestByKey(ctx, h.st.DB, key)
		if err != nil {
			t.Fatal(err)
		}
		if tt.BaseDebugArtifact == "" || tt.CandDebugArtifact == "" || tt.CandDebugArtifact == tt.CandArtifact {
			t.Errorf("%s: debug artifacts %q %q beside %q", key, tt.BaseDebugArtifact, tt.CandDebugArtifact, tt.CandArtifact)
		}
	}
	if tt, err := h.st.TestByKey(ctx, h.st.DB, "series:<elsewhere@x>:v1:"); err != nil || tt.CandDebugArtifact != "" {
		t.Errorf("a series touching no teardown code got debug kernels: %q (%v)", tt.CandDebugArtifact, err)
	}
}
