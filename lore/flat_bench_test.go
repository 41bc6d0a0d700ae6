package lore_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/lore"
	"github.com/rdmabot/rdmabot/lore/feed"
)

// BenchmarkScanMemoryFlat shows that a streaming scan's memory does not
// grow with the archive. It builds public-inbox inboxes of 1, 2 and 4
// epochs, each epoch the real 2024 linux-rdma archive moved on by a year
// (arrival times and Date headers shifted, Message-IDs renamed, so the
// copies are distinct mail a year apart), scans each in a process of its
// own (this test binary again, BenchmarkScanInbox) and prints, per size,
// the messages, series, the most messages the assembler held, the
// largest live heap seen after a flush and the process's peak RSS.
// Flat figures over 1x..4x the messages are the claim; nothing is
// asserted on them. It skips, saying so, without ../shared or git.
// Run: go test ./lore -run '^$' -bench ScanMemoryFlat -benchtime 1x
func BenchmarkScanMemoryFlat(b *testing.B) {
	corpus := corpusDir(b, "linux-rdma-2024.git")
	if _, err := exec.LookPath("git"); err != nil {
		b.Skip("git not installed: cannot build the inboxes")
	}
	items, _ := readArchive(b, "linux-rdma", corpus)
	tmp := b.TempDir()
	const copies = 4
	for k := range copies {
		writeEpoch(b, filepath.Join(tmp, "epochs", fmt.Sprintf("%d.git", k)), items, k)
	}
	for b.Loop() {
		for _, n := range []int{1, 2, 4} {
			inbox := filepath.Join(tmp, fmt.Sprintf("inbox-%d", n))
			if err := os.MkdirAll(filepath.Join(inbox, "git"), 0o755); err != nil {
				b.Fatal(err)
			}
			for k := range n {
				link := filepath.Join(inbox, "git", fmt.Sprintf("%d.git", k))
				if _, err := os.Lstat(link); err != nil {
					if err := os.Symlink(filepath.Join(tmp, "epochs", fmt.Sprintf("%d.git", k)), link); err != nil {
						b.Fatal(err)
					}
				}
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkScanInbox$", "-test.benchtime=1x")
			cmd.Env = append(cmd.Env, "RDMABOT_SCAN_INBOX="+inbox)
			out, err := cmd.CombinedOutput()
			if err != nil {
				b.Fatalf("scan of %d epochs: %v\n%s", n, err, out)
			}
			m := scanLineRe.FindSubmatch(out)
			if m == nil {
				b.Fatalf("scan of %d epochs printed no figures:\n%s", n, out)
			}
			rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss >> 10 // KiB -> MiB
			cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			b.Logf("%d epoch(s): %s; peak RSS %d MB, %s CPU", n, m[1], rss, cpu.Round(10*time.Millisecond))
			if n == 4 {
				b.ReportMetric(float64(rss), "MB-rss-4x")
			}
		}
	}
}

var scanLineRe = regexp.MustCompile(`scan figures: ([^\n]*)`)

// BenchmarkScanInbox is BenchmarkScanMemoryFlat's child: it scans the
// inbox RDMABOT_SCAN_INBOX names as `rdmabot lore scan --git` does and
// prints its figures. Alone it skips.
func BenchmarkScanInbox(b *testing.B) {
	inbox := os.Getenv("RDMABOT_SCAN_INBOX")
	if inbox == "" {
		b.Skip("run by BenchmarkScanMemoryFlat (RDMABOT_SCAN_INBOX unset)")
	}
	for b.Loop() {
		var held int
		var heap uint64
		flushes := 0
		series, st := scanArchiveObserved(b, "linux-rdma", inbox, func(a *lore.Assembler) {
			held = max(held, a.Len())
			// Every tenth flush (ten archive days): the live heap after
			// a collection, which is what the scan really keeps.
			if flushes++; flushes%10 == 0 {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				heap = max(heap, ms.HeapAlloc)
			}
		})
		fmt.Printf("scan figures: %d messages, %d series, at most %d messages held, live heap at most %d MB\n",
			st.Delivered, series, held, heap>>20)
	}
}

// writeEpoch writes the messages into a new bare repository in
// public-inbox layout (one commit per message, blob m) with git
// fast-import; copy k moves them k years on and renames their ids.
func writeEpoch(b *testing.B, dir string, items []feed.Item, k int) {
	b.Helper()
	if out, err := testenv.GitCmd("", nil, "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
		b.Fatalf("git init: %v %s", err, out)
	}
	cmd := testenv.GitCmd("", nil, "--git-dir", dir, "fast-import", "--quiet")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(stdin, 1<<20)
	for _, it := range items {
		if it.Deleted || it.Err != nil {
			continue
		}
		raw := shiftMessage(it.Raw, k)
		at := it.Received.AddDate(k, 0, 0)
		fmt.Fprintf(w, "commit refs/heads/master\ncommitter A <a@example.invalid> %d +0000\ndata 0\nM 100644 inline m\ndata %d\n", at.Unix(), len(raw))
		w.Write(raw)
		w.WriteString("\n")
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatalf("git fast-import: %v %s", err, stderr.String())
	}
}

// shiftMessage renames the Message-IDs a header names (Message-ID,
// In-Reply-To, References) with the copy's prefix and moves its Date k
// years on; copy 0 is the message as it is.
func shiftMessage(raw []byte, k int) []byte {
	if k == 0 {
		return raw
	}
	end := bytes.Index(raw, []byte("\n\n"))
	if end < 0 {
		return raw
	}
	prefix := "<y" + strconv.Itoa(k) + "."
	lines := strings.Split(string(raw[:end]), "\n")
	ids := false
	for i, l := range lines {
		if l != "" && (l[0] == ' ' || l[0] == '\t') {
			if ids {
				lines[i] = strings.ReplaceAll(l, "<", prefix)
			}
			continue
		}
		name, value, _ := strings.Cut(l, ":")
		switch strings.ToLower(name) {
		case "message-id", "in-reply-to", "references":
			ids = true
			lines[i] = name + ":" + strings.ReplaceAll(value, "<", prefix)
		case "date":
			ids = false
			if t, err := mail.ParseDate(strings.TrimSpace(value)); err == nil {
				lines[i] = name + ": " + t.AddDate(k, 0, 0).Format(time.RFC1123Z)
			}
		default:
			ids = false
		}
	}
	return append([]byte(strings.Join(lines, "\n")), raw[end:]...)
}
