package wire

import (
	"testing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// gitIn runs git in dir as a developer would (testenv.Git), as "Dev".
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return testenv.GitEnv(t, dir, []string{"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.org", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.org"}, args...)
}
