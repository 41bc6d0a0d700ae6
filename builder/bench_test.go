package builder

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/testenv"
)

// realChain picks, from the 2024 linux-rdma patches touching ib_core or
// xprtrdma, those that apply one after the other on base, in list
// order, at most max: no real 10+ patch series of the 2024 archive
// applies to 6.12.117 as a whole (the others target later trees), so
// the benchmark applies real patches chained instead.
func realChain(tb testing.TB, ws *Store, base plumbing.Hash, max int) []*flow.Message {
	tb.Helper()
	msgs := corpusPatches(tb, filepath.Join(sharedDir(tb), "corpus", "linux-rdma-2024.git"),
		"drivers/infiniband/core/", "net/sunrpc/xprtrdma/")
	var chain []*flow.Message
	head := base
	for _, m := range msgs {
		res, err := ws.Apply(context.Background(), head, []*flow.Message{m}, pinnedOptions())
		if err != nil {
			continue
		}
		chain = append(chain, m)
		head = res.Commits[0]
		if len(chain) == max {
			break
		}
	}
	return chain
}

// BenchmarkApplySeries applies real patches to the imported 6.12 tree
// with the builder (opening the repository afresh each time, as a new
// process would) and with git am on a full checkout of the same base (the
// checkout back to the base is not timed), checks both make the same
// commits, and reports both times and their ratio. Two workloads:
// "chain", 25 real 2024 patches that apply to 6.12.117 one after the
// other, and "svcrdma-v2", Chuck Lever's real 12-patch series on the 6.12
// tree with its 6 files replaced by bases rebuilt from the patches (the
// series predates 6.12 and is merged in it).
//
//	RDMABOT_TEST_TREE=/var/cache/rdmabot/trees/kernel.git \
//	  go test -run '^$' -bench ApplySeries -benchtime 5x ./builder
func BenchmarkApplySeries(b *testing.B) {
	st, baseRef := testTree(b)
	testenv.HoldHeavyLock(b)
	c, err := st.Resolve(baseRef)
	if err != nil {
		b.Fatal(err)
	}
	wt := filepath.Join(b.TempDir(), "wt")
	gitT(b, filepath.Dir(wt), "clone", "-q", "--no-checkout", "--no-tags", st.Dir, wt)
	gitT(b, wt, "checkout", "-q", "--detach", c.Hash.String())
	ws, err := OpenRepo(wt)
	if err != nil {
		b.Fatal(err)
	}
	chain := realChain(b, ws, c.Hash, 25)
	if len(chain) < 10 {
		b.Fatalf("only %d real patches apply in a chain", len(chain))
	}

	series := threadPatches(b, filepath.Join(sharedDir(b), "corpus", "threads", "svcrdma-v2"))
	files, err := synthBase(series)
	if err != nil {
		b.Fatal(err)
	}
	dropLoose(wt) // what picking the chain wrote
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(wt, name), content, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	gitT(b, wt, "commit", "-q", "-am", "svcrdma-v2 base rebuilt from its patches")
	seriesBase := gitT(b, wt, "rev-parse", "HEAD")
	gitT(b, wt, "repack", "-q") // the rebuilt base into a pack, out of dropLoose's way

	b.Run("chain", func(b *testing.B) { benchApply(b, wt, c.Hash.String(), chain) })
	b.Run("svcrdma-v2", func(b *testing.B) { benchApply(b, wt, seriesBase, series) })
}

func benchApply(b *testing.B, wt, base string, msgs []*flow.Message) {
	var mbox bytes.Buffer
	for _, m := range msgs {
		mbox.WriteString("From rdmabot Mon Sep 17 00:00:00 2001\n")
		mbox.Write(bytes.ReplaceAll(m.Raw, []byte("\r\n"), []byte("\n")))
		mbox.WriteString("\n")
	}
	mboxFile := filepath.Join(b.TempDir(), "series.mbox")
	if err := os.WriteFile(mboxFile, mbox.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	baseID := plumbing.NewHash(base)
	gitT(b, wt, "checkout", "-q", "--detach", base)
	dropLoose(wt)

	var builderTime, amTime time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		w, err := OpenRepo(wt)
		if err != nil {
			b.Fatal(err)
		}
		res, err := w.Apply(context.Background(), baseID, msgs, pinnedOptions())
		if err != nil {
			b.Fatal(err)
		}
		builderTime += time.Since(start)

		start = time.Now()
		out, err := gitEnv(wt, nil, "am", "-q", mboxFile)
		amTime += time.Since(start)
		if err != nil {
			b.Fatalf("git am: %v\n%s", err, out)
		}
		b.StopTimer()
		made := strings.Fields(gitT(b, wt, "rev-list", "--reverse", base+"..HEAD"))
		if len(made) != len(res.Commits) || made[len(made)-1] != res.Commits[len(res.Commits)-1].String() {
			b.Fatalf("git am made %v, the builder %v", made, res.Commits)
		}
		gitT(b, wt, "checkout", "-q", "--detach", base)
		dropLoose(wt)
		b.StartTimer()
	}
	b.ReportMetric(float64(len(msgs)), "patches")
	b.ReportMetric(float64(builderTime.Microseconds())/1000/float64(b.N), "builder-ms/op")
	b.ReportMetric(float64(amTime.Microseconds())/1000/float64(b.N), "git-am-ms/op")
	b.ReportMetric(float64(amTime)/float64(builderTime), "x-faster")
}

// dropLoose removes the loose objects of a benchmark's clone, so both
// tools write every object each time: the clone's own objects are in
// packs, every loose one came from an apply.
func dropLoose(wt string) {
	loose, _ := filepath.Glob(filepath.Join(wt, ".git", "objects", "[0-9a-f][0-9a-f]"))
	for _, d := range loose {
		os.RemoveAll(d)
	}
}
