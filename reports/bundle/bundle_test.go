package bundle

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabot/rdmabot/internal/testenv"
	"github.com/rdmabot/rdmabot/lore/feed"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const base = "adc218676eef25575469234709c2d87185ca223a"

var patches = [][]byte{
	[]byte("From: A U Thor <author@example.org>\nSubject: [PATCH 1/2] svcrdma: one\nMessage-ID: <1@example.org>\n\nFrom the start: a body line mbox must quote.\n>From quoted once already.\n---\n"),
	[]byte("From: A U Thor <author@example.org>\r\nSubject: [PATCH 2/2] svcrdma: two\r\nMessage-ID: <2@example.org>\r\n\r\nno final newline"),
}

func input() Input {
	return Input{TestID: 7, Subject: "[PATCH 0/2] svcrdma: two\n changes", Link: "https://lore.kernel.org/r/0@example.org/",
		Tree: "rdma", TreeURL: "https://git.kernel.org/pub/scm/linux/kernel/git/rdma/rdma.git", Branch: "for-next", Base: base,
		Patches: patches, Config: []byte("CONFIG_X=y\n"), Settings: []byte("[lab]\ndefault = \"qemu\"\n"), Version: "rdmabot test",
		Kept: []File{{Name: "base-build.log", Mode: 0o644, Data: []byte("make\n")}, {Name: "boots.json", Mode: 0o644, Data: []byte("[]\n")}}}
}

func TestGolden(t *testing.T) {
	b, err := Make(input())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range b.Files {
		if f.Name != "run.sh" && f.Name != "README" {
			continue
		}
		testenv.Golden(t, filepath.Join("testdata", f.Name+".golden"), f.Data, *update)
	}
}

// The series goes back out as mboxrd that the bot's own mbox reader (and
// git am) splits into the same messages, quoted From lines included.
func TestMboxRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "series.mbox")
	if err := os.WriteFile(path, Mbox(patches), 0o644); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	if _, err := (&feed.Mbox{Path: path}).Read(context.Background(), "", func(it feed.Item) error {
		got = append(got, it.Raw)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(patches) {
		t.Fatalf("%d messages back, want %d", len(got), len(patches))
	}
	for i, p := range patches {
		want := strings.ReplaceAll(string(p), "\r\n", "\n")
		if g := strings.TrimRight(string(got[i]), "\n"); g != strings.TrimRight(want, "\n") {
			t.Errorf("message %d:\n%q\nwant\n%q", i+1, g, want)
		}
	}
}

func TestMakeRefuses(t *testing.T) {
	for name, mod := range map[string]func(*Input){
		"no base":      func(in *Input) { in.Base = "" },
		"not a commit": func(in *Input) { in.Base = "HEAD; rm -rf /" },
		"no patches":   func(in *Input) { in.Patches = nil },
	} {
		in := input()
		mod(&in)
		if _, err := Make(in); err == nil {
			t.Errorf("%s: made a bundle", name)
		}
	}
}

// run.sh, run with a stand-in rdmabot that logs its arguments, fetches
// nothing when LINUX has the base, writes the configuration with the
// reader's cache first, and runs apply, both builds, the image and the
// comparison in that order; whatever the tree's name, URL, branch and
// subject hold, a shell runs none of it.
func TestRunScript(t *testing.T) {
	dir := t.TempDir()
	linux := filepath.Join(dir, "linux")
	git := func(args ...string) string {
		cmd := testenv.GitCmd("", nil, args...)
		cmd.Dir = linux
		cmd.Env = append(cmd.Env, "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@x", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@x")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	os.MkdirAll(linux, 0o755)
	git("init", "-q")
	git("commit", "-q", "--allow-empty", "-m", "base")
	head := git("rev-parse", "HEAD")

	in := input()
	in.Base = head
	in.Tree, in.TreeURL, in.Branch = "x'$(touch pwned)", "`touch pwned`", "a;touch pwned"
	in.Subject = "$(touch pwned)\n; touch pwned"
	stub := filepath.Join(dir, "rdmabot-stub")
	os.WriteFile(stub, []byte("#!/bin/sh\necho \"$*\" >>\"$STUB_LOG\"\nif [ \"$1\" = build ]; then\n  while [ $# -gt 0 ]; do [ \"$1\" = --out ] && mkdir -p \"$2\" && echo CONFIG_X=y >\"$2/config\"; shift; done\nfi\n"), 0o755)
	b, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	bd, err := b.WriteDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "log")
	cmd := exec.Command("sh", filepath.Join(bd, "run.sh"))
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, "RDMABOT="+stub, "LINUX="+filepath.Join(linux, ".git"), "CACHE="+filepath.Join(dir, "cache"), "STUB_LOG="+log)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run.sh: %v\n%s", err, out)
	}
	for _, d := range []string{dir, bd} {
		if _, err := os.Stat(filepath.Join(d, "pwned")); err == nil {
			t.Fatal("run.sh ran a command from the bundle's text")
		}
	}
	calls, _ := os.ReadFile(log)
	cfg := filepath.Join(bd, "work", "rdmabot.toml")
	want := strings.Join([]string{
		"apply --config " + cfg + " --repo " + filepath.Join(linux, ".git") + " --base " + head + " --mbox " + filepath.Join(bd, "series.mbox") + " --ref refs/rdmabot-reproduce/7",
		"build --config " + cfg + " --repo " + filepath.Join(linux, ".git") + " --rev " + head + " --slot reproduce --out " + filepath.Join(bd, "work", "base"),
		"build --config " + cfg + " --repo " + filepath.Join(linux, ".git") + " --rev refs/rdmabot-reproduce/7 --slot reproduce --out " + filepath.Join(bd, "work", "candidate"),
		"lab image --config " + cfg,
		"lab compare --config " + cfg + " --base " + filepath.Join(bd, "work", "base") + " --candidate " + filepath.Join(bd, "work", "candidate"),
	}, "\n") + "\n"
	if string(calls) != want {
		t.Errorf("rdmabot was run as\n%s\nwant\n%s", calls, want)
	}
	c, _ := os.ReadFile(cfg)
	if !strings.HasPrefix(string(c), "cache_dir = \""+filepath.Join(dir, "cache")+"\"\n") || !strings.HasSuffix(string(c), string(in.Settings)) {
		t.Errorf("configuration:\n%s", c)
	}

	// An imported tree (no URL) whose commit LINUX lacks: a clear stop.
	in.TreeURL, in.Base = "", strings.Repeat("a", 40)
	b, _ = Make(in)
	bd, _ = b.WriteDir(filepath.Join(dir, "second"))
	cmd = exec.Command("sh", filepath.Join(bd, "run.sh"))
	cmd.Env = append(cmd.Env, "RDMABOT="+stub, "LINUX="+filepath.Join(linux, ".git"), "CACHE="+filepath.Join(dir, "cache"), "STUB_LOG="+log)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "set LINUX to a git repository holding "+in.Base) {
		t.Errorf("imported tree without the commit: %v\n%s", err, out)
	}
}

// The directory and the tar hold the same files, modes and bytes, the
// binary copied from its path.
func TestTarMatchesDir(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.WriteFile(bin, []byte("\x7fELF not really"), 0o755)
	in := input()
	in.Binary = bin
	b, err := Make(in)
	if err != nil {
		t.Fatal(err)
	}
	bd, err := b.WriteDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := b.WriteTarGz(&buf, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	n := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		n++
		data, _ := io.ReadAll(tr)
		name := strings.TrimPrefix(h.Name, b.Dir+"/")
		onDisk, err := os.ReadFile(filepath.Join(bd, name))
		if err != nil || !bytes.Equal(data, onDisk) {
			t.Errorf("%s: tar and directory differ (%v)", name, err)
		}
		st, _ := os.Stat(filepath.Join(bd, name))
		if os.FileMode(h.Mode).Perm() != st.Mode().Perm() {
			t.Errorf("%s: mode %o in the tar, %o on disk", name, h.Mode, st.Mode().Perm())
		}
	}
	if n != len(b.Files) || n != 8 {
		t.Errorf("%d files in the tar, %d in the bundle, want 8", n, len(b.Files))
	}
	os.Remove(bin)
	if err := b.WriteTarGz(io.Discard, time.Unix(0, 0)); err == nil {
		t.Error("a missing binary made a whole tar")
	}
}

// A test whose crash a lab profile found (lossy, client-side) is
// reproduced the same way: run.sh asks lab compare for those boots
// first, and the README says so.
func TestProfileReproducers(t *testing.T) {
	for _, c := range []struct {
		name         string
		set          func(*Input, bool)
		flag, readme string
	}{
		{"lossy", func(in *Input, on bool) { in.Lossy = on }, "--lossy", "over the lossy link"},
		{"client-side", func(in *Input, on bool) { in.ClientSide = on }, "--client-side", "boots the patched kernel on the client, beside the base kernel on the server"},
	} {
		for _, on := range []bool{false, true} {
			in := input()
			c.set(&in, on)
			b, err := Make(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range b.Files {
				var has bool
				switch f.Name {
				case "run.sh":
					has = strings.Contains(string(f.Data), `--candidate "$work/candidate" `+c.flag+"\n")
				case "README":
					has = strings.Contains(strings.Join(strings.Fields(string(f.Data)), " "), c.readme)
				default:
					continue
				}
				if has != on {
					t.Errorf("%s %t: %s mentions the %s boots: %t", c.name, on, f.Name, c.name, has)
				}
			}
		}
	}
}

// A client-side series' reproducer boots its kernel on the client, as
// the bot did; every other one on the server (lab compare's default).
func TestReproducerSide(t *testing.T) {
	in := input()
	for side, want := range map[string]bool{"": false, "server": false, "client": true} {
		in.Side = side
		b, err := Make(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range b.Files {
			if f.Name == "run.sh" && strings.Contains(string(f.Data), `--candidate "$work/candidate" --side client`+"\n") != want {
				t.Errorf("side %q: run.sh:\n%s", side, f.Data)
			}
		}
	}
}
