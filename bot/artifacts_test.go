package bot_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// seedArtifact puts a kernel of 600 KiB in the bot's artifact store,
// last used at used.
func (h *harness) seedArtifact(key string, used time.Time) {
	h.t.Helper()
	dir := h.bot.Artifacts().Path(key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bzImage"), make([]byte, 600<<10), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := h.bot.Artifacts().Touch(key, used); err != nil {
		h.t.Fatal(err)
	}
}

// traceOf is every trace line of a test's jobs.
func (h *harness) traceOf(testKey string) string {
	h.t.Helper()
	ctx := context.Background()
	tt, err := h.st.TestByKey(ctx, h.st.DB, testKey)
	if err != nil {
		h.t.Fatal(err)
	}
	jobs, _ := h.bot.JobsOfTest(ctx, tt.ID)
	var b strings.Builder
	for _, j := range jobs {
		lines, _ := h.st.Trace(ctx, j.ID)
		for _, l := range lines {
			b.WriteString(l.Line + "\n")
		}
	}
	return b.String()
}

func (h *harness) stored() (keys map[string]bool, size int64) {
	h.t.Helper()
	all, err := h.bot.Artifacts().List()
	if err != nil {
		h.t.Fatal(err)
	}
	keys = map[string]bool{}
	for _, s := range all {
		keys[s.Key] = true
		size += s.Size
	}
	return keys, size
}

// bot.artifacts_max_mib: after each kernel is stored the least recently
// used kernels go until the store is within its bound, each dropped from
// the builder's store too; never one a test not finished names, nor one
// used within the last hours (a job may hold it); a pruned kernel that a
// later test needs is built again.
func TestArtifactStoreBounded(t *testing.T) {
	cfg := testConfig()
	cfg.ArtifactsMaxMiB = -1
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "bot.artifacts_max_mib") {
		t.Errorf("a negative bound: %v", err)
	}
	cfg.ArtifactsMaxMiB = 1
	h := newHarness(t, cfg, "")
	ctx := context.Background()
	now := time.Now()
	h.seedArtifact("old-1", now.Add(-48*time.Hour))
	h.seedArtifact("old-2", now.Add(-24*time.Hour))
	h.seedArtifact("needed", now.Add(-72*time.Hour))
	h.seedArtifact("recent", now.Add(-time.Hour))
	// A test in the lab's hands names "needed" (no job runs it here).
	id, _, err := h.st.AddTest(ctx, h.st.DB, store.Test{Key: "in-the-lab", Kind: store.KindRef, Tree: "mainline", Lab: "qemu"})
	if err != nil {
		t.Fatal(err)
	}
	tt, _ := h.st.Test(ctx, h.st.DB, id)
	tt.State, tt.CandArtifact = store.StateTesting, "needed"
	if err := h.st.UpdateTest(ctx, h.st.DB, tt); err != nil {
		t.Fatal(err)
	}

	base := "mainline-" + strings.Repeat("b", 40)
	h.ingest.Add(series("<a@x>", "[PATCH] svcrdma: harmless"))
	h.wait("the first reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	keys, size := h.stored()
	for k, want := range map[string]bool{"old-1": false, "old-2": false, "needed": true, "recent": true, base: true} {
		if keys[k] != want {
			t.Errorf("after the first test: %s stored %v, want %v (%v)", k, keys[k], want, keys)
		}
	}
	if h.calls.Count("forget old-1") != 1 || h.calls.Count("forget old-2") != 1 || h.calls.Count("forget needed") != 0 {
		t.Errorf("the builder was not told of exactly the pruned kernels:\n%s", strings.Join(h.calls.List(), "\n"))
	}
	// Both needed kernels are kept, so the store stays above its bound,
	// and says why.
	if size <= 1<<20 {
		t.Errorf("store %d bytes: the kept kernels alone are more than 1 MiB", size)
	}
	tr := h.traceOf("series:<a@x>:v1:")
	if !strings.Contains(tr, "removed the 2 least recently used kernels (old-1, old-2)") ||
		!strings.Contains(tr, "above bot.artifacts_max_mib 1: every kernel left is needed") {
		t.Errorf("the build job's trace does not say what was pruned and why the rest stays:\n%s", tr)
	}

	// A day later (the first test's kernels last used then), a series on
	// another base: its kernels push out the least recently used ones the
	// finished test left, until the store is within 1 MiB.
	for i, k := range []string{base, "recent"} {
		if err := h.bot.Artifacts().Touch(k, now.Add(-time.Duration(30-i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	for k := range keys {
		if strings.HasPrefix(k, "mainline-") && k != base {
			h.bot.Artifacts().Touch(k, now.Add(-29*time.Hour)) // the first candidate
		}
	}
	h.build.Base = strings.Repeat("c", 40)
	h.ingest.Add(series("<b@x>", "[PATCH] svcrdma: harmless too"))
	h.wait("the second reply", 60*time.Second, func() bool { return h.report.Count() == 2 })
	keys, size = h.stored()
	if keys[base] || keys["recent"] || !keys["needed"] || !keys["mainline-"+strings.Repeat("c", 40)] {
		t.Errorf("after the second test: %v", keys)
	}
	if size > 1<<20 {
		t.Errorf("store %d bytes after a kernel was added, bound 1 MiB", size)
	}

	// The first base, pruned, is built again when a test needs it.
	h.build.Base = ""
	h.ingest.Add(series("<c@x>", "[PATCH] svcrdma: harmless three"))
	h.wait("the third reply", 60*time.Second, func() bool { return h.report.Count() == 3 })
	if n := h.calls.Count("build mainline " + strings.Repeat("b", 40)); n != 2 {
		t.Errorf("the pruned base built %d times, want 2", n)
	}
	if r, _ := h.report.Get("series:<c@x>:v1:"); r.Verdict != flow.Pass {
		t.Errorf("the series on the rebuilt base: %q", r.Verdict)
	}
	if keys, _ = h.stored(); !keys["needed"] {
		t.Error("the kernel the unfinished test names was pruned")
	}
}

// A builder that cannot drop its copy stops the pruning (logged in the
// trace), never the test.
func TestArtifactPruningFailureSparesTheTest(t *testing.T) {
	cfg := testConfig()
	cfg.ArtifactsMaxMiB = 1
	h := newHarness(t, cfg, "")
	h.build.ForgetErr = errors.New("kbuild store: read-only file system")
	h.seedArtifact("old-1", time.Now().Add(-48*time.Hour))
	h.seedArtifact("old-2", time.Now().Add(-24*time.Hour))
	h.ingest.Add(series("<a@x>", "[PATCH] svcrdma: harmless"))
	h.wait("the reply", 60*time.Second, func() bool { return h.report.Count() == 1 })
	if r, _ := h.report.Get("series:<a@x>:v1:"); r.Verdict != flow.Pass {
		t.Errorf("verdict %q", r.Verdict)
	}
	if tr := h.traceOf("series:<a@x>:v1:"); !strings.Contains(tr, "pruning failed: kbuild store: read-only file system") {
		t.Errorf("trace:\n%s", tr)
	}
	if keys, _ := h.stored(); keys["old-1"] {
		t.Error("old-1 is still stored: the failure came after it was removed")
	}
}
