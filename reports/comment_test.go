package reports

import (
	"strings"
	"testing"
	"time"
)

// A confirmed bisection says how often the confirmation ran, as the steps
// record it (confirm_runs), never a fixed count, in the mail and the
// comment alike.
func TestBisectionConfirmCounts(t *testing.T) {
	c := &Config{From: "rdmabot <rdmabot@rdmabot.invalid>", DocsURL: "https://example.org/docs"}
	b := &Bisection{Title: "copy regressed", Good: "aaaa", Bad: "bbbb", Culprit: "cccc", Confirmed: true, To: []string{"linux-rdma@vger.kernel.org"},
		Steps: []BisectStep{{N: 1, Phase: "bisect"}, {N: 2, Phase: "confirm-culprit"}, {N: 3, Phase: "confirm-parent"}, {N: 4, Phase: "confirm-revert"}}}
	if body := RenderBisectionComment(c, b, "chuck"); !strings.Contains(body, "fails again once, its parent passes again once") || strings.Contains(body, "times") {
		t.Errorf("comment:\n%s", body)
	}
	b.Steps = append(b.Steps, BisectStep{N: 5, Phase: "confirm-culprit"}, BisectStep{N: 6, Phase: "confirm-parent"})
	if body := RenderBisectionComment(c, b, ""); !strings.Contains(body, "fails again 2 times, its parent passes again 2 times") || strings.Contains(body, "@") {
		t.Errorf("comment:\n%s", body)
	}
	m, err := RenderBisection(c, b, "x-rdmabot@rdmabot.invalid", time.Unix(0, 0))
	if err != nil || !strings.Contains(m.Body, "it fails again (2 times), its parent passes again (2 times)") {
		t.Errorf("mail %v:\n%v", err, m)
	}
	b.To = nil
	if _, err := RenderBisection(c, b, "x-rdmabot@rdmabot.invalid", time.Unix(0, 0)); err == nil {
		t.Error("a bisection report without a list to go to")
	}
}

// A console holding a fence cannot end the comment's code block early.
func TestFencedOutlastsBackticks(t *testing.T) {
	got := fenced("a\n```\nb ````` c")
	if !strings.HasPrefix(got, "``````\n") || !strings.HasSuffix(got, "\n``````\n\n") {
		t.Errorf("fenced:\n%s", got)
	}
	if got := fenced("plain"); got != "```\nplain\n```\n\n" {
		t.Errorf("fenced: %q", got)
	}
}
