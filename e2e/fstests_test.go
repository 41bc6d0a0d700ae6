package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/wire"
)

// The fstests profile, caught on the list: a Reply chunk sent from the
// wrong offset (examples/seeded/reply-chunk-pages.mbox: every READDIR
// reply carries the wrong bytes, without an error) passes the transfer
// test and the pressure profile (lab/PRESSURE.md), which list no
// directory. Posted while serve runs config.toml's fstests profile, the
// other profiles off so that it alone decides, and the group cut to the
// test for this bug class (generic/257, a large directory's getdents, on
// rxe): the default group's fsx runs would add about 8 minutes of lab to
// the CI. scripts/latency.sh posts both fstests seeds to a serve that
// runs config.toml as it is (its usage says how).
// the base passes it, the patched server fails it twice (the second time
// running it alone, beside the base doing the same, to confirm), and the
// reply names the test, shows its evidence and what ran.
func TestFstestsCatchesAReplyChunkBug(t *testing.T) {
	m := needMachine(t)
	src := filepath.Join(root(t), "..", "shared", "peer", "fstests-63a29724a85f.tar.gz")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("fstests' snapshot is not beside the checkout (%v): lab.fstests.source has nothing to build", err)
	}
	b := startBot(t, m, func(c *wire.Config) {
		c.Lab.Fstests = wire.Default().Lab.Fstests
		c.Lab.Fstests.Source = src
		c.Lab.Fstests.Group = []string{"generic/257"}
		c.Lab.Pressure.Providers = nil
		c.Lab.Lossy.Netem = ""
		c.Lab.ClientSide.Boots = 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	r := b.waitSeeded(ctx, b.postSeeded("reply-chunk-pages.mbox"))

	if outcome := r.Header.Get("X-Rdmabot-Outcome"); outcome != "REGRESSION" && outcome != "DATA_CORRUPTION" {
		t.Fatalf("outcome %s, want REGRESSION or DATA_CORRUPTION: the Reply chunk bug went unseen\n%s", outcome, r.Body)
	}
	flat := strings.Join(strings.Fields(r.Body), " ")
	// The failure was seen twice: both kernels ran generic/257 once
	// more before the verdict.
	for _, want := range []string{"generic/257", "fstests over NFS/RDMA on rxe", "generic/257 on the patched kernel:",
		"regressed", "Reported-by:", "(1 of each running again only the tests the patched kernel had failed, to confirm them)", "fail fail"} {
		if !strings.Contains(flat, want) {
			t.Errorf("the reply does not say %q", want)
		}
	}
	// Decided by the profile: no default boot of the candidate.
	if strings.Contains(flat, "of the base, alternating") {
		t.Errorf("default boots ran after the profile had decided:\n%s", r.Body)
	}
	for _, tv := range b.tests(t) {
		for _, j := range tv.Jobs {
			t.Logf("test %d (%s): %s job %.0f s", tv.ID, tv.Subject, j.Kind, j.Took)
		}
	}
}
