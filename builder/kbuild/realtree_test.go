package kbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// Tests on the real kernel need RDMABOT_TEST_TREE: a git repository
// holding Debian's linux-source-6.12 (what `rdmabot tree import` makes),
// built at RDMABOT_TEST_TREE_REV (default HEAD).
const svcrdmaFile = "net/sunrpc/xprtrdma/svc_rdma_sendto.c"

type realTree struct {
	dir    string
	repo   *git.Repository
	commit plumbing.Hash
	tree   plumbing.Hash
}

func openRealTree(tb testing.TB) realTree {
	tb.Helper()
	dir := os.Getenv("RDMABOT_TEST_TREE")
	if dir == "" {
		tb.Skip("RDMABOT_TEST_TREE unset: a git repository with the 6.12 kernel (rdmabot tree import --tarball /usr/src/linux-source-6.12.tar.xz)")
	}
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if err != nil {
		tb.Fatal(err)
	}
	rev := os.Getenv("RDMABOT_TEST_TREE_REV")
	if rev == "" {
		// A bare repository made by `rdmabot tree import --name local` has
		// no HEAD; its import ref is the tree.
		rev = "HEAD"
		if _, err := repo.ResolveRevision(plumbing.Revision(rev)); err != nil {
			rev = "refs/trees/local/import"
		}
	}
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		tb.Fatalf("RDMABOT_TEST_TREE_REV=%q in %s: %v", rev, dir, err)
	}
	c, err := repo.CommitObject(*h)
	if err != nil {
		tb.Fatal(err)
	}
	return realTree{dir: dir, repo: repo, commit: c.Hash, tree: c.TreeHash}
}

// overlayObjects keeps new objects in memory over a repository's store,
// so tests derive trees from the real kernel without writing to it.
type overlayObjects struct {
	storer.EncodedObjectStorer
	mem *memory.ObjectStorage
}

func newOverlay(base storer.EncodedObjectStorer) *overlayObjects {
	return &overlayObjects{EncodedObjectStorer: base, mem: &memory.NewStorage().ObjectStorage}
}

func (o *overlayObjects) NewEncodedObject() plumbing.EncodedObject { return o.mem.NewEncodedObject() }

func (o *overlayObjects) SetEncodedObject(obj plumbing.EncodedObject) (plumbing.Hash, error) {
	return o.mem.SetEncodedObject(obj)
}

func (o *overlayObjects) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	if obj, err := o.mem.EncodedObject(t, h); err == nil {
		return obj, nil
	}
	return o.EncodedObjectStorer.EncodedObject(t, h)
}

func (o *overlayObjects) HasEncodedObject(h plumbing.Hash) error {
	if o.mem.HasEncodedObject(h) == nil {
		return nil
	}
	return o.EncodedObjectStorer.HasEncodedObject(h)
}

func (o *overlayObjects) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	if n, err := o.mem.EncodedObjectSize(h); err == nil {
		return n, nil
	}
	return o.EncodedObjectStorer.EncodedObjectSize(h)
}

// editFile returns the id of tree root with file p's content replaced by
// edit(old), writing the new blob and trees into objs.
func editFile(tb testing.TB, objs storer.EncodedObjectStorer, root plumbing.Hash, p string, edit func([]byte) []byte) plumbing.Hash {
	tb.Helper()
	t, err := object.GetTree(objs, root)
	if err != nil {
		tb.Fatal(err)
	}
	name, rest, sub := strings.Cut(p, "/")
	entries := append([]object.TreeEntry(nil), t.Entries...)
	for i := range entries {
		if entries[i].Name != name {
			continue
		}
		if sub {
			entries[i].Hash = editFile(tb, objs, entries[i].Hash, rest, edit)
		} else {
			b, err := object.GetBlob(objs, entries[i].Hash)
			if err != nil {
				tb.Fatal(err)
			}
			r, _ := b.Reader()
			var old bytes.Buffer
			old.ReadFrom(r)
			r.Close()
			obj := objs.NewEncodedObject()
			obj.SetType(plumbing.BlobObject)
			w, _ := obj.Writer()
			w.Write(edit(old.Bytes()))
			w.Close()
			if entries[i].Hash, err = objs.SetEncodedObject(obj); err != nil {
				tb.Fatal(err)
			}
		}
		obj := objs.NewEncodedObject()
		if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
			tb.Fatal(err)
		}
		h, err := objs.SetEncodedObject(obj)
		if err != nil {
			tb.Fatal(err)
		}
		return h
	}
	tb.Fatalf("%s not in tree %s", p, root)
	return plumbing.ZeroHash
}

func appendText(s string) func([]byte) []byte {
	return func(b []byte) []byte { return append(append([]byte(nil), b...), s...) }
}

// presync checks a slot out before the heavy lock is taken: a full
// checkout is file-system work, and holding the lock through it would
// only make others wait.
func presync(tb testing.TB, b *Builder, slot string, objs storer.EncodedObjectStorer, tree plumbing.Hash) {
	tb.Helper()
	co, err := OpenCheckout(filepath.Join(b.opt.Dir, "slots", slot))
	if err != nil {
		tb.Fatal(err)
	}
	st, err := co.Sync(context.Background(), objs, tree)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("slot %s: checkout %v (%d files)", slot, st.Duration.Round(time.Millisecond), st.Written)
}

// testCCacheDir is kept between runs so CI's later runs are warm:
// RDMABOT_TEST_CCACHE, else the ccache of the tests' cache
// (RDMABOT_TEST_CACHE, which prepare-lab.sh sets and fills), else a fresh
// (cold) one. Never a production serve's cache.
func testCCacheDir(tb testing.TB) string {
	if d := os.Getenv("RDMABOT_TEST_CCACHE"); d != "" {
		return d
	}
	if c := os.Getenv("RDMABOT_TEST_CACHE"); c != "" {
		return filepath.Join(c, "ccache")
	}
	return tb.TempDir()
}

// TestBuildLabKernel builds the real 6.12 lab kernel, then a one-line
// svcrdma change (incremental), then a change that does not compile, and
// configures the Omni-Path kernel on the same checkout.
func TestBuildLabKernel(t *testing.T) {
	rt := openRealTree(t)
	b := newToyBuilder(t, Options{CCacheDir: testCCacheDir(t), Timeout: 75 * time.Minute})
	ctx := context.Background()
	lab := toyLab(t)
	objs := newOverlay(rt.repo.Storer)
	presync(t, b, "default", objs, rt.tree)
	testenv.HoldHeavyLock(t)

	// The imported tree is a configured branch: trusted, built in the
	// slot itself, so the candidate below starts from its output tree.
	res, err := b.Build(ctx, Request{Objects: objs, Tree: rt.tree, Lab: lab, Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("base: sync %v (%d files), configure %v, make %v, ccache %d hits %d misses",
		res.Timings.Sync, res.Sync.Written, res.Timings.Configure, res.Timings.Make, res.CCache.Hits, res.CCache.Misses)
	img, err := os.ReadFile(res.Path("bzImage"))
	if err != nil {
		t.Fatal(err)
	}
	if len(img) < 1<<20 || string(img[0x202:0x206]) != "HdrS" {
		t.Fatalf("bzImage (%d bytes) has no x86 boot header", len(img))
	}
	cfg, err := os.ReadFile(res.Path("config"))
	if err != nil {
		t.Fatal(err)
	}
	if lost, err := lab.VerifyConfig(cfg); err != nil || len(lost) != 0 {
		t.Fatalf("fragment did not survive: %v %v", lost, err)
	}
	if len(res.BuildID) != 40 {
		t.Errorf("build id %q", res.BuildID)
	}
	if m, _ := os.ReadFile(res.Path("System.map")); !bytes.Contains(m, []byte(" svc_rdma_sendto\n")) {
		t.Error("System.map lacks svc_rdma_sendto: svcrdma not built in")
	}

	patched := editFile(t, objs, rt.tree, svcrdmaFile, appendText("\n/* rdmabot: an incremental change */\n"))
	res2, err := b.Build(ctx, Request{Objects: objs, Tree: patched, Lab: lab})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one-line change: sync %v, configure %v, make %v", res2.Timings.Sync, res2.Timings.Configure, res2.Timings.Make)
	if res2.Configured || res2.Sync.Written != 1 || res2.Key == res.Key {
		t.Errorf("incremental build: configured=%v written=%d same key=%v", res2.Configured, res2.Sync.Written, res2.Key == res.Key)
	}

	broken := editFile(t, objs, rt.tree, svcrdmaFile, appendText("\nint rdmabot_broken(void);\nint rdmabot_broken(void) { return rdmabot_undeclared; }\n"))
	_, err = b.Build(ctx, Request{Objects: objs, Tree: broken, Lab: lab})
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("want *BuildError, got %v", err)
	}
	if len(be.Diagnostics) == 0 || be.Diagnostics[0].File != svcrdmaFile || !strings.Contains(be.Diagnostics[0].Message, "rdmabot_undeclared") {
		t.Errorf("diagnostics = %+v\n%s", be.Diagnostics, be.Tail)
	}

	// The quick check finds the same error by compiling the one file
	// alone, and compiles the good change cleanly.
	_, err = b.Check(ctx, Request{Objects: objs, Tree: broken, Lab: lab}, rt.tree)
	var ce *BuildError
	if !errors.As(err, &ce) {
		t.Fatalf("check: want *BuildError, got %v", err)
	}
	svcrdmaObj := strings.TrimSuffix(svcrdmaFile, ".c") + ".o"
	if ce.Target != svcrdmaObj || len(ce.Diagnostics) == 0 || ce.Diagnostics[0].File != svcrdmaFile ||
		!strings.Contains(ce.Diagnostics[0].Message, "rdmabot_undeclared") {
		t.Errorf("check: target %q, diagnostics %+v\n%s", ce.Target, ce.Diagnostics, ce.Tail)
	}
	chk, err := b.Check(ctx, Request{Objects: objs, Tree: patched, Lab: lab}, rt.tree)
	if err != nil {
		t.Fatal(err)
	}
	if chk.Skipped != "" || len(chk.Objects) != 1 || chk.Objects[0] != svcrdmaObj {
		t.Errorf("check of the one-line change: %+v", chk)
	}
	t.Logf("quick check: wait %v, seed %v, sync %v, make %v, total %v", chk.Timings.Wait, chk.Timings.Seed, chk.Timings.Sync, chk.Timings.Make, chk.Timings.Total)

	opa, err := LookupLab("opa")
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.Configure(ctx, Request{Objects: objs, Tree: rt.tree, Lab: opa, Trusted: true})
	if err != nil {
		t.Fatalf("Omni-Path config: %v", err)
	}
	ocfg, _ := os.ReadFile(c.Config)
	got := ParseConfig(ocfg)
	for opt, want := range map[string]string{"CONFIG_INFINIBAND_HFI1": "m", "CONFIG_INFINIBAND_RDMAVT": "m", "CONFIG_INFINIBAND_IPOIB_CM": "y", "CONFIG_SUNRPC_XPRT_RDMA": "m", "CONFIG_MODULES": "y"} {
		if got[opt] != want {
			t.Errorf("opa: %s=%q, want %q", opt, got[opt], want)
		}
	}
	t.Logf("opa configure: %v", c.Took)

	hw, err := LookupLab("hw")
	if err != nil {
		t.Fatal(err)
	}
	c, err = b.Configure(ctx, Request{Objects: objs, Tree: rt.tree, Lab: hw, Trusted: true})
	if err != nil {
		t.Fatalf("RDMA hardware config: %v", err)
	}
	hcfg, _ := os.ReadFile(c.Config)
	got = ParseConfig(hcfg)
	for opt, want := range map[string]string{"CONFIG_MLX5_INFINIBAND": "m", "CONFIG_MLX4_INFINIBAND": "m", "CONFIG_RDMA_RXE": "m", "CONFIG_SUNRPC_XPRT_RDMA": "m", "CONFIG_NFSD": "m"} {
		if got[opt] != want {
			t.Errorf("hw: %s=%q, want %q", opt, got[opt], want)
		}
	}
	t.Logf("hw configure: %v", c.Took)
}

// BenchmarkSyncOneFileChange moves a checkout of the real tree between
// the base and a one-line svcrdma change, against git checkout doing the
// same in a clone of the same repository, in the same run.
func BenchmarkSyncOneFileChange(b *testing.B) {
	rt := openRealTree(b)
	tmp := b.TempDir()
	wt := filepath.Join(tmp, "git")
	start := time.Now()
	gitRun(b, tmp, "clone", "-q", "--shared", "--no-checkout", rt.dir, wt)
	base := rt.commit.String()
	gitRun(b, wt, "checkout", "-q", "-b", "base", base)
	gitFull := time.Since(start)
	f := filepath.Join(wt, svcrdmaFile)
	old, err := os.ReadFile(f)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(f, append(old, "\n/* rdmabot bench */\n"...), 0o644); err != nil {
		b.Fatal(err)
	}
	gitRun(b, wt, "checkout", "-q", "-b", "changed")
	gitRun(b, wt, "commit", "-q", "-a", "-m", "one-line svcrdma change")
	gitRun(b, wt, "checkout", "-q", "base")

	treeOf := func(rev string) plumbing.Hash {
		return plumbing.NewHash(gitRun(b, wt, "rev-parse", rev+"^{tree}"))
	}
	revs := []string{"changed", "base"}
	// go-git reads the original repository (it cannot follow the clone's
	// absolute alternates path); the same edit made there must give the
	// very tree git committed.
	objs := newOverlay(rt.repo.Storer)
	trees := []plumbing.Hash{editFile(b, objs, rt.tree, svcrdmaFile, appendText("\n/* rdmabot bench */\n")), rt.tree}
	if trees[0] != treeOf("changed") || trees[1] != treeOf("base") {
		b.Fatalf("trees differ from git's: %v %v", trees, revs)
	}

	ctx := context.Background()
	co, err := OpenCheckout(filepath.Join(tmp, "slot"))
	if err != nil {
		b.Fatal(err)
	}
	start = time.Now()
	if _, err := co.Sync(ctx, objs, trees[1]); err != nil {
		b.Fatal(err)
	}
	ourFull := time.Since(start)

	var ours, theirs time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % 2
		start := time.Now()
		st, err := co.Sync(ctx, objs, trees[k])
		if err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)
		if st.Written != 1 || st.Full {
			b.Fatalf("sync wrote %d files (full=%v)", st.Written, st.Full)
		}
		start = time.Now()
		gitRun(b, wt, "checkout", "-q", revs[k])
		theirs += time.Since(start)
	}
	b.StopTimer()
	got, _ := os.ReadFile(filepath.Join(co.Dir(), svcrdmaFile))
	want, _ := os.ReadFile(f)
	if !bytes.Equal(got, want) {
		b.Fatal("checkout and git disagree on the changed file")
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64((ours/n).Microseconds())/1000, "sync-ms/op")
	b.ReportMetric(float64((theirs/n).Microseconds())/1000, "git-checkout-ms/op")
	b.ReportMetric(float64(theirs)/float64(ours), "x-faster")
	b.Logf("full checkout of the tree: ours %v, git %v; one-file switch: ours %v, git checkout %v (%.1fx)",
		ourFull.Round(time.Millisecond), gitFull.Round(time.Millisecond), ours/n, theirs/n, float64(theirs)/float64(ours))
}

// BenchmarkLabKernelBuild times the lab kernel's cold build (empty
// ccache), a ccache-warm build in a fresh slot (new checkout path, new
// O= directory), an incremental build after touching svc_rdma_sendto.c,
// and one after a one-line change to it, and prints them beside the
// reference measured on this machine by ../shared/lab/build-kernel.sh.
// Run: go test -run '^$' -bench LabKernelBuild -benchtime 1x -timeout 90m.
func BenchmarkLabKernelBuild(b *testing.B) {
	rt := openRealTree(b)
	ccache := b.TempDir()
	if d := os.Getenv("RDMABOT_BENCH_CCACHE"); d != "" {
		ccache = d // to reuse a warm cache and skip the cold step's cost
	}
	bld := newToyBuilder(b, Options{CCacheDir: ccache, CCacheDepend: os.Getenv("RDMABOT_BENCH_CCACHE_DEPEND") != ""})
	ctx := context.Background()
	lab := toyLab(b)
	objs := newOverlay(rt.repo.Storer)
	// RDMABOT_BENCH_STEPS=warm,touch,oneline skips the cold build (with a
	// warm RDMABOT_BENCH_CCACHE); default: all four.
	steps := map[string]bool{"cold": true, "warm": true, "touch": true, "oneline": true}
	if v := os.Getenv("RDMABOT_BENCH_STEPS"); v != "" {
		steps = map[string]bool{}
		for _, s := range strings.Split(v, ",") {
			steps[s] = true
		}
	}
	if steps["cold"] {
		presync(b, bld, "cold", objs, rt.tree)
	}
	presync(b, bld, "warm", objs, rt.tree)
	testenv.HoldHeavyLock(b)
	type row struct {
		step string
		res  *Result
		ref  string
	}
	var rows []row
	build := func(step, slot string, tree plumbing.Hash, ref string) {
		res, err := bld.Build(ctx, Request{Objects: objs, Tree: tree, Lab: lab, Slot: slot, Force: true})
		if err != nil {
			b.Fatalf("%s: %v", step, err)
		}
		rows = append(rows, row{step, res, ref})
	}
	for i := 0; i < b.N; i++ {
		if steps["cold"] {
			build("cold (empty ccache)", "cold", rt.tree, "635 s empty ccache, 361 s without ccache")
		}
		if steps["warm"] {
			build("ccache-warm, fresh slot and O=", "warm", rt.tree, "34 s")
		}
		if steps["touch"] {
			p := filepath.Join(bld.opt.Dir, "slots", "warm", "src", svcrdmaFile)
			now := time.Now()
			if err := os.Chtimes(p, now, now); err != nil {
				b.Fatal(err)
			}
			build("incremental: touch "+filepath.Base(svcrdmaFile), "warm", rt.tree, "7 s")
		}
		if steps["oneline"] {
			build("incremental: one-line change", "warm", editFile(b, objs, rt.tree, svcrdmaFile, appendText("\n/* bench */\n")), "-")
		}
	}
	b.StopTimer()
	var out strings.Builder
	fmt.Fprintf(&out, "\n%-40s %9s %10s %9s %13s  %s\n", "step", "sync", "configure", "make", "ccache hit/miss", "reference (build-kernel.sh)")
	for _, r := range rows {
		fmt.Fprintf(&out, "%-40s %9v %10v %9v %7d/%-7d  %s\n", r.step,
			r.res.Timings.Sync.Round(time.Millisecond), r.res.Timings.Configure.Round(100*time.Millisecond),
			r.res.Timings.Make.Round(100*time.Millisecond), r.res.CCache.Hits, r.res.CCache.Misses, r.ref)
	}
	b.Log(out.String())
}
