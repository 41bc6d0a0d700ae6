package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// Git ignores the configuration and hooks of whoever runs the test: a
// global config that would sign every commit with a program that fails,
// and a hook that fails every commit, stop nothing.
func TestGitIgnoresTheUsersSetup(t *testing.T) {
	home := t.TempDir()
	hostile := filepath.Join(home, "gitconfig")
	os.WriteFile(hostile, []byte("[commit]\n\tgpgsign = true\n[gpg]\n\tprogram = false\n[core]\n\thooksPath = "+home+"\n"), 0o644)
	os.WriteFile(filepath.Join(home, "pre-commit"), []byte("#!/bin/sh\nexit 1\n"), 0o755)
	t.Setenv("GIT_CONFIG_GLOBAL", hostile)
	dir := t.TempDir()
	Git(t, dir, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "f"), []byte("x\n"), 0o644)
	Git(t, dir, "add", "f")
	Git(t, dir, "commit", "-q", "-m", "first")
	if who := Git(t, dir, "log", "-1", "--format=%an <%ae> %cn"); who != "t <t@example.org> t" {
		t.Errorf("identity %q", who)
	}
	if who := GitEnv(t, dir, []string{"GIT_AUTHOR_NAME=Dev"}, "var", "GIT_AUTHOR_IDENT"); len(who) < 3 || who[:3] != "Dev" {
		t.Errorf("GitEnv's identity %q", who)
	}
}
