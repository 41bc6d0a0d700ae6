package bot_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// "#rdmabot invalid" and "#rdmabot dup" mark the newest report on the
// series version, once per mail, and answer nothing; on a series with no
// report of the bot's yet, the sender is told so (REFUSED, to them).
func TestDisputeMarksTheReport(t *testing.T) {
	repo, commits := gitRepo(t, 2, -1, nil)
	cfg := testConfig()
	cfg.SeriesBisect = false
	h := newHarnessWith(t, cfg, repo, "", nil)
	h.build.Base = commits[1]
	ctx := context.Background()

	h.ingest.Add(seriesOf("<reg@x>", "svcrdma: tidy", "svcrdma: slow send"))
	h.wait("the report", 60*time.Second, func() bool { return h.report.Count() == 1 })
	orig := h.testDone("series:<reg@x>:v1:")

	dispute := func(id, cmd, verb, note string) flow.Series {
		s := seriesOf(id, "svcrdma: tidy", "svcrdma: slow send")
		s.Command = &flow.Command{MsgID: cmd, From: "maint@example.org", Line: "#rdmabot " + verb + " " + note, Verb: verb, Note: note}
		return s
	}
	h.ingest.Add(dispute("<reg@x>", "<inv@x>", flow.CommandInvalid, "the lab was busy"))
	h.ingest.Add(dispute("<reg@x>", "<dup@x>", flow.CommandDup, "https://lore.kernel.org/r/older@x/"))
	// The same mail read again (a restart re-reads the window).
	h.ingest.Add(dispute("<reg@x>", "<inv@x>", flow.CommandInvalid, "the lab was busy"))
	// Nothing reported on this one.
	h.ingest.Add(dispute("<none@x>", "<inv2@x>", flow.CommandInvalid, ""))
	h.wait("the refusal", 60*time.Second, func() bool { return h.report.Count() == 2 })

	var got []string
	h.wait("the disputes", 30*time.Second, func() bool {
		ds, err := h.st.Disputes(ctx, h.st.DB, orig.ID)
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, d := range ds {
			got = append(got, d.MsgID+" "+d.Kind+" "+d.Note+" "+d.By)
		}
		return len(ds) >= 2
	})
	time.Sleep(300 * time.Millisecond)
	// Oldest first (the two may share a millisecond): compared as a set.
	slices.Sort(got)
	want := []string{"<dup@x> dup https://lore.kernel.org/r/older@x/ maint@example.org", "<inv@x> invalid the lab was busy maint@example.org"}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("disputes %q, want %q", got, want)
	}
	r, ok := h.report.Get("refused:<inv2@x>")
	if !ok || r.Verdict != flow.Refused || r.Summary != "There is no report of mine on this series (v1) to call invalid." {
		t.Errorf("the dispute of an unreported series: %v %s %q", ok, r.Verdict, r.Summary)
	}
	if n := h.report.Count(); n != 2 {
		t.Errorf("%d replies, want 2: a dispute is answered by nothing", n)
	}
}
