package lore

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/gitmail"
	"github.com/rdmabot/rdmabot/internal/testenv"
)

// TestBodyMatchesGitMailinfo checks Body against git mailinfo, the
// parser git am uses: on every real patch mail and on MIME corner cases,
// the patch git would apply must be exactly the tail of Body, and each
// line of the commit message git keeps must be in Body before it.
func TestBodyMatchesGitMailinfo(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed: no mailinfo to compare with")
	}
	mails := map[string][]byte{
		"qp-latin1": []byte("From: A <a@example.org>\nSubject: [PATCH] qp\nContent-Type: text/plain; charset=iso-8859-1\n" +
			"Content-Transfer-Encoding: quoted-printable\n\nFix caf=E9 =\nhandling.\n\nSigned-off-by: A <a@example.org>\n---\n" +
			"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-caf=E9\n+caf=C3=A9 =3D x\n"),
		"base64-crlf": []byte("From: A <a@example.org>\r\nSubject: [PATCH] b64\r\nContent-Type: text/plain; charset=utf-8\r\n" +
			"Content-Transfer-Encoding: base64\r\n\r\nRml4IGl0LgoKLS0tCmRpZmYgLS1naXQgYS94IGIveAotLS0gYS94Cisr\r\nKyBiL3gKQEAgLTEgKzEgQEAKLWEKK2IK\r\n"),
		"attachment": []byte("From: A <a@example.org>\nSubject: [PATCH] x\nContent-Type: multipart/mixed; boundary=b\n\n--b\n" +
			"Content-Type: text/plain\n\nsee attached\n\nSigned-off-by: A <a@example.org>\n--b\nContent-Type: text/x-patch; name=\"0001-fix.patch\"\n" +
			"Content-Disposition: attachment; filename=\"0001-fix.patch\"\n\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--b--\n"),
		"flowed-delsp": []byte("From: A <a@example.org>\nSubject: [PATCH] flowed\nContent-Type: text/plain; charset=utf-8; format=flowed; delsp=yes\n\n" +
			"Flowed change that the mailer  \nwrapped.\n\nSigned-off-by: A Long Name  \n<a@example.org>\n---\n" +
			"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"),
	}
	if files, err := filepath.Glob(filepath.Join(sharedDir(t), "corpus", "threads", "*", "*PATCH*.eml")); err == nil {
		for _, f := range files {
			if strings.Contains(filepath.Base(f), "-Re-") || strings.Contains(filepath.Base(f), "-RE-") {
				continue
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			mails[filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f)] = raw
		}
	}
	dir := t.TempDir()
	for name, raw := range mails {
		m, err := ParseMessage(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		msgPath, patchPath := filepath.Join(dir, "msg"), filepath.Join(dir, "patch")
		cmd := testenv.GitCmd("", nil, "mailinfo", "-u", msgPath, patchPath)
		cmd.Stdin = strings.NewReader(string(raw))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: git mailinfo: %v\n%s", name, err, out)
		}
		msg, _ := os.ReadFile(msgPath)
		patch, _ := os.ReadFile(patchPath)
		body := m.Body
		cut := gitmail.PatchBreak([]byte(body))
		if len(patch) == 0 {
			if cut >= 0 && hasDiff(body[cut:]) {
				t.Errorf("%s: git sees no patch, Body has one at %d", name, cut)
			}
			continue
		}
		if cut < 0 {
			t.Errorf("%s: git mailinfo found a patch, Body has none", name)
			continue
		}
		if got, want := strings.TrimRight(body[cut:], "\n"), strings.TrimRight(string(patch), "\n"); got != want {
			t.Errorf("%s: patch differs from git mailinfo's\n--- ours\n%.600s\n--- git\n%.600s", name, got, want)
		}
		before := body[:cut]
		for _, l := range strings.Split(string(msg), "\n") {
			l = strings.TrimSpace(l)
			if l == "" {
				continue
			}
			i := strings.Index(before, l)
			if i < 0 {
				t.Errorf("%s: commit message line %q is not in Body", name, l)
				break
			}
			before = before[i+len(l):]
		}
	}
}
