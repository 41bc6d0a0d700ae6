package lore

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// TestDerivedIDMatchesPublicInbox imports mail without a Message-ID into
// a scratch public-inbox (Debian's public-inbox, the software behind
// lore) and checks that the id it invents is the one ParseMessage
// derives, so a message read from lore and from a local file agree.
func TestDerivedIDMatchesPublicInbox(t *testing.T) {
	for _, tool := range []string{"public-inbox-init", "public-inbox-mda", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install public-inbox): no peer to compare with", tool)
		}
	}
	base := t.TempDir()
	extra := []string{"HOME=" + base, "PI_CONFIG=" + filepath.Join(base, "config"),
		"PI_EMERGENCY=" + filepath.Join(base, "emergency"), "ORIGINAL_RECIPIENT=test@example.org"}
	run := func(stdin string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), extra...)
		if name == "git" {
			cmd = testenv.GitCmd("", extra, args...)
		}
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	inbox := filepath.Join(base, "inbox")
	run("", "public-inbox-init", "-V2", "test", inbox, "http://127.0.0.1:1/test", "test@example.org")
	run("", "git", "config", "-f", filepath.Join(base, "config"), "publicinboxmda.spamcheck", "none")

	mails := []string{
		"From: Dev One <dev@example.org>\nTo: test@example.org\nSubject: [PATCH] no id here\nDate: Mon, 1 Jul 2024 15:42:28 +0300\n\nhello body\n\n",
		"From: \"Dev, Two\" <Dev.Two@Example.ORG>\r\nTo: test@example.org,\r\n\tother@example.org\r\nCc: =?UTF-8?Q?J=C3=B6rg?= <j@example.org>\r\n" +
			"Subject: Re: [PATCH v2 1/2] a folded\r\n subject =?UTF-8?B?w6k=?=\r\nDate: Tue, 2 Jul 2024 10:00:00 -0400\r\n" +
			"In-Reply-To: <parent@example.org>\r\nReferences: <root@example.org> <parent@example.org>\r\n" +
			"Content-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" +
			"caf=E9 line   \r\n\r\nReviewed-by: Dev Two <dev.two@example.org>\r\n\r\n\r\n",
		"From: Three <three@example.org>\nTo: test@example.org\nSubject: [PATCH] with attachment\nDate: Wed, 3 Jul 2024 01:02:03 +0000\n" +
			"MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b1\"\n\npreamble\n--b1\nContent-Type: text/plain; charset=utf-8\n\n" +
			"see attached\n--b1\nContent-Type: text/x-patch; name=\"fix.patch\"\nContent-Disposition: attachment; filename=\"fix.patch\"\n" +
			"Content-Description: the fix\n\ndiff --git a/x b/x\n--b1\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: base64\n\n" +
			"AAEC/w==\n--b1--\n",
	}
	for _, m := range mails {
		run(m, "public-inbox-mda", "--no-precheck")
	}
	gitDir := filepath.Join(inbox, "git", "0.git")
	commits := strings.Fields(run("", "git", "--git-dir", gitDir, "log", "--reverse", "--format=%H"))
	if len(commits) != len(mails) {
		t.Fatalf("public-inbox holds %d messages, want %d (see %s/emergency)", len(commits), len(mails), base)
	}
	for i, c := range commits {
		stored, err := ParseMessage([]byte(run("", "git", "--git-dir", gitDir, "show", c+":m")))
		if err != nil {
			t.Fatal(err)
		}
		ours, err := ParseMessage([]byte(mails[i]))
		if err != nil {
			t.Fatal(err)
		}
		if !ours.DerivedID || ours.MessageID != stored.MessageID {
			t.Errorf("mail %d: derived %q, public-inbox made %q", i, ours.MessageID, stored.MessageID)
		}
	}
}
