package bwrap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A program in a sandbox made of SystemArgs alone runs (the dynamic
// linker and the shell are there), cannot change the system, and sees
// none of the host's other files.
func TestSystemOnly(t *testing.T) {
	bin, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bwrap is not installed (scripts/setup.sh installs it)")
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := `touch /usr/planted 2>/dev/null && echo planted; ls ` + secret + ` 2>/dev/null && echo seen; cc --version >/dev/null 2>&1 || echo no-cc; echo ran`
	args := append(SystemArgs(), "--unshare-all", "--die-with-parent", "--proc", "/proc", "--dev", "/dev", "sh", "-c", script)
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("bwrap: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	want := []string{"ran"}
	if _, err := exec.LookPath("cc"); err != nil {
		want = []string{"no-cc", "ran"}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("inside the sandbox: %q, want %q (no write to /usr, no host file, the toolchain found)", got, want)
	}
}
