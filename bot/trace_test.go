package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// A lab job that finds the pair busy writes so once, not once per look
// (every LeaseWait): the waiting round's trace reads the lines of its
// first look, then the round itself.
func TestWaitForThePairTracedOnce(t *testing.T) {
	h := newHarness(t, testConfig(), "")
	h.lab.Delay = 200 * time.Millisecond // each boot: the other round waits
	h.ingest.Add(series("<one@x>", "[PATCH] svcrdma: harmless"))
	h.ingest.Add(series("<two@x>", "[PATCH] svcrdma: harmless too"))
	h.wait("two verdicts", 60*time.Second, func() bool { return h.report.Count() == 2 })
	ctx := context.Background()
	res, err := h.bot.River().JobList(ctx, river.NewJobListParams().Kinds("lab").States(rivertype.JobStateCompleted).First(100))
	if err != nil {
		t.Fatal(err)
	}
	waited := 0
	for _, j := range res.Jobs {
		lines, err := h.st.Trace(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		var text []string
		busy := 0
		for _, l := range lines {
			text = append(text, l.Line)
			if strings.Contains(l.Line, "is busy; waiting") {
				busy++
			}
		}
		if busy > 1 {
			t.Errorf("lab job %d (attempt %d): %d busy lines:\n%s", j.ID, j.Attempt, busy, strings.Join(text, "\n"))
		}
		if busy == 1 {
			waited++
			if last := text[len(text)-1]; strings.Contains(last, "busy") {
				t.Errorf("lab job %d ends waiting:\n%s", j.ID, strings.Join(text, "\n"))
			}
		}
	}
	stats, err := h.st.JobStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	looks := int64(0)
	for _, s := range stats {
		if s.Kind == "lab" && s.Outcome == "snoozed" {
			looks = s.Count
		}
	}
	if waited == 0 || looks < 3 {
		t.Fatalf("%d rounds waited for the pair, looking %d times: the test proves nothing", waited, looks)
	}
	t.Logf("%d rounds waited, %d looks at a busy pair", waited, looks)
}
