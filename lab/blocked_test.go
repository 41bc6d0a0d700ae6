package lab

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// A guest's dump is the kernel lines between SysRq w's header and the
// help line asked for after it; anything else on the console is not
// part of it, and what it says when the guest did not answer, printed
// nothing blocked, printed too much or did not finish.
func TestBlockedDump(t *testing.T) {
	feed := func(d *blockedDump, lines ...string) *blockedDump {
		for _, l := range lines {
			d.add(l)
		}
		return d
	}
	d := feed(newBlockedDump(nil), "[ 1.0] before it", "@@RB ITER n=1", "[ 2.0] sysrq: Show Blocked State",
		"[ 2.1] task:dd state:D", "@@RB PROGRESS", "userland noise", "[ 2.2]  __schedule+0x1/0x2",
		"[ 2.3] sysrq: HELP : loglevel(0-9)", "[ 2.4] after it")
	if got, want := d.text(), "[ 2.1] task:dd state:D\n[ 2.2]  __schedule+0x1/0x2"; got != want {
		t.Errorf("dump %q, want %q", got, want)
	}
	if got := newBlockedDump(nil).text(); got != "(no answer to SysRq w within 20s: the guest printed nothing more after it was asked)" {
		t.Errorf("no answer, silent: %q", got)
	}
	if got := feed(newBlockedDump(nil), "@@RB MEM", "[ 3.0] nfsd: late").text(); got != "(no answer to SysRq w within 20s, though the guest printed 2 more lines)" {
		t.Errorf("no answer, printing: %q", got)
	}
	twice := newBlockedDump(nil)
	twice.asked = 2
	if got := twice.text(); got != "(no answer to SysRq w, asked twice within 20s: the guest printed nothing more after it was asked)" {
		t.Errorf("no answer to two asks: %q", got)
	}
	gone := feed(newBlockedDump(nil), "[ 3.0] reboot: Restarting system")
	gone.gone = true
	if got := gone.text(); got != "(no answer to SysRq w: the guest ended first)" {
		t.Errorf("no answer, gone: %q", got)
	}
	if got := feed(newBlockedDump(nil), "[ 2.0] sysrq: Show Blocked State", "[ 2.3] sysrq: HELP :").text(); got != noneBlocked {
		t.Errorf("nothing blocked: %q", got)
	}
	long := feed(newBlockedDump(nil), "[ 2.0] sysrq: Show Blocked State")
	for range maxBlockedLines + 3 {
		long.add("[ 2.1]  schedule+0x1/0x2")
	}
	if got := long.text(); !strings.HasSuffix(got, "[... 3 more lines]\n(the dump did not end within 20s)") || strings.Count(got, "\n") != maxBlockedLines+1 {
		t.Errorf("a long dump that did not end ends with %q", got[len(got)-80:])
	}
}

// A guest's RPC task list is the kernel lines between the two lines its
// init writes to the kernel's log once SysRq w's dump ended; a list
// line inside the dump is the dump's. What it says when the dump did not
// end (the guest's userland lists the tasks only after it), when the
// userland did not answer, when no task was in flight, when the list
// was too long or did not end.
func TestRPCTaskList(t *testing.T) {
	dump := []string{"[ 2.0] sysrq: Show Blocked State", "[ 2.1] task:dd state:D", "[ 2.2] sysrq: HELP : loglevel(0-9)"}
	begin, end := "[ 2.3] "+rpcStart, "[ 2.9] "+rpcEnd
	task := "[ 2.4]   118 0a01      0 000000006c1b4f3e 00000000d0f3c7a9    60000 000000004b6e2f10 nfsv3 WRITE a:call_status q:xprt_pending"
	many := []string{begin}
	for range maxRPCLines + 2 {
		many = append(many, task)
	}
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"listed", append(dump, begin, "@@RB PROGRESS", "[ 2.4] -pid- flgs status", task, end, "[ 3.0] after it", begin, task, end),
			"[ 2.4] -pid- flgs status\n" + task},
		{"no task in flight", append(dump, "userland noise", begin, end), noRPCTasks},
		{"the dump's own lines", []string{"[ 2.0] sysrq: Show Blocked State", begin, task, end}, "(none: the guest's userland lists them once SysRq w's dump ended, and it did not)"},
		{"no SysRq answer", []string{"[ 1.0] before it"}, "(none: the guest's userland lists them once SysRq w's dump ended, and it did not)"},
		{"userland silent", dump, "(no list within 20s: the guest's userland lists them, and did not)"},
		{"gone", append(dump, "gone"), "(none: the guest ended first)"},
		{"unended", append(dump, begin, task), task + "\n(the list did not end within 20s)"},
		{"too long", append(dump, many...), strings.Repeat(task+"\n", maxRPCLines) + "[... 2 more lines]\n(the list did not end within 20s)"},
	} {
		d := newBlockedDump(nil)
		for _, l := range c.lines {
			if l == "gone" {
				d.gone = true
				continue
			}
			d.add(l)
		}
		if got := d.rpcText(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		if over := c.name == "listed" || c.name == "no task in flight"; d.over() != over {
			t.Errorf("%s: over %v", c.name, d.over())
		}
	}
	if got := firstLines("a\nb\nc\n", 2); got != "a\nb\n[... 1 more lines]" {
		t.Errorf("firstLines cut: %q", got)
	}
	if got := firstLines("a\nb\n", 2); got != "a\nb" {
		t.Errorf("firstLines whole: %q", got)
	}
}

// StallLog of a client (the kernel under test) stalled in writeback, as
// a lab kernel printed it (TestPairStallDumpsBlockedTasks, 2026-12-06;
// its RPC task list, rpc_tasks.txt, is that test's of the same day),
// with a third task at the same place, beside a server with nothing
// blocked: the side under test first, each stack once, unreliable
// frames and registers left out, decode applied per side.
func TestStallLogGolden(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "blocked", "writeback.txt"))
	if err != nil {
		t.Fatal(err)
	}
	rpc, err := os.ReadFile(filepath.Join("testdata", "blocked", "rpc_tasks.txt"))
	if err != nil {
		t.Fatal(err)
	}
	dd := string(raw[:strings.Index(string(raw), "[   29.457214] task:sync")])
	// The same stack at other addresses and times: one stack.
	cp := regexp.MustCompile(`\+0x[0-9a-f]+/`).ReplaceAllString(strings.ReplaceAll(dd, "task:dd ", "task:cp "), "+0x10/")
	cp = strings.ReplaceAll(cp, "[   29.4", "[   31.4")
	res := &Result{
		Kernel: Kernel{BzImage: "c", Peer: &Kernel{BzImage: "b"}, Side: SideClient},
		Server: Host{Role: "server", Blocked: noneBlocked, LastLines: []string{"[    1.90] nfsd: last server line"}, RPCTasks: noRPCTasks},
		Client: Host{Role: "client", Blocked: string(raw) + cp, LastLines: []string{"[   12.00] rpcrdma: last client line"},
			RPCTasks: strings.TrimRight(string(rpc), "\n")},
	}
	var decoded []string
	got := res.StallLog(func(role, text string) string {
		decoded = append(decoded, role)
		return strings.ReplaceAll(text, "nfs_wb_all+0x1a/0x70", "nfs_wb_all+0x1a/0x70 fs/nfs/write.c:2087")
	})
	if strings.Join(decoded, " ") != "client server" {
		t.Errorf("decoded %v, want the client's dump, then the server's", decoded)
	}
	golden(t, filepath.Join("testdata", "blocked", "stall_log.golden"), got)
	if (&Result{}).StallLog(nil) != "" {
		t.Error("a run not asked for dumps has a stall log")
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	testenv.Golden(t, path, []byte(got), *update)
}

// A stalled guest that lets the first SysRq w go by (a break lost on the
// way; a hung server once printed nothing after it was asked) is asked
// again halfway through the wait, and its stacks reach the result.
func TestSysRqAskedAgain(t *testing.T) {
	p := standInPair(t)
	test := DefaultTest()
	test.Iterations = 1
	base := standInKernel(t, "honest")
	cand := standInKernel(t, "deaf-once")
	cand.Peer, cand.Side = &base, SideServer
	res, err := p.Run(context.Background(), cand, test)
	if err != nil {
		t.Fatal(err)
	}
	if res.Passed || !res.Stalled {
		t.Fatalf("a stalled server: passed=%v stalled=%v failure %q", res.Passed, res.Stalled, res.Failure)
	}
	if !strings.Contains(res.Server.Blocked, "task:nfsd") || !strings.Contains(res.Server.Blocked, "__ib_drain_sq") {
		t.Fatalf("the server's blocked tasks, asked twice:\n%s", res.Server.Blocked)
	}
	if !strings.Contains(res.StallLog(nil), "server, blocked tasks (SysRq w):\n[   10.000000] task:nfsd") {
		t.Errorf("stall log:\n%s", res.StallLog(nil))
	}
}
