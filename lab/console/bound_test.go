package console

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Whatever a console holds, the monitor keeps and scans a bounded part
// of each line and of each report: 256 MiB of 64 KiB lines and of
// WARNINGs with 8 KiB trace lines leave its heap a few MiB larger (996
// MiB once grew it by 1.6 GiB), and a crash printed after them all is
// found.
func TestMonitorBoundedInBytes(t *testing.T) {
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	cpu := cpuTime(t)
	m := NewMonitor()
	flood := strings.Repeat("0123456789abcdef] x WARNING ", 64<<10/28)
	for range 2048 {
		m.Line(flood)
	}
	trace := "[   10.000000]  " + strings.Repeat("f", 8<<10) + "+0x1/0x2"
	for i := range 2 * maxCrashes {
		m.Line(fmt.Sprintf("[   10.000000] WARNING: CPU: 0 PID: 1 at net/sunrpc/xprtrdma/x.c:%d f%d+0x0/0x1", i, i))
		for range maxReportLines {
			m.Line(trace)
		}
		m.Line("[   10.000000] ---[ end trace 0000000000000000 ]---")
	}
	m.Line(flood[:20<<10] + "[   11.000000] BUG: unable to handle page fault for address: ffff888000000000")
	m.Line("[   11.000000] RIP: 0010:svc_rdma_send+0x10/0x20")
	m.Line("[   11.000000] ---[ end trace 0000000000000001 ]---")
	took := cpuTime(t) - cpu
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	c, ok := m.Fatal()
	runtime.KeepAlive(m)
	t.Logf("fed %d MiB: heap grew %d KiB, %v of CPU", (2048*len(flood)+2*maxCrashes*maxReportLines*len(trace))>>20, grew>>10, took)
	if !ok || c.Title != "BUG: unable to handle page fault in svc_rdma_send" || !c.Complete {
		t.Errorf("the crash at the end: %+v, %v", c, ok)
	}
	if grew > 16<<20 {
		t.Errorf("the monitor's heap grew by %d MiB", grew>>20)
	}
	for _, c := range m.Crashes() {
		if len(c.Report) > maxReportBytes+maxLineBytes+100 {
			t.Errorf("%s: a report of %d bytes", c.Title, len(c.Report))
		}
	}
	if n := len(m.Crashes()); n != maxCrashes+1 {
		t.Errorf("%d crashes kept, want %d WARNINGs and the BUG", n, maxCrashes)
	}
}

// A long line costs, per byte, no more than a short one: the scan is
// linear in the bytes of a line, not quadratic (each 64 KiB line once
// cost 35-40 ms, 64 times what its bytes cost as 1 KiB lines). Both are
// measured here, one after the other, so a slow or busy machine slows
// both alike; the bound leaves a factor of 8 for noise.
func TestMonitorLinearInLineLength(t *testing.T) {
	text := strings.Repeat("0123456789abcdef] x WARNING ", 64<<10/28)
	feed := func(line string, n int) time.Duration {
		m := NewMonitor()
		cpu := cpuTime(t)
		for range n {
			m.Line(line)
		}
		return cpuTime(t) - cpu
	}
	feed(text[:1<<10], 1024) // warm up
	const bytes = 2 << 20
	short := feed(text[:1<<10], bytes>>10)
	long := feed(text, bytes/len(text))
	t.Logf("2 MiB as 1 KiB lines: %v of CPU; as %d-byte lines: %v", short, len(text), long)
	if long > 8*short+50*time.Millisecond {
		t.Errorf("long lines cost %v of CPU, short lines of the same bytes %v: the scan grows faster than the bytes", long, short)
	}
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
