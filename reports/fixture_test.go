package reports

import (
	"flag"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/reports/stats"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testenv.Golden(t, filepath.Join("testdata", name), got, *update)
}

var testNow = time.Date(2026, 11, 30, 4, 5, 6, 0, time.UTC)

func testConfig() Config {
	c := DefaultConfig()
	// The fixtures are 10 runs a side, judged at looks of 10, 20 and 30:
	// the renderers' golden files hold that budget, whatever the default.
	c.Runs, c.RunsStep, c.MaxRuns = 10, 10, 30
	c.From = "rdmabot <rdmabot@rdmabot.example.org>"
	c.ArchiveList = "rdmabot-reports@lists.example.org"
	c.ArchiveURL = "https://lore.kernel.org/rdmabot-reports"
	return c
}

// series is Chuck Lever's svcrdma series v2 (../shared/corpus/threads).
func series() Thread {
	return Thread{
		Subject:   "[PATCH v2 00/12] NFSD RDMA transport improvements",
		MessageID: "170708844422.28128.2979813721958631192.stgit@bazille.1015granger.net",
		Patches:   []Patch{{MessageID: "170708852086.28128.9047591474467399587.stgit@bazille.1015granger.net", Subject: "[PATCH v2 01/12] svcrdma: Reserve an extra WQE for ib_drain_rq()"}},
		Author:    Address{Name: "Chuck Lever", Email: "cel@kernel.org"},
		Lists:     []string{"linux-nfs@vger.kernel.org", "linux-rdma@vger.kernel.org"},
		Version:   2,
		LoreURL:   "https://lore.kernel.org/r/170708844422.28128.2979813721958631192.stgit@bazille.1015granger.net",
	}
}

func runs(rng *rand.Rand, n, iters int, mean, cv float64) [][]float64 {
	out := make([][]float64, n)
	for i := range out {
		level := mean * math.Exp(cv*rng.NormFloat64())
		for range iters {
			out[i] = append(out[i], level*math.Exp(cv/3*rng.NormFloat64()))
		}
	}
	return out
}

// metrics makes 10 runs of 4 iterations per kernel; the factors scale
// the candidate's write, read and loop means.
func metrics(seed uint64, write, read, loop float64) []stats.Metric {
	rng := rand.New(rand.NewPCG(seed, 99))
	return []stats.Metric{
		{Name: "write", Unit: "MB/s", HigherIsBetter: true, Base: runs(rng, 10, 4, 16.4, 0.01), Cand: runs(rng, 10, 4, 16.4*write, 0.01)},
		{Name: "read", Unit: "MB/s", HigherIsBetter: true, Base: runs(rng, 10, 4, 14.8, 0.01), Cand: runs(rng, 10, 4, 14.8*read, 0.01)},
		{Name: "loop", Unit: "s", Base: runs(rng, 10, 4, 50.3, 0.01), Cand: runs(rng, 10, 4, 50.3*loop, 0.01)},
	}
}

func input() *Input {
	return &Input{
		Thread: series(),
		Base: Base{Tree: "nfsd", Branch: "nfsd-next", SHA: "5d5bd0ab7e3e4c2f6b1a7d9e0c8f1a2b3c4d5e6f",
			Reason: "base-commit trailer", URL: "https://git.kernel.org/pub/scm/linux/kernel/git/cel/linux.git"},
		Test:    TestInfo{Name: "NFS/RDMA transfer", RunURL: "https://rdmabot.example.org/runs/42"},
		Metrics: metrics(1, 1, 1, 1),
	}
}

// verdicts builds one verdict per outcome, through Judge: the renderers'
// unit tests use them; the golden replies are wire's, made the
// way production makes them.
func verdicts(t *testing.T) map[flow.Outcome]Verdict {
	t.Helper()
	c := testConfig()
	judge := func(in *Input) Verdict {
		return Judge(rand.New(rand.NewPCG(7, 7)), c.Policy(), in)
	}
	out := map[flow.Outcome]Verdict{}
	add := func(want flow.Outcome, mod func(*Input)) {
		in := input()
		mod(in)
		v := judge(in)
		if in.Apply != nil || in.BuildFail != nil || in.Boot != nil || want == flow.Infra {
			// Decided before the lab, by the engine: rendered as stored.
			v = Verdict{Outcome: want, In: in}
			if want == flow.Infra {
				v.Reason = "client guest did not reach @@LAB READY (host overloaded)"
			}
		}
		if v.Outcome != want {
			t.Fatalf("fixture for %v judged %v (%s)", want, v.Outcome, v.Reason)
		}
		out[want] = v
	}
	add(flow.Pass, func(in *Input) {})
	add(flow.Regression, func(in *Input) { in.Metrics = metrics(2, 0.92, 1, 1.07) })
	add(flow.Improvement, func(in *Input) { in.Metrics = metrics(3, 1, 1.09, 1) })
	add(flow.Inconclusive, func(in *Input) {
		rng := rand.New(rand.NewPCG(4, 4))
		in.Metrics = []stats.Metric{{Name: "write", Unit: "MB/s", HigherIsBetter: true,
			Base: runs(rng, 30, 4, 16, 0.2), Cand: runs(rng, 30, 4, 16, 0.2)}}
	})
	add(flow.ApplyFailed, func(in *Input) {
		in.Metrics = nil
		in.Apply = &ApplyFailure{Patch: "svcrdma: Post Send WR chain", Index: 8,
			File: "net/sunrpc/xprtrdma/svc_rdma_sendto.c", Hunk: "@@ -327,20 +327,42 @@",
			Output: "error: patch failed: net/sunrpc/xprtrdma/svc_rdma_sendto.c:327\nerror: net/sunrpc/xprtrdma/svc_rdma_sendto.c: patch does not apply"}
	})
	add(flow.BuildFailed, func(in *Input) {
		in.Metrics = nil
		in.BuildFail = &BuildFailure{New: []Diagnostic{
			{Text: "net/sunrpc/xprtrdma/svc_rdma_sendto.c:342:9: error: implicit declaration of function 'svc_rdma_post_chain' [-Werror=implicit-function-declaration]"},
		}}
	})
	add(flow.BootFailed, func(in *Input) {
		in.Metrics = nil
		in.Boot = &BootFailure{Title: "no @@LAB READY within 120s", Console: "[    1.912345] rdma_rxe: loaded\n[    2.004321] svcrdma: svc_rdma_create_xprt failed\n[  120.000000] lab: timeout waiting for nfsd"}
	})
	add(flow.Crash, func(in *Input) {
		in.BaseCrashes = []Crash{{Title: "WARNING in rxe_qp_do_cleanup"}}
		in.CandCrashes = []Crash{{Title: "WARNING in rxe_qp_do_cleanup"}, {
			Title: "BUG: KASAN: slab-use-after-free in svc_rdma_send",
			Console: "==================================================================\n" +
				"BUG: KASAN: slab-use-after-free in svc_rdma_send+0x3a1/0x5c0\n" +
				"Read of size 8 at addr ffff888004a3c1d8 by task nfsd/212\n" +
				"Call Trace:\n <TASK>\n dump_stack_lvl+0x4b/0x70\n svc_rdma_send+0x3a1/0x5c0\n svc_rdma_sendto+0x2f7/0x8b0\n svc_send+0x6e/0x1c0\n nfsd+0x1b1/0x2a0\n kthread+0xe8/0x120\n </TASK>",
		}}
	})
	add(flow.DataCorruption, func(in *Input) {
		in.Corruption = &Corruption{Detail: "/dev/shm/src /dev/shm/back differ: byte 16777217, line 65281 (run 3, iteration 2)"}
	})
	add(flow.Infra, func(in *Input) {
		in.Metrics = nil
	})
	return out
}
