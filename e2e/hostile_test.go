package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/wire"
)

// A kernel under test that grades itself, posted to the list while serve
// runs. The lab's qemu is the lab package's stand-in (its test binary,
// run by the name qemu-standin), which plays a real bzImage as an honest
// guest unless the kernel holds "RDMABOT_STANDIN=<kind>". Two series add
// that string, so their kernels play what lab.TestHostileKernelCannotGradeItself
// plays with toy files:
//   - hostile, in svcrdma: it boots on the server beside the base on the
//     client, and prints a passing run at 2718 MB/s, another build id
//     and no data moved (the client's markers on the server's console
//     break the protocol first);
//   - forger, in the xprtrdma client: it boots on the client beside the
//     base on the server, writes other bytes than it was given and says
//     its own check passed;
//   - injector, in the client: it prints a second BOOTED midway, as a
//     client writing lines into the trusted side's console would;
//   - frontwriter, in the client: it writes the next file before the
//     trusted server gives it, to be timed as faster than it is;
//   - flaky, in the client: it reconnects and prints a clean transport;
//   - owncopy, in svcrdma: it serves reads from a copy of the test data
//     of its own instead of what the trusted client wrote.
//
// Each gets a verdict against it from the lab's boots of it: never PASS,
// never a Tested-by, never a lab fault retried.
func TestHostileKernelsThroughServe(t *testing.T) {
	m := needMachine(t)
	standIn := buildStandIn(t)
	a := newAuthor(t, m)
	hostile := a.series("hostile", a.base, a.commit(a.base, "svcrdma: note the stand-in's part",
		"The lab's stand-in reads this string.",
		edit{sendto, "#include <linux/spinlock.h>\n",
			"#include <linux/spinlock.h>\n\nstatic const char rdmabot_standin[] __used = \"RDMABOT_STANDIN=hostile\";\n"}))
	forger := a.series("forger", a.base, a.commit(a.base, "xprtrdma: note the stand-in's part",
		"The lab's stand-in reads this string.",
		edit{"net/sunrpc/xprtrdma/verbs.c", "#include <linux/log2.h>\n",
			"#include <linux/log2.h>\n\nstatic const char rdmabot_standin[] __used = \"RDMABOT_STANDIN=forger\";\n"}))
	standInSeries := func(name, file, anchor, subject string) series {
		return a.series(name, a.base, a.commit(a.base, subject, "The lab's stand-in reads this string.",
			edit{file, anchor, anchor + "\nstatic const char rdmabot_standin[] __used = \"RDMABOT_STANDIN=" + name + "\";\n"}))
	}
	injector := standInSeries("injector", "net/sunrpc/xprtrdma/rpc_rdma.c", "#include <linux/highmem.h>\n", "xprtrdma: the stand-in that writes into consoles")
	frontwriter := standInSeries("frontwriter", "net/sunrpc/xprtrdma/transport.c", "#include <linux/module.h>\n", "xprtrdma: the stand-in that writes ahead")
	flaky := standInSeries("flaky", "net/sunrpc/xprtrdma/frwr_ops.c", "#include <linux/sunrpc/svc_rdma.h>\n", "xprtrdma: the stand-in that hides its reconnects")
	owncopy := standInSeries("owncopy", "net/sunrpc/xprtrdma/svc_rdma_recvfrom.c", "#include <linux/slab.h>\n", "svcrdma: the stand-in that serves its own copy")
	b := startBot(t, m, func(c *wire.Config) {
		c.Lab.QEMU.Binary = standIn
		// The default test alone: the profiles' tests are not the
		// stand-in's to play.
		c.Lab.Pressure.Providers = nil
		c.Lab.Lossy.Netem = ""
		c.Lab.ClientSide.Boots = 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	posted := time.Now()
	for _, s := range []series{hostile, forger, injector, frontwriter, flaky, owncopy} {
		b.post(s.mails...)
	}
	for _, c := range []struct {
		s       series
		outcome string
		says    string
	}{
		{hostile, "BOOT_FAILED", "the server printed a marker it never sends: MOUNTED"},
		{forger, "DATA_CORRUPTION", "server's check: mismatch"},
		{injector, "BOOT_FAILED", "the client printed BOOTED twice"},
		{frontwriter, "CRASH", "broke the trusted server's protocol (moved_before_go)"},
		{flaky, "REGRESSION", "transport reconnects"},
		{owncopy, "DATA_CORRUPTION", "differs from the one written"},
	} {
		r := b.waitReply(ctx, c.s.root)
		t.Logf("%s: %s, %s after posting:\n%s", c.s.name, r.Header.Get("X-Rdmabot-Outcome"), r.Arrived.Sub(posted).Round(time.Second), r)
		flat := strings.Join(strings.Fields(r.Body), " ")
		if got := r.Header.Get("X-Rdmabot-Outcome"); got != c.outcome || !strings.Contains(flat, c.says) {
			t.Errorf("%s: %s, want %s saying %q", c.s.name, got, c.outcome, c.says)
		}
		if strings.Contains(r.Body, "Tested-by:") || strings.Contains(r.Body, "2718") {
			t.Errorf("%s: the reply offers the kernel's own word:\n%s", c.s.name, r.Body)
		}
	}
	// No lab fault: every job ran once.
	for _, tv := range b.tests(t) {
		for _, j := range tv.Jobs {
			t.Logf("test %d (%s): %s job %.0f s, attempt %d", tv.ID, tv.Subject, j.Kind, j.Took, j.Attempt)
			if j.Attempt > 1 || len(j.Errors) > 0 {
				t.Errorf("test %d: %s job retried (attempt %d): %q", tv.ID, j.Kind, j.Attempt, j.Errors)
			}
		}
	}
}

// buildStandIn builds the lab package's test binary and names it as the
// lab's stand-in qemu (lab/hostile_test.go's standInName).
func buildStandIn(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "test", "-c", "-o", filepath.Join(dir, "lab.test"), "./lab")
	cmd.Dir = root(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./lab: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "qemu-standin")
	if err := os.Symlink(filepath.Join(dir, "lab.test"), bin); err != nil {
		t.Fatal(err)
	}
	return bin
}
