package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		"80 messages read, 0 skipped, 0 unreadable; 7 series (7 complete, 5 touching lore.paths)",
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

// TestLoreScanFormatPatchMbox scans what `git format-patch --stdout`
// writes: every From line has git's fixed date (2001-09-17), and the
// series is dated by its mails' Date headers all the same.
func TestLoreScanFormatPatchMbox(t *testing.T) {
	var mbox strings.Builder
	for i := 1; i <= 2; i++ {
		fmt.Fprintf(&mbox, "From 0123456789abcdef0123456789abcdef0123456%d Mon Sep 17 00:00:00 2001\n"+
			"From: Dev One <dev@example.org>\nDate: Wed, 10 Sep 2025 14:49:2%d -0700\nSubject: [PATCH %d/2] RDMA/core: step %d\n"+
			"Message-Id: <fp%d@example.org>\n\nStep.\n\nSigned-off-by: Dev One <dev@example.org>\n---\n"+
			"diff --git a/drivers/infiniband/core/cma.c b/drivers/infiniband/core/cma.c\n"+
			"--- a/drivers/infiniband/core/cma.c\n+++ b/drivers/infiniband/core/cma.c\n@@ -1 +1 @@\n-a\n+b\n-- \n2.51.0\n\n", i, i, i, i, i)
	}
	path := filepath.Join(t.TempDir(), "series.mbox")
	if err := os.WriteFile(path, []byte(mbox.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"lore", "scan", "--mbox", path}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	want := "v1 2/2 complete: RDMA/core: step 1\n  author \"Dev One\" <dev@example.org>, 2025-09-10 21:49Z,"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
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
	want := "80 messages read, 0 skipped, 0 unreadable; 7 series (7 complete, 5 touching lore.paths)"
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

// TestLoreScanGitBadObjects scans a public-inbox inbox (git/0.git, one
// commit per message, blob m) built here with git, in which one
// message's blob was deleted from the object store, one is not mail at
// all, one is over the size cap and one has a header that cannot be
// read: the scan reads the rest, counts each and exits 0.
func TestLoreScanGitBadObjects(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed: cannot build the archive")
	}
	inbox := t.TempDir()
	gitDir := filepath.Join(inbox, "git", "0.git")
	tick := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	git := func(stdin string, args ...string) string {
		t.Helper()
		cmd := testenv.GitCmd("", nil, append([]string{"--git-dir", gitDir}, args...)...)
		date := tick.Format(time.RFC3339)
		cmd.Env = append(cmd.Env, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=inbox",
			"GIT_COMMITTER_EMAIL=list@example.org", "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date, "GIT_CONFIG_GLOBAL=/dev/null")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out, err := testenv.GitCmd("", nil, "init", "-q", "--bare", "-b", "master", gitDir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	parent := ""
	add := func(mail string) string {
		tick = tick.Add(time.Minute)
		blob := git(mail, "hash-object", "-w", "--stdin")
		tree := git("100644 blob "+blob+"\tm\n", "mktree")
		args := []string{"commit-tree", tree, "-m", "msg"}
		if parent != "" {
			args = append(args, "-p", parent)
		}
		parent = git("", args...)
		git("", "update-ref", "refs/heads/master", parent)
		return blob
	}
	patch := func(n int, irt string) string {
		h := fmt.Sprintf("From: Dev One <dev@example.org>\nTo: linux-rdma@vger.kernel.org\nSubject: [PATCH %d/2] RDMA/core: step %d\n"+
			"Message-ID: <p%d@example.org>\nDate: Sat, 1 Jun 2024 12:0%d:00 +0000\n", n, n, n, n)
		if irt != "" {
			h += "In-Reply-To: <" + irt + ">\n"
		}
		return h + "\nStep.\n\nSigned-off-by: Dev One <dev@example.org>\n---\ndiff --git a/drivers/infiniband/core/cma.c b/drivers/infiniband/core/cma.c\n" +
			"--- a/drivers/infiniband/core/cma.c\n+++ b/drivers/infiniband/core/cma.c\n@@ -1 +1 @@\n-a\n+b\n"
	}
	add(patch(1, ""))
	lost := add("From: Dev Two <two@example.org>\nSubject: [PATCH] lost\nMessage-ID: <lost@example.org>\n\nbody\n")
	add("this is not a mail header\n\nbody\n")
	add("From: x@example.org\nSubject: big\nMessage-ID: <big@example.org>\n\n" + strings.Repeat("x", 11<<20))
	add(patch(2, "p1@example.org"))
	if err := os.Remove(filepath.Join(gitDir, "objects", lost[:2], lost[2:])); err != nil {
		t.Fatal(err)
	}

	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"lore", "scan", "--git", inbox}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	text := out.String()
	for _, want := range []string{
		"v1 2/2 complete: RDMA/core: step 1",
		"2 messages read, 2 skipped, 1 unreadable; 1 series (1 complete, 1 touching lore.paths)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s\nstderr:\n%s", want, text, errb.String())
		}
	}
	if !strings.Contains(errb.String(), lost) {
		t.Errorf("the missing blob %s is not in the log:\n%s", lost, errb.String())
	}

	// The JSON counts them too: a reader of it alone must know.
	out.Reset()
	if code := run(context.Background(), []string{"lore", "scan", "--git", inbox, "--json"}, &out, &errb); code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errb.String())
	}
	var scan struct {
		Series   []struct{} `json:"series"`
		Messages struct {
			Read, Skipped, Unreadable int
		} `json:"messages"`
	}
	if err := json.Unmarshal(out.Bytes(), &scan); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(scan.Series) != 1 || scan.Messages.Read != 2 || scan.Messages.Skipped != 2 || scan.Messages.Unreadable != 1 {
		t.Errorf("--json: %d series, messages %+v, want 1 and 2 read, 2 skipped, 1 unreadable:\n%s", len(scan.Series), scan.Messages, out.String())
	}
}

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestLoreScanArchive2024Golden scans both real 2024 archives (6,263 and
// 8,008 messages) as `rdmabot lore scan --git` does and compares each
// list's summary and a digest of everything printed with the golden
// file: a change to reading or streaming (the window, the pack reader)
// must not change one printed series. Run with -update after a change
// that means to alter the output, and say why in the commit. It skips,
// saying so, where ../shared does not hold the archives.
func TestLoreScanArchive2024Golden(t *testing.T) {
	var got strings.Builder
	for _, list := range []string{"linux-rdma", "linux-nfs"} {
		dir := testenv.Shared(t, "the 2024 archives are not on this machine", "corpus", list+"-2024.git")
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"lore", "scan", "--git", dir, "--list", list}, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", list, code, errb.String())
		}
		text := strings.TrimSuffix(out.String(), "\n")
		i := strings.LastIndex(text, "\n")
		body, last := text[:i+1], text[i+1:]
		sum := sha256.Sum256([]byte(body))
		fmt.Fprintf(&got, "%s: %s; output sha256 %x\n", list, last[:strings.LastIndex(last, " in ")], sum)
	}
	testenv.Golden(t, filepath.Join("testdata", "lore-scan-2024.golden"), []byte(got.String()), *updateGolden)
}
