package builder

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// FetchTimeout bounds one fetch of one tree; FirstFetchTimeout a tree's
// first, which brings its whole history (mainline: several GB).
const (
	FetchTimeout      = 30 * time.Minute
	FirstFetchTimeout = 6 * time.Hour
)

// RunGit is the one place the git program runs: for fetching, where
// go-git indexes a kernel-sized pack in Go several times slower than git
// and holds it in memory, and for what go-git cannot do (revert). Hooks
// are off, the environment is clean (no
// user or system config, no prompts), and the output is captured for the
// error.
func RunGit(ctx context.Context, gitDir string, timeout time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := append([]string{"-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never", "--git-dir", gitDir}, args...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + gitDir,
		"LANG=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false",
		"SSH_ASKPASS=/bin/false",
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.Bytes(), fmt.Errorf("git %s: %w", subcommand(args), ctx.Err())
	}
	if err != nil {
		return out.Bytes(), fmt.Errorf("git %s: %w: %s", subcommand(args), err, lastLines(out.String(), 5))
	}
	return out.Bytes(), nil
}

// subcommand names the git command in args, past the global options
// (-c k=v, --work-tree dir) a caller may put first.
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "--work-tree" || a == "-C":
			i++
		case !strings.HasPrefix(a, "-"):
			return a
		}
	}
	return strings.Join(args, " ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Fetch updates refs/trees/<tree>/<branch> for every branch of t from its
// URL, without tags (a tree's tags would collide with another's).
func (s *Store) Fetch(ctx context.Context, t TreeConfig) error {
	if t.URL == "" {
		return fmt.Errorf("tree %s has no url", t.Name)
	}
	args := []string{"fetch", "--no-tags", "--quiet", "--no-write-fetch-head", t.URL}
	timeout := FetchTimeout
	for _, b := range t.Branches {
		args = append(args, fmt.Sprintf("+refs/heads/%s:%s", b, TreeRef(t.Name, b)))
		if _, err := s.Repository().Reference(TreeRef(t.Name, b), true); err != nil {
			timeout = FirstFetchTimeout
		}
	}
	if _, err := RunGit(ctx, s.Dir, timeout, args...); err != nil {
		return fmt.Errorf("fetch tree %s: %w", t.Name, err)
	}
	return s.reopen()
}

// OnTrees says whether commit is reachable from a configured tree's
// branch (a refs/trees/ head): a base, a mainline head, a bisection step,
// as opposed to an applied series or a commit of unknown origin. One
// rev-list walk: a commit above the heads is listed at once. An error
// (not a commit here) says no.
func (s *Store) OnTrees(ctx context.Context, commit string) bool {
	if len(commit) != 40 || strings.Trim(commit, "0123456789abcdef") != "" {
		return false
	}
	out, err := RunGit(ctx, s.Dir, time.Minute, "rev-list", "-n", "1", commit, "--not", "--glob=refs/trees")
	return err == nil && len(bytes.TrimSpace(out)) == 0
}

// maxGitBundle bounds a series' bundle: a posted series is a few
// commits; more is not worth serving.
const maxGitBundle = 64 << 20

// GitBundle is a git bundle of the commits from base (exclusive) to tip,
// with tip as refs/heads/<branch>: a series applied on its base, which a
// reader fetches into a clone of the base tree
// (git fetch series.bundle <branch>). A temporary ref names tip while
// git writes the bundle.
func (s *Store) GitBundle(ctx context.Context, base, tip, branch string) ([]byte, error) {
	if !plumbing.IsHash(base) || !plumbing.IsHash(tip) {
		return nil, fmt.Errorf("git bundle: %q..%q: want commit ids", base, tip)
	}
	tmp, err := os.MkdirTemp("", "rdmabot-bundle-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	ref := "refs/heads/" + branch
	// The bundle names the refs it was given: a private repository that
	// shares the store's objects holds the one ref, so the store's own
	// refs are never touched.
	repo := filepath.Join(tmp, "repo.git")
	if _, err := RunGit(ctx, repo, time.Minute, "init", "-q", "--bare", repo); err != nil {
		return nil, err
	}
	alt := filepath.Join(s.Dir, "objects") + "\n"
	if err := os.WriteFile(filepath.Join(repo, "objects", "info", "alternates"), []byte(alt), 0o644); err != nil {
		return nil, err
	}
	if _, err := RunGit(ctx, repo, time.Minute, "update-ref", ref, tip); err != nil {
		return nil, err
	}
	out := filepath.Join(tmp, "series.bundle")
	if _, err := RunGit(ctx, repo, 5*time.Minute, "bundle", "create", "-q", out, ref, "^"+base); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() > maxGitBundle {
		return nil, fmt.Errorf("git bundle of %s..%s: missing or over %d MiB (%v)", base, tip, maxGitBundle>>20, err)
	}
	return os.ReadFile(out)
}
