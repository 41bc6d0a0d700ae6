package lore_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/lore/feed"
)

// corpusDir returns ../shared/corpus/<name> or skips.
func corpusDir(b *testing.B, name string) string {
	return testenv.Shared(b, "the 2024 archives are not on this machine", "corpus", name)
}

// cpuTime is the CPU time this process has used: on a machine shared
// with builds, wall time says more about the neighbours than about us.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readArchive reads every message of a public-inbox epoch with lore/feed.
func readArchive(b *testing.B, list, dir string) ([]feed.Item, time.Duration) {
	b.Helper()
	t0 := cpuTime()
	var items []feed.Item
	src := &feed.Git{List: list, Dir: dir}
	if _, err := src.Read(context.Background(), "", func(it feed.Item) error {
		items = append(items, it)
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return items, cpuTime() - t0
}

func assembleItems(b *testing.B, items []feed.Item) *lore.Assembly {
	cfg := lore.DefaultConfig()
	a, err := lore.NewAssembler(cfg.Assembler(nil))
	if err != nil {
		b.Fatal(err)
	}
	for _, it := range items {
		if it.Deleted {
			_ = a.ForgetRaw(it.Raw)
			continue
		}
		if err := a.AddRaw(it.Raw, it.Received); err != nil {
			b.Logf("%s: %v", it.Pos, err)
		}
	}
	return a.Assemble()
}

// BenchmarkArchive2024 reads and assembles the whole 2024 linux-rdma
// archive (6,263 messages): the git read through lore/feed, then parsing
// and assembly. In the same run it measures two peers: git cat-file
// --batch reading the same blobs (the floor for the raw read), and b4 am
// on one real thread against our parse+assemble of that thread. It then
// counts the 2024 series of both lists that touch the default paths.
// Run: go test ./lore -run '^$' -bench Archive2024 -benchtime 3x -cpu 1
func BenchmarkArchive2024(b *testing.B) {
	rdma := corpusDir(b, "linux-rdma-2024.git")
	items, readDur := readArchive(b, "linux-rdma", rdma)
	var asm *lore.Assembly
	var work time.Duration
	for b.Loop() {
		t0 := cpuTime()
		asm = assembleItems(b, items)
		work += cpuTime() - t0
	}
	per := work / time.Duration(b.N)
	n := float64(len(items))
	total := readDur + per
	b.ReportMetric(n/per.Seconds(), "msgs/cpu-s")
	b.ReportMetric(total.Seconds(), "read+assemble-cpu-s")
	b.ReportMetric(float64(len(asm.Series)), "series")
	b.Logf("linux-rdma 2024, CPU time: %d messages, %d series; read (lore/feed, go-git) %s, parse+assemble %s (%.0f msgs/s), total %s (%.0f msgs/s; target < 2s)",
		len(items), len(asm.Series), readDur.Round(time.Millisecond), per.Round(time.Millisecond), n/per.Seconds(), total.Round(time.Millisecond), n/total.Seconds())

	if cat, ok := catFilePeer(b, rdma); ok {
		b.Logf("peer git cat-file --batch, raw read of the same blobs: %s CPU; our read %.2fx, our read+parse+assemble %.2fx of it",
			cat.Round(time.Millisecond), readDur.Seconds()/cat.Seconds(), total.Seconds()/cat.Seconds())
	}
	b4Peer(b)

	nfsItems, _ := readArchive(b, "linux-nfs", corpusDir(b, "linux-nfs-2024.git"))
	for _, l := range []struct {
		name string
		asm  *lore.Assembly
		msgs int
	}{{"linux-rdma", asm, len(items)}, {"linux-nfs", assembleItems(b, nfsItems), len(nfsItems)}} {
		rel, relComplete := 0, 0
		for _, s := range l.asm.Series {
			if s.Relevant() {
				rel++
				if s.Complete {
					relComplete++
				}
			}
		}
		b.Logf("%s 2024: %d messages, %d series, %d touch the default paths (%d complete)", l.name, l.msgs, len(l.asm.Series), rel, relComplete)
	}
}

// catFilePeer times git cat-file --batch over "<commit>:m" for every
// commit (rev-list outside the timing, which favours git).
func catFilePeer(b *testing.B, corpus string) (time.Duration, bool) {
	run, ok := catFileRunner(b, corpus)
	if !ok {
		return 0, false
	}
	return run(), true
}

// catFileRunner prepares the cat-file peer once and returns what runs
// it, so a benchmark can alternate it with its own work: one peer run
// varies by a tenth, and a machine's speed drifts over a benchmark.
func catFileRunner(b *testing.B, corpus string) (func() time.Duration, bool) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Log("git not installed: no cat-file peer")
		return nil, false
	}
	// The corpus copy has no refs/ directory, which git insists on:
	// borrow its objects through alternates.
	gitDir := b.TempDir()
	if out, err := testenv.GitCmd("", nil, "init", "-q", "--bare", gitDir).CombinedOutput(); err != nil {
		b.Fatalf("git init: %v %s", err, out)
	}
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(gitDir, "objects", "info", "alternates"), []byte(filepath.Join(corpus, "objects")+"\n"), 0o644))
	packed, err := os.ReadFile(filepath.Join(corpus, "packed-refs"))
	must(err)
	must(os.WriteFile(filepath.Join(gitDir, "packed-refs"), packed, 0o644))
	revs, err := testenv.GitCmd("", nil, "--git-dir", gitDir, "rev-list", "--all").Output()
	must(err)
	var specs strings.Builder
	for _, c := range strings.Fields(string(revs)) {
		specs.WriteString(c + ":m\n")
	}
	return func() time.Duration {
		cmd := testenv.GitCmd("", nil, "--git-dir", gitDir, "cat-file", "--batch")
		cmd.Stdin = strings.NewReader(specs.String())
		cmd.Stdout = io.Discard
		must(cmd.Run())
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}, true
}

// b4Peer times b4 am on the svcrdma v2 thread (13 messages) against our
// parse and assembly of the same messages.
func b4Peer(b *testing.B) {
	b4, err := exec.LookPath("b4")
	if err != nil {
		b.Log("b4 not installed: no b4 peer")
		return
	}
	threads := filepath.Join(filepath.Dir(corpusDir(b, "linux-rdma-2024.git")), "threads", "svcrdma-v2")
	files, _ := filepath.Glob(filepath.Join(threads, "*.eml"))
	if len(files) == 0 {
		b.Log("no svcrdma-v2 thread: no b4 peer")
		return
	}
	var raws [][]byte
	var mbox bytes.Buffer
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		raws = append(raws, raw)
		mbox.WriteString("From mboxrd@z Thu Jan  1 00:00:00 1970\n")
		mbox.Write(unfoldHeaders(raw))
		mbox.WriteString("\n")
	}
	home, out := b.TempDir(), b.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[user]\n\tname = t\n\temail = t@example.invalid\n[b4]\n\tattestation-policy = off\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	mboxPath := filepath.Join(home, "t.mbox")
	if err := os.WriteFile(mboxPath, mbox.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(b4, "--offline-mode", "am", "-m", mboxPath, "-o", out, "170708844422.28128.2979813721958631192.stgit@bazille.1015granger.net")
	cmd.Env = append(cmd.Env, "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
	if log, err := cmd.CombinedOutput(); err != nil {
		b.Logf("b4 am failed, no b4 peer: %v\n%s", err, log)
		return
	}
	b4Dur := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	const rounds = 100
	t0 := cpuTime()
	for range rounds {
		a, _ := lore.NewAssembler(lore.AssemblerConfig{})
		for _, raw := range raws {
			if err := a.AddRaw(raw, time.Time{}); err != nil {
				b.Fatal(err)
			}
		}
		a.Assemble()
	}
	ours := (cpuTime() - t0) / rounds
	b.Logf("peer b4 am on the %d-message svcrdma v2 thread: %s CPU (process start included); our parse+assemble of it: %s CPU (%.0fx less)",
		len(raws), b4Dur.Round(time.Millisecond), ours.Round(time.Microsecond), b4Dur.Seconds()/ours.Seconds())
}

// unfoldHeaders joins folded Subject lines, which b4 0.12 cannot read.
func unfoldHeaders(raw []byte) []byte {
	end := bytes.Index(raw, []byte("\n\n"))
	if end < 0 {
		return raw
	}
	var out []string
	inSubject := false
	for _, l := range strings.Split(string(raw[:end]), "\n") {
		if inSubject && (strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")) {
			out[len(out)-1] += " " + strings.TrimLeft(l, " \t")
			continue
		}
		inSubject = strings.HasPrefix(strings.ToLower(l), "subject:")
		out = append(out, l)
	}
	return append([]byte(strings.Join(out, "\n")), raw[end:]...)
}

// scanArchive is what `rdmabot lore scan --git` does, without printing:
// read every message through feed.Pump, parse, assemble and flush the
// settled series with a 30-day window.
func scanArchive(b *testing.B, list, dir string) (series int, st feed.PumpStats) {
	return scanArchiveObserved(b, list, dir, nil)
}

// scanArchiveObserved is scanArchive calling flushed (when not nil)
// after every flush.
func scanArchiveObserved(b *testing.B, list, dir string, flushed func(*lore.Assembler)) (series int, st feed.PumpStats) {
	b.Helper()
	cfg := lore.DefaultConfig()
	a, err := lore.NewAssembler(cfg.Assembler(nil))
	if err != nil {
		b.Fatal(err)
	}
	stream := &lore.Stream{A: a, Window: 30 * 24 * time.Hour}
	src := &feed.Git{List: list, Dir: dir, AllEpochs: true}
	st, err = feed.Pump(context.Background(), src, &feed.MemCheckpoints{}, feed.PumpOptions{}, func(_ context.Context, it feed.Item) error {
		settled, err := stream.Add(it.Raw, it.Received, it.Deleted)
		if settled != nil {
			series += len(settled.Series)
			if flushed != nil {
				flushed(a)
			}
		}
		if err != nil {
			return feed.Skip(err)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return series + len(stream.Close().Series), st
}

// BenchmarkScanVsCatFile times the whole lore scan job on each 2024
// archive against git cat-file --batch reading the same blobs, in CPU
// time, and reports the ratio (the goal: 2x).
// Run: go test ./lore -run '^$' -bench ScanVsCatFile -benchtime 3x -cpu 1
func BenchmarkScanVsCatFile(b *testing.B) {
	for _, name := range []string{"linux-rdma", "linux-nfs"} {
		b.Run(name, func(b *testing.B) {
			dir := corpusDir(b, name+"-2024.git")
			cat, ok := catFileRunner(b, dir)
			if !ok {
				b.Skip("no git: nothing to compare with")
			}
			// Scan and peer alternate, one of each per iteration (A B A
			// B), so a drift of the machine's speed touches both alike.
			var scan, peer time.Duration
			var series int
			var st feed.PumpStats
			for b.Loop() {
				t0 := cpuTime()
				series, st = scanArchive(b, name, dir)
				scan += cpuTime() - t0
				peer += cat()
			}
			per, catPer := scan/time.Duration(b.N), peer/time.Duration(b.N)
			b.ReportMetric(per.Seconds()/catPer.Seconds(), "x-cat-file")
			b.ReportMetric(float64(st.Delivered)/per.Seconds(), "msgs/cpu-s")
			b.Logf("%s 2024: %d messages, %d series; scan %s CPU, git cat-file --batch %s CPU (means of %d each, alternated): %.2fx",
				name, st.Delivered, series, per.Round(time.Millisecond), catPer.Round(time.Millisecond), b.N, per.Seconds()/catPer.Seconds())
		})
	}
}
