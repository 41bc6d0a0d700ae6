package flow

import (
	"errors"
	"fmt"
	"testing"
)

// stageInfra is a stage's own infrastructure error, as lab's or kbuild's.
type stageInfra struct{ err error }

func (e *stageInfra) Error() string { return "stage: " + e.err.Error() }
func (e *stageInfra) Infra() bool   { return true }

// Whose fault an error is: a stage's error that says Infra(), wrapped or
// not, or one MarkInfra marked; any other error is the patch's.
// MarkInfra keeps nil nil and does not wrap what says infra already.
func TestIsInfra(t *testing.T) {
	cause := errors.New("disk full")
	for _, c := range []struct {
		err   error
		infra bool
	}{
		{&stageInfra{cause}, true},
		{fmt.Errorf("lab: %w", &stageInfra{cause}), true},
		{MarkInfra(cause), true},
		{cause, false},
		{MarkInfra(nil), false},
	} {
		if got := IsInfra(c.err); got != c.infra {
			t.Errorf("%T %v: infra %v, want %v", c.err, c.err, got, c.infra)
		}
	}
	if MarkInfra(nil) != nil {
		t.Error("MarkInfra(nil) is not nil")
	}
	se := &stageInfra{cause}
	if MarkInfra(se) != error(se) {
		t.Error("an error that says infra already was wrapped again")
	}
}
