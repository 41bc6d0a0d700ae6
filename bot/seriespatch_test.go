package bot

import (
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"

	"github.com/rdmabot/rdmabot/flow"
	"github.com/rdmabot/rdmabot/internal/testenv"
)

// seriesPatch numbers a series' commits from its base; what is not a
// straight series on that base is an error, not a guess.
func TestSeriesPatch(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		return testenv.Git(t, dir, args...)
	}
	run("init", "-q", "-b", "master")
	var c []string
	for i := range 4 {
		run("commit", "-q", "--allow-empty", "-m", "c"+string(rune('0'+i)))
		c = append(c, run("rev-parse", "HEAD"))
	}
	run("checkout", "-q", "-b", "side", c[1])
	run("commit", "-q", "--allow-empty", "-m", "side")
	run("checkout", "-q", "master")
	run("merge", "-q", "--no-ff", "-m", "merge", "side")
	merge := run("rev-parse", "HEAD")
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	// base c[0]; the series is c[1], c[2], c[3].
	for i, want := range []int{1, 2, 3} {
		if k, n, err := seriesPatch(repo, c[0], c[3], c[i+1]); err != nil || k != want || n != 3 {
			t.Errorf("patch %d: %d/%d %v", i+1, k, n, err)
		}
	}
	if _, _, err := seriesPatch(repo, c[0], c[3], c[0]); err == nil || !strings.Contains(err.Error(), "not one of the series' commits") {
		t.Errorf("the base itself: %v", err)
	}
	if _, _, err := seriesPatch(repo, c[0], merge, c[3]); err == nil || !strings.Contains(err.Error(), "has 2 parents") {
		t.Errorf("a merge: %v", err)
	}
	if _, _, err := seriesPatch(repo, c[3], c[2], c[2]); err == nil || !strings.Contains(err.Error(), "has 0 parents") {
		t.Errorf("a base not below the head: %v", err)
	}
	if _, _, err := seriesPatch(repo, c[0], strings.Repeat("1", 40), c[1]); !flow.IsInfra(err) {
		t.Errorf("a head not in the store: %v, want INFRA", err)
	}
}

// commitPeople reads who a bisection's report goes to from the culprit
// itself: its author, and the other sign-offs once each.
func TestCommitPeople(t *testing.T) {
	dir := t.TempDir()
	run := func(env []string, args ...string) string {
		t.Helper()
		return testenv.GitEnv(t, dir, env, args...)
	}
	run(nil, "init", "-q", "-b", "master")
	msg := "svcrdma: Add Write chunk WRs to the RPC's Send WR chain\n\nBody.\n\n" +
		"Signed-off-by: Chuck Lever <chuck.lever@oracle.com>\n" +
		"Signed-off-by: not an address\n" +
		"Signed-off-by: Lever, Chuck <CHUCK.LEVER@oracle.com>\n" +
		"Signed-off-by: \"Lastname, Maintainer\" <maint@kernel.org>\n" +
		"Signed-off-by: Jürgen Groß <jg@example.org>\n"
	run([]string{"GIT_AUTHOR_NAME=Chuck Lever", "GIT_AUTHOR_EMAIL=chuck.lever@oracle.com"}, "commit", "-q", "--allow-empty", "-m", msg)
	sha := run(nil, "rev-parse", "HEAD")
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	title, author, signoffs, err := commitPeople(repo, sha)
	if err != nil {
		t.Fatal(err)
	}
	if title != "svcrdma: Add Write chunk WRs to the RPC's Send WR chain" || author != "Chuck Lever <chuck.lever@oracle.com>" {
		t.Errorf("title %q, author %q", title, author)
	}
	want := []string{`"Lastname, Maintainer" <maint@kernel.org>`, "Jürgen Groß <jg@example.org>"}
	if strings.Join(signoffs, "|") != strings.Join(want, "|") {
		t.Errorf("sign-offs %q, want %q", signoffs, want)
	}
	if _, _, _, err := commitPeople(repo, strings.Repeat("1", 40)); err == nil {
		t.Error("a culprit not in the store: no error")
	}
}
