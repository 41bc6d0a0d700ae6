package builder

import (
	"archive/tar"
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// BenchmarkImportTarball imports the tarball RDMABOT_TEST_TARBALL names
// (/usr/src/linux-source-6.12.tar.xz) with the builder and with git
// fast-import fed the same files, and reports both times, their ratio,
// and whether the trees agree.
//
//	RDMABOT_TEST_TARBALL=/usr/src/linux-source-6.12.tar.xz \
//	  go test -run '^$' -bench ImportTarball -benchtime 1x -timeout 30m ./builder
func BenchmarkImportTarball(b *testing.B) {
	tarball := os.Getenv("RDMABOT_TEST_TARBALL")
	if tarball == "" {
		b.Skip("RDMABOT_TEST_TARBALL unset: set it to /usr/src/linux-source-6.12.tar.xz (Debian package linux-source-6.12)")
	}
	testenv.HoldHeavyLock(b)
	var ours, theirs time.Duration
	for i := range b.N {
		dir := b.TempDir()
		start := time.Now()
		st, err := OpenStore(filepath.Join(dir, fmt.Sprint("ours", i)))
		if err != nil {
			b.Fatal(err)
		}
		imp, err := st.ImportTarball(context.Background(), tarball, "local", testIdentity)
		if err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)

		start = time.Now()
		tree := fastImport(b, filepath.Join(dir, fmt.Sprint("theirs", i)), tarball)
		theirs += time.Since(start)
		if tree != imp.Tree.String() {
			b.Fatalf("tree %s, git fast-import %s", imp.Tree, tree)
		}
	}
	b.ReportMetric(ours.Seconds()/float64(b.N), "builder-s/op")
	b.ReportMetric(theirs.Seconds()/float64(b.N), "fast-import-s/op")
	b.ReportMetric(float64(theirs)/float64(ours), "x-faster")
}

// fastImport streams the tarball's files into git fast-import (top
// directory stripped, as the builder does) and returns the tree id.
func fastImport(b *testing.B, gitDir, tarball string) string {
	gitT(b, filepath.Dir(gitDir), "init", "-q", "--bare", gitDir)
	xz := exec.Command("xz", "-dc", tarball)
	tarOut, err := xz.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	fi := testenv.GitCmd("", nil, "--git-dir", gitDir, "fast-import", "--quiet")
	fiIn, err := fi.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	fi.Stderr = os.Stderr
	if err := xz.Start(); err != nil {
		b.Fatal(err)
	}
	if err := fi.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(fiIn, 1<<20)
	tr := tar.NewReader(tarOut)
	var files []string
	mark := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		_, rest, _ := strings.Cut(h.Name, "/")
		var mode string
		var data []byte
		switch h.Typeflag {
		case tar.TypeReg:
			mode = "100644"
			if h.Mode&0o100 != 0 {
				mode = "100755"
			}
			if data, err = io.ReadAll(tr); err != nil {
				b.Fatal(err)
			}
		case tar.TypeSymlink:
			mode, data = "120000", []byte(h.Linkname)
		default:
			continue
		}
		mark++
		fmt.Fprintf(w, "blob\nmark :%d\ndata %d\n", mark, len(data))
		w.Write(data)
		w.WriteString("\n")
		files = append(files, fmt.Sprintf("M %s :%d %s\n", mode, mark, rest))
	}
	fmt.Fprintf(w, "commit refs/heads/import\ncommitter rdmabot <rdmabot@localhost> 0 +0000\ndata 7\nimport\n")
	for _, f := range files {
		w.WriteString(f)
	}
	w.WriteString("\n")
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	fiIn.Close()
	if err := fi.Wait(); err != nil {
		b.Fatal(err)
	}
	if err := xz.Wait(); err != nil {
		b.Fatal(err)
	}
	return gitT(b, gitDir, "rev-parse", "refs/heads/import^{tree}")
}
