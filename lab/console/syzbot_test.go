package console

import (
	"bytes"
	"io"
	"mime/quotedprintable"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

var (
	syzSubject = regexp.MustCompile(`^\[syzbot\] (?:\[[^\]]*\] )*(.*?)(?: \(\d+\))?$`)
	spaces     = regexp.MustCompile(`\s+`)
)

// corpusGit opens one of the shared list archives with git. The archive is
// read-only and lacks refs/, so a scratch git dir borrows its objects.
func corpusGit(t *testing.T, list string) func(args ...string) []byte {
	t.Helper()
	src := filepath.Join(sharedDir(t), "corpus", list+".git")
	if _, err := os.Stat(filepath.Join(src, "objects")); err != nil {
		t.Skipf("../shared corpus %s absent: %v", list, err)
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "refs"), 0o755)
	os.Symlink(filepath.Join(src, "objects"), filepath.Join(dir, "objects"))
	for _, f := range []string{"HEAD", "packed-refs"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	return func(args ...string) []byte {
		out, err := testenv.GitCmd("", nil, append([]string{"--git-dir=" + dir}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return out
	}
}

// Every syzbot report on both lists in 2024, fed to the monitor as its
// mail body: our title must be the one syzbot gave it. syzbot's titles
// come from syzkaller, so this checks that we title crashes as it does.
func TestSyzbotTitles(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	n := 0
	for _, list := range []string{"linux-rdma-2024", "linux-nfs-2024"} {
		git := corpusGit(t, list)
		for _, l := range strings.Split(strings.TrimSpace(string(git("log", "--format=%H %s"))), "\n") {
			hash, subj, _ := strings.Cut(l, " ")
			if !strings.HasPrefix(subj, "[syzbot] ") || strings.Contains(subj, "Monthly") {
				continue
			}
			msg, err := mail.ReadMessage(bytes.NewReader(git("show", hash+":m")))
			if err != nil {
				t.Fatalf("%s: %v", hash, err)
			}
			var body io.Reader = msg.Body
			if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
				body = quotedprintable.NewReader(body)
			}
			crashes, err := Scan(body)
			if err != nil {
				t.Fatal(err)
			}
			want := syzSubject.FindStringSubmatch(spaces.ReplaceAllString(msg.Header.Get("Subject"), " "))[1]
			if len(crashes) == 0 || crashes[0].Title != want {
				t.Errorf("%s %s: syzbot says %q, we say %+v", list, hash[:12], want, crashes)
			}
			n++
		}
	}
	if n < 30 {
		t.Errorf("only %d syzbot reports found in the corpus", n)
	}
	t.Logf("%d syzbot reports titled as syzbot did", n)
}

// Crashes users quoted in their mail (hangs, oopses, soft lockups, RCU
// stalls, UBSAN, panics), titled into a golden file.
func TestCorpusReports(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	list, err := os.ReadFile("testdata/console/corpus-reports.txt")
	if err != nil {
		t.Fatal(err)
	}
	gits := map[string]func(...string) []byte{}
	var got bytes.Buffer
	for _, l := range strings.Split(string(list), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || strings.HasPrefix(l, "#") {
			continue
		}
		if gits[f[0]] == nil {
			gits[f[0]] = corpusGit(t, f[0])
		}
		msg, err := mail.ReadMessage(bytes.NewReader(gits[f[0]]("show", f[1]+":m")))
		if err != nil {
			t.Fatal(err)
		}
		var body io.Reader = msg.Body
		if strings.EqualFold(msg.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
			body = quotedprintable.NewReader(body)
		}
		crashes, err := Scan(body)
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString("== " + f[0] + " " + f[1][:12] + "\n")
		got.Write(render(crashes))
	}
	testenv.Golden(t, "testdata/console/corpus-reports.golden", got.Bytes(), *update)
}
