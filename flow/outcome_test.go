package flow

import (
	"encoding/json"
	"testing"
)

// Every outcome reads back from its name, in JSON and in the database,
// and the zero outcome is the empty name that a test without a verdict
// has always stored.
func TestOutcomeNamesRoundTrip(t *testing.T) {
	for o := None; o <= Refused; o++ {
		name := o.String()
		if back, err := ParseOutcome(name); err != nil || back != o {
			t.Errorf("%d: %q parses as %v, %v", o, name, back, err)
		}
		b, err := json.Marshal(struct{ V Outcome }{o})
		var got struct{ V Outcome }
		if err != nil || json.Unmarshal(b, &got) != nil || got.V != o || string(b) != `{"V":"`+name+`"}` {
			t.Errorf("%v: JSON %s, %v, read back %v", o, b, err, got.V)
		}
		v, _ := o.Value()
		var scanned Outcome
		if err := scanned.Scan(v); err != nil || scanned != o {
			t.Errorf("%v: stored %v, scanned %v, %v", o, v, scanned, err)
		}
		if err := scanned.Scan([]byte(name)); err != nil || scanned != o {
			t.Errorf("%v: scanned from bytes %v, %v", o, scanned, err)
		}
	}
	if None.String() != "" {
		t.Errorf("None is %q", None.String())
	}
	var o Outcome
	if err := o.Scan(nil); err != nil || o != None {
		t.Errorf("NULL scans as %v, %v", o, err)
	}
	for _, bad := range []any{"NOT_A_VERDICT", 7} {
		if err := o.Scan(bad); err == nil {
			t.Errorf("%v scanned", bad)
		}
	}
	if err := json.Unmarshal([]byte(`"pass"`), &o); err == nil {
		t.Error("a name in the wrong case was read")
	}
	if s := Outcome(99).String(); s != "Outcome(99)" {
		t.Errorf("an unknown outcome prints %q", s)
	}
}

// Failing is what a maintainer must act on; a notice, INFRA and the
// comparisons that found nothing are not.
func TestFailing(t *testing.T) {
	want := map[Outcome]bool{Regression: true, Crash: true, BuildFailed: true, BootFailed: true, DataCorruption: true}
	for o := None; o <= Refused; o++ {
		if o.Failing() != want[o] {
			t.Errorf("%v failing: %v", o, o.Failing())
		}
	}
}
