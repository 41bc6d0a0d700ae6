package reports

import (
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
)

// A refusal answers the command mail (In-Reply-To it, References its
// chain), to its sender alone, quoting the command; an incomplete-series
// notice answers the series' root, to its author, Cc the series' lists.
func TestRenderNotice(t *testing.T) {
	c := DefaultConfig()
	th := Thread{Subject: "[PATCH v2 0/3] svcrdma: fix", MessageID: "cover@x", References: nil,
		Author: Address{Name: "Chuck Lever", Email: "cel@kernel.org"}, Lists: []string{"linux-rdma@vger.kernel.org"}, Version: 2}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m, err := RenderNotice(&c, &Notice{Outcome: flow.Refused, Thread: th, To: Address{Name: "Eve Mallory", Email: "eve@example.org"},
		InReplyTo: "cmd@x", References: []string{"cover@x"}, Quote: "#rdmabot retest",
		Text: "You may not ask me to test this series."}, "id@rdmabot.invalid", now)
	if err != nil {
		t.Fatal(err)
	}
	raw := string(m.Bytes())
	if strings.Contains(raw, "Cc:") || strings.Contains(raw, "vger") {
		t.Errorf("a refusal to the list:\n%s", raw)
	}
	for _, want := range []string{"To: \"Eve Mallory\" <eve@example.org>\n", "In-Reply-To: <cmd@x>\n",
		"References: <cover@x>\n <cmd@x>\n", "Subject: Re: [PATCH v2 0/3] svcrdma: fix\n", "Hi Eve,\n\n> #rdmabot retest\n\nYou may not ask me",
		"\n-- \nrdmabot, a test bot"} {
		if !strings.Contains(raw, want) {
			t.Errorf("refusal lacks %q:\n%s", want, raw)
		}
	}
	if m.Outcome.String() != "REFUSED" {
		t.Errorf("outcome %v", m.Outcome)
	}
	m, err = RenderNotice(&c, &Notice{Outcome: flow.Incomplete, Thread: th, To: th.Author, Text: "Patch 2/3 never arrived."}, "id2@rdmabot.invalid", now)
	if err != nil {
		t.Fatal(err)
	}
	if raw := string(m.Bytes()); !strings.Contains(raw, "In-Reply-To: <cover@x>\n") || !strings.Contains(raw, "To: \"Chuck Lever\" <cel@kernel.org>") ||
		!strings.Contains(raw, "Cc: <linux-rdma@vger.kernel.org>\n") ||
		!strings.Contains(raw, "Hi Chuck,\n\nPatch 2/3 never arrived.") || m.Outcome.String() != "INCOMPLETE" {
		t.Errorf("incomplete notice:\n%s", raw)
	}
	if o, err := flow.ParseOutcome("INCOMPLETE"); err != nil || o != flow.Incomplete || !Mailed(o) {
		t.Errorf("ParseOutcome: %v %v", o, err)
	}
	if _, err := RenderNotice(&c, &Notice{Outcome: flow.Pass, Thread: th, To: th.Author}, "x@y", now); err == nil {
		t.Error("a verdict rendered as a notice")
	}
	if _, err := RenderNotice(&c, &Notice{Outcome: flow.Refused, Thread: th}, "x@y", now); err == nil {
		t.Error("a notice to nobody")
	}
}
