package kbuild

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// Regression tests for hostile trees: a posted patch controls the tree's
// Makefile, so these toy trees do what a hostile series could.

// hostileMakefile is the toy Makefile with extra recipe lines: after
// maps a target's first recipe line to the lines added after it.
func hostileMakefile(t *testing.T, after map[string]string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/toykernel/Makefile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for line, extra := range after {
		if !strings.Contains(s, line) {
			t.Fatalf("toy Makefile lacks %q", line)
		}
		s = strings.Replace(s, line, line+"\n"+extra, 1)
	}
	return s
}

const (
	tinyconfigLine = "\tprintf '# CONFIG_MODULES is not set\\n' > $(O)/.config"
	olddefLine     = "\tmv $(O)/.config.new $(O)/.config"
	bzImageLine    = "\tnm $(O)/vmlinux > $(O)/System.map"
)

// victim is a host file the sandbox cannot see but can name in a symlink.
func victim(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte("host secret "+name+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func checkVictim(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("victim %s: %v", p, err)
	}
	if want := "host secret " + filepath.Base(p) + "\n"; string(b) != want {
		t.Errorf("host file %s overwritten: %q", p, b)
	}
	if fi, _ := os.Lstat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("host file %s chmodded: %v", p, fi.Mode())
	}
}

// Finding 1: the host writes the fragments and .config into directories
// the configuration runs may write; symlinks planted there must not be
// followed.
func TestHostileConfigureNeverFollowsSymlinks(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{})
	ctx := context.Background()
	frag, tmp := victim(t, "fragment"), victim(t, "configtmp")
	tree := r.edit(map[string]string{"Makefile": hostileMakefile(t, map[string]string{
		tinyconfigLine: "\tln -sf " + frag + " $(O)/qemu-softroce.config",
		bzImageLine:    "\tln -sf " + tmp + " $(O)/.config.tmp",
	})})
	_, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: tree, Lab: lab, Trusted: true})
	checkVictim(t, frag)
	if err != nil {
		t.Fatal(err)
	}
	// A Kconfig change: the next configuration writes .config (through
	// .config.tmp) into the output tree the last make left a link in.
	kc, _ := os.ReadFile(filepath.Join(r.dir, "Kconfig"))
	tree = r.edit(map[string]string{"Kconfig": string(kc) + "CONFIG_NEW\n"})
	_, err = b.Build(ctx, Request{Objects: r.repo.Storer, Tree: tree, Lab: lab, Trusted: true})
	checkVictim(t, frag)
	checkVictim(t, tmp)
	if err != nil {
		t.Fatal(err)
	}
}

// Finding 1 the other way: a .config that is a link to a host file is
// not read (and so not stored and served as the kernel's config).
func TestHostileConfigLinkIsNotRead(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{})
	secret := victim(t, "token")
	tree := r.edit(map[string]string{"Makefile": hostileMakefile(t, map[string]string{
		olddefLine: "\tcp $(O)/.config $(O)/.config.real && ln -sf " + secret + " $(O)/.config",
	})})
	_, err := b.Build(context.Background(), Request{Objects: r.repo.Storer, Tree: tree, Lab: lab})
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("want *BuildError, got %v", err)
	}
	checkVictim(t, secret)
	assertNotStored(t, b, "host secret")
}

// assertNotStored fails when any stored file contains s.
func assertNotStored(t *testing.T, b *Builder, s string) {
	t.Helper()
	assertNotStoredDir(t, b.store.dir, s)
}

// Finding 3: a bzImage (or any artifact) that is a link to a host file
// is refused, not copied into the store and served.
func TestHostileArtifactLinkIsNotStored(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{})
	ctx := context.Background()
	for _, c := range []struct{ name, recipe string }{
		{"bzImage", "\trm $(O)/arch/x86/boot/bzImage && ln -s SECRET $(O)/arch/x86/boot/bzImage"},
		{"System.map", "\trm $(O)/System.map && ln -s SECRET $(O)/System.map"},
		{"arch dir", "\tmv $(O)/arch $(O)/arch.real && mkdir -p $(O)/fake && ln -s $(O)/fake $(O)/arch"},
		{"vmlinux", "\trm $(O)/vmlinux && ln -s SECRET $(O)/vmlinux"},
		{"not a kernel", "\techo 'host secret' > $(O)/arch/x86/boot/bzImage"},
	} {
		t.Run(c.name, func(t *testing.T) {
			secret := victim(t, "token")
			tree := r.edit(map[string]string{"Makefile": hostileMakefile(t, map[string]string{
				bzImageLine: strings.ReplaceAll(c.recipe, "SECRET", secret),
			})})
			_, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: tree, Lab: lab})
			var be *BuildError
			if !errors.As(err, &be) {
				t.Fatalf("want *BuildError, got %v", err)
			}
			checkVictim(t, secret)
			assertNotStored(t, b, "host secret")
		})
	}
}

func TestStoreCopiesOnlyRegularFilesAndLocalLinks(t *testing.T) {
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	secret := victim(t, "token")
	writeTree(t, src, map[string]string{
		"mods/lib/modules/1/x.ko": "ko", "mods/lib/modules/1/build": "->" + secret,
		"mods/lib/modules/1/up": "->../../../..", "mods/lib/modules/1/ok": "->x.ko",
		"link": "->" + secret,
	})
	if _, err := s.Put(ArtifactKey("a", "c", "tc"), map[string]string{"bzImage": filepath.Join(src, "link")}, Artifact{}); err == nil {
		t.Error("stored a symlink's target")
	}
	a, err := s.Put(ArtifactKey("b", "c", "tc"), map[string]string{"modules": filepath.Join(src, "mods")}, Artifact{})
	if err != nil {
		t.Fatal(err)
	}
	m := filepath.Join(a.Path("modules"), "lib/modules/1")
	for name, want := range map[string]bool{"x.ko": true, "ok": true, "build": false, "up": false} {
		if _, err := os.Lstat(filepath.Join(m, name)); (err == nil) != want {
			t.Errorf("%s stored: %v, want %v", name, err == nil, want)
		}
	}
	assertNotStoredDir(t, s.dir, "host secret")
}

func assertNotStoredDir(t *testing.T, dir, s string) {
	t.Helper()
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if c, _ := os.ReadFile(p); strings.Contains(string(c), s) {
				t.Errorf("store file %s holds %q", p, s)
			}
		}
		return nil
	})
}

// evilcc, as ccache's prefix command, compiles the attacker's code in
// place of whatever it was asked to.
const evilcc = `x:#!/bin/sh
out= prev=
for a; do [ "$prev" = -o ] && out=$a; prev=$a; done
printf 'int evil_symbol = 1;\nint main(void) { return 0; }\n' | "$1" -x c -c -o "$out" -
`

// Finding 2: an untrusted build must affect no later build: not through
// the compiler cache (CCACHE_RECACHE with a prefix command storing the
// attacker's object under a clean source's key, a ccache.conf left in
// the cache), nor through the output tree (an object with a future
// mtime that a clean tree's make would not rebuild).
func TestHostileCandidateCannotPoisonLaterBuilds(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{})
	ctx := context.Background()
	build := func(tree plumbing.Hash, slot string, trusted bool) *Result {
		t.Helper()
		res, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: tree, Lab: lab, Slot: slot, Trusted: trusted})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	clean := func(res *Result, what string) {
		t.Helper()
		m, err := os.ReadFile(res.Path("System.map"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(m), "evil_symbol") {
			t.Errorf("%s linked the attacker's object:\n%s", what, m)
		}
	}
	base := plumbing.NewHash(gitRun(t, r.dir, "rev-parse", "HEAD^{tree}"))
	build(base, "s", true)

	hostile := r.edit(map[string]string{
		"evilcc": evilcc,
		"Makefile": "export CCACHE_RECACHE := 1\nexport CCACHE_PREFIX := $(CURDIR)/evilcc\nFORCE:\n" + strings.Replace(hostileMakefile(t, map[string]string{
			bzImageLine: "\t-printf 'prefix_command = $(srctree)/evilcc\\nrecache = true\\n' > /kbuild/ccache/ccache.conf\n" +
				"\tprintf 'int evil_symbol = 2;\\nint main(void) { return 0; }\\n' | gcc -x c -c -o $(O)/main.o -\n" +
				"\ttouch -d 2099-01-01 $(O)/main.o",
		}), "$(O)/main.o: $(srctree)/init/main.c", "$(O)/main.o: $(srctree)/init/main.c FORCE", 1),
	})
	cand := build(hostile, "s", false)
	m, _ := os.ReadFile(cand.Path("System.map"))
	if !strings.Contains(string(m), "evil_symbol") {
		t.Fatalf("the hostile tree did not get its own object linked: the test tests nothing\n%s", m)
	}
	if _, err := os.Stat(filepath.Join(b.opt.CCacheDir, "ccache.conf")); err == nil {
		t.Error("the untrusted build wrote ccache.conf into the shared cache")
	}

	// The same slot's next clean tree, and a clean tree in another slot
	// (whose main.c is the one the attacker recached).
	os.Remove(filepath.Join(r.dir, "evilcc"))
	base2 := r.edit(map[string]string{"README": "two\n", "Makefile": hostileMakefile(t, nil)})
	clean(build(base2, "s", true), "the next trusted build in the slot")
	base3 := r.edit(map[string]string{"README": "three\n"})
	clean(build(base3, "other", true), "a trusted build in another slot")
	// And another candidate in the slot starts from the trusted tree.
	cand2 := r.edit(map[string]string{"README": "four\n"})
	res := build(cand2, "s", false)
	clean(res, "the next candidate")
	t.Logf("candidate: seed %v, make %v, total %v, ccache %+v", res.Timings.Seed, res.Timings.Make, res.Timings.Total, res.CCache)
	if res.CCache.Misses != 0 {
		t.Errorf("candidate recompiled: %+v", res.CCache)
	}
}

// A sparse file costs the build's disk almost nothing (the
// watch counts blocks) but the store would write it out whole, 600 MiB
// under a 64 MiB build limit. It is refused as the tree's doing.
func TestHostileSparseArtifactIsRefused(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{Limits: Limits{Disk: 64 << 20}})
	tree := r.edit(map[string]string{"Makefile": hostileMakefile(t, map[string]string{
		bzImageLine: "\ttruncate -s 600M $(O)/System.map",
	})})
	_, err := b.Build(context.Background(), Request{Objects: r.repo.Storer, Tree: tree, Lab: lab})
	used, _ := diskUsage(b.store.dir)
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("want *BuildError, got %v (store: %d MiB)", err, used>>20)
	}
	if be.Target != "artifacts" || !strings.HasPrefix(be.Tail, "System.map is a sparse file: 629145600 bytes long") {
		t.Errorf("target %q tail %q, want artifacts naming System.map as sparse", be.Target, be.Tail)
	}
	if used > 1<<20 {
		t.Errorf("the store holds %d MiB", used>>20)
	}
	t.Logf("refused: %s (store: %d KiB)", be.Tail, used>>10)
}

// Holes are counted from the file's extents, wherever they are, and a
// modules tree's files count together toward one artifact's allowance.
func TestHoleBytesAndTheArtifactsAllowance(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, at ...int64) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, off := range at {
			if _, err := f.WriteAt(make([]byte, 4096), off); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	full := write("full", 0, 4096, 8192)
	sparse := write("sparse", 0, 8<<20) // 8 MiB hole in the middle
	os.Truncate(sparse, 12<<20)         // and a 4 MiB one at the end
	empty := write("empty")
	os.Truncate(empty, 1<<20) // nothing but a hole
	for p, want := range map[string]int64{full: 0, sparse: 12<<20 - 2*4096, empty: 1 << 20} {
		f, _ := os.Open(p)
		fi, _ := f.Stat()
		got, err := holeBytes(f, fi.Size())
		f.Close()
		if err != nil || got != want {
			t.Errorf("%s: %d bytes of holes, %v; want %d", filepath.Base(p), got, err, want)
		}
	}

	f, _ := os.Open(full)
	f.Close()
	if _, err := holeBytes(f, 4096); err == nil {
		t.Error("a closed file's holes counted")
	}

	// Two modules each under the allowance, over it together.
	mods := filepath.Join(dir, "modules")
	for _, name := range []string{"a.ko", "b.ko"} {
		p := write(filepath.Join("modules/lib/modules/1", name), 0)
		os.Truncate(p, 10<<20)
	}
	var h holeTally
	if err := checkModulesTree(mods, &h); err != nil {
		t.Fatal(err)
	}
	err := h.check()
	if err == nil || !strings.HasPrefix(err.Error(), "modules/lib/modules/1/") || !strings.Contains(err.Error(), ".ko is a sparse file") {
		t.Errorf("20 MiB of holes in two modules: %v", err)
	}
	var one holeTally
	if err := one.add(sparse, "sparse"); err != nil || one.check() != nil {
		t.Errorf("12 MiB of holes refused: %v, %v", err, one.check())
	}
	if err := one.add(filepath.Join(dir, "missing"), "missing"); err == nil {
		t.Error("a missing file counted")
	}
}
