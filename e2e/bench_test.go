package e2e

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkTimeToVerdict times one harmless series from its posting to
// its verdict (a quiet PASS: on the dashboard, not mailed) with
// config.toml's statistics budget, on warm
// caches: a first series is answered before the clock starts, so the
// ccache, the build slot, the base kernel and the base's measurements are
// all warm, as they are on a bot that has been running. The measured
// series is new each time, so its kernel is really built. It prints the
// time per stage.
//
//	eval "$(bash scripts/prepare-lab.sh)"
//	go test ./e2e -run '^$' -bench TimeToVerdict -benchtime 1x -timeout 60m
func BenchmarkTimeToVerdict(bm *testing.B) {
	m := needMachine(bm)
	for bm.Loop() {
		a := newAuthor(bm, m)
		warm, measured := a.harmlessNew("warm-up"), a.harmlessNew(time.Now().UTC().Format(time.RFC3339Nano))
		b := startBot(bm, m, nil) // config.toml's budget
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
		b.post(warm.mails...)
		b.waitVerdict(ctx, warm.root)

		posted := time.Now()
		b.post(measured.mails...)
		tv := b.waitVerdict(ctx, measured.root)
		took := tv.UpdatedAt.Sub(posted)
		cancel()
		bm.ReportMetric(took.Seconds(), "s/verdict")
		bm.ReportMetric(took.Seconds()/300, "x-target(5min)")
		bm.Logf("%s: %s in %s (target 5m0s)", measured.name, tv.Verdict, took.Round(time.Second))

		// Per stage, from the dashboard's record of the test's jobs.
		for _, tv := range b.tests(bm) {
			// The dashboard shows the subject without its [PATCH] prefix.
			if !strings.HasSuffix(subjectOf(measured.mails[0]), "] "+tv.Subject) {
				continue
			}
			bm.Logf("  %-8s %6.1f s  (posting to the test's creation: the poll)", "ingest", tv.CreatedAt.Sub(posted).Seconds())
			jobs := tv.Jobs
			sort.Slice(jobs, func(i, j int) bool { return jobs[i].ID < jobs[j].ID })
			for _, j := range jobs {
				bm.Logf("  %-8s %6.1f s  attempt %d", j.Kind, j.Took, j.Attempt)
			}
		}
	}
}
