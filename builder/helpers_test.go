package builder

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// gitT runs git in dir with a pinned identity and clock, so commit ids
// made by git and by the builder can be compared.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := gitEnv(dir, nil, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(out)
}

func gitEnv(dir string, extraEnv []string, args ...string) (string, error) {
	// The builder's pinned identities and dates, so commits are the
	// same on every run.
	cmd := testenv.GitCmd(dir, append([]string{
		"LANG=C",
		"TZ=UTC",
		"GIT_AUTHOR_NAME=Test Author",
		"GIT_AUTHOR_EMAIL=author@example.org",
		"GIT_AUTHOR_DATE=2024-01-02T03:04:05Z",
		"GIT_COMMITTER_NAME=rdmabot",
		"GIT_COMMITTER_EMAIL=rdmabot@localhost",
		"GIT_COMMITTER_DATE=2024-06-01T00:00:00Z",
	}, extraEnv...), args...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// sharedDir is ../shared next to the module root, or a skip.
func sharedDir(t testing.TB) string {
	return testenv.Shared(t, "the real-corpus tests read it")
}

func writeFile(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func runCmd(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// testTree opens the store holding the imported 6.12 tree that
// RDMABOT_TEST_TREE names (its bare repository, as printed by
// "rdmabot tree import --name local") and returns its import ref.
func testTree(t testing.TB) (*Store, string) {
	t.Helper()
	dir := os.Getenv("RDMABOT_TEST_TREE")
	if dir == "" {
		t.Skip("RDMABOT_TEST_TREE unset: set it to the store made by " +
			"rdmabot tree import --tarball /usr/src/linux-source-6.12.tar.xz --name local --data-dir D " +
			"(D/trees/kernel.git) to run the tests on the real 6.12 tree")
	}
	st, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	ref := TreeRef("local", ImportBranch).String()
	if _, err := st.Resolve(ref); err != nil {
		t.Fatalf("RDMABOT_TEST_TREE=%s has no %s: %v", dir, ref, err)
	}
	return st, ref
}
