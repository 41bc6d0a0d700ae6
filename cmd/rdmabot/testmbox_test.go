package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/bot/store"
	"github.com/rdmabot/rdmabot/flow"
)

// test --mbox takes what git makes: the real `git format-patch --stdout`
// of three commits authored weeks apart, with a cover letter and
// --base, unthreaded (git's default: no Message-ID, no In-Reply-To) and
// threaded, is queued as one complete series with its cover, whose
// base-commit names the base.
func TestTestMboxFormatPatch(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ctx := context.Background()
	dir := t.TempDir()
	git := func(env []string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=Dana Developer", "GIT_AUTHOR_EMAIL=dana@example.org",
			"GIT_COMMITTER_NAME=Dana Developer", "GIT_COMMITTER_EMAIL=dana@example.org")
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return out
	}
	git(nil, "init", "-q", "-b", "main")
	file := filepath.Join(dir, "net", "sunrpc", "xprtrdma", "svc_rdma_sendto.c")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	text := "int a;\n"
	for i, day := range []string{"", "2026-10-01", "2026-10-20", "2026-11-25"} {
		text += strings.Repeat("x", i) + "\n"
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		git(nil, "add", ".")
		var env []string
		msg := "base"
		if day != "" {
			env, msg = []string{"GIT_AUTHOR_DATE=" + day + "T10:00:00Z", "GIT_COMMITTER_DATE=" + day + "T10:00:00Z"}, "svcrdma: change "+day
		}
		git(env, "commit", "-q", "-m", msg)
	}
	base := strings.TrimSpace(string(git(nil, "rev-parse", "HEAD~3")))
	for _, threaded := range []bool{false, true} {
		args := []string{"format-patch", "--stdout", "--cover-letter", "--base=" + base}
		if threaded {
			args = append(args, "--thread")
		}
		mbox := filepath.Join(t.TempDir(), "series.mbox")
		if err := os.WriteFile(mbox, git(nil, append(args, "HEAD~3")...), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := tempConfig(t, "")
		code, stdout, stderr := rdmabot(t, ctx, "test", "--config", cfg, "--mbox", mbox, "--json")
		var q testQueuedJSON
		if err := json.Unmarshal([]byte(stdout), &q); err != nil || code != exitOK || q.ID == 0 {
			t.Fatalf("threaded %v: exit %d %v %s%s", threaded, code, err, stdout, stderr)
		}
		st, err := store.Open(ctx, "", filepath.Join(filepath.Dir(cfg), "data"))
		if err != nil {
			t.Fatal(err)
		}
		tt, err := st.Test(ctx, st.DB, q.ID)
		if err != nil {
			t.Fatal(err)
		}
		row, err := st.Series(ctx, st.DB, tt.SeriesID)
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		var s flow.Series
		if err := json.Unmarshal(row.Data, &s); err != nil {
			t.Fatal(err)
		}
		if s.Cover == nil || len(s.Patches) != 3 || !strings.Contains(s.Cover.Body, "base-commit: "+base) {
			t.Errorf("threaded %v: cover %v, %d patches", threaded, s.Cover != nil, len(s.Patches))
		}
	}
}
