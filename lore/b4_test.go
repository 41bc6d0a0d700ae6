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
	"strings"
	"testing"
	"time"
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
			writeMboxrd(&mbox, unfoldSubject(raw))
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

// unfoldSubject joins a folded Subject: b4 0.12 on Python 3.11 crashes
// on one ("Header values may not contain linefeed").
func unfoldSubject(raw []byte) []byte {
	end := bytes.Index(raw, []byte("\n\n"))
	if end < 0 {
		return raw
	}
	lines := strings.Split(string(raw[:end]), "\n")
	var out []string
	inSubject := false
	for _, l := range lines {
		if inSubject && (strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")) {
			out[len(out)-1] += " " + strings.TrimLeft(l, " \t")
			continue
		}
		inSubject = strings.HasPrefix(strings.ToLower(l), "subject:")
		out = append(out, l)
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
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("b4 am: %v\n%s", err, log)
	}
	mbx, err := os.ReadFile(filepath.Join(out, "series.mbx"))
	if err != nil {
		t.Fatalf("b4 wrote no mbox: %v\n%s", err, log)
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
