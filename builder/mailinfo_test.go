package builder

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rdmabot/rdmabot/flow"
)

// The commit message ends where lore's patch break says, including the
// body that ends in "--- " without a newline, which once panicked here
// (the lore copy had the fix, this one did not).
func TestMailInfoPatchBreak(t *testing.T) {
	for _, c := range []struct {
		name, body, message, patch string
	}{
		{"diff starts the patch", "Fix it.\n\ndiff --git a/x b/x\n", "t\n\nFix it.\n", "diff --git a/x b/x\n"},
		{"three dashes", "Fix it.\n---\n x | 1 +\n", "t\n\nFix it.\n", "---\n x | 1 +\n"},
		{"dashes and a blank at the very end", "Fix it.\n--- ", "t\n\nFix it.\n", "--- "},
		{"dashes in the text are not a break", "Fix it.\n---a\nmore\n", "t\n\nFix it.\n---a\nmore\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			mi := parseMailInfo(&flow.Message{Subject: "[PATCH] t", Body: c.body}, false)
			if mi.message != c.message || mi.patch != c.patch {
				t.Errorf("message %q patch %q, want %q and %q", mi.message, mi.patch, c.message, c.patch)
			}
		})
	}
}

func FuzzMailInfo(f *testing.F) {
	f.Add("Fix it.\n--- ")
	f.Add("From: A <a@b>\n\nx\n-- >8 --\ny\n---\n")
	f.Fuzz(func(t *testing.T, body string) {
		parseMailInfo(&flow.Message{Subject: "[PATCH] t", Body: body}, true)
	})
}

// Applying whatever a mail holds never panics: a malformed patch is an
// ApplyError or an UnsafeError, the series' fault, never a crash.
func FuzzApply(f *testing.F) {
	dir := f.TempDir()
	gitT(f, dir, "init", "-q")
	writeFile(f, filepath.Join(dir, "f.c"), "one\ntwo\nthree\n", 0o644)
	gitT(f, dir, "add", "-A")
	gitT(f, dir, "commit", "-q", "-m", "base")
	st, err := OpenRepo(dir)
	if err != nil {
		f.Fatal(err)
	}
	base, err := st.Resolve("HEAD")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("diff --git a/f.c b/f.c\n--- a/f.c\n+++ b/f.c\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n")
	f.Add("diff --git a/f.c b/g.c\nsimilarity index 90%\nrename from f.c\nrename to g.c\n")
	f.Add("diff --git a/x b/x\nnew file mode 120000\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+../../etc\n")
	f.Fuzz(func(t *testing.T, patch string) {
		m := &flow.Message{Subject: "[PATCH] fuzz", From: flow.Address{Name: "F", Email: "f@example.org"},
			Body: "Fuzz.\n\nSigned-off-by: F <f@example.org>\n---\n" + patch}
		st.Apply(context.Background(), base.Hash, []*flow.Message{m}, pinnedOptions())
	})
}
