package reports

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// A reply's console shows the unwinder's reliable frames: "? " frames,
// and the inlined calls decoded for them, are left out; every other line
// stays, with or without a time stamp.
func TestReliableFrames(t *testing.T) {
	in := "[   67.767654] Call Trace:\n" +
		"[   67.767711]  <TASK>\n" +
		"[   67.768249]  ? rcu_lock_release include/linux/rcupdate.h:347 [inline]\n" +
		"[   67.768249]  ? __virt_addr_valid+0x163/0x320 arch/x86/mm/physaddr.c:65\n" +
		"[   67.768592]  kasan_report+0xdc/0x110 mm/kasan/report.c:594\n" +
		" ? kfree+0x149/0x3d0\n" +
		" svc_recv+0x10b2/0x23e0\n" +
		"Freed by task 136:\n" +
		"? not a frame, a sentence"
	want := "[   67.767654] Call Trace:\n" +
		"[   67.767711]  <TASK>\n" +
		"[   67.768592]  kasan_report+0xdc/0x110 mm/kasan/report.c:594\n" +
		" svc_recv+0x10b2/0x23e0\n" +
		"Freed by task 136:\n" +
		"? not a frame, a sentence"
	if got := reliableFrames(in); got != want {
		t.Errorf("reliableFrames:\n%s\nwant:\n%s", got, want)
	}
}

// kasanShaped is a KASAN report as the kernel prints one (the header,
// the access's stack, the allocation's and the free's, the object and
// the memory around it), frames frames per stack, then a client stall's
// dump sections when stall is set.
func kasanShaped(frames int, stall bool) string {
	var b strings.Builder
	stack := func(fn string) {
		for i := range frames {
			fmt.Fprintf(&b, " %s_%d+0x%x/0x200 net/sunrpc/xprtrdma/svc_rdma_transport.c:%d\n", fn, i, 16*i, 100+i)
		}
	}
	b.WriteString("BUG: KASAN: slab-use-after-free in svc_rdma_free+0x37/0x130\nRead of size 8 at addr ffff88803f0f9470 by task kworker/0:1/12\n\nCall Trace:\n <TASK>\n")
	stack("access")
	b.WriteString(" </TASK>\n\nAllocated by task 136:\n")
	stack("alloc")
	b.WriteString("\nFreed by task 12:\n")
	stack("free")
	b.WriteString("\nThe buggy address belongs to the object at ffff88803f0f9400\n which belongs to the cache kmalloc-512 of size 512\n\nMemory state around the buggy address:\n>ffff88803f0f9400: fa fb fb fb fb fb fb fb fb fb fb fb fb fb fb fb\n                                                             ^\n")
	if stall {
		b.WriteString("\nclient (candidate), last kernel lines:\n[  99.1] nfs: server 10.0.0.1 not responding\n")
		b.WriteString("client (candidate), blocked tasks (SysRq w):\n")
		for i := range 30 {
			fmt.Fprintf(&b, "[ 100.%d] task:cp state:D stack:0 pid:%d\n", i, 200+i)
		}
	}
	return b.String()
}

// A KASAN (KMSAN, KFENCE, lockdep, UBSAN) report is quoted whole, its
// allocation and free stacks included, up to wholeReportLines; a stall's
// dump after it still gets its share; any other report is cut at
// crashLines as before.
func TestCrashExcerptQuotesKASANWhole(t *testing.T) {
	report := kasanShaped(20, false)
	got := crashExcerpt(report)
	if got != strings.TrimRight(report, "\n") {
		t.Fatalf("a %d-line KASAN report was cut:\n%s", strings.Count(report, "\n"), got)
	}
	got = crashExcerpt(kasanShaped(20, true))
	for _, want := range []string{"Freed by task 12:", "Memory state around the buggy address:", "client (candidate), blocked tasks (SysRq w):", "task:cp state:D", "more lines]"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in the excerpt of a KASAN report and a stall:\n%s", want, got)
		}
	}
	long := kasanShaped(100, false) // 300 frames: past any bound
	if got := crashExcerpt(long); strings.Count(got, "\n") != wholeReportLines || !strings.HasSuffix(got, "more lines]") {
		t.Errorf("a %d-line report kept %d lines", strings.Count(long, "\n"), strings.Count(got, "\n"))
	}
	warn := strings.Replace(report, "BUG: KASAN: slab-use-after-free in", "WARNING: CPU: 0 PID: 12 at", 1)
	if got := crashExcerpt(warn); strings.Count(got, "\n") != crashLines || strings.Contains(got, "Memory state") {
		t.Errorf("a WARNING of %d lines kept %d", strings.Count(warn, "\n"), strings.Count(got, "\n"))
	}
	stamped := "[   67.766804] " + strings.ReplaceAll(strings.TrimRight(report, "\n"), "\n", "\n[   67.766805] ")
	if got := crashExcerpt(stamped); got != stamped {
		t.Errorf("a time-stamped KASAN report was cut:\n%s", got)
	}
}

// Real KASAN reports, as syzbot mailed them to linux-rdma in 2024 (read
// from ../shared when it is there), are quoted whole, as syzbot quotes
// them: from the header to the memory state.
func TestCrashExcerptSyzbotKASAN(t *testing.T) {
	repo, err := git.PlainOpen(testenv.Shared(t, "syzbot's KASAN reports on linux-rdma", "corpus", "linux-rdma-2024.git"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{
		"c546df79d416972f696b9896f6c22e992b1835df", // KASAN: slab-use-after-free Read in dev_get_flags
	} {
		c, err := repo.CommitObject(plumbing.NewHash(id))
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.File("m")
		if err != nil {
			t.Fatal(err)
		}
		body, err := f.Contents()
		if err != nil {
			t.Fatal(err)
		}
		rule := strings.Repeat("=", 66) + "\n"
		_, after, ok := strings.Cut(body, rule)
		report, _, ok2 := strings.Cut(after, rule)
		if !ok || !ok2 || !strings.HasPrefix(report, "BUG: KASAN:") {
			t.Fatalf("%s: no KASAN report between rules", id)
		}
		got := crashExcerpt(report)
		if strings.Contains(got, "more line") {
			t.Errorf("%s: a %d-line report was cut:\n%s", id, strings.Count(report, "\n"), got)
		}
		for _, want := range []string{"Allocated by task", "Freed by task", "The buggy address belongs to", "Memory state around the buggy address:"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: no %q in the excerpt", id, want)
			}
		}
		t.Logf("%s: %d lines, %d quoted", id, strings.Count(report, "\n"), strings.Count(got, "\n")+1)
	}
}
