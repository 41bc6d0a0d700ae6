package reports

import (
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

func TestAudience(t *testing.T) {
	c := DefaultConfig()
	for _, tc := range []struct {
		o    flow.Outcome
		on   Occasion
		want Audience
	}{
		{flow.Pass, Occasion{}, Nobody},
		{flow.Pass, Occasion{Asked: true}, Asker},
		{flow.Pass, Occasion{ClosesReport: true}, InThread},
		{flow.Improvement, Occasion{}, Nobody},
		{flow.Regression, Occasion{}, InThread},
		// Asked for: to the one who asked, whatever it found, never a
		// list's daily replies (three retests would silence it).
		{flow.Regression, Occasion{Asked: true}, Asker},
		{flow.Crash, Occasion{Asked: true}, Asker},
		{flow.Pass, Occasion{Asked: true, ClosesReport: true}, Asker},
		{flow.Crash, Occasion{}, InThread},
		{flow.BootFailed, Occasion{}, InThread},
		{flow.DataCorruption, Occasion{}, InThread},
		{flow.BuildFailed, Occasion{GuessedBase: true}, InThread},
		{flow.ApplyFailed, Occasion{}, InThread},
		{flow.ApplyFailed, Occasion{GuessedBase: true}, Nobody},
		{flow.ApplyFailed, Occasion{GuessedBase: true, Asked: true}, Asker},
		{flow.Inconclusive, Occasion{Asked: true}, Nobody},
		{flow.Infra, Occasion{Asked: true, ClosesReport: true}, Nobody},
		{flow.Refused, Occasion{Asked: true}, Nobody},
		// A stall of one boot is no evidence to mail a list with.
		{flow.Crash, Occasion{Unconfirmed: true}, Nobody},
		{flow.Crash, Occasion{Unconfirmed: true, Asked: true}, Asker},
	} {
		if got := c.Audience(tc.o, tc.on); got != tc.want {
			t.Errorf("%v %+v: %v, want %v", tc.o, tc.on, got, tc.want)
		}
	}
	// An operator who wants every pass on the list says so.
	c.MailOutcomes = append(c.MailOutcomes, "PASS")
	if got := c.Audience(flow.Pass, Occasion{}); got != InThread {
		t.Errorf("PASS in mail_outcomes: %v", got)
	}
}

func TestValidateMailOutcomes(t *testing.T) {
	for _, tc := range []struct {
		v    []string
		want string
	}{
		{DefaultMailOutcomes(), ""},
		{nil, ""},
		{[]string{"PASS", "IMPROVEMENT"}, ""},
		{[]string{"REGRESION"}, `unknown outcome "REGRESION"`},
		{[]string{"INFRA"}, "INFRA is never"},
		{[]string{"INCOMPLETE"}, "INCOMPLETE is never"},
	} {
		c := DefaultConfig()
		c.MailOutcomes = tc.v
		err := c.Validate()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.v, err, tc.want)
		}
	}
}

func TestSignatureNamesContact(t *testing.T) {
	c := DefaultConfig()
	if s := signature(&c); strings.Contains(s, "Write to") || !strings.Contains(s, `"#rdmabot retest"`) || !strings.Contains(s, `"#rdmabot invalid <why>"`) {
		t.Errorf("no contact set:\n%s", s)
	}
	c.Contact = "Ann Operator <ann@example.org>"
	if s := signature(&c); !strings.Contains(s, "Write to Ann Operator <ann@example.org>.") {
		t.Errorf("contact set:\n%s", s)
	}
	c.Contact = "not an address"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "reports.contact") {
		t.Errorf("a bad contact: %v", err)
	}
}
