package kbuild

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/rdmabot/rdmabot/internal/flock"
)

// The quick check compiles the changed C file alone, beside a lab boot
// (the heavy lock held) and a build waiting in the slot (the slot's lock
// held), finds a compile error as the full build would, and leaves the
// slot's trusted tree as it was.
func TestCheckCompilesTheChangedFileBesideHeldLocks(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	heavy := filepath.Join(t.TempDir(), "heavy.lock")
	b := newToyBuilder(t, Options{HeavyLock: heavy, Timeout: time.Minute})
	ctx := context.Background()
	base := plumbing.NewHash(gitRun(t, r.dir, "rev-parse", "HEAD^{tree}"))
	if _, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: base, Lab: lab, Trusted: true}); err != nil {
		t.Fatal(err)
	}
	mainOut := filepath.Join(b.opt.Dir, "slots", "default", "out-qemu")
	before, err := os.Stat(filepath.Join(mainOut, "main.o"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{heavy, filepath.Join(b.opt.Dir, "slots", "default", "lock")} {
		release, err := flock.Exclusive(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
	}

	good := r.edit(map[string]string{"init/main.c": "int main(void)\n{\n\treturn 1;\n}\n"})
	res, err := b.Check(ctx, Request{Objects: r.repo.Storer, Tree: good, Lab: lab}, base)
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != "" || len(res.Objects) != 1 || res.Objects[0] != "init/main.o" {
		t.Fatalf("check of a good change: %+v", res)
	}
	if res.Timings.Make <= 0 || res.Timings.Total < res.Timings.Make {
		t.Errorf("timings %+v", res.Timings)
	}
	// It takes only CPU that nothing else wants: a lab boot beside it is
	// not slowed.
	if log, err := os.ReadFile(res.Log); err != nil || !strings.Contains(string(log), "sched: SCHED_IDLE, nice 19") {
		t.Errorf("the check's compile did not run idle: %v\n%s", err, log)
	}

	broken := r.edit(map[string]string{"init/main.c": "int main(void)\n{\n\treturn undeclared_a;\n}\n"})
	_, err = b.Check(ctx, Request{Objects: r.repo.Storer, Tree: broken, Lab: lab}, base)
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("check of a compile error: want *BuildError, got %v", err)
	}
	if be.Target != "init/main.o" || len(be.Diagnostics) != 1 || be.Diagnostics[0].File != "init/main.c" ||
		!strings.Contains(be.Diagnostics[0].Message, "undeclared_a") {
		t.Errorf("build error %+v", be)
	}

	after, err := os.Stat(filepath.Join(mainOut, "main.o"))
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime().Equal(before.ModTime()) {
		t.Error("the check wrote the slot's trusted main.o")
	}
	if _, err := os.Stat(filepath.Join(mainOut, "init", "main.o")); err == nil {
		t.Error("the check's object is in the slot's trusted tree")
	}
}

// Where a check cannot compile what the full build would, the same way,
// it compiles nothing and says why: the full build decides.
func TestCheckSkipsWhatItCannotCompileAsTheBuildWould(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{})
	ctx := context.Background()
	base := plumbing.NewHash(gitRun(t, r.dir, "rev-parse", "HEAD^{tree}"))
	baseCommit := gitRun(t, r.dir, "rev-parse", "HEAD")
	broken := r.edit(map[string]string{"init/main.c": "int main(void) { return undeclared; }\n"})
	check := func(tree plumbing.Hash) string {
		t.Helper()
		res, err := b.Check(ctx, Request{Objects: r.repo.Storer, Tree: tree, Lab: lab}, base)
		if err != nil {
			t.Fatalf("check: %v", err)
		}
		if len(res.Objects) != 0 {
			t.Fatalf("compiled %v, want nothing", res.Objects)
		}
		return res.Skipped
	}
	if got := check(broken); !strings.Contains(got, "not configured") {
		t.Errorf("no trusted build yet: skipped %q", got)
	}
	if _, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: base, Lab: lab, Trusted: true}); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(b.opt.Dir, "slots", "default", "out-qemu")
	writer, err := flock.Exclusive(ctx, out+".lock")
	if err != nil {
		t.Fatal(err)
	}
	if got := check(broken); !strings.Contains(got, "trusted build is writing") {
		t.Errorf("tree being written: skipped %q", got)
	}
	writer()

	cases := map[string]struct {
		files map[string]string
		want  string
	}{
		"docs only":          {map[string]string{"README": "x\n"}, "changes no C file"},
		"a Kconfig changed":  {map[string]string{"Kconfig": "CONFIG_NEW\n", "init/main.c": "int main(void) { return undeclared; }\n"}, "changes Kconfig"},
		"a file not built":   {map[string]string{"init/other.c": "int f(void) { return undeclared; }\n"}, "builds none of the C files"},
		"a makefile changed": {map[string]string{"Makefile": "# a makefile of the series' own\nbzImage:\n", "init/main.c": "int main(void) { return undeclared; }\n"}, "changes Makefile"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			gitRun(t, r.dir, "reset", "-q", "--hard", baseCommit)
			if got := check(r.edit(c.files)); !strings.Contains(got, c.want) {
				t.Errorf("skipped %q, want %q", got, c.want)
			}
		})
	}
	// A C file the series deletes is not compiled: make would find no
	// source and blame the series for a build the full one never makes.
	gitRun(t, r.dir, "reset", "-q", "--hard", baseCommit)
	gitRun(t, r.dir, "rm", "-q", "init/main.c")
	if got := check(r.commit()); !strings.Contains(got, "changes no C file") {
		t.Errorf("a deleted C file: skipped %q", got)
	}
	if _, err := b.Check(ctx, Request{Objects: r.repo.Storer, Tree: broken, Lab: lab, Trusted: true}, base); err == nil {
		t.Error("a trusted tree was checked")
	}

	// A compile past the check's bound (the builder's timeout when it is
	// shorter) holds the check lane no longer, and blames no one.
	quick := newToyBuilder(t, Options{Dir: b.opt.Dir, CCacheDir: b.opt.CCacheDir, Timeout: time.Second})
	gitRun(t, r.dir, "reset", "-q", "--hard", baseCommit)
	slow := r.edit(map[string]string{"SLOW": "", "init/main.c": "int main(void) { return 2; }\n"})
	start := time.Now()
	res, err := quick.Check(ctx, Request{Objects: r.repo.Storer, Tree: slow, Lab: lab}, base)
	if err != nil || len(res.Objects) != 0 || !strings.Contains(res.Skipped, "ran past 1s") {
		t.Errorf("a compile past the bound: %+v, %v", res, err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the check took %v: the bound did not stop it", d)
	}
}

// The idle prefix is probed once: a sandbox where chrt or nice cannot
// run gets none (the check compiles at normal priority), never a check
// that fails for the host's want of a tool.
func TestIdlePrefixIsProbed(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	var ran []string
	ok := func(ctx context.Context, w io.Writer, argv ...string) error { ran = argv; return nil }
	if got := idlePrefix(context.Background(), ok, log); strings.Join(got, " ") != "chrt --idle 0 nice -n 19" || ran[len(ran)-1] != "true" {
		t.Errorf("prefix %q, probe ran %q", got, ran)
	}
	missing := func(ctx context.Context, w io.Writer, argv ...string) error {
		return exec.Command("/nonexistent/chrt").Run()
	}
	if got := idlePrefix(context.Background(), missing, log); got != nil {
		t.Errorf("a sandbox without chrt: prefix %q, want none", got)
	}
}

// A series that changes only comments of the C files it compiles gives
// the base's objects, byte for byte: the check says its code is
// unchanged. A change of code, of another file beside it, or of a
// source some other build command names (a C file another includes)
// is not.
func TestCheckComparesObjectsWithTheBase(t *testing.T) {
	lab := toyLab(t)
	r := newToyRepo(t, lab)
	b := newToyBuilder(t, Options{Timeout: time.Minute})
	ctx := context.Background()
	base := plumbing.NewHash(gitRun(t, r.dir, "rev-parse", "HEAD^{tree}"))
	baseCommit := gitRun(t, r.dir, "rev-parse", "HEAD")
	if _, err := b.Build(ctx, Request{Objects: r.repo.Storer, Tree: base, Lab: lab, Trusted: true}); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(r.dir, "init", "main.c"))
	if err != nil {
		t.Fatal(err)
	}
	commented := strings.Replace(string(src), "{", "{ /* the toy's entry point */", 1)
	mainOut := filepath.Join(b.opt.Dir, "slots", "default", "out-qemu")
	cases := []struct {
		name  string
		files map[string]string
		other bool // another build command names init/main.c
		want  string
	}{
		{"a comment", map[string]string{"init/main.c": commented}, false, ""},
		{"code", map[string]string{"init/main.c": "int main(void)\n{\n\treturn 3;\n}\n"}, false, "init/main.o differs from the base's"},
		{"a comment and a header", map[string]string{"init/main.c": commented, "include/toy.h": "#define TOY 1\n"}, false, "the series changes files other than the C files compiled (include"},
		{"a comment in a file another includes", map[string]string{"init/main.c": commented}, true, "init/main.c is named by init/.other.o.cmd too"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gitRun(t, r.dir, "reset", "-q", "--hard", baseCommit)
			other := filepath.Join(mainOut, "init", ".other.o.cmd")
			if c.other {
				if err := os.WriteFile(other, []byte("cmd_init/other.o := gcc -c -o init/other.o init/other.c\ndeps_init/other.o := init/main.c\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				defer os.Remove(other)
			}
			res, err := b.Check(ctx, Request{Objects: r.repo.Storer, Tree: r.edit(c.files), Lab: lab}, base)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Objects) != 1 || res.Unchanged != (c.want == "") || !strings.Contains(res.Differs, c.want) || (c.want == "") != (res.Differs == "") {
				t.Errorf("check: objects %v, unchanged %v, differs %q; want differs %q", res.Objects, res.Unchanged, res.Differs, c.want)
			}
		})
	}
}
