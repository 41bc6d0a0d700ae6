package kbuild

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/rdmabot/rdmabot/internal/flock"
	"github.com/rdmabot/rdmabot/internal/safefile"
)

// toyRepo is a git repository holding testdata/toykernel, committed
// again with each change a test makes.
type toyRepo struct {
	t    *testing.T
	dir  string
	repo *git.Repository
}

func newToyRepo(t *testing.T, lab Lab) *toyRepo {
	t.Helper()
	dir := t.TempDir()
	if err := safefile.CopyTree("testdata/toykernel", filepath.Join(dir, "src"), -1, -1); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(dir, "src")
	// The toy's Kconfig knows every symbol the lab asks for.
	var syms []string
	for _, f := range lab.Fragments {
		b, err := Fragment(f)
		if err != nil {
			t.Fatal(err)
		}
		for s := range ParseConfig(b) {
			syms = append(syms, s)
		}
	}
	syms = append(syms, "CONFIG_VIRTIO")
	sort.Strings(syms)
	writeTree(t, dir, map[string]string{"Kconfig": strings.Join(syms, "\n") + "\n"})
	gitRun(t, dir, "init", "-q")
	r := &toyRepo{t: t, dir: dir}
	r.commit()
	var err error
	if r.repo, err = git.PlainOpen(dir); err != nil {
		t.Fatal(err)
	}
	return r
}

// commit records the working tree and returns its tree id.
func (r *toyRepo) commit() plumbing.Hash {
	r.t.Helper()
	gitRun(r.t, r.dir, "add", "-A")
	gitRun(r.t, r.dir, "commit", "-q", "--allow-empty", "-m", "change")
	return plumbing.NewHash(gitRun(r.t, r.dir, "rev-parse", "HEAD^{tree}"))
}

func (r *toyRepo) edit(files map[string]string) plumbing.Hash {
	r.t.Helper()
	for p := range files {
		os.Remove(filepath.Join(r.dir, p))
	}
	writeTree(r.t, r.dir, files)
	return r.commit()
}

func newToyBuilder(t testing.TB, opt Options) *Builder {
	t.Helper()
	requireBwrap(t)
	for _, tool := range []string{"make", "gcc", "ccache"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	if opt.Dir == "" {
		opt.Dir = t.TempDir()
	}
	if opt.CCacheDir == "" {
		opt.CCacheDir = t.TempDir()
	}
	b, err := New(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func toyLab(t testing.TB) Lab {
	lab, err := LookupLab("qemu")
	if err != nil {
		t.Fatal(err)
	}
	return lab
}

func TestBuildStoresReusesAndStaysIncremental(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{Jobs: 2})
	ctx := context.Background()
	head := plumbing.NewHash(gitRun(t, r.dir, "rev-parse", "HEAD^{tree}"))

	res, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: head, Lab: lab, Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reused || !res.Configured || !res.Sync.Full {
		t.Errorf("first build: reused=%v configured=%v full sync=%v", res.Reused, res.Configured, res.Sync.Full)
	}
	for _, name := range []string{"bzImage", "System.map", "config", "build.log"} {
		if _, err := os.Stat(res.Path(name)); err != nil {
			t.Errorf("artifact lacks %s: %v", name, err)
		}
	}
	// The build id must be the one binutils reads.
	notes, err := exec.Command("readelf", "-n", res.Path("bzImage")).Output()
	if err != nil {
		t.Fatal(err)
	}
	if res.BuildID == "" || !strings.Contains(string(notes), "Build ID: "+res.BuildID) {
		t.Errorf("build id %q not in readelf -n:\n%s", res.BuildID, notes)
	}
	cfg, _ := os.ReadFile(res.Path("config"))
	if !strings.Contains(string(cfg), "CONFIG_RDMA_RXE=y") || !strings.Contains(string(cfg), "CONFIG_VIRTIO=y") {
		t.Errorf("config lacks the fragments:\n%s", cfg)
	}
	if res.CCache.Misses == 0 {
		t.Errorf("ccache saw no compile: %+v", res.CCache)
	}

	// The same tree again: the store answers, nothing runs.
	again, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: head, Lab: lab, Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused || again.Key != res.Key {
		t.Errorf("second build of the same tree not reused: %+v", again)
	}

	// A change that touches neither Kconfig nor the compiled file: no new
	// configuration, no recompilation.
	obj := filepath.Join(b.opt.Dir, "slots", "default", "out-qemu", "main.o")
	before, err := os.Stat(obj)
	if err != nil {
		t.Fatal(err)
	}
	readme := r.edit(map[string]string{"README": "hello\n"})
	res2, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: readme, Lab: lab, Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Reused || res2.Configured || res2.Sync.Full || res2.Sync.Written != 1 {
		t.Errorf("README change: reused=%v configured=%v sync=%+v", res2.Reused, res2.Configured, res2.Sync)
	}
	if after, _ := os.Stat(obj); !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("main.o rebuilt for a README change")
	}
	if res2.Key == res.Key {
		t.Errorf("different trees share a key")
	}
}

// A second slot has another checkout path and another output directory;
// inside the sandbox both look the same, so ccache hits across slots.
func TestBuildCCacheHitsAcrossSlots(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{})
	head := plumbing.NewHash(gitRun(t, r.dir, "rev-parse", "HEAD^{tree}"))
	ctx := context.Background()
	first, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: head, Lab: lab, Slot: "one", Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: head, Lab: lab, Slot: "two", Force: true, Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	if first.CCache.Misses != 1 || second.CCache.Hits != 1 || second.CCache.Misses != 0 {
		t.Errorf("ccache: slot one %+v, slot two %+v; want a miss then a hit", first.CCache, second.CCache)
	}
	if second.Reused || second.Key != first.Key {
		t.Errorf("forced rebuild: reused=%v key %s vs %s", second.Reused, second.Key, first.Key)
	}
	if _, err := os.Stat(second.Path("bzImage")); err != nil {
		t.Errorf("forced rebuild lost the artifact: %v", err)
	}
}

func TestBuildReportsLostConfigOptions(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{})
	kc, _ := os.ReadFile(filepath.Join(r.dir, "Kconfig"))
	// A series that removes the rxe driver's symbol.
	tree := r.edit(map[string]string{"Kconfig": strings.Replace(string(kc), "CONFIG_RDMA_RXE\n", "", 1)})
	_, err := b.Build(context.Background(), Request{Objects: r.repo.Storer, Tree: tree, Lab: lab})
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("want *ConfigError, got %v", err)
	}
	if len(ce.Lost) != 1 || ce.Lost[0].Option != "CONFIG_RDMA_RXE" || ce.Lost[0].Want != "y" || ce.Lost[0].Got != "" {
		t.Errorf("lost = %+v", ce.Lost)
	}
}

func TestBuildErrorNamesCompilerErrorsAndNewOnes(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{})
	ctx := context.Background()
	broken := r.edit(map[string]string{"init/main.c": "int main(void)\n{\n\treturn undeclared_a;\n}\n"})
	_, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: broken, Lab: lab})
	var base *BuildError
	if !errors.As(err, &base) {
		t.Fatalf("want *BuildError, got %v", err)
	}
	if len(base.Diagnostics) != 1 {
		t.Fatalf("diagnostics = %+v\n%s", base.Diagnostics, base.Tail)
	}
	d := base.Diagnostics[0]
	if d.File != "init/main.c" || d.Line != 3 || !strings.Contains(d.Message, "undeclared_a") {
		t.Errorf("diagnostic = %+v", d)
	}

	// The "series" keeps the old error (moved down a line) and adds one.
	worse := r.edit(map[string]string{"init/main.c": "int f(void) { return undeclared_b; }\nint main(void)\n{\n\treturn undeclared_a;\n}\n"})
	_, err = b.Build(ctx, Request{Objects: r.repo.Storer, Tree: worse, Lab: lab})
	var patched *BuildError
	if !errors.As(err, &patched) {
		t.Fatalf("want *BuildError, got %v", err)
	}
	fresh := patched.NewSince(base)
	if len(patched.Diagnostics) != 2 || len(fresh) != 1 || !strings.Contains(fresh[0].Message, "undeclared_b") {
		t.Errorf("all = %+v, new = %+v", patched.Diagnostics, fresh)
	}
	if got := patched.NewSince(nil); len(got) != 2 {
		t.Errorf("against a clean base every error is new, got %+v", got)
	}
}

func TestBuildTimeoutIsInfraError(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{Timeout: 2 * time.Second})
	slow := r.edit(map[string]string{"SLOW": "sleep in make\n"})
	start := time.Now()
	_, err := b.Build(context.Background(), Request{Objects: r.repo.Storer, Tree: slow, Lab: lab, Trusted: true})
	var ie *InfraError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("want an InfraError naming the timeout, got %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v", d)
	}
}

func TestStorePutIsAtomicAndLookupValidates(t *testing.T) {
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"bzImage": "kernel", "mods/lib/modules/x.ko": "ko", "mods/link": "->lib"})
	key := ArtifactKey("t", "c", "tc")
	a, err := s.Put(key, map[string]string{"bzImage": filepath.Join(src, "bzImage"), "modules": filepath.Join(src, "mods")}, Artifact{Tree: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(a.Path("bzImage")); string(b) != "kernel" {
		t.Errorf("bzImage = %q", b)
	}
	if l, _ := os.Readlink(filepath.Join(a.Path("modules"), "link")); l != "lib" {
		t.Errorf("symlink in modules = %q", l)
	}
	if a.Path("System.map") != "" {
		t.Error("Path of a file not stored")
	}
	got, ok := s.Lookup(key)
	if !ok || got.Tree != "t" {
		t.Errorf("Lookup = %+v %v", got, ok)
	}
	if _, ok := s.Lookup("../../etc"); ok {
		t.Error("Lookup accepted a path")
	}
	ents, _ := os.ReadDir(s.dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp") {
			t.Errorf("temporary left behind: %s", e.Name())
		}
	}
}

// Forget removes the stored artifact a copy names (the bot's hard-linked
// copy of it, pruned), and nothing when the copy names none.
func TestStoreForgetsWhatACopyNames(t *testing.T) {
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"bzImage": "kernel"})
	key, other := ArtifactKey("t", "c", "tc"), ArtifactKey("u", "c", "tc")
	for _, k := range []string{key, other} {
		if _, err := s.Put(k, map[string]string{"bzImage": filepath.Join(src, "bzImage")}, Artifact{}); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := s.Lookup(key)
	cp := filepath.Join(t.TempDir(), "bot-copy")
	os.Mkdir(cp, 0o755)
	for _, f := range []string{"bzImage", "artifact.json"} {
		if err := os.Link(filepath.Join(a.Dir, f), filepath.Join(cp, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Forget(cp); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Lookup(key); ok {
		t.Error("the copied artifact is still stored")
	}
	if _, ok := s.Lookup(other); !ok {
		t.Error("another artifact was removed")
	}
	var ie *InfraError
	for name, meta := range map[string]string{"no artifact.json": "", "bad json": "{", "bad key": `{"key": "../x"}`} {
		dir := t.TempDir()
		if meta != "" {
			os.WriteFile(filepath.Join(dir, "artifact.json"), []byte(meta), 0o644)
		}
		if err := s.Forget(dir); err == nil || (name != "bad key" && !errors.As(err, &ie)) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, ok := s.Lookup(other); !ok {
		t.Error("a failed Forget removed an artifact")
	}
}

// A slot whose recorded tree is not in the request's object store (another
// process's store, a store rebuilt since) is healed by a full checkout; a
// request for a tree the store lacks fails cleanly and releases the slot.
func TestBuildSlotHealsAndEarlyErrorsReleaseIt(t *testing.T) {
	lab := toyLab(t)
	first := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{})
	ctx := context.Background()
	// A tree only the first repository has: every toy repository starts
	// with the same tree.
	head := first.edit(map[string]string{"README": "first repository only\n"})
	if _, err := b.Build(ctx, Request{Objects: first.repo.Storer, Tree: head, Lab: lab}); err != nil {
		t.Fatal(err)
	}

	// A tree that no store holds: an error, not a panic, and the slot's
	// lock is free for the next build.
	missing := plumbing.NewHash("0123456789abcdef0123456789abcdef01234567")
	if _, err := b.Build(ctx, Request{Objects: first.repo.Storer, Tree: missing, Lab: lab}); err == nil {
		t.Fatal("build of a missing tree succeeded")
	}

	// Another repository: the slot's recorded tree is unknown to it.
	second := newToyRepo(t, lab)
	tree := second.edit(map[string]string{"README": "other store\n"})
	quick, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := b.Build(quick, Request{Objects: second.repo.Storer, Tree: tree, Lab: lab})
	if err != nil {
		t.Fatalf("build after an early error and with an unknown recorded tree: %v", err)
	}
	if !res.Sync.Full {
		t.Errorf("sync from a tree the store lacks was not a full checkout: %+v", res.Sync)
	}
}

// builder.heavy_lock: a build waits while another holder (a lab run)
// has the lock, builds once it is free, and a wait the timeout ends is
// the machine's (INFRA), never the tree's.
func TestBuildTakesTheHeavyLock(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	lock := filepath.Join(t.TempDir(), "heavy.lock")
	b := newToyBuilder(t, Options{HeavyLock: lock, Timeout: 2 * time.Second})
	head := plumbing.NewHash(gitRun(t, r.dir, "rev-parse", "HEAD^{tree}"))
	req := Request{Objects: r.repo.Storer, Tree: head, Lab: lab, Trusted: true}

	held, err := flock.Exclusive(context.Background(), lock)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Build(context.Background(), req)
	var ie *InfraError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), lock) {
		t.Fatalf("a build behind a held heavy lock: want an InfraError naming %s, got %v", lock, err)
	}
	released := make(chan struct{})
	var releasedAt time.Time
	b = newToyBuilder(t, Options{HeavyLock: lock, Timeout: time.Minute})
	time.AfterFunc(500*time.Millisecond, func() { releasedAt = time.Now(); held(); close(released) })
	called := time.Now()
	res, err := b.Build(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-released:
	default:
		t.Fatal("the build ran while the heavy lock was held")
	}
	// The wait is said apart from the build's own steps: a build that
	// took long behind a lab boot is not a slow build.
	if w, held := res.Timings.Wait, releasedAt.Sub(called); w < held-200*time.Millisecond || w > res.Timings.Total {
		t.Errorf("Timings.Wait %v, the lock held for %v of the build's %v", w, held, res.Timings.Total)
	}
}

// A cache_dir another user built in (serve run as rdmabot, the tests as
// root): an untrusted build works in its own copy, owned by this
// process, and succeeds; a trusted build in the other user's slot is the
// operator's gap (InfraError naming the owner), never a build failure.
func TestBuildInAnotherUsersSlot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the slot to another user")
	}
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{Jobs: 2})
	ctx := context.Background()
	head := plumbing.NewHash(gitRun(t, r.dir, "rev-parse", "HEAD^{tree}"))
	if _, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: head, Lab: lab, Trusted: true}); err != nil {
		t.Fatal(err)
	}
	// nobody: what run.sh's serve user is to the tests.
	for _, d := range []string{b.opt.Dir, b.opt.CCacheDir} {
		if out, err := exec.Command("chown", "-R", "65534:65534", d).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	cand := r.edit(map[string]string{"main.c": "int main(void) { return 1; }\n"})
	res, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: cand, Lab: lab, Trusted: false})
	if err != nil {
		t.Fatalf("an untrusted build beside another user's slot: %v", err)
	}
	if _, err := os.Stat(res.Path("bzImage")); err != nil {
		t.Errorf("no kernel: %v", err)
	}
	other := r.edit(map[string]string{"README": "another tree\n"})
	_, err = b.Build(ctx, Request{Objects: r.repo.Storer, Tree: other, Lab: lab, Trusted: true})
	var ie *InfraError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("a trusted build in another user's slot: %v, want an InfraError naming the owner", err)
	}
}

// The debug profile's kernel (a lab whose fragments ask for line tables)
// keeps its vmlinux in the store, for decoding its crashes; the lab
// kernel, which has none, does not. The two are different kernels of the
// same tree.
func TestBuildKeepsVmlinuxOfDebugKernels(t *testing.T) {
	debug, err := LookupLab("qemu-debug")
	if err != nil {
		t.Fatal(err)
	}
	if !debug.DebugInfo() || toyLab(t).DebugInfo() {
		t.Fatalf("DebugInfo: qemu-debug %v, qemu %v; want only qemu-debug", debug.DebugInfo(), toyLab(t).DebugInfo())
	}
	r := newToyRepo(t, debug)
	b := newToyBuilder(t, Options{Jobs: 2})
	ctx := context.Background()
	head := plumbing.NewHash(gitRun(t, r.dir, "rev-parse", "HEAD^{tree}"))
	res, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: head, Lab: debug, Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(res.Path("vmlinux")); err != nil {
		t.Errorf("the debug kernel's vmlinux is not kept: %v", err)
	}
	plain, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: head, Lab: toyLab(t), Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(plain.Path("vmlinux")); err == nil {
		t.Error("the lab kernel's vmlinux is kept")
	}
	if plain.Key == res.Key {
		t.Error("the debug kernel and the lab kernel of one tree share a key")
	}
}

// What a crashed Put or Remove left (a temporary directory whose maker
// is gone) is removed when the store is opened again; a Put still
// writing keeps its own. Remove takes the artifact out of place before
// deleting it, so no key is ever half there.
func TestStoreOpenRemovesWhatACrashLeft(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"bzImage": "kernel"})
	key := ArtifactKey("t", "c", "tc")
	if _, err := s.Put(key, map[string]string{"bzImage": filepath.Join(src, "bzImage")}, Artifact{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(key); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("after Remove the store holds %d entries", len(ents))
	}
	// A crashed writer's directory: its lock died with it.
	crashed := filepath.Join(dir, ".tmp-"+key+"-rm-1234")
	os.MkdirAll(filepath.Join(crashed, key), 0o755)
	os.WriteFile(filepath.Join(crashed, key, "bzImage"), []byte("half"), 0o644)
	live, release, err := flock.TempDir(dir, ".tmp-"+key+"-")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	hourAgo := time.Now().Add(-time.Hour)
	for _, d := range []string{crashed, live} {
		os.Chtimes(d, hourAgo, hourAgo)
	}
	if _, err := OpenStore(dir); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || filepath.Join(dir, ents[0].Name()) != live {
		t.Fatalf("the store holds %d entries, want only the live Put's %s", len(ents), filepath.Base(live))
	}
}

// A leftover the store cannot remove (an immutable file stands in for
// another user's) does not stop the store from opening.
func TestStoreOpensBesideALeftoverItCannotRemove(t *testing.T) {
	dir := t.TempDir()
	stuck := filepath.Join(dir, ".tmp-stuck-1")
	os.MkdirAll(stuck, 0o755)
	f := filepath.Join(stuck, "bzImage")
	os.WriteFile(f, []byte("half"), 0o644)
	if out, err := exec.Command("chattr", "+i", f).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s (needs root on a file system with attributes)", err, out)
	}
	defer exec.Command("chattr", "-i", f).Run()
	hourAgo := time.Now().Add(-time.Hour)
	os.Chtimes(stuck, hourAgo, hourAgo)
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatalf("a leftover it cannot remove stopped the store: %v", err)
	}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"bzImage": "kernel"})
	if _, err := s.Put(ArtifactKey("t", "c", "tc"), map[string]string{"bzImage": filepath.Join(src, "bzImage")}, Artifact{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f); err != nil {
		t.Fatalf("the immutable leftover: %v (the test proves nothing)", err)
	}
}
