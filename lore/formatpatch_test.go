package lore

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// formatPatch makes a repository in a temporary directory with a base
// commit and three commits authored days apart, and returns what the
// real `git format-patch --stdout` writes for them with args.
func formatPatch(t *testing.T, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	run := func(env []string, a ...string) []byte {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, a...)...)
		cmd.Env = append([]string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=Dana Developer", "GIT_AUTHOR_EMAIL=dana@example.org",
			"GIT_COMMITTER_NAME=Dana Developer", "GIT_COMMITTER_EMAIL=dana@example.org", "PATH=/usr/bin:/bin:/usr/local/bin"}, env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", a, err)
		}
		return out
	}
	run(nil, "init", "-q", "-b", "main")
	file := filepath.Join("net", "sunrpc", "xprtrdma", "svc_rdma_sendto.c")
	text := "int a;\n"
	write := func() {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, file)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		run(nil, "add", file)
	}
	write()
	run(nil, "commit", "-q", "-m", "base")
	for i, day := range []string{"2026-10-01", "2026-10-09", "2026-11-20"} {
		text += "int b" + string(rune('0'+i)) + ";\n"
		write()
		date := "GIT_AUTHOR_DATE=" + day + "T10:00:00Z"
		run([]string{date, "GIT_COMMITTER_DATE=" + day + "T10:00:00Z"}, "commit", "-q", "-m", "svcrdma: change "+string(rune('1'+i)))
	}
	return run(nil, append([]string{"format-patch", "--stdout", "--base=HEAD~3"}, append(args, "HEAD~3")...)...)
}

var formatPatchFrom = regexp.MustCompile(`(?m)^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001\n`)

// The mails of one `git format-patch --stdout` file are one posting,
// threaded or not (git's default: no Message-ID, no In-Reply-To), with
// its patches authored weeks apart and its cover made later still: one
// complete series, its cover and base-commit kept.
func TestFormatPatchFileIsOneSeries(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		cover bool
	}{
		{"unthreaded with a cover", []string{"--cover-letter"}, true},
		{"threaded with a cover", []string{"--cover-letter", "--thread"}, true},
		{"unthreaded without a cover", nil, false},
		{"threaded without a cover", []string{"--thread"}, false},
	} {
		mbox := formatPatch(t, tc.args...)
		a, err := NewAssembler(AssemblerConfig{Now: func() time.Time { return time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC) }})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, raw := range formatPatchFrom.Split(string(mbox), -1) {
			if strings.TrimSpace(raw) == "" {
				continue
			}
			n++
			if err := a.AddRaw([]byte(raw), time.Time{}); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if want := 3 + map[bool]int{true: 1}[tc.cover]; n != want {
			t.Fatalf("%s: format-patch wrote %d mails, want %d", tc.name, n, want)
		}
		got := a.Assemble().Series
		if len(got) != 1 {
			var b strings.Builder
			for _, s := range got {
				b.WriteString(s.Subject + "; ")
			}
			t.Fatalf("%s: %d series: %s", tc.name, len(got), b.String())
		}
		s := got[0]
		if !s.Complete || len(s.Patches) != 3 || (s.Cover != nil) != tc.cover || s.BaseCommit == "" {
			t.Errorf("%s: complete %v, %d patches, cover %v, base-commit %q", tc.name, s.Complete, len(s.Patches), s.Cover != nil, s.BaseCommit)
		}
		for i, p := range s.Patches {
			if want := "svcrdma: change " + string(rune('1'+i)); p.Title != want {
				t.Errorf("%s: patch %d is %q, want %q", tc.name, i+1, p.Title, want)
			}
		}
	}
}

// A patch written weeks after its thread went out of the window (Flush)
// is not that series a second time under its ID: it is a posting of its
// own, with an ID of its own.
func TestLatePatchIsNotTheFlushedSeries(t *testing.T) {
	t0 := time.Date(2026, 10, 1, 10, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	core := "drivers/infiniband/core/cma.c"
	a := newTestAssembler(t)
	add := func(m tmail) {
		t.Helper()
		a.Add(m.parse(t), m.date)
	}
	add(tmail{id: "c", subject: "[PATCH 0/2] w", body: "cover\n", date: t0})
	add(tmail{id: "p1", subject: "[PATCH 1/2] a", irt: "c", refs: "<c>", body: diffBody(core), date: t0})
	out := a.Flush(t0.Add(30 * day))
	if len(out.Series) != 1 || out.Series[0].RootMessageID != "c" {
		t.Fatalf("first flush: %+v", out.Series)
	}
	first := out.Series[0].ID
	add(tmail{id: "p2", subject: "[PATCH 2/2] b", irt: "c", refs: "<c>", body: diffBody(core), date: t0.Add(50 * day)})
	late := a.Flush(t0.Add(1000 * day)).Series
	if len(late) != 1 || late[0].ID == first || len(late[0].Patches) != 1 || late[0].Patches[0].MessageID != "p2" {
		t.Fatalf("the late patch: %+v (first %s)", late, first)
	}
	// Long after, the memory of the given-out series is gone.
	if _, kept := a.flushed[first]; kept || len(a.flushed) != 1 {
		t.Errorf("flushed IDs %v: the first kept past the version window", a.flushed)
	}
}
