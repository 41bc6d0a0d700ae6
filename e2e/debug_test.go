package e2e

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/wire"
)

// The debug profile, caught on the list: a use-after-free on svcrdma's
// teardown path (examples/seeded/svc-free-uaf.mbox: waiters woken after
// kfree) is invisible to the lab kernel, whose freed memory reads back
// as it was. Posted while serve runs with config.toml's debug profile,
// the series' base and candidate are built again with KASAN, lockdep and
// line tables; the candidate's debug boot reports the use-after-free at
// the first unmount, and the reply is a CRASH whose frames are decoded
// to file:line from the debug kernel's own vmlinux.
//
// Opt-in (RDMABOT_E2E_DEBUG=1): the base's debug build is a cold build
// of its own, 20 minutes on a 2-core machine, which CI's hour has no room
// for. docs/lab.md, "The debug profile", records its runs.
func TestDebugCatchesUseAfterFree(t *testing.T) {
	if os.Getenv("RDMABOT_E2E_DEBUG") == "" {
		t.Skip("RDMABOT_E2E_DEBUG unset: the debug profile's base build is a cold build of about 20 minutes, beyond CI's budget (docs/lab.md, \"The debug profile\")")
	}
	m := needMachine(t)
	// config.toml's debug profile, which startBot turns off; the other
	// profiles off, so that it alone decides.
	b := startBot(t, m, func(c *wire.Config) {
		c.Lab.Debug = wire.Default().Lab.Debug
		c.Lab.Pressure.Providers = nil
		c.Lab.Lossy.Netem = ""
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	r := b.waitSeeded(ctx, b.postSeeded("svc-free-uaf.mbox"))

	if outcome := r.Header.Get("X-Rdmabot-Outcome"); outcome != "CRASH" {
		t.Fatalf("outcome %s, want CRASH: the use-after-free went unseen\n%s", outcome, r.Body)
	}
	flat := strings.Join(strings.Fields(r.Body), " ")
	for _, want := range []string{"KASAN: slab-use-after-free", "patched kernel's debug build (KASAN, lockdep",
		"rdmabot's debug.config", "/files/kernel-debug.config", "Reported-by:"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the reply does not say %q", want)
		}
	}
	// Frames decoded to tree paths, as syzbot shows them: the freeing
	// transport's put in svc_xprt.c, inlined calls marked.
	if !regexp.MustCompile(`svc_recv\+0x[0-9a-f]+/0x[0-9a-f]+ net/sunrpc/svc_xprt\.c:\d+\n`).MatchString(r.Body) ||
		!strings.Contains(r.Body, " [inline]\n") || strings.Contains(r.Body, "../src/") {
		t.Errorf("the console's frames are not decoded to tree paths:\n%s", r.Body)
	}
	// The whole report (the reply shows its head) names the free: kfree
	// in svc_rdma_free, at the seeded transport's teardown.
	boots := getPage(t, b.cfg.Bot.URL+"/tests/1/files/boots.json")
	if !regexp.MustCompile(`svc_rdma_free\+0x[0-9a-f]+/0x[0-9a-f]+ net/sunrpc/xprtrdma/svc_rdma_transport\.c:\d+`).MatchString(boots) {
		t.Errorf("no boot's report names svc_rdma_free with its line:\n%s", boots)
	}
	for _, tv := range b.tests(t) {
		for _, j := range tv.Jobs {
			t.Logf("test %d: %s job %.0f s", tv.ID, j.Kind, j.Took)
		}
	}
}
