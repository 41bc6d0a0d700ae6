package reports

import "testing"

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
