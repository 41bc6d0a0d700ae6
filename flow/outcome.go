package flow

import (
	"database/sql/driver"
	"fmt"
)

// Outcome is a verdict on a series (or a mainline head, or an A/A
// comparison). The zero Outcome is None: not decided yet. Its text is
// what the database, the JSON API and the replies show.
type Outcome int

const (
	None Outcome = iota
	Pass
	Regression
	Improvement
	Inconclusive // undecided after the budget
	ApplyFailed
	BuildFailed
	BootFailed // the candidate kernel did not come up
	Crash
	// DataCorruption: the file read back differs from the one written,
	// with no crash.
	DataCorruption
	Infra
	// Measured: a first mainline head, nothing to compare it with.
	Measured
	// Incomplete and Refused are notices, never a comparison's outcome:
	// patches still missing after lore.grace_period (answered, not
	// tested), a mail command from someone who may not ask.
	Incomplete
	Refused
)

var outcomeNames = [...]string{"", "PASS", "REGRESSION", "IMPROVEMENT", "INCONCLUSIVE", "APPLY_FAILED",
	"BUILD_FAILED", "BOOT_FAILED", "CRASH", "DATA_CORRUPTION", "INFRA", "MEASURED", "INCOMPLETE", "REFUSED"}

func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return fmt.Sprintf("Outcome(%d)", int(o))
	}
	return outcomeNames[o]
}

// ParseOutcome is the inverse of String ("" is None).
func ParseOutcome(s string) (Outcome, error) {
	for i, n := range outcomeNames {
		if n == s {
			return Outcome(i), nil
		}
	}
	return None, fmt.Errorf("unknown outcome %q", s)
}

// Failing says whether o is a finding against the kernel tested: what a
// maintainer must act on, and what a bisection looks for.
func (o Outcome) Failing() bool {
	switch o {
	case Regression, Crash, BuildFailed, BootFailed, DataCorruption:
		return true
	}
	return false
}

// MarshalText writes o's name (JSON, TOML).
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText reads a name MarshalText wrote.
func (o *Outcome) UnmarshalText(b []byte) error {
	v, err := ParseOutcome(string(b))
	if err != nil {
		return err
	}
	*o = v
	return nil
}

// Value stores o as its name.
func (o Outcome) Value() (driver.Value, error) { return o.String(), nil }

// Scan reads a stored name.
func (o *Outcome) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*o = None
		return nil
	case string:
		return o.UnmarshalText([]byte(v))
	case []byte:
		return o.UnmarshalText(v)
	}
	return fmt.Errorf("flow: outcome stored as %T", src)
}
