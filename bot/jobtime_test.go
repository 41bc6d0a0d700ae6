package bot

import (
	"testing"
	"time"
)

// Pruning keeps every kernel used within maxJobTime, taking no job to
// hold one longer: no job that builds, pulls or boots kernels may run
// longer than that (the tree fetch, up to 7 h, holds none).
func TestNoKernelJobOutlivesMaxJobTime(t *testing.T) {
	for name, d := range map[string]time.Duration{
		"build":        (&buildWorker{}).Timeout(nil),
		"base_kernels": (&baseKernelsWorker{}).Timeout(nil),
		"lab":          (&labWorker{}).Timeout(nil),
		"bisect":       (&bisectWorker{}).Timeout(nil),
	} {
		if d <= 0 || d > maxJobTime {
			t.Errorf("%s jobs run up to %v, pruning keeps a used kernel %v", name, d, maxJobTime)
		}
	}
}
