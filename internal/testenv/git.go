package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Git runs git in dir as the test's own developer, apart from whoever
// runs the test: no system or global configuration, no hooks, author
// and committer "t <t@example.org>". It fails tb when git does and
// returns its standard output, trimmed.
func Git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	return GitEnv(tb, dir, nil, args...)
}

// GitEnv is Git with env added to git's environment (a pinned date,
// another identity); later entries win.
func GitEnv(tb testing.TB, dir string, env []string, args ...string) string {
	tb.Helper()
	cmd := GitCmd(dir, env, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("git %s in %s: %v\n%s%s", strings.Join(args, " "), dir, err, out, stderr.Bytes())
	}
	return strings.TrimSpace(string(out))
}

// GitCmd is the git command Git runs, not yet started, for a test that
// streams through it (stdin, cat-file --batch, fast-import) or reads its
// output untrimmed: the same configuration, hooks and identity. dir ""
// is the test's working directory, and HOME is then a directory of its
// own under the system's temporary one.
func GitCmd(dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", append([]string{"-c", "core.hooksPath=/dev/null"}, args...)...)
	cmd.Dir = dir
	home := dir
	if home == "" {
		home = os.TempDir()
	}
	cmd.Env = append(append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+home,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org"), env...)
	return cmd
}
