package builder

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/go-git/go-git/v5/plumbing/object"
)

var testIdentity = Identity{Name: "rdmabot", Email: "rdmabot@localhost"}

// TestImportTarballMatchesGit imports a small kernel-like tarball and
// checks the tree is the one git itself records for the extracted files
// (git add -f: the tarball's .gitignore ignores everything), and that the
// pack passes git fsck.
func TestImportTarballMatchesGit(t *testing.T) {
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src", "linux-source-6.12")
	writeFile(t, filepath.Join(src, ".gitignore"), "/*\n", 0o644)
	writeFile(t, filepath.Join(src, "Makefile"), "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 117\nEXTRAVERSION =\n", 0o644)
	writeFile(t, filepath.Join(src, "scripts", "config"), "#!/bin/sh\n", 0o755)
	writeFile(t, filepath.Join(src, "net", "sunrpc", "xprtrdma", "svc_rdma.c"), "int x;\n", 0o644)
	writeFile(t, filepath.Join(src, "net", "sunrpc", "xprtrdma.c"), "sorts before the directory in git\n", 0o644)
	writeFile(t, filepath.Join(src, "empty"), "", 0o644)
	if err := os.MkdirAll(filepath.Join(src, "emptydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../net/sunrpc", filepath.Join(src, "scripts", "link")); err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(tmp, "linux.tar.gz")
	if out, err := runCmd(filepath.Join(tmp, "src"), "tar", "-czf", tarball, "linux-source-6.12"); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}

	st, err := OpenStore(filepath.Join(tmp, "store.git"))
	if err != nil {
		t.Fatal(err)
	}
	imp, err := st.ImportTarball(context.Background(), tarball, "local", testIdentity)
	if err != nil {
		t.Fatal(err)
	}
	if imp.Files != 7 || imp.Version != "6.12.117" || imp.Tag != "refs/tags/local/v6.12.117" {
		t.Errorf("import = %+v, want 7 files, version 6.12.117", imp)
	}

	gitT(t, src, "init", "-q")
	gitT(t, src, "add", "-f", "-A", ".")
	want := gitT(t, src, "write-tree")
	if imp.Tree.String() != want {
		t.Errorf("tree %s, git write-tree %s", imp.Tree, want)
	}
	gitT(t, st.Dir, "fsck", "--strict", "--no-dangling")
	if got := gitT(t, st.Dir, "rev-parse", "refs/trees/local/import", "refs/tags/local/v6.12.117"); got != imp.Commit.String()+"\n"+imp.Commit.String() {
		t.Errorf("refs point at %q, want %s", got, imp.Commit)
	}
	bs, err := st.Branches()
	if err != nil || len(bs) != 1 || bs[0].Tree != "local" || bs[0].Branch != "import" {
		t.Errorf("Branches() = %+v, %v", bs, err)
	}

	// The same tarball gives the same commit.
	again, err := st.ImportTarball(context.Background(), tarball, "local", testIdentity)
	if err != nil || again.Commit != imp.Commit {
		t.Errorf("second import %v %v, want commit %s", again, err, imp.Commit)
	}
}

func TestImportTarballRefusesEscapes(t *testing.T) {
	tmp := t.TempDir()
	writeFile(t, filepath.Join(tmp, "top", "ok"), "x\n", 0o644)
	writeFile(t, filepath.Join(tmp, "other", "f"), "x\n", 0o644)
	tarball := filepath.Join(tmp, "bad.tar")
	if out, err := runCmd(tmp, "tar", "-cf", tarball, "top", "other"); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	st, err := OpenStore(filepath.Join(tmp, "store.git"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.ImportTarball(context.Background(), tarball, "x", testIdentity)
	if err == nil || !strings.Contains(err.Error(), "outside the top-level directory") {
		t.Fatalf("err = %v, want outside the top-level directory", err)
	}
	packs, _ := filepath.Glob(filepath.Join(st.Dir, "objects", "pack", "*"))
	if len(packs) != 0 {
		t.Errorf("a refused import left %v", packs)
	}
	if _, err := st.ImportTarball(context.Background(), tarball, "../x", testIdentity); err == nil {
		t.Error("tree name ../x accepted")
	}
}

// TestImportedTree checks the real import of linux-source-6.12 that
// RDMABOT_TEST_TREE names (rdmabot tree import prints it).
func TestImportedTree(t *testing.T) {
	st, base := testTree(t)
	c, err := st.Resolve(base)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := c.Tree()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	w := object.NewTreeWalker(tree, true, nil)
	defer w.Close()
	for {
		_, e, err := w.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Mode != filemode.Dir {
			n++
		}
	}
	if n < 80000 {
		t.Errorf("%s has %d files, a kernel tree has more than 80,000", base, n)
	}
}

// A tar stream may go on past its end-of-archive blocks: tar pads to its
// blocking factor, and more zeros after that are still a valid archive.
// Debian's 6.12 tarball was refused once on a busy machine ("xz: signal:
// broken pipe") because the import stopped reading at the end marker
// while xz still wrote the padding. The import reads the stream to its
// end, so xz also checks the whole stream's integrity; a stream that is
// damaged after the archive is still refused.
func TestImportTarballReadsPastTheEndMarker(t *testing.T) {
	if _, err := exec.LookPath("xz"); err != nil {
		t.Skip("xz not installed")
	}
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src", "linux-source-6.12")
	writeFile(t, filepath.Join(src, "Makefile"), "VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 117\nEXTRAVERSION =\n", 0o644)
	plain := filepath.Join(tmp, "linux.tar")
	if out, err := runCmd(filepath.Join(tmp, "src"), "tar", "-cf", plain, "linux-source-6.12"); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	// 4 MiB of zeros after the archive: far more than a pipe holds.
	f, err := os.OpenFile(plain, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 4<<20))
	f.Close()
	if out, err := runCmd(tmp, "xz", "-k", "-0", plain); err != nil {
		t.Fatalf("xz: %v\n%s", err, out)
	}
	st, err := OpenStore(filepath.Join(tmp, "store.git"))
	if err != nil {
		t.Fatal(err)
	}
	if imp, err := st.ImportTarball(context.Background(), plain+".xz", "local", testIdentity); err != nil || imp.Files != 1 {
		t.Fatalf("a padded tarball: %+v %v", imp, err)
	}
	// The same stream cut short inside the padding: xz's check fails.
	xzb, _ := os.ReadFile(plain + ".xz")
	cut := filepath.Join(tmp, "cut.tar.xz")
	os.WriteFile(cut, xzb[:len(xzb)-8], 0o644)
	if _, err := st.ImportTarball(context.Background(), cut, "cut", testIdentity); err == nil || !strings.Contains(err.Error(), "xz") {
		t.Errorf("a truncated xz stream: %v", err)
	}
}
