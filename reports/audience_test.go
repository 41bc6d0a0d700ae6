package reports

import (
	"strings"
	"testing"
)

func TestAudience(t *testing.T) {
	c := DefaultConfig()
	for _, tc := range []struct {
		o    Outcome
		on   Occasion
		want Audience
	}{
		{Pass, Occasion{}, Nobody},
		{Pass, Occasion{Asked: true}, Asker},
		{Pass, Occasion{ClosesReport: true}, InThread},
		{Improvement, Occasion{}, Nobody},
		{Regression, Occasion{}, InThread},
		{Regression, Occasion{Asked: true}, InThread},
		{CrashFound, Occasion{}, InThread},
		{BootFailed, Occasion{}, InThread},
		{DataCorruption, Occasion{}, InThread},
		{BuildFailed, Occasion{GuessedBase: true}, InThread},
		{ApplyFailed, Occasion{}, InThread},
		{ApplyFailed, Occasion{GuessedBase: true}, Nobody},
		{ApplyFailed, Occasion{GuessedBase: true, Asked: true}, Asker},
		{Inconclusive, Occasion{Asked: true}, Nobody},
		{Infra, Occasion{Asked: true, ClosesReport: true}, Nobody},
		{Refused, Occasion{Asked: true}, Nobody},
	} {
		if got := c.Audience(tc.o, tc.on); got != tc.want {
			t.Errorf("%v %+v: %v, want %v", tc.o, tc.on, got, tc.want)
		}
	}
	// An operator who wants every pass on the list says so.
	c.MailOutcomes = append(c.MailOutcomes, "PASS")
	if got := c.Audience(Pass, Occasion{}); got != InThread {
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
