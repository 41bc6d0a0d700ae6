package wire

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A cache another user owns is refused at start when QEMU's sandbox (no
// capabilities) could not read it: a 0700 folder of another uid, two
// levels down, or a 0750 one of a group serve is not in; the same
// folder readable by serve's group or by others, one of serve's own
// user, and a cache that does not exist yet are fine.
func TestCheckSandboxReads(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give a folder to another user")
	}
	cache := t.TempDir()
	kernel := filepath.Join(cache, "artifacts", "0123abcd")
	if err := os.MkdirAll(kernel, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := checkSandboxReads(0, []int{0}, cache, filepath.Join(cache, "none-yet")); err != nil {
		t.Fatalf("serve's own cache: %v", err)
	}
	if err := os.Chown(kernel, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err := checkSandboxReads(0, []int{0}, filepath.Join(cache, "artifacts"))
	if err == nil || !strings.Contains(err.Error(), kernel+" belongs to uid 65534 (mode 0700)") || !strings.Contains(err.Error(), "chown -R 0 ") {
		t.Fatalf("a 0700 folder of uid 65534: %v", err)
	}
	if err := os.Chmod(kernel, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := checkSandboxReads(0, []int{0, 65534}, filepath.Join(cache, "artifacts")); err != nil {
		t.Fatalf("a folder serve's group may read: %v", err)
	}
	if err := checkSandboxReads(0, []int{0}, filepath.Join(cache, "artifacts")); err == nil {
		t.Fatal("a folder of another group, 0750: no error")
	}
	if err := os.Chmod(kernel, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkSandboxReads(0, []int{0}, filepath.Join(cache, "artifacts")); err != nil {
		t.Fatalf("a folder others may read: %v", err)
	}
	if err := checkSandboxReads(65534, []int{65534}, filepath.Join(cache, "artifacts")); err == nil {
		t.Fatal("root's 0700 artifacts folder, read by uid 65534: no error")
	}
}
