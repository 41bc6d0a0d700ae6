package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/pitest"
	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/lore/feed"
)

// threadsDir returns ../shared/corpus/threads or skips.
func threadsDir(t *testing.T) string {
	t.Helper()
	return testenv.Shared(t, "no real threads to scan", "corpus", "threads")
}

func TestLoreScanEMLDirAndMbox(t *testing.T) {
	dir := threadsDir(t)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"lore", "scan", "--eml-dir", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	text := out.String()
	for _, want := range []string{
		"v2 12/12 complete: NFSD RDMA transport improvements",
		"patch 1: Acked-by: Dennis Dalessandro <dennis.dalessandro@cornelisnetworks.com>",
		"matched include/linux/sunrpc/svc_rdma.h net/sunrpc/xprtrdma/svc_rdma_rw.c",
		"80 messages read, 0 skipped; 7 series (7 complete, 5 touching lore.paths)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}

	// The same thread as an mbox, as lore's t.mbox.gz would give it.
	files, _ := filepath.Glob(filepath.Join(dir, "qib-truncation-2024", "*.eml"))
	var mbox bytes.Buffer
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mbox.WriteString("From mboxrd@z Thu Jan  1 00:00:00 1970\n")
		mbox.Write(raw)
		mbox.WriteString("\n")
	}
	path := filepath.Join(t.TempDir(), "qib.mbox")
	if err := os.WriteFile(path, mbox.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run(context.Background(), []string{"lore", "scan", "--mbox", path, "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		Series []struct {
			Subject  string `json:"subject"`
			Complete bool   `json:"complete"`
			Patches  []struct {
				Trailers []struct{ Name, Value string } `json:"trailers"`
			} `json:"patches"`
			Applied []struct{} `json:"applied"`
		} `json:"series"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(got.Series) != 1 || !got.Series[0].Complete || len(got.Series[0].Patches) != 2 ||
		len(got.Series[0].Patches[1].Trailers) != 1 || len(got.Series[0].Applied) != 1 {
		t.Errorf("mbox scan: %s", out.String())
	}
}

func TestLoreScanUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"lore", "scan", "--git", "a", "--mbox", "b"}, &out, &errb); code != 2 {
		t.Errorf("two sources: exit %d, want 2", code)
	}
	if code := run(context.Background(), []string{"lore", "scan", "--imap", "http://x/y"}, &out, &errb); code != 2 {
		t.Errorf("bad imap URL: exit %d, want 2", code)
	}
}

func TestIMAPSourceURL(t *testing.T) {
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	src, err := imapSource("imap://anon:pw@127.0.0.1:11143/org.kernel.vger.linux-rdma.0", "linux-rdma", e)
	if err != nil {
		t.Fatal(err)
	}
	s := src.(*feed.IMAP)
	if s.Addr != "127.0.0.1:11143" || s.Newsgroup != "org.kernel.vger.linux-rdma" || s.TLS || s.User != "anon" || s.Password != "pw" {
		t.Errorf("%+v", s)
	}
	src, err = imapSource("imaps://lore.example/org.kernel.vger.linux-nfs", "linux-nfs", e)
	if err != nil {
		t.Fatal(err)
	}
	if s := src.(*feed.IMAP); s.Addr != "lore.example:993" || !s.TLS {
		t.Errorf("%+v", s)
	}
}

// TestLoreScanPublicInbox serves the real threads from a real
// public-inbox (git epochs and imapd) and scans it over IMAP and as a
// git archive: both must see what the .eml files show.
func TestLoreScanPublicInbox(t *testing.T) {
	dir := threadsDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.eml"))
	var mails [][]byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mails = append(mails, raw)
	}
	srv := pitest.Start(t, pitest.Inbox{Name: "linux-rdma", Messages: mails})

	summary := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(context.Background(), append([]string{"lore", "scan"}, args...), &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		last := lines[len(lines)-1]
		// Drop the timing: "... in 71ms".
		return last[:strings.LastIndex(last, " in ")]
	}
	want := "80 messages read, 0 skipped; 7 series (7 complete, 5 touching lore.paths)"
	if got := summary("--eml-dir", dir); got != want {
		t.Fatalf("eml-dir: %q, want %q", got, want)
	}
	if got := summary("--imap", "imap://"+srv.IMAPAddr+"/"+srv.Mailbox("linux-rdma")); got != want {
		t.Errorf("imap: %q, want %q", got, want)
	}
	if got := summary("--git", srv.InboxDir("linux-rdma")); got != want {
		t.Errorf("git: %q, want %q", got, want)
	}
}
