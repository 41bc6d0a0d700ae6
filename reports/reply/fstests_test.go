package reply

import (
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// An fstests test the base passes and the patched kernel fails with bad
// data read back is DATA_CORRUPTION without a default boot: the reply
// names the test, shows each test's result on both sides with the time,
// and the patched kernel's evidence (its .out.bad diff and fsx lines).
func TestFstestsReplyGolden(t *testing.T) {
	boot := func(ops int64, failing bool) flow.Sample {
		s := flow.Sample{Profile: flow.ProfileFstests + "-rxe", ServerOps: ops, Tests: []flow.TestResult{
			{Name: "generic/075", Status: flow.TestPass, Secs: 96},
			{Name: "generic/091", Status: flow.TestNotRun, Secs: 2, Why: "xfs_io fiemap support is missing"},
			{Name: "generic/112", Status: flow.TestPass, Secs: 88},
			{Name: "generic/469", Status: flow.TestPass, Secs: 31},
		}}
		if failing {
			s.Tests[2] = flow.TestResult{Name: "generic/112", Status: flow.TestFail, Secs: 41, Corrupt: true,
				Why: "--- tests/generic/112.out\n+++ results/generic/112.out.bad\n@@ -2,3 +2,5 @@\n fsx.0 -q -l 262144 -o 65536 -S 191110531 -N 10000 -Z -R -W\n+READ BAD DATA: offset = 0x1e7c1, size = 0xc3d1, fname = 112.0\n+OFFSET      GOOD    BAD     RANGE\n+0x1e7c1     0x6ec9  0x0000  0x00003"}
		}
		return s
	}
	g := newReplyRig(t)
	base, cand := []flow.Sample{boot(5312, false)}, []flow.Sample{boot(5120, true)}
	d := decide(t, g.r, base, cand)
	if d.Verdict != flow.DataCorruption {
		t.Fatalf("%s: %s", d.Verdict, d.Summary)
	}
	e := g.deliver(t, g.report(31, d.Verdict, d.Summary, d.Detail, base, cand))
	golden(t, "replies/fstests_corruption.eml", e.Raw)
	checkReply(t, e, flow.DataCorruption, g.s.Cover.MessageID, "cel@kernel.org")
	text := strings.Join(strings.Fields(string(e.Raw)), " ")
	for _, want := range []string{"fstests generic/112 read back data different from what it wrote, and passed on the base (fstests over NFS/RDMA on rxe",
		"generic/112 pass fail 41s regressed", "generic/091: xfs_io fiemap support is missing", "+READ BAD DATA: offset = 0x1e7c1"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, e.Raw)
		}
	}
}
