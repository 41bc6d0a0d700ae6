package builder

import (
	"testing"

	"github.com/rdmabot/rdmabot/lore"
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
			mi := parseMailInfo(&lore.Message{Subject: "[PATCH] t", Body: c.body}, false)
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
		parseMailInfo(&lore.Message{Subject: "[PATCH] t", Body: body}, true)
	})
}
