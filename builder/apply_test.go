package builder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/lore"
)

// pinnedNow is the committer date both git am (GIT_COMMITTER_DATE in
// gitEnv) and the builder use, so commit ids can be compared.
var pinnedNow = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)

func pinnedOptions() ApplyOptions {
	return ApplyOptions{Committer: testIdentity, Now: func() time.Time { return pinnedNow }}
}

// splitMbox cuts a git format-patch mbox into messages and parses them.
func parseMbox(t testing.TB, mbox []byte) []*flow.Message {
	t.Helper()
	var msgs []*flow.Message
	parts := bytes.Split(mbox, []byte("\nFrom "))
	for i, p := range parts {
		if i > 0 {
			p = append([]byte("From "), p...)
		}
		m, err := lore.ParseMessage(p)
		if err != nil {
			t.Fatalf("message %d: %v", i+1, err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// gitAm applies mbox with git am on a detached checkout of base in dir and
// returns the commits it made, oldest first.
func gitAm(t testing.TB, dir, base, mbox string, extra ...string) ([]string, error) {
	t.Helper()
	gitT(t, dir, "checkout", "-q", "--detach", base)
	args := append([]string{"am", "-q"}, extra...)
	if out, err := gitEnv(dir, nil, append(args, mbox)...); err != nil {
		gitEnv(dir, nil, "am", "--abort")
		return nil, errors.New(out)
	}
	return strings.Fields(gitT(t, dir, "rev-list", "--reverse", base+"..HEAD")), nil
}

// compareWithGitAm applies mboxFile with the builder and with git am on
// base and requires the same commits (hence trees, authors, messages).
func compareWithGitAm(t *testing.T, dir, base, mboxFile string, scissors bool) *Applied {
	t.Helper()
	raw, err := os.ReadFile(mboxFile)
	if err != nil {
		t.Fatal(err)
	}
	st, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Resolve(base)
	if err != nil {
		t.Fatal(err)
	}
	opts := pinnedOptions()
	opts.Scissors = scissors
	got, err := st.Apply(context.Background(), c.Hash, parseMbox(t, raw), opts)
	if err != nil {
		t.Fatalf("builder: %v", err)
	}
	var extra []string
	if scissors {
		extra = append(extra, "--scissors")
	}
	want, err := gitAm(t, dir, base, mboxFile, extra...)
	if err != nil {
		t.Fatalf("git am: %v", err)
	}
	if len(want) != len(got.Commits) {
		t.Fatalf("git am made %d commits, the builder %d", len(want), len(got.Commits))
	}
	for i := range want {
		if got.Commits[i].String() != want[i] {
			t.Errorf("patch %d: builder commit %s, git am %s\nbuilder:\n%s\ngit am:\n%s", i+1, got.Commits[i], want[i],
				gitT(t, dir, "cat-file", "-p", got.Commits[i].String()), gitT(t, dir, "cat-file", "-p", want[i]))
		}
	}
	if wantTree := gitT(t, dir, "rev-parse", "HEAD^{tree}"); got.Tree.String() != wantTree {
		t.Errorf("tree %s, git am %s", got.Tree, wantTree)
	}
	return got
}

// newCornerRepo makes a repository whose history, turned into patches,
// exercises every kind of change git am knows.
func newCornerRepo(t *testing.T) (dir string, mbox string) {
	dir = t.TempDir()
	gitT(t, dir, "init", "-q")
	var lines strings.Builder
	for i := 1; i <= 60; i++ {
		lines.WriteString("line " + strings.Repeat("x", i%7) + " " + string(rune('a'+i%26)) + "\n")
	}
	writeFile(t, filepath.Join(dir, "a.c"), lines.String(), 0o644)
	writeFile(t, filepath.Join(dir, "exec.sh"), "#!/bin/sh\necho hi\n", 0o755)
	writeFile(t, filepath.Join(dir, "bin.dat"), "\x00\x01\x02binary\x00data\n", 0o644)
	writeFile(t, filepath.Join(dir, "noeol.txt"), "one\ntwo\nthree", 0o644)
	writeFile(t, filepath.Join(dir, "dir", "sub", "x.c"), lines.String()+"x only\n", 0o644)
	writeFile(t, filepath.Join(dir, "gone", "only.c"), "deleted with its directory\n", 0o644)
	if err := os.Symlink("a.c", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "base")
	gitT(t, dir, "tag", "base")

	commit := func(msg string) { gitT(t, dir, "add", "-A"); gitT(t, dir, "commit", "-q", "-m", msg) }
	// 1: rename with an edit, and a copy with an edit.
	b, _ := os.ReadFile(filepath.Join(dir, "a.c"))
	os.Remove(filepath.Join(dir, "a.c"))
	writeFile(t, filepath.Join(dir, "b.c"), strings.Replace(string(b), "line xx e\n", "line xx E renamed\n", 1), 0o644)
	x, _ := os.ReadFile(filepath.Join(dir, "dir", "sub", "x.c"))
	writeFile(t, filepath.Join(dir, "dir", "sub", "y.c"), strings.Replace(string(x), "x only\n", "y only\n", 1), 0o644)
	os.Remove(filepath.Join(dir, "link"))
	os.Symlink("b.c", filepath.Join(dir, "link"))
	commit("core: rename a.c to b.c, copy x.c to y.c\n\nThe body explains why.\n\n---\nthis line is not a patch break in a commit message")
	// 2: binary change, new binary file, mode changes both ways.
	writeFile(t, filepath.Join(dir, "bin.dat"), "\x00\x01\x02binary\x00DATA changed\n", 0o644)
	writeFile(t, filepath.Join(dir, "new.bin"), "\x00\xff\xfe new binary\n", 0o644)
	os.Chmod(filepath.Join(dir, "b.c"), 0o755)
	os.Chmod(filepath.Join(dir, "exec.sh"), 0o644)
	commit("binary: change bin.dat, add new.bin, flip modes")
	// 3: no newline at end of file, kept on one file and added on another.
	writeFile(t, filepath.Join(dir, "noeol.txt"), "one\ntwo\nTHREE", 0o644)
	writeFile(t, filepath.Join(dir, "exec.sh"), "#!/bin/sh\necho hi\necho no newline", 0o644)
	commit("text: edit around a missing final newline")
	// 4 and 5: a new file, then an edit of it.
	writeFile(t, filepath.Join(dir, "fresh", "n.c"), "int n;\nint m;\n", 0o644)
	commit("fresh: add n.c")
	writeFile(t, filepath.Join(dir, "fresh", "n.c"), "int n;\nint m2;\nint o;\n", 0o644)
	commit("fresh: edit n.c")
	// 6: deletions: a file and the only file of a directory.
	os.Remove(filepath.Join(dir, "gone", "only.c"))
	os.Remove(filepath.Join(dir, "noeol.txt"))
	commit("cleanup: delete files")

	out := gitT(t, dir, "format-patch", "-q", "--binary", "-M", "-C", "-C", "--stdout", "base")
	mbox = filepath.Join(t.TempDir(), "series.mbox")
	if err := os.WriteFile(mbox, []byte(out+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, mbox
}

func TestApplyCornerCasesLikeGitAm(t *testing.T) {
	dir, mbox := newCornerRepo(t)
	got := compareWithGitAm(t, dir, "base", mbox, false)
	if len(got.Commits) != 6 {
		t.Errorf("%d commits, want 6", len(got.Commits))
	}
	// Nothing but the new commits may be missing from git's view.
	gitT(t, dir, "fsck", "--strict", "--no-dangling")
}

// TestApplyCRLFMail sends the same series with CRLF line ends, as some
// mailers do: git mailsplit drops the CRs and so must the builder.
func TestApplyCRLFMail(t *testing.T) {
	dir, mbox := newCornerRepo(t)
	raw, _ := os.ReadFile(mbox)
	crlf := bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n"))
	// Binary patches survive: base85 has no CR; mailsplit splits on "From ".
	if err := os.WriteFile(mbox, crlf, 0o644); err != nil {
		t.Fatal(err)
	}
	compareWithGitAm(t, dir, "base", mbox, false)
}

// TestApplyCRLFFile edits a file whose lines end in CRLF: the mail
// transport loses the CRs in the hunk, so git am refuses the patch, and
// so must the builder, naming the hunk.
func TestApplyCRLFFile(t *testing.T) {
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	writeFile(t, filepath.Join(dir, "dos.txt"), "one\r\ntwo\r\nthree\r\n", 0o644)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "base")
	gitT(t, dir, "tag", "base")
	writeFile(t, filepath.Join(dir, "dos.txt"), "one\r\nTWO\r\nthree\r\n", 0o644)
	gitT(t, dir, "commit", "-q", "-am", "dos: edit")
	mbox := filepath.Join(t.TempDir(), "m")
	os.WriteFile(mbox, []byte(gitT(t, dir, "format-patch", "-q", "--stdout", "base")+"\n"), 0o644)
	raw, _ := os.ReadFile(mbox)

	st, _ := OpenRepo(dir)
	c, _ := st.Resolve("base")
	_, err := st.Apply(context.Background(), c.Hash, parseMbox(t, raw), pinnedOptions())
	var ae *ApplyError
	if !errors.As(err, &ae) || ae.File != "dos.txt" || ae.Hunk != 1 {
		t.Errorf("builder: %v, want an ApplyError for dos.txt hunk 1", err)
	}
	if _, err := gitAm(t, dir, "base", mbox); err == nil {
		t.Error("git am applied a CRLF hunk after mailsplit; the builder disagrees")
	}
}

// TestApplyMovedContext applies patches made on one base to a base whose
// files gained lines above and below the hunks: git apply finds the
// hunks where they moved, and so must the builder.
func TestApplyMovedContext(t *testing.T) {
	dir, mbox := newCornerRepo(t)
	gitT(t, dir, "checkout", "-q", "-b", "moved", "base")
	b, _ := os.ReadFile(filepath.Join(dir, "a.c"))
	// Lines above the hunks, and between hunks; a.c's end is left alone
	// because y.c is a copy of it whose hunk is anchored at the end.
	moved := "/* added above */\n/* two */\n/* three */\n" + strings.Replace(string(b), "line xxxxx v\n", "line xxxxx v\n/* added below the hunk */\n", 1)
	writeFile(t, filepath.Join(dir, "a.c"), moved, 0o644)
	x, _ := os.ReadFile(filepath.Join(dir, "dir", "sub", "x.c"))
	writeFile(t, filepath.Join(dir, "dir", "sub", "x.c"), strings.Replace(string(x), "line x b\n", "line x b\nline inserted in the middle\n", 1), 0o644)
	gitT(t, dir, "commit", "-q", "-am", "move things")
	compareWithGitAm(t, dir, "moved", mbox, false)
}

// TestApplyAnchoredHunk: a hunk that starts at line 1 must match at the
// start of the file, so lines added above it make git am fail; the
// builder must fail too rather than apply it further down.
func TestApplyAnchoredHunk(t *testing.T) {
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	var b strings.Builder
	for i := 1; i <= 20; i++ {
		b.WriteString(strconv.Itoa(i) + "\n")
	}
	writeFile(t, filepath.Join(dir, "a"), b.String(), 0o644)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "base")
	gitT(t, dir, "tag", "base")
	writeFile(t, filepath.Join(dir, "a"), strings.Replace(b.String(), "2\n", "TWO\n", 1), 0o644)
	gitT(t, dir, "commit", "-q", "-am", "edit line 2")
	mbox := filepath.Join(t.TempDir(), "m")
	os.WriteFile(mbox, []byte(gitT(t, dir, "format-patch", "-q", "-1", "--stdout")+"\n"), 0o644)
	gitT(t, dir, "checkout", "-q", "-b", "moved", "base")
	writeFile(t, filepath.Join(dir, "a"), "X\nY\n"+b.String(), 0o644)
	gitT(t, dir, "commit", "-q", "-am", "two lines above")

	raw, _ := os.ReadFile(mbox)
	st, _ := OpenRepo(dir)
	c, _ := st.Resolve("moved")
	_, err := st.Apply(context.Background(), c.Hash, parseMbox(t, raw), pinnedOptions())
	var ae *ApplyError
	if !errors.As(err, &ae) || ae.Hunk != 1 {
		t.Errorf("builder: %v, want an ApplyError at hunk 1", err)
	}
	if _, err := gitAm(t, dir, "moved", mbox); err == nil {
		t.Error("git am applied the anchored hunk")
	}
}

// TestApplyInbodyHeadersAndScissors checks the mail parts git am reads
// besides the patch: an in-body From: and Subject:, and a scissors line
// that only --scissors honours.
func TestApplyInbodyHeadersAndScissors(t *testing.T) {
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	writeFile(t, filepath.Join(dir, "f.c"), "a\nb\nc\n", 0o644)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "base")
	gitT(t, dir, "tag", "base")
	patch := strings.Join([]string{
		"From 1234567890abcdef1234567890abcdef12345678 Mon Sep 17 00:00:00 2001",
		"From: Sender Person <sender@example.org>",
		"Date: Tue, 2 Jan 2024 10:00:00 -0500",
		"Subject: [PATCH rdma-next v3 1/1] outer subject",
		"Message-ID: <scissors@example.org>",
		"",
		"From: Real Author <real@example.org>",
		"Subject: [PATCH] RDMA/core: the inner subject",
		"",
		"Discussion above the cut.",
		"",
		"-- >8 --",
		"Subject: [PATCH] after the scissors",
		"",
		"The real message.",
		"",
		"Signed-off-by: Real Author <real@example.org>",
		"---",
		" f.c | 2 +-",
		"",
		"diff --git a/f.c b/f.c",
		"index de98044..0ad4c4e 100644",
		"--- a/f.c",
		"+++ b/f.c",
		"@@ -1,3 +1,3 @@",
		" a",
		"-b",
		"+B",
		" c",
		"-- ",
		"2.39.5",
		"",
	}, "\n")
	mbox := filepath.Join(t.TempDir(), "m")
	os.WriteFile(mbox, []byte(patch), 0o644)
	compareWithGitAm(t, dir, "base", mbox, false)
	got := compareWithGitAm(t, dir, "base", mbox, true)
	msg := gitT(t, dir, "log", "-1", "--format=%an|%s|%b", got.Commits[0].String())
	if !strings.HasPrefix(msg, "Sender Person|after the scissors|The real message.") {
		t.Errorf("with scissors: %q", msg)
	}
}

func TestApplyErrorNamesPatchFileHunkBase(t *testing.T) {
	dir, mbox := newCornerRepo(t)
	// A base where fresh/n.c already exists makes patch 4/6 fail; one
	// where b.c's renamed line is changed makes patch 1/6 fail at hunk 1.
	gitT(t, dir, "checkout", "-q", "-b", "conflict", "base")
	b, _ := os.ReadFile(filepath.Join(dir, "a.c"))
	writeFile(t, filepath.Join(dir, "a.c"), strings.Replace(string(b), "line xx e\n", "line xx e changed upstream\n", 1), 0o644)
	gitT(t, dir, "commit", "-q", "-am", "conflicting change")
	raw, _ := os.ReadFile(mbox)
	st, _ := OpenRepo(dir)
	c, _ := st.Resolve("conflict")
	loose := countLoose(t, st.Dir)
	_, err := st.Apply(context.Background(), c.Hash, parseMbox(t, raw), pinnedOptions())
	var ae *ApplyError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want *ApplyError", err)
	}
	if ae.Index != 1 || ae.Total != 6 || ae.File != "b.c" || ae.Hunk != 1 || ae.Base != c.Hash ||
		!strings.HasPrefix(ae.HunkHeader, "@@ -") {
		t.Errorf("ApplyError = %+v", ae)
	}
	if !strings.Contains(ae.Error(), "patch 1/6") || !strings.Contains(ae.Error(), c.Hash.String()) {
		t.Errorf("message %q lacks the patch number or the base", ae.Error())
	}
	if n := countLoose(t, st.Dir); n != loose {
		t.Errorf("a failed apply wrote %d objects", n-loose)
	}
	if _, err := gitAm(t, dir, "conflict", mbox); err == nil {
		t.Error("git am applied what the builder refused")
	}
}

func countLoose(t testing.TB, gitDir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(gitDir, "objects", "??", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestApplyRefusesHostilePatches feeds patches that try to leave the tree,
// write into .git, plant an escaping symlink or a huge file: each is an
// *UnsafeError and nothing is written.
func TestApplyRefusesHostilePatches(t *testing.T) {
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	writeFile(t, filepath.Join(dir, "f.c"), "a\n", 0o644)
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "base")
	st, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := st.Resolve("HEAD")
	newFile := func(name, mode, body string) string {
		n := strings.Count(body, "\n")
		return "From: Evil <evil@example.org>\nSubject: [PATCH] evil\nDate: Tue, 2 Jan 2024 10:00:00 +0000\n\nmsg\n---\n" +
			"diff --git a/" + name + " b/" + name + "\nnew file mode " + mode + "\nindex 0000000..1111111\n--- /dev/null\n+++ b/" + name +
			"\n@@ -0,0 +1," + strconv.Itoa(n) + " @@\n" + prefixLines(body, "+")
	}
	// A symlink's blob is its target, without a newline.
	newLink := func(name, target string) string {
		return strings.Replace(newFile(name, "120000", target+"\n"), "+"+target+"\n", "+"+target+"\n\\ No newline at end of file\n", 1)
	}
	cases := map[string]string{
		"dotdot":         newFile("../escape.c", "100644", "x\n"),
		"inner dotdot":   newFile("a/../../escape.c", "100644", "x\n"),
		"dot git":        newFile(".git/hooks/post-checkout", "100755", "#!/bin/sh\n"),
		"nested dot git": newFile("sub/.GIT/config", "100644", "x\n"),
		"symlink out":    newLink("evil-link", "../../etc/passwd"),
		"symlink abs":    newLink("evil-link", "/etc/passwd"),
		"symlink in git": newLink("a/link", "../.git/config"),
		"gitlink":        newFile("sub", "160000", "x\n"),
		"absolute": "From: Evil <evil@example.org>\nSubject: [PATCH] evil\n\nmsg\n---\n" +
			"--- /dev/null\n+++ /etc/passwd\n@@ -0,0 +1 @@\n+x\n",
		"oversized": newFile("big.c", "100644", strings.Repeat("0123456789abcdef\n", 200)),
	}
	for name, mail := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := lore.ParseMessage([]byte(mail))
			if err != nil {
				t.Fatal(err)
			}
			loose := countLoose(t, st.Dir)
			opts := pinnedOptions()
			opts.MaxBlobSize = 1024
			opts.Ref = SeriesRef("evil", 1)
			_, err = st.Apply(context.Background(), head.Hash, []*flow.Message{m}, opts)
			var ue *UnsafeError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want *UnsafeError", err)
			}
			t.Logf("refused: %v", err)
			if n := countLoose(t, st.Dir); n != loose {
				t.Errorf("%d objects written", n-loose)
			}
			if _, err := st.Repository().Reference(opts.Ref, false); err == nil {
				t.Error("ref written")
			}
		})
	}
}

func prefixLines(body, p string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(body, "\n") {
		if l != "" {
			b.WriteString(p + l)
		}
	}
	return b.String()
}

func TestApplyWritesSeriesRef(t *testing.T) {
	dir, mbox := newCornerRepo(t)
	raw, _ := os.ReadFile(mbox)
	st, _ := OpenRepo(dir)
	c, _ := st.Resolve("base")
	opts := pinnedOptions()
	opts.Ref = SeriesRef("corner", 2)
	got, err := st.Apply(context.Background(), c.Hash, parseMbox(t, raw), opts)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := st.Repository().Reference(plumbing.ReferenceName("refs/rdmabot/corner/v2"), false)
	if err != nil || ref.Hash() != got.Commits[len(got.Commits)-1] {
		t.Errorf("refs/rdmabot/corner/v2 = %v, %v; want %s", ref, err, got.Commits[len(got.Commits)-1])
	}
}

// TestSeriesRefIsSafe: a series is named by its Message-ID, which the
// sender writes; its ref must stay a single safe component.
func TestSeriesRefIsSafe(t *testing.T) {
	for _, id := range []string{
		"20240102.1234-1-cel@kernel.org",
		"../../../../etc/x@y",
		"a/b@c",
		"x.lock",
		".hidden@x",
		"a@{b}",
		"<space in id@x>",
		strings.Repeat("long", 60) + "@x",
	} {
		r := SeriesRef(id, 2)
		if err := checkRef(r); err != nil {
			t.Errorf("SeriesRef(%q) = %s: %v", id, r, err)
		}
		if strings.Count(string(r), "/") != 3 || !strings.HasSuffix(string(r), "/v2") {
			t.Errorf("SeriesRef(%q) = %s: not refs/rdmabot/<one component>/v2", id, r)
		}
	}
	if r := SeriesRef("20240102.1234-1-cel@kernel.org", 1); r != "refs/rdmabot/20240102.1234-1-cel@kernel.org/v1" {
		t.Errorf("a plain Message-ID was changed: %s", r)
	}
	if SeriesRef("a/b@c", 1) == SeriesRef("a_b@c", 1) {
		t.Error("two Message-IDs share a ref")
	}
	st, _ := OpenStore(filepath.Join(t.TempDir(), "s.git"))
	if _, err := st.Apply(context.Background(), plumbing.ZeroHash, nil, ApplyOptions{Committer: testIdentity, Ref: "refs/rdmabot/../../x/v1"}); err == nil || !strings.Contains(err.Error(), "ref") {
		t.Errorf("Apply accepted a ref with ..: %v", err)
	}
}

// A few hundred bytes of "copy from" stanzas must not make a tree of
// hundreds of MB: the bytes a whole series writes are capped, and going
// over is the series' fault (an UnsafeError), not the machine's.
func TestApplyCapsWhatASeriesWrites(t *testing.T) {
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	writeFile(t, filepath.Join(dir, "big.c"), strings.Repeat("x\n", 512<<10), 0o644) // 1 MiB
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "base")
	st, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	base, err := st.Resolve("HEAD")
	if err != nil {
		t.Fatal(err)
	}
	var patch strings.Builder
	for i := range 5 {
		fmt.Fprintf(&patch, "diff --git a/big.c b/copy%d.c\nsimilarity index 100%%\ncopy from big.c\ncopy to copy%d.c\n", i, i)
	}
	m := &flow.Message{Subject: "[PATCH] copies", From: flow.Address{Name: "M", Email: "m@example.org"},
		Body: "Copies.\n\nSigned-off-by: M <m@example.org>\n---\n" + patch.String()}
	opts := pinnedOptions()
	opts.MaxSeriesBytes = 3 << 20
	_, err = st.Apply(context.Background(), base.Hash, []*flow.Message{m}, opts)
	var ue *UnsafeError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "byte limit") {
		t.Fatalf("5 MiB of copies under a 3 MiB cap: %v, want an UnsafeError", err)
	}
	opts.MaxSeriesBytes = 8 << 20
	if _, err := st.Apply(context.Background(), base.Hash, []*flow.Message{m}, opts); err != nil {
		t.Fatalf("the same copies under an 8 MiB cap: %v", err)
	}
}
