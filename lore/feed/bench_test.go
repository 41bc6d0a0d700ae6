package feed

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// BenchmarkGitCorpusVsCatFile reads every message of the 2024 linux-rdma
// archive through the git source and, in the same iteration, the same
// blobs through `git cat-file --batch` (fed "<commit>:m" so git too goes
// commit -> tree -> blob; its rev-list is done once, outside the timing,
// which favours git slightly). It reports both and their ratio, in wall
// time and in CPU time (user+system: this process's own for go-git, the
// child's for git), the second being steadier on a shared machine.
func BenchmarkGitCorpusVsCatFile(b *testing.B) {
	corpus := sharedCorpus(b, "linux-rdma-2024.git")
	// The corpus copy has no refs/ directory, which git (unlike go-git)
	// insists on: borrow its objects through an alternates file.
	gitDir := b.TempDir()
	run := func(stdin io.Reader, args ...string) []byte {
		cmd := testenv.GitCmd("", nil, append([]string{"--git-dir", gitDir}, args...)...)
		cmd.Stdin = stdin
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("git %v: %v", args, err)
		}
		return out
	}
	if out, err := testenv.GitCmd("", nil, "init", "-q", "--bare", gitDir).CombinedOutput(); err != nil {
		b.Fatalf("git init: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(gitDir, "objects", "info", "alternates"), []byte(filepath.Join(corpus, "objects")+"\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	packed, err := os.ReadFile(filepath.Join(corpus, "packed-refs"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gitDir, "packed-refs"), packed, 0o644); err != nil {
		b.Fatal(err)
	}
	var specs strings.Builder
	for _, c := range strings.Fields(string(run(nil, "rev-list", "--reverse", "refs/heads/master"))) {
		specs.WriteString(c + ":m\n")
	}

	src := &Git{List: "linux-rdma", Dir: corpus}
	var goGit, catFile, goCPU, catCPU time.Duration
	var msgs, goBytes, catBytes int
	for b.Loop() {
		t0, cpu0 := time.Now(), selfCPU(b)
		msgs, goBytes = 0, 0
		if _, err := src.Read(context.Background(), "", func(it Item) error {
			msgs++
			goBytes += len(it.Raw)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		t1, cpu1 := time.Now(), selfCPU(b)
		var cpu time.Duration
		catBytes, cpu = catFileBatch(b, gitDir, specs.String())
		goGit += t1.Sub(t0)
		catFile += time.Since(t1)
		goCPU += cpu1 - cpu0
		catCPU += cpu
	}
	if goBytes != catBytes {
		b.Fatalf("go-git read %d bytes, cat-file %d", goBytes, catBytes)
	}
	n := float64(b.N)
	b.ReportMetric(goGit.Seconds()/n, "gogit-s/op")
	b.ReportMetric(catFile.Seconds()/n, "catfile-s/op")
	b.ReportMetric(goGit.Seconds()/catFile.Seconds(), "gogit/catfile")
	b.ReportMetric(goCPU.Seconds()/catCPU.Seconds(), "cpu-gogit/catfile")
	b.ReportMetric(float64(msgs)*n/goGit.Seconds(), "msgs/s")
	b.Logf("%d messages, %d MB: go-git source %.2fs (CPU %.2fs), git cat-file --batch %.2fs (CPU %.2fs); ratio %.2f wall, %.2f CPU",
		msgs, goBytes>>20, goGit.Seconds()/n, goCPU.Seconds()/n, catFile.Seconds()/n, catCPU.Seconds()/n,
		goGit.Seconds()/catFile.Seconds(), goCPU.Seconds()/catCPU.Seconds())
}

// selfCPU is the user+system time this process has used.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// catFileBatch reads every object named in specs through one
// `git cat-file --batch` and returns the content bytes read and the CPU
// time git used.
func catFileBatch(b *testing.B, gitDir, specs string) (int, time.Duration) {
	cmd := testenv.GitCmd("", nil, "--git-dir", gitDir, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(specs)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	br := bufio.NewReaderSize(out, 1<<20)
	total := 0
	for {
		hdr, err := br.ReadString('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(hdr)
		if len(f) != 3 {
			b.Fatalf("cat-file: %q", hdr)
		}
		size, err := strconv.Atoi(f[2])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := br.Discard(size + 1); err != nil {
			b.Fatal(err)
		}
		total += size
	}
	if err := cmd.Wait(); err != nil {
		b.Fatal(fmt.Errorf("cat-file: %w", err))
	}
	return total, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}
