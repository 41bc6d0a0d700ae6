package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Golden reports instead of
// failing the test that checks Golden.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Errorf(format string, args ...any) { r.errs = append(r.errs, format) }
func (r *recorder) Fatalf(format string, args ...any) { r.errs = append(r.errs, format) }

func TestGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "reply.eml")
	r := &recorder{TB: t}
	Golden(r, path, []byte("one"), false)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "creates it") {
		t.Errorf("a missing golden file: %q", r.errs)
	}
	r.errs = nil
	Golden(r, path, []byte("one"), true)
	if b, err := os.ReadFile(path); err != nil || string(b) != "one" || len(r.errs) != 0 {
		t.Errorf("-update wrote %q, %v, %q", b, err, r.errs)
	}
	Golden(r, path, []byte("one"), false)
	if len(r.errs) != 0 {
		t.Errorf("the same bytes: %q", r.errs)
	}
	Golden(r, path, []byte("two"), false)
	if len(r.errs) != 1 || !strings.Contains(r.errs[0], "differs") {
		t.Errorf("other bytes: %q", r.errs)
	}
}
