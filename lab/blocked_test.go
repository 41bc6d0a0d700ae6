package lab

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	d := feed(&blockedDump{}, "[ 1.0] before it", "@@RB ITER n=1", "[ 2.0] sysrq: Show Blocked State",
		"[ 2.1] task:dd state:D", "@@RB PROGRESS", "userland noise", "[ 2.2]  __schedule+0x1/0x2",
		"[ 2.3] sysrq: HELP : loglevel(0-9)", "[ 2.4] after it")
	if got, want := d.text(), "[ 2.1] task:dd state:D\n[ 2.2]  __schedule+0x1/0x2"; got != want {
		t.Errorf("dump %q, want %q", got, want)
	}
	if got := (&blockedDump{}).text(); !strings.HasPrefix(got, "(no answer to SysRq w within") {
		t.Errorf("no answer: %q", got)
	}
	if got := feed(&blockedDump{}, "[ 2.0] sysrq: Show Blocked State", "[ 2.3] sysrq: HELP :").text(); got != noneBlocked {
		t.Errorf("nothing blocked: %q", got)
	}
	long := feed(&blockedDump{}, "[ 2.0] sysrq: Show Blocked State")
	for range maxBlockedLines + 3 {
		long.add("[ 2.1]  schedule+0x1/0x2")
	}
	if got := long.text(); !strings.HasSuffix(got, "[... 3 more lines]\n(the dump did not end within 20s)") || strings.Count(got, "\n") != maxBlockedLines+1 {
		t.Errorf("a long dump that did not end ends with %q", got[len(got)-80:])
	}
}

// StallLog of a client (the kernel under test) stalled in writeback, as
// a lab kernel printed it (TestPairStallDumpsBlockedTasks, 2026-12-06),
// with a third task at the same place, beside a server with nothing
// blocked: the side under test first, each stack once, unreliable
// frames and registers left out, decode applied per side.
func TestStallLogGolden(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "blocked", "writeback.txt"))
	if err != nil {
		t.Fatal(err)
	}
	dd := string(raw[:strings.Index(string(raw), "[   29.457214] task:sync")])
	// The same stack at other addresses and times: one stack.
	cp := regexp.MustCompile(`\+0x[0-9a-f]+/`).ReplaceAllString(strings.ReplaceAll(dd, "task:dd ", "task:cp "), "+0x10/")
	cp = strings.ReplaceAll(cp, "[   29.4", "[   31.4")
	res := &Result{
		Kernel: Kernel{BzImage: "c", Peer: &Kernel{BzImage: "b"}, Side: SideClient},
		Server: Host{Role: "server", Blocked: noneBlocked, LastLines: []string{"[    1.90] nfsd: last server line"}},
		Client: Host{Role: "client", Blocked: string(raw) + cp, LastLines: []string{"[   12.00] rpcrdma: last client line"}},
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
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs (-update rewrites it); got:\n%s", path, got)
	}
}
