package kbuild

import (
	"errors"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// A build machine's failure is the infrastructure's; a tree that does
// not build is the patch's.
func TestKbuildErrorsSayWhoseFault(t *testing.T) {
	if err := (&InfraError{Op: "make", Err: errors.New("disk full")}); !flow.IsInfra(err) {
		t.Errorf("%v: not infra", err)
	}
	if err := (&BuildError{Target: "bzImage"}); flow.IsInfra(err) {
		t.Errorf("%v: infra", err)
	}
}
