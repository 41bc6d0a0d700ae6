package bisect

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/rdmabot/rdmabot/internal/testenv"
)

// history is a real repository with merges: each commit adds its own file;
// the culprit adds BROKEN (inherited by every descendant, merges
// included), and "skip" commits cannot be tested.
type history struct {
	dir     string
	good    string
	head    string
	culprit string
	skips   map[string]bool
	commits []string
}

// makeHistory builds n commits on main, with side branches merged back.
func makeHistory(t *testing.T, seed uint64, n int, nskip int) *history {
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	testenv.Git(t, dir, "init", "-q", "-b", "main")
	h := &history{dir: dir, skips: map[string]bool{}}
	date := 1700000000
	seq := 0
	commit := func(broken bool) string {
		seq++
		date += 60
		name := fmt.Sprintf("f%03d", seq)
		os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644)
		if broken {
			os.WriteFile(filepath.Join(dir, "BROKEN"), nil, 0o644)
		}
		testenv.Git(t, dir, "add", "-A")
		d := fmt.Sprintf("%d +0000", date)
		testenv.GitEnv(t, dir, []string{"GIT_AUTHOR_DATE=" + d, "GIT_COMMITTER_DATE=" + d}, "commit", "-q", "-m", name)
		c := testenv.Git(t, dir, "rev-parse", "HEAD")
		h.commits = append(h.commits, c)
		return c
	}
	h.good = commit(false)
	culpritAt := 1 + rng.IntN(n-1)
	made := 0
	for made < n {
		if rng.IntN(3) == 0 && made+3 < n {
			// A side branch from a recent main commit, merged back.
			back := rng.IntN(3)
			testenv.Git(t, dir, "checkout", "-q", "-b", fmt.Sprintf("side%d", made), fmt.Sprintf("HEAD~%d", min(back, made)))
			for k := 0; k < 1+rng.IntN(3) && made < n; k++ {
				commit(made == culpritAt)
				made++
			}
			br := testenv.Git(t, dir, "rev-parse", "--abbrev-ref", "HEAD")
			testenv.Git(t, dir, "checkout", "-q", "main")
			date += 60
			d := fmt.Sprintf("%d +0000", date)
			testenv.GitEnv(t, dir, []string{"GIT_AUTHOR_DATE=" + d, "GIT_COMMITTER_DATE=" + d}, "merge", "-q", "--no-ff", "-m", "merge "+br, br)
			h.commits = append(h.commits, testenv.Git(t, dir, "rev-parse", "HEAD"))
			continue
		}
		commit(made == culpritAt)
		made++
	}
	h.head = testenv.Git(t, dir, "rev-parse", "HEAD")
	h.culprit = testenv.Git(t, dir, "log", "--format=%H", "--diff-filter=A", "--", "BROKEN")
	for len(h.skips) < nskip {
		c := h.commits[1+rng.IntN(len(h.commits)-2)]
		if c != h.culprit && c != h.head {
			h.skips[c] = true
		}
	}
	return h
}

// treeTester judges a commit by its tree, as the bisect run script does.
type treeTester struct {
	repo  *git.Repository
	skips map[string]bool
	n     int
}

func (tt *treeTester) Test(ctx context.Context, commit string) (Outcome, error) {
	tt.n++
	if tt.skips[commit] {
		return Skip, nil
	}
	c, err := tt.repo.CommitObject(plumbing.NewHash(commit))
	if err != nil {
		return "", err
	}
	if _, err := c.File("BROKEN"); err == nil {
		return Bad, nil
	}
	return Good, nil
}

var firstBadRe = regexp.MustCompile(`(?m)^([0-9a-f]{40}) is the first bad commit`)

// gitBisectRun runs the same search with git bisect run and returns its
// culprit and how many commits it tested.
func gitBisectRun(t *testing.T, h *history) (string, int) {
	wt := t.TempDir()
	testenv.Git(t, t.TempDir(), "clone", "-q", h.dir, wt)
	var skipList []string
	for c := range h.skips {
		skipList = append(skipList, c)
	}
	count := filepath.Join(t.TempDir(), "count")
	script := filepath.Join(t.TempDir(), "test.sh")
	os.WriteFile(script, []byte(fmt.Sprintf(`#!/bin/sh
echo x >> %s
c=$(git rev-parse HEAD)
for s in %s; do [ "$s" = "$c" ] && exit 125; done
[ -e BROKEN ] && exit 1
exit 0
`, count, strings.Join(skipList, " "))), 0o755)
	testenv.Git(t, wt, "bisect", "start", h.head, h.good)
	out := testenv.Git(t, wt, "bisect", "run", script)
	m := firstBadRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("git bisect found no culprit:\n%s", out)
	}
	b, _ := os.ReadFile(count)
	return m[1], strings.Count(string(b), "x")
}

// The search agrees with git bisect run on real repositories with merges
// and untestable commits: same culprit, a similar number of tests.
func TestAgainstGitBisectRun(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	totalOurs, totalGit := 0, 0
	for i, tc := range []struct{ n, skips int }{
		{20, 0}, {40, 0}, {60, 3}, {33, 5}, {80, 2}, {25, 4},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			h := makeHistory(t, uint64(i+1), tc.n, tc.skips)
			repo, err := git.PlainOpen(h.dir)
			if err != nil {
				t.Fatal(err)
			}
			tt := &treeTester{repo: repo, skips: h.skips}
			res, err := Run(context.Background(), repo, State{Good: []string{h.good}, Bad: h.head}, tt)
			if err != nil {
				t.Fatal(err)
			}
			gitCulprit, gitSteps := gitBisectRun(t, h)
			if res.Culprit != h.culprit || gitCulprit != h.culprit {
				t.Fatalf("culprit: ours %s, git %s, planted %s", res.Culprit, gitCulprit, h.culprit)
			}
			t.Logf("%d commits, %d skips: %d tests, git bisect %d", len(h.commits), len(h.skips), tt.n, gitSteps)
			if tt.n > gitSteps+2+len(h.skips) {
				t.Errorf("%d tests where git bisect needed %d", tt.n, gitSteps)
			}
			totalOurs += tt.n
			totalGit += gitSteps
		})
	}
	t.Logf("total tests: ours %d, git bisect %d", totalOurs, totalGit)
}

// When only untestable commits separate good from bad, the search says
// which commits remain instead of blaming one.
func TestOnlySkippedLeft(t *testing.T) {
	h := makeHistory(t, 99, 6, 0)
	repo, _ := git.PlainOpen(h.dir)
	// Mark every candidate but the culprit's child chain as skipped by
	// testing with a tester that skips everything.
	skipAll := &treeTester{repo: repo, skips: map[string]bool{}}
	for _, c := range h.commits {
		skipAll.skips[c] = true
	}
	res, err := Run(context.Background(), repo, State{Good: []string{h.good}, Bad: h.head}, skipAll)
	if err != nil {
		t.Fatal(err)
	}
	if res.Culprit != "" || len(res.Candidates) < 2 {
		t.Fatalf("want candidates, got culprit %q candidates %v", res.Culprit, res.Candidates)
	}
	found := false
	for _, c := range res.Candidates {
		found = found || c == h.culprit
	}
	if !found {
		t.Fatalf("culprit %s not among candidates %v", h.culprit, res.Candidates)
	}
}

func TestBadAncestorOfGood(t *testing.T) {
	h := makeHistory(t, 7, 5, 0)
	repo, _ := git.PlainOpen(h.dir)
	if _, err := Next(context.Background(), repo, State{Good: []string{h.head}, Bad: h.good}); err == nil {
		t.Fatal("want an error")
	}
}

// A cancelled context stops the history walk with the context's error.
func TestNextCancelled(t *testing.T) {
	h := makeHistory(t, 7, 20, 0)
	repo, _ := git.PlainOpen(h.dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Next(ctx, repo, State{Good: []string{h.good}, Bad: h.head})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
	if _, err := Next(context.Background(), repo, State{Good: []string{h.good}, Bad: h.head}); err != nil {
		t.Fatalf("the same search with a live context: %v", err)
	}
}
