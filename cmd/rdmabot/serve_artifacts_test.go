package main

import (
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/builder/kbuild"
)

// toyKernelTree is builder/kbuild's toy tree (make, gcc, ccache and
// bwrap build it in a second) with a Kconfig knowing every symbol the
// qemu lab's fragments set.
func toyKernelTree(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"bwrap", "make", "gcc", "ccache"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: serve cannot build the toy kernel", tool)
		}
	}
	wt := t.TempDir()
	if err := os.CopyFS(wt, os.DirFS(filepath.Join("..", "..", "builder", "kbuild", "testdata", "toykernel"))); err != nil {
		t.Fatal(err)
	}
	lab, err := kbuild.LookupLab("qemu")
	if err != nil {
		t.Fatal(err)
	}
	syms := []string{"CONFIG_VIRTIO"}
	for _, f := range lab.Fragments {
		b, err := kbuild.Fragment(f)
		if err != nil {
			t.Fatal(err)
		}
		for s := range kbuild.ParseConfig(b) {
			syms = append(syms, s)
		}
	}
	sort.Strings(syms)
	if err := os.WriteFile(filepath.Join(wt, "Kconfig"), []byte(strings.Join(syms, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return wt
}

// seedKernel stores an old kernel of 2 MiB as a build would have: in
// kbuild's store under kkey and hard-linked into the bot's artifact
// directory under key, last used at used. It returns both directories.
func seedKernel(t *testing.T, cache, key, kkey string, used time.Time) (art, kb string) {
	t.Helper()
	kb = filepath.Join(cache, "kbuild", "store", kkey)
	art = filepath.Join(cache, "artifacts", key)
	for _, d := range []string{kb, art} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string][]byte{"bzImage": make([]byte, 2<<20), "artifact.json": fmt.Appendf(nil, `{"key": %q, "files": ["bzImage"]}`, kkey)}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(kb, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(kb, name), filepath.Join(art, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(art, used, used); err != nil {
		t.Fatal(err)
	}
	return art, kb
}

// allocated is what dir takes on disk, as du counts it.
func allocated(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if fi, err2 := os.Lstat(p); err == nil && err2 == nil {
			n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	return n
}

// `rdmabot serve` with config.toml and bot.artifacts_max_mib = 3 builds
// a series' base (the toy kernel, trusted) into a cache holding two old
// kernels of 2 MiB: the least recently used one goes, from the artifact
// directory and from kbuild's store, and the cache is within its bound
// again. The series' own build leaves System.map a sparse file of
// 600 MiB: BUILD_FAILED, nothing of it stored.
func TestServePrunesArtifacts(t *testing.T) {
	e := newServeEnv(t,
		`artifacts_max_mib = 20480`, `artifacts_max_mib = 3`,
		`url = "https://lore.kernel.org/linux-rdma"`, `url = "no-inbox"`,
		`url = "https://lore.kernel.org/linux-nfs"`, `url = "no-inbox"`,
	)
	wt := toyKernelTree(t)
	importTree(t, filepath.Join(e.dir, "data"), wt)
	cache := filepath.Join(e.dir, "cache")
	now := time.Now()
	oldArt, oldKb := seedKernel(t, cache, "local-"+strings.Repeat("0", 32), strings.Repeat("0", 32), now.Add(-48*time.Hour))
	keptArt, keptKb := seedKernel(t, cache, "local-"+strings.Repeat("1", 32), strings.Repeat("1", 32), now.Add(-24*time.Hour))

	// The series: a Makefile whose bzImage recipe truncates System.map.
	mk, err := os.ReadFile(filepath.Join(wt, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	nm := "\tnm $(O)/vmlinux > $(O)/System.map\n"
	if !strings.Contains(string(mk), nm) {
		t.Fatalf("the toy Makefile lacks %q", nm)
	}
	os.WriteFile(filepath.Join(wt, "Makefile"), []byte(strings.Replace(string(mk), nm, nm+"\ttruncate -s 600M $(O)/System.map\n", 1)), 0o644)
	gitT(t, wt, "commit", "-q", "-a", "-m", "kbuild: a roomier System.map\n\nSigned-off-by: t <t@example.org>")
	mbox := filepath.Join(e.dir, "series.mbox")
	if err := os.WriteFile(mbox, []byte(gitT(t, wt, "format-patch", "--stdout", "-1")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.start()
	// The CLI opens the database: not while serve creates it.
	e.waitFor("the dashboard", 30*time.Second, func() (bool, string) {
		resp, err := http.Get("http://" + e.addr + "/")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return true, ""
	})
	if out := e.rdmabot("test", "--mbox", mbox); !strings.Contains(out, "test 1: ") {
		t.Fatalf("test: %s", out)
	}
	e.waitFor("BUILD_FAILED", 3*time.Minute, func() (bool, string) {
		status := e.rdmabot("status")
		return strings.Contains(status, "BUILD_FAILED"), status
	})
	if page := httpGet(t, "http://"+e.addr+"/tests/1"); !strings.Contains(page, "System.map is a sparse file: 629145600 bytes long") {
		t.Errorf("the test's page does not say why the series' kernel was refused:\n%s", page)
	}
	if n := allocated(filepath.Join(cache, "kbuild", "store")); n > 3<<20 {
		t.Errorf("kbuild's store holds %d bytes", n)
	}
	for _, d := range []string{oldArt, oldKb} {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s: the least recently used kernel is still there", d)
		}
	}
	for _, d := range []string{keptArt, keptKb} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the newer old kernel: %v", err)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(cache, "artifacts"))
	var built []string
	for _, en := range ents {
		if en.Name() != filepath.Base(keptArt) {
			built = append(built, en.Name())
		}
	}
	if len(built) != 1 || !strings.HasPrefix(built[0], "local-") {
		t.Errorf("artifact directory: %v besides the kept kernel, want the base alone", built)
	}
	if n := allocated(filepath.Join(cache, "artifacts")); n > 3<<20 {
		t.Errorf("artifact directory %d bytes, bound 3 MiB", n)
	}
	if !strings.Contains(e.log(), "artifact store pruned") {
		t.Errorf("serve.log does not say what was pruned:\n%s", e.log())
	}
}
