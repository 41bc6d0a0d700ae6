package gitmail

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// Title and PatchBreak agree with git mailinfo itself on the subjects
// and bodies that decide them: reply prefixes, bracket groups anywhere
// up front, blanks; each form of patch start, and the "---" lines that
// are none.
func TestAgreesWithGitMailinfo(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed: no mailinfo to compare with")
	}
	subjects := []string{
		"[PATCH v2 03/12] svcrdma: Add Write chunk WRs to the RPC's Send WR chain",
		"Re: [PATCH] RDMA/core: fix a leak",
		"RE: re: [PATCH rdma-next 1/2] [RFC] IB/core:   squeeze   blanks",
		"[PATCH] [net] :: svcrdma: colons and brackets",
		"[unclosed bracket stays",
		"no prefix at all",
		"  Re:[PATCH]x",
	}
	diff := "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n"
	bodies := []string{
		"Fix it.\n\nSigned-off-by: A <a@example.org>\n---\n f | 2 +-\n\n" + diff,
		"Fix it.\n\n" + diff,
		"Fix it.\n--- \nnot a separator? it is one: blanks only\n" + diff,
		"Fix it.\n---a dash run glued to text is none\nmore\n" + diff,
		"Fix it.\nIndex: f\n===\n" + diff,
		"Only a message, no patch.\n---x\n",
		"Fix it.\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n",
	}
	dir := t.TempDir()
	for i, subject := range subjects {
		for j, body := range bodies {
			mail := "From: A <a@example.org>\nSubject: " + subject + "\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n\n" + body
			msg, patch := filepath.Join(dir, "msg"), filepath.Join(dir, "patch")
			cmd := testenv.GitCmd(dir, nil, "mailinfo", "-u", msg, patch)
			cmd.Stdin = strings.NewReader(mail)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("git mailinfo: %v", err)
			}
			var title string
			for _, l := range strings.Split(string(out), "\n") {
				if s, ok := strings.CutPrefix(l, "Subject: "); ok {
					title = s
				}
			}
			if got := Title(subject); got != title {
				t.Errorf("Title(%q) = %q, git mailinfo %q", subject, got, title)
			}
			if i > 0 {
				continue // the body's split does not depend on the subject
			}
			wantPatch, err := os.ReadFile(patch)
			if err != nil {
				t.Fatal(err)
			}
			var gotPatch string
			if at := PatchBreak([]byte(body)); at >= 0 {
				gotPatch = body[at:]
			}
			if gotPatch != string(wantPatch) {
				t.Errorf("body %d: patch from PatchBreak\n%q\ngit mailinfo's\n%q", j, gotPatch, wantPatch)
			}
		}
	}
}
