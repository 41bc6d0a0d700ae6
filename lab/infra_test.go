package lab

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// The lab's own failures are the infrastructure's, wrapped or not; a
// boot that fails is the kernel's.
func TestLabErrorsSayWhoseFault(t *testing.T) {
	cause := errors.New("disk full")
	for _, c := range []struct {
		err   error
		infra bool
	}{
		{&InfraError{Op: "busy host", Err: cause}, true},
		{fmt.Errorf("lab: %w", &InfraError{Op: "qemu died", Err: cause}), true},
		{&BootError{Host: "client", Phase: "rdma"}, false},
	} {
		if got := flow.IsInfra(c.err); got != c.infra {
			t.Errorf("%T %v: infra %v, want %v", c.err, c.err, got, c.infra)
		}
	}
}
