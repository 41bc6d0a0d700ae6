package lore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/testenv"
)

// TestAgreementWithB4 runs Debian's b4 on every real thread and checks
// that each complete series we assemble has the same patches, in the
// same order, with the same trailers as "b4 am" writes.
func TestAgreementWithB4(t *testing.T) {
	b4, err := exec.LookPath("b4")
	if err != nil {
		t.Skip("b4 not installed (apt-get install b4): cannot compare with it")
	}
	root := filepath.Join(sharedDir(t), "corpus", "threads")
	dirs, _ := filepath.Glob(filepath.Join(root, "*"))
	home := t.TempDir()
	// b4 0.12 exits silently without a git identity.
	gitconfig := "[user]\n\tname = rdmabot test\n\temail = test@example.invalid\n[b4]\n\tattestation-policy = off\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(gitconfig), 0o644); err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, dir := range dirs {
		files, _ := filepath.Glob(filepath.Join(dir, "*.eml"))
		if len(files) == 0 {
			continue
		}
		a := newTestAssembler(t)
		var mbox bytes.Buffer
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.AddRaw(raw, time.Time{}); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			writeMboxrd(&mbox, forB4(raw))
		}
		mboxPath := filepath.Join(t.TempDir(), "thread.mbox")
		if err := os.WriteFile(mboxPath, mbox.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, s := range a.Assemble().Series {
			if !s.Complete {
				continue
			}
			name := filepath.Base(dir) + "/v" + fmt.Sprint(s.Version)
			t.Run(name, func(t *testing.T) {
				want := runB4(t, b4, home, mboxPath, s)
				compareWithB4(t, s, want)
			})
			compared++
		}
	}
	if compared == 0 {
		t.Fatal("no complete series in the threads: nothing compared")
	}
}

// forB4 works around two b4 0.12 bugs without changing what the mail
// says: it crashes on a folded Subject ("Header values may not contain
// linefeed", Python 3.11), and it loses a reply whose In-Reply-To
// carries a Gnus-style comment with an encoded word after the id
// ('<id> ("Thomas =?utf-8?Q?...?= message of ...")'), dropping the
// trailers in it. Subject is unfolded and In-Reply-To cut to its id.
func forB4(raw []byte) []byte {
	end := bytes.Index(raw, []byte("\n\n"))
	if end < 0 {
		return raw
	}
	lines := strings.Split(string(raw[:end]), "\n")
	var out []string
	cur := ""
	for _, l := range lines {
		if (cur == "subject" || cur == "in-reply-to") && (strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")) {
			out[len(out)-1] += " " + strings.TrimLeft(l, " \t")
			continue
		}
		cur = strings.ToLower(strings.SplitN(l, ":", 2)[0])
		out = append(out, l)
	}
	for i, l := range out {
		if strings.HasPrefix(strings.ToLower(l), "in-reply-to:") {
			if ids := extractIDs(l[len("in-reply-to:"):], false); len(ids) > 0 {
				out[i] = l[:len("in-reply-to:")] + " <" + ids[0] + ">"
			}
		}
	}
	return append([]byte(strings.Join(out, "\n")), raw[end:]...)
}

var mboxFromRe = regexp.MustCompile(`(?m)^(>*From )`)

func writeMboxrd(w *bytes.Buffer, raw []byte) {
	w.WriteString("From mboxrd@z Thu Jan  1 00:00:00 1970\n")
	w.Write(mboxFromRe.ReplaceAll(raw, []byte(">$1")))
	if !bytes.HasSuffix(raw, []byte("\n")) {
		w.WriteByte('\n')
	}
	w.WriteByte('\n')
}

// b4Patch is one message of b4's am-ready mbox.
type b4Patch struct {
	title    string
	index    int
	trailers []string
}

func runB4(t *testing.T, b4, home, mbox string, s *Series) []b4Patch {
	t.Helper()
	out := t.TempDir() // b4 0.12 does not create -o
	id := s.RootMessageID
	if s.Cover == nil {
		id = s.Patches[0].Message.MessageID
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, b4, "--offline-mode", "am", "-m", mbox, "-o", out, "-n", "series", "-v", fmt.Sprint(s.Version), id)
	cmd.Env = append(cmd.Env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
	log, err := cmd.CombinedOutput()
	mbx, rerr := os.ReadFile(filepath.Join(out, "series.mbx"))
	switch {
	case err != nil && rerr == nil && bytes.Contains(log, []byte("thanks_record_am")):
		// b4 0.12 crashes on some addresses while it records the
		// series for "b4 ty", after it wrote the am-ready mbox.
		t.Logf("b4 crashed after writing its mbox (thanks_record_am): %v", err)
	case err != nil:
		t.Fatalf("b4 am: %v\n%s", err, log)
	case rerr != nil:
		t.Fatalf("b4 wrote no mbox: %v\n%s", rerr, log)
	}
	var patches []b4Patch
	for _, raw := range splitB4Mbox(mbx) {
		m, err := ParseMessage(raw)
		if err != nil {
			t.Fatalf("b4 output: %v", err)
		}
		subj := ParseSubject(m.Subject)
		patches = append(patches, b4Patch{title: subj.Title, index: subj.Index, trailers: commitTrailers(m.Body)})
	}
	return patches
}

var b4FromRe = regexp.MustCompile(`(?m)^From git@z `)

func splitB4Mbox(b []byte) [][]byte {
	locs := b4FromRe.FindAllIndex(b, -1)
	var out [][]byte
	for i, l := range locs {
		end := len(b)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		out = append(out, b[l[0]:end])
	}
	return out
}

var trailerRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*: \S`)

// commitTrailers returns the trailer block of a patch's commit message:
// the "Name: value" lines of its last paragraph before the "---".
func commitTrailers(body string) []string {
	msg := body
	if i := strings.Index(body, "\n---\n"); i >= 0 {
		msg = body[:i]
	}
	paras := strings.Split(strings.TrimRight(msg, "\n"), "\n\n")
	var out []string
	for _, l := range strings.Split(paras[len(paras)-1], "\n") {
		if trailerRe.MatchString(l) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

func compareWithB4(t *testing.T, s *Series, want []b4Patch) {
	t.Helper()
	if len(want) != len(s.Patches) {
		t.Fatalf("b4 gives %d patches, we have %d", len(want), len(s.Patches))
	}
	for i, w := range want {
		p := s.Patches[i]
		if w.title != p.Title {
			t.Errorf("patch %d: b4 title %q, ours %q", i+1, w.title, p.Title)
		}
		if w.index != 0 && w.index != p.Index {
			t.Errorf("patch %d: b4 index %d, ours %d", i+1, w.index, p.Index)
		}
		ours := commitTrailers(p.Message.Body)
		for _, tr := range p.Trailers {
			if !containsString(ours, tr.String()) {
				ours = append(ours, tr.String())
			}
		}
		got, exp := sortedCopy(ours), sortedCopy(w.trailers)
		if strings.Join(got, "\n") != strings.Join(exp, "\n") {
			t.Errorf("patch %d %q trailers:\n ours %q\n b4   %q", p.Index, p.Title, got, exp)
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedCopy(v []string) []string {
	c := append([]string(nil), v...)
	sort.Strings(c)
	return c
}

// TestAgreementWithB4Archive compares a sample of the complete series of
// the 2024 linux-rdma archive with b4 am. It takes about 3 s per series,
// so it runs only when RDMABOT_TEST_B4_SAMPLE says how many.
func TestAgreementWithB4Archive(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RDMABOT_TEST_B4_SAMPLE"))
	if n <= 0 {
		t.Skip("set RDMABOT_TEST_B4_SAMPLE=N to compare N series of the 2024 linux-rdma archive with b4 am (about 3 s each)")
	}
	b4, err := exec.LookPath("b4")
	if err != nil {
		t.Skip("b4 not installed (apt-get install b4): cannot compare with it")
	}
	raws := readArchiveWithGit(t, filepath.Join(sharedDir(t), "corpus", "linux-rdma-2024.git"))
	a := newTestAssembler(t)
	msgs := map[string]*flow.Message{}
	for _, raw := range raws {
		m, err := ParseMessage(raw)
		if err != nil {
			continue
		}
		if a.Add(m, time.Time{}) {
			msgs[m.MessageID] = m
		}
	}
	all := a.Assemble().Series
	var complete []*Series
	for _, s := range all {
		if s.Complete && len(s.Patches) > 0 {
			complete = append(complete, s)
		}
	}
	sort.Slice(complete, func(i, j int) bool { return complete[i].ID < complete[j].ID })
	step := max(1, len(complete)/n)
	home := t.TempDir()
	gitconfig := "[user]\n\tname = rdmabot test\n\temail = test@example.invalid\n[b4]\n\tattestation-policy = off\n"
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(gitconfig), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(complete) && i/step < n; i += step {
		s := complete[i]
		t.Run(s.ID, func(t *testing.T) {
			if why := beyondB4(s, all); why != "" {
				t.Skipf("b4 cannot express this series: %s", why)
			}
			// b4 cuts the thread out of the mbox itself: give it the
			// mail of the weeks around the series.
			var mbox bytes.Buffer
			for _, m := range msgs {
				if m.Date.After(s.Date.Add(-24*time.Hour)) && m.Date.Before(s.Date.Add(45*24*time.Hour)) {
					writeMboxrd(&mbox, forB4(m.Raw))
				}
			}
			path := filepath.Join(t.TempDir(), "window.mbox")
			if err := os.WriteFile(path, mbox.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s v%d %q (%d patches)", s.ID, s.Version, s.Subject, len(s.Patches))
			compareWithB4(t, s, runB4(t, b4, home, path, s))
		})
	}
}

// beyondB4 says why b4 am cannot give this series, or "": b4 only
// follows threading (patches sent unthreaded are not one series to it),
// and it keys a thread's series by version alone ("-v N" cannot tell a
// posting from its RESEND in the same thread).
func beyondB4(s *Series, all []*Series) string {
	unthreaded := 0
	if s.Cover != nil && s.Cover.InReplyTo == "" && len(s.Cover.References) == 0 {
		unthreaded++
	}
	for _, p := range s.Patches {
		if p.Message.InReplyTo == "" && len(p.Message.References) == 0 {
			unthreaded++
		}
	}
	if unthreaded > 1 {
		return "its messages are not threaded together"
	}
	for _, o := range all {
		if o == s || o.Version != s.Version || !strings.EqualFold(o.Author.Email, s.Author.Email) {
			continue
		}
		for _, p := range o.Patches {
			for _, q := range s.Patches {
				if p.Title == q.Title && (p.Message.InReplyTo != "" || q.Message.InReplyTo != "") {
					return "another posting with the same version (" + o.ID + ") shares its thread"
				}
			}
		}
	}
	return ""
}

// readArchiveWithGit reads blob m of every commit with git cat-file, a
// reader independent of lore/feed.
func readArchiveWithGit(t *testing.T, corpus string) [][]byte {
	t.Helper()
	gitDir := t.TempDir()
	// The corpus copy has no refs/ directory, which git insists on.
	if out, err := testenv.GitCmd("", nil, "init", "-q", "--bare", gitDir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(gitDir, "objects", "info", "alternates"), []byte(filepath.Join(corpus, "objects")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	packed, err := os.ReadFile(filepath.Join(corpus, "packed-refs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gitDir, "packed-refs"), packed, 0o644); err != nil {
		t.Fatal(err)
	}
	revs, err := testenv.GitCmd("", nil, "--git-dir", gitDir, "rev-list", "--all").Output()
	if err != nil {
		t.Fatal(err)
	}
	var specs strings.Builder
	for _, c := range strings.Fields(string(revs)) {
		specs.WriteString(c + ":m\n")
	}
	cmd := testenv.GitCmd("", nil, "--git-dir", gitDir, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(specs.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var raws [][]byte
	for len(out) > 0 {
		nl := bytes.IndexByte(out, '\n')
		if nl < 0 {
			break
		}
		f := strings.Fields(string(out[:nl]))
		out = out[nl+1:]
		if len(f) != 3 {
			continue // "<spec> missing"
		}
		size, _ := strconv.Atoi(f[2])
		raws = append(raws, out[:size])
		out = out[size+1:]
	}
	return raws
}
