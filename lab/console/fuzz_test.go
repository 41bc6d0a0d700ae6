package console

import (
	"strings"
	"testing"
)

// Whatever a guest prints, the monitor does not panic: the console is
// the patch's output, hostile or broken.
func FuzzMonitor(f *testing.F) {
	f.Add("[   12.3] INFO: task nfsd:123 blocked for more than 20 seconds.\n[   12.4] Call Trace:\n[   12.5]  __ib_drain_sq+0x1/0x2\n")
	f.Add("BUG: KASAN: use-after-free in svc_rdma_send\nRead of size 8\n")
	f.Add("WARNING: CPU: 0 PID: 1 at net/sunrpc/xprtrdma/svc_rdma_rw.c:12 f+0x0/0x1\n---[ end trace ]---\n")
	f.Fuzz(func(t *testing.T, text string) {
		m := NewMonitor()
		for _, l := range strings.Split(text, "\n") {
			m.Line(l)
		}
	})
}
