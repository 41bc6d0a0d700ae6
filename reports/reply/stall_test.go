package reply

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// A stall the kernel did not report (the test's deadline passed): in
// one boot of the patched kernel it is kept on the dashboard, nothing
// mailed; confirmed by a second boot it is mailed as a stall, titled
// with what stalled, its Console showing each guest's last kernel lines
// and blocked tasks (the lab's StallLog of a real stalled client).
func TestStallReplyGolden(t *testing.T) {
	log, err := os.ReadFile(filepath.Join("..", "..", "lab", "testdata", "blocked", "stall_log.golden"))
	if err != nil {
		t.Fatal(err)
	}
	stall := func(secs string) flow.Sample {
		return flow.Sample{Crash: "transfer stalled: 0 of 4 iterations in " + secs + " s on rxe, NFS 3", Stall: true, Log: string(log)}
	}
	base := samples(4, 100, 2)
	g := newReplyRig(t)
	once := append(samples(1, 100, 2), stall("97"))
	d := decide(t, g.r, base, once)
	if d.Verdict != flow.Crash || !strings.Contains(d.Summary, "transfer stalled: 0 of 4 iterations in 97 s on rxe, NFS 3 (a stall in one boot") {
		t.Fatalf("one stall: %s, %q", d.Verdict, d.Summary)
	}
	g.quiet(t, g.report(11, d.Verdict, d.Summary, d.Detail, base, once))

	g = newReplyRig(t)
	twice := []flow.Sample{stall("97"), stall("104")}
	d = decide(t, g.r, base, twice)
	e := g.deliver(t, g.report(12, d.Verdict, d.Summary, d.Detail, base, twice))
	golden(t, "replies/stall.eml", e.Raw)
	checkReply(t, e, flow.Crash, g.s.Cover.MessageID, "cel@kernel.org")
	for _, want := range []string{"noticed a stall with this series", "  transfer stalled: 0 of 4 iterations in 97 s on rxe, NFS 3",
		"The stall showed on 2 boots of the patched kernel", "client, blocked tasks (SysRq w):", "nfs_wb_all+0x1a/0x70"} {
		if !strings.Contains(string(e.Raw), want) {
			t.Errorf("no %q in\n%s", want, e.Raw)
		}
	}
}

// A crash the kernel reported, after which the transfer stalled (a real
// WARN in rxe_mr_copy, then the lab's dump of the stalled pair): the
// reply's console keeps the report's call trace and each section of the
// dump, the RPC tasks too, within its bound.
func TestCrashThenStallReplyGolden(t *testing.T) {
	warn, err := os.ReadFile(filepath.Join("testdata", "consoles", "rxe-mr-copy-warn.txt"))
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join("..", "..", "lab", "testdata", "blocked", "stall_log.golden"))
	if err != nil {
		t.Fatal(err)
	}
	crash := flow.Sample{Crash: "WARNING in rxe_mr_copy", Log: string(warn) + "\n" + string(log)}
	base := samples(4, 100, 2)
	g := newReplyRig(t)
	twice := []flow.Sample{crash, crash}
	d := decide(t, g.r, base, twice)
	e := g.deliver(t, g.report(13, d.Verdict, d.Summary, d.Detail, base, twice))
	golden(t, "replies/crash_stall.eml", e.Raw)
	body := string(e.Raw)
	for _, want := range []string{"  WARNING in rxe_mr_copy", "rxe_receiver+0x19fe/0x1e70", "client, blocked tasks (SysRq w):",
		"client, RPC tasks in flight (rpc_debug):", "nfsv3 WRITE a:call_connect_status", "server, RPC tasks in flight (rpc_debug):"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in\n%s", want, body)
		}
	}
	console := body[strings.Index(body, "Console:\n\n")+len("Console:\n\n"):]
	console = console[:strings.Index(console, "\n\n-- \n")]
	if n := strings.Count(console, "\n") + 1; n > 70+8 {
		t.Errorf("the console is %d lines:\n%s", n, console)
	}
}
