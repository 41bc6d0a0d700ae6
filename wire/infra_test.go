package wire

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rdmabot/rdmabot/builder"
	"github.com/rdmabot/rdmabot/builder/kbuild"
	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lab"
)

// Every stage's own infrastructure error answers the bot's one question
// (Infra() bool), wrapped or not; the patch's faults do not.
func TestStageErrorsSayWhoseFault(t *testing.T) {
	cause := errors.New("disk full")
	for _, c := range []struct {
		err   error
		infra bool
	}{
		{&lab.InfraError{Op: "busy host", Err: cause}, true},
		{fmt.Errorf("lab: %w", &lab.InfraError{Op: "qemu died", Err: cause}), true},
		{&kbuild.InfraError{Op: "make", Err: cause}, true},
		{&builder.NoBaseError{Reason: "mainline/master is not in the store"}, true},
		{flow.MarkInfra(cause), true},
		{&lab.BootError{Host: "client", Phase: "rdma"}, false},
		{&kbuild.BuildError{Target: "bzImage"}, false},
		{cause, false},
		{flow.MarkInfra(nil), false},
	} {
		if got := flow.IsInfra(c.err); got != c.infra {
			t.Errorf("%T %v: infra %v, want %v", c.err, c.err, got, c.infra)
		}
	}
	if flow.MarkInfra(nil) != nil {
		t.Error("Infra(nil) is not nil")
	}
	labErr := &lab.InfraError{Err: cause}
	if flow.MarkInfra(labErr) != error(labErr) {
		t.Error("an error that says infra already was wrapped again")
	}
}
