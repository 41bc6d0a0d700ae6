package wire

import (
	"context"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/smtptest"
)

// A refusal goes to the command's sender alone, never to the series'
// lists: strangers' commands cannot spend a list's daily replies (a
// refusal Cc the list took its last one, and the author's verdict
// waited).
func TestRefusalSparesTheListsBudget(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	g := newReplyRig(t, func(c *Config) {
		c.Reports.Mail, c.Reports.Moderate, c.Reports.SMTP.Addr, c.Reports.SMTP.StartTLS = true, false, srv.Addr, false
		c.Reports.ListDailyLimit = 1
	})
	ctx := context.Background()
	refused := g.report(1, flow.Refused, "eve@example.org may not ask.", nil, nil, nil)
	refused.Origin.Command = &flow.Command{MsgID: "cmd-eve@example.org", From: "eve@example.org", Name: "Eve Stranger",
		Line: "#rdmabot test", References: []string{g.s.Root}, Refused: refused.Summary}
	e := g.deliver(t, refused)
	if len(e.Lists) != 0 || strings.Contains(string(e.Raw), "vger.kernel.org") || e.Recipient != "eve@example.org" {
		t.Errorf("refusal to %s, lists %q:\n%s", e.Recipient, e.Lists, e.Raw)
	}
	if m := srv.Messages(); len(m) != 1 || strings.Join(m[0].To, " ") != "eve@example.org" {
		t.Errorf("%d sent, the first to %q", len(m), m[0].To)
	}
	// The author's verdict still has the list's reply of the day.
	d := decide(t, g.r, samples(2*g.r.Cfg.Runs, 100, 2), samples(2*g.r.Cfg.Runs, 52, 2))
	e = g.deliver(t, g.report(2, d.Verdict, d.Summary, d.Detail, nil, nil))
	if len(e.Lists) == 0 {
		t.Fatalf("the verdict goes to no list")
	}
	if _, err := g.ob.Deliver(ctx); err != nil {
		t.Fatal(err)
	}
	if m := srv.Messages(); len(m) != 2 {
		t.Errorf("the author's verdict after a refusal: %d sent, its state %s", len(m)-1, e.State)
	}
}
